"""Owns the `groups` benchmark phase: consumer-group rebalances, classic and KIP-848 (docs/groups.md).

1. **Rebalance** (one kbroker of its own, GROUP_OVERRIDES): for classic eager `range`, classic
   `cooperative-sticky` and the consumer protocol (`group.protocol=consumer`, the broker's
   `uniform` assignor), each on a fresh topic of PARTITIONS partitions and a fresh group: a steady
   producer (RATE records/s of SIZE bytes round-robin over the partitions, each value carrying its
   send time) and three confluent-kafka members, each a process of its own
   (benchmarks/group_member.py, printing every assignment change and every record received with a
   wall-clock time). Once the three share the partitions and STEADY_S seconds (and a random part of
   a heartbeat interval) have passed, a 4th member subscribes ("join"); once every partition is
   owned again, balanced over the four (no partition twice), and as long again, one of the first
   three is SIGKILLed ("kill"); then until the three left own every partition again. Per event: the
   seconds from the
   event (the newcomer's subscribe() call; the kill) until every partition is owned again; for the
   partitions that did not move (the same member owns them just before the event and once the
   rebalance is done): the longest gap between new records received (over the event's window
   from 1 s before to 2 s after the rebalance is done; beside it the longest time in that window
   in which no partition at all received anything, a stall of the whole pipeline or the machine
   rather than of the rebalance) and their records/s during the rebalance
   (event to done, at least 1 s) next to the STEADY_S seconds before. A SIGKILLed member is noticed
   when its session times out: kill-to-owned is a session timeout by design.
2. **Heartbeat CPU** (another kbroker of its own, CPU_OVERRIDES): CPU_MEMBERS simulated members of
   one consumer-protocol group subscribe to a topic of CPU_PARTITIONS partitions over raw
   ConsumerGroupHeartbeat v1 requests (kbroker.wire.protocol's codec), pipelined over CPU_SOCKETS
   connections. All join (epoch 0), then heartbeat in rounds, each reporting as owned what its last
   answer assigned, until the group is reconciled (every member at the group's epoch with its
   share); then steady-state heartbeats as clients send them (member id and epoch, no other field),
   in CPU_SLICES slices of CPU_ROUNDS rounds, and the same with the owned partitions listed in each.
   The broker process's CPU (/proc/<pid>/stat) over the heartbeats answered, per phase; and in this
   process, what kbroker.group.consumer_protocol.heartbeat alone costs on a state built the same
   way (`python -m benchmarks.groups --profile` prints its cProfile).
"""

from __future__ import annotations

import base64
import cProfile
import io
import itertools
import json
import os
import pstats
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from benchmarks import clients
from benchmarks.broker import REPO_ROOT, OwnBroker
from benchmarks.phases import Ctx, Meter, row

# -- 1. rebalance ------------------------------------------------------------------------------------
PARTITIONS = 12
RATE = 600.0             # records/s from the producer: 50/s per partition, one every 20 ms
SIZE = 100
STEADY_S = 5.0           # seconds of steady consumption before each event (the "before" window)
HEARTBEAT_MS = 1000      # group.consumer.heartbeat.interval.ms; classic members' heartbeat.interval.ms
SESSION_MS = 6000        # group.consumer.session.timeout.ms; classic members' session.timeout.ms
FETCH_WAIT_MS = 500      # the members' fetch.wait.max.ms (librdkafka's default): the gap target is 2x
INITIAL_DELAY_MS = 0     # group.initial.rebalance.delay.ms (applies to the first rebalance of an empty group)
GROUP_OVERRIDES = [f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
                   f"group.consumer.min.heartbeat.interval.ms={HEARTBEAT_MS}",
                   f"group.consumer.session.timeout.ms={SESSION_MS}",
                   f"group.consumer.min.session.timeout.ms={SESSION_MS}",
                   f"group.initial.rebalance.delay.ms={INITIAL_DELAY_MS}"]
PROTOCOLS = (("range", "classic", "range"), ("cooperative", "classic", "cooperative-sticky"),
             ("consumer", "consumer", None))  # (label, group.protocol, partition.assignment.strategy)
MEMBER_SCRIPT = Path(__file__).resolve().parent / "group_member.py"
PHASE = random.Random()
MEMBER_EXTRA: list[str] = []  # extra group_member.py arguments (e.g. ["--debug", "fetch,cgrp"] to diagnose)

