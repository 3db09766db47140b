"""The tables of every configuration key kbroker understands, with Kafka's names, types, defaults
and validators: `BROKER_CONFIGS`, `TOPIC_CONFIGS` (each topic key with its broker synonyms, most
specific first) and `BROKER_QUOTA_CONFIGS` (keys that exist only as dynamic broker configs, as
Kafka's quota configs). `parse_value` turns a raw value into its typed form or Kafka's
ConfigException words. Resolution and precedence are config.py's; which keys may change at run time
is dynamic_config.py's.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass
from typing import Any, Callable

from kbroker.errors import InvalidConfigError

LONG_MAX = 2**63 - 1


class ConfigType(enum.IntEnum):
    """DescribeConfigs `config_type` (v3+)."""

    UNKNOWN = 0  # a key with no definition (a custom broker config Kafka stores and shows back)
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs `config_source` (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8  # a per-group config (Kafka 4's GROUP resource; Java's DYNAMIC_GROUP_CONFIG)


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any
    doc: str
    valid: Callable[[Any], bool] | None = None
    choices: tuple[str, ...] | None = None
    sensitive: bool = False


class Rule:
    """A value check with the words Kafka's validator gives when it fails (ConfigDef.Range &c.)."""

    def __init__(self, check: Callable[[Any], bool], words: str) -> None:
        self.check, self.words = check, words

    def __call__(self, value: Any) -> bool:
        return self.check(value)

    def why(self, value: Any) -> str:
        return self.words


class Range(Rule):
    """Kafka's ConfigDef.Range: atLeast(min), between(min, max)."""

    def __init__(self, low: float, high: float | None = None) -> None:
        super().__init__(lambda v: v >= low and (high is None or v <= high), f"Value must be at least {low}")
        self.high = high

    def why(self, value: Any) -> str:
        return f"Value must be no more than {self.high}" if self.high is not None and value > self.high else self.words


def invalid_value(d: ConfigDef, raw: Any, why: str) -> InvalidConfigError:
    """Kafka's ConfigException text: `Invalid value <v> for configuration <key>: <why>`."""
    shown = format_value(raw) if isinstance(raw, (list, bool)) else str(raw).strip()
    return InvalidConfigError(f"Invalid value {shown} for configuration {d.name}: {why}")


def parse_value(d: ConfigDef, raw: Any) -> Any:
    """Parse a string (or already typed value) for `d`; InvalidConfigError when it does not fit."""
    try:
        if raw is None:
            value = None
        elif d.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            value = int(str(raw).strip())
            bits = {ConfigType.INT: 31, ConfigType.LONG: 63, ConfigType.SHORT: 15}[d.type]
            if not -(2**bits) <= value < 2**bits:
                raise ValueError(f"Not a number of type {d.type.name}")
        elif d.type is ConfigType.DOUBLE:
            value = float(str(raw).strip())
        elif d.type is ConfigType.BOOLEAN:
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError("Expected value to be either true or false")
            value = text == "true"
        elif d.type is ConfigType.LIST:
            value = [part.strip() for part in str(raw).split(",") if part.strip()] if not isinstance(raw, list) else raw
        else:
            value = str(raw).strip()
    except ValueError as exc:
        why = str(exc) if str(exc).startswith(("Not a number", "Expected")) else f"Not a number of type {d.type.name}"
        raise invalid_value(d, raw, why) from None
    if d.choices is not None and value is not None:
        items = value if isinstance(value, list) else [value]
        lowered = {c.lower(): c for c in d.choices}
        if not all(str(v).lower() in lowered for v in items):
            raise invalid_value(d, raw, f"String must be one of: {', '.join(d.choices)}")
    if d.valid is not None and value is not None and not d.valid(value):
        raise invalid_value(d, raw, d.valid.why(value) if isinstance(d.valid, Rule) else "Value is not valid")
    return value


def format_value(value: Any) -> str | None:
    """A config value as Kafka prints it in DescribeConfigs."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


class _Overrides(Rule):
    """max.connections.per.ip.overrides: Kafka's host:count list (kbroker/quota/connections.py)."""

    def __init__(self) -> None:
        super().__init__(self._valid, "")

    @staticmethod
    def _valid(value: Any) -> bool:
        from kbroker.quota.connections import parse_overrides

        try:
            parse_overrides(value)
        except ValueError:
            return False
        return True

    def why(self, value: Any) -> str:
        from kbroker.quota.connections import parse_overrides

        try:
            parse_overrides(value)
        except ValueError as exc:
            return str(exc)
        return ""


_OVERRIDES = _Overrides()


def _protocols_ok(value: Any) -> bool:
    names = [v.strip().lower() for v in as_list(value)]
    return "classic" in names and all(n in ("classic", "consumer", "share") for n in names)


ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    "org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.api.assignor.RangeAssignor": "range",
}


def assignor_names(value: Any) -> tuple[str, ...]:
    """group.consumer.assignors as short names (Kafka's class names map to theirs)."""
    return tuple(ASSIGNOR_CLASSES.get(v.strip(), v.strip()) for v in as_list(value) if v.strip())


def _assignors_ok(value: Any) -> bool:
    names = assignor_names(value)
    return bool(names) and all(n in ("uniform", "range") for n in names)


def as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else str(value).split(",")


def _at_least(n: int) -> Rule:
    return Range(n)


def _between(low: float, high: float) -> Rule:
    return Range(low, high)


