"""Owns the `group-commits` benchmark phase, issue 26's "1,000 consumer groups, each with one member
committing every 5 s: coordinator CPU ≤ 10 % of a core; memory per group stated", and the raw-wire
classic group member it drives (its encoders and decoders are the harness's own, struct-based like
kwire.py: no kbroker code, so the phase loads Kafka or any other broker the same way).

A kbroker of its own, a topic of PARTITIONS partitions, then Scale.commit_groups (1,000; quick 50)
classic consumer groups of one member each, every member on a connection of its own (as a real
deployment has them), all driven by one thread's selectors loop in this process. Each member sends
FindCoordinator v2 (key type group), JoinGroup v5 (protocol type "consumer", protocol "range" with a
ConsumerProtocolSubscription v3 for the topic; the first answer is MEMBER_ID_REQUIRED, the member
joins again with the id it was given), SyncGroup v3 (it leads its group: it assigns itself
partition i % PARTITIONS), and then as a Java consumer with the default settings: Heartbeat v3 every
HEARTBEAT_S (heartbeat.interval.ms) and OffsetCommit v7 of its partition every COMMIT_S
(auto.commit.interval.ms), the offset RECORDS_PER_COMMIT further each time. The members' timers sit
at evenly spread slots of those intervals (member i at i/N of each), on a fixed rate. Every answer's
error codes are checked; any error (or a closed connection) ends the phase with an exception.

Measured, on the broker process (/proc/<pid>, ProcStats):
- RSS with the topic and __consumer_offsets created (a warm-up FindCoordinator), no members;
- RSS with every member connected and its FindCoordinator answered, and the broker's CPU over
  IDLE_S seconds of those idle connections (the baseline the groups add to);
- RSS once every group is Stable and SETTLE_S seconds of heartbeats and commits have passed (every
  group holding a committed offset): memory per group = (this - the first) / groups, and without
  the connection's share (this - the second) / groups; KB = 10^3 bytes;
- over a steady window of Scale.commit_window_s (60 s; quick 10 s): the broker's CPU (utime+stime)
  as % of one core (`coordinator_cpu_pct`, the target), the heartbeats and commits answered in it
  (per member: commits answered, min and max), their latencies as this loop saw them, how late the
  loop fired its timers, and this process's own CPU;
- RSS after the window; then one OffsetFetch v5 per group on its member's connection: the committed
  offset must be the last one its member committed (and acknowledged).
"""

from __future__ import annotations

import collections
import heapq
import resource
import selectors
import shutil
import socket
import struct
import time

from benchmarks import clients, kwire
from benchmarks.broker import OwnBroker, ProcStats
from benchmarks.group_wire import (
    API_NAMES,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    MEMBER_ID_REQUIRED,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PARSERS,
    PROTOCOL,
    RETRIABLE_COORDINATOR,
    SESSION_MS,
    SYNC_GROUP,
    VERSIONS,
    GroupError,
    Reader,
    assignment_v3,
    error_text,
    find_coordinator_v2,
    heartbeat_v3,
    join_group_v5,
    offset_commit_v7,
    offset_fetch_v5,
    parse_find_coordinator_v2,
    subscription_v3,
    sync_group_v3,
)
from benchmarks.phases import Ctx, row

