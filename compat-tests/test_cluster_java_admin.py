"""Partition reassignment driven by the stock Java Admin client (kafka-clients 3.9.0; the error cases
with 4.3.0 too) against a four-broker kbroker cluster coordinated by a real ZooKeeper (clusterkit):
AlterPartitionReassignments v0 and ListPartitionReassignments v0, through
`KbrokerHarness admin reassign / cancel-reassign / list-reassign`.

- Errors, as the Java client raises them: a replica list naming a broker that does not exist or
  naming one twice -> InvalidReplicaAssignmentException; a partition or topic that does not exist ->
  UnknownTopicOrPartitionException; a cancel with no move in progress ->
  NoReassignmentInProgressException. Nothing moves.
- A move: every replica of every partition of an RF-2 topic goes to the two other brokers while an
  idempotent acks=all producer writes. listPartitionReassignments shows each move still in progress
  with Kafka's replica sets (target + original, adding = target, removing = original) or nothing
  once it is complete; then every broker's Metadata (and the Java describeTopics) has the target as
  the replicas with a full ISR, the list is empty, the old brokers delete their copies, and every
  acknowledged record is read back exactly once, at its offset.
- A cancel: the new replica's broker is paused (SIGSTOP on the process the fixture started) so the
  move cannot complete; listPartitionReassignments shows it, the cancel (Optional.empty()) puts the
  partition back on its original replicas in their order, the list is empty, and once the broker is
  resumed (SIGCONT) the ISR is full, its half-made copy is deleted and nothing acknowledged is lost.

The cluster's ZooKeeper sessions are longer than clusterkit's default so a broker paused across a
few JVM starts stays registered (the move must be refused only for brokers that do not exist).

Leader elections through `Admin.electLeaders` (ElectLeaders v1-2, `KbrokerHarness admin elect`) on a
separate three-broker cluster with auto.leader.rebalance.enable=false, so leadership moves back only
when asked: a preferred replica killed and restarted leads again after a preferred election (and only
then); Kafka's per-partition errors (ElectionNotNeededException for a partition its preferred replica
already leads or, unclean, one with a live leader; PreferredLeaderNotAvailableException while the
preferred replica is down; UnknownTopicOrPartitionException); null partitions (every partition:
as Kafka answers, only the partitions that needed an election are listed); an idempotent acks=all
producer running throughout loses nothing it was acknowledged. The single node's answers to the same
calls: test_single_node_admin.py.
"""

from __future__ import annotations

import json
import time

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient

pytestmark = pytest.mark.timeout(300)

BROKERS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("cluster"), len(BROKERS), {"zookeeper.session.timeout.ms": "20000"})
    yield c
    ck.stop_cluster(c)


def bootstrap(cluster, avoid: int | None = None) -> str:
    return ",".join(cluster.brokers[b].address for b in BROKERS if b != avoid)


def java_admin(java_harness, cluster, *args: str, avoid: int | None = None) -> list[dict]:
    """The JSON lines of one `KbrokerHarness admin` call (it must exit 0)."""
    lines = java_harness.ok("admin", bootstrap(cluster, avoid), *args, timeout=90)
    return [json.loads(ln) for ln in lines if ln.startswith("{")]


def reassign(java_harness, cluster, topic: str, partition: int, target: list[int] | None,
             avoid: int | None = None) -> dict:
    """One partition's outcome: {"result": "ok"} or {"error": <Java exception class>, "message": ...}."""
    if target is None:
        out = java_admin(java_harness, cluster, "cancel-reassign", topic, str(partition), avoid=avoid)
    else:
        out = java_admin(java_harness, cluster, "reassign", topic, str(partition), ",".join(map(str, target)),
                         avoid=avoid)
    assert len(out) == 1, out
    line = out[0]
    assert (line["call"], line["topic"], line["partition"]) == (
        "reassign" if target is not None else "cancel-reassign", topic, partition), line
    return {k: v for k, v in line.items() if k in ("result", "error", "message")}


