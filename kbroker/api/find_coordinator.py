"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id (1).

A single node coordinates everything. With groups hosted in `__consumer_offsets`, the coordinator
becomes the leader of partition `abs(hash(key)) % offsets.topic.num.partitions`.
"""

from __future__ import annotations

from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode

GROUP, TRANSACTION = 0, 1


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> dict:
    if key_type not in (GROUP, TRANSACTION):
        return {"key": key, "error_code": ErrorCode.invalid_request, "error_message": f"Unknown key type {key_type}",
                "node_id": -1, "host": "", "port": -1}
    me = ctx.broker.info
    return {"key": key, "error_code": ErrorCode.none, "error_message": None,
            "node_id": me.node_id, "host": me.host, "port": me.port}


async def handle(ctx: RequestContext, request) -> dict:
    key_type = getattr(request, "key_type", GROUP)
    if ctx.version >= 4:
        return {"throttle_time": 0,
                "coordinators": [_coordinator(ctx, key, key_type) for key in request.coordinator_keys]}
    answer = _coordinator(ctx, request.key, key_type)
    del answer["key"]
    return {"throttle_time": 0, **answer}