# -- 2. heartbeat CPU --------------------------------------------------------------------------------
CPU_MEMBERS = 1000
CPU_PARTITIONS = 2000
CPU_SOCKETS = 4
CPU_ROUNDS = 10          # rounds (every member one heartbeat) per steady-state slice
CPU_SLICES = 3
CPU_SESSION_MS = 300_000  # long enough for the joins of 1,000 members (each a new target assignment)
CPU_OVERRIDES = [f"group.consumer.session.timeout.ms={CPU_SESSION_MS}",
                 f"group.consumer.max.session.timeout.ms={CPU_SESSION_MS}"]
HEARTBEAT, HB_VERSION = 68, 1
REBALANCE_TIMEOUT_MS = 300_000


# =====================================================================================================
# 1. rebalance
# =====================================================================================================
class Child:
    """A child process of group_member.py, its output read by a thread: JSON events and `R` record lines."""

    def __init__(self, name: str, args: list[str], log_dir: Path):
        self.name = name
        self.events: list[dict] = []
        self.records: list[tuple[int, int, float, float]] = []  # (partition, offset, time, latency ms)
        self.stderr = open(log_dir / f"{name}.stderr", "wb")  # noqa: SIM115 - the child's, closed in stop()
        self.proc = subprocess.Popen([sys.executable, str(MEMBER_SCRIPT), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, cwd=REPO_ROOT, text=True,
                                     bufsize=1, start_new_session=True)
        self.killed_at: float | None = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("R "):
                _, p, off, t, lat = line.split()
                self.records.append((int(p), int(off), float(t), float(lat)))
            elif line.startswith("{"):
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    pass

    def event(self, name: str, timeout: float) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for e in list(self.events):
                if e.get("event") == name:
                    return e
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) before {name!r}")
            time.sleep(0.01)
        raise TimeoutError(f"{self.name}: no {name!r} within {timeout:.0f} s")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def kill(self) -> float:
        t = time.time()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.killed_at = t
        return t

    def assignments(self) -> list[tuple[float, frozenset[int]]]:
        return [(e["t"], frozenset(e["partitions"])) for e in list(self.events) if e.get("event") == "assigned"]

    def owned_at(self, t: float) -> frozenset[int]:
        if self.killed_at is not None and t >= self.killed_at:
            return frozenset()
        owned: frozenset[int] = frozenset()
        for et, parts in self.assignments():
            if et > t:
                break
            owned = parts
        return owned

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.thread.join(5)
        self.stderr.close()


def settled_at(members: list[Child], after: float) -> float | None:
    """The first time after `after` at which `members` own every partition between them, balanced
    (within one partition of each other), none twice; None if not yet."""
    times = sorted({t for m in members for t, _ in m.assignments() if t > after})
    for t in times:
        owned = [m.owned_at(t) for m in members]
        counts = [len(o) for o in owned]
        union = frozenset().union(*owned)
        if len(union) == PARTITIONS and sum(counts) == PARTITIONS and max(counts) - min(counts) <= 1:
            return t
    return None


def wait_settled(members: list[Child], after: float, timeout: float) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        t = settled_at(members, after)
        if t is not None:
            return t
        for m in members:
            if m.proc.poll() is not None and m.killed_at is None:
                raise RuntimeError(f"member {m.name} exited ({m.proc.returncode})")
        time.sleep(0.05)
    state = {m.name: sorted(m.owned_at(time.time())) for m in members}
    raise TimeoutError(f"partitions not owned again within {timeout:.0f} s: {state}")


