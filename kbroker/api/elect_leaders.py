"""ElectLeaders (KIP-183, KIP-460): preferred or unclean leader election on an operator's request,
answered by the controller (`controller/leadership.py`), per partition: NONE when leadership moved,
ELECTION_NOT_NEEDED when the wanted leader already leads, PREFERRED_LEADER_NOT_AVAILABLE /
ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica may take it, UNKNOWN_TOPIC_OR_PARTITION.
A null partition list means every partition of the cluster, and then, as Kafka answers, only the
partitions whose leadership moved or failed to are listed (not those that needed no election).
v0 has no election type: preferred.

The embedded single node answers as Kafka's one-broker cluster does: its one replica leads every
partition, so ELECTION_NOT_NEEDED (an offline partition, its log dir failed: no leader is possible).
"""

from __future__ import annotations

from kbroker.api.cluster import ask_controller
from kbroker.api.context import RequestContext
from kbroker.controller.context import PREFERRED, UNCLEAN
from kbroker.errors import ErrorCode


async def handle(ctx: RequestContext, request) -> dict:
    election_type = int(getattr(request, "election_type", PREFERRED))
    partitions = None if request.topic_partitions is None else \
        [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    if ctx.broker.cluster:
        result = await ask_controller(ctx, ("elect_leaders", election_type, partitions))
    else:
        result = single_node_elections(ctx.broker, election_type, partitions)
    if isinstance(result, tuple):
        return {"throttle_time": 0, "error_code": result[0], "replica_election_results": []}
    if partitions is None:  # Kafka's KafkaApis: partitions that needed no election are left out
        result = {tp: answer for tp, answer in result.items() if answer[0] != ErrorCode.election_not_needed}
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), (code, message) in sorted(result.items()):
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": [
        {"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


def single_node_elections(broker, election_type: int, partitions: list[tuple[str, int]] | None
                          ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
    """ElectLeaders on the embedded single node, Kafka's one-broker answers (its controller's
    processReplicaLeaderElection): the node's replica is every partition's preferred replica and
    leader, so nothing is ever elected."""
    rm = broker.replica_manager
    if partitions is None:
        partitions = [(name, p) for name, info in broker.metadata.topics().items()
                      for p in range(len(info.assignment))]
    answers: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    for tp in dict.fromkeys(partitions):
        info = broker.metadata.topic(tp[0])
        if info is None or not 0 <= tp[1] < len(info.assignment):
            answers[tp] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
        elif election_type not in (PREFERRED, UNCLEAN):
            answers[tp] = (ErrorCode.invalid_request, f"unknown election type {election_type}")
        elif tp in rm.offline_partitions or tp not in rm.partitions:  # its log dir failed: it cannot lead
            code = ErrorCode.preferred_leader_not_available if election_type == PREFERRED \
                else ErrorCode.eligible_leaders_not_available
            answers[tp] = (code, f"{tp[0]}-{tp[1]} has no online replica")
        else:
            answers[tp] = (ErrorCode.election_not_needed, "Leader election not needed for topic partition.")
    return answers
