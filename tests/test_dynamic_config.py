"""Dynamic broker configs: Kafka's rules for which keys change at run time and where, the layers
laid over the static config, and their description with sources and synonyms."""

import pytest

from kbroker.config import BrokerConfig, ConfigSource, describe_topic_config, log_config_for
from kbroker.dynamic_config import (
    DYNAMIC_BROKER_KEYS,
    apply_stored,
    describe_broker_config,
    validate_alter,
)
from kbroker.errors import InvalidConfigError

HOUR_MS = 3_600_000


def test_kafkas_dynamic_keys_and_only_those_change_at_run_time():
    assert {"log.retention.ms", "log.segment.bytes", "log.cleaner.backoff.ms", "message.max.bytes",
            "max.connections", "num.io.threads", "log.flush.interval.ms", "log.flush.interval.messages",
            "min.insync.replicas", "leader.replication.throttled.rate", "advertised.listeners"} <= DYNAMIC_BROKER_KEYS
    # a larger-unit synonym is not dynamic in Kafka (only the first synonym of a topic config is)
    assert not {"log.retention.hours", "log.roll.hours", "log.dirs", "zookeeper.connect", "num.partitions",
                "log.retention.check.interval.ms", "log.cleaner.enable"} & DYNAMIC_BROKER_KEYS


