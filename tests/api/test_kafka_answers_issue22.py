"""Kafka's answers where kbroker used to differ (issue 22), at the handler level with fake brokers:
ElectLeaders / AlterPartitionReassignments / ListPartitionReassignments on the embedded single
node (Kafka's one-broker answers), a decrease through CreatePartitions refused and reached through
`partitions.retire.from`, and an auto-creation that finds its topic created meanwhile answered
LEADER_NOT_AVAILABLE."""

from __future__ import annotations

from types import SimpleNamespace

import trio

from kbroker.api import configs, elect_leaders, metadata, reassignments, topics
from kbroker.api.dispatch import DISPATCH
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode, InvalidPartitionsError, RequestTimedOutError, TopicAlreadyExistsError
from kbroker.metadata.store import TopicInfo


class Topics:
    def __init__(self, **counts: int) -> None:
        self.infos = {name: TopicInfo(name, None, [[0]] * n, {}) for name, n in counts.items()}

    def topic(self, name):
        return self.infos.get(name)

    def topics(self):
        return self.infos


def _single_node(offline=(), **counts):
    meta = Topics(**counts)
    parts = {(t, p): object() for t, n in counts.items() for p in range(n) if (t, p) not in offline}
    return SimpleNamespace(cluster=False, node_id=0, metadata=meta,
                           replica_manager=SimpleNamespace(partitions=parts, offline_partitions=set(offline)))


def _run(handler, broker, version=0, **request):
    return trio.run(handler, SimpleNamespace(broker=broker, version=version), SimpleNamespace(**request))


def test_the_three_apis_are_served_on_the_single_node_and_keep_their_acl_checks():
    for key, operation in ((43, "ALTER"), (45, "ALTER"), (46, "DESCRIBE")):
        spec = DISPATCH[key]
        assert not spec.cluster_only and spec.cluster_operation.name == operation


def test_elect_leaders_on_one_broker():
    broker = _single_node(offline=[("t", 2)], t=3)
    answers = elect_leaders.single_node_elections(broker, 0, [("t", 0), ("t", 2), ("t", 9), ("gone", 0)])
    assert {tp: code for tp, (code, _) in answers.items()} == {
        ("t", 0): ErrorCode.election_not_needed, ("t", 2): ErrorCode.preferred_leader_not_available,
        ("t", 9): ErrorCode.unknown_topic_or_partition, ("gone", 0): ErrorCode.unknown_topic_or_partition}
    assert answers[("t", 0)][1] == "Leader election not needed for topic partition."
    unclean = elect_leaders.single_node_elections(broker, 1, [("t", 1), ("t", 2)])
    assert [code for code, _ in unclean.values()] == [ErrorCode.election_not_needed,
                                                      ErrorCode.eligible_leaders_not_available]


def test_elect_leaders_of_every_partition_lists_only_what_needed_an_election():
    broker = _single_node(offline=[("t", 1)], t=2)
    response = _run(elect_leaders.handle, broker, version=1, election_type=0, topic_partitions=None)
    assert response["error_code"] == ErrorCode.none
    assert response["replica_election_results"] == [{"topic": "t", "partition_result": [
        {"partition_id": 1, "error_code": ErrorCode.preferred_leader_not_available,
         "error_message": "t-1 has no online replica"}]}]
    asked = _run(elect_leaders.handle, broker, version=1, election_type=0,
                 topic_partitions=[SimpleNamespace(topic="t", partitions=[0])])
    assert asked["replica_election_results"][0]["partition_result"][0]["error_code"] == ErrorCode.election_not_needed