class _Choice(Rule):
    """Kafka's validators that allow a range plus one special value (GzipCompression's level)."""

    def __init__(self, low: int, high: int, special: int) -> None:
        super().__init__(lambda v: v == special or low <= v <= high,
                         f"Value must be between {low} and {high} or equal to {special}")


_GZIP_LEVEL = _Choice(1, 9, -1)
# Kafka 3.9's MetadataVersion strings (MetadataVersionValidator: message.format.version)
_METADATA_VERSIONS = frozenset(
    ["0.8.0", "0.8.1", "0.8.2", "0.9.0"]
    + [f"{v}{iv}" for v, ivs in {"0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1, "1.1": 1,
                                 "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3,
                                 "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3,
                                 "3.7": 5, "3.8": 1, "3.9": 1, "4.0": 2}.items()
       for iv in ["", *(f"-IV{i}" for i in range(ivs))]])


class _MetadataVersion(Rule):
    def __init__(self) -> None:
        super().__init__(lambda v: v in _METADATA_VERSIONS, "")

    def why(self, value: Any) -> str:
        return f"Version {value} is not a valid version"


_MESSAGE_FORMAT = _MetadataVersion()


def _throttled_replicas(items: list[str]) -> bool:
    """Kafka's ThrottledReplicaListValidator: '*' alone, or partition:broker entries."""
    return items == ["*"] or all(re.fullmatch(r"[0-9]+:[0-9]+", item) for item in items)


