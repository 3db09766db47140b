"""Group membership APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups, DescribeGroups,
DeleteGroups — request fields in, GroupCoordinator calls, one response dict for every version.

JoinGroup and SyncGroup are answered when the group completes the rebalance, so their handlers
park on an event the coordinator's callback sets (the connection waits, as Kafka mutes it).
"""

from __future__ import annotations

from typing import Any, Callable

import trio

from kbroker.api.authorization import NOT_REQUESTED, ResourceType, authorized_operations
from kbroker.api.access import Op, Res, cluster_allowed, require_group
from kbroker.api.authorization import permitted
from kbroker.api import share_offsets
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.wire.protocol import to_ms


async def _await_callback(start: Callable[[Callable[[Any], None]], None]) -> Any:
    done = trio.Event()
    box: list[Any] = []

    def respond(result: Any) -> None:
        if not box:
            box.append(result)
            done.set()

    start(respond)
    await done.wait()
    return box[0]


async def _coordinator(ctx: RequestContext):
    return await ctx.broker.group_coordinator_for_request()


async def join_group(ctx: RequestContext, request) -> dict:
    require_group(ctx, Op.READ, request.group_id)
    coordinator = await _coordinator(ctx)
    session_ms = to_ms(request.session_timeout)
    rebalance_ms = to_ms(getattr(request, "rebalance_timeout", None))
    if rebalance_ms < 0:
        rebalance_ms = session_ms  # v0 has no rebalance timeout: Kafka uses the session timeout
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
    result = await _await_callback(lambda respond: coordinator.join_group(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None), ctx.version >= 4,
        ctx.header.client_id or "", "/" + ctx.client_host, rebalance_ms, session_ms, request.protocol_type,
        protocols, respond))
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name if ctx.version >= 7 else (result.protocol_name or ""),
        "leader": result.leader_id,
        "skip_assignment": False,
        "member_id": result.member_id,
        "members": [{"member_id": mid, "group_instance_id": iid, "metadata": meta}
                    for mid, iid, meta in result.members],
    }


async def sync_group(ctx: RequestContext, request) -> dict:
    require_group(ctx, Op.READ, request.group_id)
    coordinator = await _coordinator(ctx)
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    result = await _await_callback(lambda respond: coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id, getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None), getattr(request, "group_instance_id", None), assignments, respond))
    return {"throttle_time": 0, "error_code": result.error, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}


async def heartbeat(ctx: RequestContext, request) -> dict:
    require_group(ctx, Op.READ, request.group_id)
    error = (await _coordinator(ctx)).heartbeat(request.group_id, request.member_id,
                                        getattr(request, "group_instance_id", None), request.generation_id)
    return {"throttle_time": 0, "error_code": error}


async def leave_group(ctx: RequestContext, request) -> dict:
    require_group(ctx, Op.READ, request.group_id)
    if ctx.version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    error, results = (await _coordinator(ctx)).leave_group(request.group_id, leaving)
    if ctx.version < 3 and error == ErrorCode.none and results:
        error = results[0][2]  # one member per request before v3: its error is the answer
    return {"throttle_time": 0, "error_code": error,
            "members": [{"member_id": mid, "group_instance_id": iid, "error_code": code}
                        for mid, iid, code in results]}


async def list_groups(ctx: RequestContext, request) -> dict:
    states = set(getattr(request, "states_filter", ()) or ())
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    coordinator = ctx.broker.group_coordinator
    error, groups = coordinator.list_groups(states or None, types or None)
    if not cluster_allowed(ctx, Op.DESCRIBE, log_denied=False):  # Kafka: all groups with DESCRIBE on the cluster,
        groups = [g for g in groups if permitted(ctx, Op.DESCRIBE, Res.GROUP, g[0], log_denied=False)]  # else those allowed
    return {"throttle_time": 0, "error_code": error,
            "groups": [{"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": gtype}
                       for gid, ptype, state, gtype in groups]}


async def describe_groups(ctx: RequestContext, request) -> dict:
    coordinator = ctx.broker.group_coordinator
    include_operations = getattr(request, "include_authorized_operations", False)  # v3+
    out = []
    for group_id in request.groups:
        if not permitted(ctx, Op.DESCRIBE, Res.GROUP, group_id):
            out.append({"error_code": ErrorCode.group_authorization_failed, "error_message": None,
                        "group_id": group_id, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": [],
                        "authorized_operations": NOT_REQUESTED})
            continue
        error, summary = coordinator.describe_group(group_id)
        if error == ErrorCode.group_id_not_found and ctx.version < 6:
            error = ErrorCode.none  # before KIP-1043 (v6) such a group is only Dead
        operations = NOT_REQUESTED
        if include_operations and error == ErrorCode.none:  # Kafka: only for groups described without error
            operations = authorized_operations(ResourceType.GROUP, group_id, ctx)
        out.append({
            "error_code": error, "error_message": summary.message if error == ErrorCode.group_id_not_found else None,
            "group_id": group_id, "group_state": summary.state,
            "protocol_type": summary.protocol_type, "protocol_data": summary.protocol,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata, "member_assignment": m.assignment}
                        for m in summary.members],
            "authorized_operations": operations,
        })
    return {"throttle_time": 0, "groups": out}


async def delete_groups(ctx: RequestContext, request) -> dict:
    names = list(request.groups_names)
    allowed = [g for g in names if permitted(ctx, Op.DELETE, Res.GROUP, g)]
    coordinator = ctx.broker.group_coordinator
    shared = {}
    for g in allowed:
        code = await share_offsets.delete_share_group(ctx, coordinator, g)
        if code is not None:
            shared[g] = code
    others = [g for g in allowed if g not in shared]
    results = coordinator.delete_groups(others) if others else {}
    results.update(shared)
    results.update({g: ErrorCode.group_authorization_failed for g in names if g not in allowed})
    return {"throttle_time": 0,
            "results": [{"group_id": gid, "error_code": code} for gid, code in results.items()]}