PARTITIONS = 100
HEARTBEAT_S = 3.0            # heartbeat.interval.ms default
COMMIT_S = 5.0               # auto.commit.interval.ms default
RECORDS_PER_COMMIT = 500     # a member consuming 100 records/s: its offset moves 500 per commit
IDLE_S = 10.0                # idle baseline (connections open, no groups); quick: QUICK_IDLE_S
QUICK_IDLE_S = 3.0
SETTLE_S = COMMIT_S + 1.0    # after all are Stable: every member has committed once
# -- the members ---------------------------------------------------------------------------------------
class Member:
    """One group's one member: its connection, the requests in flight on it (answered in order),
    its group state and what it committed."""

    __slots__ = ("commits", "committed", "corr", "fetched", "generation", "group", "heartbeats", "index", "inflight",
                 "member_id", "offset", "partition", "rbuf", "sock", "state", "wbuf", "writing")

    def __init__(self, index: int, group: str, partition: int, sock: socket.socket):
        self.index, self.group, self.partition, self.sock = index, group, partition, sock
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        self.inflight: collections.deque = collections.deque()  # (correlation id, api, sent at, extra)
        self.corr = 0
        self.state = "new"  # new, finding, found, joining, syncing, stable
        self.member_id = ""
        self.generation = -1
        self.offset = 0          # the next offset to commit
        self.committed = -1      # the last commit answered without error
        self.commits = 0         # commits answered without error
        self.heartbeats = 0
        self.fetched: int | None = None  # OffsetFetch's committed offset
        self.writing = False


