"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, brokers and groups.

A broker's static configs are read-only; its dynamic ones (kbroker/dynamic_config.py) are altered
as Kafka does in ZooKeeper mode: a broker resource named by id is altered on that broker only, an
empty name is the cluster-wide default (`/config/brokers/<default>`, or beside the single node's
metadata).

A group resource (Kafka 4's GROUP, KIP-848) holds one consumer group's own
`consumer.session.timeout.ms` / `consumer.heartbeat.interval.ms` (kbroker/group/dynamic_configs.py
validates and describes them), stored for any group id, existing or not, as Kafka stores them;
DESCRIBE_CONFIGS / ALTER_CONFIGS on the group authorize it.
"""

from __future__ import annotations

from kbroker.api.access import Op, require_cluster, require_group, require_topic
from kbroker.api.context import RequestContext
from kbroker.api.views import describe_view_config
from kbroker.config import (
    PARTITIONS_RETIRE_FROM,
    TOPIC_CONFIGS,
    ConfigEntry,
    broker_config_def,
    describe_topic_config,
    format_value,
    validate_topic_configs,
)
from kbroker.config_defs import ConfigSource
from kbroker.dynamic_config import describe_broker_config, validate_alter
from kbroker.group import dynamic_configs as group_configs
from kbroker.metadata.store import DEFAULT_BROKER_ENTITY
from kbroker.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
    error_code_of,
)

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _require(ctx: RequestContext, operation: Op, resource) -> None:
    """Kafka's checks: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic or the group, or on the cluster
    for a broker."""
    if resource.resource_type == TOPIC:
        require_topic(ctx, operation, resource.resource_name)
    elif resource.resource_type == GROUP:
        require_group(ctx, operation, resource.resource_name)
    elif resource.resource_type in (BROKER, BROKER_LOGGER):
        require_cluster(ctx, operation)


def _check_broker(ctx: RequestContext, name: str) -> None:
    if name not in ("", str(ctx.broker.node_id)):
        raise InvalidRequestError(f"Unexpected broker id, expected {ctx.broker.node_id} or empty string, but received {name}")


def _group(name: str) -> str:
    """The group an altered GROUP resource names (Kafka's ControllerConfigurationValidator)."""
    if not name:
        raise InvalidRequestError("Default group resources are not allowed.")
    return name


def _broker_entity(ctx: RequestContext, name: str) -> str:
    """Where an altered broker resource's configs are stored: this broker's id, or `<default>` for
    the empty name (Kafka's getBrokerId)."""
    _check_broker(ctx, name)
    return name or DEFAULT_BROKER_ENTITY


async def describe_configs(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    include_synonyms = getattr(request, "include_synonyms", False)
    include_docs = getattr(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        entry = {"error_code": ErrorCode.none, "error_message": None, "resource_type": resource.resource_type,
                 "resource_name": resource.resource_name, "configs": []}
        try:
            _require(ctx, Op.DESCRIBE_CONFIGS, resource)
            if resource.resource_type == TOPIC:
                info = broker.metadata.topic(resource.resource_name)
                view = broker.views.view(resource.resource_name)
                if info is None and view is None:
                    raise UnknownTopicOrPartitionError(f"Topic {resource.resource_name} does not exist.")
                entries = describe_view_config(view) if info is None else describe_topic_config(broker.config,
                                                                                                 info.configs)
            elif resource.resource_type == BROKER:
                _check_broker(ctx, resource.resource_name)
                entries = describe_broker_config(broker.config, per_broker=resource.resource_name != "")
            elif resource.resource_type == GROUP:
                if not resource.resource_name:
                    raise InvalidRequestError("Group name must not be empty")
                stored = await broker.group_configs(resource.resource_name)
                rows = group_configs.describe(broker.group_coordinator.config, stored)
                entries = [ConfigEntry(d.name, value, source, False, d.sensitive, d.type, d.doc,
                                       ((d.name, value, source),)) for d, value, source in rows]
            else:
                raise InvalidRequestError(f"Unsupported resource type {resource.resource_type}")
            keys = resource.configuration_keys
            if keys:  # null or empty: every config, as Kafka answers
                entries = [e for e in entries if e.name in set(keys)]
            entry["configs"] = [
                {"name": e.name, "value": e.value, "read_only": e.read_only, "config_source": e.source,
                 "is_default": e.source == ConfigSource.DEFAULT_CONFIG,  # v0's, in place of the source
                 "is_sensitive": e.sensitive, "config_type": e.type,
                 "documentation": e.doc if include_docs else None,
                 "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in e.synonyms] if include_synonyms else []}
                for e in entries
            ]
        except KafkaError as exc:
            entry.update(error_code=error_code_of(exc), error_message=str(exc))
        results.append(entry)
    return {"throttle_time": 0, "results": results}


async def _alter(ctx: RequestContext, resource, new_configs, validate_only: bool) -> None:
    if resource.resource_type == BROKER:
        entity = _broker_entity(ctx, resource.resource_name)
        validate_alter(ctx.broker.config, resource.resource_name, new_configs)
        if not validate_only:
            await ctx.broker.set_broker_configs(entity, new_configs)
        return
    if resource.resource_type == GROUP:  # the whole set replaces the group's (empty: none left)
        group = _group(resource.resource_name)
        group_configs.validate(new_configs, ctx.broker.group_coordinator.config)
        if not validate_only:
            await ctx.broker.set_group_configs(group, dict(new_configs))
        return
    if resource.resource_type != TOPIC:
        raise InvalidRequestError(f"Unsupported resource type {resource.resource_type}")
    configs = dict(new_configs)
    retire = configs.pop(PARTITIONS_RETIRE_FROM, None)  # kbroker's explicit partition decrease, not stored
    current = _topic_overrides(ctx, resource)
    validate_topic_configs(configs, ctx.broker.config, current=current)
    count = None
    if retire is not None:
        count = _retire_from(retire)
        require_topic(ctx, Op.ALTER, resource.resource_name)  # a partition count change, as CreatePartitions asks
        await ctx.broker.decrease_partitions(resource.resource_name, count, validate_only=True)
    if validate_only:
        return
    if count is None or configs != current:  # the configs first: retired.records.partitioner guides the drains
        await ctx.broker.set_topic_configs(resource.resource_name, configs)
    if count is not None:
        await ctx.broker.decrease_partitions(resource.resource_name, count)


def _retire_from(value: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(f"Invalid value {value} for configuration {PARTITIONS_RETIRE_FROM}: "
                                 f"Not a number of type INT") from None


async def _current(ctx: RequestContext, resource) -> dict[str, str]:
    """What an incremental alter starts from: a topic's overrides, a broker entity's dynamic configs,
    a group's configs."""
    if resource.resource_type == BROKER:
        return await ctx.broker.broker_configs(_broker_entity(ctx, resource.resource_name))
    if resource.resource_type == GROUP:
        return await ctx.broker.group_configs(_group(resource.resource_name))
    return _topic_overrides(ctx, resource)


def _definition(resource_type: int, name: str):
    if resource_type == BROKER:
        return broker_config_def(name)
    if resource_type == GROUP:
        return group_configs.GROUP_CONFIGS.get(name)
    return TOPIC_CONFIGS.get(name, (None, ()))[0]


def _topic_overrides(ctx: RequestContext, resource) -> dict[str, str]:
    if resource.resource_type != TOPIC:
        return {}
    info = ctx.broker.metadata.topic(resource.resource_name)
    view = ctx.broker.views.view(resource.resource_name)
    if info is None and view is not None:
        raise InvalidConfigError(f"{view.name} is a view of {view.source}: its configs are set when it is "
                                 f"created; delete and re-create it to change them")
    if info is None:
        raise UnknownTopicOrPartitionError(f"Topic {resource.resource_name} does not exist.")
    return dict(info.configs)


async def alter_configs(ctx: RequestContext, request) -> dict:
    responses = []
    for resource in request.resources:
        entry = {"error_code": ErrorCode.none, "error_message": None, "resource_type": resource.resource_type,
                 "resource_name": resource.resource_name}
        try:
            _require(ctx, Op.ALTER_CONFIGS, resource)
            _topic_overrides(ctx, resource)  # existence check
            new = {c.name: c.value for c in resource.configs if c.value is not None}
            await _alter(ctx, resource, new, request.validate_only)
        except KafkaError as exc:
            entry.update(error_code=error_code_of(exc), error_message=str(exc))
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


async def incremental_alter_configs(ctx: RequestContext, request) -> dict:
    responses = []
    for resource in request.resources:
        entry = {"error_code": ErrorCode.none, "error_message": None, "resource_type": resource.resource_type,
                 "resource_name": resource.resource_name}
        try:
            _require(ctx, Op.ALTER_CONFIGS, resource)
            nulls = [c.name for c in resource.configs if c.value is None and c.config_operation != DELETE]
            if nulls:  # Kafka's ConfigAdminManager.preprocess
                raise InvalidRequestError(f"Null value not supported for : {', '.join(nulls)}")
            configs = await _current(ctx, resource)
            for c in resource.configs:
                if c.name == PARTITIONS_RETIRE_FROM and resource.resource_type == TOPIC and \
                        c.config_operation in (SET, DELETE):  # an operation (_alter), never stored
                    if c.config_operation == SET:
                        configs[c.name] = c.value
                    continue
                definition = _definition(resource.resource_type, c.name)
                if definition is None and resource.resource_type == TOPIC:
                    raise InvalidConfigError(f"Unknown topic config name: {c.name}")
                if definition is None and resource.resource_type == BROKER and c.config_operation in (APPEND, SUBTRACT):
                    # SET and DELETE of a custom key are Kafka's (validate_alter says which keys are custom)
                    raise InvalidConfigError(f"Unknown config name: {c.name}")
                if resource.resource_type == GROUP and c.config_operation in (APPEND, SUBTRACT):
                    # no group config is a list (Kafka's ConfigurationControlManager words); an
                    # unknown name SET is refused with the whole set (group_configs.validate)
                    verb = "APPEND" if c.config_operation == APPEND else "SUBTRACT"
                    raise InvalidConfigError(f"Can't {verb} to key {c.name} because its type is not LIST.")
                if c.config_operation == SET:
                    configs[c.name] = c.value
                elif c.config_operation == DELETE:
                    configs.pop(c.name, None)
                elif c.config_operation in (APPEND, SUBTRACT):
                    if definition is None or definition.type.name != "LIST":
                        verb = "append" if c.config_operation == APPEND else "subtract"
                        raise InvalidConfigError(f"Config value {verb} is not allowed for config key: {c.name}")
                    current = configs.get(c.name)
                    items = current.split(",") if current else list(definition.default)
                    value = [v for v in (c.value or "").split(",") if v]
                    items = items + [v for v in value if v not in items] if c.config_operation == APPEND \
                        else [i for i in items if i not in value]
                    configs[c.name] = format_value(items)
                else:
                    raise InvalidRequestError(f"Unknown config operation {c.config_operation}")
            await _alter(ctx, resource, configs, request.validate_only)
        except KafkaError as exc:
            entry.update(error_code=error_code_of(exc), error_message=str(exc))
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}
