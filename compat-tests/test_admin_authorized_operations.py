"""Authorized operations (KIP-430) through stock admin clients: describe a topic, the cluster and a
consumer group asking for the operations allowed, as admin tools and operators' checks do. With no
authorizer kbroker answers as Kafka does: every operation the resource type supports.

One scenario, parametrized over the admin clients that expose it: confluent-kafka's AdminClient
(`include_authorized_operations=True`), the Java Admin of kafka-clients 3.9 and 4.3
(`includeAuthorizedOperations(true)`, through `KbrokerHarness admin authorized-ops`) and kafka-python's KafkaAdminClient (which always asks).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(180)

TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
               "DESCRIBE"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}  # Kafka 4's (group configs)


@pytest.fixture(scope="module")
def resources(kt, kbroker):
    """A topic, and a consumer group holding a committed offset of it (state Empty)."""
    ck = kt.require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = kt.topic_name("authops"), kt.topic_name("authops", "group")
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    return topic, group


def confluent_ops(request, kt, kbroker, topic, group):
    kt.require_module("confluent_kafka")
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    names = lambda ops: {op.name for op in ops} if ops is not None else None
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(30)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    described_group = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(30)
    return {"topic": names(described.authorized_operations), "cluster": names(cluster.authorized_operations),
            "group": names(described_group.authorized_operations)}


def java_ops(request, kt, kbroker, topic, group, fixture="java_harness"):
    harness = request.getfixturevalue(fixture)
    out = {}
    for line in harness.ok("admin", kbroker.bootstrap, "authorized-ops", topic, group):
        if line.startswith("OPS "):
            _, kind, names = line.split(" ")
            out[kind] = None if names == "null" else set(names.split(","))
    return out


def java43_ops(request, kt, kbroker, topic, group):
    """kafka-clients 4.3.0: the same calls (describeTopics falls back from DescribeTopicPartitions to
    Metadata, describeConsumerGroups from ConsumerGroupDescribe to DescribeGroups: FINDINGS.md)."""
    return java_ops(request, kt, kbroker, topic, group, "java_harness_43")


def kafka_python_ops(request, kt, kbroker, topic, group):
    kt.require_module("kafka")
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=20000)
    try:
        (described,) = admin.describe_topics([topic])
        cluster = admin.describe_cluster()
        described_group = admin.describe_groups([group], include_authorized_operations=True)
    finally:
        admin.close()
    group_entry = described_group[group] if isinstance(described_group, dict) else described_group[0]
    return {"topic": set(described["authorized_operations"]), "cluster": set(cluster["authorized_operations"]),
            "group": set(group_entry["authorized_operations"])}


@pytest.mark.parametrize("describe", [confluent_ops, java_ops, java43_ops, kafka_python_ops],
                         ids=["confluent", "java", "java43", "kafka-python"])
def test_every_supported_operation_is_authorized(request, kt, kbroker, resources, describe):
    topic, group = resources
    assert describe(request, kt, kbroker, topic, group) == {"topic": TOPIC_OPS, "cluster": CLUSTER_OPS,
                                                             "group": GROUP_OPS}


def test_not_asked_means_none(kt, kbroker, resources):
    """Without the flag the field is Kafka's -2**31: clients report no operations at all."""
    kt.require_module("confluent_kafka")
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    topic, group = resources
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    assert admin.describe_topics(TopicCollection([topic]))[topic].result(30).authorized_operations is None
    assert admin.describe_cluster().result(30).authorized_operations is None
    assert admin.describe_consumer_groups([group])[group].result(30).authorized_operations is None
