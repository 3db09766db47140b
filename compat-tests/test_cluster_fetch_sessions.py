"""Followers fetch in incremental sessions (KIP-227), where an idle partition is not read for
their fetches at all: three brokers, RF 3, `replica.lag.time.max.ms` 2 s.

- After many lag periods of idleness, an acks=all producer is served at once and no follower
  leaves an ISR (its caught-up time is carried forward at the next append, from its latest fetch).
- A follower SIGKILLed while a producer writes (its session with each leader is gone with it),
  then restarted, rejoins every ISR through a new session; the leader of partition 0 is then
  SIGKILLed: every acknowledged record is read back once, at its offset, in order."""

from __future__ import annotations

import time

import pytest

import clusterkit as ck

pytestmark = pytest.mark.timeout(240)

LAG_MS = 2000
TOPIC = "idle-then-busy"


def shrinks(cluster) -> int:
    return sum(b.log_path.read_text(errors="replace").count("shrinking ISR")
               for b in cluster.brokers.values() if b.log_path is not None)


def test_idle_partitions_keep_their_isr_and_a_restarted_follower_rejoins(tmp_path):
    cluster = ck.start_cluster(tmp_path / "cluster", 3, {"replica.lag.time.max.ms": str(LAG_MS)})
    try:
        ck.create_topic(cluster, TOPIC, 3, 3)
        ck.wait_for(lambda: ck.in_sync(cluster, TOPIC, 3, 3), 30, f"{TOPIC} in sync")
        time.sleep(4 * LAG_MS / 1000)  # idle: the followers' sessions skip these partitions
        before = shrinks(cluster)
        producer = ck.AckedProducer(ck.live_bootstrap(cluster), TOPIC).start()
        ck.wait_for(lambda: producer.acked_count >= 300, 30, "300 acknowledged records")
        time.sleep(2 * LAG_MS / 1000)
        assert ck.in_sync(cluster, TOPIC, 3, 3), "an idle follower left an ISR once records came"
        assert shrinks(cluster) == before

        leader0 = ck.leader_of(cluster, TOPIC, 0)
        follower = next(b for b in sorted(cluster.brokers) if b != leader0 and b != ck.controller_id(cluster))
        cluster.brokers[follower].kill()
        acked = producer.acked_count
        ck.wait_for(lambda: producer.acked_count >= acked + 300, 60, "300 more acknowledged without the follower")
        cluster.brokers[follower].start()
        ck.wait_for(lambda: ck.in_sync(cluster, TOPIC, 3, 3), 60, "the restarted follower back in every ISR")
        acked = producer.acked_count
        ck.wait_for(lambda: producer.acked_count >= acked + 300, 60, "300 more acknowledged")
        cluster.brokers[leader0].kill()
        acked = producer.acked_count
        ck.wait_for(lambda: producer.acked_count >= acked + 300, 90, "300 more acknowledged after the leader's kill")
        producer.stop()
        assert not producer.failed, producer.failed[:3]
        ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), TOPIC, 3))
    finally:
        ck.stop_cluster(cluster)
