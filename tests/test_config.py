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


# ---- DescribeConfigs of a topic lists what Kafka 3.9 lists (issue 22, item 6) ------------------

# Kafka 3.9.0's LogConfig (every topic config, none internal) with its defaults, as its ConfigDef gives them
KAFKA_39_TOPIC_DEFAULTS = {
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


def test_a_topic_describes_every_kafka_39_config_with_kafkas_defaults():
    entries = {e.name: e for e in describe_topic_config(BrokerConfig(), {})}
    assert set(KAFKA_39_TOPIC_DEFAULTS) <= set(entries)
    differ = {k: (entries[k].value, v) for k, v in KAFKA_39_TOPIC_DEFAULTS.items() if entries[k].value != v}
    assert differ == {"retention.ms": ("1209600000", "604800000")}  # kbroker's documented two weeks
    assert all(entries[k].source == ConfigSource.DEFAULT_CONFIG and not entries[k].read_only
               for k in KAFKA_39_TOPIC_DEFAULTS)


def test_the_default_synonyms_are_kafkas_each_in_its_own_unit():
    """Kafka's ConfigHelper lists each broker synonym that has a default, in that key's unit."""
    entries = {e.name: e for e in describe_topic_config(BrokerConfig(), {})}
    default = ConfigSource.DEFAULT_CONFIG
    assert entries["retention.ms"].synonyms == (("log.retention.hours", "336", default),)
    assert entries["segment.ms"].synonyms == (("log.roll.hours", "168", default),)
    assert entries["segment.jitter.ms"].synonyms == (("log.roll.jitter.hours", "0", default),)
    assert entries["flush.ms"].synonyms == (("log.flush.scheduler.interval.ms", "9223372036854775807", default),)
    assert entries["message.format.version"].synonyms == (("log.message.format.version", "3.0-IV1", default),)
    assert entries["message.downconversion.enable"].synonyms == (
        ("log.message.downconversion.enable", "true", default),)
    assert entries["compression.zstd.level"].synonyms == (("compression.zstd.level", "3", default),)
    assert entries["remote.log.copy.disable"].synonyms == ()
    static = {e.name: e for e in describe_topic_config(BrokerConfig.from_dict({"log.retention.ms": "5000"}), {})}
    assert static["retention.ms"].synonyms == (("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
                                               ("log.retention.hours", "336", default))
    # flush.ms falls back on log.flush.scheduler.interval.ms, as Kafka's synonyms say
    fallback = BrokerConfig.from_dict({"log.flush.scheduler.interval.ms": "2000"})
    assert log_config_for(fallback, {}).flush_interval_ms == 2000


def test_the_new_topic_configs_validate_with_kafkas_words():
    assert validate_topic_configs({"message.format.version": "2.8", "compression.gzip.level": "-1",
                                   "compression.zstd.level": "-131072", "message.downconversion.enable": "false",
                                   "remote.log.copy.disable": "true"}) == {
        "message.format.version": "2.8", "compression.gzip.level": -1, "compression.zstd.level": -131072,
        "message.downconversion.enable": False, "remote.log.copy.disable": True}
    for key, value, words in (
            ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
            ("compression.lz4.level", "18", "Value must be no more than 17"),
            ("compression.zstd.level", "23", "Value must be no more than 22"),
            ("message.format.version", "9.9", "Version 9.9 is not a valid version"),
            ("message.downconversion.enable", "maybe", "Expected value to be either true or false")):
        with pytest.raises(InvalidConfigError, match=f"Invalid value {value} for configuration {key}: {words}"):
            validate_topic_configs({key: value})


def test_partitions_retire_from_is_an_operation_not_a_topic_config():
    with pytest.raises(InvalidConfigError, match="partitions.retire.from is not a topic config"):
        validate_topic_configs({"partitions.retire.from": "2"})
