"""Cluster tests' shared parts: a real ZooKeeper server and several real kbroker processes on
127.0.0.1 (`kbroker.cluster_runner`), stopped by PID whatever happens; an idempotent producer
that records exactly what was acknowledged; and the check every failure test ends with — every
acknowledged record read back, none twice, in order per partition.

Short ZooKeeper sessions (`SESSION_MS`) keep failovers quick; every wait is bounded.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import wait_until as wait_for  # the kits' one polling helper, under its older name
from kbroker.admin.client import AdminClient
from kbroker.cluster_runner import LocalCluster, zookeeper_classpath

CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
SESSION_MS = 6000
LIVE_CLUSTERS: list[LocalCluster] = []  # their logs go into failure reports (conftest)


def require_zookeeper() -> None:
    if zookeeper_classpath() is None:
        reason = "ZooKeeper is not installed (apt-get install zookeeper) or java is missing"
        if CI:
            pytest.fail(f"required under CI=true but missing: {reason}", pytrace=False)
        pytest.skip(reason)


def start_cluster(base: Path, size: int = 3, overrides: dict[str, str] | None = None,
                  log_dirs_per_broker: int = 1, broker_overrides: dict[int, dict[str, str]] | None = None,
                  ) -> LocalCluster:
    require_zookeeper()
    settings = {"zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": "6000",
                "controlled.shutdown.retry.backoff.ms": "500", "group.initial.rebalance.delay.ms": "0",
                "offsets.topic.num.partitions": "6", "num.partitions": "3"}
    settings.update(overrides or {})
    cluster = LocalCluster(base, size, overrides=settings, log_dirs_per_broker=log_dirs_per_broker,
                           broker_overrides=dict(broker_overrides or {})).start()
    LIVE_CLUSTERS.append(cluster)

    def everyone_knows_everyone() -> bool:
        for broker in cluster.brokers.values():
            with AdminClient(broker.address, timeout=5) as admin:
                if len(admin.metadata([])[0]) != size:
                    return False
        return True

    try:
        wait_for(everyone_knows_everyone, 30, "every broker's metadata to list the whole cluster")
    except BaseException:
        cluster.stop()  # the fixture never gets it to stop: ZooKeeper and brokers go by PID here (its
        raise           # logs stay listed for the failure report, which drops it once reported)
    return cluster


def stop_cluster(cluster: LocalCluster) -> None:
    cluster.stop()
    if cluster in LIVE_CLUSTERS:
        LIVE_CLUSTERS.remove(cluster)


def live_bootstrap(cluster: LocalCluster) -> str:
    return ",".join(b.address for b in cluster.brokers.values() if b.running)


def failure_report(cluster: LocalCluster) -> str:
    parts = []
    for broker_id, broker in cluster.brokers.items():
        parts.append(f"--- broker {broker_id} (running={broker.running}) ---\n{broker.log_tail(4000)}")
    if cluster.zookeeper is not None:
        parts.append(f"--- zookeeper ---\n{cluster.zookeeper.log_tail(1500)}")
    return "\n".join(parts)


def partitions(cluster: LocalCluster, topic: str, via: int | None = None) -> dict[int, dict]:
    """Partition -> {leader, replicas, isr, offline} as one broker's Metadata answers it."""
    brokers = [via] if via is not None else [i for i, b in cluster.brokers.items() if b.running]
    last: Exception | None = None
    for broker_id in brokers:
        try:
            with AdminClient(cluster.brokers[broker_id].address, timeout=5) as admin:  # one broker's view
                _brokers, topics = admin.metadata([topic])
        except Exception as exc:  # noqa: BLE001 - that broker may be down; ask another
            last = exc
            continue
        t = topics.get(topic)
        if t is None or t.error_code:
            return {}
        return {p.partition_index: {"leader": p.leader_id, "replicas": list(p.replica_nodes),
                                    "isr": list(p.isr_nodes), "offline": list(p.offline_replicas)}
                for p in t.partitions}
    raise AssertionError(f"no broker answered Metadata: {last!r}")


