"""CreateTopics, DeleteTopics and CreatePartitions: one result per topic, errors per topic."""

from __future__ import annotations

from kbroker.api.access import Op, cluster_allowed, require_topic, topic_allowed
from kbroker.api.context import RequestContext
from kbroker.api.throttling import ThrottlingQuotaExceededError, mutation_quota, note_mutation_throttle
from kbroker.api.views import describe_view_config
from kbroker.metadata.views import ViewInfo
from kbroker.views.spec import is_view_request, view_spec
from kbroker.config import describe_topic_config
from kbroker.wire.protocol import to_ms
from kbroker.errors import (
    ErrorCode,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationError,
    UnknownTopicIdError,
    error_code_of,
)


async def create_topics(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    validate_only = getattr(request, "validate_only", False)  # v1+
    quota = mutation_quota(ctx, strict_since=6)  # controller_mutation_rate: partitions created
    results = []
    seen: set[str] = set()
    duplicates = {t.name for t in request.topics if [x.name for x in request.topics].count(t.name) > 1}
    for topic in request.topics:
        result = {"name": topic.name, "error_code": ErrorCode.none, "error_message": None,
                  "num_partitions": -1, "replication_factor": -1, "configs": None}
        try:
            if topic.name in duplicates:
                if topic.name in seen:
                    continue
                raise InvalidRequestError(f"Create topics request from client contains multiple entries for topic {topic.name}")
            seen.add(topic.name)
            if not (cluster_allowed(ctx, Op.CREATE, log_denied=False) or topic_allowed(ctx, Op.CREATE, topic.name)):
                raise TopicAuthorizationError(f"Authorization failed: CREATE on topic {topic.name}")
            configs = {c.name: c.value for c in topic.configs}
            if is_view_request(configs):  # a view shows its source's records: only to those who may READ them
                require_topic(ctx, Op.READ, view_spec(configs).source)
            assignment = [list(a.broker_ids) for a in sorted(topic.assignments, key=lambda a: a.partition_index)] or None
            if assignment and (topic.num_partitions != -1 or topic.replication_factor != -1):
                raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set.")
            if not validate_only and quota.exceeded():
                raise ThrottlingQuotaExceededError()
            info = await broker.create_topic(
                topic.name,
                num_partitions=None if topic.num_partitions == -1 else topic.num_partitions,
                replication_factor=None if topic.replication_factor == -1 else topic.replication_factor,
                assignment=assignment,
                configs=configs,
                validate_only=validate_only,
                wait_s=max(to_ms(request.timeout), 0) / 1000,
            )
            if not validate_only:
                quota.record(info.num_partitions)
            entries = describe_view_config(ViewInfo(info.name, info.topic_id, view_spec(info.configs))) \
                if is_view_request(info.configs) else describe_topic_config(broker.config, info.configs)
            result.update(topic_id=info.topic_id, num_partitions=info.num_partitions,
                          replication_factor=len(info.assignment[0]) if info.assignment else -1,
                          configs=[{"name": e.name, "value": e.value, "read_only": e.read_only,
                                    "config_source": e.source, "is_sensitive": e.sensitive}
                                   for e in entries])
            if not topic_allowed(ctx, Op.DESCRIBE_CONFIGS, info.name):  # Kafka: created, configs withheld
                result.update(configs=None, topic_config_error_code=ErrorCode.topic_authorization_failed)
        except KafkaError as exc:
            result.update(error_code=error_code_of(exc), error_message=str(exc))
        results.append(result)
    note_mutation_throttle(ctx, quota)
    return {"throttle_time": 0, "topics": results}


async def delete_topics(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    wanted = [(name, None) for name in getattr(request, "topic_names", ())]
    wanted += [(t.name, t.topic_id) for t in getattr(request, "topics", ())]
    quota = mutation_quota(ctx, strict_since=5)  # controller_mutation_rate: partitions deleted
    responses = []
    for name, topic_id in wanted:
        entry = {"name": name, "topic_id": topic_id, "error_code": ErrorCode.none, "error_message": None}
        try:
            if name is None:
                info = broker.metadata.topic_by_id(topic_id) or broker.views.view_by_id(topic_id)
                if info is None:
                    raise UnknownTopicIdError(f"Topic id {topic_id} does not exist.")
                name = entry["name"] = info.name
            require_topic(ctx, Op.DELETE, name)
            if quota.exceeded():
                raise ThrottlingQuotaExceededError()
            existing = broker.metadata.topic(name)
            info = await broker.delete_topic(name)
            quota.record(existing.num_partitions if existing is not None else 0)
            entry["topic_id"] = info.topic_id
        except KafkaError as exc:
            code = error_code_of(exc)
            if code == ErrorCode.topic_deletion_disabled and ctx.version < 3:  # Kafka: older clients lack the code
                code = ErrorCode.invalid_request
            entry.update(error_code=code, error_message=str(exc))
        responses.append(entry)
    note_mutation_throttle(ctx, quota)
    return {"throttle_time": 0, "responses": responses}


async def create_partitions(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    quota = mutation_quota(ctx, strict_since=3)  # controller_mutation_rate: partitions created
    results = []
    for topic in request.topics:
        entry = {"name": topic.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            require_topic(ctx, Op.ALTER, topic.name)
            assignment = [list(a.broker_ids) for a in topic.assignments] if topic.assignments is not None else None
            info = broker.metadata.topic(topic.name)
            if info is not None and assignment is not None and topic.count > info.num_partitions \
                    and len(assignment) != topic.count - info.num_partitions:  # a decrease: the broker's answer
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {topic.count - info.num_partitions} but "
                    f"{len(assignment)} assignments provided.")
            if not request.validate_only and quota.exceeded():
                raise ThrottlingQuotaExceededError()
            before = info.num_partitions if info is not None else topic.count
            await broker.create_partitions(topic.name, topic.count, assignment, validate_only=request.validate_only)
            if not request.validate_only:
                quota.record(max(topic.count - before, 0))
        except KafkaError as exc:
            entry.update(error_code=error_code_of(exc), error_message=str(exc))
        results.append(entry)
    note_mutation_throttle(ctx, quota)
    return {"throttle_time": 0, "results": results}
