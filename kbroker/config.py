"""Broker and topic configuration with Kafka's own keys, defaults, types and precedence.

`BROKER_CONFIGS` and `TOPIC_CONFIGS` (config_defs.py, re-exported here) are the tables of every
key kbroker understands. A topic key falls back to its broker synonym (`retention.ms` →
`log.retention.ms` → `log.retention.minutes` → `log.retention.hours`), then to its default, exactly
as Kafka resolves it; `describe_topic_config`
reports where each value came from, which DescribeConfigs returns to clients.
`BrokerConfig` layers Kafka's dynamic broker configs over the static ones (kbroker/dynamic_config.py
says which keys may change at run time and applies them); `BROKER_QUOTA_CONFIGS` are the keys that
exist only as dynamic configs (the replication throttle rates).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from kbroker.errors import InvalidConfigError
from kbroker.log.config import LogConfig
from kbroker.retry.tiers import parse_tiers

from kbroker.config_security import SECURITY_PROTOCOLS, listener_key
from kbroker.config_defs import (  # noqa: F401 - the tables are re-exported: kbroker.config is where callers look
    BROKER_CONFIGS,
    BROKER_QUOTA_CONFIGS,
    ConfigSource,
    ConfigType,
    LONG_MAX,
    PARTITIONS_RETIRE_FROM,
    Rule,
    TOPIC_CONFIGS,
    UNIT_MS,
    broker_config_def,
    format_value,
    invalid_value,
    parse_value,
)


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java .properties text: `#`/`!` comments, `=`/`:`/space separators, `\\` continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry, logical = "".join(logical), []
        match = re.match(r"((?:\\.|[^=:\s\\])+)\s*[=:\s]?\s*(.*)$", entry)
        if match:
            unescape = lambda s: re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)
            props[unescape(match.group(1))] = unescape(match.group(2).rstrip())
    return props


@dataclass
class BrokerConfig:
    """The broker's configuration, Kafka's precedence, lowest first: defaults < properties file <
    overrides (`explicit`, the static configs) < the cluster-wide dynamic default configs < this
    broker's dynamic configs (typed values; kbroker/dynamic_config.py sets both layers)."""

    explicit: dict[str, Any] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    dynamic_default: dict[str, Any] = field(default_factory=dict)
    dynamic: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_sources(cls, properties: Path | None = None, overrides: Iterable[str] = ()) -> "BrokerConfig":
        raw: dict[str, str] = {}
        if properties is not None:
            raw.update(parse_properties(Path(properties).read_text()))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise InvalidConfigError(f"--override needs key=value, got {item!r}")
            raw[key.strip()] = value
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "BrokerConfig":
        config = cls()
        for key, value in raw.items():
            definition = BROKER_CONFIGS.get(key) or (broker_config_def(key) if key.startswith("listener.name.") else None)
            if definition is not None:
                config.explicit[key] = parse_value(definition, value)
            else:
                config.unknown[key] = str(value)  # Kafka logs and ignores unknown keys
        config.check_rules()
        return config

    def check_rules(self) -> None:
        """What one key's validator cannot see, checked as Kafka's KafkaConfig and LogManager do at
        start-up: the listeners parse; every broker value a topic config falls back to passes that
        topic config's validator (Kafka builds its default LogConfig from them); the resolved
        retention is -1 or at least 1 ms; a follower's fetch wait fits its timeouts."""
        self.endpoints, self.advertised_endpoints, self.metrics_listener, self.schema_registry_listener  # noqa: B018 - parsed for their errors
        self.inter_broker_listener_name, self.control_plane_listener_name  # noqa: B018
        for topic_key, (definition, synonyms) in TOPIC_CONFIGS.items():
            value, broker_key = self.broker_value_for_topic_key(topic_key) if synonyms else (None, None)
            if broker_key is not None and isinstance(definition.valid, Rule) and not definition.valid(value):
                raise invalid_value(BROKER_CONFIGS[broker_key], format_value(self.get(broker_key)),
                               definition.valid.why(value))
        retention_ms, retention_key = self.broker_value_for_topic_key("retention.ms")
        if retention_ms == 0:  # negative values mean unlimited (-1), as in Kafka
            key = retention_key or "log.retention.hours"
            raise invalid_value(BROKER_CONFIGS[key], self.get(key),
                           "log.retention.ms must be unlimited (-1) or, greater than or equal to 1")
        if self.get("max.connections.per.ip") == 0 and not self.get("max.connections.per.ip.overrides"):
            raise InvalidConfigError("max.connections.per.ip can be set to zero only if "
                                     "max.connections.per.ip.overrides property is set.")
        wait = self.get("replica.fetch.wait.max.ms")
        if wait > self.get("replica.socket.timeout.ms"):
            raise InvalidConfigError("replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms "
                                     "to prevent unnecessary socket timeouts")
        if wait > self.get("replica.lag.time.max.ms"):
            raise InvalidConfigError("replica.fetch.wait.max.ms should always be less than or equal to "
                                     "replica.lag.time.max.ms to prevent frequent changes in ISR")

    def layers(self) -> tuple[tuple[dict[str, Any], "ConfigSource"], ...]:
        """The set values, highest precedence first, with the source DescribeConfigs names them by."""
        return ((self.dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.explicit, ConfigSource.STATIC_BROKER_CONFIG))

    def get(self, key: str) -> Any:
        for layer, _ in self.layers():
            if key in layer:
                return layer[key]
        return broker_config_def(key).default

    def is_set(self, key: str) -> bool:
        return any(layer.get(key) is not None for layer, _ in self.layers())

    def set_synonyms(self, names: Iterable[str]) -> list[tuple[str, str | None, "ConfigSource"]]:
        """(name, value, source) of each of `names` set in some layer, layer by layer (Kafka's
        ConfigHelper.configSynonyms order: dynamic, dynamic default, static)."""
        return [(name, format_value(layer[name]), source) for layer, source in self.layers()
                for name in names if layer.get(name) is not None]

    # -- derived values -----------------------------------------------------------------------
    @property
    def node_id(self) -> int:
        if self.is_set("node.id"):
            return int(self.get("node.id"))
        broker_id = int(self.get("broker.id"))
        return broker_id if broker_id >= 0 else 0

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.get("log.dirs") or self.get("log.dir")
        return [Path(d.strip()) for d in str(dirs).split(",") if d.strip()]

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.get("listeners"))

    @property
    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.get("advertised.listeners") or self.get("listeners"))

    @property
    def protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as {listener name: security protocol}."""
        return parse_protocol_map(self.get("listener.security.protocol.map"))

    @property
    def endpoints(self) -> list["Endpoint"]:
        """The listeners with their security protocols, checked as Kafka's KafkaConfig checks them."""
        return _endpoints(self.listeners, self.protocol_map, "listeners")

    @property
    def advertised_endpoints(self) -> list["Endpoint"]:
        """What clients are told per listener: advertised.listeners, else listeners (ports as bound)."""
        if not self.get("advertised.listeners"):
            return self.endpoints
        advertised = _endpoints(self.advertised_listeners, self.protocol_map, "advertised.listeners")
        names = {e.name for e in self.endpoints}
        stray = [e.name for e in advertised if e.name not in names]
        if stray:
            raise InvalidConfigError(f"advertised.listeners listener names must be equal to or a subset of the ones "
                                     f"defined in listeners. Found {','.join(stray)}. The valid options based on "
                                     f"the current configuration are {','.join(sorted(names))}")
        return advertised

    @property
    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else the listener named after security.inter.broker.protocol;
        on the single node (no ZooKeeper, no other broker) the first listener when neither matches."""
        if self.is_set("inter.broker.listener.name") and self.is_set("security.inter.broker.protocol"):
            raise InvalidConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                                     "should be set.")
        name = self.get("inter.broker.listener.name") or self.get("security.inter.broker.protocol")
        names = [e.name for e in self.endpoints]
        if name in names:
            return name
        if not self.is_set("zookeeper.connect") and not self.is_set("inter.broker.listener.name"):
            return names[0]
        raise InvalidConfigError(f"inter.broker.listener.name must be a listener name defined in "
                                 f"advertised.listeners. The valid options based on currently configured listeners "
                                 f"are {','.join(names)}")

    @property
    def control_plane_listener_name(self) -> str:
        name = self.get("control.plane.listener.name")
        if name is None:
            return self.inter_broker_listener_name
        if name not in [e.name for e in self.endpoints]:
            raise InvalidConfigError(f"control.plane.listener.name {name} must be a listener name defined in "
                                     f"listeners")
        return name

    def listener_get(self, listener: str, key: str, mechanism: str | None = None) -> Any:
        """A security key as a listener sees it: `listener.name.<listener>.[<mechanism>.]<key>` when
        set (in any layer), else the broker-wide `key` (except a mechanism's JAAS line: Kafka's
        brokers read it per listener and mechanism only)."""
        scoped = listener_key(listener, key, mechanism)
        if self.is_set(scoped):
            return self.get(scoped)
        if mechanism is not None:
            return None
        return self.get(key)

    @property
    def metrics_listener(self) -> tuple[str, int] | None:
        """(host, port) of the Prometheus endpoint, None when `metrics.listener` is unset."""
        text = self.get("metrics.listener")
        return None if text is None or not text.strip() else parse_metrics_listener(text)

    @property
    def schema_registry_listener(self) -> tuple[str, int] | None:
        """(host, port) of the schema registry's REST API, None when `schema.registry.listener` is unset."""
        text = self.get("schema.registry.listener")
        if text is None or not text.strip():
            return None
        return parse_http_listener(re.sub(r"^https://", "http://", text.strip()), "schema.registry.listener", 8081)

    @property
    def schema_registry_tls(self) -> bool:
        """`schema.registry.listener` is an https:// URL."""
        return str(self.get("schema.registry.listener") or "").strip().startswith("https://")

    @property
    def schema_registry_security_listener(self) -> "Endpoint | None":
        """The Kafka listener whose security the registry uses (`schema.registry.security.listener`,
        else the first listener that is not PLAINTEXT); None: no authentication."""
        name = self.get("schema.registry.security.listener")
        endpoints = self.endpoints
        if name:
            for e in endpoints:
                if e.name == name.strip().upper():
                    return e
            raise InvalidConfigError(f"schema.registry.security.listener names {name}, which is none of the "
                                     f"listeners ({', '.join(e.name for e in endpoints)})")
        return next((e for e in endpoints if e.protocol != "PLAINTEXT"), None)

    def broker_value_for_topic_key(self, topic_key: str) -> tuple[Any, str | None]:
        """The broker-level value of a topic key and which broker key gave it (None = default)."""
        definition, synonyms = TOPIC_CONFIGS[topic_key]
        for broker_key in synonyms:
            if self.is_set(broker_key):
                value = self.get(broker_key)
                if broker_key in UNIT_MS:
                    value = value * UNIT_MS[broker_key]
                if topic_key == "retention.ms" and value < 0:
                    value = -1
                return value, broker_key
        if topic_key == "retention.ms":
            return self.get("log.retention.hours") * 3_600_000, None
        if topic_key == "segment.ms":
            return self.get("log.roll.hours") * 3_600_000, None
        return definition.default, None