def listed(java_harness, cluster, topic: str | None = None, avoid: int | None = None) -> dict[tuple[str, int], dict]:
    """listPartitionReassignments (every partition): (topic, partition) -> its replica sets, of
    `topic` only if given."""
    return {(e["topic"], e["partition"]): {k: e[k] for k in ("replicas", "addingReplicas", "removingReplicas")}
            for e in java_admin(java_harness, cluster, "list-reassign", avoid=avoid)
            if topic is None or e["topic"] == topic}


def java_replicas(java_harness, cluster, topic: str) -> dict[int, list[int]]:
    """The replicas of each partition as the Java client's describeTopics sees them."""
    out = {}
    for ln in java_harness.ok("admin", bootstrap(cluster), "describe", topic):
        if ln.startswith("PARTITION "):
            _, p, _leader, replicas = ln.split()
            out[int(p)] = [int(r) for r in replicas.split(",")]
    return out


def settled(cluster, topic: str, targets: dict[int, list[int]], brokers=BROKERS) -> bool:
    """Every broker in `brokers` answers Metadata with exactly `targets` as the replicas, a leader
    among them and all of them in the ISR."""
    for b in brokers:
        parts = ck.partitions(cluster, topic, via=b)
        if sorted(parts) != sorted(targets):
            return False
        for p, t in targets.items():
            v = parts[p]
            if v["replicas"] != t or sorted(v["isr"]) != sorted(t) or v["leader"] not in t:
                return False
    return True


def copies(cluster, broker: int, topic: str) -> list[str]:
    """The partition directories of `topic` on `broker` (those renamed for deletion left out)."""
    data = cluster.brokers[broker].data_dir / "data"
    return sorted(d.name for d in data.glob(f"{topic}-*") if not d.name.endswith("-delete"))


def test_java_admin_errors(java_client, cluster):
    """Run by kafka-clients 3.9.0 and 4.3.0 alike (`java_client`)."""
    java_harness, topic = java_client, f"{java_client.name}-errors"
    ck.create_topic(cluster, topic, 1, 2)
    before = ck.partitions(cluster, topic)[0]["replicas"]
    others = [b for b in BROKERS if b not in before]

    bad_broker = reassign(java_harness, cluster, topic, 0, [others[0], 99])
    assert bad_broker.get("error") == "org.apache.kafka.common.errors.InvalidReplicaAssignmentException", bad_broker
    twice = reassign(java_harness, cluster, topic, 0, [others[0], others[0]])
    assert twice.get("error") == "org.apache.kafka.common.errors.InvalidReplicaAssignmentException", twice
    no_partition = reassign(java_harness, cluster, topic, 7, others)
    assert no_partition.get("error") == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException", no_partition
    no_topic = reassign(java_harness, cluster, "java-no-such-topic", 0, others)
    assert no_topic.get("error") == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException", no_topic
    nothing = reassign(java_harness, cluster, topic, 0, None)
    assert nothing.get("error") == "org.apache.kafka.common.errors.NoReassignmentInProgressException", nothing

    assert listed(java_harness, cluster, topic) == {}
    assert all(ck.partitions(cluster, topic, via=b)[0]["replicas"] == before for b in BROKERS)


def test_java_admin_moves_every_replica_to_other_brokers(kt, java_harness, cluster):
    kt.require_module("confluent_kafka")  # clusterkit.AckedProducer / read_all
    topic = "java-moved"
    ck.create_topic(cluster, topic, 3, 2)
    original = {p: v["replicas"] for p, v in ck.partitions(cluster, topic).items()}
    # every replica to the two brokers that hold none of the partition (reversed, so the order counts)
    targets = {p: sorted((b for b in BROKERS if b not in r), reverse=True) for p, r in original.items()}
    assert all(not set(targets[p]) & set(original[p]) and len(targets[p]) == 2 for p in original), (original, targets)

    producer = ck.AckedProducer(bootstrap(cluster), topic).start()
    try:
        ck.wait_for(lambda: producer.acked_count >= 300, 60, "300 acknowledged records before the move")
        for p, target in targets.items():
            assert reassign(java_harness, cluster, topic, p, target) == {"result": "ok"}, (p, target)
        in_progress = listed(java_harness, cluster, topic)
        for (_, p), sets in in_progress.items():  # a move not listed must have completed (checked below)
            assert sets == {"replicas": targets[p] + original[p], "addingReplicas": targets[p],
                            "removingReplicas": original[p]}, (p, sets)
        ck.wait_for(lambda: settled(cluster, topic, targets), 90,
                    f"every broker's Metadata to show {targets} with a full ISR")
        assert listed(java_harness, cluster, topic) == {}
        assert java_replicas(java_harness, cluster, topic) == targets
        mark = producer.acked_count
        ck.wait_for(lambda: producer.acked_count >= mark + 100, 60, "acknowledgements on the new replicas")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:3]
    read = ck.read_all(bootstrap(cluster), topic, 3)
    ck.check_exactly_once_in_order(producer.acked, read)
    assert sum(len(v) for v in read.values()) == producer.acked_count
    for b in BROKERS:  # the old brokers delete their copies (renamed for deletion first, as Kafka does)
        wanted = sorted(f"{topic}-{p}" for p, t in targets.items() if b in t)
        ck.wait_for(lambda: copies(cluster, b, topic) == wanted, 30, f"broker {b} to hold exactly {wanted}")
    print(f"{producer.acked_count} records; partitions listed in progress: {sorted(p for _, p in in_progress)}")


