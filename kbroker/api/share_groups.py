"""Share-group membership APIs (KIP-932): ShareGroupHeartbeat (76) and ShareGroupDescribe (77) —
request fields in, topic names translated to ids, the GroupCoordinator's answer out.

Authorization as Kafka's KafkaApis: READ on the group and DESCRIBE on every subscribed topic for a
heartbeat (TOPIC_AUTHORIZATION_FAILED naming them), DESCRIBE on the group to describe it (a group
naming topics the principal may not describe is refused whole).
"""

from __future__ import annotations

from kbroker.api.access import Op, Res, allowed_topics
from kbroker.api.authorization import NOT_REQUESTED, ResourceType, authorized_operations, permitted
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.group import share_protocol as sp

MAX_SUBSCRIBED_TOPICS = 100_000


def _error(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": -1, "heartbeat_interval": 0, "assignment": None}


def _topic_partitions(ctx: RequestContext, assignment, with_names: bool = False) -> list[dict]:
    out = []
    topic_id_of = ctx.broker.group_coordinator.topics.topic_id  # topics and filtered views
    for topic in sorted(assignment):
        topic_id = topic_id_of(topic)
        if topic_id is not None:
            entry = {"topic_id": topic_id, "partitions": sorted(assignment[topic])}
            if with_names:
                entry["topic_name"] = topic
            out.append(entry)
    return out


async def share_group_heartbeat(ctx: RequestContext, request) -> dict:
    if not permitted(ctx, Op.READ, Res.GROUP, request.group_id):
        return _error(ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names
    if names is not None:
        if len(names) > MAX_SUBSCRIBED_TOPICS:
            return _error(ErrorCode.invalid_request, f"more than {MAX_SUBSCRIBED_TOPICS} topics")
        denied = sorted(set(names) - allowed_topics(ctx, Op.DESCRIBE, set(names)))
        if denied:
            return _error(ErrorCode.topic_authorization_failed,
                          "The group has subscribed to topics which are not authorized: " + ", ".join(denied[:20]))
    coordinator = await ctx.broker.group_coordinator_for_request()
    hb = sp.ShareHeartbeatRequest(
        member_id=request.member_id, member_epoch=request.member_epoch, rack_id=request.rack_id,
        topic_names=tuple(names) if names is not None else None, client_id=ctx.header.client_id or "",
        client_host="/" + ctx.client_host)
    code, message, response = coordinator.share_group_heartbeat(request.group_id, hb)
    if code != ErrorCode.none or response is None:
        return _error(code, message)
    assignment = None
    if response.assignment is not None:
        assignment = {"topic_partitions": _topic_partitions(ctx, response.assignment)}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "member_id": response.member_id, "member_epoch": response.member_epoch,
            "heartbeat_interval": response.heartbeat_interval_ms, "assignment": assignment}


def _described(ctx: RequestContext, coordinator, group_id: str, include_operations: bool) -> dict:
    empty = {"error_code": ErrorCode.none, "error_message": None, "group_id": group_id, "group_state": "",
             "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
             "authorized_operations": NOT_REQUESTED}
    if not permitted(ctx, Op.DESCRIBE, Res.GROUP, group_id):
        return {**empty, "error_code": ErrorCode.group_authorization_failed}
    error, message, state = coordinator.describe_share_group(group_id)
    if error != ErrorCode.none or state is None:
        return {**empty, "error_code": error, "error_message": message}
    members, topics = [], set()
    for member in state.members.values():
        topics |= set(member.topic_names) | set(member.assigned)
        members.append({
            "member_id": member.member_id, "rack_id": member.rack_id, "member_epoch": member.epoch,
            "client_id": member.client_id, "client_host": member.client_host,
            "subscribed_topic_names": list(member.topic_names),
            "assignment": {"topic_partitions": _topic_partitions(ctx, member.assigned, with_names=True)}})
    denied = sorted(topics - allowed_topics(ctx, Op.DESCRIBE, topics, log_denied=False))
    if denied:
        return {**empty, "error_code": ErrorCode.topic_authorization_failed,
                "error_message": "The described group uses topics that the client is not authorized to describe."}
    return {**empty, "group_state": state.state_name(), "group_epoch": state.epoch,
            "assignment_epoch": state.assignment_epoch, "assignor_name": "simple", "members": members,
            "authorized_operations": authorized_operations(ResourceType.GROUP, group_id, ctx)
            if include_operations else NOT_REQUESTED}


async def share_group_describe(ctx: RequestContext, request) -> dict:
    coordinator = await ctx.broker.group_coordinator_for_request()
    return {"throttle_time": 0, "groups": [_described(ctx, coordinator, group_id, request.include_authorized_operations)
                                           for group_id in request.group_ids]}
