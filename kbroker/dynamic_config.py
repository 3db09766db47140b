"""Dynamic broker configs, as Kafka's DynamicBrokerConfig has them: which broker keys may change at
run time, the rules an AlterConfigs of a broker resource must pass, the stored configs laid over
the running `BrokerConfig`, and DescribeConfigs of a broker with each value's source and synonyms.

Two levels, highest precedence first: one broker's (resource name = its id; `/config/brokers/<id>`)
and the cluster-wide default (empty name; `/config/brokers/<default>`), both over the static
configs. The stores keep them (metadata/store.py on the single node, metadata/cluster.py in a
cluster) as strings; `apply_stored` parses them into the config's layers, and the broker then
reconfigures what reads them once (logs' configs, the throttles) — everything else reads
`config.get` at use.
"""

from __future__ import annotations

import logging
import re
from itertools import dropwhile
from typing import Any, Iterable, Mapping

from kbroker.config import (
    BROKER_CONFIGS,
    BROKER_QUOTA_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigEntry,
    ConfigSource,
    ConfigType,
    broker_config_def,
    format_value,
    parse_value,
)
from kbroker.config_security import split_listener_key
from kbroker.errors import InvalidConfigError
from kbroker.kafka_broker_configs import KAFKA_BROKER_CONFIG_TYPES

logger = logging.getLogger(__name__)


# Kafka's DynamicLogConfig.ReconfigurableConfigs: the first broker synonym of each topic config, but
# message.format.version's (NonReconfigrableLogConfigs)
_LOG_KEYS = ({synonyms[0] for _, synonyms in TOPIC_CONFIGS.values() if synonyms} | {"log.message.downconversion.enable"}) \
    - {"log.message.format.version"}
_CLEANER_KEYS = {"log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
                 "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
                 "log.cleaner.backoff.ms"}
