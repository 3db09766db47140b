"""Delayed delivery in a three-broker cluster (real ZooKeeper, real kbroker processes, clusterkit):
`__delayed_messages` replicated 3 times with min.insync.replicas 2, the target partition led by
another broker than its delay-log partition, so schedules are forwarded and deliveries are sent
over the Kafka protocol. Mid-way the delay-log partition's leader is kill -9'ed: the broker that
takes over loads the pending records (and resends an interrupted delivery with its recorded
producer id and sequence), so every acknowledged record is delivered exactly once, not early, in
due order; then the killed broker comes back. Written once, run through confluent-kafka and
kafka-python (delayedkit). Retry tiers, built on it, are checked in the same cluster: replicated
like their main topic, a record produced to a tier back in the main topic or in the dead-letter topic."""

from __future__ import annotations

import random
import time

import pytest

import clusterkit as ck
import delayedkit as dk
from kbroker.delayed.format import DELAYED_TOPIC, partition_for

pytestmark = pytest.mark.timeout(300)

DELAY_PARTITIONS = 3
OVERRIDES = {
    "delayed.messages.topic.num.partitions": str(DELAY_PARTITIONS),
    "delayed.messages.topic.replication.factor": "3",
    "delayed.messages.topic.min.isr": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("delayed-cluster"), 3, OVERRIDES)
    yield c
    ck.stop_cluster(c)


@pytest.mark.parametrize("family", dk.FAMILIES)
def test_delay_log_leader_killed_nothing_lost_or_doubled(cluster, kt, family):
    kt.require_module(dk.MODULES[family])
    dk.create_delay_log_in_cluster(cluster, DELAY_PARTITIONS, 3)
    topic = kt.topic_name(family, "cluster-delayed")
    delay_partition = partition_for((topic, 0), DELAY_PARTITIONS)
    victim = ck.leader_of(cluster, DELAYED_TOPIC, delay_partition)
    others = [b for b in cluster.brokers if b != victim]
    with ck.AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:  # the target led elsewhere
        admin.create_topic(topic, assignment=[[others[0], victim, others[1]]])
    ck.wait_for(lambda: ck.in_sync(cluster, topic, 1, 3), 30, f"{topic} in sync")

    rng = random.Random(11)
    producer = dk.Producer(family, ck.live_bootstrap(cluster))
    sent = []
    try:
        for chunk in range(3):
            sent += producer.send(topic, [(None, f"c{chunk}-{i}".encode(),
                                           [("delay.ms", str(rng.randint(300, 6000)).encode())], dk.now_ms())
                                          for i in range(40)])
    finally:
        producer.close()
    time.sleep(1.5)  # some delivered, the rest pending
    cluster.brokers[victim].kill()
    ck.wait_for(lambda: ck.leader_of(cluster, DELAYED_TOPIC, delay_partition) not in (-1, victim), 60,
                f"a new leader for {DELAYED_TOPIC}-{delay_partition}")
    got = dk.read(family, ck.live_bootstrap(cluster), topic, len(sent), timeout=60)
    dk.check_delivered(sent, got)
    cluster.brokers[victim].start()
    ck.wait_for(lambda: ck.in_sync(cluster, DELAYED_TOPIC, DELAY_PARTITIONS, 3), 90, "the killed broker back in sync")


def test_retry_tiers_replicated_and_redelivered_across_brokers(cluster, kt):
    """Retry tiers (built on delayed delivery) in the cluster: created with the main topic's
    partition count and replication factor, and a record produced to a tier comes back to the main
    topic (or reaches the dead-letter topic) through whichever brokers lead the tier, the delay log
    and the target."""
    kt.require_module("confluent_kafka")
    kt.require_module("kafka")
    dk.create_delay_log_in_cluster(cluster, DELAY_PARTITIONS, 3)
    topic = kt.topic_name("cluster", "retry")
    ck.create_topic(cluster, topic, 2, 3, {"retry.topics": "500ms"})  # max.delivery.attempts: 2
    for name in (f"{topic}.retry.500ms", f"{topic}.dlq"):
        ck.wait_for(lambda: ck.in_sync(cluster, name, 2, 3), 30, f"{name}: 2 partitions, 3 replicas in sync")
    producer = dk.Producer("confluent", ck.live_bootstrap(cluster))
    try:
        sent = producer.send(f"{topic}.retry.500ms", [(b"k", b"again", [("error", b"e")], dk.now_ms()),
                                                       (b"k", b"dead", [("retry.count", b"1")], dk.now_ms())],
                             partition=1)
    finally:
        producer.close()
    back = dk.read("kafka-python", ck.live_bootstrap(cluster), topic, 1, timeout=20, partition=1)
    assert [(g.key, g.value, dk.header(g.headers, "retry.count")) for g in back] == [(b"k", b"again", b"1")]
    assert back[0].received_ms >= sent[0].sent_ms + 500
    dead = dk.read("kafka-python", ck.live_bootstrap(cluster), f"{topic}.dlq", 1, timeout=20, partition=1)
    assert [(g.value, dk.header(g.headers, "dlq.reason")) for g in dead] == \
        [(b"dead", b"max.delivery.attempts 2 exceeded")]
