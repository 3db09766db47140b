"""AlterConfigs / IncrementalAlterConfigs of a BROKER resource with keys kbroker does not define
(issue 22, item 2), answered per kind of key as Kafka 3.8/3.9 answers it (ZkAdminManager,
DynamicBrokerConfig), through Java's Admin (kafka-clients 3.9.0), kafka-python and confluent-kafka:

- a custom key (no broker config of Kafka's; a Node.js client setting `cleanup.policy` on a
  broker) is stored and answered OK, per broker or as the cluster-wide default, with
  incrementalAlterConfigs and with the deprecated alterConfigs; DescribeConfigs shows it back as
  Kafka does — no type known, so sensitive (value null), read-only, with the source of the layer
  that holds it — and it survives a restart; DELETE removes it;
- a static key of Kafka's, whether kbroker defines it (`log.dirs`) or not (`process.roles`), is
  INVALID_CONFIG `Cannot update these configs dynamically: Set(...)`, and nothing is stored;
- a dynamic key is validated (INVALID_CONFIG for a bad value) and applied.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(150)

INVALID_CONFIG = "InvalidConfigurationException"


def java(java_harness, kbroker, *args: str) -> list[dict]:
    return [json.loads(line) for line in java_harness.ok("admin", kbroker.bootstrap, *args, timeout=90)
            if line.startswith("{")]


def described(java_harness, kbroker, name: str) -> dict[str, dict]:
    return {e["name"]: e for e in java(java_harness, kbroker, "describe-configs-full", "broker", name)}


def test_java_admin(java_harness, kbroker):
    ok = {"result": "ok"}
    assert java(java_harness, kbroker, "alter-configs", "broker", "0", "apply",
                "set:cleanup.policy=compact", "set:log.cleaner.backoff.ms=20000") == [ok]
    assert java(java_harness, kbroker, "alter-configs", "broker", "-", "apply", "set:team.owner=payments") == [ok]
    for key, value in (("log.dirs", "/elsewhere"), ("process.roles", "broker")):
        (refused,) = java(java_harness, kbroker, "alter-configs", "broker", "0", "apply", f"set:{key}={value}",
                          "set:another.custom=1")
        assert refused == {"result": INVALID_CONFIG, "message": "Invalid config value for resource "
                           f"ConfigResource(type=BROKER, name='0'): Cannot update these configs dynamically: Set({key})"}
    (bad,) = java(java_harness, kbroker, "alter-configs", "broker", "0", "apply", "set:log.cleaner.backoff.ms=soon")
    assert bad["result"] == INVALID_CONFIG

    mine = described(java_harness, kbroker, "0")
    assert mine["cleanup.policy"] == {"name": "cleanup.policy", "value": None, "source": "DYNAMIC_BROKER_CONFIG",
                                      "readOnly": True, "sensitive": True, "type": "UNKNOWN",
                                      "synonyms": [["cleanup.policy", None, "DYNAMIC_BROKER_CONFIG"]]}
    assert mine["team.owner"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG" and mine["team.owner"]["value"] is None
    backoff = mine["log.cleaner.backoff.ms"]
    assert (backoff["value"], backoff["source"], backoff["readOnly"]) == ("20000", "DYNAMIC_BROKER_CONFIG", False)
    assert "another.custom" not in mine and "process.roles" not in mine  # the refused requests stored nothing
    assert set(described(java_harness, kbroker, "-")) == {"team.owner"}

    # the deprecated AlterConfigs replaces the entity's whole dynamic config, custom keys included
    assert java(java_harness, kbroker, "legacy-alter-configs", "broker", "0", "apply", "my.flag=on",
                "log.cleaner.backoff.ms=30000") == [ok]
    (static,) = java(java_harness, kbroker, "legacy-alter-configs", "broker", "0", "apply", "log.dirs=/x")
    assert static["result"] == INVALID_CONFIG and "Set(log.dirs)" in static["message"]
    after = described(java_harness, kbroker, "0")
    assert after["my.flag"]["source"] == "DYNAMIC_BROKER_CONFIG" and "cleanup.policy" not in after
    assert after["log.cleaner.backoff.ms"]["value"] == "30000"


def test_kafka_python_admin(kbroker, kt):
    kt.require_module("kafka")
    from kafka.admin import ConfigResource, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        for incremental in (True, False):
            result = admin.alter_configs([ConfigResource("BROKER", "0", configs={f"app.tier.{incremental}": "gold"})],
                                         raise_on_unknown=False, incremental=incremental)
            assert result == {"broker": {"0": "OK"}}, result
        refused = admin.alter_configs([ConfigResource("BROKER", "0", configs={"zookeeper.connect": "h:1"})],
                                      raise_on_unknown=False, incremental=True)["broker"]["0"]
        assert refused.startswith("[Error 40] InvalidConfigurationError") and "Set(zookeeper.connect)" in refused, refused
        shown = admin.describe_configs([ConfigResource("BROKER", "0")], config_filter="all")["broker"]["0"]
        tier = shown["app.tier.False"]
        assert (tier["value"], tier["is_sensitive"], tier["read_only"], tier["config_source"]) == (
            None, True, True, "DYNAMIC_BROKER_CONFIG")
    finally:
        admin.close()


def test_confluent_kafka_admin_and_a_restart(kbroker, kt):
    kt.require_module("confluent_kafka")
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    def alter(*entries):
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=list(entries))
        return admin.incremental_alter_configs([resource])[resource]

    def describe() -> dict:
        resource = ConfigResource(ResourceType.BROKER, "0")
        return admin.describe_configs([resource])[resource].result(30)

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    assert alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)).result(30) is None
    entry = describe()["cleanup.policy"]
    assert (entry.value, entry.is_sensitive, entry.is_read_only) == (None, True, True)
    with pytest.raises(Exception) as refused:
        alter(ConfigEntry("broker.id", "5", incremental_operation=AlterConfigOpType.SET)).result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG" and "Set(broker.id)" in refused.value.args[0].str()

    kbroker.restart()  # kept beside the metadata: shown again after a restart
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    kept = describe()
    source = kept["cleanup.policy"].source
    assert kept["cleanup.policy"].is_sensitive and getattr(source, "value", source) == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert alter(ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)).result(30) is None
    assert "cleanup.policy" not in describe()
