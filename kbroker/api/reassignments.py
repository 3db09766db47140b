"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), answered by the controller.

Like Kafka, a broker that is not the active controller answers NOT_CONTROLLER and the client
asks the one Metadata names. A replica list starts (or replaces) a move, a null one cancels it;
the moves themselves run in the controller (`controller/moves.py`).
"""

from __future__ import annotations

from kbroker.api.cluster import ask_controller
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode


async def alter_partition_reassignments(ctx: RequestContext, request) -> dict:
    changes = [(t.name, p.partition_index, None if p.replicas is None else [int(r) for r in p.replicas])
               for t in request.topics for p in t.partitions]
    result = await ask_controller(ctx, ("alter_reassignments", changes))
    if isinstance(result, tuple):
        return {"throttle_time": 0, "error_code": result[0], "error_message": result[1], "responses": []}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "responses": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": result[(t.name, p.partition_index)][0],
             "error_message": result[(t.name, p.partition_index)][1]}
            for p in t.partitions]}
        for t in request.topics]}


async def list_partition_reassignments(ctx: RequestContext, request) -> dict:
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    result = await ask_controller(ctx, ("list_reassignments", wanted))
    if isinstance(result, tuple):
        return {"throttle_time": 0, "error_code": result[0], "error_message": result[1], "topics": []}
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), sets in sorted(result.items()):
        by_topic.setdefault(topic, []).append({
            "partition_index": p, "replicas": list(sets.replicas), "adding_replicas": list(sets.adding),
            "removing_replicas": list(sets.removing)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