class Progress:
    """Per partition, the times new records arrived (offsets past any received before, by any member)."""

    def __init__(self, members: list[Child]):
        recs = sorted(((*r, m.name) for m in members for r in list(m.records)), key=lambda r: r[2])
        self.advances: dict[int, list[tuple[float, int, float]]] = {p: [] for p in range(PARTITIONS)}
        self.readers: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}  # who received each advance
        top = {p: -1 for p in range(PARTITIONS)}
        for p, off, t, lat, name in recs:
            if off > top[p]:
                top[p] = off
                self.advances[p].append((t, off, lat))
                self.readers[p].append(name)

    def trace(self) -> dict:
        return {p: [(round(t, 4), off, lat, who) for (t, off, lat), who in zip(self.advances[p], self.readers[p])]
                for p in range(PARTITIONS)}

    def top_at(self, p: int, t: float) -> int:
        best = -1
        for at, off, _ in self.advances[p]:
            if at > t:
                break
            best = off
        return best

    def count(self, parts, t0: float, t1: float) -> int:
        return sum(max(0, self.top_at(p, t1) - self.top_at(p, t0)) for p in parts)

    def longest_gap(self, parts, t0: float, t1: float) -> float:
        worst = 0.0
        for p in parts:
            times = [t0] + [t for t, _, _ in self.advances[p] if t0 <= t <= t1] + [t1]
            worst = max(worst, max(b - a for a, b in itertools.pairwise(times)))
        return worst

    def longest_silence(self, t0: float, t1: float) -> float:
        """The longest time between t0 and t1 in which no partition at all received a new record (a
        stall of the producer, the broker or the machine, not of one member)."""
        times = sorted([t0, t1] + [t for p in self.advances for t, _, _ in self.advances[p] if t0 <= t <= t1])
        return max(b - a for a, b in itertools.pairwise(times))

    def max_latency_ms(self, parts, t0: float, t1: float) -> float | None:
        lats = [lat for p in parts for t, _, lat in self.advances[p] if t0 <= t <= t1]
        return max(lats) if lats else None

    def flowing_at(self, parts, t: float) -> float | None:
        """When every partition of `parts` had received a record newer than what it had at `t`."""
        worst = t
        for p in parts:
            top = self.top_at(p, t)
            nxt = next((at for at, off, _ in self.advances[p] if at > t and off > top), None)
            if nxt is None:
                return None
            worst = max(worst, nxt)
        return worst


def event_figures(progress: Progress, before: list[Child], after: list[Child], event_t: float,
                  done_t: float) -> dict:
    """The figures of one rebalance: `before` owned the partitions just before `event_t`, `after`
    own them all again from `done_t`."""
    owner_before = {p: m.name for m in before for p in m.owned_at(event_t - 1e-6)}
    owner_after = {p: m.name for m in after for p in m.owned_at(done_t)}
    unmoved = sorted(p for p in range(PARTITIONS) if p in owner_before and owner_before[p] == owner_after.get(p))
    during_end = max(done_t, event_t + 1.0)
    rate_before = progress.count(unmoved, event_t - STEADY_S, event_t) / STEADY_S
    rate_during = progress.count(unmoved, event_t, during_end) / (during_end - event_t)
    flowing = progress.flowing_at(range(PARTITIONS), done_t)
    return {
        "owned_s": done_t - event_t,
        "unmoved_partitions": len(unmoved),
        "moved_partitions": PARTITIONS - len(unmoved),
        "max_gap_s": progress.longest_gap(unmoved, event_t - 1.0, done_t + 2.0) if unmoved else None,
        "baseline_max_gap_s": progress.longest_gap(unmoved, event_t - STEADY_S, event_t - 1.0) if unmoved else None,
        "all_partitions_silent_s": progress.longest_silence(event_t - 1.0, done_t + 2.0),
        "unmoved_records_s_before": rate_before,
        "unmoved_records_s_during": rate_during,
        "ratio_during_to_before": rate_during / rate_before if rate_before else None,
        "unmoved_max_latency_ms": progress.max_latency_ms(unmoved, event_t, done_t + 2.0),
        "all_flowing_s": None if flowing is None else flowing - event_t,
    }


