"""Metadata: brokers, controller, cluster id, and topics with their partitions (auto-creating topics)."""

from __future__ import annotations

import weakref

from kbroker.api import views
from kbroker.api.access import Op, cluster_allowed, topic_allowed
from kbroker.api.authorization import NOT_REQUESTED as NO_AUTHORIZED_OPERATIONS
from kbroker.api.authorization import ResourceType, authorized_operations
from kbroker.api.context import RequestContext, listener_addresses
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.metadata.store import TopicInfo

FIRST_UPDATE_WAIT_S = 5.0  # how long Metadata on a just-started broker waits for the controller's view
# An auto-creation that finds the topic created meanwhile (by another broker whose cache is ahead
# of this one's, or a concurrent request) is answered LEADER_NOT_AVAILABLE, which every client
# retries, as Kafka's AutoTopicCreationManager does (createTopicsInZk): never TOPIC_ALREADY_EXISTS.
_CREATED_MEANWHILE = (ErrorCode.topic_already_exists, ErrorCode.request_timed_out)


def topic_metadata(ctx: RequestContext, info: TopicInfo) -> dict:
    if ctx.broker.cluster:
        return _cluster_topic_metadata(ctx, info)
    partitions = []
    rm = ctx.broker.replica_manager
    for index, replicas in enumerate(info.assignment):
        partition = rm.partitions.get((info.name, index))
        offline = (info.name, index) in rm.offline_partitions  # its log dir failed: no leader here
        leader = partition.leader_id if partition else -1
        partitions.append({
            "error_code": ErrorCode.none if partition else
            ErrorCode.kafka_storage_error if offline else ErrorCode.leader_not_available,
            "partition_index": index,
            "leader_id": leader,
            "leader_epoch": partition.leader_epoch if partition else -1,
            "replica_nodes": replicas,
            "isr_nodes": partition.isr if partition else [],
            "offline_replicas": [rm.node_id] if offline else [],
        })
    return _topic_entry(info, partitions)


def _topic_entry(info: TopicInfo, partitions: list[dict]) -> dict:
    return {
        "error_code": ErrorCode.none,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


# store -> topic -> (the store's generation, the topic's Metadata partitions): clients and the
# brokers' own polling ask for every topic several times a second, and with thousands of
# partitions building the entries was most of a broker's CPU in a failover
_PARTITIONS_BUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cluster_topic_metadata(ctx: RequestContext, info: TopicInfo) -> dict:
    """From the cache the controller keeps: every broker gives the same answer. The partitions'
    entries are reused until the cache changes (read only: the encoder does not modify them)."""
    metadata = ctx.broker.metadata
    built = _PARTITIONS_BUILT.get(metadata)
    if built is None:
        built = _PARTITIONS_BUILT[metadata] = {}
    cached = built.get(info.name)
    if cached is not None and cached[0] == metadata.generation and cached[1] is info:
        return _topic_entry(info, cached[2])
    partitions = []
    for index, replicas in enumerate(info.assignment):
        state = metadata.partition_state(info.name, index)
        if state is None:
            continue
        online = metadata.broker(state.leader) is not None
        partitions.append({
            "error_code": ErrorCode.none if online else ErrorCode.leader_not_available,
            "partition_index": index,
            "leader_id": state.leader if online else -1,
            "leader_epoch": state.leader_epoch,
            "replica_nodes": list(state.replicas),
            "isr_nodes": list(state.isr),
            "offline_replicas": list(state.offline_replicas),
        })
    built[info.name] = (metadata.generation, info, partitions)
    return _topic_entry(info, partitions)


def _error_topic(name: str | None, code: ErrorCode, topic_id=None) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": [],
            "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS}


async def handle(ctx: RequestContext, request) -> dict:
    broker = ctx.broker
    metadata = broker.metadata
    if broker.cluster:
        await metadata.wait_for_first_update(FIRST_UPDATE_WAIT_S)
    requested = request.topics
    if ctx.version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    allow_create = getattr(request, "allow_auto_topic_creation", True) and broker.config.get("auto.create.topics.enable")
    topics = []
    if requested is None:  # every topic the principal may DESCRIBE; the others are left out
        topics = [topic_metadata(ctx, info) for info in list(metadata.topics().values())
                  if topic_allowed(ctx, Op.DESCRIBE, info.name, log_denied=False)]
        topics += [views.view_metadata(ctx, v, topic_metadata, _error_topic) for v in list(broker.views.views().values())
                   if topic_allowed(ctx, Op.DESCRIBE, v.name, log_denied=False)]
    else:
        for wanted in requested:
            name = getattr(wanted, "name", None)
            topic_id = getattr(wanted, "topic_id", None)
            if name is None and topic_id is not None and topic_id.int != 0:
                info = metadata.topic_by_id(topic_id)
                view = broker.views.view_by_id(topic_id)
                known = view.name if view is not None else info.name if info is not None else None
                if known is not None and not topic_allowed(ctx, Op.DESCRIBE, known):  # no hint that it exists
                    topics.append(_error_topic(None, ErrorCode.unknown_topic_id, topic_id))
                    continue
                if view is not None:
                    topics.append(views.view_metadata(ctx, view, topic_metadata, _error_topic))
                    continue
                topics.append(topic_metadata(ctx, info) if info else _error_topic(None, ErrorCode.unknown_topic_id, topic_id))
                continue
            if not topic_allowed(ctx, Op.DESCRIBE, name):  # Kafka's answer, whether or not it exists
                topics.append(_error_topic(name, ErrorCode.topic_authorization_failed))
                continue
            view = broker.views.view(name)
            if view is not None:
                topics.append(views.view_metadata(ctx, view, topic_metadata, _error_topic))
                continue
            info = metadata.topic(name)
            if info is None and allow_create and not (cluster_allowed(ctx, Op.CREATE, log_denied=False)
                                                      or topic_allowed(ctx, Op.CREATE, name)):
                topics.append(_error_topic(name, ErrorCode.topic_authorization_failed))
                continue
            if info is None and allow_create:
                try:
                    info = await broker.create_topic(name)
                except KafkaError as exc:
                    code = error_code_of(exc)
                    if code in _CREATED_MEANWHILE:
                        info = metadata.topic(name)  # another broker or request created it just now
                        if info is None or broker.cluster:
                            topics.append(_error_topic(name, ErrorCode.leader_not_available))
                            continue
                    else:
                        topics.append(_error_topic(name, code))
                        continue
                if broker.cluster:  # leaders are being elected: clients retry (Kafka answers the same)
                    topics.append(_error_topic(name, ErrorCode.leader_not_available))
                    continue
            if info is None:
                topics.append(_error_topic(name, ErrorCode.unknown_topic_or_partition))
            else:
                topics.append(topic_metadata(ctx, info))
    if getattr(request, "include_topic_authorized_operations", False):  # v8+
        for topic in topics:
            if topic["name"] is not None:
                topic["topic_authorized_operations"] = authorized_operations(ResourceType.TOPIC, topic["name"], ctx)
    cluster_operations = NO_AUTHORIZED_OPERATIONS
    if getattr(request, "include_cluster_authorized_operations", False):  # v8-v10
        cluster_operations = authorized_operations(ResourceType.CLUSTER, "kafka-cluster", ctx)
    return {
        "throttle_time": 0,
        "brokers": [{"node_id": b.node_id, "host": host, "port": port, "rack": b.rack}
                    for b, host, port in listener_addresses(ctx, metadata.brokers())],
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_operations,
        "error_code": ErrorCode.none,
    }
