"""Per-group configs (Kafka 4's GroupConfig, KIP-848): `consumer.session.timeout.ms` and
`consumer.heartbeat.interval.ms` set on a GROUP config resource (DescribeConfigs /
IncrementalAlterConfigs / AlterConfigs, resource type 32) take the place of the broker's
`group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms` for that group.

Pure: the names, Kafka's validation (GroupConfigManager.validate: each value against the broker's
`group.consumer.min/max.*` bounds, the heartbeat interval below the session timeout, with Kafka's
INVALID_CONFIG words), the rows DescribeConfigs shows, and the values the coordinator uses. The
stored strings live beside the metadata (kbroker/metadata/group_configs.py). Share groups have
`share.auto.offset.reset` (where the share-partitions of a new share group start). Imports no storage: kbroker.config (which reads log
settings) is the API's to use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from kbroker.config_defs import ConfigDef, ConfigSource, ConfigType, Range, Rule, format_value, parse_value
from kbroker.errors import InvalidConfigError
from kbroker.group.types import GroupConfig

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"  # Kafka 4.4 (KIP-1191): a share group's dead letters
SHARE_REDELIVERY_BACKOFF_MS = "share.redelivery.backoff.ms"  # kbroker's own
SHARE_REDELIVERY_BACKOFF_MAX_MS = "share.redelivery.backoff.max.ms"  # kbroker's own
# Java's Duration.parse takes the letters in either case (the share manager reads the value lower-cased)
_DURATION = re.compile(r"by_duration:P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def reset_duration_ms(value: str) -> int | None:
    """The milliseconds of a `by_duration:<ISO-8601 duration>` reset (PnDTnHnMn.nS), None for another value."""
    m = _DURATION.fullmatch(value.strip())
    if m is None or not any(m.groups()):
        return None
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def _reset_ok(value: object) -> bool:
    text = str(value).strip().lower()
    return text in ("latest", "earliest") or reset_duration_ms(str(value)) is not None

# Kafka's GroupConfig definitions (INT, atLeast(1)), with GroupCoordinatorConfig's docs
GROUP_CONFIGS: dict[str, ConfigDef] = {
    CONSUMER_SESSION_TIMEOUT_MS: ConfigDef(
        CONSUMER_SESSION_TIMEOUT_MS, ConfigType.INT, 45000,
        "The timeout to detect client failures when using the consumer group protocol.", Range(1)),
    CONSUMER_HEARTBEAT_INTERVAL_MS: ConfigDef(
        CONSUMER_HEARTBEAT_INTERVAL_MS, ConfigType.INT, 5000,
        "The heartbeat interval given to the members of a consumer group.", Range(1)),
    SHARE_AUTO_OFFSET_RESET: ConfigDef(
        SHARE_AUTO_OFFSET_RESET, ConfigType.STRING, "latest",
        "Where a share group starts on a partition it has no state for: latest, earliest, or "
        "by_duration:<ISO-8601 duration> (the first record at or after now minus the duration).",
        Rule(_reset_ok, "Invalid value. Must be one of latest, earliest or by_duration:<duration>")),
    SHARE_ISOLATION_LEVEL: ConfigDef(
        SHARE_ISOLATION_LEVEL, ConfigType.STRING, "read_uncommitted",
        "What a share group reads of transactional records: read_uncommitted (all of them, up to the high "
        "watermark) or read_committed (committed ones only, up to the last stable offset).",
        Rule(lambda v: str(v).strip().lower() in ("read_uncommitted", "read_committed"),
             "Invalid value. Must be read_uncommitted or read_committed")),
    DLQ_TOPIC_NAME: ConfigDef(
        DLQ_TOPIC_NAME, ConfigType.STRING, "",
        "The topic a share group's rejected records, and those archived at the delivery count limit, are "
        "copied to (empty: none); it must begin with errors.deadletterqueue.topic.name.prefix and have "
        "errors.deadletterqueue.group.enable=true."),
    SHARE_REDELIVERY_BACKOFF_MS: ConfigDef(
        SHARE_REDELIVERY_BACKOFF_MS, ConfigType.INT, 0,
        "kbroker's own: a share-group record released or whose lock expired is available again only after "
        "this long, doubled for each delivery after the first (0: at once, as Kafka).", Range(0)),
    SHARE_REDELIVERY_BACKOFF_MAX_MS: ConfigDef(
        SHARE_REDELIVERY_BACKOFF_MAX_MS, ConfigType.INT, 60000,
        "kbroker's own: the longest share.redelivery.backoff.ms grows to.", Range(0)),
}

_BROKER_KEY = "group.consumer"  # the broker's keys these stand in for: group.consumer.[min.|max.]<key>


@dataclass(frozen=True)
class GroupTimeouts:
    """What the coordinator uses for one consumer group."""

    heartbeat_interval_ms: int
    session_timeout_ms: int


def defaults(config: GroupConfig) -> dict[str, int]:
    """The broker's values, what a group without its own has (Kafka's extractConsumerGroupConfigMap)."""
    return {CONSUMER_SESSION_TIMEOUT_MS: config.consumer_session_timeout_ms,
            CONSUMER_HEARTBEAT_INTERVAL_MS: config.consumer_heartbeat_interval_ms,
            SHARE_AUTO_OFFSET_RESET: "latest", SHARE_ISOLATION_LEVEL: "read_uncommitted", DLQ_TOPIC_NAME: "",
            SHARE_REDELIVERY_BACKOFF_MS: 0,
            SHARE_REDELIVERY_BACKOFF_MAX_MS: 60000}


def share_backoff(configs: Mapping[str, str] | None) -> tuple[int, int]:
    """A share group's (redelivery backoff, its maximum) in ms, from its stored configs."""
    stored = configs or {}
    backoff = _stored(stored, SHARE_REDELIVERY_BACKOFF_MS)
    most = _stored(stored, SHARE_REDELIVERY_BACKOFF_MAX_MS)
    return (0 if backoff is None else backoff), (60000 if most is None else most)


