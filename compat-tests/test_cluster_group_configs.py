"""Per-group configs (KIP-848's GROUP resource) in a two-broker ZooKeeper cluster: set through one
broker with `kbroker configs --group`, described through the other, kept as Kafka's
`/config/groups/<group>` znode, and the group's coordinator — whichever broker it is — answers the
new heartbeat interval within a second of a change made through the other broker."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient
from kbroker.errors import ErrorCode

HEARTBEAT = 68
HB = "consumer.heartbeat.interval.ms"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("group-configs"), 2, {"offsets.topic.replication.factor": "2"})
    yield c
    ck.stop_cluster(c)


def configs(address: str, *args: str) -> list[str]:
    cp = subprocess.run([sys.executable, "-m", "kbroker", "configs", *args, "--bootstrap-server", address],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.splitlines()


def _znode(cluster, path: str) -> bytes:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=f"{cluster.zookeeper.connect}/kbroker")
    zk.start(timeout=10)
    try:
        return zk.get(path)[0]
    finally:
        zk.stop()
        zk.close()


def heartbeat_interval(cluster, group: str) -> int:
    """A member joining `group` at its coordinator: the heartbeat interval it is told."""
    with AdminClient(ck.live_bootstrap(cluster), timeout=10) as admin:
        coordinator = admin.find_coordinator(group)
        body = admin.connection(coordinator.host, coordinator.port).call(HEARTBEAT, {
            "group_id": group, "member_id": f"m-{time.monotonic_ns()}", "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": ["t"],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}, 1)
    assert body.error_code == ErrorCode.none, body
    return int(body.heartbeat_interval.total_seconds() * 1000)


def test_set_through_one_broker_read_and_used_through_the_other(cluster):
    one, two = (b.address for b in cluster.brokers.values())
    assert configs(one, "alter", "--group", "g", "--add-config", f"{HB}=6000") == [
        "Completed updating config for group g."]
    assert configs(two, "describe", "--group", "g") == [
        "Dynamic configs for group g are:",
        f"  {HB}=6000 sensitive=false synonyms={{DYNAMIC_GROUP_CONFIG:{HB}=6000}}"]
    everything = configs(two, "describe", "--entity-type", "groups", "--entity-name", "g", "--all")
    session = "consumer.session.timeout.ms"
    assert f"  {session}=45000 sensitive=false synonyms={{DEFAULT_CONFIG:{session}=45000}}" in everything
    ck.wait_for(lambda: heartbeat_interval(cluster, "g") == 6000, 30, "g's coordinator to answer 6000")
    assert json.loads(_znode(cluster, "/config/groups/g")) == {"version": 1, "config": {HB: "6000"}}

    # a change made through the broker that is not g's coordinator reaches the coordinator at once
    with AdminClient(ck.live_bootstrap(cluster), timeout=10) as admin:
        coordinator = admin.find_coordinator("g")
    other = next(b.address for i, b in cluster.brokers.items() if i != coordinator.node_id)
    configs(other, "alter", "--group", "g", "--add-config", f"{HB}=7000")
    ck.wait_for(lambda: heartbeat_interval(cluster, "g") == 7000, 1.0, "the coordinator to follow within a second")
    configs(other, "alter", "--group", "g", "--delete-config", HB)
    ck.wait_for(lambda: heartbeat_interval(cluster, "g") == 5000, 1.0, "the broker's value back within a second")
    assert configs(one, "describe", "--group", "g") == ["Dynamic configs for group g are:"]
