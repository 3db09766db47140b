"""CreatePartitions with fewer partitions than the topic has (issue 22, item 3) is INVALID_PARTITIONS
with Kafka's words, through Java's Admin (kafka-clients 3.9.0), kafka-python and confluent-kafka,
and the topic keeps its partitions; so is the current count (`Topic already has N partitions.`).
kbroker's decrease is reached only explicitly — an AlterConfigs / IncrementalAlterConfigs of the
topic's `partitions.retire.from` (what `kbroker topics alter T --partitions N` sends); the embedded
single node answers it INVALID_PARTITIONS (a decrease needs a cluster, test_cluster_decrease.py),
and CreateTopics refuses the key (INVALID_CONFIG: it is an operation, not a topic config).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

TOPIC = "no-decrease"
HIGHER = "Topic currently has 3 partitions, which is higher than the requested 2."


@pytest.fixture(scope="module")
def topic(kbroker, kt):
    kt.require_module("kafka")
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 3, 1)])
    finally:
        admin.close()
    return TOPIC


def partition_count(kbroker, topic) -> int:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=kbroker.bootstrap)
    try:
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


def java(java_harness, kbroker, *args: str) -> list[dict]:
    return [json.loads(line) for line in java_harness.ok("admin", kbroker.bootstrap, *args, timeout=90)
            if line.startswith("{")]


def test_java_admin(java_harness, kbroker, topic):
    assert java(java_harness, kbroker, "create-partitions", topic, "2") == [
        {"call": "create-partitions", "error": "InvalidPartitionsException", "message": HIGHER}]
    assert java(java_harness, kbroker, "create-partitions", topic, "3") == [
        {"call": "create-partitions", "error": "InvalidPartitionsException",
         "message": "Topic already has 3 partitions."}]
    (explicit,) = java(java_harness, kbroker, "alter-configs", "topic", topic, "apply", "set:partitions.retire.from=2")
    assert explicit["result"] == "InvalidPartitionsException" and "needs a cluster" in explicit["message"]
    (validated,) = java(java_harness, kbroker, "alter-configs", "topic", topic, "validate",
                        "set:partitions.retire.from=two")
    assert validated["result"] == "InvalidConfigurationException"
    assert partition_count(kbroker, topic) == 3


def test_kafka_python_admin(kbroker, topic):
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        response = admin.create_partitions({topic: 2}, raise_errors=False)
        (result,) = response.results
        assert (result.error_code, result.error_message) == (37, HIGHER)  # INVALID_PARTITIONS
        created = admin.create_topics([NewTopic("retire-at-birth", 2, 1, topic_configs={"partitions.retire.from": "1"})],
                                      raise_errors=False)
        (refused,) = created["topics"]
        assert refused["error_code"] == 40 and "not a topic config" in refused["error_message"]  # INVALID_CONFIG
    finally:
        admin.close()
    assert partition_count(kbroker, topic) == 3


def test_confluent_kafka_admin(kbroker, topic, kt):
    kt.require_module("confluent_kafka")
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
    error = refused.value.args[0]
    assert (error.code(), error.str()) == (KafkaError.INVALID_PARTITIONS, HIGHER)
    assert partition_count(kbroker, topic) == 3


def test_the_topics_command_on_the_single_node(kbroker, topic):
    shrink = subprocess.run([sys.executable, "-m", "kbroker", "topics", "alter", topic, "--partitions", "2",
                             "--bootstrap-server", kbroker.bootstrap], capture_output=True, text=True, timeout=60)
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stderr and "needs a cluster" in shrink.stderr, \
        shrink.stderr