def test_java_admin_cancels_a_stuck_move(kt, java_harness, cluster):
    kt.require_module("confluent_kafka")
    topic = "java-stuck"
    with AdminClient(bootstrap(cluster), timeout=30) as admin:
        admin.create_topic(topic, assignment=[[1, 2]])
    ck.wait_for(lambda: ck.in_sync(cluster, topic, 1, 2), 30, f"{topic} online")
    original = ck.partitions(cluster, topic)[0]["replicas"]
    assert original == [1, 2]
    target = 4 if ck.controller_id(cluster) != 4 else 3  # the paused broker must not be the controller
    producer = ck.AckedProducer(bootstrap(cluster, avoid=target), topic).start()
    try:
        ck.wait_for(lambda: producer.acked_count >= 100, 60, "100 acknowledged records before the move")
        cluster.brokers[target].pause()  # SIGSTOP: the new replica cannot fetch, so the move cannot complete
        try:
            assert reassign(java_harness, cluster, topic, 0, [1, target], avoid=target) == {"result": "ok"}
            stuck = {(topic, 0): {"replicas": [1, target, 2], "addingReplicas": [target], "removingReplicas": [2]}}
            assert listed(java_harness, cluster, topic, avoid=target) == stuck
            time.sleep(2)
            assert listed(java_harness, cluster, topic, avoid=target) == stuck  # it cannot complete
            assert ck.partitions(cluster, topic, via=1)[0]["replicas"] == [1, target, 2]
            assert reassign(java_harness, cluster, topic, 0, None, avoid=target) == {"result": "ok"}
            ck.wait_for(lambda: all(ck.partitions(cluster, topic, via=b)[0]["replicas"] == original for b in (1, 2)),
                        30, f"the original replicas {original} back")
            assert listed(java_harness, cluster, avoid=target) == {}  # nothing in progress, any topic
        finally:
            cluster.brokers[target].resume()  # SIGCONT
        ck.wait_for(lambda: settled(cluster, topic, {0: original}), 60,
                    f"every broker's Metadata to show {original} with a full ISR")
        mark = producer.acked_count
        ck.wait_for(lambda: producer.acked_count >= mark + 50, 60, "acknowledgements after the cancel")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:3]
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(bootstrap(cluster), topic, 1))
    ck.wait_for(lambda: copies(cluster, target, topic) == [], 30, f"broker {target} to drop its half-made copy")
    assert listed(java_harness, cluster) == {}


# ---- electLeaders ------------------------------------------------------------------------------

ERRORS = "org.apache.kafka.common.errors."


@pytest.fixture
def steady_cluster(tmp_path):
    """Three brokers that never move leadership back by themselves."""
    c = ck.start_cluster(tmp_path / "cluster", 3, {"auto.leader.rebalance.enable": "false"})
    yield c
    ck.stop_cluster(c)


