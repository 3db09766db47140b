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

from kbroker.api import fetch_legacy, fetch_reads, views
from kbroker.api.access import Op, allowed_topics, cluster_allowed
from kbroker.api.context import RequestContext
from kbroker.api.leaders import add_fetch_leaders
from kbroker.fetch_session import (
    LEGACY,
    ZERO_UUID,
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


def _aborted_transactions(result: FetchPartitionResult) -> list[dict] | None:
    if result.aborted_transactions is None:
        return None
    return [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in result.aborted_transactions]


def session_context(ctx: RequestContext, request, replica_id: int,
                    requested: list[tuple[TopicIdPartition, PartitionRequest]]) -> FetchContext:
    """The request's fetch-session context (sessionless below v7)."""
    if ctx.version >= SESSIONS_MIN_VERSION:
        metadata = FetchMetadata(request.session_id, request.session_epoch)
    else:
        metadata = LEGACY
    return ctx.broker.fetch_sessions.new_context(metadata, requested, _forgotten(ctx, request),
                                                 version=ctx.version, is_follower=replica_id >= 0,
                                                 topic_names=_TopicNames(ctx))


async def handle(ctx: RequestContext, request) -> dict:
    read_committed = getattr(request, "isolation_level", 0) == 1  # v4+
    replica_state = getattr(request, "replica_state", None)
    replica_id = replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1)
    requested = _requested(ctx, request)
    context = ctx.fetch_context = session_context(ctx, request, replica_id, requested)
    if isinstance(context, SessionErrorContext):
        return {"throttle_time": 0, "error_code": context.error, "session_id": 0, "responses": []}
    rm = ctx.broker.replica_manager
    if replica_id >= 0:
        rm.follower_fetched(replica_id)
    max_wait_s = to_ms(request.max_wait) / 1000
    max_bytes = getattr(request, "max_bytes", 0)  # v3+
    max_bytes = max_bytes if max_bytes > 0 else 2**31 - 1
    incremental = isinstance(context, IncrementalContext)
    if incremental:
        cached = context.cached_partitions()
        names = fetch_reads.session_topic_names(context.session, cached)
    else:
        to_read = context.partitions_to_read()
        names = {tip.topic for tip, _ in to_read if tip.topic is not None}
    # followers need CLUSTER_ACTION, consumers READ on each topic (a view's READ is enough: its
    # source's other records never reach the reader), else TOPIC_AUTHORIZATION_FAILED, as in Kafka
    if replica_id >= 0:
        denied = frozenset() if cluster_allowed(ctx, Op.CLUSTER_ACTION) else frozenset(names)
    else:
        denied = frozenset(names - allowed_topics(ctx, Op.READ, names))

    deadline = trio.current_time() + max_wait_s
    if incremental:  # only what changed is read (fetch_reads.py); what was read stays in `merged`
        watch = fetch_reads.session_watch(ctx, context.session, cached, denied, names)
        listed = [tip.key for tip, _ in requested]
        merged: dict = {}
        while True:
            chosen = watch.select(cached, context.session.partitions, listed, trio.current_time())
            listed = []
            for tip, req, result in await fetch_reads.read(ctx, [(e.tip, e.req, e) for e in chosen], max_bytes,
                                                           read_committed, replica_id, denied, watch):
                merged[tip.key] = (tip, req, result)
            reads = list(merged.values())
            total = sum(r.size for _, _, r in reads)
            remaining = deadline - trio.current_time()
            if total >= request.min_bytes or any(r.error for _, _, r in reads) or remaining <= 0 or not watch.tps:
                break
            if not await rm.wait_for_event(watch.event, remaining) and not total:
                break  # nothing changed and nothing was read: the answer stands
    else:
        tps = [TopicPartition(views.source_of(ctx, tip.topic), tip.partition) for tip, _ in to_read
               if tip.topic is not None and tip.topic not in denied]
        items = [(tip, req, None) for tip, req in to_read]
        while True:
            reads = await fetch_reads.read(ctx, items, max_bytes, read_committed, replica_id, denied)
            total = sum(r.size for _, _, r in reads)
            remaining = deadline - trio.current_time()
            if total >= request.min_bytes or any(r.error for _, _, r in reads) or remaining <= 0 or not tps:
                break
            if not await rm.wait_for_fetch_data(tps, remaining):
                reads = await fetch_reads.read(ctx, items, max_bytes, read_committed, replica_id, denied)
                break
    if ctx.version < fetch_legacy.ZSTD_MIN_FETCH_VERSION:  # old fetchers: Kafka 3.9's conversions and refusals
        legacy = [(tip.topic, None, [(req, r)]) for tip, req, r in reads]
        fetch_legacy.adjust(ctx, legacy, replica_id)
        reads = [(tip, req, parts[0][1]) for (tip, req, _), (_, _, parts) in zip(reads, legacy)]
    if replica_id >= 0:  # the leader's replication throttle counts what followers are sent
        rm.record_sent_to_follower(r for _, _, r in reads)
    elif ctx.broker.stats is not None:  # BytesOut: what consumers are sent, as Kafka counts it
        for tip, _, r in reads:
            size = r.size
            if size:
                ctx.broker.stats.record_fetch(tip.topic, size)
    answer = context.build_response([(tip, fetch_reads.session_result(r)) for tip, _, r in reads])
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
