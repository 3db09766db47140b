"""Consumer-group scenarios shared by every client family.

A *member* is a separate OS process running one stock client in a consumer group (so a test can
SIGKILL it). It prints JSON lines on stdout, which `Member` collects:

    {"event": "assigned", "partitions": [0, 3], "t": 1764150000.123}
                                                        after every rebalance (its whole assignment) and
                                                        after a revocation (what is left); "t", the wall
                                                        time of the callback, where the member reports it
    {"event": "record", "partition": 0, "offset": 5, "key": "..."}   one per record processed
    {"event": "committed", "offsets": {"0": 6}}        after a successful commit (next offsets)
    {"event": "closed"}                                 after a clean close on SIGTERM

Members commit synchronously after processing each poll batch, so a graceful rebalance loses or
repeats nothing; a SIGKILLed member's processed-but-uncommitted records are read again by the
member that takes its partitions over (at-least-once), which `check_after_kill` allows exactly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

HERE = Path(__file__).resolve().parent


class Member:
    def __init__(self, argv: list[str], name: str, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.stderr_path = log_dir / f"member-{name}.stderr.log"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})}, text=True, bufsize=1)
        self._lock = threading.Lock()
        self.events: list[dict] = []
        self.unparsed: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"member-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                with self._lock:
                    self.unparsed.append(line)
                continue
            if event.get("event") == "closed":
                event.setdefault("t", time.time())  # the member has left: it owns nothing after this
            with self._lock:
                self.events.append(event)

    # -- what the member reported -------------------------------------------------------------------
    def _of(self, kind: str) -> list[dict]:
        with self._lock:
            return [e for e in self.events if e.get("event") == kind]

    @property
    def assignment(self) -> set[int] | None:
        assigned = self._of("assigned")
        return set(assigned[-1]["partitions"]) if assigned else None

    @property
    def assignments(self) -> list[set[int]]:
        """Every assignment the member reported, in order (one per rebalance callback)."""
        return [set(e["partitions"]) for e in self._of("assigned")]

    @property
    def records(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self._of("record")]

    @property
    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self._of("committed"):
            out.update({int(p): int(o) for p, o in e["offsets"].items()})
        return out

    @property
    def closed_cleanly(self) -> bool:
        return bool(self._of("closed"))

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def describe(self) -> str:
        return (f"member {self.name} (pid {self.proc.pid}, alive={self.alive}): assignment={self.assignment}, "
                f"{len(self.records)} records, committed={self.committed}\n--- stderr tail ---\n{self.stderr_tail()}")

    # -- lifecycle ----------------------------------------------------------------------------------
    _stop_sent = False

    def request_stop(self) -> float:
        """SIGTERM without waiting (`terminate` then waits): several members close at once. Returns
        the wall time it was sent (the member owned its partitions at least until then)."""
        sent = time.time()
        if self.alive and not self._stop_sent:
            self.proc.send_signal(signal.SIGTERM)
            self._stop_sent = True
        return sent

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (unless `request_stop` sent it): the member closes its consumer (LeaveGroup) and exits."""
        if self.alive and not self._stop_sent:
            self.proc.send_signal(signal.SIGTERM)
            self._stop_sent = True
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            self._reader.join(5)
            self._stderr.close()

    def kill(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._reader.join(5)


# kcat's rebalance callback, eager ("assigned:" / "revoked:", the whole assignment) and
# cooperative ("incremental assignment of N partition(s)" / "incremental unassignment ...", the change)
KCAT_EAGER = re.compile(r"rebalanced \(memberid ([^)]*)\): (assigned|revoked): (.*)$")
KCAT_COOPERATIVE = re.compile(r"rebalanced: incremental (\w+) of \d+ partition\(s\) \(memberid ([^,)]*)[^)]*\): (.*)$")


class KcatMember(Member):
    """A `kcat -G group topic` process (kcat 1.7.1, librdkafka 2.0.2) reporting groupkit events: its
    `-f 'REC %p %o %k\\n'` lines on stdout are records, and the "% Group ... rebalanced (memberid ...):
    assigned: / revoked: <topic> [p], ..." lines its rebalance callback writes on stderr give the
    assignment (no wall times: they are read late). kcat exiting 0 after SIGTERM (it closes the
    consumer, which commits and leaves) is `closed`. librdkafka auto-commits (every 5 s and on revoke
    and close), so there are no `committed` events and delivery is at-least-once. `extra`: more kcat
    arguments, e.g. ("-X", "partition.assignment.strategy=cooperative-sticky")."""

    def __init__(self, kcat: str, bootstrap: str, group: str, topic: str, name: str, log_dir: Path,
                 extra: Iterable[str] = ()) -> None:
        self.name = name
        self.argv = [kcat, "-b", bootstrap, "-G", group, "-u", "-f", "REC %p %o %k\\n",
                     "-X", "auto.offset.reset=earliest", *extra, topic]
        self.stderr_path = log_dir / f"member-{name}.stderr.log"
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1)
        self._lock = threading.Lock()
        self.events: list[dict] = []
        self.unparsed: list[str] = []
        self._owned: set[int] = set()
        self.member_id: str | None = None  # as the rebalance callback last reported it
        self._reader = threading.Thread(target=self._read, name=f"kcat-{name}", daemon=True)
        self._err_reader = threading.Thread(target=self._read_stderr, name=f"kcat-{name}-err", daemon=True)
        self._reader.start()
        self._err_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            fields = line.rstrip("\n").split(" ", 3)
            with self._lock:
                if len(fields) >= 3 and fields[0] == "REC":
                    self.events.append({"event": "record", "partition": int(fields[1]), "offset": int(fields[2]),
                                        "key": fields[3] if len(fields) > 3 else ""})
                elif line.strip():
                    self.unparsed.append(line.rstrip("\n"))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.write(line)
            self._stderr.flush()
            line = line.rstrip("\n")
            eager, cooperative = KCAT_EAGER.search(line), KCAT_COOPERATIVE.search(line)
            if eager:
                member_id, adds, listed = eager.group(1), eager.group(2) == "assigned", eager.group(3)
            elif cooperative:
                member_id, adds, listed = cooperative.group(2), cooperative.group(1) == "assignment", cooperative.group(3)
            else:
                if "rebalanced" in line:
                    with self._lock:
                        self.unparsed.append(line)
                continue
            partitions = {int(p) for p in re.findall(r"\[(\d+)\]", listed)}
            with self._lock:
                self.member_id = member_id
                # eager: revoke all, then assign all; cooperative: revoke/assign the difference
                if adds:
                    self._owned |= partitions
                else:
                    self._owned -= partitions
                self.events.append({"event": "assigned", "partitions": sorted(self._owned)})

    def terminate(self, timeout: float = 30.0) -> int | None:
        status = super().terminate(timeout)
        self._err_reader.join(5)
        if status == 0:
            with self._lock:
                self.events.append({"event": "closed", "t": time.time()})
        return status

    def kill(self) -> None:
        super().kill()
        self._err_reader.join(5)