class Driver:
    """All members over one selectors loop in this thread; timers in a heap."""

    def __init__(self, host: str, port: int, topic: str, groups: list[str]):
        self.host, self.port, self.topic = host, port, topic
        self.sel = selectors.DefaultSelector()
        self.members: list[Member] = []
        self.groups = groups
        self.metadata = subscription_v3(topic)
        self.timers: list[tuple[float, int, int, int]] = []  # (due, seq, api, member index)
        self.seq = 0
        self.ticking = False
        self.origin = 0.0
        self.answered = collections.Counter()  # api -> answers without error
        self.recording = False
        self.latencies: dict[int, list[float]] = {HEARTBEAT: [], OFFSET_COMMIT: []}
        self.max_lag = 0.0
        self.handlers = {FIND_COORDINATOR: self._on_find_coordinator, JOIN_GROUP: self._on_join_group,
                         SYNC_GROUP: self._on_sync_group, HEARTBEAT: self._on_heartbeat,
                         OFFSET_COMMIT: self._on_offset_commit, OFFSET_FETCH: self._on_offset_fetch}

    # -- connections -------------------------------------------------------------------------------
    def connect_all(self) -> None:
        for i, group in enumerate(self.groups):
            sock = socket.create_connection((self.host, self.port), timeout=30)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            m = Member(i, group, i % PARTITIONS, sock)
            self.members.append(m)
            self.sel.register(sock, selectors.EVENT_READ, m)

    def close(self) -> None:
        for m in self.members:
            try:
                self.sel.unregister(m.sock)
            except (KeyError, ValueError):
                pass
            m.sock.close()
        self.sel.close()

    def send(self, m: Member, api: int, body: bytes, extra=None) -> None:
        m.corr += 1
        m.inflight.append((m.corr, api, time.perf_counter(), extra))
        m.wbuf += kwire.request_bytes(api, VERSIONS[api], m.corr, body)
        self._flush(m)

    def _flush(self, m: Member) -> None:
        try:
            sent = m.sock.send(m.wbuf)
        except BlockingIOError:
            sent = 0
        del m.wbuf[:sent]
        want = bool(m.wbuf)
        if want != m.writing:
            m.writing = want
            self.sel.modify(m.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0), m)

    def _readable(self, m: Member) -> None:
        try:
            data = m.sock.recv(65536)
        except BlockingIOError:
            return
        if not data:
            raise GroupError(f"{m.group}: connection closed by the broker ({len(m.inflight)} requests in flight"
                             f"{', first ' + API_NAMES[m.inflight[0][1]] if m.inflight else ''})")
        m.rbuf += data
        while len(m.rbuf) >= 4:
            (size,) = struct.unpack_from(">i", m.rbuf, 0)
            if len(m.rbuf) < 4 + size:
                break
            frame = bytes(m.rbuf[4:4 + size])
            del m.rbuf[:4 + size]
            self._answer(m, frame)

    def _answer(self, m: Member, frame: bytes) -> None:
        now = time.perf_counter()
        if not m.inflight:
            raise GroupError(f"{m.group}: an answer with nothing in flight")
        corr, api, sent_at, extra = m.inflight.popleft()
        (got,) = struct.unpack_from(">i", frame, 0)
        if got != corr:
            raise GroupError(f"{m.group}: {API_NAMES[api]} answer with correlation id {got}, expected {corr}")
        try:
            body = PARSERS[api](Reader(frame, 4))
        except (struct.error, UnicodeDecodeError) as exc:
            raise GroupError(f"{m.group}: {API_NAMES[api]} v{VERSIONS[api]} answer does not decode: {exc!r} "
                             f"({frame[:64].hex()})") from exc
        if self.recording and api in self.latencies:
            self.latencies[api].append(now - sent_at)
        self.handlers[api](m, body, extra)
        self.answered[api] += 1

    def _fail(self, m: Member, api: int, what: str) -> None:
        raise GroupError(f"{m.group} (member {m.index}, state {m.state}): {API_NAMES[api]} v{VERSIONS[api]}: {what}")

    # -- the answers ---------------------------------------------------------------------------------
    def _on_find_coordinator(self, m: Member, body: dict, _extra) -> None:
        if body["error"]:
            self._fail(m, FIND_COORDINATOR, f"error {error_text(body['error'])}: {body['message']}")
        if body["port"] != self.port:
            self._fail(m, FIND_COORDINATOR, f"coordinator {body['host']}:{body['port']} is not the broker "
                                             f"{self.host}:{self.port}")
        m.state = "found"

    def join(self, m: Member) -> None:
        m.state = "joining"
        self.send(m, JOIN_GROUP, join_group_v5(m.group, m.member_id, self.metadata))

    def _on_join_group(self, m: Member, body: dict, _extra) -> None:
        if body["error"] == MEMBER_ID_REQUIRED and not m.member_id and body["member_id"]:
            m.member_id = body["member_id"]  # KIP-394: join again with the id the coordinator gave
            self.join(m)
            return
        if body["error"]:
            self._fail(m, JOIN_GROUP, f"error {error_text(body['error'])}")
        if body["member_id"] != m.member_id or body["leader"] != m.member_id:
            self._fail(m, JOIN_GROUP, f"member {body['member_id']!r}, leader {body['leader']!r}: expected both "
                                      f"{m.member_id!r}")
        if body["protocol"] != PROTOCOL:
            self._fail(m, JOIN_GROUP, f"protocol {body['protocol']!r}, expected {PROTOCOL!r}")
        if [(mid, meta) for mid, _, meta in body["members"]] != [(m.member_id, self.metadata)]:
            self._fail(m, JOIN_GROUP, f"members {body['members']!r}: expected this one with its subscription")
        m.generation = body["generation"]
        m.state = "syncing"
        assignment = assignment_v3(self.topic, m.partition)
        self.send(m, SYNC_GROUP, sync_group_v3(m.group, m.generation, m.member_id, assignment), assignment)

    def _on_sync_group(self, m: Member, body: dict, assignment: bytes) -> None:
        if body["error"]:
            self._fail(m, SYNC_GROUP, f"error {error_text(body['error'])}")
        if body["assignment"] != assignment:
            self._fail(m, SYNC_GROUP, f"assignment {body['assignment']!r}, expected {assignment!r}")
        m.state = "stable"
        if self.ticking:
            self._start_timers(m)

    def _on_heartbeat(self, m: Member, body: dict, _extra) -> None:
        if body["error"]:
            self._fail(m, HEARTBEAT, f"error {error_text(body['error'])}")
        m.heartbeats += 1

    def _on_offset_commit(self, m: Member, body: dict, offset: int) -> None:
        if body["partitions"] != [(self.topic, m.partition, 0)]:
            errors = ", ".join(error_text(e) for _, _, e in body["partitions"] if e)
            self._fail(m, OFFSET_COMMIT, f"answer {body['partitions']!r} (topic, partition, error) for offset "
                                         f"{offset}{': error ' + errors if errors else ''}: expected "
                                         f"[({self.topic!r}, {m.partition}, 0)]")
        m.committed = offset
        m.commits += 1

    def _on_offset_fetch(self, m: Member, body: dict, _extra) -> None:
        if body["error"] or len(body["partitions"]) != 1 or body["partitions"][0][:2] != (self.topic, m.partition) \
                or body["partitions"][0][3]:
            self._fail(m, OFFSET_FETCH, f"answer {body!r} (partitions: topic, partition, offset, error): expected "
                                        f"no error and [({self.topic!r}, {m.partition}, ...)]")
        m.fetched = body["partitions"][0][2]

    # -- timers --------------------------------------------------------------------------------------
    def _slot(self, m: Member, interval: float, share: float) -> float:
        """The first time after now on member m's fixed-rate slot: origin + (i + share) / N of the
        interval, plus whole intervals."""
        n = len(self.members)
        first = self.origin + (m.index + share) / n * interval
        now = time.perf_counter()
        if first > now:
            return first
        return first + (int((now - first) / interval) + 1) * interval

    def _push(self, due: float, api: int, m: Member) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (due, self.seq, api, m.index))

    def _start_timers(self, m: Member) -> None:
        self._push(self._slot(m, HEARTBEAT_S, 0.0), HEARTBEAT, m)
        self._push(self._slot(m, COMMIT_S, 0.5), OFFSET_COMMIT, m)  # half a slot off the heartbeats

    def start_ticking(self) -> None:
        """From now on, each member heartbeats and commits from the moment it is Stable."""
        self.ticking = True
        self.origin = time.perf_counter()
        for m in self.members:
            if m.state == "stable":
                self._start_timers(m)

    def stop_ticking(self) -> None:
        self.ticking = False
        self.timers.clear()

    def _fire(self, now: float) -> None:
        while self.timers and self.timers[0][0] <= now:
            due, _, api, index = heapq.heappop(self.timers)
            m = self.members[index]
            if self.recording:
                self.max_lag = max(self.max_lag, now - due)
            if api == HEARTBEAT:
                self.send(m, HEARTBEAT, heartbeat_v3(m.group, m.generation, m.member_id))
                self._push(due + HEARTBEAT_S, HEARTBEAT, m)
            else:
                m.offset += RECORDS_PER_COMMIT
                self.send(m, OFFSET_COMMIT, offset_commit_v7(m.group, m.generation, m.member_id, self.topic,
                                                             m.partition, m.offset), m.offset)
                self._push(due + COMMIT_S, OFFSET_COMMIT, m)

    # -- the loop ------------------------------------------------------------------------------------
    def run(self, seconds: float | None = None, until=None, timeout: float = 120.0, what: str = "") -> float:
        """Serve the sockets and timers for `seconds`, or until `until()` is true (GroupError after
        `timeout`). Returns the seconds it ran."""
        t0 = time.perf_counter()
        end = t0 + (seconds if seconds is not None else timeout)
        while True:
            now = time.perf_counter()
            if until is not None and until():
                return now - t0
            if now >= end:
                if until is None:
                    return now - t0
                raise GroupError(f"{what}: not done after {timeout:.0f} s")
            self._fire(now)
            wait = min(end - now, 0.5, (self.timers[0][0] - now) if self.timers else 0.5)
            for key, mask in self.sel.select(max(0.0, wait)):
                m = key.data
                if mask & selectors.EVENT_WRITE:
                    self._flush(m)
                if mask & selectors.EVENT_READ:
                    self._readable(m)

    def drained(self) -> bool:
        return all(not m.inflight for m in self.members)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def warm_up(host: str, port: int, group: str, timeout: float = 60.0) -> None:
    """One FindCoordinator on a blocking socket, retried while __consumer_offsets is being created."""
    deadline = time.perf_counter() + timeout
    with socket.create_connection((host, port), timeout=30) as sock:
        corr = 0
        while True:
            corr += 1
            sock.sendall(kwire.request_bytes(FIND_COORDINATOR, 2, corr, find_coordinator_v2(group)))
            frame = kwire.read_response(sock)
            body = parse_find_coordinator_v2(Reader(frame, 4))
            if body["error"] == 0:
                return
            if body["error"] not in RETRIABLE_COORDINATOR or time.perf_counter() > deadline:
                raise GroupError(f"warm-up FindCoordinator: error {error_text(body['error'])}: {body['message']}")
            time.sleep(0.2)


