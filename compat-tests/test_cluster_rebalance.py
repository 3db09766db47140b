"""Evening out a cluster (real ZooKeeper, real kbroker processes), through the CLI as a user would:

- a fourth broker joins a three-broker cluster under load (an idempotent acks=all producer and a
  consumer group); `kbroker cluster rebalance` first only prints its plan and moves nothing, then
  with --execute moves replicas onto the new broker with add-then-drop moves and elects the
  preferred leaders: every broker's replica count and leader count (every topic, the internal
  `__consumer_offsets` included) end within one of each other, every acknowledged record is read
  back exactly once in order, and the group consumes all of them;
- `kbroker cluster elect-leaders` (ElectLeaders): after a broker's restart leaves leadership away
  from the preferred replicas (auto.leader.rebalance.enable=false here), a preferred election brings
  it back and a second one says nothing was needed; an offline partition whose only in-sync
  replica is gone refuses a preferred election and takes an unclean one (the live, out-of-sync
  replica leads).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient

pytestmark = pytest.mark.timeout(600)

NO_AUTO_REBALANCE = {"auto.leader.rebalance.enable": "false"}


def kbroker(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "cluster", *args, "--bootstrap-server",
                           ck.live_bootstrap(cluster)], capture_output=True, text=True, timeout=240)


def counts(cluster) -> tuple[dict[int, int], dict[int, int], int]:
    """(replicas per broker, leaders per broker, partitions) over every topic, as Metadata says."""
    with AdminClient(ck.live_bootstrap(cluster), timeout=10) as admin:
        brokers, topics = admin.describe_topics(None)
    replicas = {b: 0 for b in brokers}
    leaders = {b: 0 for b in brokers}
    total = 0
    for t in topics:
        for p in t.partitions:
            total += 1
            for r in p.replicas:
                replicas[r] += 1
            if p.leader in leaders:
                leaders[p.leader] += 1
    return replicas, leaders, total


def spread(values: dict[int, int]) -> int:
    return max(values.values()) - min(values.values())


def test_a_new_broker_gets_its_share_of_replicas_and_leaders_under_load(tmp_path):
    cluster = ck.start_cluster(tmp_path / "cluster", 3, NO_AUTO_REBALANCE)
    try:
        with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
            admin.create_topic("spread", partitions=6, replication_factor=2)
            admin.create_topic("wide", partitions=2, replication_factor=3)
        ck.wait_for(lambda: ck.in_sync(cluster, "spread", 6, 2) and ck.in_sync(cluster, "wide", 2, 3), 30,
                    "topics online")
        producer = ck.AckedProducer(ck.live_bootstrap(cluster), "spread").start()
        reader = ck.GroupReader(ck.live_bootstrap(cluster), "spread", "spreaders")
        time.sleep(2)
        cluster.add_broker(4)
        ck.wait_for(lambda: 4 in counts(cluster)[0], 30, "broker 4 in the metadata")
        assert counts(cluster)[0][4] == 0

        planned = kbroker(cluster, "rebalance")
        assert planned.returncode == 0, planned.stderr
        assert "would change; run again with --execute" in planned.stdout, planned.stdout
        assert counts(cluster)[0][4] == 0  # a dry run moves nothing

        done = kbroker(cluster, "rebalance", "--execute", "--wait", "180")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Done (" in done.stdout
        replicas, leaders, total = counts(cluster)
        assert spread(replicas) <= 1 and replicas[4] > 0, replicas
        assert spread(leaders) <= 1 and sum(leaders.values()) == total, leaders
        assert ck.in_sync(cluster, "spread", 6, 2) and ck.in_sync(cluster, "wide", 2, 3)
        again = kbroker(cluster, "rebalance")
        assert "The cluster is balanced: nothing to move." in again.stdout, again.stdout

        time.sleep(1)  # the producer keeps going on the new placement
        producer.stop()
        assert not producer.failed and producer.acked_count > 100
        ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "spread", 6))
        acked = {v for values in producer.acked.values() for _, v in values}
        ck.wait_for(lambda: acked <= reader.values, 60, "the group to consume every acknowledged record")
        reader.stop()
    finally:
        ck.stop_cluster(cluster)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("cluster"), 3, NO_AUTO_REBALANCE)
    yield c
    ck.stop_cluster(c)


def test_preferred_election_brings_leadership_back_after_a_restart(cluster):
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("pref", assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    ck.wait_for(lambda: ck.in_sync(cluster, "pref", 3, 3), 30, "pref online")
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "pref").start()
    time.sleep(1)
    cluster.brokers[1].kill()
    ck.wait_for(lambda: ck.partitions(cluster, "pref")[0]["leader"] in (2, 3), 30, "pref-0 to fail over")
    cluster.brokers[1].start()
    ck.wait_for(lambda: ck.in_sync(cluster, "pref", 3, 3), 60, "broker 1 back in every ISR")
    assert ck.partitions(cluster, "pref")[0]["leader"] != 1  # no automatic rebalance here

    elected = kbroker(cluster, "elect-leaders", "--topic", "pref")
    assert elected.returncode == 0, elected.stderr
    assert "Successfully completed leader election (preferred) for partitions pref-0" in elected.stdout
    ck.wait_for(lambda: {p: v["leader"] for p, v in ck.partitions(cluster, "pref").items()} == {0: 1, 1: 2, 2: 3},
                30, "every partition led by its preferred replica")
    again = kbroker(cluster, "elect-leaders", "--topic", "pref")
    assert again.returncode == 0, again.stderr
    assert "Valid replica already elected for partitions pref-0, pref-1, pref-2" in again.stdout
    time.sleep(1)
    producer.stop()
    assert not producer.failed and producer.acked_count > 50
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "pref", 3))


def test_unclean_election_revives_a_partition_whose_in_sync_replica_is_gone(cluster):
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("lossy", assignment=[[2, 3]])
    ck.wait_for(lambda: ck.in_sync(cluster, "lossy", 1, 2), 30, "lossy online")
    cluster.brokers[3].kill()
    ck.wait_for(lambda: ck.partitions(cluster, "lossy")[0]["isr"] == [2], 30, "broker 3 out of the ISR")
    cluster.brokers[2].kill()
    ck.wait_for(lambda: ck.partitions(cluster, "lossy")[0]["leader"] == -1, 30, "lossy offline")
    cluster.brokers[3].start()
    time.sleep(2)
    assert ck.partitions(cluster, "lossy")[0]["leader"] == -1  # 3 is not in the ISR: no clean leader
    refused = kbroker(cluster, "elect-leaders", "--topic", "lossy")
    assert refused.returncode == 1 and "PREFERRED_LEADER_NOT_AVAILABLE" in refused.stderr, refused.stderr
    unclean = kbroker(cluster, "elect-leaders", "--topic", "lossy", "--election-type", "unclean")
    assert unclean.returncode == 0, unclean.stderr
    assert "Successfully completed leader election (unclean) for partitions lossy-0" in unclean.stdout
    ck.wait_for(lambda: ck.partitions(cluster, "lossy")[0]["leader"] == 3, 30, "broker 3 leading lossy-0")
    cluster.brokers[2].start()
    ck.wait_for(lambda: ck.in_sync(cluster, "lossy", 1, 2), 60, "broker 2 back in the ISR")