def rebalance_run(ctx: Ctx, broker: OwnBroker, label: str, protocol: str, strategy: str | None) -> list[dict]:
    topic = f"bench-{ctx.run_id}-groups-{label}"
    group = f"bench-{ctx.run_id}-group-{label}"
    clients.create_topics(broker.bootstrap, [(topic, PARTITIONS, {"file.delete.delay.ms": "0"})])
    logs = broker.dir / f"children-{label}"
    logs.mkdir(parents=True, exist_ok=True)
    member_args = ["--group", group, "--group-protocol", protocol, "--session-ms", str(SESSION_MS),
                   "--heartbeat-ms", str(HEARTBEAT_MS), "--fetch-wait-ms", str(FETCH_WAIT_MS)]
    if strategy:
        member_args += ["--strategy", strategy]
    member_args += MEMBER_EXTRA
    children: list[Child] = []
    try:
        producer = Child("producer", ["producer", broker.bootstrap, topic, "--rate", str(RATE), "--partitions",
                                      str(PARTITIONS), "--size", str(SIZE)], logs)
        children.append(producer)
        members = [Child(f"m{i}", ["member", broker.bootstrap, topic, "--name", str(i), *member_args], logs)
                   for i in range(4)]
        children += members
        producer.event("producing", 60)
        for m in members:
            m.event("ready", 60)
        start = time.time()
        for m in members[:3]:
            m.go()
        first = wait_settled(members[:3], start, 60)
        # a random phase against the members' heartbeats (which follow their last rebalance), so the
        # repeats sample join-to-owned (and kill-to-owned) over the heartbeat interval
        join_phase = PHASE.uniform(0, HEARTBEAT_MS / 1000)
        time.sleep(STEADY_S + join_phase)
        members[3].go()
        join_t = members[3].event("subscribed", 10)["t"]
        join_done = wait_settled(members, join_t, 60)
        kill_phase = PHASE.uniform(0, HEARTBEAT_MS / 1000)
        time.sleep(max(0.0, join_done + STEADY_S + kill_phase - time.time()))
        kill_t = members[0].kill()
        kill_done = wait_settled(members[1:], kill_t, SESSION_MS / 1000 + 60)
        time.sleep(3.0)
        producer.stop(30)
        produced = next((e for e in producer.events if e.get("event") == "produced"), {})
    finally:
        for c in children:
            c.stop()
    progress = Progress(members)
    trace = {"join_t": join_t, "join_done": join_done, "kill_t": kill_t, "kill_done": kill_done,
             "assignments": {m.name: m.assignments() for m in members}, "advances": progress.trace()}
    (logs / "trace.json").write_text(json.dumps(trace, default=sorted))
    join = {**event_figures(progress, members[:3], members, join_t, join_done), "phase_offset_s": join_phase}
    kill = {**event_figures(progress, members, members[1:], kill_t, kill_done), "phase_offset_s": kill_phase}
    common = {"protocol": protocol, "strategy": strategy or "uniform (broker)", "heartbeat_s": HEARTBEAT_MS / 1000,
              "session_timeout_s": SESSION_MS / 1000, "fetch_wait_max_s": FETCH_WAIT_MS / 1000,
              "gap_target_s": 2 * FETCH_WAIT_MS / 1000, "first_settled_s": first - start,
              "produced": produced.get("sent"), "produce_errors": produced.get("errors"),
              "producer_max_send_gap_s": produced.get("max_send_gap_s")}
    what = {"range": "classic, eager range", "cooperative": "classic, cooperative-sticky",
            "consumer": "group.protocol=consumer (uniform)"}[label]
    return [row(f"groups.join.{label}", "groups", f"{what}: 4th member joins", "rebalance",
                {**common, **join, "event": "join", "owned_target_s": HEARTBEAT_MS / 1000 + 0.5}),
            row(f"groups.kill.{label}", "groups", f"{what}: a member SIGKILLed", "rebalance",
                {**common, **kill, "event": "kill"})]


# =====================================================================================================
# 2. heartbeat CPU: simulated members over the raw protocol
# =====================================================================================================
def member_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class SimMember:
    def __init__(self, index: int):
        self.index = index
        self.member_id = member_id()
        self.epoch = 0
        self.owned: list[int] = []
        self.error = 0


