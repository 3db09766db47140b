"""Share groups (KIP-932) with the Java client: kafka-clients 4.3's KafkaShareConsumer
(compat-tests/java/ShareHarness.java, one JVM per consumer) against a real kbroker process; the
same scenarios as test_share_groups.py (confluent-kafka's ShareConsumer).

- three consumers on two partitions (implicit acknowledgement): every record delivered exactly once
  across them, the work spread, and nothing delivered again after the lock duration;
- explicit acknowledgement: RELEASE delivers every record again with delivery count 2, and the
  ACCEPT that follows ends it; REJECT delivers none again;
- a consumer SIGKILLed holding records: another consumer gets them after the lock duration, with
  delivery count 2.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

LOCK_MS = 5000  # long enough that a loaded machine does not see locks run out mid-step
KBROKER_OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
                     "group.share.record.lock.duration.ms": str(LOCK_MS),
                     "group.share.heartbeat.interval.ms": "500"}
SETTLE_S = 3.0  # polling before anything is produced: a share group starts at `latest`


@pytest.fixture(scope="module")
def ck(kt):
    return kt.require_module("confluent_kafka")


@pytest.fixture(scope="module")
def share_java(java_share_harness_43):
    return java_share_harness_43


class ShareConsumerProc:
    """One `ShareHarness share-consumer` JVM; its JSON lines are collected by a reader thread."""

    def __init__(self, harness, bootstrap: str, group: str, topic: str, mode: str, policy: str | None,
                 stderr_path: Path):
        self.name = f"{stderr_path.stem} ({mode}{' ' + policy if policy else ''})"
        self.stderr_path = stderr_path
        argv = harness.argv("share-consumer", bootstrap, group, topic, mode, *([policy] if policy else []))
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                         text=True)
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"event": "raw", "line": line}
            with self._lock:
                self.events.append(ev)

    def of(self, kind: str) -> list[dict]:
        with self._lock:
            return [e for e in self.events if e.get("event") == kind]

    def records(self) -> list[dict]:
        return self.of("record")

    def problems(self) -> list[dict]:
        return self.of("error") + self.of("ack-error")

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no stderr)"

    def check(self) -> None:
        """Fail on an error event or an early exit."""
        if self.problems() or self.proc.poll() is not None:
            raise AssertionError(f"{self.name}: {self.problems()} exit={self.proc.poll()}\n"
                                 f"--- java stderr tail ---\n{self.stderr_tail()}")

    def wait_ready(self, kt, timeout: float = 60) -> None:
        def ready():
            self.check()
            return self.of("ready")
        kt.wait_until(ready, timeout, f"{self.name} to print ready")

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM (the harness closes the consumer and exits 0); its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(10)
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by PID
        self.proc.wait(10)


@pytest.fixture
def share_consumers(kt, kbroker, share_java, tmp_path):
    """start(group, topic, mode, policy=None) -> a running ShareConsumerProc; all killed at the end."""
    procs: list[ShareConsumerProc] = []

    def start(group: str, topic: str, mode: str = "implicit", policy: str | None = None) -> ShareConsumerProc:
        p = ShareConsumerProc(share_java, kbroker.bootstrap, group, topic, mode, policy,
                              tmp_path / f"share-consumer-{len(procs)}.stderr.log")
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()


def _topic(kt, kbroker, tag: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = kt.topic_name("share-java", tag)
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def _produce(ck, kbroker, topic: str, n: int, partitions: int, chunk: int | None = None) -> None:
    """Values v0..v<n-1>, round-robin over the partitions; with `chunk`, flushed every `chunk` records
    (a batch each), a little apart: a share fetch acquires whole batches, so one consumer could
    otherwise take every record in a single fetch."""
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
        if chunk and (i + 1) % chunk == 0:
            assert producer.flush(30) == 0
            time.sleep(0.05)
    assert producer.flush(30) == 0


def _settle(kt, consumers) -> None:
    for c in consumers:
        c.wait_ready(kt)
    time.sleep(SETTLE_S)
    for c in consumers:
        c.check()
        assert not c.records(), f"{c.name} got records before any were produced: {c.records()}"


def _wait_records(kt, consumers, until, timeout: float, what: str) -> None:
    def done():
        for c in consumers:
            c.check()
        return until()
    kt.wait_until(done, timeout, what)


def _assert_clean_exit(consumers) -> None:
    for c in consumers:
        rc = c.terminate()
        assert rc == 0 and c.of("closed"), (f"{c.name}: exit {rc}, closed={bool(c.of('closed'))}, "
                                            f"problems={c.problems()}\n--- java stderr tail ---\n{c.stderr_tail()}")
        assert not c.problems(), c.problems()


def test_three_consumers_two_partitions_each_record_once(kt, kbroker, ck, share_consumers):
    topic = _topic(kt, kbroker, "spread", 2)
    group = kt.topic_name("share-java", "spread-group")
    consumers = [share_consumers(group, topic) for _ in range(3)]
    _settle(kt, consumers)
    _produce(ck, kbroker, topic, 200, 2, chunk=10)
    _wait_records(kt, consumers, lambda: sum(len(c.records()) for c in consumers) >= 200, 60,
                  "200 records across the three share consumers")
    # implicit acknowledgement: were they not accepted, the lock would run out and they would come again
    time.sleep(LOCK_MS / 1000 + 2)
    for c in consumers:
        c.check()
    got = {i: c.records() for i, c in enumerate(consumers)}
    records = [(r["partition"], r["offset"]) for recs in got.values() for r in recs]
    assert len(records) == 200 and len(set(records)) == 200, \
        f"{len(records)} deliveries of {len(set(records))} distinct records (want 200 of 200)"
    assert sorted(records) == sorted((p, o) for p in (0, 1) for o in range(100))
    assert {r["value"] for recs in got.values() for r in recs} == {f"v{i}" for i in range(200)}
    assert all(r["delivery_count"] == 1 for recs in got.values() for r in recs)
    counts = {i: len(recs) for i, recs in got.items()}
    assert sum(1 for n in counts.values() if n) >= 2, f"the work was not shared: records per consumer {counts}"
    _assert_clean_exit(consumers)


def test_release_redelivers_each_record_once_more(kt, kbroker, ck, share_consumers):
    topic = _topic(kt, kbroker, "release", 1)
    group = kt.topic_name("share-java", "release-group")
    c = share_consumers(group, topic, "explicit", "release-first")
    _settle(kt, [c])
    _produce(ck, kbroker, topic, 10, 1)
    _wait_records(kt, [c], lambda: len(c.records()) >= 20, 60, "each of 10 records delivered twice")
    time.sleep(LOCK_MS / 1000 + 2)  # accepted the second time: no third delivery, even after the lock
    c.check()
    deliveries: dict[int, list[int]] = {}
    for r in c.records():
        deliveries.setdefault(r["offset"], []).append(r["delivery_count"])
    assert deliveries == {o: [1, 2] for o in range(10)}
    assert {r["value"] for r in c.records()} == {f"v{i}" for i in range(10)}
    _assert_clean_exit([c])


def test_reject_archives(kt, kbroker, ck, share_consumers):
    topic = _topic(kt, kbroker, "reject", 1)
    group = kt.topic_name("share-java", "reject-group")
    c = share_consumers(group, topic, "explicit", "reject-first")
    _settle(kt, [c])
    _produce(ck, kbroker, topic, 5, 1)
    _wait_records(kt, [c], lambda: len(c.records()) >= 5, 60, "5 records")
    time.sleep(LOCK_MS / 1000 + 2)  # rejected (archived): never delivered again
    c.check()
    assert [(r["offset"], r["delivery_count"]) for r in c.records()] == [(o, 1) for o in range(5)]
    _assert_clean_exit([c])


def test_a_killed_consumers_records_go_to_another_after_the_lock(kt, kbroker, ck, share_consumers):
    topic = _topic(kt, kbroker, "killed", 1)
    group = kt.topic_name("share-java", "killed-group")
    holder = share_consumers(group, topic, "explicit", "hold")
    _settle(kt, [holder])
    _produce(ck, kbroker, topic, 5, 1)
    _wait_records(kt, [holder], lambda: holder.records(), 30, "the holding consumer to take records")
    time.sleep(0.3)  # the rest of its poll's lines
    held = sorted(r["offset"] for r in holder.records())
    assert held and all(r["delivery_count"] == 1 for r in holder.records())
    survivor = share_consumers(group, topic, "implicit")
    survivor.wait_ready(kt)
    holder.kill()  # SIGKILL: it never acknowledges, nor leaves the group
    killed_at = time.monotonic()
    _wait_records(kt, [survivor], lambda: {r["offset"] for r in survivor.records()} >= set(range(5)),
                  LOCK_MS / 1000 + 10, "the survivor to get all five records")
    assert time.monotonic() - killed_at <= LOCK_MS / 1000 + 10
    got = {r["offset"]: r["delivery_count"] for r in survivor.records()}
    assert len(survivor.records()) == 5 and sorted(got) == [0, 1, 2, 3, 4], survivor.records()
    assert all(got[o] >= 2 for o in held), f"held {held}, survivor got {survivor.records()}"  # delivered again
    assert all(got[o] == 1 for o in got if o not in held)  # never handed to the holder: first delivery
    _assert_clean_exit([survivor])
