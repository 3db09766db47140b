import pytest

from kbroker.config import (
    BrokerConfig,
    ConfigSource,
    describe_topic_config,
    log_config_for,
    parse_properties,
    validate_topic_configs,
)
from kbroker.errors import InvalidConfigError


def test_properties_file_syntax():
    text = "# comment\n! also\nlog.dirs=/a,/b\nnum.partitions : 3\nlisteners PLAINTEXT://h:1\nlong=a\\\n  b\n"
    assert parse_properties(text) == {"log.dirs": "/a,/b", "num.partitions": "3",
                                      "listeners": "PLAINTEXT://h:1", "long": "ab"}


def test_default_retention_is_two_weeks():
    config = BrokerConfig()
    assert log_config_for(config, {}).retention_ms == 14 * 24 * 3600 * 1000


def test_retention_precedence_ms_over_minutes_over_hours():
    assert log_config_for(BrokerConfig.from_dict({"log.retention.hours": "1"}), {}).retention_ms == 3_600_000
    both = BrokerConfig.from_dict({"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert log_config_for(both, {}).retention_ms == 120_000
    three = BrokerConfig.from_dict({"log.retention.hours": "1", "log.retention.ms": "5"})
    assert log_config_for(three, {}).retention_ms == 5
    assert log_config_for(three, {"retention.ms": "9"}).retention_ms == 9


def test_overrides_win_over_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nlog.dirs=/x\n")
    config = BrokerConfig.from_sources(props, ["num.partitions=5"])
    assert config.get("num.partitions") == 5 and config.log_dirs[0].as_posix() == "/x"


def test_bad_values_are_invalid_config():
    with pytest.raises(InvalidConfigError):
        BrokerConfig.from_dict({"num.partitions": "zero"})
    with pytest.raises(InvalidConfigError):
        validate_topic_configs({"cleanup.policy": "shred"})
    with pytest.raises(InvalidConfigError):
        validate_topic_configs({"no.such.key": "1"})


def test_describe_reports_source_and_synonyms():
    config = BrokerConfig.from_dict({"log.segment.bytes": "1000"})
    entries = {e.name: e for e in describe_topic_config(config, {"retention.ms": "100"})}
    assert entries["retention.ms"].value == "100"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["segment.bytes"].value == "1000"
    assert entries["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["max.message.bytes"].synonyms[0][0] == "message.max.bytes"
    assert len(entries) >= 20


def test_throttled_replica_lists_are_topic_configs_with_kafkas_syntax():
    ok = {"leader.replication.throttled.replicas": "0:101,1:102", "follower.replication.throttled.replicas": "*"}
    assert validate_topic_configs(ok) == {"leader.replication.throttled.replicas": ["0:101", "1:102"],
                                          "follower.replication.throttled.replicas": ["*"]}
    assert validate_topic_configs({"leader.replication.throttled.replicas": ""}) == {
        "leader.replication.throttled.replicas": []}
    for bad in ("0-101", "*,0:1", "a:1", "0:101:2"):
        with pytest.raises(InvalidConfigError):
            validate_topic_configs({"follower.replication.throttled.replicas": bad})
    entries = {e.name: e for e in describe_topic_config(BrokerConfig(), {"leader.replication.throttled.replicas": "0:1"})}
    assert (entries["leader.replication.throttled.replicas"].value,
            entries["leader.replication.throttled.replicas"].source) == ("0:1", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert (entries["follower.replication.throttled.replicas"].value,
            entries["follower.replication.throttled.replicas"].source) == ("", ConfigSource.DEFAULT_CONFIG)


def test_the_throttle_rates_are_dynamic_only():
    from kbroker.config import validate_dynamic_broker_configs

    assert validate_dynamic_broker_configs({"leader.replication.throttled.rate": "1000"}) == {
        "leader.replication.throttled.rate": 1000}
    with pytest.raises(InvalidConfigError, match="Cannot update these configs dynamically: log.dirs"):
        validate_dynamic_broker_configs({"log.dirs": "/x"})
    config = BrokerConfig.from_dict({"leader.replication.throttled.rate": "5"})  # a properties file cannot set it
    assert config.unknown == {"leader.replication.throttled.rate": "5"}


def test_tiered_storage_topic_configs_are_validated_as_kafka_does():
    from kbroker.config import BrokerConfig, log_config_for, validate_topic_configs
    from kbroker.errors import InvalidConfigError

    off = BrokerConfig.from_dict({})
    on = BrokerConfig.from_dict({"remote.log.storage.system.enable": "true", "log.retention.ms": "100000"})
    with pytest.raises(InvalidConfigError, match="disabled in the broker"):
        validate_topic_configs({"remote.storage.enable": "true"}, off)
    validate_topic_configs({"remote.storage.enable": "true", "local.retention.ms": "1000"}, on)
    with pytest.raises(InvalidConfigError, match="compacted"):
        validate_topic_configs({"remote.storage.enable": "true", "cleanup.policy": "compact"}, on)
    with pytest.raises(InvalidConfigError, match="more than retention.ms"):
        validate_topic_configs({"remote.storage.enable": "true", "local.retention.ms": "200000"}, on)
    with pytest.raises(InvalidConfigError, match="must not be -1"):
        validate_topic_configs({"remote.storage.enable": "true", "local.retention.bytes": "-1",
                                "retention.bytes": "5000"}, on)
    validate_topic_configs({"remote.storage.enable": "true", "local.retention.ms": "-1", "retention.ms": "-1"}, on)
    with pytest.raises(InvalidConfigError, match="disable remote storage"):
        validate_topic_configs({}, on, current={"remote.storage.enable": "true"})
    config = log_config_for(on, {"remote.storage.enable": "true", "local.retention.ms": "1000"})
    assert config.remote_storage_enable and config.local_retention_ms_effective == 1000
    assert config.local_retention_bytes_effective == config.retention_bytes == -1
    assert not log_config_for(off, {"remote.storage.enable": "true"}).remote_storage_enable
