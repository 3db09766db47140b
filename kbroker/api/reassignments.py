"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455), answered by the controller.

Like Kafka, a broker that is not the active controller answers NOT_CONTROLLER and the client
asks the one Metadata names. A replica list starts (or replaces) a move, a null one cancels it;
the moves themselves run in the controller (`controller/moves.py`).

The embedded single node answers as Kafka's one-broker cluster: nothing is ever being moved; a
move of a partition to its one replica (the node) is accepted and changes nothing, one to any
other broker is INVALID_REPLICA_ASSIGNMENT (no such broker is alive), a cancel is
NO_REASSIGNMENT_IN_PROGRESS.
"""

from __future__ import annotations

from kbroker.api.cluster import ask_controller
from kbroker.api.context import RequestContext
from kbroker.controller.reassignment import validate_target
from kbroker.errors import ErrorCode


async def alter_partition_reassignments(ctx: RequestContext, request) -> dict:
    changes = [(t.name, p.partition_index, None if p.replicas is None else [int(r) for r in p.replicas])
               for t in request.topics for p in t.partitions]
    if ctx.broker.cluster:
        result = await ask_controller(ctx, ("alter_reassignments", changes))
    else:
        result = single_node_reassignments(ctx.broker, changes)
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
    if not ctx.broker.cluster:  # one broker: nothing is ever being moved
        return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "topics": []}
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


def single_node_reassignments(broker, changes: list[tuple[str, int, list[int] | None]]
                              ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
    """AlterPartitionReassignments on the embedded single node, in the order of Kafka's controller
    (onApiPartitionReassignment): a cancel finds no move; a target is checked first (empty,
    duplicates, negative ids, brokers not alive), then the partition must exist; a move to where the
    partition already is completes at once."""
    live = {broker.node_id}
    answers: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    for topic, partition, target in changes:
        tp = (topic, partition)
        if target is None:
            answers[tp] = (ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress.")
            continue
        problem = validate_target(target, live)
        if problem is not None:
            answers[tp] = problem
            continue
        info = broker.metadata.topic(topic)
        if info is None or not 0 <= partition < len(info.assignment):
            answers[tp] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
        else:
            answers[tp] = (ErrorCode.none, None)
    return answers
