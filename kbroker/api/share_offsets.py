"""The share-group offset APIs (KIP-932): DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets
(91) v0, DeleteShareGroupOffsets (92) v0 — and DeleteGroups of share groups (api/groups.py asks
here). Answered by the group's coordinator from the share-partitions' state it can reach
(SharePartitionManager: live, or stored in `__share_group_state`).

As Kafka: DESCRIBE on the group to describe (READ on each topic), READ on the group to alter or
delete (READ on each topic); a share group with members is NON_EMPTY_GROUP for alter and delete; a
partition the group has no state for describes with start offset -1.
"""

from __future__ import annotations

from kbroker.api.access import Op, Res, allowed_topics
from kbroker.api.authorization import permitted
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition

E = ErrorCode


def _group(ctx: RequestContext, coordinator, group_id: str, op: Op):
    """(error, message, members' state) for a share group this principal may `op`."""
    if not permitted(ctx, op, Res.GROUP, group_id):
        return E.group_authorization_failed, None, None
    known = bool(_partitions(ctx, coordinator, group_id))
    return coordinator.share_group_for_offsets(group_id, known)


def _partitions(ctx: RequestContext, coordinator, group_id: str) -> list[TopicPartition]:
    """The share-partitions the group may have state for: those this broker knows of, and every
    partition of the topics its members subscribe to (their state may be on other brokers)."""
    state = coordinator.share_groups.get(group_id) if coordinator.is_share_group(group_id) else None
    subscribed = [TopicPartition(t, p) for t, n in (state.subscription_metadata.items() if state else ())
                  for p in range(n)]
    return ctx.broker.share_manager.group_partitions(group_id, subscribed)


async def describe_share_group_offsets(ctx: RequestContext, request) -> dict:
    coordinator = await ctx.broker.group_coordinator_for_request()
    manager = ctx.broker.share_manager
    groups = []
    for g in request.groups:
        error, message, _state = _group(ctx, coordinator, g.group_id, Op.DESCRIBE)
        if error != E.none:
            groups.append({"group_id": g.group_id, "topics": [], "error_code": error, "error_message": message})
            continue
        if g.topics is None:
            wanted: dict[str, list[int]] = {}
            for tp in _partitions(ctx, coordinator, g.group_id):
                wanted.setdefault(tp.topic, []).append(tp.partition)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        readable = allowed_topics(ctx, Op.DESCRIBE, set(wanted))
        topics = []
        for name, partitions in wanted.items():
            info = ctx.broker.metadata.topic(name)
            parts = []
            for p in partitions:
                entry = {"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                         "error_code": E.none, "error_message": None}
                if name not in readable:
                    entry["error_code"] = E.topic_authorization_failed
                elif info is None or not 0 <= p < info.num_partitions:
                    entry["error_code"] = E.unknown_topic_or_partition
                else:
                    tp = TopicPartition(name, p)
                    entry["start_offset"] = await manager.start_offset(g.group_id, tp)
                    if entry["start_offset"] >= 0:
                        lag = await manager.stored_lag(g.group_id, tp)
                        entry["lag"] = -1 if lag is None else lag
                parts.append(entry)
            topics.append({"topic_name": name, "topic_id": info.topic_id if info is not None else None,
                           "partitions": parts})
        groups.append({"group_id": g.group_id, "topics": topics, "error_code": E.none, "error_message": None})
    return {"throttle_time": 0, "groups": groups}


def _changeable(ctx: RequestContext, coordinator, group_id: str):
    error, message, state = _group(ctx, coordinator, group_id, Op.READ)
    if error == E.none and state is not None and state.members:
        return E.non_empty_group, "The group has active members.", None
    return error, message, state


async def alter_share_group_offsets(ctx: RequestContext, request) -> dict:
    coordinator = await ctx.broker.group_coordinator_for_request()
    await ctx.broker.ensure_share_state_topic()
    error, message, _state = _changeable(ctx, coordinator, request.group_id)
    if error == E.group_id_not_found and "not found" in (message or ""):
        error, message = E.none, None  # Kafka alters a group that has no state yet: it starts there
    if error != E.none:
        return {"throttle_time": 0, "error_code": error, "error_message": message, "responses": []}
    names = {t.topic_name for t in request.topics}
    readable = allowed_topics(ctx, Op.READ, names)
    responses = []
    for t in request.topics:
        info = ctx.broker.metadata.topic(t.topic_name)
        parts = []
        for p in t.partitions:
            if t.topic_name not in readable:
                code = E.topic_authorization_failed
            elif info is None or not 0 <= p.partition_index < info.num_partitions:
                code = E.unknown_topic_or_partition
            elif p.start_offset < 0:
                code = E.invalid_request
            else:
                code = await ctx.broker.share_manager.reset_start(request.group_id,
                                                           TopicPartition(t.topic_name, p.partition_index),
                                                           p.start_offset)
            parts.append({"partition_index": p.partition_index, "error_code": code, "error_message": None})
        responses.append({"topic_name": t.topic_name, "topic_id": info.topic_id if info is not None else None,
                          "partitions": parts})
    return {"throttle_time": 0, "error_code": E.none, "error_message": None, "responses": responses}


async def delete_share_group_offsets(ctx: RequestContext, request) -> dict:
    coordinator = await ctx.broker.group_coordinator_for_request()
    error, message, _state = _changeable(ctx, coordinator, request.group_id)
    if error != E.none:
        return {"throttle_time": 0, "error_code": error, "error_message": message, "responses": []}
    manager = ctx.broker.share_manager
    have = _partitions(ctx, coordinator, request.group_id)
    readable = allowed_topics(ctx, Op.READ, {t.topic_name for t in request.topics})
    responses = []
    for t in request.topics:
        info = ctx.broker.metadata.topic(t.topic_name)
        code = E.none
        if t.topic_name not in readable:
            code = E.topic_authorization_failed
        elif info is None:
            code = E.unknown_topic_or_partition
        else:
            for tp in have:
                if tp.topic == t.topic_name:
                    code = await manager.forget(request.group_id, tp)
                    if code != E.none:
                        break
        responses.append({"topic_name": t.topic_name, "topic_id": info.topic_id if info is not None else None,
                          "error_code": code, "error_message": None})
    return {"throttle_time": 0, "error_code": E.none, "error_message": None, "responses": responses}


async def delete_share_group(ctx: RequestContext, coordinator, group_id: str) -> ErrorCode | None:
    """DeleteGroups of `group_id` when it is a share group: its result, else None (not one)."""
    manager = ctx.broker.share_manager
    have = _partitions(ctx, coordinator, group_id)
    known = bool(have)
    if not coordinator.is_share_group(group_id) and not known:
        return None
    error, _message, state = coordinator.share_group_for_offsets(group_id, known)
    if error != E.none:
        return error
    if state is not None and state.members:
        return E.non_empty_group
    for tp in have:
        code = await manager.forget(group_id, tp)
        if code != E.none:
            return code
    coordinator.drop_share_group(group_id)
    return E.none
