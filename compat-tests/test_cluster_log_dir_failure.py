"""A log dir that fails under a partition's leader in a three-broker cluster (real ZooKeeper, real
kbroker processes, two log dirs per broker), under an idempotent acks=all producer
(min.insync.replicas=2):

- the leader's dir is replaced by a regular file; the next segment roll hits the error, the broker
  takes the dir offline and writes Kafka's `/log_dir_event_notification` znode;
- the controller moves leadership to another ISR member within a bound, the failed replica leaves
  the ISR and every broker's Metadata lists it in offline_replicas; the broker itself keeps running
  (its other dir serves) and the notification is deleted once handled;
- produce goes on, and every acknowledged record is read back exactly once, at its offset, in order;
- after the dir is repaired and the broker restarted, it rejoins the ISR and is no longer offline.
"""

from __future__ import annotations

import os
import time

import pytest

import clusterkit as ck
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.client import ZkClient

pytestmark = pytest.mark.timeout(300)

TOPIC = "dirfail"
LEADER_MOVE_BOUND_S = 20


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 3, log_dirs_per_broker=2)
    yield c
    ck.stop_cluster(c)


def log_dir_notifications(cluster) -> list[str]:
    client = ZkClient(cluster.zookeeper.connect + cluster.chroot, ck.SESSION_MS)
    client.start()
    try:
        return client.children(zk.LOG_DIR_EVENT_NOTIFICATION)
    finally:
        client.close()


def test_a_failed_log_dir_under_the_leader_moves_leadership_and_loses_nothing(cluster):
    ck.create_topic(cluster, TOPIC, 1, 3, {"min.insync.replicas": "2", "segment.bytes": "4096"})
    # batches stay below segment.bytes even when records pile up while leadership moves
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), TOPIC, **{"batch.size": 2048}).start()
    failing = parked = None
    try:
        ck.wait_for(lambda: producer.acked_count > 300, 60, "acknowledgements before the failure")
        victim = ck.leader_of(cluster, TOPIC, 0)
        broker = cluster.brokers[victim]
        (failing,) = [d for d in broker.log_dirs if (d / f"{TOPIC}-0").is_dir()]
        parked = failing.with_name(failing.name + ".parked")
        os.replace(failing, parked)  # the dir is gone under the broker, a regular file in its place
        failing.write_bytes(b"not a directory")
        failed_at = time.monotonic()

        ck.wait_for(lambda: ck.leader_of(cluster, TOPIC, 0) not in (-1, victim), LEADER_MOVE_BOUND_S,
                    f"leadership to move off broker {victim}'s failed log dir")
        moved_after = time.monotonic() - failed_at
        new_leader = ck.leader_of(cluster, TOPIC, 0)

        def offline_everywhere() -> bool:
            views = [ck.partitions(cluster, TOPIC, via=b).get(0, {}) for b in cluster.brokers]
            return all(v.get("offline") == [victim] and victim not in v.get("isr", [victim])
                       and v.get("leader") == new_leader for v in views)
        ck.wait_for(offline_everywhere, 10, f"every broker to show broker {victim} offline and out of the ISR")
        assert len(ck.partitions(cluster, TOPIC)[0]["isr"]) == 2
        assert broker.running, "the broker keeps serving its other log dir"
        assert "is offline" in broker.log_tail(20000)
        ck.wait_for(lambda: log_dir_notifications(cluster) == [], 10, "the handled notification to be deleted",
                    interval=0.5)

        acked_at_move = producer.acked_count
        ck.wait_for(lambda: producer.acked_count > acked_at_move + 300, 60, "produce to go on after the failure")
    finally:
        producer.stop()
    assert producer.failed == []
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), TOPIC, 1))
    print(f"leadership moved {moved_after:.1f} s after the dir failed; {producer.acked_count} records acknowledged")

    assert broker.stop() == 0
    failing.unlink()
    os.replace(parked, failing)  # repaired
    broker.start()
    ck.wait_for(lambda: all(len(ck.partitions(cluster, TOPIC, via=b)[0]["isr"]) == 3
                            and ck.partitions(cluster, TOPIC, via=b)[0]["offline"] == [] for b in cluster.brokers),
                60, f"broker {victim} back in the ISR after the repair")
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), TOPIC, 1))