def _rss(stats: ProcStats) -> float:
    mem = stats.memory_mb()
    if "rss_mb" not in mem:
        raise GroupError("broker process gone (no /proc status)")
    return mem["rss_mb"]


def measure(ctx: Ctx, broker: OwnBroker) -> dict:
    n = ctx.scale.commit_groups
    window_s = ctx.scale.commit_window_s
    idle_s = QUICK_IDLE_S if window_s < 30 else IDLE_S
    wait_s = max(120.0, ctx.max_seconds)
    stats = broker.stats()
    host, port = broker.bootstrap.rsplit(":", 1)
    port = int(port)
    topic = f"bench-{ctx.run_id}-group-commits"
    clients.create_topics(broker.bootstrap, [(topic, PARTITIONS, {"file.delete.delay.ms": "0"})])
    warm_up(host, port, f"bench-{ctx.run_id}-gc-warmup")
    time.sleep(1.0)
    m: dict = {"groups": n, "partitions": PARTITIONS, "heartbeat_s": HEARTBEAT_S, "commit_s": COMMIT_S,
               "session_timeout_s": SESSION_MS / 1000, "window_s": window_s, "rss_before_mb": _rss(stats)}
    driver = Driver(host, port, topic, [f"bench-{ctx.run_id}-gc-{i:04d}" for i in range(n)])
    try:
        t0 = time.perf_counter()
        driver.connect_all()
        for member in driver.members:
            member.state = "finding"
            driver.send(member, FIND_COORDINATOR, find_coordinator_v2(member.group))
        driver.run(until=lambda: all(x.state == "found" for x in driver.members), timeout=wait_s,
                   what="FindCoordinator of every member")
        m["connect_s"] = time.perf_counter() - t0
        time.sleep(1.0)
        m["rss_connected_mb"] = _rss(stats)
        # idle baseline: every connection open, no group yet
        cpu0 = stats.cpu_seconds()
        t0 = time.perf_counter()
        time.sleep(idle_s)
        m["idle_cpu_pct"] = (stats.cpu_seconds() - cpu0) / (time.perf_counter() - t0) * 100
        # join: all at once; each starts its heartbeats and commits once Stable
        t0 = time.perf_counter()
        driver.start_ticking()
        for member in driver.members:
            driver.join(member)
        driver.run(until=lambda: all(x.state == "stable" for x in driver.members), timeout=wait_s,
                   what="every group Stable")
        m["all_stable_s"] = time.perf_counter() - t0
        generations = {x.generation for x in driver.members}
        m["generations"] = ", ".join(str(g) for g in sorted(generations))
        driver.run(seconds=SETTLE_S)
        if any(x.commits == 0 for x in driver.members):
            raise GroupError(f"{sum(x.commits == 0 for x in driver.members)} members have not committed "
                             f"{SETTLE_S:.0f} s after all were Stable")
        m["rss_stable_mb"] = _rss(stats)
        # the steady window
        commits0 = [x.commits for x in driver.members]
        answered0 = dict(driver.answered)
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = stats.cpu_times()
        t0 = time.perf_counter()
        driver.recording = True
        driver.run(seconds=window_s)
        driver.recording = False
        secs = time.perf_counter() - t0
        cpu1 = stats.cpu_times()
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        if cpu0 is None or cpu1 is None:
            raise GroupError(f"broker process gone during the window:\n{broker.log_tail()}")
        heartbeats = driver.answered[HEARTBEAT] - answered0.get(HEARTBEAT, 0)
        commits = driver.answered[OFFSET_COMMIT] - answered0.get(OFFSET_COMMIT, 0)
        per_member = [x.commits - c for x, c in zip(driver.members, commits0)]
        broker_cpu = (cpu1[0] - cpu0[0]) + (cpu1[1] - cpu0[1])
        client_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        m.update({
            "seconds": secs, "heartbeats": heartbeats, "commits": commits,
            "expected_commits": n * window_s / COMMIT_S, "expected_heartbeats": n * window_s / HEARTBEAT_S,
            "requests_s": (heartbeats + commits) / secs,
            "commits_per_member_min": min(per_member), "commits_per_member_max": max(per_member),
            "broker_cpu_s": broker_cpu, "broker_user_s": cpu1[0] - cpu0[0], "broker_sys_s": cpu1[1] - cpu0[1],
            "coordinator_cpu_pct": broker_cpu / secs * 100,
            "broker_us_per_request": broker_cpu / (heartbeats + commits) * 1e6 if heartbeats + commits else None,
            "client_cpu_s": client_cpu, "client_cpu_pct": client_cpu / secs * 100,
            "commit_p50_ms": _pct(driver.latencies[OFFSET_COMMIT], 0.5),
            "commit_p99_ms": _pct(driver.latencies[OFFSET_COMMIT], 0.99),
            "commit_max_ms": _pct(driver.latencies[OFFSET_COMMIT], 1.0),
            "heartbeat_p50_ms": _pct(driver.latencies[HEARTBEAT], 0.5),
            "heartbeat_p99_ms": _pct(driver.latencies[HEARTBEAT], 0.99),
            "timer_max_lag_ms": driver.max_lag * 1000,
        })
        if min(per_member) < int(window_s / COMMIT_S):
            raise GroupError(f"a member had only {min(per_member)} commits answered in the {secs:.1f} s window "
                             f"(every {COMMIT_S:.0f} s: at least {int(window_s / COMMIT_S)} expected)")
        # after the window: no new requests; every answer in; then each group's committed offset
        driver.stop_ticking()
        driver.run(until=driver.drained, timeout=60, what="the last answers")
        time.sleep(1.0)
        m["rss_after_window_mb"] = _rss(stats)
        for member in driver.members:
            driver.send(member, OFFSET_FETCH, offset_fetch_v5(member.group, topic, member.partition))
        driver.run(until=driver.drained, timeout=wait_s, what="OffsetFetch of every group")
        wrong = [(x.group, x.committed, x.fetched) for x in driver.members if x.fetched != x.committed]
        if wrong:
            raise GroupError(f"{len(wrong)} groups' committed offsets differ from what their members committed "
                             f"(group, committed, fetched), first: {wrong[:5]}")
        m["offsets_verified"] = len(driver.members)
        m["last_offset_min"] = min(x.committed for x in driver.members)
    finally:
        driver.close()
    m["kb_per_group"] = (m["rss_stable_mb"] - m["rss_before_mb"]) * 1000 / n
    m["kb_per_group_without_connection"] = (m["rss_stable_mb"] - m["rss_connected_mb"]) * 1000 / n
    m["kb_per_connection"] = (m["rss_connected_mb"] - m["rss_before_mb"]) * 1000 / n
    m["kb_per_group_after_window"] = (m["rss_after_window_mb"] - m["rss_before_mb"]) * 1000 / n
    m["errors"] = 0
    m.update(stats.memory_mb())  # rss_mb, peak_rss_mb: the table's RSS column
    return m


def phase_group_commits(ctx: Ctx) -> list[dict]:
    n = ctx.scale.commit_groups
    broker = OwnBroker(ctx.base, "group-commits", list(ctx.overrides), ctx.log_level)
    ctx.side_brokers.append(broker)
    broker.start()
    try:
        m = measure(ctx, broker)
        if not broker.alive():
            raise RuntimeError(f"group-commits broker died:\n{broker.log_tail()}")
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    return [row(f"group-commits.{n}", "group-commits",
                f"{n:,} classic groups x 1 member: commit every {COMMIT_S:.0f} s, heartbeat every {HEARTBEAT_S:.0f} s",
                "group-commits", m)]