def elect(java_harness, cluster, election: str, topic: str | None, partitions: list[int] | None = None
          ) -> dict[tuple[str, int], dict]:
    """One Admin.electLeaders call (topic None: null partitions, every partition of the cluster):
    (topic, partition) -> {"result": "ok"} or {"error": <Java exception class>, "message": ...}."""
    target = ["all"] if topic is None else [topic, ",".join(map(str, partitions))]
    lines = java_harness.ok("admin", ck.live_bootstrap(cluster), "elect", election, *target, timeout=90)
    out = {}
    for line in (json.loads(ln) for ln in lines if ln.startswith("{")):
        assert line["call"] == "elect" and "topic" in line, line  # no failure of the whole call
        out[(line["topic"], line["partition"])] = {k: v for k, v in line.items() if k in ("result", "error", "message")}
    return out


def leaders(cluster, topic: str, via: int) -> dict[int, int]:
    return {p: v["leader"] for p, v in ck.partitions(cluster, topic, via=via).items()}


def test_java_admin_elect_leaders(kt, java_harness, steady_cluster):
    kt.require_module("confluent_kafka")
    cluster, topic = steady_cluster, "java-elect"
    with AdminClient(cluster.bootstrap, timeout=30) as admin:
        admin.create_topic(topic, assignment=[[1, 2, 3], [2, 3, 1]])
    ck.wait_for(lambda: ck.in_sync(cluster, topic, 2, 3), 30, f"{topic} in sync")
    assert leaders(cluster, topic, via=2) == {0: 1, 1: 2}
    producer = ck.AckedProducer(cluster.bootstrap, topic).start()
    try:
        ck.wait_for(lambda: producer.acked_count >= 200, 60, "200 acknowledged records before the kill")
        cluster.brokers[1].kill()  # SIGKILL the preferred leader of partition 0
        ck.wait_for(lambda: ck.leader_of(cluster, topic, 0) not in (-1, 1), 60, "a new leader for partition 0")
        down = elect(java_harness, cluster, "preferred", topic, [0])
        assert down[(topic, 0)].get("error") == ERRORS + "PreferredLeaderNotAvailableException", down
        cluster.brokers[1].start()
        ck.wait_for(lambda: ck.in_sync(cluster, topic, 2, 3), 60, f"{topic} in sync again with broker 1 back")
        for b in (1, 2, 3):
            assert leaders(cluster, topic, via=b)[0] != 1, f"broker 1 leads partition 0 again unasked (via {b})"

        first = elect(java_harness, cluster, "preferred", topic, [0, 1])
        assert first[(topic, 0)] == {"result": "ok"}, first
        assert first[(topic, 1)].get("error") == ERRORS + "ElectionNotNeededException", first
        assert len(first) == 2, first
        ck.wait_for(lambda: all(leaders(cluster, topic, via=b) == {0: 1, 1: 2} for b in (1, 2, 3)), 30,
                    "every broker's Metadata to show broker 1 leading partition 0")

        again = elect(java_harness, cluster, "preferred", topic, [0])
        assert again == {(topic, 0): again[(topic, 0)]}, again
        assert again[(topic, 0)].get("error") == ERRORS + "ElectionNotNeededException", again
        missing = elect(java_harness, cluster, "preferred", topic, [7])
        assert missing[(topic, 7)].get("error") == ERRORS + "UnknownTopicOrPartitionException", missing
        unclean = elect(java_harness, cluster, "unclean", topic, [0])
        assert unclean[(topic, 0)].get("error") == ERRORS + "ElectionNotNeededException", unclean
        everything = elect(java_harness, cluster, "preferred", None)
        # Kafka (KafkaApis.handleElectLeaders) leaves out the partitions that needed no election
        assert not {(topic, 0), (topic, 1)} & set(everything), everything
        assert all(r == {"result": "ok"} for r in everything.values()), everything
        assert leaders(cluster, topic, via=2) == {0: 1, 1: 2}

        mark = producer.acked_count
        ck.wait_for(lambda: producer.acked_count >= mark + 100, 60, "acknowledgements after the elections")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:3]
    read = ck.read_all(cluster.bootstrap, topic, 2)
    ck.check_exactly_once_in_order(producer.acked, read)
    assert sum(len(v) for v in read.values()) == producer.acked_count
    print(f"{producer.acked_count} records; electLeaders over every partition: {len(everything)} partitions")