class HeartbeatSim:
    """CPU_MEMBERS members of `group` over `sockets` connections; member i talks on socket i % sockets."""

    def __init__(self, host: str, port: int, group: str, topic: str, n: int, sockets: int):
        from kbroker.wire.protocol import decode_response, encode_request

        self.encode, self.decode = encode_request, decode_response
        self.group, self.topic = group, topic
        self.members = [SimMember(i) for i in range(n)]
        self.socks = []
        for _ in range(sockets):
            s = socket.create_connection((host, port), timeout=120)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks.append(s)
        self.topic_id: uuid.UUID | None = None
        self.answered = 0
        self.errors = 0
        self.first_error: str | None = None
        self.assignments_sent = 0  # answers that carried an assignment

    def close(self) -> None:
        for s in self.socks:
            s.close()

    def body(self, m: SimMember, kind: str) -> dict:
        b = {"group_id": self.group, "member_id": m.member_id, "member_epoch": m.epoch, "instance_id": None,
             "rack_id": None, "rebalance_timeout": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None,
             "server_assignor": None, "topic_partitions": None}
        if kind == "join":
            b.update(member_epoch=0, rebalance_timeout=REBALANCE_TIMEOUT_MS, subscribed_topic_names=[self.topic],
                     topic_partitions=[])
        elif kind == "owned":
            b["topic_partitions"] = [{"topic_id": self.topic_id, "partitions": m.owned}] if m.owned else []
        return b

    def frame(self, m: SimMember, kind: str) -> bytes:
        return self.encode(HEARTBEAT, HB_VERSION, m.index, "bench-sim", self.body(m, kind))

    def exchange(self, frames: list[tuple[SimMember, bytes]], rounds: int = 1, update: bool = True) -> float:
        """Send `frames` `rounds` times, pipelined (per socket a writer and this socket's reader
        thread), read every answer; with `update`, each member takes its epoch and assignment from it.
        Returns the wall seconds."""
        per_sock: list[list[tuple[SimMember, bytes]]] = [[] for _ in self.socks]
        for m, f in frames:
            per_sock[m.index % len(self.socks)].append((m, f))
        from benchmarks import kwire

        def writer(sock: socket.socket, items) -> None:
            blob = b"".join(f for _, f in items)
            for _ in range(rounds):
                sock.sendall(blob)

        def reader(sock: socket.socket, items) -> None:
            for _ in range(rounds):
                for m, _f in items:
                    corr, body = self.decode(HEARTBEAT, HB_VERSION, kwire.read_response(sock))
                    if corr != m.index:
                        raise RuntimeError(f"correlation id {corr} != {m.index}")
                    self.answered += 1
                    if body.error_code:
                        self.errors += 1
                        m.error = body.error_code
                        self.first_error = self.first_error or f"{body.error_code}: {body.error_message}"
                        continue
                    if body.assignment is not None:
                        self.assignments_sent += 1
                    if update:
                        m.epoch = body.member_epoch
                        if body.assignment is not None:
                            parts: list[int] = []
                            for tp in body.assignment.topic_partitions:
                                self.topic_id = tp.topic_id
                                parts += tp.partitions
                            m.owned = sorted(parts)

        threads = []
        t0 = time.perf_counter()
        for sock, items in zip(self.socks, per_sock):
            if items:
                threads += [threading.Thread(target=writer, args=(sock, items), daemon=True),
                            threading.Thread(target=reader, args=(sock, items), daemon=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        return time.perf_counter() - t0

    def reconciled(self) -> bool:
        epochs = {m.epoch for m in self.members}
        share = CPU_PARTITIONS // len(self.members)
        union = set()
        for m in self.members:
            union.update(m.owned)
        return (len(epochs) == 1 and len(union) == CPU_PARTITIONS
                and all(share <= len(m.owned) <= share + 1 for m in self.members))


def _per_heartbeat(meter: Meter, answered: int, seconds: float) -> dict:
    m = {"heartbeats": answered, "seconds": seconds, "heartbeats_s": answered / seconds if seconds else None,
         **meter.metrics()}
    if meter.broker_cpu is not None and answered:
        m["broker_us_per_heartbeat"] = meter.broker_cpu / answered * 1e6
        m["broker_user_us_per_heartbeat"] = meter.broker_utime / answered * 1e6
        m["broker_sys_us_per_heartbeat"] = meter.broker_stime / answered * 1e6
    return m


def heartbeat_cpu(ctx: Ctx, broker: OwnBroker) -> list[dict]:
    topic = f"bench-{ctx.run_id}-groups-hb"
    group = f"bench-{ctx.run_id}-group-hb"
    clients.create_topics(broker.bootstrap, [(topic, CPU_PARTITIONS, {"file.delete.delay.ms": "0"})])
    host, port = broker.bootstrap.rsplit(":", 1)
    sim = HeartbeatSim(host, int(port), group, topic, CPU_MEMBERS, CPU_SOCKETS)
    stats = broker.stats()
    rows = []
    try:
        # joins: every member at epoch 0, pipelined
        with Meter(stats) as meter:
            secs = sim.exchange([(m, sim.frame(m, "join")) for m in sim.members])
        joins = _per_heartbeat(meter, sim.answered, secs)
        # reconciliation rounds: each reports what its last answer gave it
        rounds = 0
        base = sim.answered
        with Meter(stats) as meter:
            t0 = time.perf_counter()
            while not sim.reconciled() and rounds < 40:
                sim.exchange([(m, sim.frame(m, "owned")) for m in sim.members])
                rounds += 1
            secs = time.perf_counter() - t0
        reconcile = _per_heartbeat(meter, sim.answered - base, secs)
        if not sim.reconciled():
            raise RuntimeError(f"the group did not reconcile in {rounds} rounds (errors {sim.errors}: {sim.first_error})")
        both = {"broker_cpu_s": joins["broker_cpu_s"] + reconcile["broker_cpu_s"],
                "heartbeats": joins["heartbeats"] + reconcile["heartbeats"]}
        rows.append(row("groups.heartbeat.join", "groups", f"{CPU_MEMBERS:,} members join ({CPU_PARTITIONS:,} "
                        f"partitions), then reconcile in {rounds} rounds", "heartbeat", {
                            "members": CPU_MEMBERS, "partitions": CPU_PARTITIONS, "reconcile_rounds": rounds,
                            "broker_us_per_heartbeat": both["broker_cpu_s"] / both["heartbeats"] * 1e6,
                            "heartbeats": both["heartbeats"], "seconds": joins["seconds"] + reconcile["seconds"],
                            "join_us_per_heartbeat": joins.get("broker_us_per_heartbeat"),
                            "join_seconds": joins["seconds"],
                            "reconcile_us_per_heartbeat": reconcile.get("broker_us_per_heartbeat"),
                            "errors": sim.errors, "first_error": sim.first_error, **meter.memory}))
        # steady state: as clients send them (lean), then with the owned partitions listed
        for kind, key, name in (("lean", "steady", "steady state: member id + epoch"),
                                ("owned", "steady_owned", "steady state, owned partitions listed")):
            frames = [(m, sim.frame(m, kind)) for m in sim.members]
            sim.exchange(frames, 1, update=False)  # warm-up
            slices = []
            sent_before = sim.assignments_sent
            for _ in range(CPU_SLICES):
                base = sim.answered
                with Meter(stats) as meter:
                    secs = sim.exchange(frames, CPU_ROUNDS, update=False)
                slices.append(_per_heartbeat(meter, sim.answered - base, secs))
            us = [s.get("broker_us_per_heartbeat") for s in slices]
            total = sum(s["heartbeats"] for s in slices)
            cpu = sum(s["broker_cpu_s"] for s in slices if s["broker_cpu_s"] is not None)
            secs = sum(s["seconds"] for s in slices)
            rows.append(row(f"groups.heartbeat.{key}", "groups", f"{CPU_MEMBERS:,} members, {name}", "heartbeat", {
                "members": CPU_MEMBERS, "broker_us_per_heartbeat": cpu / total * 1e6, "heartbeats": total,
                "seconds": secs, "heartbeats_s": total / secs,
                "us_per_heartbeat_each": ", ".join(f"{u:.0f}" for u in us if u is not None),
                "broker_user_us_per_heartbeat": sum(s["broker_user_s"] for s in slices) / total * 1e6,
                "broker_sys_us_per_heartbeat": sum(s["broker_sys_s"] for s in slices) / total * 1e6,
                "assignments_in_answers": sim.assignments_sent - sent_before,
                "errors": sim.errors, "first_error": sim.first_error, **meter.memory}))
    finally:
        sim.close()
    return rows


# -- in this process: the decision alone -------------------------------------------------------------
def build_state(members: int = CPU_MEMBERS, partitions: int = CPU_PARTITIONS, topic: str = "t"):
    """A consumer group state built the way the CPU run builds it: `members` join, then heartbeat in
    rounds reporting what they were given until reconciled. Returns (state, env, members)."""
    from kbroker.group import consumer_protocol as cp
    from kbroker.group.consumer_state import ConsumerGroupState, apply

    state = ConsumerGroupState("g")
    env = cp.GroupEnv(now_ms=int(time.time() * 1000), topics={topic: partitions})
    sims = [SimMember(i) for i in range(members)]

    def beat(m: SimMember, join: bool) -> None:
        if join:
            req = cp.HeartbeatRequest(m.member_id, 0, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, topic_names=(topic,),
                                      owned={})
        else:
            req = cp.HeartbeatRequest(m.member_id, m.epoch, owned={topic: frozenset(m.owned)} if m.owned else {})
        decision = cp.heartbeat(state, req, env)
        for record in decision.records:
            apply(state, record)
        m.epoch = decision.response.member_epoch
        if decision.response.assignment is not None:
            m.owned = sorted(decision.response.assignment.get(topic, ()))

    for m in sims:
        beat(m, True)
    for _ in range(40):
        if len({m.epoch for m in sims}) == 1 and sum(len(m.owned) for m in sims) == partitions:
            break
        for m in sims:
            beat(m, False)
    return state, env, sims


def decision_timing(state, env, sims, rounds: int = 5, profile: bool = False) -> dict:
    """CPU µs (this thread's) per consumer_protocol.heartbeat call in steady state (lean and with owned
    partitions listed), best of `rounds` rounds over every member."""
    from kbroker.group import consumer_protocol as cp

    out = {}
    prof = cProfile.Profile() if profile else None
    for kind in ("lean", "owned"):
        reqs = [cp.HeartbeatRequest(m.member_id, m.epoch, owned=None if kind == "lean" else {"t": frozenset(m.owned)})
                for m in sims]
        best = float("inf")
        for _ in range(rounds):
            if prof:
                prof.enable()
            t0 = time.thread_time()
            for req in reqs:
                d = cp.heartbeat(state, req, env)
            best = min(best, (time.thread_time() - t0) / len(reqs))
            if prof:
                prof.disable()
            assert not d.records, d.records
        out[f"decision_{kind}_us"] = best * 1e6
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        out["profile"] = s.getvalue()
    return out


def request_path(members: int = CPU_MEMBERS, partitions: int = CPU_PARTITIONS, rounds: int = 5,
                 profile: bool = False) -> dict:
    """The broker's whole request path without the sockets: an in-process kbroker (a temp dir), the
    same joins and reconciling heartbeats as the CPU run through kbroker.api.dispatch.handle_frame,
    then steady-state heartbeats (member id + epoch): CPU µs (this thread's) per request (best of
    `rounds` x `members`),
    and with `profile` the cProfile of those."""
    import tempfile

    import trio

    from kbroker.api.dispatch import handle_frame
    from kbroker.broker import Broker
    from kbroker.config import BrokerConfig
    from kbroker.wire.protocol import decode_response, encode_request

    tmp = tempfile.mkdtemp(prefix="kbroker-groups-profile-")
    broker = Broker(BrokerConfig.from_dict({"log.dirs": tmp, **dict(o.split("=", 1) for o in CPU_OVERRIDES)}),
                    ("127.0.0.1", 9092))
    broker.startup()
    out: dict = {}
    try:
        trio.run(lambda: broker.create_topic("t", num_partitions=partitions))
        sims = [SimMember(i) for i in range(members)]
        topic_id = broker.metadata.topic("t").topic_id

        def body(m: SimMember, kind: str) -> dict:
            b = {"group_id": "g", "member_id": m.member_id, "member_epoch": m.epoch, "instance_id": None,
                 "rack_id": None, "rebalance_timeout": -1, "subscribed_topic_names": None,
                 "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None}
            if kind == "join":
                b.update(member_epoch=0, rebalance_timeout=REBALANCE_TIMEOUT_MS, subscribed_topic_names=["t"],
                         topic_partitions=[])
            elif kind == "owned":
                b["topic_partitions"] = [{"topic_id": topic_id, "partitions": m.owned}] if m.owned else []
            return b

        async def exchange(kind: str, update: bool = True) -> None:
            for m in sims:
                frame = encode_request(HEARTBEAT, HB_VERSION, m.index, "bench-sim", body(m, kind))
                _, resp = decode_response(HEARTBEAT, HB_VERSION, (await handle_frame(broker, bytearray(frame[4:])))[4:])
                if resp.error_code:
                    raise RuntimeError(f"heartbeat error {resp.error_code}: {resp.error_message}")
                if update:
                    m.epoch = resp.member_epoch
                    if resp.assignment is not None:
                        m.owned = sorted(p for tp in resp.assignment.topic_partitions for p in tp.partitions)

        async def steady(prof: cProfile.Profile | None) -> float:
            frames = [bytearray(encode_request(HEARTBEAT, HB_VERSION, m.index, "bench-sim", body(m, "lean"))[4:])
                      for m in sims]
            best = float("inf")
            for _ in range(rounds):
                if prof:
                    prof.enable()
                t0 = time.thread_time()
                for f in frames:
                    await handle_frame(broker, f)
                best = min(best, (time.thread_time() - t0) / len(frames))
                if prof:
                    prof.disable()
            return best

        async def run() -> None:
            await exchange("join")
            for _ in range(40):
                if len({m.epoch for m in sims}) == 1 and sum(len(m.owned) for m in sims) == partitions:
                    break
                await exchange("owned")
            prof = cProfile.Profile() if profile else None
            out["request_us"] = await steady(None) * 1e6
            if prof:
                await steady(prof)
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
                out["profile"] = s.getvalue()
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(30)
                out["profile_cumulative"] = s.getvalue()

        trio.run(run)
    finally:
        broker.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def decision_row(heartbeat_rows: list[dict]) -> dict:
    t0 = time.perf_counter()
    state, env, sims = build_state()
    build_s = time.perf_counter() - t0
    m = {"build_s": build_s, **decision_timing(state, env, sims)}
    m["request_path_us"] = request_path()["request_us"]
    steady = next((r for r in heartbeat_rows if r["key"] == "groups.heartbeat.steady"), None)
    if steady is not None and steady["metrics"].get("broker_us_per_heartbeat"):
        m["broker_us_per_heartbeat"] = steady["metrics"]["broker_us_per_heartbeat"]
        m["share_of_heartbeat"] = m["decision_lean_us"] / m["broker_us_per_heartbeat"]
    return row("groups.heartbeat.decision", "groups", "consumer_protocol.heartbeat alone, in-process", "decision", m)


# =====================================================================================================
def phase_groups(ctx: Ctx) -> list[dict]:
    rows: list[dict] = []
    broker = OwnBroker(ctx.base, "groups", [*GROUP_OVERRIDES, *ctx.overrides], ctx.log_level)
    ctx.side_brokers.append(broker)
    broker.start()
    try:
        for label, protocol, strategy in PROTOCOLS:
            if not broker.alive():
                raise RuntimeError(f"groups broker died:\n{broker.log_tail()}")
            rows += rebalance_run(ctx, broker, label, protocol, strategy)
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    return rows + phase_groups_cpu(ctx)


def phase_groups_cpu(ctx: Ctx) -> list[dict]:
    """The heartbeat-CPU half of the phase alone (`--only groups-cpu`)."""
    rows: list[dict] = []
    broker = OwnBroker(ctx.base, "groups-cpu", [*CPU_OVERRIDES, *ctx.overrides], ctx.log_level)
    ctx.side_brokers.append(broker)
    broker.start()
    try:
        hb = heartbeat_cpu(ctx, broker)
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    rows += hb
    rows.append(decision_row(hb))
    return rows


def main(argv: list[str]) -> int:
    """`python -m benchmarks.groups --profile`: the decision's cProfile on the 1,000-member state."""
    if argv != ["--profile"]:
        print("usage: python -m benchmarks.groups --profile", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    state, env, sims = build_state()
    print(f"state: {len(state.members)} members, {len(state.owners)} partitions owned, epoch {state.epoch}, "
          f"built in {time.perf_counter() - t0:.1f} s")
    plain = decision_timing(state, env, sims)
    print(f"consumer_protocol.heartbeat, steady state: {plain['decision_lean_us']:.1f} us (member id + epoch), "
          f"{plain['decision_owned_us']:.1f} us (owned partitions listed); best of 5 x {len(sims)}")
    prof = decision_timing(state, env, sims, rounds=3, profile=True)
    print(prof["profile"])
    path = request_path(profile=True)
    print(f"the whole request path in-process (kbroker.api.dispatch.handle_frame: decode, coordinator, encode; "
          f"no sockets), steady state, member id + epoch: {path['request_us']:.1f} us per heartbeat")
    print(path["profile"])
    print(path["profile_cumulative"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
