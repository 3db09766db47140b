"""DescribeConfigs of a topic lists what Kafka 3.9 lists (issue 22, item 6) — every config of
Kafka 3.9.0's LogConfig, `message.format.version`, `message.downconversion.enable`,
`compression.{gzip,lz4,zstd}.level`, `remote.log.copy.disable` and `remote.log.delete.on.disable`
among them — with Kafka's defaults and synonyms (each broker synonym's own default, in its own
unit), through Java's Admin (kafka-clients 3.9.0), kafka-python and confluent-kafka. The one
default that differs is kbroker's documented retention of two weeks (Kafka: 7 days). The new keys
take overrides (CreateTopics, IncrementalAlterConfigs) validated with Kafka's words.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)

TOPIC = "configs-39"
# Kafka 3.9.0's LogConfig: every topic config and its default
KAFKA_39 = {
    "cleanup.policy": "delete", "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.type": "producer", "compression.zstd.level": "3", "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000", "flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "", "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807", "max.message.bytes": "1048588",
    "message.downconversion.enable": "true", "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "9223372036854775807", "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.difference.max.ms": "9223372036854775807", "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0", "min.insync.replicas": "1",
    "preallocate": "false", "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false", "retention.bytes": "-1", "retention.ms": "604800000",
    "segment.bytes": "1073741824", "segment.index.bytes": "10485760", "segment.jitter.ms": "0",
    "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}
KBROKER_RETENTION_MS = "1209600000"  # two weeks, documented (docs/configuration.md)


def expected(name: str) -> str:
    return KBROKER_RETENTION_MS if name == "retention.ms" else KAFKA_39[name]


@pytest.fixture(scope="module")
def topic(kbroker, kt):
    kt.require_module("kafka")
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"message.format.version": "2.8"})])
    finally:
        admin.close()
    return TOPIC


def test_java_admin(java_harness, kbroker, topic):
    def describe() -> dict[str, dict]:
        return {e["name"]: e for e in (json.loads(line) for line in java_harness.ok(
            "admin", kbroker.bootstrap, "describe-configs-full", "topic", topic, timeout=90) if line.startswith("{"))}

    configs = describe()
    assert set(KAFKA_39) <= set(configs)
    for name in set(KAFKA_39) - {"message.format.version"}:
        assert (configs[name]["value"], configs[name]["source"], configs[name]["readOnly"]) == (
            expected(name), "DEFAULT_CONFIG", False), configs[name]
    assert configs["message.format.version"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["message.format.version"]["synonyms"] == [
        ["message.format.version", "2.8", "DYNAMIC_TOPIC_CONFIG"],
        ["log.message.format.version", "3.0-IV1", "DEFAULT_CONFIG"]]
    assert configs["message.downconversion.enable"]["synonyms"] == [
        ["log.message.downconversion.enable", "true", "DEFAULT_CONFIG"]]
    assert (configs["compression.zstd.level"]["type"], configs["remote.log.copy.disable"]["type"]) == ("INT", "BOOLEAN")
    assert configs["segment.ms"]["synonyms"] == [["log.roll.hours", "168", "DEFAULT_CONFIG"]]
    assert configs["flush.ms"]["synonyms"] == [["log.flush.scheduler.interval.ms", "9223372036854775807",
                                                "DEFAULT_CONFIG"]]
    assert configs["retention.ms"]["synonyms"] == [["log.retention.hours", "336", "DEFAULT_CONFIG"]]  # Kafka: 168

    def alter(*ops: str) -> dict:
        lines = java_harness.ok("admin", kbroker.bootstrap, "alter-configs", "topic", topic, "apply", *ops, timeout=90)
        (line,) = [json.loads(x) for x in lines if x.startswith("{")]
        return line

    assert alter("set:message.downconversion.enable=false", "set:compression.zstd.level=7") == {"result": "ok"}
    assert alter("set:compression.gzip.level=0") == {
        "result": "InvalidConfigurationException",
        "message": "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"}
    configs = describe()
    assert (configs["message.downconversion.enable"]["value"], configs["message.downconversion.enable"]["source"]) == (
        "false", "DYNAMIC_TOPIC_CONFIG")
    assert configs["compression.zstd.level"]["value"] == "7"


def test_kafka_python_admin(kbroker, topic):
    from kafka.admin import ConfigResource, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        described = admin.describe_configs([ConfigResource("TOPIC", topic)], include_synonyms=True,
                                           config_filter="all")["topic"][topic]
        assert set(KAFKA_39) <= set(described)
        assert described["message.format.version"]["value"] == "2.8"
        assert described["remote.log.delete.on.disable"]["value"] == "false"
        assert described["compression.lz4.level"]["value"] == "9"
        refused = admin.alter_configs([ConfigResource("TOPIC", topic, configs={"message.format.version": "9.9"})],
                                      raise_on_unknown=False, incremental=True)["topic"][topic]
        assert "Version 9.9 is not a valid version" in refused and "InvalidConfigurationError" in refused, refused
    finally:
        admin.close()


def test_confluent_kafka_admin(kbroker, topic, kt):
    kt.require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    assert set(KAFKA_39) <= set(described)
    assert described["compression.gzip.level"].value == "-1" and described["retention.ms"].value == KBROKER_RETENTION_MS
    assert described["message.format.version"].value == "2.8"