def parse_listeners(text: str) -> list[tuple[str, str, int]]:
    """`PLAINTEXT://host:port,...` → [(name, host, port)]; an empty host means all interfaces."""
    result = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://\[?([^\]]*?)\]?:(\d+)", item)
        if not match:
            raise InvalidConfigError(f"Unable to parse {item} to a broker endpoint (expected NAME://host:port)")
        port = int(match.group(3))
        if port > 65535:
            raise InvalidConfigError(f"Invalid port {port} in listener {item}: a port is 0 to 65535")
        result.append((match.group(1), match.group(2), port))
    return result


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` with Kafka's checks."""
    out: dict[str, str] = {}
    for item in str(text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip():
            raise InvalidConfigError(f"Invalid value {text} for configuration listener.security.protocol.map: "
                                     f"Map entry '{item}' is not of the form NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(f"Invalid value {text} for configuration listener.security.protocol.map: "
                                     f"No enum constant {protocol} (the protocols are "
                                     f"{', '.join(SECURITY_PROTOCOLS)})")
        out[name.strip().upper()] = protocol
    return out


def _endpoints(listeners: list[tuple[str, str, int]], protocols: dict[str, str], key: str) -> list[Endpoint]:
    names = [name.upper() for name, _, _ in listeners]
    if len(set(names)) != len(names):
        raise InvalidConfigError(f"Each listener must have a different name unless you have exactly one listener "
                                 f"on IPv4 and the other IPv6 on the same port, {key}: "
                                 f"{','.join(f'{n}://{h}:{p}' for n, h, p in listeners)}")
    out = []
    for name, host, port in listeners:
        protocol = protocols.get(name.upper())
        if protocol is None:
            raise InvalidConfigError(f"No security protocol defined for listener {name.upper()} (add it to "
                                     f"listener.security.protocol.map)")
        out.append(Endpoint(name.upper(), host, port, protocol))
    return out


def parse_http_listener(text: str, key: str, example_port: int) -> tuple[str, int]:
    """`http://host:port` (a trailing `/` allowed) → (host, port); an empty host means all
    interfaces, port 0 any free port."""
    match = re.fullmatch(r"http://(?:\[([^\]]*)\]|([^:/\[\]]*)):(\d{1,5})/?", str(text).strip())
    if not match or int(match.group(3)) > 65535:
        raise InvalidConfigError(f"Invalid value {str(text).strip()} for configuration {key}: "
                                 f"expected http://host:port (a port from 0 to 65535), e.g. "
                                 f"http://127.0.0.1:{example_port}")
    return match.group(1) if match.group(1) is not None else match.group(2), int(match.group(3))


def parse_metrics_listener(text: str) -> tuple[str, int]:
    """`http://host:port` (a trailing `/` or `/metrics` allowed) → (host, port); an empty host
    means all interfaces, port 0 any free port."""
    match = re.fullmatch(r"http://(?:\[([^\]]*)\]|([^:/\[\]]*)):(\d{1,5})(?:/|/metrics)?", str(text).strip())
    if not match or int(match.group(3)) > 65535:
        raise InvalidConfigError(f"Invalid value {str(text).strip()} for configuration metrics.listener: "
                                 f"expected http://host:port (a port from 0 to 65535), e.g. http://127.0.0.1:9404")
    return match.group(1) if match.group(1) is not None else match.group(2), int(match.group(3))


def validate_topic_configs(configs: Mapping[str, str | None], broker: "BrokerConfig | None" = None,
                           current: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Check topic-level overrides (CreateTopics, AlterConfigs); typed values, InvalidConfigError else.
    Given the broker's config (and, when altering, the topic's `current` overrides), also the
    rules that span keys and the broker (tiered storage)."""
    parsed = {}
    for key, value in configs.items():
        if key == PARTITIONS_RETIRE_FROM:
            raise InvalidConfigError(f"{key} is not a topic config but kbroker's partition decrease: set it with "
                                     f"AlterConfigs or IncrementalAlterConfigs on an existing topic (in a cluster) "
                                     f"to retire the topic's partitions from that number on")
        if key not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"Unknown topic config name: {key}")
        parsed[key] = parse_value(TOPIC_CONFIGS[key][0], value)
    _validate_retry(broker, parsed)
    if broker is not None:
        _validate_remote_storage(broker, {k: v for k, v in configs.items() if v is not None}, current)
    return parsed


