"""Spark Structured Streaming over a three-broker kbroker cluster (real ZooKeeper, `clusterkit`):
the streaming ETL's archive query reads a replicated topic while an idempotent acks=all producer
writes, and the leader of one partition is SIGKILLed, then started again.

Spark's driver asks ListOffsets latest of each partition's leader before every micro-batch; a
new leader whose high watermark still trails the old one's must not answer a lower latest offset
(Kafka answers OFFSET_NOT_AVAILABLE until it has caught up): Spark would take the step back for
data loss and stop the query. At the end the archive holds every acknowledged record once, at
its offset, and is the topic, record for record.
"""

from __future__ import annotations

import uuid

import pytest

import clusterkit as ck
import sparkkit

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("cluster"), 3)
    yield c
    ck.stop_cluster(c)


def test_streaming_read_survives_leader_kill(kt, cluster, spark, tmp_path):
    kt.require_module("confluent_kafka")
    etl = sparkkit.example("sensor_etl")
    topic = f"spark-failover-{uuid.uuid4().hex[:8]}"
    ck.create_topic(cluster, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    archive = tmp_path / "archive"
    query = etl.start_archive(spark, cluster.bootstrap, topic, archive, tmp_path / "checkpoint",
                              trigger="500 milliseconds")
    producer = ck.AckedProducer(cluster.bootstrap, topic).start()
    try:
        def archived() -> int:
            return sum(p["numInputRows"] for p in query.recentProgress)

        kt.wait_until(lambda: producer.acked_count >= 300 and archived() > 0, 60, "records acknowledged and archived")
        victim = ck.leader_of(cluster, topic, 0)
        assert victim in cluster.brokers, f"partition 0 has no leader: {ck.partitions(cluster, topic)}"
        cluster.brokers[victim].kill()
        ck.wait_for(lambda: ck.leader_of(cluster, topic, 0) not in (-1, victim), 30,
                    f"a new leader of partition 0 after broker {victim} was killed")
        before = (producer.acked_count, archived())
        try:
            kt.wait_until(lambda: producer.acked_count >= before[0] + 300 and archived() > before[1], 60,
                          "acknowledged and archived records after the failover")
        except AssertionError as exc:  # which side stalled: the producer's acks or Spark's archive
            raise AssertionError(f"{exc}: acknowledged {before[0]} -> {producer.acked_count}, archived "
                                 f"{before[1]} -> {archived()}, partitions {ck.partitions(cluster, topic)}, "
                                 f"last progress {query.lastProgress}") from None
        cluster.brokers[victim].start()
        ck.wait_for(lambda: ck.in_sync(cluster, topic, PARTITIONS, 3), 60, f"broker {victim} back in every ISR")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    assert query.exception() is None, query.exception()

    in_log = sparkkit.read_topic(kt, spark, ck.live_bootstrap(cluster), topic)
    try:
        rows = sparkkit.wait_archive(kt, spark, archive, topic, len(in_log), 90, "after the failover")
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    assert rows == in_log
    ck.check_exactly_once_in_order(producer.acked, {p: [(r.offset, r.value) for r in recs]
                                                    for p, recs in kt.by_partition(rows).items()})
    for p, recs in kt.by_partition(in_log).items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"partition {p}: offsets not dense"