_B, _S, _I, _L, _D, _LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_CLEANUP = ("delete", "compact")
_TS_TYPES = ("CreateTime", "LogAppendTime")
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("node.id", _I, 0, "The broker's id (alias broker.id)."),
        ConfigDef("broker.id", _I, -1, "The broker's id; node.id wins when both are set."),
        ConfigDef("listeners", _S, "PLAINTEXT://127.0.0.1:9092", "Listener URIs, comma separated."),
        ConfigDef("advertised.listeners", _S, None, "Listener URIs given to clients; defaults to listeners."),
        ConfigDef("log.dirs", _S, None, "Data directories, comma separated (falls back to log.dir)."),
        ConfigDef("log.dir", _S, "./kbroker-data", "Data directory used when log.dirs is not set."),
        ConfigDef("zookeeper.connect", _S, None, "ZooKeeper connect string; unset = embedded single node."),
        ConfigDef("cluster.id", _S, None, "Cluster id; generated and stored in meta.properties when unset."),
        ConfigDef("num.partitions", _I, 1, "Default partition count of auto-created topics.", _at_least(1)),
        ConfigDef("default.replication.factor", _I, 1, "Default replication factor of auto-created topics."),
        ConfigDef("auto.create.topics.enable", _B, True, "Create unknown topics on Metadata requests."),
        ConfigDef("delete.topic.enable", _B, True, "Allow DeleteTopics."),
        ConfigDef("log.segment.bytes", _I, 1073741824, "Maximum segment size.", _at_least(14)),
        ConfigDef("log.roll.ms", _L, None, "Maximum segment age before rolling (wins over log.roll.hours)."),
        ConfigDef("log.roll.hours", _I, 168, "Maximum segment age in hours.", _at_least(1)),
        ConfigDef("log.roll.jitter.ms", _L, None, "Jitter on segment roll time."),
        ConfigDef("log.roll.jitter.hours", _I, 0, "Jitter on segment roll time in hours.", _at_least(0)),
        ConfigDef("log.retention.ms", _L, None, "Retention time; -1 = forever (wins over minutes/hours)."),
        ConfigDef("log.retention.minutes", _I, None, "Retention time in minutes."),
        ConfigDef("log.retention.hours", _I, 336, "Retention time in hours (kbroker default: 2 weeks)."),
        ConfigDef("log.retention.bytes", _L, -1, "Retention size per partition; -1 = unlimited."),
        ConfigDef("log.retention.check.interval.ms", _L, 300000, "How often retention runs.", _at_least(1)),
        ConfigDef("log.index.interval.bytes", _I, 4096, "Bytes between offset index entries.", _at_least(0)),
        ConfigDef("log.index.size.max.bytes", _I, 10485760, "Maximum index file size.", _at_least(4)),
        ConfigDef("log.flush.interval.messages", _L, LONG_MAX, "Messages before a forced fsync.", _at_least(1)),
        ConfigDef("log.flush.interval.ms", _L, None, "Max time data stays unflushed; unset = scheduler interval."),
        ConfigDef("log.flush.scheduler.interval.ms", _L, LONG_MAX, "How often the flusher checks logs."),
        ConfigDef("log.flush.offset.checkpoint.interval.ms", _I, 60000, "Recovery point checkpoint interval.",
                  _at_least(0)),
        ConfigDef("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, "Log start checkpoint interval.",
                  _at_least(0)),
        ConfigDef("replica.high.watermark.checkpoint.interval.ms", _L, 5000, "High watermark checkpoint interval."),
        ConfigDef("log.segment.delete.delay.ms", _L, 60000, "Delay before deleting a removed segment's files.",
                  _at_least(0)),
        ConfigDef("log.cleanup.policy", _LIST, ["delete"], "delete and/or compact.", choices=_CLEANUP),
        ConfigDef("log.cleaner.enable", _B, True, "Compact logs with cleanup.policy compact."),
        ConfigDef("log.cleaner.backoff.ms", _L, 15000, "Pause between log cleaner passes.", _at_least(0)),
        ConfigDef("log.cleaner.delete.retention.ms", _L, 86400000, "How long tombstones are kept.", _at_least(0)),
        ConfigDef("log.cleaner.min.compaction.lag.ms", _L, 0, "Minimum age before compaction.", _at_least(0)),
        ConfigDef("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, "Maximum age before compaction.", _at_least(1)),
        ConfigDef("log.cleaner.min.cleanable.ratio", _D, 0.5, "Dirty ratio that triggers compaction.", _between(0, 1)),
        ConfigDef("log.message.timestamp.type", _S, "CreateTime", "CreateTime or LogAppendTime.", choices=_TS_TYPES),
        ConfigDef("log.message.timestamp.before.max.ms", _L, LONG_MAX, "Max age of a record timestamp.", _at_least(0)),
        ConfigDef("log.message.timestamp.after.max.ms", _L, LONG_MAX, "Max future skew of a record timestamp.",
                  _at_least(0)),
        ConfigDef("log.message.timestamp.difference.max.ms", _L, LONG_MAX,
                  "Deprecated: both bounds, when before/after.max.ms are left at Long.MAX.", _at_least(0)),
        ConfigDef("log.preallocate", _B, False, "Preallocate segment files."),
        ConfigDef("message.max.bytes", _I, 1048588, "Largest record batch size.", _at_least(0)),
        ConfigDef("compression.type", _S, "producer", "Final compression of a topic's data.", choices=_COMPRESSION),
        ConfigDef("compression.gzip.level", _I, -1, "gzip level when compression.type is gzip (accepted, no "
                  "effect: kbroker keeps the producer's batches as they are).", _GZIP_LEVEL),
        ConfigDef("compression.lz4.level", _I, 9, "lz4 level when compression.type is lz4 (accepted, no effect).",
                  _between(1, 17)),
        ConfigDef("compression.zstd.level", _I, 3, "zstd level when compression.type is zstd (accepted, no effect).",
                  _between(-131072, 22)),
        ConfigDef("log.message.format.version", _S, "3.0-IV1", "Deprecated, as in Kafka 3.x: ignored (the "
                  "format is record batch v2, what Kafka assumes from inter.broker.protocol.version 3.0 on).",
                  _MESSAGE_FORMAT),
        ConfigDef("min.insync.replicas", _I, 1, "Minimum ISR size for acks=all.", _at_least(1)),
        ConfigDef("unclean.leader.election.enable", _B, False, "Allow out-of-sync replicas to lead."),
        ConfigDef("socket.request.max.bytes", _I, 104857600, "Largest request frame.", _at_least(1)),
        ConfigDef("socket.send.buffer.bytes", _I, 102400, "SO_SNDBUF of client sockets; -1 = OS default."),
        ConfigDef("socket.receive.buffer.bytes", _I, 102400, "SO_RCVBUF of client sockets; -1 = OS default."),
        ConfigDef("max.connections", _I, 2147483647, "Maximum concurrent connections (the inter-broker listener "
                  "is exempt while there are others); listener.name.<listener>.max.connections limits one "
                  "listener.", _at_least(0)),
        ConfigDef("max.connections.per.ip", _I, 2147483647, "Maximum connections from one IP address (0 only "
                  "with max.connections.per.ip.overrides).", _at_least(0)),
        ConfigDef("max.connections.per.ip.overrides", _S, "", "Per-IP or hostname limits over max.connections.per.ip: "
                  "host:count,... (e.g. 127.0.0.1:200,10.0.0.7:5).", _OVERRIDES),
        # client quotas (kbroker/quota/): the samples a rate is measured over
        ConfigDef("quota.window.num", _I, 11, "Samples kept of a client quota's rate.", _at_least(1)),
        ConfigDef("quota.window.size.seconds", _I, 1, "Time span of one sample of a client quota's rate.",
                  _at_least(1)),
        ConfigDef("controller.quota.window.num", _I, 11, "Samples of controller mutation quotas (the token bucket "
                  "holds this many windows of controller_mutation_rate).", _at_least(1)),
        ConfigDef("controller.quota.window.size.seconds", _I, 1, "Time span of one sample of controller mutation "
                  "quotas.", _at_least(1)),
        ConfigDef("connections.max.idle.ms", _L, 600000, "Idle connections are closed after this."),
        ConfigDef("offsets.topic.num.partitions", _I, 50, "Partitions of __consumer_offsets.", _at_least(1)),
        ConfigDef("offsets.topic.replication.factor", _I, 3,
                  "Replication factor of __consumer_offsets (the single node uses 1).", _at_least(1)),
        ConfigDef("offsets.topic.segment.bytes", _I, 104857600, "Segment size of __consumer_offsets.", _at_least(14)),
        ConfigDef("offsets.retention.minutes", _I, 10080, "Committed offsets of an empty group expire after this.",
                  _at_least(1)),
        ConfigDef("offsets.retention.check.interval.ms", _L, 600000, "How often expired offsets are removed.",
                  _at_least(1)),
        ConfigDef("offset.metadata.max.bytes", _I, 4096, "Largest metadata string of a committed offset."),
        ConfigDef("group.initial.rebalance.delay.ms", _I, 3000,
                  "How long the first rebalance of an empty group waits for more members.", _at_least(0)),
        ConfigDef("group.min.session.timeout.ms", _I, 6000, "Smallest session timeout a member may ask for."),
        ConfigDef("group.max.session.timeout.ms", _I, 1800000, "Largest session timeout a member may ask for."),
        ConfigDef("group.max.size", _I, 2147483647, "Most members of one consumer group.", _at_least(1)),
        ConfigDef("group.coordinator.rebalance.protocols", _LIST, "classic,consumer",
                  "Group protocols served: classic (JoinGroup/SyncGroup), consumer (KIP-848, "
                  "ConsumerGroupHeartbeat) and share (KIP-932 share groups, off by default until they are "
                  "complete).", Rule(_protocols_ok, "must list classic, and consumer or share if wanted")),
        ConfigDef("group.consumer.heartbeat.interval.ms", _I, 5000,
                  "How often consumer-protocol members heartbeat.", _at_least(1)),
        ConfigDef("group.consumer.min.heartbeat.interval.ms", _I, 5000,
                  "Smallest group.consumer.heartbeat.interval.ms (and per-group value).", _at_least(1)),
        ConfigDef("group.consumer.max.heartbeat.interval.ms", _I, 15000,
                  "Largest group.consumer.heartbeat.interval.ms (and per-group value).", _at_least(1)),
        ConfigDef("group.consumer.session.timeout.ms", _I, 45000,
                  "A consumer-protocol member silent this long is removed from its group.", _at_least(1)),
        ConfigDef("group.consumer.min.session.timeout.ms", _I, 45000,
                  "Smallest group.consumer.session.timeout.ms (and per-group value).", _at_least(1)),
        ConfigDef("group.consumer.max.session.timeout.ms", _I, 60000,
                  "Largest group.consumer.session.timeout.ms (and per-group value).", _at_least(1)),
        ConfigDef("group.consumer.migration.policy", _S, "bidirectional",
                  "Online migration between the group protocols: upgrade (a consumer-protocol member joining "
                  "a classic group converts it), downgrade (the last one leaving converts it back), "
                  "bidirectional, or disabled.", choices=("disabled", "upgrade", "downgrade", "bidirectional")),
        ConfigDef("group.consumer.max.size", _I, 2147483647, "Most members of one consumer-protocol group.",
                  _at_least(1)),
        ConfigDef("group.consumer.assignors", _LIST, "uniform,range",
                  "Server-side assignors of consumer-protocol groups, the first the default (Kafka's class names "
                  "or the short names uniform and range).", Rule(_assignors_ok, "must list uniform and/or range "
                                                                      "(or Kafka's UniformAssignor/RangeAssignor)")),
        # share groups (KIP-932); served when group.coordinator.rebalance.protocols lists share
        ConfigDef("group.share.heartbeat.interval.ms", _I, 5000, "How often share-group members heartbeat.",
                  _at_least(1)),
        ConfigDef("group.share.session.timeout.ms", _I, 45000,
                  "A share-group member silent this long is removed (its acquired records go back).", _at_least(1)),
        ConfigDef("group.share.max.size", _I, 200, "Most members of one share group.", _at_least(1)),
        ConfigDef("group.share.record.lock.duration.ms", _I, 30000,
                  "How long a share-group member holds the records it acquired before they go back.", _at_least(1000)),
        ConfigDef("group.share.delivery.count.limit", _I, 5,
                  "Deliveries of one record to a share group before it is archived.", _at_least(2)),
        ConfigDef("group.share.partition.max.record.locks", _I, 2000,
                  "Most records of one share-partition acquired at once.", _at_least(100)),
        ConfigDef("group.share.max.share.sessions", _I, 2000, "Most share sessions this broker holds.",
                  _at_least(1)),
        ConfigDef("errors.deadletterqueue.topic.name.prefix", _S, "dlq.",
                  "What a share group's dead-letter topic name (errors.deadletterqueue.topic.name) must begin "
                  "with (KIP-1191); empty: any name."),
        ConfigDef("share.coordinator.state.topic.num.partitions", _I, 50, "Partitions of __share_group_state.",
                  _at_least(1)),
        ConfigDef("share.coordinator.state.topic.replication.factor", _I, 3,
                  "Replication factor of __share_group_state (the single node uses 1).", _at_least(1)),
        ConfigDef("share.coordinator.state.topic.min.isr", _I, 2,
                  "min.insync.replicas of __share_group_state (at most its replication factor).", _at_least(1)),
        ConfigDef("share.coordinator.state.topic.segment.bytes", _I, 104857600,
                  "Segment size of __share_group_state.", _at_least(14)),
        ConfigDef("transactional.id.expiration.ms", _I, 604800000,
                  "A transactional id idle (no transaction) for this long is forgotten.", _at_least(1)),
        ConfigDef("request.timeout.ms", _I, 30000,
                  "How long the broker's own writes wait for the ISR (transaction markers and state).", _at_least(1)),
        ConfigDef("transaction.max.timeout.ms", _I, 900000,
                  "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT).", _at_least(1)),
        ConfigDef("transaction.state.log.num.partitions", _I, 50, "Partitions of __transaction_state.", _at_least(1)),
        ConfigDef("transaction.state.log.replication.factor", _I, 3,
                  "Replication factor of __transaction_state (the single node uses 1).", _at_least(1)),
        ConfigDef("transaction.state.log.min.isr", _I, 2,
                  "min.insync.replicas of __transaction_state (at most its replication factor).", _at_least(1)),
        ConfigDef("transaction.state.log.segment.bytes", _I, 104857600, "Segment size of __transaction_state.",
                  _at_least(14)),
        ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000,
                  "How often the coordinator aborts transactions open longer than their timeout.", _at_least(1)),
        ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _I, 3600000,
                  "How often the coordinator forgets expired transactional ids.", _at_least(1)),
        ConfigDef("producer.id.expiration.ms", _I, 86400000, "Idle producer id expiry.", _at_least(1)),
        ConfigDef("controlled.shutdown.enable", _B, True, "Hand over leadership before shutdown."),
        ConfigDef("controlled.shutdown.max.retries", _I, 3, "Controlled shutdown attempts before a plain shutdown.",
                  _at_least(0)),
        ConfigDef("controlled.shutdown.retry.backoff.ms", _L, 5000, "Pause between controlled shutdown attempts.",
                  _at_least(0)),
        ConfigDef("broker.rack", _S, None, "Rack of this broker; replicas are spread across racks."),
        ConfigDef("zookeeper.session.timeout.ms", _I, 18000, "ZooKeeper session timeout.", _at_least(1)),
        ConfigDef("zookeeper.connection.timeout.ms", _I, None, "Wait for a ZooKeeper connection (default: the session timeout)."),
        ConfigDef("replica.lag.time.max.ms", _L, 30000, "A follower not caught up for this long leaves the ISR.",
                  _at_least(1)),
        ConfigDef("replica.fetch.wait.max.ms", _I, 500, "Longest wait of a follower's fetch.", _at_least(0)),
        ConfigDef("replica.fetch.min.bytes", _I, 1, "Bytes a follower's fetch waits for.", _at_least(1)),
        ConfigDef("replica.fetch.max.bytes", _I, 1048576, "Bytes per partition of a follower's fetch.", _at_least(0)),
        ConfigDef("replica.fetch.response.max.bytes", _I, 10485760, "Bytes of a follower's whole fetch.",
                  _at_least(0)),
        ConfigDef("replica.fetch.backoff.ms", _I, 1000, "Pause after a failed follower fetch.", _at_least(0)),
        ConfigDef("max.incremental.fetch.session.cache.slots", _I, 1000, "Incremental fetch sessions (KIP-227) "
                  "the broker keeps.", _at_least(0)),
        ConfigDef("replica.socket.timeout.ms", _I, 30000, "Timeout of a follower's fetch request.", _at_least(1)),
        ConfigDef("auto.leader.rebalance.enable", _B, True, "Move leadership back to preferred replicas."),
        ConfigDef("leader.imbalance.check.interval.seconds", _L, 300, "How often leader balance is checked.",
                  _at_least(1)),
        ConfigDef("leader.imbalance.per.broker.percentage", _I, 10, "Leader imbalance allowed per broker."),
        ConfigDef("replica.restore.delay.ms", _L, 600000, "How long a broker may be gone before the controller "
                  "moves its replicas to live brokers; 0 turns it off (kbroker).", _at_least(0)),
        ConfigDef("offsets.commit.timeout.ms", _I, 5000, "How long a commit waits for the offsets partition's ISR.",
                  _at_least(1)),
        ConfigDef("shutdown.timeout.ms", _L, 30000, "Deadline for in-flight requests on shutdown (kbroker)."),
        ConfigDef("metrics.listener", _S, None, "Serve Prometheus metrics at http://host:port/metrics; unset = "
                  "off (kbroker)."),
        # the schema registry built in (kbroker; Confluent's own registry names its topic kafkastore.topic)
        ConfigDef("schema.registry.listener", _S, None, "Serve the Confluent Schema Registry REST API at "
                  "http://host:port or https://host:port; unset = off (kbroker)."),
        ConfigDef("schema.registry.security.listener", _S, None, "The listener whose security the registry "
                  "uses: its TLS keystore and client authentication, its SASL users for HTTP basic "
                  "authentication; unset = the first listener that is not PLAINTEXT (kbroker)."),
        ConfigDef("schema.registry.advertised.url", _S, None, "The registry's URL other brokers forward requests "
                  "to; unset = the listener's (a wildcard host: the first advertised listener's host) (kbroker)."),
        ConfigDef("schema.registry.topic", _S, "_schemas", "The compacted topic holding the registry's "
                  "schemas, configs and modes, in Confluent's record format (kbroker)."),
        ConfigDef("schema.registry.topic.replication.factor", _I, 3, "Replication factor of the registry's topic "
                  "when it is created; a single node uses what it has (kbroker).", _at_least(1)),
        ConfigDef("schema.registry.max.request.bytes", _I, 8388608, "Largest request body the registry reads; "
                  "larger ones are answered 413 (kbroker).", _at_least(1024)),
        ConfigDef("schema.registry.request.timeout.ms", _I, 30000, "How long a write waits for the registry's "
                  "topic (append and replication) before it is answered 50002 (kbroker).", _at_least(1)),
        # tiered storage (KIP-405): the archive's store takes its own keys under the prefix (rsm.config.*)
        ConfigDef("remote.log.storage.system.enable", _B, False, "Allow topics to archive closed segments "
                  "(remote.storage.enable) and serve history from the archive."),
        ConfigDef("remote.log.manager.task.interval.ms", _L, 30000, "How often segments are archived and the "
                  "archive's retention runs.", _at_least(1)),
        ConfigDef("remote.log.storage.manager.class.name", _S, "directory", "The archive's store: directory "
                  "(built in), s3 (the s3 extra), or a module.Class path."),
        ConfigDef("remote.log.storage.manager.impl.prefix", _S, "rsm.config.",
                  "Prefix of the store's own settings (rsm.config.dir, rsm.config.s3.bucket, ...)."),
        ConfigDef("remote.log.reader.threads", _I, 10, "Archive reads served at once.", _at_least(1)),
        ConfigDef("log.local.retention.ms", _L, -2, "How long archived segments stay local; -2 = log.retention.ms.",
                  _at_least(-2)),
        ConfigDef("log.local.retention.bytes", _L, -2, "Local bytes kept of an archived partition; "
                  "-2 = log.retention.bytes.", _at_least(-2)),
        # Kafka's run-time tunables kbroker accepts without acting on them (docs/configuration.md)
        ConfigDef("num.io.threads", _I, 8, "Request handler threads (accepted, no effect: trio tasks).", _at_least(1)),
        ConfigDef("num.network.threads", _I, 3, "Network threads (accepted, no effect: trio tasks).", _at_least(1)),
        ConfigDef("num.replica.fetchers", _I, 1, "Fetcher threads per source broker (accepted, no effect: one "
                  "task per leader broker).", _at_least(1)),
        ConfigDef("num.recovery.threads.per.data.dir", _I, 1, "Recovery threads per log dir (accepted, no effect).",
                  _at_least(1)),
        ConfigDef("background.threads", _I, 10, "Background threads (accepted, no effect).", _at_least(1)),
        ConfigDef("log.cleaner.threads", _I, 1, "Log cleaner threads (accepted, no effect).", _at_least(0)),
        ConfigDef("log.cleaner.dedupe.buffer.size", _L, 134217728, "Cleaner dedupe memory (accepted, no effect)."),
        ConfigDef("log.cleaner.io.buffer.size", _I, 524288, "Cleaner I/O buffers (accepted, no effect).",
                  _at_least(0)),
        ConfigDef("log.cleaner.io.buffer.load.factor", _D, 0.9, "Cleaner dedupe load factor (accepted, no effect)."),
        ConfigDef("log.cleaner.io.max.bytes.per.second", _D, 1.7976931348623157e308,
                  "Cleaner I/O throttle (accepted, no effect)."),
        ConfigDef("log.message.downconversion.enable", _B, True, "Whether Fetch v0-3 (old consumers) are "
                  "answered with record batches down-converted to message format v0/v1; false: "
                  "UNSUPPORTED_VERSION for them. The default of the topic config message.downconversion.enable."),
        ConfigDef("max.connection.creation.rate", _I, 2147483647, "New connections per second (accepted, no effect).",
                  _at_least(0)),
        ConfigDef("metric.reporters", _LIST, [], "Metrics reporter classes (accepted, no effect)."),
        ConfigDef("transaction.partition.verification.enable", _B, True,
                  "Verify a partition is in the transaction before appending (accepted, no effect)."),
        ConfigDef("remote.log.index.file.cache.total.size.bytes", _L, 1073741824,
                  "Archive index cache size (accepted, no effect).", _at_least(1)),
        ConfigDef("remote.fetch.max.wait.ms", _I, 500, "Longest wait of a fetch from the archive (accepted, no effect).",
                  _at_least(1)),
        ConfigDef("remote.log.manager.copy.max.bytes.per.second", _L, LONG_MAX,
                  "Archive copy throttle (accepted, no effect).", _at_least(1)),
        ConfigDef("remote.log.manager.fetch.max.bytes.per.second", _L, LONG_MAX,
                  "Archive read throttle (accepted, no effect).", _at_least(1)),
        # delayed delivery (kbroker's own; the delay log's keys follow Kafka's offsets/transaction ones)
        ConfigDef("delayed.delivery.enable", _B, True, "Honour the delay.ms / deliver.at record headers and "
                  "topics' delivery.delay.ms (kbroker); false skips the check on every produce."),
        ConfigDef("delayed.delivery.headers.enable", _B, True, "Default of topics' delivery.delay.headers.enable "
                  "(kbroker): false leaves the delay headers unread on topics that do not set it."),
        ConfigDef("delayed.delivery.max.delay.ms", _L, 30 * 24 * 3600 * 1000,
                  "Longest delay a record may ask for; beyond it the produce is INVALID_RECORD (kbroker).", _at_least(1)),
        ConfigDef("delayed.delivery.max.in.memory.records", _I, 100000, "Pending delayed records each "
                  "__delayed_messages partition keeps in memory (the earliest); the rest wait on disk (kbroker).",
                  _at_least(2)),
        ConfigDef("delayed.messages.topic.num.partitions", _I, 10, "Partitions of __delayed_messages.", _at_least(1)),
        ConfigDef("delayed.messages.topic.replication.factor", _I, 3,
                  "Replication factor of __delayed_messages (the single node uses 1).", _at_least(1)),
        ConfigDef("delayed.messages.topic.min.isr", _I, 2,
                  "min.insync.replicas of __delayed_messages (at most its replication factor).", _at_least(1)),
        ConfigDef("delayed.messages.topic.segment.bytes", _I, 104857600, "Segment size of __delayed_messages.",
                  _at_least(14)),
    ]
}

