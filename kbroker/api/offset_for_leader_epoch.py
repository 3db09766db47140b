"""OffsetForLeaderEpoch: where a leader epoch ends in this leader's log (from its leader epoch
cache), so a returning replica — or a consumer validating its position after a leader change
(KIP-320) — knows where its copy stops agreeing."""

from __future__ import annotations

from kbroker.api.access import Op, cluster_allowed, require_topic
from kbroker.api.context import RequestContext
from kbroker.api.views import source_of
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.manager import check_leader_epoch


def _answer(ctx: RequestContext, topic: str, p, follower: bool) -> dict:
    entry = {"partition": p.partition, "error_code": ErrorCode.none, "leader_epoch": -1, "end_offset": -1}
    try:
        if not follower:  # a follower's right was checked once: CLUSTER_ACTION
            require_topic(ctx, Op.DESCRIBE, topic)
        partition = ctx.broker.replica_manager.get_leader_partition(TopicPartition(source_of(ctx, topic), p.partition))
        check_leader_epoch(partition, getattr(p, "current_leader_epoch", -1))  # v2+
        epoch, end_offset = partition.log.end_offset_for_epoch(p.leader_epoch)
        entry.update(leader_epoch=epoch, end_offset=end_offset)
    except KafkaError as exc:
        entry["error_code"] = error_code_of(exc)
    return entry


async def handle(ctx: RequestContext, request) -> dict:
    """Kafka's checks: a follower (replica id >= 0) needs CLUSTER_ACTION, a consumer DESCRIBE on each
    topic (TOPIC_AUTHORIZATION_FAILED per partition)."""
    follower = getattr(request, "replica_id", -1) >= 0
    if follower and not cluster_allowed(ctx, Op.CLUSTER_ACTION):
        return {"throttle_time": 0, "topics": [
            {"topic": t.topic, "partitions": [{"partition": p.partition, "leader_epoch": -1, "end_offset": -1,
                                               "error_code": ErrorCode.cluster_authorization_failed}
                                              for p in t.partitions]} for t in request.topics]}
    return {"throttle_time": 0, "topics": [
        {"topic": t.topic, "partitions": [_answer(ctx, t.topic, p, follower) for p in t.partitions]}
        for t in request.topics]}
