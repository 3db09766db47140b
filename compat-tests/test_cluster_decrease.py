"""Partition decrease (kbroker's own) in a three-broker cluster (real ZooKeeper, real kbroker
processes), through `kbroker topics alter T --partitions 3` as a user would — an
IncrementalAlterConfigs of the topic's `partitions.retire.from`; CreatePartitions with a lower count
is Kafka's INVALID_PARTITIONS (checked with Java's Admin and kafka-python in the retention test).

A keyed topic of 6 partitions is produced to (librdkafka, its default consistent_random
partitioner, so the drain is told `--partitioner consistent_random`; values carry a per-key
sequence number) and consumed by a group while it is decreased to 3. Checked afterwards:
- every client family (confluent-kafka, kafka-python, aiokafka, kcat, the Java Admin client) sees
  3 partitions;
- every acknowledged record was consumed by the group at least once;
- no acknowledged record is lost: each one is in partitions 0-2, or in a retired partition below
  the point the drain started from (which every group had already consumed);
- the records produced after the decrease keep per-key order: for each key, they sit in the
  partition the partitioner picks for 3, in sequence order;
- no send fails: librdkafka never lowers a partition count it knows, so this producer keeps
  writing to the retired partitions, which still take appends; their drains copy that as well.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient
from kbroker.admin.shrink import drain_group
from kbroker.partitioners import target_partition

pytestmark = pytest.mark.timeout(600)

KEYS = 24


class KeyedProducer:
    """librdkafka, acks=all, idempotent; value = b"<key>:<seq>"; every acknowledgement with its
    partition and offset, every failure with its error."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 60000,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.acked: list[tuple[int, int, bytes, float]] = []  # partition, offset, value, partition-time
        self.failed: list[tuple[bytes, str]] = []
        self.partition_count_seen: dict[float, int] = {}
        self.seq = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            key = str(self.sent % KEYS).encode()
            value = key + b":" + str(self.seq[key]).encode()
            self.seq[key] += 1
            sent_at = time.monotonic()
            try:
                self.producer.produce(self.topic, key=key, value=value,
                                      on_delivery=lambda err, msg, t=sent_at: self._done(err, msg, t))
                self.sent += 1
            except BufferError:
                self.seq[key] -= 1
            self.producer.poll(0.003)

    def _done(self, err, msg, sent_at: float) -> None:
        if err is not None:
            self.failed.append((msg.value(), err.str()))
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value(), sent_at))

    def start(self) -> "KeyedProducer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(60)