# topic key -> (broker synonyms in precedence order, default)
TOPIC_CONFIGS: dict[str, tuple[ConfigDef, tuple[str, ...]]] = {
    d.name: (d, syn)
    for d, syn in [
        (ConfigDef("cleanup.policy", _LIST, ["delete"], "delete and/or compact.", choices=_CLEANUP), ("log.cleanup.policy",)),
        (ConfigDef("compression.type", _S, "producer", "Final compression.", choices=_COMPRESSION), ("compression.type",)),
        (ConfigDef("compression.gzip.level", _I, -1, "gzip level when compression.type is gzip (accepted, no "
                   "effect).", _GZIP_LEVEL), ("compression.gzip.level",)),
        (ConfigDef("compression.lz4.level", _I, 9, "lz4 level when compression.type is lz4 (accepted, no effect).",
                   _between(1, 17)), ("compression.lz4.level",)),
        (ConfigDef("compression.zstd.level", _I, 3, "zstd level when compression.type is zstd (accepted, no "
                   "effect).", _between(-131072, 22)), ("compression.zstd.level",)),
        (ConfigDef("message.format.version", _S, "3.0-IV1", "Deprecated, as in Kafka 3.x: ignored (record batch "
                   "v2, what Kafka assumes from inter.broker.protocol.version 3.0 on).", _MESSAGE_FORMAT),
         ("log.message.format.version",)),
        (ConfigDef("message.downconversion.enable", _B, True, "Down-convert record batches for fetchers asking an "
                   "older message format; false: such a Fetch is UNSUPPORTED_VERSION."),
         ("log.message.downconversion.enable",)),
        (ConfigDef("delete.retention.ms", _L, 86400000, "Tombstone retention.", _at_least(0)), ("log.cleaner.delete.retention.ms",)),
        (ConfigDef("file.delete.delay.ms", _L, 60000, "Delay before deleting files.", _at_least(0)), ("log.segment.delete.delay.ms",)),
        (ConfigDef("flush.messages", _L, LONG_MAX, "Messages before fsync.", _at_least(1)), ("log.flush.interval.messages",)),
        (ConfigDef("flush.ms", _L, LONG_MAX, "Time before fsync.", _at_least(0)),
         ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
        (ConfigDef("index.interval.bytes", _I, 4096, "Bytes between index entries.", _at_least(0)), ("log.index.interval.bytes",)),
        (ConfigDef("max.compaction.lag.ms", _L, LONG_MAX, "Max compaction lag.", _at_least(1)), ("log.cleaner.max.compaction.lag.ms",)),
        (ConfigDef("max.message.bytes", _I, 1048588, "Largest record batch size.", _at_least(0)), ("message.max.bytes",)),
        (ConfigDef("message.timestamp.type", _S, "CreateTime", "Timestamp type.", choices=_TS_TYPES), ("log.message.timestamp.type",)),
        (ConfigDef("message.timestamp.before.max.ms", _L, LONG_MAX, "Max timestamp age.", _at_least(0)), ("log.message.timestamp.before.max.ms",)),
        (ConfigDef("message.timestamp.after.max.ms", _L, LONG_MAX, "Max timestamp skew.", _at_least(0)), ("log.message.timestamp.after.max.ms",)),
        (ConfigDef("message.timestamp.difference.max.ms", _L, LONG_MAX, "Deprecated: both bounds, when "
                   "before/after.max.ms are Long.MAX.", _at_least(0)), ("log.message.timestamp.difference.max.ms",)),
        (ConfigDef("min.cleanable.dirty.ratio", _D, 0.5, "Dirty ratio for compaction.", _between(0, 1)), ("log.cleaner.min.cleanable.ratio",)),
        (ConfigDef("min.compaction.lag.ms", _L, 0, "Min compaction lag.", _at_least(0)), ("log.cleaner.min.compaction.lag.ms",)),
        (ConfigDef("min.insync.replicas", _I, 1, "Minimum ISR for acks=all.", _at_least(1)), ("min.insync.replicas",)),
        (ConfigDef("preallocate", _B, False, "Preallocate segments."), ("log.preallocate",)),
        (ConfigDef("retention.bytes", _L, -1, "Retention size; -1 unlimited."), ("log.retention.bytes",)),
        (ConfigDef("retention.ms", _L, 1209600000, "Retention time; -1 forever.", _at_least(-1)),
         ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
        (ConfigDef("segment.bytes", _I, 1073741824, "Segment size.", _at_least(14)), ("log.segment.bytes",)),
        (ConfigDef("segment.index.bytes", _I, 10485760, "Index size.", _at_least(4)), ("log.index.size.max.bytes",)),
        (ConfigDef("segment.jitter.ms", _L, 0, "Roll jitter.", _at_least(0)), ("log.roll.jitter.ms", "log.roll.jitter.hours")),
        (ConfigDef("segment.ms", _L, 604800000, "Segment age before roll.", _at_least(1)), ("log.roll.ms", "log.roll.hours")),
        (ConfigDef("unclean.leader.election.enable", _B, False, "Unclean election."), ("unclean.leader.election.enable",)),
        (ConfigDef("retired.records.partitioner", _S, "murmur2", "kbroker's own: after a partition decrease, "
                   "where a retired partition's keyed records go (the producers' default partitioner).",
                   choices=("murmur2", "consistent_random")), ()),
        (ConfigDef("delivery.delay.ms", _L, 0, "kbroker's own: every record produced to the topic is delivered "
                   "this long after the broker received it, unless its delay.ms / deliver.at header says otherwise.",
                   _at_least(0)), ()),
        (ConfigDef("delivery.delay.headers.enable", _B, True, "kbroker's own: honour the delay.ms / deliver.at "
                   "record headers on this topic; false: they are ordinary headers, and produce skips the search "
                   "for them (throughput-critical topics)."), ("delayed.delivery.headers.enable",)),
        (ConfigDef("leader.replication.throttled.replicas", _LIST, [], "Replicas (partition:broker,... or *) "
                   "whose leaders throttle replication to leader.replication.throttled.rate.",
                   _throttled_replicas), ()),
        (ConfigDef("follower.replication.throttled.replicas", _LIST, [], "Replicas (partition:broker,... or *) "
                   "whose followers throttle replication to follower.replication.throttled.rate.",
                   _throttled_replicas), ()),
        # tiered storage (KIP-405)
        (ConfigDef("remote.storage.enable", _B, False, "Archive closed segments and serve history from the "
                   "archive (needs remote.log.storage.system.enable)."), ()),
        (ConfigDef("remote.log.copy.disable", _B, False, "Kafka 3.9: archived data becomes read-only, nothing more "
                   "is copied (accepted, no effect)."), ()),
        (ConfigDef("remote.log.delete.on.disable", _B, False, "Kafka 3.9: delete the archive when "
                   "remote.storage.enable is turned off (accepted, no effect)."), ()),
        (ConfigDef("local.retention.ms", _L, -2, "How long archived segments stay local; -2 = retention.ms.",
                   _at_least(-2)), ("log.local.retention.ms",)),
        (ConfigDef("local.retention.bytes", _L, -2, "Local bytes kept of an archived partition; "
                   "-2 = retention.bytes.", _at_least(-2)), ("log.local.retention.bytes",)),
        # retry and dead-letter topics (kbroker's own; kbroker/retry/tiers.py)
        (ConfigDef("retry.topics", _LIST, [], "kbroker's own: retry tiers (durations such as 30s,5m,1h); each is a "
                   "topic <topic>.retry.<tier> that hands records back after its delay, with <topic>.dlq beside them."),
         ()),
        (ConfigDef("max.delivery.attempts", _I, -1, "kbroker's own: deliveries of a record (the first one "
                   "included) before a retry tier sends it to <topic>.dlq; -1 = the number of retry.topics + 1.",
                   lambda v: v == -1 or v >= 1), ()),
        (ConfigDef("retry.delay.ms", _L, 0, "kbroker's own, on a retry tier (set when retry.topics creates it): "
                   "records produced to it come back this long after; 0 = an ordinary topic.", _at_least(0)), ()),
        (ConfigDef("retry.target", _S, "main", "kbroker's own, on a retry tier: where its records come back, the "
                   "main topic or the retry topic itself.", choices=("main", "retry-topic")), ()),
        # share groups' dead-letter topics (Kafka 4.4, KIP-1191): a topic takes them only when it says so
        (ConfigDef("errors.deadletterqueue.group.enable", _B, False, "This topic may be a share group's "
                   "dead-letter topic (errors.deadletterqueue.topic.name)."), ()),
    ]
}

# kbroker's partition decrease, asked for explicitly (docs/cluster.md, "Decreasing partitions"): an
# AlterConfigs or IncrementalAlterConfigs (SET) of this key on a topic retires its partitions from
# this number on. An operation, not a stored config: DescribeConfigs never lists it, CreateTopics
# refuses it; Kafka's CreatePartitions with a lower count stays INVALID_PARTITIONS.
PARTITIONS_RETIRE_FROM = "partitions.retire.from"

# Broker keys that exist only as dynamic configs (AlterConfigs on a broker resource, stored in
# /config/brokers/<id> or /config/brokers/<default>), as Kafka's QuotaConfigs.brokerQuotaConfigs.
BROKER_QUOTA_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("leader.replication.throttled.rate", _L, LONG_MAX, "Upper bound (bytes/s) on replication "
                  "traffic this broker sends as leader of the replicas in leader.replication.throttled.replicas.",
                  _at_least(0)),
        ConfigDef("follower.replication.throttled.rate", _L, LONG_MAX, "Upper bound (bytes/s) on replication "
                  "traffic this broker fetches as follower of the replicas in follower.replication.throttled.replicas.",
                  _at_least(0)),
        ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", _L, LONG_MAX, "Upper bound (bytes/s) on "
                  "copying a replica's log to another log dir of this broker (AlterReplicaLogDirs).", _at_least(1)),
    ]
}


def broker_config_def(key: str) -> ConfigDef | None:
    """The definition of a broker key, static or quota, or of a listener-scoped one
    (`listener.name.<listener>.[<mechanism>.]<key>`: the base key's definition under that name)."""
    found = BROKER_CONFIGS.get(key) or BROKER_QUOTA_CONFIGS.get(key)
    if found is None and key.startswith("listener.name."):
        from kbroker.config_security import split_listener_key

        parts = split_listener_key(key, BROKER_CONFIGS)
        if parts is not None:
            found = dataclasses.replace(BROKER_CONFIGS[parts[2]], name=key)
    return found


# Broker keys given in larger units; their value is converted to the topic key's milliseconds.
UNIT_MS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000, "log.roll.hours": 3_600_000,
            "log.roll.jitter.hours": 3_600_000}


# Kafka's connection-security keys live in their own table (config_security.py), which adds them to
# BROKER_CONFIGS when imported; importing it here makes that happen whichever module comes first.
import kbroker.config_security  # noqa: E402,F401 - needs the classes above
