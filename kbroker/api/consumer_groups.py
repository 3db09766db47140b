"""The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69) — request fields in, topic ids translated to names and back, the
GroupCoordinator's decision out.

Authorization as Kafka's KafkaApis: READ on the group, and DESCRIBE on every topic subscribed to
by name (TOPIC_AUTHORIZATION_FAILED otherwise). A heartbeat that changed the group waits, in a
cluster, until `__consumer_offsets` replicated its records, as an offset commit does.
"""

from __future__ import annotations

from kbroker.api.access import Op, Res, allowed_topics
from kbroker.api.authorization import (
    NOT_REQUESTED,
    ResourceType,
    authorized_operations,
    permitted,
)
from kbroker.api.context import RequestContext
from kbroker.api.offsets import wait_for_commit_replication
from kbroker.errors import ErrorCode
from kbroker.group.consumer_protocol import HeartbeatRequest, new_member_id
from kbroker.wire.protocol import to_ms

MAX_SUBSCRIBED_TOPICS = 100_000


def _owned(ctx: RequestContext, topic_partitions) -> dict[str, frozenset[int]] | None:
    """The member's owned partitions by topic name (an id this broker does not know is dropped: the
    member cannot own a partition of a topic that no longer exists)."""
    if topic_partitions is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for tp in topic_partitions:
        info = ctx.broker.metadata.topic_by_id(tp.topic_id) if tp.topic_id is not None else None
        if info is not None and tp.partitions:
            out[info.name] = out.get(info.name, frozenset()) | frozenset(tp.partitions)
    return out


def _error(request, code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": request.member_epoch if code == ErrorCode.none else -1,
            "heartbeat_interval": 0, "assignment": None}


async def consumer_group_heartbeat(ctx: RequestContext, request) -> dict:
    if not permitted(ctx, Op.READ, Res.GROUP, request.group_id):
        return _error(request, ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names
    if names is not None:
        if len(names) > MAX_SUBSCRIBED_TOPICS:
            return _error(request, ErrorCode.invalid_request, f"more than {MAX_SUBSCRIBED_TOPICS} topics")
        denied = sorted(set(names) - allowed_topics(ctx, Op.DESCRIBE, set(names)))
        if denied:
            return _error(request, ErrorCode.topic_authorization_failed,
                          "The group has subscribed to topics which are not authorized: " + ", ".join(denied[:20]))
    coordinator = await ctx.broker.group_coordinator_for_request()
    member_id = request.member_id
    if ctx.version == 0 and not member_id and request.member_epoch == 0:
        member_id = new_member_id()  # v0: the coordinator names a joining member (v1+: the client does)
    hb = HeartbeatRequest(
        member_id=member_id, member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=to_ms(request.rebalance_timeout),
        topic_names=tuple(names) if names is not None else None,
        topic_regex=getattr(request, "subscribed_topic_regex", None), server_assignor=request.server_assignor,
        owned=_owned(ctx, request.topic_partitions), client_id=ctx.header.client_id or "",
        client_host="/" + ctx.client_host)
    result = coordinator.consumer_group_heartbeat(request.group_id, hb, ctx.version)
    response = result.response
    if response.error != ErrorCode.none:
        return _error(request, response.error, response.message)
    if result.wrote and ctx.broker.cluster:
        errors = {("", 0): ErrorCode.none}
        await wait_for_commit_replication(ctx, coordinator, request.group_id, errors)
        if errors[("", 0)] != ErrorCode.none:
            return _error(request, errors[("", 0)])
    assignment = None
    if response.assignment is not None:
        topic_partitions = []
        for topic in sorted(response.assignment):
            info = ctx.broker.metadata.topic(topic)
            if info is not None:
                topic_partitions.append({"topic_id": info.topic_id,
                                         "partitions": sorted(response.assignment[topic])})
        assignment = {"topic_partitions": topic_partitions}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "member_id": response.member_id, "member_epoch": response.member_epoch,
            "heartbeat_interval": response.heartbeat_interval_ms, "assignment": assignment}


CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # ConsumerGroupDescribe v1's MemberType


def _described_assignment(ctx: RequestContext, assignment) -> dict:
    parts = []
    for topic in sorted(assignment):
        info = ctx.broker.metadata.topic(topic)
        if info is not None:
            parts.append({"topic_id": info.topic_id, "topic_name": topic, "partitions": sorted(assignment[topic])})
    return {"topic_partitions": parts}


def _described_group(ctx: RequestContext, coordinator, group_id: str, include_operations: bool) -> dict:
    empty = {"error_code": ErrorCode.none, "error_message": None, "group_id": group_id, "group_state": "",
             "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
             "authorized_operations": NOT_REQUESTED}
    if not permitted(ctx, Op.DESCRIBE, Res.GROUP, group_id):
        return {**empty, "error_code": ErrorCode.group_authorization_failed}
    error, message, state = coordinator.describe_consumer_group(group_id)
    if error != ErrorCode.none or state is None:
        return {**empty, "error_code": error, "error_message": message}
    members, topics = [], set()
    for member in state.members.values():
        sub = member.subscription
        target = state.target.get(member.member_id, {})
        # what the member holds: the partitions it keeps and those it has yet to revoke (Kafka's answer
        # leaves the latter out; then nothing would show what a member stuck in revoking holds)
        held = {t: member.current.assigned.get(t, frozenset()) | member.current.pending_revocation.get(t, frozenset())
                for t in set(member.current.assigned) | set(member.current.pending_revocation)}
        topics |= set(sub.topic_names) | set(held) | set(target)
        members.append({
            "member_id": member.member_id, "instance_id": sub.instance_id, "rack_id": sub.rack_id,
            "member_epoch": member.epoch, "client_id": sub.client_id, "client_host": sub.client_host,
            "subscribed_topic_names": list(sub.topic_names), "subscribed_topic_regex": sub.topic_regex,
            "assignment": _described_assignment(ctx, held),
            "target_assignment": _described_assignment(ctx, target),
            "member_type": CLASSIC_MEMBER if sub.classic is not None else CONSUMER_MEMBER})
    denied = sorted(topics - allowed_topics(ctx, Op.DESCRIBE, topics, log_denied=False))
    if denied:  # Kafka: a group naming topics the principal may not see is refused whole
        return {**empty, "error_code": ErrorCode.topic_authorization_failed,
                "error_message": "The described group uses topics that the client is not authorized to describe."}
    return {**empty, "group_state": state.state_name(), "group_epoch": state.epoch,
            "assignment_epoch": state.assignment_epoch, "assignor_name": coordinator.preferred_assignor_name(state),
            "members": members, "authorized_operations": authorized_operations(ResourceType.GROUP, group_id, ctx)
            if include_operations else NOT_REQUESTED}


async def consumer_group_describe(ctx: RequestContext, request) -> dict:
    coordinator = await ctx.broker.group_coordinator_for_request()
    return {"throttle_time": 0, "groups": [
        _described_group(ctx, coordinator, group_id, request.include_authorized_operations)
        for group_id in request.group_ids]}