def _validate_retry(broker: "BrokerConfig | None", parsed: Mapping[str, Any]) -> None:
    """Retry tiers: durations with units, within the longest delay, and a tier has no tiers itself."""
    max_delay = None if broker is None else broker.get("delayed.delivery.max.delay.ms")
    try:
        tiers = parse_tiers(parsed.get("retry.topics"), max_delay)
    except ValueError as exc:
        raise InvalidConfigError(f"Invalid value {format_value(parsed.get('retry.topics'))!r} for configuration "
                                 f"retry.topics: {exc}") from None
    delay = parsed.get("retry.delay.ms") or 0
    if tiers and delay > 0:
        raise InvalidConfigError("retry.topics and retry.delay.ms together: a retry tier has no tiers of its own")
    if max_delay is not None and delay > max_delay:
        raise InvalidConfigError(f"Invalid value {delay} for configuration retry.delay.ms: longer than "
                                 f"delayed.delivery.max.delay.ms ({max_delay} ms)")


def _validate_remote_storage(broker: "BrokerConfig", overrides: Mapping[str, str],
                             current: Mapping[str, str] | None) -> None:
    """Kafka's LogConfig rules for tiered storage: only with the broker's system enabled, never for a
    compacted topic, never switched off again, local retention within retention (-2: the same)."""
    value = lambda key: effective_topic_value(broker, overrides, key)
    enabled = value("remote.storage.enable")
    if current is not None and effective_topic_value(broker, current, "remote.storage.enable") and not enabled:
        raise InvalidConfigError("It is invalid to disable remote storage without deleting remote data: "
                                 "remote.storage.enable cannot be turned off once on")
    if not enabled:
        return
    if not broker.get("remote.log.storage.system.enable"):
        raise InvalidConfigError("Tiered Storage functionality is disabled in the broker. "
                                 "Topic cannot be configured with remote log storage.")
    if "compact" in value("cleanup.policy"):
        raise InvalidConfigError("Remote log storage is unsupported for the compacted topics")
    for local_key, key in (("local.retention.ms", "retention.ms"), ("local.retention.bytes", "retention.bytes")):
        local, total = value(local_key), value(key)
        if total == -1 or local == -2:
            continue
        if local == -1:
            raise InvalidConfigError(f"Invalid value -1 for configuration {local_key}: "
                                     f"Value must not be -1 as {key} value is set as {total}.")
        if local > total:
            raise InvalidConfigError(f"Invalid value {local} for configuration {local_key}: "
                                     f"Value must not be more than {key} property value: {total}")


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    doc: str
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