THREAD_KEYS = frozenset({"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                         "background.threads"})
_LISTENER_KEYS = {"advertised.listeners", "listeners", "listener.security.protocol.map", "max.connections",
                  "max.connection.creation.rate", "num.network.threads"}
_SOCKET_KEYS = {"max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
                "max.connection.creation.rate"}
_OTHER_KEYS = {"metric.reporters", "producer.id.expiration.ms", "transaction.partition.verification.enable",
               "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
               "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.fetch.max.bytes.per.second"}

# Kafka's DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS): a listener's keystore and
# truststore, changed only under the listener's prefix (listener.name.<listener>.ssl.keystore.location)
SECURITY_RELOAD_KEYS = frozenset({"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
                                  "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
                                  "ssl.truststore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                                  "ssl.truststore.certificates"})
# the rest of Kafka's DynamicListenerConfig.ReconfigurableConfigs: SSL and SASL keys, per broker
_LISTENER_SECURITY_KEYS = frozenset({
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds"}) | SECURITY_RELOAD_KEYS
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})

# every broker key that may change at run time (Kafka's DynamicConfig.Broker names, those kbroker knows)
DYNAMIC_BROKER_KEYS = frozenset(_LOG_KEYS | _CLEANER_KEYS | THREAD_KEYS | _LISTENER_KEYS | _SOCKET_KEYS
                                | _OTHER_KEYS | set(BROKER_QUOTA_CONFIGS) | _LISTENER_SECURITY_KEYS)
# set on one broker only, never as the cluster-wide default (Kafka's PerBrokerConfigs)
PER_BROKER_KEYS = frozenset({"advertised.listeners", "listeners", "listener.security.protocol.map"}
                            | _LISTENER_SECURITY_KEYS)


def _listener_base(key: str) -> str | None:
    """The base key of a listener-scoped key (`listener.name.<listener>.[<mechanism>.]<key>`)."""
    if not key.startswith("listener.name."):
        return None
    parts = split_listener_key(key, BROKER_CONFIGS)
    return parts[2] if parts is not None else None


def is_dynamic(key: str) -> bool:
    """Whether a broker key may change at run time: Kafka's dynamic keys, and the listener-scoped
    form of every listener config (SSL, SASL, connection limits)."""
    base = _listener_base(key)
    if base is not None:
        return base in _LISTENER_SECURITY_KEYS or base in _CLUSTER_LEVEL_LISTENER_KEYS
    return key in DYNAMIC_BROKER_KEYS


def is_per_broker(key: str) -> bool:
    base = _listener_base(key)
    if base is not None:
        return base not in _CLUSTER_LEVEL_LISTENER_KEYS
    custom_base = _CUSTOM_LISTENER_KEY.fullmatch(key)  # Kafka's ListenerConfigRegex, whatever the base
    if custom_base is not None:
        return custom_base.group(1) not in _CLUSTER_LEVEL_LISTENER_KEYS
    return key in PER_BROKER_KEYS


_CUSTOM_LISTENER_KEY = re.compile(r"listener\.name\.[^.]*\.(.*)")


def is_custom(key: str) -> bool:
    """A key that is no broker config of kbroker's nor of Kafka 3.9's: Kafka stores such a key in
    a broker's (or the cluster-wide) dynamic configs and shows it back in DescribeConfigs
    (DynamicConfig.Broker allows custom props); it has no effect, on Kafka as on kbroker."""
    return broker_config_def(key) is None and key not in KAFKA_BROKER_CONFIG_TYPES
# what kbroker stores and describes but does not act on (docs/configuration.md)
NO_EFFECT_KEYS = frozenset(THREAD_KEYS | {"num.network.threads", "log.cleaner.threads",
                                          "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
                                          "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
                                          "max.connection.creation.rate", "listener.security.protocol.map",
                                          "metric.reporters", "transaction.partition.verification.enable",
                                          "log.message.downconversion.enable", "unclean.leader.election.enable",
                                          "replica.alter.log.dirs.io.max.bytes.per.second", "listeners",
                                          "advertised.listeners"} | {k for k in _OTHER_KEYS if k.startswith("remote.")})

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: one config under several names, highest first
_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))


def broker_synonyms(name: str) -> tuple[str, ...]:
    if name == "log.flush.interval.ms":  # the flush scheduler's interval is its default
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    return next((group for group in _SYNONYM_GROUPS if name in group), (name,))


def _scala_set(names: Iterable[str]) -> str:
    return f"Set({', '.join(sorted(names))})"


def validate_alter(config: BrokerConfig, resource_name: str, props: Mapping[str, str]) -> dict[str, Any]:
    """The new dynamic configs of a broker entity (its id, or "" for the cluster-wide default) as
    typed values; InvalidConfigError with Kafka's words when a key cannot change at run time, cannot
    be a cluster default, or its value does not fit (alone, or with the rest of the config)."""
    per_broker = resource_name != ""

    def refuse(message: str) -> InvalidConfigError:
        return InvalidConfigError(f"Invalid config value for resource ConfigResource(type=BROKER, "
                                  f"name='{resource_name}'): {message}")

    # Kafka's three kinds of key: its dynamic ones (validated, applied), its static ones (refused,
    # also those kbroker does not define), and custom keys, stored as they are and shown back
    custom = {k: v for k, v in props.items() if is_custom(k)}
    static = [k for k in props if k not in custom and not is_dynamic(k)]
    if static:
        raise refuse(f"Cannot update these configs dynamically: {_scala_set(static)}")
    unprefixed = [k for k in props if k in SECURITY_RELOAD_KEYS]
    if unprefixed:
        raise refuse("These security configs can be dynamically updated only per-listener using the listener "
                     f"prefix: {_scala_set(unprefixed)}")
    try:
        typed = {k: parse_value(broker_config_def(k), v) for k, v in props.items() if k not in custom}
    except InvalidConfigError as exc:
        raise refuse(str(exc)) from None
    typed.update(custom)  # kept as the strings they are: no definition reads them
    per_broker_keys = {k for k in props if is_per_broker(k)}
    if not per_broker and per_broker_keys:
        raise refuse("Cannot update these configs at default cluster level, broker id must be specified: "
                     f"{_scala_set(per_broker_keys)}")
    trial = _with_layer(config, typed, per_broker)
    try:
        _check_thread_counts(config, trial)
        trial.check_rules()
        _check_keystores(trial, props)
    except InvalidConfigError as exc:
        raise refuse(str(exc)) from None
    return typed


def _check_keystores(trial: BrokerConfig, props: Mapping[str, str]) -> None:
    """A new keystore or truststore of an SSL listener must load, as Kafka's SslFactory validates a
    reconfiguration before it applies it."""
    from kbroker.errors import StartupError
    from kbroker.tlsconfig import KeyMaterial, server_context

    changed = {split_listener_key(k, BROKER_CONFIGS)[0].upper() for k in props
               if _listener_base(k) in SECURITY_RELOAD_KEYS}
    for endpoint in trial.endpoints:
        if endpoint.name in changed and endpoint.protocol in ("SSL", "SASL_SSL"):
            try:
                server_context(KeyMaterial(lambda key, n=endpoint.name: trial.listener_get(n, key),
                                           f"listener {endpoint}"))
            except StartupError as exc:
                raise InvalidConfigError(f"Validation of dynamic config update of SSLFactory failed: {exc}") from None


def _with_layer(config: BrokerConfig, typed: dict[str, Any], per_broker: bool) -> BrokerConfig:
    return BrokerConfig(explicit=config.explicit, unknown=config.unknown,
                        dynamic_default=config.dynamic_default if per_broker else typed,
                        dynamic=typed if per_broker else config.dynamic)


def _check_thread_counts(current: BrokerConfig, new: BrokerConfig) -> None:
    """Kafka's DynamicThreadPool rule: a pool grows at most twofold and shrinks at most by half."""
    for key in sorted(THREAD_KEYS):
        old, value = current.get(key), new.get(key)
        if value == old:
            continue
        words = f"Dynamic thread count update validation failed for {key}={value}"
        if value < old / 2:
            raise InvalidConfigError(f"{words}, value should be at least half the current value {old}")
        if value > old * 2:
            raise InvalidConfigError(f"{words}, value should not be greater than double the current value {old}")


def _typed_layer(stored: Mapping[str, str], per_broker: bool, what: str) -> dict[str, Any]:
    """Stored strings as typed values; what cannot be applied is left out with a warning, as Kafka's
    fromPersistentProps ignores it (a key stored by a newer version, by hand, ...)."""
    typed = {}
    for key, value in stored.items():
        if is_custom(key) and (per_broker or not is_per_broker(key)):  # stored and shown back, as Kafka does
            typed[key] = value
            continue
        definition = broker_config_def(key)
        if definition is None or not is_dynamic(key) or (not per_broker and is_per_broker(key)):
            logger.warning("ignoring the %s dynamic config %s: it cannot be set there at run time", what, key)
            continue
        try:
            typed[key] = parse_value(definition, value)
        except InvalidConfigError as exc:
            logger.warning("ignoring the %s dynamic config %s: %s", what, key, exc)
    return typed


def apply_stored(config: BrokerConfig, own: Mapping[str, str], default: Mapping[str, str]) -> bool:
    """Lay this broker's and the cluster-wide stored dynamic configs over `config`; False (and the
    layers left as they were) when together they break a rule, as Kafka keeps its current config."""
    layers = _typed_layer(own, True, "broker"), _typed_layer(default, False, "cluster-wide")
    trial = BrokerConfig(explicit=config.explicit, unknown=config.unknown, dynamic=layers[0],
                         dynamic_default=layers[1])
    try:
        trial.check_rules()
    except InvalidConfigError as exc:
        logger.error("dynamic broker configs not applied: %s", exc)
        return False
    config.dynamic, config.dynamic_default = layers
    return True


def describe_broker_config(config: BrokerConfig, per_broker: bool = True) -> list[ConfigEntry]:
    """DescribeConfigs of a broker resource as Kafka's ConfigHelper answers it: for the broker's id,
    every config with its value, the source of the value and its synonyms (dynamic, dynamic default,
    static, default); for the empty name, only the cluster-wide default configs set. A config that
    cannot change at run time is read-only."""
    scoped = {k for layer, _ in config.layers() for k in layer if k.startswith("listener.name.")}
    undefined = {k for layer, _ in config.layers() for k in layer if broker_config_def(k) is None} | set(config.unknown)
    names = sorted({*BROKER_CONFIGS, *BROKER_QUOTA_CONFIGS, *scoped, *undefined}) if per_broker \
        else sorted(config.dynamic_default)
    entries = []
    for name in names:
        definition = broker_config_def(name)
        if definition is None:
            entries.append(_undefined_entry(config, name, per_broker))
            continue
        group = broker_synonyms(name)
        synonyms = config.set_synonyms(group) + [(n, format_value(broker_config_def(n).default),
                                                  ConfigSource.DEFAULT_CONFIG)
                                                 for n in group if broker_config_def(n).default is not None]
        synonyms = list(dropwhile(lambda s: s[0] != name, synonyms))  # a larger-unit synonym never leads
        if not per_broker:
            synonyms = [s for s in synonyms if s[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        value = config.get(name) if per_broker else config.dynamic_default[name]
        if definition.sensitive:
            value, synonyms = None, [(n, None, s) for n, _, s in synonyms]
        entries.append(ConfigEntry(name, None if value is None else format_value(value),
                                   synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                                   not is_dynamic(name), definition.sensitive, definition.type,
                                   definition.doc, tuple(synonyms)))
    return entries



def _undefined_entry(config: BrokerConfig, name: str, per_broker: bool) -> ConfigEntry:
    """A set key kbroker has no definition for — a custom dynamic config, or an unknown key of the
    properties file — as Kafka's ConfigHelper describes it: with Kafka's type when Kafka knows the
    key, else no type and, as Kafka treats a key of unknown type, sensitive (no value shown);
    read-only (no dynamic config of Kafka's); its source and synonyms from where it is set."""
    layers = [*config.layers(), (config.unknown, ConfigSource.STATIC_BROKER_CONFIG)]
    if not per_broker:
        layers = [(config.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    kafka_type = KAFKA_BROKER_CONFIG_TYPES.get(name)
    sensitive = kafka_type is None or kafka_type == "PASSWORD"
    synonyms = [(name, None if sensitive else str(layer[name]), source) for layer, source in layers if name in layer]
    value = None if sensitive or not synonyms else synonyms[0][1]
    config_type = ConfigType[kafka_type] if kafka_type is not None else ConfigType.UNKNOWN
    return ConfigEntry(name, value, synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG, not is_dynamic(name),
                       sensitive, config_type, None, tuple(synonyms))
