"""A share group (KIP-932) keeps working through SIGKILLs on a three-broker ZooKeeper cluster
(clusterkit), and nothing acknowledged is delivered again.

A 2-partition topic with replication factor 3 holds 600 records, all acknowledged (acks=all) before
the consumers start (the group's share.auto.offset.reset is earliest). Two confluent-kafka
ShareConsumers (librdkafka 2.16, explicit acknowledgement), each in a thread of its own, accept
every record they get — but reject those whose value ends in "7", a tenth — and commit the
acknowledgements synchronously, noting which ones the broker confirmed. The group's dead-letter
topic (KIP-1191) is `dlq.work` (1 partition, RF 3), made led by a broker that leads neither work
partition, so the rejected records' copies go to another broker as Produce requests. While they work, the leader of partition 0 (its share-partition leader) is SIGKILLed;
after it is back and more work is done, the broker that keeps the share state of partition 1 —
the leader of its `__share_group_state` partition, Kafka's hash of "group:topicId:1", its share
coordinator — is SIGKILLed too. Each share-partition's state is written through
WriteShareGroupState to its coordinator and replicated (min.insync.replicas 2) before an
acknowledgement is answered, so the new leaders carry on from it.

Checked: every one of the 600 records is delivered, and confirmed accepted or rejected, at least
once; no record is delivered again after an acknowledgement of it was confirmed; a record's delivery
count never goes backwards; at the end the group's share-partition start offsets
(DescribeShareGroupOffsets through the group coordinator, reading the state where it is kept) are
the log end offsets; and the dead-letter topic holds exactly the rejected records, with their
`__dlq.errors.*` headers — once each, or more than once only if one of its rejections went
unconfirmed (rejected again after being delivered again, or copied before its leader failed).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient
from kbroker.group.types import partition_for
from kbroker.share.state_records import ShareStateKey

pytestmark = pytest.mark.timeout(240)

RECORDS = 600
PARTITIONS = 2
STATE_PARTITIONS = 3
LOCK_MS = 5000
DLQ = "dlq.work"
PACE_S = 0.15  # per poll of at most 5 records: about 60 records a second for the two workers
OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
             "group.share.record.lock.duration.ms": str(LOCK_MS),
             "group.share.heartbeat.interval.ms": "500",
             "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
             "share.coordinator.state.topic.replication.factor": "3",
             "share.coordinator.state.topic.min.isr": "2"}


class Worker:
    """A ShareConsumer in a thread: accepts what it gets (rejects values ending in "7"), commits, and
    notes what happened."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import ShareConsumer

        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": "explicit", "fetch.wait.max.ms": 200,
                                       "max.poll.records": 5,
                                       "socket.timeout.ms": 10000})
        self.consumer.subscribe([topic])
        self.deliveries: list[tuple[float, int, int, int]] = []  # (time, partition, offset, delivery count)
        self.confirmed: list[tuple[float, int, int]] = []  # (time the commit answered, partition, offset)
        self.unconfirmed_rejects: set[tuple[int, int]] = set()  # (partition, offset) of rejects not answered
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import AcknowledgeType

        while not self._stop.is_set():
            try:
                messages = self.consumer.poll(0.5) or []
            except Exception as exc:  # noqa: BLE001 - a broker going away surfaces here; noted, polled again
                self.errors.append(f"poll: {exc}")
                continue
            taken = []
            for m in messages:
                if m.error() is not None:
                    self.errors.append(str(m.error()))
                    continue
                self.deliveries.append((time.monotonic(), m.partition(), m.offset(), m.delivery_count()))
                reject = (m.value() or b"").endswith(b"7")
                self.consumer.acknowledge(m, AcknowledgeType.REJECT if reject else AcknowledgeType.ACCEPT)
                taken.append((m.partition(), m.offset(), reject))
            if not taken:
                continue
            time.sleep(PACE_S)  # the work: slow enough that the kills land while records are in flight
            try:
                results = self.consumer.commit_sync(30)
            except Exception as exc:  # noqa: BLE001 - unconfirmed: those records may come again
                self.errors.append(f"commit: {exc}")
                self.unconfirmed_rejects.update((p, o) for p, o, reject in taken if reject)
                continue
            answered = time.monotonic()
            ok = {tp.partition for tp, error in results.items() if error is None}
            self.confirmed.extend((answered, p, o) for p, o, _r in taken if p in ok)
            self.unconfirmed_rejects.update((p, o) for p, o, reject in taken if reject and p not in ok)
            self.errors.extend(f"ack {tp.partition}: {error}" for tp, error in results.items() if error is not None)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(40)
        try:
            self.consumer.close()
        except Exception:  # noqa: BLE001 - closing against a changing cluster may complain; nothing to check
            pass


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 3, OVERRIDES)
    try:
        yield c
    finally:
        ck.stop_cluster(c)


