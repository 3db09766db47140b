"""Fetch: read whole batches up to the high watermark (LSO for read_committed), long-polling for
`min_bytes` up to `max_wait`, within `max_bytes` and each partition's `partition_max_bytes`.
A read_committed answer lists the aborted transactions overlapping the batches it returns, so the
consumer can drop their records.

Fetch sessions (KIP-227) are declined with session id 0, so every request is a full fetch, which
every client handles. v13+ names topics by id. A follower's fetch (replica id set) reads up to the
log end and is subject to the leader's replication throttle (`replica/quota.py`). Below v10 Kafka
3.9's rules for old fetchers apply (`fetch_legacy`: zstd topics refused, and below v4 message sets
down-converted from the batches); v0–2 have a hard size limit (no KIP-74 first batch beyond it).
"""

from __future__ import annotations

import trio

from kbroker.api import fetch_legacy, views
from kbroker.api.access import Op, allowed_topics, cluster_allowed
from kbroker.api.context import RequestContext
from kbroker.api.leaders import add_fetch_leaders
from kbroker.errors import ErrorCode, TopicAuthorizationError, UnknownTopicIdError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.manager import FetchPartitionResult
from kbroker.wire.protocol import to_ms


def _topic_name(ctx: RequestContext, topic) -> tuple[str | None, object]:
    topic_id = getattr(topic, "topic_id", None)
    if ctx.version >= 13:
        return views.name_of_id(ctx, topic_id), topic_id
    return topic.topic, topic_id


async def _read_all(ctx: RequestContext, wanted, max_bytes: int, read_committed: bool, replica_id: int,
                    denied: frozenset = frozenset()):
    rm = ctx.broker.replica_manager
    hard_limit = ctx.version <= 2  # Kafka's hardMaxBytesLimit: before KIP-74 no batch goes beyond the limits
    budget = max_bytes
    results: list[tuple[object, object, list[tuple[object, FetchPartitionResult]]]] = []
    for topic, name, topic_id in wanted:
        partitions = []
        for p in topic.partitions:
            if name is None:
                partitions.append((p, FetchPartitionResult(TopicPartition("", p.partition), error=UnknownTopicIdError())))
                continue
            if name in denied:
                partitions.append((p, FetchPartitionResult(TopicPartition(name, p.partition),
                                                           error=TopicAuthorizationError())))
                continue
            # KIP-74: the first non-empty partition may exceed the limits by one batch, later ones may not
            tp = TopicPartition(name, p.partition)
            result = await views.read_partition(ctx, name, p.partition, p.fetch_offset,
                                                min(budget, p.partition_max_bytes), read_committed,
                                                budget == max_bytes and not hard_limit, replica_id,
                                                getattr(p, "current_leader_epoch", -1))
            if replica_id >= 0 and result.error is None:
                rm.update_follower_fetch(tp, replica_id, p.fetch_offset)  # the leader learns its progress
            budget = max(0, budget - result.size)
            partitions.append((p, result))
        results.append((name, topic_id, partitions))
    return results


def _aborted_transactions(result: FetchPartitionResult) -> list[dict] | None:
    if result.aborted_transactions is None:
        return None
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in result.aborted_transactions]


async def handle(ctx: RequestContext, request) -> dict:
    session_id, session_epoch = getattr(request, "session_id", 0), getattr(request, "session_epoch", -1)  # v7+
    if session_id != 0 or session_epoch > 0:
        code = ErrorCode.fetch_session_id_not_found if session_id != 0 else ErrorCode.invalid_fetch_session_epoch
        return {"throttle_time": 0, "error_code": code, "session_id": 0, "responses": []}
    read_committed = getattr(request, "isolation_level", 0) == 1  # v4+
    replica_state = getattr(request, "replica_state", None)
    replica_id = replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1)
    max_wait_s = to_ms(request.max_wait) / 1000
    max_bytes = getattr(request, "max_bytes", 0)  # v3+
    max_bytes = max_bytes if max_bytes > 0 else 2**31 - 1
    wanted = []
    for topic in request.topics:
        name, topic_id = _topic_name(ctx, topic)
        wanted.append((topic, name, topic_id))
    # followers need CLUSTER_ACTION, consumers READ on each topic (a view's READ is enough: its
    # source's other records never reach the reader), else TOPIC_AUTHORIZATION_FAILED, as in Kafka
    names = {name for _, name, _ in wanted if name}
    if replica_id >= 0:
        denied = frozenset() if cluster_allowed(ctx, Op.CLUSTER_ACTION) else frozenset(names)
    else:
        denied = frozenset(names - allowed_topics(ctx, Op.READ, names))
    tps = [TopicPartition(views.source_of(ctx, name), p.partition) for topic, name, _ in wanted
           if name and name not in denied for p in topic.partitions]

    deadline = trio.current_time() + max_wait_s
    while True:
        results = await _read_all(ctx, wanted, max_bytes, read_committed, replica_id, denied)
        total = sum(r.size for _, _, parts in results for _, r in parts)
        has_error = any(r.error for _, _, parts in results for _, r in parts)
        remaining = deadline - trio.current_time()
        if total >= request.min_bytes or has_error or remaining <= 0 or not tps:
            break
        if not await ctx.broker.replica_manager.wait_for_fetch_data(tps, remaining):
            results = await _read_all(ctx, wanted, max_bytes, read_committed, replica_id, denied)
            break
    if ctx.version < fetch_legacy.ZSTD_MIN_FETCH_VERSION:  # old fetchers: Kafka 3.9's conversions and refusals
        fetch_legacy.adjust(ctx, results, replica_id)
    if replica_id >= 0:  # the leader's replication throttle counts what followers are sent
        ctx.broker.replica_manager.record_sent_to_follower(r for _, _, parts in results for _, r in parts)
    elif ctx.broker.stats is not None:  # BytesOut: what consumers are sent, as Kafka counts it
        for name, _, parts in results:
            size = sum(r.size for _, r in parts)
            if size:
                ctx.broker.stats.record_fetch(name, size)

    responses = []
    for name, topic_id, parts in results:
        partitions = []
        for p, r in parts:
            partitions.append({
                "partition_index": p.partition,
                "error_code": error_code_of(r.error) if r.error else ErrorCode.none,
                "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": _aborted_transactions(r),
                "preferred_read_replica": -1,
                "records": r.records,
            })
        responses.append({"topic": name, "topic_id": topic_id, "partitions": partitions})
    data = {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses}
    if ctx.broker.cluster and ctx.version >= 12:
        add_fetch_leaders(ctx, data)
    return data
