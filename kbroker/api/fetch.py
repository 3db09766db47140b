"""Fetch: read whole batches up to the high watermark (LSO for read_committed), long-polling for
`min_bytes` up to `max_wait`, within `max_bytes` and each partition's `partition_max_bytes`.
A read_committed answer lists the aborted transactions overlapping the batches it returns, so the
consumer can drop their records.

Incremental fetch sessions (KIP-227, v7+) are served by the broker's `FetchSessionCache`
(`fetch_session/`, bounded by `max.incremental.fetch.session.cache.slots`): epoch 0 opens a session
holding the request's partitions, an incremental request names only what changed (and forgotten
partitions), and its answer carries only the partitions with news — records, an error, or a
changed high watermark, last stable offset or log start. Consumers and kbroker's own followers use
them. v13+ names topics by id. A follower's fetch (replica id set) reads up to the log end and is
subject to the leader's replication throttle (`replica/quota.py`). Below v10 Kafka 3.9's rules for
old fetchers apply (`fetch_legacy`: zstd topics refused, and below v4 message sets down-converted
from the batches); v0–2 have a hard size limit (no KIP-74 first batch beyond it).
"""

from __future__ import annotations

import uuid

import trio

from kbroker.api import fetch_legacy, views
from kbroker.api.access import Op, allowed_topics, cluster_allowed
from kbroker.api.context import RequestContext
from kbroker.api.leaders import add_fetch_leaders
from kbroker.errors import (
    ErrorCode,
    TopicAuthorizationError,
    UnknownTopicIdError,
    error_code_of,
)
from kbroker.fetch_session import (
    LEGACY,
    ZERO_UUID,
    CachedPartition,
    FetchContext,
    FetchMetadata,
    IncrementalContext,
    PartitionRequest,
    PartitionResult,
    SessionErrorContext,
    TopicIdPartition,
)
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.manager import FetchPartitionResult
from kbroker.wire.protocol import to_ms

TOPIC_IDS_MIN_VERSION = 13
SESSIONS_MIN_VERSION = 7


