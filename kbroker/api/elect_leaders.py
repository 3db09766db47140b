"""ElectLeaders (KIP-183, KIP-460): preferred or unclean leader election on an operator's request,
answered by the controller (`controller/leadership.py`), per partition: NONE when leadership moved,
ELECTION_NOT_NEEDED when the wanted leader already leads, PREFERRED_LEADER_NOT_AVAILABLE /
ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica may take it, UNKNOWN_TOPIC_OR_PARTITION.
A null partition list means every partition of the cluster. v0 has no election type: preferred.
"""

from __future__ import annotations

from kbroker.api.cluster import ask_controller
from kbroker.api.context import RequestContext
from kbroker.controller.context import PREFERRED
from kbroker.errors import ErrorCode


async def handle(ctx: RequestContext, request) -> dict:
    election_type = int(getattr(request, "election_type", PREFERRED))
    partitions = None if request.topic_partitions is None else \
        [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    result = await ask_controller(ctx, ("elect_leaders", election_type, partitions))
    if isinstance(result, tuple):
        return {"throttle_time": 0, "error_code": result[0], "replica_election_results": []}
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), (code, message) in sorted(result.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": [
        {"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}
