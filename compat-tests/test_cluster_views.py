"""A filtered view in a three-broker cluster (real ZooKeeper, real kbroker processes): the source
has replication factor 3; an idempotent acks=all producer writes tagged records while a
confluent-kafka and a kafka-python consumer read the view by assign; the leader of a source
partition is killed (-9) mid-stream. Each consumer must end with exactly the acknowledged matching
records — none lost, none twice, at their source offsets, in order — and nothing else.
"""

from __future__ import annotations

import threading
import time

import pytest

import clusterkit as ck

pytestmark = pytest.mark.timeout(300)

SOURCE, VIEW, PARTITIONS = "tagged", "tagged-eu", 2


def matches(value: bytes) -> bool:
    return int(value[1:]) % 3 == 0


class TaggedProducer(ck.AckedProducer):
    """AckedProducer whose record n carries `tags: eu` when n % 3 == 0, `tags: us,x` otherwise."""

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"v{self.sent}".encode()
            tags = b"eu" if self.sent % 3 == 0 else b"us,x"
            try:
                self.producer.produce(self.topic, key=str(self.sent % 64).encode(), value=value,
                                      headers=[("tags", tags)], on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)


class ViewReader:
    """A consumer of the view by assign (from the beginning), in a thread: every record it got."""

    def __init__(self, family: str, bootstrap: str) -> None:
        self.family = family
        self.bootstrap = bootstrap
        self.records: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._guarded, daemon=True)
        self._thread.start()

    def _guarded(self) -> None:
        try:
            self._confluent() if self.family == "confluent" else self._kafka_python()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(exc))

    def _confluent(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([TopicPartition(VIEW, p, 0) for p in range(PARTITIONS)])
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    self.records.append((msg.partition(), msg.offset(), msg.value()))
        finally:
            consumer.close()

    def _kafka_python(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                 request_timeout_ms=15000, reconnect_backoff_max_ms=1000)
        tps = [TopicPartition(VIEW, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        try:
            while not self._stop.is_set():
                for batch in consumer.poll(200).values():
                    self.records += [(r.partition, r.offset, r.value) for r in batch]
        finally:
            consumer.close()

    def values(self) -> set[bytes]:
        return {v for _, _, v in self.records}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 3)
    yield c
    ck.stop_cluster(c)


def test_view_consumers_lose_and_repeat_nothing_across_a_leader_kill(cluster, kt):
    kt.require_module("confluent_kafka")
    kt.require_module("kafka")
    ck.create_topic(cluster, SOURCE, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with ck.AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic(VIEW, configs={"view.source": SOURCE, "view.filter": "any(eu)"})
    ck.wait_for(lambda: all(len(ck.partitions(cluster, VIEW, via=b)) == PARTITIONS for b in cluster.brokers), 20,
                "every broker to answer for the view with the source's partitions")

    readers = [ViewReader(family, ck.live_bootstrap(cluster)) for family in ("confluent", "kafka-python")]
    producer = TaggedProducer(ck.live_bootstrap(cluster), SOURCE).start()
    try:
        ck.wait_for(lambda: producer.acked_count > 600, 60, "acknowledgements before the kill")
        victim = ck.leader_of(cluster, SOURCE, 0)
        acked_before = producer.acked_count
        cluster.brokers[victim].kill()
        ck.wait_for(lambda: ck.leader_of(cluster, SOURCE, 0) not in (-1, victim), 30,
                    f"a new leader for {SOURCE}-0 after killing broker {victim}")
        ck.wait_for(lambda: producer.acked_count > acked_before + 600, 60, "produce goes on after the kill")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    expected = {(p, v) for p, recs in producer.acked.items() for _o, v in recs if matches(v)}
    acked_offsets = {v: (p, o) for p, recs in producer.acked.items() for o, v in recs}
    try:
        for reader in readers:
            ck.wait_for(lambda: {v for _, v in expected} <= reader.values() or reader.errors, 90,
                        f"the {reader.family} reader to get every acknowledged matching record")
    finally:
        for reader in readers:
            reader.stop()
    for reader in readers:
        assert not reader.errors, f"{reader.family}: {reader.errors}"
        got = reader.records
        assert {(p, v) for p, _, v in got} == expected, f"{reader.family}: the records differ from the matching ones"
        assert len(got) == len(expected), f"{reader.family}: {len(got) - len(expected)} records read twice"
        for p in range(PARTITIONS):
            offsets = [o for q, o, _ in got if q == p]
            assert offsets == sorted(offsets), f"{reader.family}: partition {p} out of order"
        wrong = [(p, o, v) for p, o, v in got if acked_offsets[v][1] not in (None, -1, o)]
        assert not wrong, f"{reader.family}: records at other offsets than acknowledged: {wrong[:5]}"