def validate(configs: Mapping[str, str], config: GroupConfig) -> dict[str, int]:
    """Kafka's GroupConfigManager.validate of a group's whole new config set (over the broker's
    values): unknown names, then each value's type and range, then the bounds, in Kafka's order.
    Returns the effective values; InvalidConfigError (INVALID_CONFIG) with Kafka's words otherwise."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    values = defaults(config)
    for name, definition in GROUP_CONFIGS.items():  # ConfigDef.parse: in definition order
        if name in configs:
            values[name] = parse_value(definition, configs[name])
    heartbeat, session = values[CONSUMER_HEARTBEAT_INTERVAL_MS], values[CONSUMER_SESSION_TIMEOUT_MS]
    checks = (
        (heartbeat < config.consumer_min_heartbeat_interval_ms, CONSUMER_HEARTBEAT_INTERVAL_MS,
         "must be greater than or equal to", f"{_BROKER_KEY}.min.heartbeat.interval.ms"),
        (heartbeat > config.consumer_max_heartbeat_interval_ms, CONSUMER_HEARTBEAT_INTERVAL_MS,
         "must be less than or equal to", f"{_BROKER_KEY}.max.heartbeat.interval.ms"),
        (session < config.consumer_min_session_timeout_ms, CONSUMER_SESSION_TIMEOUT_MS,
         "must be greater than or equal to", f"{_BROKER_KEY}.min.session.timeout.ms"),
        (session > config.consumer_max_session_timeout_ms, CONSUMER_SESSION_TIMEOUT_MS,
         "must be less than or equal to", f"{_BROKER_KEY}.max.session.timeout.ms"),
        (session <= heartbeat, CONSUMER_SESSION_TIMEOUT_MS, "must be greater than", CONSUMER_HEARTBEAT_INTERVAL_MS),
    )
    for failed, key, words, other in checks:
        if failed:
            raise InvalidConfigError(f"{key} {words} {other}")
    dlq = str(values[DLQ_TOPIC_NAME]).strip()
    if dlq and not dlq.startswith(config.dlq_topic_prefix):
        raise InvalidConfigError(f"{DLQ_TOPIC_NAME} {dlq} does not begin with '{config.dlq_topic_prefix}' "
                                 "(errors.deadletterqueue.topic.name.prefix)")
    return values


def _stored(configs: Mapping[str, str], name: str) -> int | None:
    """A stored value as the group uses it; None when absent or unreadable (a hand-edited file):
    the broker's value applies then. Stored values are not checked against today's bounds again,
    as Kafka's GroupConfigManager takes them."""
    if name not in configs:
        return None
    try:
        return parse_value(GROUP_CONFIGS[name], configs[name])
    except InvalidConfigError:
        return None


def timeouts(config: GroupConfig, configs: Mapping[str, str] | None) -> GroupTimeouts:
    """The heartbeat interval and session timeout of a group with these stored configs."""
    stored = configs or {}
    heartbeat = _stored(stored, CONSUMER_HEARTBEAT_INTERVAL_MS)
    session = _stored(stored, CONSUMER_SESSION_TIMEOUT_MS)
    return GroupTimeouts(config.consumer_heartbeat_interval_ms if heartbeat is None else heartbeat,
                         config.consumer_session_timeout_ms if session is None else session)


def describe(config: GroupConfig, configs: Mapping[str, str]) -> list[tuple[ConfigDef, str | None, ConfigSource]]:
    """Every group config as DescribeConfigs shows it (Kafka's ConfigHelper.createGroupConfigEntry),
    by name: (its definition, the value shown, the source) — the group's value (GROUP_CONFIG) or
    the broker's (DEFAULT_CONFIG); each is its own only synonym, never read-only."""
    broker = defaults(config)
    rows = []
    for name, definition in sorted(GROUP_CONFIGS.items()):
        value = _stored(configs, name)
        source = ConfigSource.DEFAULT_CONFIG if value is None else ConfigSource.GROUP_CONFIG
        rows.append((definition, format_value(broker[name] if value is None else value), source))
    return rows