class _TopicNames:
    """The broker's topic id -> name map, looked up only for the ids a session could not name."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx

    def get(self, topic_id: uuid.UUID, default=None):
        name = views.name_of_id(self.ctx, topic_id)
        return default if name is None else name


def _requested(ctx: RequestContext, request) -> list[tuple[TopicIdPartition, PartitionRequest]]:
    by_id = ctx.version >= TOPIC_IDS_MIN_VERSION
    out = []
    for topic in request.topics:
        if by_id:
            topic_id = topic.topic_id
            name = views.name_of_id(ctx, topic_id)
        else:
            topic_id, name = ZERO_UUID, topic.topic
        for p in topic.partitions:
            out.append((TopicIdPartition(topic_id, name, p.partition), PartitionRequest(
                p.fetch_offset, p.partition_max_bytes, getattr(p, "log_start_offset", -1),
                getattr(p, "current_leader_epoch", -1), getattr(p, "last_fetched_epoch", -1))))
    return out


def _forgotten(ctx: RequestContext, request) -> list[TopicIdPartition]:
    out = []
    for topic in getattr(request, "forgotten_topics_data", None) or ():
        if ctx.version >= TOPIC_IDS_MIN_VERSION:
            topic_id, name = topic.topic_id, views.name_of_id(ctx, topic.topic_id)
        else:
            topic_id, name = ZERO_UUID, topic.topic
        out.extend(TopicIdPartition(topic_id, name, p) for p in topic.partitions)
    return out


async def _read_all(ctx: RequestContext, to_read: list[tuple[TopicIdPartition, PartitionRequest]], max_bytes: int,
                    read_committed: bool, replica_id: int, denied: frozenset = frozenset(),
                    cached: list[CachedPartition] | None = None) -> list[tuple[TopicIdPartition, PartitionResult]]:
    """Each partition's read, as a sessionless fetch would answer it. In an incremental session
    (`cached`: the session's partitions, in the order of `to_read`) a partition whose log, high
    watermark, leadership and request have not changed since a read that found nothing new is
    not read again: it has no news, and is left out of the results (`_memo`)."""
    rm = ctx.broker.replica_manager
    hard_limit = ctx.version <= 2  # Kafka's hardMaxBytesLimit: before KIP-74 no batch goes beyond the limits
    budget = max_bytes
    results = []
    now_ms = rm.now_ms() if cached is not None and replica_id >= 0 else 0
    for i, (tip, req) in enumerate(to_read):
        name = tip.topic
        if name is None:
            result = FetchPartitionResult(TopicPartition("", tip.partition), error=UnknownTopicIdError())
        elif name in denied:
            result = FetchPartitionResult(TopicPartition(name, tip.partition), error=TopicAuthorizationError())
        else:
            entry = cached[i] if cached is not None else None
            if entry is not None and entry.memo is not None and _unchanged(rm, entry.memo, req):
                follower = entry.memo[-1]
                if follower is not None:  # caught up at an unmoved log end: what update_follower_fetch records
                    follower.last_caught_up_ms = follower.last_fetch_ms = now_ms
                continue
            # KIP-74: the first non-empty partition may exceed the limits by one batch, later ones may not
            result = await views.read_partition(ctx, name, tip.partition, req.fetch_offset,
                                                min(budget, req.max_bytes), read_committed,
                                                budget == max_bytes and not hard_limit, replica_id,
                                                req.current_leader_epoch)
            if replica_id >= 0 and result.error is None:  # the leader learns its progress
                rm.update_follower_fetch(TopicPartition(name, tip.partition), replica_id, req.fetch_offset)
            budget = max(0, budget - result.size)
            if entry is not None:
                entry.memo = _memo(ctx, name, tip.partition, req, result, read_committed, replica_id, entry)
        results.append((tip, _session_result(result)))
    return results


def _memo(ctx: RequestContext, name: str, partition: int, req: PartitionRequest, result: FetchPartitionResult,
          read_committed: bool, replica_id: int, sent: CachedPartition) -> tuple | None:
    """What a read that found nothing new depended on, or None when it may have found something:
    records, an error, a read from the archive, a fetch offset short of what it may read, or
    offsets the session has not sent yet (this answer will; the next read makes the memo)."""
    if result.error is not None or result.records or (result.high_watermark, result.last_stable_offset,
                                                      result.log_start_offset) != (
            sent.high_watermark, sent.last_stable_offset, sent.local_log_start_offset):
        return None
    p = ctx.broker.replica_manager.partitions.get(TopicPartition(views.source_of(ctx, name), partition))
    if p is None or not p.is_leader:
        return None
    log = p.log
    if log.config.remote_storage_enable:
        return None
    end = log.log_end_offset if replica_id >= 0 else p.last_stable_offset if read_committed else log.high_watermark
    if req.fetch_offset != end:
        return None
    follower = p.followers.get(replica_id) if replica_id >= 0 else None
    if replica_id >= 0 and follower is None:
        return None
    return (p, log, log.log_end_offset, log.high_watermark, log.log_start_offset, p.leader_epoch, p.leader_id, req,
            follower)


def _unchanged(rm, memo: tuple, req: PartitionRequest) -> bool:
    p, log, end, hw, start, epoch, leader, memo_req, _follower = memo
    return (memo_req is req and p.log is log and log.log_end_offset == end and log.high_watermark == hw
            and log.log_start_offset == start and p.leader_epoch == epoch and p.leader_id == leader
            and rm.partitions.get(p.topic_partition) is p)


def _partitions_to_wait_on(ctx: RequestContext, context: FetchContext,
                           to_read: list[tuple[TopicIdPartition, PartitionRequest]],
                           denied: frozenset) -> list[TopicPartition]:
    """The (source) partitions whose appends end a long poll; an incremental session keeps the
    list until its partitions or the denied topics change."""
    session = context.session if isinstance(context, IncrementalContext) else None
    if session is not None and session.memo is not None and session.memo[0] == denied:
        return session.memo[1]
    tps = [TopicPartition(views.source_of(ctx, tip.topic), tip.partition) for tip, _ in to_read
           if tip.topic is not None and tip.topic not in denied]
    if session is not None:
        session.memo = (denied, tps)
    return tps


def _session_result(result: FetchPartitionResult) -> PartitionResult:
    return PartitionResult(error_code_of(result.error) if result.error else ErrorCode.none, result.high_watermark,
                           result.last_stable_offset, result.log_start_offset, result.size, payload=result)


def _aborted_transactions(result: FetchPartitionResult) -> list[dict] | None:
    if result.aborted_transactions is None:
        return None
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in result.aborted_transactions]


def session_context(ctx: RequestContext, request, replica_id: int) -> FetchContext:
    """The request's fetch-session context (sessionless below v7)."""
    if ctx.version >= SESSIONS_MIN_VERSION:
        metadata = FetchMetadata(request.session_id, request.session_epoch)
    else:
        metadata = LEGACY
    return ctx.broker.fetch_sessions.new_context(metadata, _requested(ctx, request), _forgotten(ctx, request),
                                                 version=ctx.version, is_follower=replica_id >= 0,
                                                 topic_names=_TopicNames(ctx))


async def handle(ctx: RequestContext, request) -> dict:
    read_committed = getattr(request, "isolation_level", 0) == 1  # v4+
    replica_state = getattr(request, "replica_state", None)
    replica_id = replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1)
    context = ctx.fetch_context = session_context(ctx, request, replica_id)
    if isinstance(context, SessionErrorContext):
        return {"throttle_time": 0, "error_code": context.error, "session_id": 0, "responses": []}
    max_wait_s = to_ms(request.max_wait) / 1000
    max_bytes = getattr(request, "max_bytes", 0)  # v3+
    max_bytes = max_bytes if max_bytes > 0 else 2**31 - 1
    to_read = context.partitions_to_read()
    # followers need CLUSTER_ACTION, consumers READ on each topic (a view's READ is enough: its
    # source's other records never reach the reader), else TOPIC_AUTHORIZATION_FAILED, as in Kafka
    names = {tip.topic for tip, _ in to_read if tip.topic is not None}
    if replica_id >= 0:
        denied = frozenset() if cluster_allowed(ctx, Op.CLUSTER_ACTION) else frozenset(names)
    else:
        denied = frozenset(names - allowed_topics(ctx, Op.READ, names))
    tps = _partitions_to_wait_on(ctx, context, to_read, denied)

    cached = context.cached_partitions() if isinstance(context, IncrementalContext) else None
    deadline = trio.current_time() + max_wait_s
    while True:
        results = await _read_all(ctx, to_read, max_bytes, read_committed, replica_id, denied, cached)
        total = sum(r.records_size for _, r in results)
        has_error = any(r.error_code for _, r in results)
        remaining = deadline - trio.current_time()
        if total >= request.min_bytes or has_error or remaining <= 0 or not tps:
            break
        if not await ctx.broker.replica_manager.wait_for_fetch_data(tps, remaining):
            if total or cached is None:  # else nothing was read, and no append came: no need to look again
                results = await _read_all(ctx, to_read, max_bytes, read_committed, replica_id, denied, cached)
            break
    if ctx.version < fetch_legacy.ZSTD_MIN_FETCH_VERSION:  # old fetchers: Kafka 3.9's conversions and refusals
        legacy = [(tip.topic, None, [(req, r.payload)]) for (tip, req), (_, r) in zip(to_read, results)]
        fetch_legacy.adjust(ctx, legacy, replica_id)
        results = [(tip, _session_result(parts[0][1])) for (tip, _), (_, _, parts) in zip(to_read, legacy)]
    if replica_id >= 0:  # the leader's replication throttle counts what followers are sent
        ctx.broker.replica_manager.record_sent_to_follower(r.payload for _, r in results)
    elif ctx.broker.stats is not None:  # BytesOut: what consumers are sent, as Kafka counts it
        for tip, r in results:
            if r.records_size:
                ctx.broker.stats.record_fetch(tip.topic, r.records_size)
    answer = context.build_response(results)
    data = {"throttle_time": 0, "error_code": answer.error, "session_id": answer.session_id,
            "responses": _responses(answer.partitions)}
    if ctx.broker.cluster and ctx.version >= 12:
        add_fetch_leaders(ctx, data)
    return data


def _responses(partitions: list[tuple[TopicIdPartition, PartitionResult]]) -> list[dict]:
    """Each run of one topic's partitions as one topic entry, in the order they were read."""
    responses: list[dict] = []
    current = None
    for tip, result in partitions:
        r = result.payload
        if current is None or current[0] != (tip.topic_id, tip.topic):
            current = ((tip.topic_id, tip.topic), [])
            responses.append({"topic": tip.topic, "topic_id": tip.topic_id, "partitions": current[1]})
        current[1].append({
            "partition_index": tip.partition,
            "error_code": result.error_code,
            "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset,
            "log_start_offset": r.log_start_offset,
            "aborted_transactions": _aborted_transactions(r),
            "preferred_read_replica": -1,
            "records": r.records,
        })
    return responses