def partition_counts(cluster, java_harness, kcat, topic: str) -> dict[str, int]:
    """The topic's partition count as each client family's metadata reports it."""
    from aiokafka.admin import AIOKafkaAdminClient
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from kafka import KafkaConsumer

    bootstrap = ck.live_bootstrap(cluster)
    out = {"confluent": len(ConfluentAdmin({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
                            .topics[topic].partitions)}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        out["kafka-python"] = len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()

    async def aiokafka_count() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return len((await admin.describe_topics([topic]))[0]["partitions"])
        finally:
            await admin.close()
    out["aiokafka"] = asyncio.run(aiokafka_count())
    listing = subprocess.run([kcat, "-b", bootstrap, "-L", "-t", topic], capture_output=True, text=True, timeout=60)
    out["kcat"] = sum(1 for line in listing.stdout.splitlines() if line.strip().startswith("partition "))
    lines = java_harness.ok("admin", bootstrap, "describe", topic, timeout=90)
    out["java"] = sum(1 for line in lines if line.startswith("PARTITION "))
    return out


def test_a_keyed_topic_shrinks_from_6_to_3_under_load(tmp_path, java_harness, kt):
    kcat = kt.require_exe("kcat")
    cluster = ck.start_cluster(tmp_path / "cluster", 3)
    try:
        with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
            admin.create_topic("shrinking", partitions=6, replication_factor=2)
        ck.wait_for(lambda: ck.in_sync(cluster, "shrinking", 6, 2), 30, "shrinking online")
        producer = KeyedProducer(ck.live_bootstrap(cluster), "shrinking").start()
        reader = ck.GroupReader(ck.live_bootstrap(cluster), "shrinking", "shrinkers")
        time.sleep(3)
        shrunk = subprocess.run([sys.executable, "-m", "kbroker", "topics", "alter", "shrinking", "--partitions", "3",
                                 "--partitioner", "consistent_random", "--bootstrap-server", ck.live_bootstrap(cluster)],
                                capture_output=True, text=True, timeout=300)
        assert shrunk.returncode == 0, shrunk.stdout + shrunk.stderr
        assert "Topic shrinking now has 3 partitions; partitions 3, 4, 5 are retired" in shrunk.stdout, shrunk.stdout
        decreased_at = time.monotonic()
        time.sleep(4)  # the producer goes on
        producer.stop()

        assert partition_counts(cluster, java_harness, kcat, "shrinking") == \
            {"confluent": 3, "kafka-python": 3, "aiokafka": 3, "kcat": 3, "java": 3}
        assert len(producer.acked) > 300
        assert not producer.failed, producer.failed[:5]  # retired partitions still take appends
        assert any(t > decreased_at + 2 for *_, t in producer.acked), "the producer kept going after the decrease"
        # librdkafka never lowers a partition count it knows: this producer kept writing to 3-5, and the
        # drains copied that too; run again, the command waits until they have caught up
        again = subprocess.run([sys.executable, "-m", "kbroker", "topics", "alter", "shrinking", "--partitions", "3",
                                "--bootstrap-server", ck.live_bootstrap(cluster)], capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert any(p >= 3 and t > decreased_at + 1 for p, _, _, t in producer.acked)

        # every acknowledged record consumed by the group at least once
        acked_values = {v for _, _, v, _ in producer.acked}
        ck.wait_for(lambda: acked_values <= reader.values, 90,
                    "the group to consume every acknowledged record",)
        reader.stop()

        # nothing acknowledged lost: in partitions 0-2, or below where the drain started in a retired one
        survivors = ck.read_all(ck.live_bootstrap(cluster), "shrinking", 3)
        in_survivors = {v for recs in survivors.values() for _, v in recs}
        with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
            drained_to = admin.committed_offsets(drain_group("shrinking"))
        assert sorted(p for _, p in drained_to) == [3, 4, 5]
        for partition, offset, value, _ in producer.acked:
            if partition < 3:
                assert value in in_survivors, f"acknowledged {value!r} at {partition}/{offset} lost"
            else:
                assert offset < drained_to[("shrinking", partition)], f"{value!r} at {partition}/{offset} not drained"
        retired_values = {v for p, _, v, _ in producer.acked if p >= 3}
        assert retired_values - reader.values == set()

        # per-key order for what was produced after the decrease
        after = {v for p, _, v, t in producer.acked if t > decreased_at}
        assert after, "nothing produced after the decrease"
        for partition, recs in survivors.items():
            seqs = defaultdict(list)
            for _, v in recs:
                if v in after:
                    key, seq = v.split(b":")
                    assert target_partition(key, 0, 3, "consistent_random") == partition, (key, partition)
                    seqs[key].append(int(seq))
            for key, got in seqs.items():
                assert got == sorted(got), f"key {key!r}: {got[:20]} out of order in partition {partition}"
    finally:
        ck.stop_cluster(cluster)


def alter(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "topics", "alter", *args, "--bootstrap-server",
                           ck.live_bootstrap(cluster)], capture_output=True, text=True, timeout=300)


def test_a_drain_survives_the_kill_of_its_leader(tmp_path):
    """No group reads the topic, so each drain copies its retired partition from its start. A
    backlog sits in retired partition 3 when the decrease starts; the leader draining it is killed
    (SIGKILL) mid-way: another replica takes over its leadership and its drain, from the drain's
    last commit. In the end every acknowledged record is in partitions 0-1 (copies allowed, losses
    not), and partition 3's drain has reached its end."""
    from confluent_kafka import Producer

    cluster = ck.start_cluster(tmp_path / "cluster", 3)
    try:
        with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
            admin.create_topic("halved", partitions=4, replication_factor=3)
        ck.wait_for(lambda: ck.in_sync(cluster, "halved", 4, 3), 30, "halved online")
        acked: list[bytes] = []
        producer = Producer({"bootstrap.servers": ck.live_bootstrap(cluster), "acks": "all",
                             "enable.idempotence": True, "linger.ms": 20})
        for i in range(40000):
            while True:
                try:
                    producer.produce("halved", key=f"k{i % 97}".encode(), value=f"{i:08d}".encode() + b"x" * 500,
                                     partition=3 if i % 4 else i % 3,
                                     on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(60)
        assert len(acked) == 40000
        end = ck.partitions(cluster, "halved")  # still 4 partitions here
        assert len(end) == 4
        shrinking = subprocess.Popen([sys.executable, "-m", "kbroker", "topics", "alter", "halved", "--partitions", "2",
                                      "--bootstrap-server", ck.live_bootstrap(cluster)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        leader = end[3]["leader"]
        with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
            def mid_way():
                at = admin.committed_offsets(drain_group("halved")).get(("halved", 3))
                return at is not None and 0 < at < 30000 and at
            ck.wait_for(mid_way, 60, "the drain of halved-3 to be under way", interval=0.02)
        cluster.brokers[leader].kill()
        out, err = shrinking.communicate(timeout=240)
        assert shrinking.returncode == 0, out + err
        assert "partitions 2, 3 are retired" in out
        cluster.brokers[leader].start()
        survivors = ck.read_all(ck.live_bootstrap(cluster), "halved", 2)
        present = {v for recs in survivors.values() for _, v in recs}
        missing = set(acked) - present
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    finally:
        ck.stop_cluster(cluster)


def test_retired_partitions_are_removed_after_retention(tmp_path, java_harness):
    """CreatePartitions with fewer partitions stays Kafka's INVALID_PARTITIONS in a cluster (Java's
    Admin, kafka-python); the decrease is asked for explicitly, here by Java's
    incrementalAlterConfigs of `partitions.retire.from` (with `retired.records.partitioner`), and
    `kbroker topics alter --partitions 2` run after it waits for the drains. Once retention.ms is
    short (set after the drains), with everything drained and retention having emptied them, the
    retired partitions go: their logs are deleted on every broker, and the topic can grow again (the
    new partitions start empty)."""
    from kafka.admin import KafkaAdminClient

    cluster = ck.start_cluster(tmp_path / "cluster", 3, {"log.retention.check.interval.ms": "500"})
    try:
        with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
            admin.create_topic("fading", partitions=4, replication_factor=2)
        ck.wait_for(lambda: ck.in_sync(cluster, "fading", 4, 2), 30, "fading online")

        higher = "Topic currently has 4 partitions, which is higher than the requested 2."
        refused = java_harness.ok("admin", ck.live_bootstrap(cluster), "create-partitions", "fading", "2", timeout=90)
        assert [json.loads(line) for line in refused if line.startswith("{")] == [
            {"call": "create-partitions", "error": "InvalidPartitionsException", "message": higher}]
        kp = KafkaAdminClient(bootstrap_servers=ck.live_bootstrap(cluster))
        try:
            (result,) = kp.create_partitions({"fading": 2}, raise_errors=False).results
            assert (result.error_code, result.error_message) == (37, higher)  # INVALID_PARTITIONS
        finally:
            kp.close()
        assert len(ck.partitions(cluster, "fading")) == 4

        producer = KeyedProducer(ck.live_bootstrap(cluster), "fading").start()
        time.sleep(1)
        producer.stop()
        assert not producer.failed and any(p >= 2 for p, *_ in producer.acked)
        asked = java_harness.ok("admin", ck.live_bootstrap(cluster), "alter-configs", "topic", "fading", "apply",
                                "set:retired.records.partitioner=consistent_random", "set:partitions.retire.from=2",
                                timeout=90)
        assert [json.loads(line) for line in asked if line.startswith("{")] == [{"result": "ok"}]
        ck.wait_for(lambda: len(ck.partitions(cluster, "fading")) == 2, 30, "Metadata to list 2 partitions")
        shrunk = alter(cluster, "fading", "--partitions", "2")  # the same count again: waits for the drains
        assert shrunk.returncode == 0, shrunk.stdout + shrunk.stderr
        copied = {v for recs in ck.read_all(ck.live_bootstrap(cluster), "fading", 2).values() for _, v in recs}
        assert {v for *_, v, _ in producer.acked} <= copied  # everything reached partitions 0-1 first
        short = alter(cluster, "fading", "--config", "retention.ms=4000")
        assert short.returncode == 0, short.stdout + short.stderr

        def retired_dirs() -> list[str]:
            return [d.name for b in cluster.brokers.values() for d in (b.data_dir / "data").glob("fading-*")
                    if d.name.split("-")[1] in ("2", "3") and not d.name.endswith(("-delete", "-stray"))]

        ck.wait_for(lambda: not retired_dirs(), 60, "the retired partitions' logs to be deleted everywhere")
        grown = alter(cluster, "fading", "--partitions", "3")
        assert grown.returncode == 0, grown.stdout + grown.stderr
        ck.wait_for(lambda: ck.in_sync(cluster, "fading", 3, 2), 30, "fading-2 online again")
        with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
            assert admin.list_offsets([("fading", 2)], -1)[("fading", 2)] == 0  # a new, empty partition
    finally:
        ck.stop_cluster(cluster)
