"""The inter-broker APIs of a ZooKeeper cluster: LeaderAndIsr, UpdateMetadata and StopReplica
(controller → broker), ControlledShutdown and AlterPartition (broker → controller), and
`ask_controller`, the way operators' requests (reassignments, elections) reach the controller.

Each request from a controller carries its epoch; a broker refuses an older one
(STALE_CONTROLLER_EPOCH), so a deposed controller cannot move leaders. A request addressed to an
earlier incarnation of this broker (its registration's epoch) gets STALE_BROKER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, KafkaError, NotControllerError, StaleBrokerEpochError

FULL_METADATA = 2  # UpdateMetadata's Type: every partition of the cluster is in it


def _check_broker_epoch(ctx: RequestContext, request) -> None:
    mine = ctx.broker.metadata.broker_epoch
    if 0 <= request.broker_epoch < mine:
        raise StaleBrokerEpochError(f"broker epoch {request.broker_epoch} is older than {mine}")


async def leader_and_isr(ctx: RequestContext, request) -> dict:
    _check_broker_epoch(ctx, request)
    broker = ctx.broker
    await broker.metadata.load_configs([t.topic_name for t in request.topic_states])  # logs need them
    errors = await broker.replica_manager.become_leader_or_follower(request)
    broker.metadata.note_leader_and_isr(request)
    return {"error_code": ErrorCode.none, "topics": [
        {"topic_id": t.topic_id, "partition_errors": [
            {"partition_index": p.partition_index, "error_code": errors.get((t.topic_name, p.partition_index),
                                                                             ErrorCode.none)}
            for p in t.partition_states]}
        for t in request.topic_states]}


async def update_metadata(ctx: RequestContext, request) -> dict:
    _check_broker_epoch(ctx, request)
    missing = ctx.broker.metadata.apply_update_metadata(request)
    if missing:
        await ctx.broker.metadata.load_configs(missing)
    if request.type_ == FULL_METADATA:
        ctx.broker.delete_stray_logs()
    return {"error_code": ErrorCode.none}


async def stop_replica(ctx: RequestContext, request) -> dict:
    _check_broker_epoch(ctx, request)
    errors = ctx.broker.replica_manager.stop_replicas(request)
    return {"error_code": ErrorCode.none, "partition_errors": [
        {"topic_name": t, "partition_index": p, "error_code": code} for (t, p), code in errors.items()]}


def controller_of(ctx: RequestContext):
    controller = ctx.broker.controller
    if controller is None or not controller.is_active:
        raise NotControllerError("This broker is not the controller.")
    return controller


async def ask_controller(ctx: RequestContext, event: tuple) -> Any:
    """The controller's answer to an operator's `event`, or (code, message) standing for the whole
    request (NOT_CONTROLLER on any other broker: the client asks the one Metadata names)."""
    try:
        controller = controller_of(ctx)
    except NotControllerError as exc:
        return ErrorCode.not_controller, str(exc)
    result = await controller.submit(event)
    if isinstance(result, ErrorCode):
        return result, None
    if isinstance(result, Exception):
        raise result if isinstance(result, KafkaError) else KafkaError(str(result))
    return result


async def controlled_shutdown(ctx: RequestContext, request) -> dict:
    result = await controller_of(ctx).submit(("controlled_shutdown", request.broker_id, request.broker_epoch))
    if isinstance(result, Exception):
        raise result if isinstance(result, KafkaError) else KafkaError(str(result))
    if isinstance(result, ErrorCode):
        return {"error_code": result, "remaining_partitions": []}
    code, remaining = result
    return {"error_code": code, "remaining_partitions": [
        {"topic_name": t, "partition_index": p} for t, p in remaining]}


async def alter_partition(ctx: RequestContext, request) -> dict:
    controller = controller_of(ctx)
    metadata = ctx.broker.metadata
    changes = []
    names = {}
    for topic in request.topics:
        info = metadata.topic_by_id(topic.topic_id)
        if info is None:
            continue
        names[topic.topic_id] = info.name
        for p in topic.partitions:
            changes.append((info.name, p.partition_index, p.leader_epoch, p.partition_epoch,
                            [r.broker_id for r in p.new_isr_with_epochs]))
    result = await controller.submit(("alter_partition", request.broker_id, request.broker_epoch, changes))
    if isinstance(result, ErrorCode):
        return {"throttle_time": 0, "error_code": result, "topics": []}
    if isinstance(result, Exception):
        raise result if isinstance(result, KafkaError) else KafkaError(str(result))
    topics = []
    for topic in request.topics:
        name = names.get(topic.topic_id)
        partitions = []
        for p in topic.partitions:
            code, state = result.get((name, p.partition_index), (ErrorCode.unknown_topic_or_partition, None)) \
                if name else (ErrorCode.unknown_topic_id, None)
            partitions.append({
                "partition_index": p.partition_index, "error_code": code,
                "leader_id": state.leader if state else -1, "leader_epoch": state.leader_epoch if state else -1,
                "isr": list(state.isr) if state else [], "leader_recovery_state": 0,
                "partition_epoch": state.partition_epoch if state else -1})
        topics.append({"topic_id": topic.topic_id, "partitions": partitions})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "topics": topics}
