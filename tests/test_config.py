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


@pytest.mark.parametrize("key, value, words", [
    ("log.segment.bytes", "13", "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14"),
    ("num.partitions", "0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ("socket.request.max.bytes", "0", "Value must be at least 1"),
    ("log.cleaner.min.cleanable.ratio", "-0.5", "Value must be at least 0"),
    ("log.cleaner.min.cleanable.ratio", "2", "Value must be no more than 1"),
    ("log.roll.jitter.hours", "-1", "Value must be at least 0"),
    ("log.message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
    ("num.partitions", "2147483648", "Not a number of type INT"),
    ("delete.topic.enable", "yes", "Expected value to be either true or false"),
    # a broker value a topic config falls back to passes that topic config's validator, as Kafka's
    # default LogConfig checks it
    ("log.flush.interval.ms", "-1", "Invalid value -1 for configuration log.flush.interval.ms: Value must be at least 0"),
    ("log.roll.ms", "0", "Invalid value 0 for configuration log.roll.ms: Value must be at least 1"),
    ("log.retention.ms", "0", "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"),
    ("log.retention.hours", "0", "Invalid value 0 for configuration log.retention.hours: log.retention.ms must be"),
    ("listeners", "PLAINTEXT//h:1", "Unable to parse PLAINTEXT//h:1 to a broker endpoint"),
    ("listeners", "PLAINTEXT://h:65536", "Invalid port 65536"),
    ("replica.fetch.wait.max.ms", "40000", "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms"),
])
def test_values_outside_kafkas_validators_are_refused_with_kafkas_words(key, value, words):
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_dict({key: value})
    assert words in str(caught.value)


def test_negative_retention_means_unlimited_as_in_kafka():
    # Kafka's KafkaConfig.logRetentionTimeMillis turns any negative value into -1 (unlimited); only
    # 0 is refused. log.retention.bytes takes any long.
    config = BrokerConfig.from_dict({"log.retention.ms": "-5", "log.retention.bytes": "-7"})
    assert log_config_for(config, {}).retention_ms == -1
    assert log_config_for(config, {}).retention_bytes == -7


@pytest.mark.parametrize("text, expected", [
    ("http://127.0.0.1:9404", ("127.0.0.1", 9404)), ("http://:9404", ("", 9404)),
    ("http://[::1]:9404/metrics", ("::1", 9404)), ("http://localhost:0/", ("localhost", 0))])
def test_metrics_listener_is_an_http_address(text, expected):
    assert BrokerConfig.from_dict({"metrics.listener": text}).metrics_listener == expected
    assert BrokerConfig.from_dict({}).metrics_listener is None  # off by default


@pytest.mark.parametrize("text", ["127.0.0.1:9404", "https://h:9404", "http://h", "http://h:65536", "http://h:1/x",
                                  "PLAINTEXT://h:9404"])
def test_a_wrong_metrics_listener_is_refused(text):
    with pytest.raises(InvalidConfigError, match="for configuration metrics.listener: expected http://host:port"):
        BrokerConfig.from_dict({"metrics.listener": text})
