"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments on the embedded single
node (issue 22, item 1), answered as Kafka's one-broker cluster answers them, through the stock
admin clients of three families — Java's Admin (kafka-clients 3.9.0, `KbrokerHarness admin`),
kafka-python's KafkaAdminClient and confluent-kafka's AdminClient:

- ApiVersions advertises the three APIs (the connection is no longer closed);
- electLeaders: ELECTION_NOT_NEEDED (ElectionNotNeededException) for partitions led by their
  preferred replica — every partition of one broker —, preferred or unclean; UNKNOWN_TOPIC_OR_PARTITION
  for a partition that does not exist; with null partitions (every partition) nothing is listed,
  as Kafka leaves out the partitions that needed no election;
- alterPartitionReassignments: a move to [0] (where the partition is) accepted and changing
  nothing; to another broker, a broker twice or an empty list INVALID_REPLICA_ASSIGNMENT; a
  partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; a cancel NO_REASSIGNMENT_IN_PROGRESS;
- listPartitionReassignments: nothing in progress, ever.

The cluster's own answers (moves, elections that move leadership) are test_cluster_java_admin.py's.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)

ERRORS = "org.apache.kafka.common.errors."
TOPIC = "single-admin"


@pytest.fixture(scope="module")
def topic(kbroker, kt):
    kt.require_module("kafka")
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
    finally:
        admin.close()
    return TOPIC


def java(java_harness, kbroker, *args: str) -> list[dict]:
    return [json.loads(line) for line in java_harness.ok("admin", kbroker.bootstrap, *args, timeout=90)
            if line.startswith("{")]


def outcome(line: dict) -> str:
    return line.get("result") or line["error"].removeprefix(ERRORS)


def test_the_three_apis_are_advertised(kbroker, kt):
    served = {key: (lo, hi) for key, lo, hi in kt.api_versions(kbroker.host, kbroker.port)}
    assert (served.get(43), served.get(45), served.get(46)) == ((0, 2), (0, 0), (0, 0))


def test_java_admin(java_harness, kbroker, topic):
    def elect(kind, *target):
        return {(e["topic"], e["partition"]): outcome(e) for e in java(java_harness, kbroker, "elect", kind, *target)}

    assert elect("preferred", topic, "0,1") == {(topic, 0): "ElectionNotNeededException",
                                                (topic, 1): "ElectionNotNeededException"}
    assert elect("unclean", topic, "0") == {(topic, 0): "ElectionNotNeededException"}
    assert elect("preferred", topic, "7") == {(topic, 7): "UnknownTopicOrPartitionException"}
    assert elect("preferred", "all") == {}  # Kafka lists only partitions that needed an election

    def reassign(partition, target, name=topic):
        args = ("reassign", name, str(partition), target) if target else ("cancel-reassign", name, str(partition))
        (line,) = java(java_harness, kbroker, *args)
        return outcome(line)

    assert reassign(0, "0") == "ok"  # where it is already: accepted, nothing moves
    assert reassign(0, "1") == "InvalidReplicaAssignmentException"  # no broker 1 is alive
    assert reassign(0, "0,0") == "InvalidReplicaAssignmentException"
    assert reassign(7, "0") == "UnknownTopicOrPartitionException"
    assert reassign(0, "0", name="single-admin-missing") == "UnknownTopicOrPartitionException"
    assert reassign(0, None) == "NoReassignmentInProgressException"
    assert java(java_harness, kbroker, "list-reassign") == []
    described = [line.split() for line in java_harness.ok("admin", kbroker.bootstrap, "describe", topic)
                 if line.startswith("PARTITION ")]
    assert described == [["PARTITION", "0", "0", "0"], ["PARTITION", "1", "0", "0"]]


def test_kafka_python_admin(kbroker, topic):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import (
        ElectionNotNeededError,
        InvalidReplicationAssignmentError,  # kafka-python's name for INVALID_REPLICA_ASSIGNMENT (39)
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        response = admin.elect_leaders(0, {topic: [0, 1, 5]}, raise_errors=False)
        codes = {(r.topic, p.partition_id): p.error_code
                 for r in response.replica_election_results for p in r.partition_result}
        assert codes == {(topic, 0): ElectionNotNeededError.errno, (topic, 1): ElectionNotNeededError.errno,
                         (topic, 5): UnknownTopicOrPartitionError.errno}
        # kafka-python names every partition itself for None: each is answered, none needed an election
        every = admin.elect_leaders(0, None, raise_errors=False).replica_election_results
        codes = {(r.topic, p.partition_id): p.error_code for r in every for p in r.partition_result}
        assert {(topic, 0), (topic, 1)} <= set(codes) and set(codes.values()) == {ElectionNotNeededError.errno}
        answers = admin.alter_partition_reassignments({TopicPartition(topic, 0): [0], TopicPartition(topic, 1): [2],
                                                       TopicPartition(topic, 9): [0]})
        assert answers[TopicPartition(topic, 0)] is None
        assert answers[TopicPartition(topic, 1)] is InvalidReplicationAssignmentError
        assert answers[TopicPartition(topic, 9)] is UnknownTopicOrPartitionError
        cancel = admin.alter_partition_reassignments({TopicPartition(topic, 0): None})
        assert cancel[TopicPartition(topic, 0)] is NoReassignmentInProgressError
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments({topic: [0, 1]}) == {}
    finally:
        admin.close()


def test_confluent_kafka_admin(kbroker, topic, kt):
    kt.require_module("confluent_kafka")
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 4)]).result(30)
    codes = {(tp.topic, tp.partition): (err.code() if err is not None else None) for tp, err in result.items()}
    assert codes == {(topic, 0): KafkaError.ELECTION_NOT_NEEDED, (topic, 4): KafkaError.UNKNOWN_TOPIC_OR_PART}
    assert admin.elect_leaders(ElectionType.UNCLEAN, None).result(30) == {}