def effective_topic_value(broker: BrokerConfig, overrides: Mapping[str, str], key: str) -> Any:
    if key in overrides:
        return parse_value(TOPIC_CONFIGS[key][0], overrides[key])
    return broker.broker_value_for_topic_key(key)[0]


def describe_topic_config(broker: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config with its value, source and synonyms, as DescribeConfigs shows them."""
    entries = []
    for key, (definition, synonyms_keys) in sorted(TOPIC_CONFIGS.items()):
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if key in overrides:
            synonyms.append((key, format_value(effective_topic_value(broker, overrides, key)), ConfigSource.DYNAMIC_TOPIC_CONFIG))
        synonyms += broker.set_synonyms(synonyms_keys)  # the dynamic default a topic inherits, first
        # then, as Kafka's ConfigHelper lists them, each broker synonym's own default (in its own
        # unit: log.retention.hours=336, log.roll.hours=168), those that have one
        synonyms += [(name, format_value(BROKER_CONFIGS[name].default), ConfigSource.DEFAULT_CONFIG)
                     for name in synonyms_keys if name in BROKER_CONFIGS and BROKER_CONFIGS[name].default is not None]
        value = effective_topic_value(broker, overrides, key)
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG  # a key with no broker synonym
        entries.append(ConfigEntry(key, format_value(value), source, False, definition.sensitive,
                                   definition.type, definition.doc, tuple(synonyms)))
    return entries


def _timestamp_bound(bound: int, difference: int) -> int:
    return bound if bound != LONG_MAX else difference


def log_config_for(broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The storage settings of one topic: its overrides over the broker's values over defaults."""
    value = lambda key: effective_topic_value(broker, overrides, key)
    retention_ms = value("retention.ms")
    policy = value("cleanup.policy")
    difference = value("message.timestamp.difference.max.ms")
    return LogConfig(
        segment_bytes=value("segment.bytes"),
        segment_ms=value("segment.ms"),
        retention_ms=retention_ms,
        retention_bytes=value("retention.bytes"),
        index_interval_bytes=value("index.interval.bytes"),
        segment_index_bytes=value("segment.index.bytes"),
        max_message_bytes=value("max.message.bytes"),
        flush_interval_messages=value("flush.messages"),
        flush_interval_ms=value("flush.ms"),
        message_timestamp_type=value("message.timestamp.type"),
        # Kafka's LogConfig (KIP-937): a bound left at Long.MAX falls back on the deprecated difference
        message_timestamp_before_max_ms=_timestamp_bound(value("message.timestamp.before.max.ms"), difference),
        message_timestamp_after_max_ms=_timestamp_bound(value("message.timestamp.after.max.ms"), difference),
        cleanup_policy=",".join(policy),
        file_delete_delay_ms=value("file.delete.delay.ms"),
        preallocate=value("preallocate"),
        delete_retention_ms=value("delete.retention.ms"),
        min_cleanable_dirty_ratio=value("min.cleanable.dirty.ratio"),
        min_compaction_lag_ms=value("min.compaction.lag.ms"),
        remote_storage_enable=bool(value("remote.storage.enable")) and bool(broker.get("remote.log.storage.system.enable")),
        local_retention_ms=value("local.retention.ms"),
        local_retention_bytes=value("local.retention.bytes"),
    )
