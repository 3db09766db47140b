"""TxnOffsetCommit (v0-v4): a transactional producer commits a consumer group's offsets inside its
transaction (Kafka's KafkaApis.handleTxnOffsetCommitRequest).

Partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION; the others go to the group
coordinator, which writes them as the producer's transactional batch and keeps them pending until
the transaction's marker (group/txn_offsets.py). v3 added the member id, group instance id and
generation, checked like OffsetCommit's when given. Before v2 a loading coordinator answers
COORDINATOR_NOT_AVAILABLE: those clients (0.11 to 2.0) fail on COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import time

from kbroker.api.access import Op, Res
from kbroker.api.authorization import permitted
from kbroker.api.context import RequestContext
from kbroker.api.offsets import requested_offsets, wait_for_commit_replication
from kbroker.errors import ErrorCode


async def handle(ctx: RequestContext, request) -> dict:
    # Kafka: WRITE on the transactional id, READ on the group (each failing every partition), READ on topics
    denied = None
    if not permitted(ctx, Op.WRITE, Res.TRANSACTIONAL_ID, request.transactional_id):
        denied = ErrorCode.transactional_id_authorization_failed
    elif not permitted(ctx, Op.READ, Res.GROUP, request.group_id):
        denied = ErrorCode.group_authorization_failed
    if denied is not None:
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": denied}
                                            for p in t.partitions]} for t in request.topics]}
    coordinator = await ctx.broker.group_coordinator_for_request()
    now = time.time_ns() // 1_000_000
    errors, wanted = requested_offsets(ctx, request.topics, now)
    if wanted:
        errors.update(coordinator.commit_txn_offsets(
            request.group_id, request.producer_id, request.producer_epoch, getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None), getattr(request, "generation_id", -1), wanted))
        if ctx.broker.cluster and any(code == ErrorCode.none for code in errors.values()):
            await wait_for_commit_replication(ctx, coordinator, request.group_id, errors)
    if ctx.version < 2:
        errors = {tp: ErrorCode.coordinator_not_available if code == ErrorCode.coordinator_load_in_progress else code
                  for tp, code in errors.items()}
    return {"throttle_time": 0, "topics": [
        {"name": topic.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
            for p in topic.partitions]}
        for topic in request.topics]}