def test_reassignments_on_one_broker():
    broker = _single_node(t=2)
    answers = reassignments.single_node_reassignments(broker, [
        ("t", 0, [0]), ("t", 1, [1]), ("t", 1, None), ("t", 0, [0, 0]), ("t", 0, []), ("t", 7, [0]),
        ("gone", 0, None)])
    assert answers == {
        ("t", 0): (ErrorCode.invalid_replica_assignment, "the replica list is empty"),  # the last one for t-0
        ("t", 1): (ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress."),
        ("t", 7): (ErrorCode.unknown_topic_or_partition, "The partition does not exist."),
        ("gone", 0): (ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress.")}
    one = lambda target: reassignments.single_node_reassignments(broker, [("t", 0, target)])[("t", 0)][0]
    assert (one([0]), one([1]), one([0, 0]), one([-1])) == (ErrorCode.none, ErrorCode.invalid_replica_assignment,
                                                            ErrorCode.invalid_replica_assignment,
                                                            ErrorCode.invalid_replica_assignment)
    listed = _run(reassignments.list_partition_reassignments, broker, topics=None)
    assert (listed["error_code"], listed["topics"]) == (ErrorCode.none, [])


# ---- CreatePartitions never decreases; partitions.retire.from does (in a cluster) ----------------


class DecreasingBroker:
    def __init__(self, cluster: bool = True) -> None:
        self.cluster = cluster
        self.config = BrokerConfig.from_dict({})
        self.metadata = Topics(t=4)
        self.metadata.infos["t"].configs = {"retention.ms": "1000"}
        self.views = SimpleNamespace(view=lambda name: None)
        self.calls: list = []

    async def decrease_partitions(self, name, count, validate_only=False):
        if not self.cluster:
            raise InvalidPartitionsError("Decreasing the number of partitions needs a cluster")
        self.calls.append(("decrease", name, count, validate_only))

    async def set_topic_configs(self, name, new):
        self.calls.append(("configs", name, new))


def _alter_topic(broker, *ops, validate_only=False):
    resource = SimpleNamespace(resource_type=configs.TOPIC, resource_name="t", configs=list(ops))
    return _run(configs.incremental_alter_configs, broker, resources=[resource],
                validate_only=validate_only)["responses"][0]


def _op(name, value, operation=configs.SET):
    return SimpleNamespace(name=name, value=value, config_operation=operation)


def test_partitions_retire_from_decreases_and_is_never_stored():
    broker = DecreasingBroker()
    assert _alter_topic(broker, _op("partitions.retire.from", "2"))["error_code"] == ErrorCode.none
    assert broker.calls == [("decrease", "t", 2, True), ("decrease", "t", 2, False)]  # no config write
    broker.calls.clear()
    answer = _alter_topic(broker, _op("retired.records.partitioner", "consistent_random"),
                          _op("partitions.retire.from", "3"))
    assert answer["error_code"] == ErrorCode.none
    assert broker.calls == [("decrease", "t", 3, True),  # the partitioner first: the drains read it
                            ("configs", "t", {"retention.ms": "1000", "retired.records.partitioner": "consistent_random"}),
                            ("decrease", "t", 3, False)]
    broker.calls.clear()
    assert _alter_topic(broker, _op("partitions.retire.from", "2"), validate_only=True)["error_code"] == ErrorCode.none
    assert broker.calls == [("decrease", "t", 2, True)]
    bad = _alter_topic(broker, _op("partitions.retire.from", "two"))
    assert (bad["error_code"], bad["error_message"]) == (
        ErrorCode.invalid_config, "Invalid value two for configuration partitions.retire.from: Not a number of type INT")
    single = _alter_topic(DecreasingBroker(cluster=False), _op("partitions.retire.from", "2"))
    assert single["error_code"] == ErrorCode.invalid_partitions


def test_create_partitions_with_fewer_partitions_is_kafkas_invalid_partitions():
    class Broker:
        metadata = Topics(t=6)

        async def create_partitions(self, name, count, assignment, validate_only=False):
            raise InvalidPartitionsError(f"Topic currently has 6 partitions, which is higher than the requested {count}.")

    ctx = SimpleNamespace(broker=Broker(), version=3)
    # a decrease with assignments: the broker's answer, not the assignment count's (Kafka checks the count first)
    request = SimpleNamespace(topics=[SimpleNamespace(name="t", count=3, assignments=[SimpleNamespace(broker_ids=[0])])],
                              validate_only=False, timeout=1000)
    result = trio.run(topics.create_partitions, ctx, request)["results"][0]
    assert (result["error_code"], result["error_message"]) == (
        ErrorCode.invalid_partitions, "Topic currently has 6 partitions, which is higher than the requested 3.")


# ---- an auto-creation never answers TOPIC_ALREADY_EXISTS ------------------------------------------


def _metadata_broker(cluster: bool, error: Exception, created_by_then: bool):
    meta = Topics()
    meta.brokers = list
    meta.cluster_id, meta.controller_id = "c", 0

    async def wait_for_first_update(_timeout):
        return None

    meta.wait_for_first_update = wait_for_first_update

    async def create_topic(name):
        if created_by_then:
            meta.infos[name] = TopicInfo(name, None, [[0]], {})
        raise error

    return SimpleNamespace(cluster=cluster, metadata=meta, config=BrokerConfig.from_dict({}),
                           views=SimpleNamespace(view=lambda name: None, views=dict), create_topic=create_topic,
                           replica_manager=SimpleNamespace(partitions={}, offline_partitions=set()))


def _auto_create(broker):
    ctx = SimpleNamespace(broker=broker, version=9, header=SimpleNamespace(api_version=9), session=None,
                          listener=None)
    request = SimpleNamespace(topics=[SimpleNamespace(name="fresh", topic_id=None)], allow_auto_topic_creation=True,
                              include_topic_authorized_operations=False, include_cluster_authorized_operations=False)
    return trio.run(metadata.handle, ctx, request)["topics"][0]


def test_a_topic_another_broker_just_created_is_leader_not_available():
    for error in (TopicAlreadyExistsError("Topic 'fresh' already exists."), RequestTimedOutError("not yet")):
        for created_by_then in (False, True):
            entry = _auto_create(_metadata_broker(True, error, created_by_then))
            assert (entry["name"], entry["error_code"]) == ("fresh", ErrorCode.leader_not_available)
    # the single node: a concurrent request created it, so it is answered as it is
    entry = _auto_create(_metadata_broker(False, TopicAlreadyExistsError("exists"), True))
    assert entry["error_code"] == ErrorCode.none and entry["name"] == "fresh"
