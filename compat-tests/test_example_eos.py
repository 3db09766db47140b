"""examples/eos_transform.py run as written (confluent-kafka, a read_committed consumer group and a
transactional producer), SIGKILLed at random points and restarted, then left to finish: the output
topic, read with read_committed, holds every input record transformed exactly once, in order.

Needs the whole of KIP-98/447 on the broker: transactions, TxnOffsetCommit (the consumed offsets
inside the transaction), OffsetFetch require_stable, and read_committed fetches that list aborted
transactions (a killed instance's open transaction is aborted when its successor starts)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "eos_transform.py"
KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}  # the first join is not what is tested
PARTITIONS = 3
RECORDS = 4500
KEYS = 30
KILLS = 10
BATCH = 15             # records per transaction at most: 300 transactions, so the kills (which can land a dozen
                       # commits late on a loaded machine) all fall among them
RUN_S = 15.0           # bound on each run up to its kill point
FINAL_S = 45.0         # bound on the last run, which processes what is left and exits when idle


@pytest.fixture
def ck(kt):
    return kt.require_module("confluent_kafka")


class Run:
    """One process of the example; collects its `committed ...` lines as they come."""

    def __init__(self, argv: list[str], stderr_path: Path):
        self._stderr = open(stderr_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        self.commits = 0
        self.records = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("committed "):
                self.records += int(line.split()[1])
                self.commits += 1

    def wait_commits(self, n: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.commits < n and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.commits >= n

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # our own child, by PID
        self.proc.wait(10)
        self._reader.join(5)
        self._stderr.close()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        finally:
            if self.proc.poll() is None:
                self.kill()
            else:
                self._reader.join(5)
                self._stderr.close()


def _create(broker, *topics: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # referenced until the futures resolve
    for future in admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics],
                                      operation_timeout=30).values():
        future.result(30)


def _fill(ck, broker, topic: str) -> dict[bytes, list[bytes]]:
    """RECORDS keyed records; returns each key's values in the order produced (its partition's order)."""
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    per_key: dict[bytes, list[bytes]] = defaultdict(list)
    for i in range(RECORDS):
        key = f"key-{i % KEYS:02d}".encode()
        value = f"{key.decode()}|seq-{len(per_key[key]):03d}|record {i} of the input".encode()
        producer.produce(topic, key=key, value=value)
        per_key[key].append(value)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0, "the input was not acknowledged in 30 s"
    return per_key


def _read(ck, broker, topic: str, expected: int, isolation: str = "read_committed",
          timeout: float = 30.0) -> dict[int, list]:
    """The whole topic: (key, value) per partition in offset order. Reads until every partition is
    at its end with `expected` records seen (markers of the last transaction may still be on their
    way when the example exits), then 1 s more."""
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"verify-{topic}",
                            "isolation.level": isolation, "enable.auto.commit": False,
                            "enable.partition.eof": True})
    out: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        settle_until = None
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise AssertionError(f"reading {topic}: {msg.error()}")
                at_end.discard(msg.partition())
                out[msg.partition()].append((msg.key(), msg.value()))
            done = len(at_end) == PARTITIONS and sum(map(len, out.values())) >= expected
            if done and settle_until is None:
                settle_until = time.monotonic() + 1.0
            if settle_until is not None and time.monotonic() > settle_until:
                break
    finally:
        consumer.close()
    return out


def _committed_offsets(ck, broker, group: str, topic: str) -> dict[int, int]:
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset
                for tp in consumer.committed([ck.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)}
    finally:
        consumer.close()


def test_eos_transform_exactly_once_through_sigkills(ck, kt, kbroker, tmp_path):
    source, sink = kt.topic_name("eos-in"), kt.topic_name("eos-out")
    group = f"eos-{source}"
    _create(kbroker, source, sink)
    per_key = _fill(ck, kbroker, source)
    argv = [sys.executable, str(EXAMPLE), "--bootstrap", kbroker.bootstrap, "--input", source, "--output", sink,
            "--group", group, "--instance-id", "crash-test", "--batch-size", str(BATCH),
            "--session-timeout-ms", "30000"]
    rng = random.Random()
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    stderr_path = tmp_path / "example.stderr.log"
    history = []  # (commits before the kill, extra delay ms) per killed run
    started = time.monotonic()
    for _ in range(KILLS):
        run = Run(argv, stderr_path)
        commits = rng.randint(0, 3)  # kill after this many of its own transactions ...
        delay = rng.uniform(0, 0.03)  # ... and a little more: mid-produce, mid-commit, between
        reached = run.wait_commits(commits, RUN_S)
        time.sleep(delay)
        exited = run.proc.poll()
        run.kill()
        history.append((run.commits, round(delay * 1000), exited))
        assert exited is None, (f"the example exited with {exited} before its kill (seed {seed}, history {history})"
                                f"\n{stderr_path.read_text(errors='replace')[-3000:]}")
        assert reached, f"no {commits} commits within {RUN_S} s (seed {seed}, history {history})"
    crash_s = time.monotonic() - started
    final = Run([*argv, "--idle-exit-s", "3"], stderr_path)
    code = final.wait(FINAL_S)
    stderr = stderr_path.read_text(errors="replace")
    assert code == 0, f"the last run ended with {code} (seed {seed}, history {history})\n{stderr[-3000:]}"
    assert final.commits >= 1, f"the killed runs processed everything: no kill landed mid-stream ({history})"

    out = _read(ck, kbroker, sink, RECORDS)
    got = [rec for p in range(PARTITIONS) for rec in out[p]]
    # what read_committed must skip: the records of the transactions the kills left open
    uncommitted = sum(map(len, _read(ck, kbroker, sink, RECORDS, "read_uncommitted").values()))
    expected = {(k, v.upper()) for k, vs in per_key.items() for v in vs}
    counts = Counter(got)
    twice = sorted(rec for rec, n in counts.items() if n > 1)
    missing = sorted(expected - set(counts))
    foreign = sorted(set(counts) - expected)
    context = (f"seed {seed}; killed runs (commits, delay ms, exit): {history}; crash part {crash_s:.1f} s; "
               f"last run {final.commits} transactions / {final.records} records; "
               f"{uncommitted - len(got)} aborted records in the output (read_uncommitted)")
    assert not foreign, f"{len(foreign)} output records are no transformed input record, e.g. {foreign[:3]}; {context}"
    assert not twice, f"{len(twice)} records written more than once, e.g. {twice[:3]}; {context}"
    assert not missing, f"{len(missing)} input records never written, e.g. {missing[:3]}; {context}"
    assert len(got) == RECORDS
    # a key's records stay in one output partition, in the input's order
    for key, values in per_key.items():
        where = {p for p in range(PARTITIONS) for k, _ in out[p] if k == key}
        assert len(where) == 1, f"{key!r} is in output partitions {sorted(where)}"
        in_order = [v for k, v in out[where.pop()] if k == key]
        assert in_order == [v.upper() for v in values], f"{key!r}: output order differs from the input's; {context}"
    # and the group's committed offsets are the input's end
    ends = _committed_offsets(ck, kbroker, group, source)
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": "ends"})
    try:
        highs = {p: consumer.get_watermark_offsets(ck.TopicPartition(source, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()
    assert ends == highs, f"committed offsets {ends} != the input's end {highs}; {context}"
    print(context)