def test_validate_alter_types_values_and_refuses_with_kafkas_words():
    config = BrokerConfig.from_dict({})
    assert validate_alter(config, "0", {"log.retention.ms": "1000", "log.cleanup.policy": "compact,delete"}) == {
        "log.retention.ms": 1000, "log.cleanup.policy": ["compact", "delete"]}
    cases = {
        ("0", "log.dirs", "/x"): "Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
                                 "Cannot update these configs dynamically: Set(log.dirs)",
        ("", "listeners", "PLAINTEXT://127.0.0.1:1"): "Cannot update these configs at default cluster level, "
                                                      "broker id must be specified: Set(listeners)",
        ("0", "log.retention.ms", "soon"): "Invalid value soon for configuration log.retention.ms: "
                                           "Not a number of type LONG",
        ("0", "log.segment.bytes", "10"): "Value must be at least 14",
        ("0", "log.retention.ms", "0"): "log.retention.ms must be unlimited (-1) or, greater than or equal to 1",
        ("0", "num.io.threads", "17"): "Dynamic thread count update validation failed for num.io.threads=17, "
                                       "value should not be greater than double the current value 8",
        ("0", "num.io.threads", "3"): "value should be at least half the current value 8",
        ("0", "advertised.listeners", "nonsense"): "Unable to parse nonsense to a broker endpoint",
        ("0", "process.roles", "broker"): "Cannot update these configs dynamically: Set(process.roles)",  # Kafka's
    }
    for (name, key, value), words in cases.items():
        with pytest.raises(InvalidConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            validate_alter(config, name, {key: value})
    assert validate_alter(config, "0", {"num.io.threads": "16", "listeners": "PLAINTEXT://127.0.0.1:1"})


def test_a_broker_value_beats_the_default_which_beats_the_static_one():
    config = BrokerConfig.from_dict({"log.retention.ms": "5000", "log.segment.bytes": "2000"})
    assert apply_stored(config, {"log.retention.ms": "3000"}, {"log.retention.ms": "4000", "message.max.bytes": "77"})
    assert (config.get("log.retention.ms"), config.get("message.max.bytes"), config.get("log.segment.bytes")) == (
        3000, 77, 2000)
    log = log_config_for(config, {})
    assert (log.retention_ms, log.max_message_bytes, log.segment_bytes) == (3000, 77, 2000)
    assert log_config_for(config, {"retention.ms": "10"}).retention_ms == 10  # a topic override still wins
    apply_stored(config, {}, {"log.retention.ms": "4000"})
    assert config.get("log.retention.ms") == 4000
    apply_stored(config, {}, {})
    assert config.get("log.retention.ms") == 5000


def test_stored_configs_that_cannot_apply_are_ignored():
    config = BrokerConfig.from_dict({})
    # a static key, a per-broker key at default level, a bad value: dropped, the rest applies
    assert apply_stored(config, {"log.dirs": "/x", "log.segment.bytes": "bad"},
                        {"listeners": "PLAINTEXT://h:1", "log.retention.ms": "60000"})
    assert config.dynamic == {} and config.dynamic_default == {"log.retention.ms": 60000}
    # together breaking a rule: the current layers stay, as Kafka keeps its current config
    assert not apply_stored(config, {"log.retention.ms": "0"}, {})
    assert config.dynamic_default == {"log.retention.ms": 60000}


def _entries(entries):
    return {e.name: e for e in entries}


def test_describe_broker_sources_synonyms_and_read_only():
    config = BrokerConfig.from_dict({"log.retention.hours": "100", "num.partitions": "3"})
    apply_stored(config, {"message.max.bytes": "500"}, {"message.max.bytes": "600", "log.retention.ms": "9000"})
    entries = _entries(describe_broker_config(config))
    mmb = entries["message.max.bytes"]
    assert (mmb.value, mmb.source, mmb.read_only) == ("500", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert mmb.synonyms == (("message.max.bytes", "500", ConfigSource.DYNAMIC_BROKER_CONFIG),
                            ("message.max.bytes", "600", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                            ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG))
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source) == ("9000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [s[0] for s in retention.synonyms] == ["log.retention.ms", "log.retention.hours", "log.retention.hours"]
    assert [s[2] for s in retention.synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                                  ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]
    hours = entries["log.retention.hours"]  # a synonym of higher precedence never leads another's entry
    assert (hours.value, hours.source, hours.read_only) == ("100", ConfigSource.STATIC_BROKER_CONFIG, True)
    assert entries["num.partitions"].read_only and entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["log.dirs"].source == ConfigSource.DEFAULT_CONFIG
    assert not entries["listeners"].read_only and not entries["advertised.listeners"].read_only
    # the cluster-wide default resource: only what is set there, with its own synonyms
    defaults = _entries(describe_broker_config(config, per_broker=False))
    assert set(defaults) == {"message.max.bytes", "log.retention.ms"}
    assert defaults["message.max.bytes"].value == "600"
    assert defaults["message.max.bytes"].synonyms == (
        ("message.max.bytes", "600", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),)


def test_a_topic_shows_the_dynamic_default_it_inherits():
    config = BrokerConfig.from_dict({"log.segment.bytes": "5000"})
    apply_stored(config, {}, {"log.retention.ms": "60000", "log.segment.bytes": "6000"})
    entries = _entries(describe_topic_config(config, {}))
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert entries["retention.ms"].synonyms[0] == ("log.retention.ms", "60000",
                                                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [s[2] for s in entries["segment.bytes"].synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                                                 ConfigSource.STATIC_BROKER_CONFIG,
                                                                 ConfigSource.DEFAULT_CONFIG]  # Kafka lists it too
    overridden = _entries(describe_topic_config(config, {"retention.ms": "5"}))["retention.ms"]
    assert [s[2] for s in overridden.synonyms][:2] == [ConfigSource.DYNAMIC_TOPIC_CONFIG,
                                                       ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    assert entries["segment.ms"].value == str(168 * HOUR_MS)


# ---- keys kbroker does not define (issue 22, item 2): Kafka 3.9's three kinds of key ----------


def test_kafkas_dynamic_keys_are_kbrokers_and_log_message_format_version_is_static():
    from kbroker.kafka_broker_configs import KAFKA_BROKER_CONFIG_TYPES, KAFKA_DYNAMIC_BROKER_CONFIGS

    # every key Kafka 3.9 changes at run time is a dynamic key of kbroker's (else it would be refused
    # as static), and no static key of Kafka's is dynamic here
    assert KAFKA_DYNAMIC_BROKER_CONFIGS <= DYNAMIC_BROKER_KEYS
    assert not (DYNAMIC_BROKER_KEYS - KAFKA_DYNAMIC_BROKER_CONFIGS) & set(KAFKA_BROKER_CONFIG_TYPES)
    assert {"compression.gzip.level", "compression.lz4.level", "compression.zstd.level"} <= DYNAMIC_BROKER_KEYS
    assert "log.message.format.version" not in DYNAMIC_BROKER_KEYS  # Kafka's NonReconfigrableLogConfigs
    assert len(KAFKA_BROKER_CONFIG_TYPES) == 328 and KAFKA_BROKER_CONFIG_TYPES["process.roles"] == "LIST"


def test_a_custom_key_is_stored_as_it_is_and_a_static_key_of_kafkas_is_refused():
    config = BrokerConfig.from_dict({})
    assert validate_alter(config, "0", {"cleanup.policy": "compact", "my.app.flag": "on"}) == {
        "cleanup.policy": "compact", "my.app.flag": "on"}  # no such broker keys: custom, as Kafka answers OK
    assert validate_alter(config, "", {"my.app.flag": "on"}) == {"my.app.flag": "on"}
    for key, value in (("process.roles", "broker"), ("log.dirs", "/x"), ("num.partitions", "3"),
                       ("log.message.format.version", "2.8")):
        with pytest.raises(InvalidConfigError, match=rf"Cannot update these configs dynamically: Set\({key}\)"):
            validate_alter(config, "0", {key: value, "my.app.flag": "on"})
    with pytest.raises(InvalidConfigError, match="broker id must be specified"):  # Kafka's ListenerConfigRegex
        validate_alter(config, "", {"listener.name.internal.my.app.flag": "x"})


def test_custom_keys_are_kept_in_the_layers_and_described_as_kafka_describes_them():
    config = BrokerConfig.from_dict({"my.static.thing": "s", "num.replica.alter.log.dirs.threads": "4"})
    assert apply_stored(config, {"cleanup.policy": "compact", "log.retention.ms": "5000"},
                        {"my.app.flag": "on", "cleanup.policy": "delete"})
    assert config.get("cleanup.policy") == "compact" and config.get("log.retention.ms") == 5000
    entries = {e.name: e for e in describe_broker_config(config)}
    custom = entries["cleanup.policy"]
    # Kafka: no type known, so treated as sensitive (no value); not a dynamic config of Kafka's: read-only
    assert (custom.value, custom.sensitive, custom.read_only, custom.type.name, custom.source) == (
        None, True, True, "UNKNOWN", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert custom.synonyms == (("cleanup.policy", None, ConfigSource.DYNAMIC_BROKER_CONFIG),
                               ("cleanup.policy", None, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    assert entries["my.app.flag"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert entries["my.static.thing"].source == ConfigSource.STATIC_BROKER_CONFIG and entries["my.static.thing"].sensitive
    kafkas = entries["num.replica.alter.log.dirs.threads"]  # a static key of Kafka's kbroker does not define
    assert (kafkas.value, kafkas.sensitive, kafkas.type.name, kafkas.read_only) == ("4", False, "INT", True)
    defaults = {e.name: e for e in describe_broker_config(config, per_broker=False)}
    assert set(defaults) == {"my.app.flag", "cleanup.policy"}
    assert defaults["cleanup.policy"].synonyms == (("cleanup.policy", None, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),)


def test_a_stored_static_key_is_ignored_and_a_custom_one_is_not():
    config = BrokerConfig.from_dict({})
    assert apply_stored(config, {"log.dirs": "/elsewhere", "process.roles": "broker", "x.y": "1"}, {})
    assert config.dynamic == {"x.y": "1"}
