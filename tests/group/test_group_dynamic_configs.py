"""Per-group configs (KIP-848's GROUP resource): Kafka's GroupConfigManager.validate against the
broker's bounds with its INVALID_CONFIG words, the values the coordinator uses, and the rows
DescribeConfigs shows with their sources."""

import pytest

from kbroker.config_defs import ConfigSource, ConfigType
from kbroker.errors import InvalidConfigError
from kbroker.group.dynamic_configs import (
    CONSUMER_HEARTBEAT_INTERVAL_MS as HB,
    CONSUMER_SESSION_TIMEOUT_MS as SESSION,
    GroupTimeouts,
    describe,
    timeouts,
    validate,
)
from kbroker.group.types import GroupConfig

SHARE_DEFAULTS = {"share.auto.offset.reset": "latest", "share.redelivery.backoff.ms": 0,  # share groups' keys
                  "share.redelivery.backoff.max.ms": 60000, "errors.deadletterqueue.topic.name": "",
                  "share.isolation.level": "read_uncommitted"}

BROKER = GroupConfig()  # Kafka's defaults: heartbeat 5000 in [5000, 15000], session 45000 in [45000, 60000]
WIDE = GroupConfig(consumer_min_session_timeout_ms=1000, consumer_min_heartbeat_interval_ms=1000)


def refused(configs, config=BROKER) -> str:
    with pytest.raises(InvalidConfigError) as exc:
        validate(configs, config)
    return str(exc.value)


def test_values_within_the_brokers_bounds_are_taken_over_its_defaults():
    reset = "share.auto.offset.reset"
    assert validate({}, BROKER) == {SESSION: 45000, HB: 5000, **SHARE_DEFAULTS}
    assert validate({HB: "15000"}, BROKER) == {SESSION: 45000, HB: 15000, **SHARE_DEFAULTS}
    assert validate({SESSION: " 60000 ", HB: "6000", reset: "by_duration:PT1H"}, BROKER) == \
        {SESSION: 60000, HB: 6000, **SHARE_DEFAULTS, reset: "by_duration:PT1H"}


@pytest.mark.parametrize("value", ["sometimes", "by_duration:", "by_duration:P", "by_duration:1H"])
def test_share_auto_offset_reset_takes_kafkas_three_forms_only(value):
    with pytest.raises(InvalidConfigError, match="latest, earliest or by_duration"):
        validate({"share.auto.offset.reset": value}, BROKER)


@pytest.mark.parametrize("configs, words", [
    ({HB: "4999"}, "consumer.heartbeat.interval.ms must be greater than or equal to "
                   "group.consumer.min.heartbeat.interval.ms"),
    ({HB: "15001"}, "consumer.heartbeat.interval.ms must be less than or equal to "
                    "group.consumer.max.heartbeat.interval.ms"),
    ({SESSION: "44999"}, "consumer.session.timeout.ms must be greater than or equal to "
                         "group.consumer.min.session.timeout.ms"),
    ({SESSION: "60001"}, "consumer.session.timeout.ms must be less than or equal to "
                         "group.consumer.max.session.timeout.ms"),
    # the heartbeat bound is checked before the session's, as Kafka does
    ({HB: "1", SESSION: "1"}, "consumer.heartbeat.interval.ms must be greater than or equal to "
                              "group.consumer.min.heartbeat.interval.ms"),
])
def test_out_of_bounds_values_are_refused_with_kafkas_words(configs, words):
    assert refused(configs) == words


def test_the_heartbeat_interval_must_stay_below_the_session_timeout():
    words = "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    assert refused({SESSION: "10000", HB: "10000"}, WIDE) == words
    assert refused({SESSION: "2000"}, WIDE) == words  # against the broker's heartbeat interval (5000)
    assert validate({SESSION: "2000", HB: "1000"}, WIDE) == {SESSION: 2000, HB: 1000, **SHARE_DEFAULTS}


def test_unknown_names_and_bad_values():
    assert refused({"consumer.session.timeout": "50000"}) == "Unknown group config name: consumer.session.timeout"
    assert refused({"share.session.timeout.ms": "50000"}) == "Unknown group config name: share.session.timeout.ms"
    assert refused({SESSION: "abc"}) == \
        "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
    assert refused({HB: "0"}) == "Invalid value 0 for configuration consumer.heartbeat.interval.ms: " \
                                 "Value must be at least 1"
    assert refused({HB: str(2**31)}) == \
        f"Invalid value {2**31} for configuration consumer.heartbeat.interval.ms: Not a number of type INT"


def test_the_coordinator_uses_the_groups_values_else_the_brokers():
    assert timeouts(BROKER, None) == timeouts(BROKER, {}) == GroupTimeouts(5000, 45000)
    assert timeouts(BROKER, {HB: "7000"}) == GroupTimeouts(7000, 45000)
    assert timeouts(BROKER, {HB: "7000", SESSION: "50000"}) == GroupTimeouts(7000, 50000)
    # a stored value that cannot be read (a hand-edited file) leaves the broker's in place
    assert timeouts(BROKER, {HB: "soon", SESSION: "-5"}) == GroupTimeouts(5000, 45000)


def test_describe_shows_each_key_with_its_source():
    def rows(config, stored):
        return {d.name: (d, value, source) for d, value, source in describe(config, stored)}

    described = rows(BROKER, {})
    assert list(described) == sorted([HB, SESSION, *SHARE_DEFAULTS])
    assert described["share.auto.offset.reset"][1:] == ("latest", ConfigSource.DEFAULT_CONFIG)
    assert described[HB][1:] == ("5000", ConfigSource.DEFAULT_CONFIG)
    assert described[SESSION][1:] == ("45000", ConfigSource.DEFAULT_CONFIG)
    definition = described[HB][0]
    assert definition.type == ConfigType.INT and not definition.sensitive
    assert definition.doc == "The heartbeat interval given to the members of a consumer group."

    described = rows(BROKER, {HB: "6000"})
    assert described[HB][1:] == ("6000", ConfigSource.GROUP_CONFIG)
    assert ConfigSource.GROUP_CONFIG == 8
    assert described[SESSION][1:] == ("45000", ConfigSource.DEFAULT_CONFIG)
    # the broker's own value is the default shown
    assert rows(GroupConfig(consumer_session_timeout_ms=50000), {})[SESSION][1] == "50000"


def test_a_dead_letter_topic_must_have_the_prefix():
    assert validate({"errors.deadletterqueue.topic.name": "dlq.orders"}, BROKER)["errors.deadletterqueue.topic.name"] \
        == "dlq.orders"
    assert refused({"errors.deadletterqueue.topic.name": "orders"}) == \
        "errors.deadletterqueue.topic.name orders does not begin with 'dlq.' (errors.deadletterqueue.topic.name.prefix)"


def test_by_duration_letters_in_either_case_as_java_parses_them():
    from kbroker.group.dynamic_configs import reset_duration_ms

    assert reset_duration_ms("by_duration:PT30S") == reset_duration_ms("by_duration:pt30s") == 30_000
    assert reset_duration_ms("by_duration:p1dt1h") == 25 * 3600 * 1000
    assert reset_duration_ms("by_duration:pt") is None