def wait_for(cond: Callable[[], object], timeout: float, what: str, members: Iterable[Member] = ()) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        dead = [m for m in members if not m.alive and not m.closed_cleanly]
        if dead or time.monotonic() >= deadline:
            details = "\n".join(m.describe() for m in members)
            reason = f"member {dead[0].name} exited" if dead else f"timed out after {timeout}s"
            raise AssertionError(f"{reason} waiting for {what}\n{details}")
        time.sleep(0.1)


def balanced(members: list[Member], partitions: int) -> bool:
    """Every member has an assignment, they do not overlap, and together cover every partition."""
    assignments = [m.assignment for m in members]
    if any(a is None or not a for a in assignments):
        return False
    union: set[int] = set()
    for a in assignments:
        if union & a:
            return False
        union |= a
    return union == set(range(partitions))


def wait_balanced(members: list[Member], partitions: int, timeout: float) -> None:
    wait_for(lambda: balanced(members, partitions), timeout,
             f"{len(members)} members to split {partitions} partitions without overlap", members)


def read_positions(members: Iterable[Member]) -> Counter:
    counts: Counter = Counter()
    for m in members:
        counts.update(m.records)
    return counts


def wait_all_read(members: list[Member], expected: set[tuple[int, int]], timeout: float) -> None:
    wait_for(lambda: expected <= set(read_positions(members)), timeout,
             f"{len(expected)} records to be read", members)