def _alter_group_config(bootstrap: str, group: str, key: str, value: str) -> None:
    from confluent_kafka.admin import (AdminClient as CAdmin, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    admin = CAdmin({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _start_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The share-partition start offsets `kbroker share-groups --describe` shows."""
    cp = subprocess.run([sys.executable, "-m", "kbroker", "share-groups", "--bootstrap-server", bootstrap,
                         "--describe", "--group", group], capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        return {}
    rows = [line.split() for line in cp.stdout.splitlines()[1:]]
    return {int(r[2]): int(r[3]) for r in rows if len(r) >= 4 and r[1] == topic}


def _state_coordinator(cluster, group: str, topic: str, partition: int) -> int:
    with AdminClient(ck.live_bootstrap(cluster), timeout=10) as admin:
        _brokers, topics = admin.metadata([topic])
    key = ShareStateKey(group, topics[topic].topic_id, partition)
    return ck.leader_of(cluster, "__share_group_state", partition_for(key.coordinator_key(), STATE_PARTITIONS))


def _create_dead_letter_topic(cluster, leaders: set[int]) -> int:
    """`DLQ`, 1 partition, RF 3, taking dead letters; led (preferred) by a broker not in `leaders`."""
    ids = sorted(cluster.brokers)
    first = next((b for b in ids if b not in leaders), ids[0])
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic(DLQ, assignment=[[first, *(b for b in ids if b != first)]],
                           configs={"errors.deadletterqueue.group.enable": "true"})
    ck.wait_for(lambda: ck.in_sync(cluster, DLQ, 1, 3), 30, f"{DLQ} online with a full ISR")
    return ck.leader_of(cluster, DLQ, 0)


def _dead_letters(bootstrap: str, timeout_s: float = 60) -> list[tuple[bytes, dict[str, bytes]]]:
    """(value, headers) of every record in `DLQ`, up to its high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-verify", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                _low, high = consumer.get_watermark_offsets(TopicPartition(DLQ, 0), timeout=20)
                break
            except KafkaException:  # a leader elected a moment ago (OFFSET_NOT_AVAILABLE): asked again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
        consumer.assign([TopicPartition(DLQ, 0, OFFSET_BEGINNING)])
        out: list[tuple[bytes, dict[str, bytes]]] = []
        offset = -1
        while offset + 1 < high and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            offset = msg.offset()
            out.append((msg.value(), dict(msg.headers() or [])))
        assert offset + 1 >= high, f"{DLQ} read stopped at {offset + 1} of {high}"
        return out
    finally:
        consumer.close()


def test_share_group_survives_kills_of_a_partition_leader_and_a_share_coordinator(cluster):
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import Producer

    topic, group = "work", "workers"
    ck.create_topic(cluster, topic, PARTITIONS, 3)
    producer = Producer({"bootstrap.servers": ck.live_bootstrap(cluster), "acks": "all", "linger.ms": 5})
    acked = defaultdict(set)
    values: dict[tuple[int, int], bytes] = {}

    def delivered(err, m) -> None:
        if err is None:
            acked[m.partition()].add(m.offset())
            values[(m.partition(), m.offset())] = m.value()

    for i in range(RECORDS):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert sum(len(v) for v in acked.values()) == RECORDS
    leaders = {ck.leader_of(cluster, topic, p) for p in range(PARTITIONS)}
    dlq_leader = _create_dead_letter_topic(cluster, leaders)
    assert dlq_leader != ck.leader_of(cluster, topic, 0), f"{DLQ} is led by partition 0's leader {dlq_leader}"
    _alter_group_config(ck.live_bootstrap(cluster), group, "share.auto.offset.reset", "earliest")
    _alter_group_config(ck.live_bootstrap(cluster), group, "errors.deadletterqueue.topic.name", DLQ)

    workers = [Worker(ck.live_bootstrap(cluster), group, topic) for _ in range(2)]

    def accepted() -> set[tuple[int, int]]:  # confirmed accepted or rejected
        return {(p, o) for w in workers for _t, p, o in w.confirmed}

    try:
        ck.wait_for(lambda: len(accepted()) >= 120, 60, "the workers to accept a first fifth of the records")
        victim = ck.leader_of(cluster, topic, 0)
        cluster.brokers[victim].kill()
        ck.wait_for(lambda: ck.leader_of(cluster, topic, 0) not in (-1, victim), 30,
                    f"partition 0's leadership to move off broker {victim}")
        ck.wait_for(lambda: len(accepted()) >= 300, 90, "the workers to go on after the partition leader's kill")
        cluster.brokers[victim].start()
        ck.wait_for(lambda: ck.in_sync(cluster, "__share_group_state", STATE_PARTITIONS, 3), 60,
                    "the share state topic's full ISR again")
        coordinator = _state_coordinator(cluster, group, topic, 1)
        cluster.brokers[coordinator].kill()
        ck.wait_for(lambda: len(accepted()) >= 450, 90, "the workers to go on after the share coordinator's kill")
        ck.wait_for(lambda: len(accepted()) >= RECORDS, 90, "every record accepted")
        want = {p: max(acked[p]) + 1 for p in range(PARTITIONS)}
        starts: dict[int, int] = {}

        def described() -> bool:  # once the members have found the new group coordinator
            starts.update(_start_offsets(ck.live_bootstrap(cluster), group, topic))
            return starts == want

        ck.wait_for(described, 60, "the share-partition start offsets at the log ends")
        letters = _dead_letters(ck.live_bootstrap(cluster))
    except AssertionError:
        print(ck.failure_report(cluster))
        for i, w in enumerate(workers):
            print(f"worker {i}: {len(w.deliveries)} deliveries, {len(w.confirmed)} confirmed, errors {w.errors[-20:]}")
        raise
    finally:
        for w in workers:
            w.stop()

    everything = {(p, o) for p, offsets in acked.items() for o in offsets}
    assert accepted() == everything  # each record accepted or rejected, nothing else delivered
    confirmed_at = {}
    for w in workers:
        for t, p, o in w.confirmed:
            confirmed_at[(p, o)] = min(t, confirmed_at.get((p, o), t))
    deliveries = sorted(d for w in workers for d in w.deliveries)
    again = [(p, o, n) for t, p, o, n in deliveries if (p, o) in confirmed_at and t > confirmed_at[(p, o)]]
    assert again == [], f"delivered again after a confirmed acceptance: {again[:10]}"
    counts = defaultdict(list)
    for _t, p, o, n in deliveries:
        counts[(p, o)].append(n)
    backwards = {k: v for k, v in counts.items() if v != sorted(v)}
    assert not backwards, f"delivery counts went backwards: {list(backwards.items())[:10]}"
    assert all(n >= 1 for v in counts.values() for n in v)

    # the dead letters: each rejected record, with where it came from; twice only after an unconfirmed reject
    where = {v: k for k, v in values.items()}
    rejected = {v for v in values.values() if v.endswith(b"7")}
    copies = Counter(v for v, _h in letters)
    assert set(copies) == rejected, f"missing {sorted(rejected - set(copies))[:10]}, " \
                                    f"not rejected {sorted(set(copies) - rejected)[:10]}"
    unconfirmed = {values[k] for w in workers for k in w.unconfirmed_rejects}
    twice = {v: n for v, n in copies.items() if n > 1 and v not in unconfirmed}
    assert not twice, f"copied more than once after confirmed rejects only: {list(twice.items())[:10]}"
    for value, headers in letters:
        p, o = where[value]
        assert {k: headers.get(k) for k in ("__dlq.errors.group.id", "__dlq.errors.topic", "__dlq.errors.partition",
                                             "__dlq.errors.offset", "__dlq.errors.reason")} == {
            "__dlq.errors.group.id": group.encode(), "__dlq.errors.topic": topic.encode(),
            "__dlq.errors.partition": str(p).encode(), "__dlq.errors.offset": str(o).encode(),
            "__dlq.errors.reason": b"rejected"}, (value, headers)
    print(f"{DLQ} led by broker {dlq_leader} (work partitions' leaders {sorted(leaders)}): {len(letters)} dead "
          f"letters for {len(rejected)} rejected records, {len(unconfirmed)} with an unconfirmed reject")