def in_sync(cluster: LocalCluster, topic: str, count: int, rf: int, via: int | None = None) -> bool:
    """Every one of the topic's `count` partitions has a leader and an ISR of `rf` (not vacuously: all there)."""
    parts = partitions(cluster, topic, via=via)
    return len(parts) == count and all(p["leader"] >= 0 and len(p["isr"]) == rf for p in parts.values())


def controller_id(cluster: LocalCluster, via: int | None = None) -> int:
    """The active controller, as one running broker's Metadata answer names it."""
    address = cluster.brokers[via].address if via is not None else live_bootstrap(cluster)
    with AdminClient(address, timeout=10) as admin:
        return admin._any().call(3, {"topics": [], "allow_auto_topic_creation": False}).controller_id


def leader_of(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    return partitions(cluster, topic).get(partition, {}).get("leader", -1)


def create_topic(cluster: LocalCluster, topic: str, num_partitions: int = 3, replication_factor: int = 3,
                 configs: dict[str, str] | None = None) -> None:
    with AdminClient(live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic(topic, partitions=num_partitions, replication_factor=replication_factor,
                           configs=configs or {})
    wait_for(lambda: len(partitions(cluster, topic)) == num_partitions and all(
        p["leader"] >= 0 and len(p["isr"]) == replication_factor for p in partitions(cluster, topic).values()),
        30, f"{topic} online with a full ISR")


class AckedProducer:
    """A confluent-kafka idempotent acks=all producer running in a thread: every acknowledged
    value, per partition, in acknowledgement order (which is offset order)."""

    def __init__(self, bootstrap: str, topic: str, **config) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120000, **config})
        self.acked: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.partition()].append((msg.offset(), msg.value()))

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"v{self.sent}".encode()
            try:
                self.producer.produce(self.topic, key=str(self.sent % 64).encode(), value=value,
                                      on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def start(self) -> "AckedProducer":
        self._thread.start()
        return self

    def stop(self, flush_s: float = 120) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(flush_s)

    @property
    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())


class GroupReader:
    """A confluent-kafka consumer in a group, committing as it goes: every value it received."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        self.consumer.subscribe([topic])
        self.values: set[bytes] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and not msg.error():
                self.values.add(msg.value())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def read_all(bootstrap: str, topic: str, num_partitions: int, timeout_s: float = 60,
             **config) -> dict[int, list[tuple[int, bytes]]]:
    """Everything up to each partition's high watermark, by assign (no group); `config` adds client
    settings (a secured listener's)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_uncommitted", **config})
    try:
        ends = {}
        for p in range(num_partitions):
            for attempt in itertools.count():
                try:
                    _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
                    break
                except KafkaException as exc:  # a leader elected a moment ago: its high watermark is not
                    # caught up yet (KIP-207's OFFSET_NOT_AVAILABLE), as a Kafka client retries it
                    if exc.args[0].code() != KafkaError.OFFSET_NOT_AVAILABLE or attempt >= 40:
                        raise
                    time.sleep(0.25)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(num_partitions)])
        got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        deadline = time.monotonic() + timeout_s
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < num_partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got[msg.partition()].append((msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        assert len(done) == num_partitions, f"read stopped short: {dict((p, len(got[p])) for p in ends)} of {ends}"
        return got
    finally:
        consumer.close()


def check_exactly_once_in_order(acked: dict[int, list[tuple[int, bytes]]], read: dict[int, list[tuple[int, bytes]]]) -> None:
    """Every acknowledged value is in the log once, at the offset it was acknowledged with, and the
    log holds nothing twice."""
    for partition, records in acked.items():
        log = read.get(partition, [])
        values = [v for _, v in log]
        assert len(values) == len(set(values)), f"partition {partition}: duplicates in the log"
        at = dict(log)
        present = set(values)
        # librdkafka reports some deliveries without an offset (a retried batch the broker already
        # had, KIP-360): those must be in the log by value
        missing = [(o, v) for o, v in records if (at.get(o) != v if o is not None and o >= 0 else v not in present)]
        assert not missing, f"partition {partition}: {len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        offsets = [o for o, _ in log]
        assert offsets == sorted(offsets), f"partition {partition}: offsets out of order"