def wait_all_read_after_kill(survivors: list[Member], killed: Member, expected: set[tuple[int, int]],
                             timeout: float) -> None:
    """`wait_all_read` with a SIGKILLed member's records counted: only the survivors are watched
    (a killed member is, by design, not alive and not closed cleanly)."""
    wait_for(lambda: expected <= set(read_positions([*survivors, killed])), timeout,
             f"{len(expected)} records to be read by the survivors of {killed.name}", survivors)


def check_exactly_once(members: list[Member], expected: set[tuple[int, int]]) -> None:
    counts = read_positions(members)
    missing = expected - set(counts)
    twice = {pos: n for pos, n in counts.items() if n > 1}
    extra = set(counts) - expected
    assert not missing, f"never read: {sorted(missing)[:20]}"
    assert not twice, f"read more than once: {sorted(twice.items())[:20]}"
    assert not extra, f"read positions that were never produced: {sorted(extra)[:20]}"


def check_after_kill(survivors: list[Member], killed: Member, expected: set[tuple[int, int]]) -> None:
    """At-least-once across a SIGKILL: all read; a record is read twice only if the killed member
    read it and had not committed past it (the takeover starts from the last commit)."""
    counts = read_positions([*survivors, killed])
    missing = expected - set(counts)
    assert not missing, f"never read: {sorted(missing)[:20]}"
    committed = killed.committed
    for (partition, offset), n in counts.items():
        if n > 1:
            assert (partition, offset) in set(killed.records), f"{(partition, offset)} read {n} times by survivors"
            assert offset >= committed.get(partition, 0), (
                f"{(partition, offset)} read again although the killed member committed {committed.get(partition)}")


def expected_positions(acked: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    return {(int(p), int(o)) for p, o in acked}


def end_offsets(positions: Iterable[tuple[int, int]]) -> dict[int, int]:
    """{partition: offset after the last one read}: what a group that processed `positions` commits."""
    ends: dict[int, int] = {}
    for p, o in positions:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


REPORT_SKEW_S = 0.25


def check_single_owner(members: Iterable[Member], killed: dict[str, float] | None = None) -> None:
    """From every member's assignment reports (each stamped with the wall time `t` its callback
    ran): at no moment did two members hold the same partition. A SIGKILLed member held its last
    assignment until the time in `killed` (its partitions go elsewhere only after its session); one
    that closed cleanly until its "closed" report."""
    intervals: list[tuple[float, float, int, str]] = []  # (from, to, partition, member)
    for m in members:
        reports = [e for e in m._of("assigned") if "t" in e]
        # a member that closed cleanly owned its last assignment until it closed, whether or not its
        # client reported the revocation that closing implies
        closed = [e["t"] for e in m._of("closed") if "t" in e]
        last_end = closed[0] if closed else (killed or {}).get(m.name, float("inf"))
        for i, report in enumerate(reports):
            end = reports[i + 1]["t"] if i + 1 < len(reports) else last_end
            intervals += [(report["t"], end, p, m.name) for p in report["partitions"]]
    for a in intervals:
        for b in intervals:
            # one rebalance's answers reach its members a few ms apart, and a member that gave a
            # partition up before joining (eager protocols) reports that only with its next
            # assignment: an overlap shorter than REPORT_SKEW_S is one rebalance, not two owners
            # (which would last until the next rebalance, seconds)
            if a[2] == b[2] and a[3] != b[3] and min(a[1], b[1]) - max(a[0], b[0]) > REPORT_SKEW_S:
                raise AssertionError(f"partition {a[2]} owned by {a[3]} and {b[3]} at once: {a} {b}")


class SteadyProducer:
    """Produces a record every few milliseconds until stopped; what it acknowledged is `acked`."""

    def __init__(self, ck, bootstrap: str, topic: str) -> None:
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic, self.acked, self._stop = topic, set(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, key=f"steady-{i}".encode(), value=b"v", on_delivery=self._delivered)
            self.producer.poll(0.005)
            i += 1

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.add((msg.partition(), msg.offset()))

    def stop(self) -> set[tuple[int, int]]:
        self._stop.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0
        return set(self.acked)
