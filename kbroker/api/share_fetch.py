"""ShareFetch (78) and ShareAcknowledge (79) v1-2 (KIP-932): a share-group member's session on this
broker (SharePartitionManager.sessions), the acknowledgements it carries applied to the
share-partitions, then (ShareFetch) records acquired for it from every partition of its session,
waiting up to MaxWaitMs when none is there.

As the stock clients need it (docs/notes-share-apis.md): a topic listed twice in one request is
merged (librdkafka does list it twice); Records is never null; a top-level error answers alone.
Authorization as Kafka: READ on the group (GROUP_AUTHORIZATION_FAILED for the whole request), READ on
each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import time

from kbroker.api import views
from kbroker.api.access import Op, Res, allowed_topics
from kbroker.api.authorization import permitted
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition
from kbroker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from kbroker.wire.protocol import to_ms

E = ErrorCode
MAX_ACK_BATCHES = 100_000  # acknowledgement batches one request may carry
BATCH_OPTIMIZED = 0  # ShareAcquireMode (v2; v1 knows no other): whole log batches, max_records may be exceeded


def _top_error(code: ErrorCode, message: str | None = None, lock_ms: int = 0) -> dict:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout": lock_ms,
            "responses": [], "node_endpoints": []}


def _acks_of(topics) -> tuple[list[tuple], dict[tuple, list[tuple[int, int, tuple[int, ...]]]], int]:
    """The partitions named (in order, once each) and their acknowledgement batches, merged."""
    order: list[tuple] = []
    acks: dict[tuple, list[tuple[int, int, tuple[int, ...]]]] = {}
    count = 0
    for topic in topics:
        for p in topic.partitions:
            key = (topic.topic_id, p.partition_index)
            if key not in acks:
                acks[key] = []
                order.append(key)
            for b in p.acknowledgement_batches:
                acks[key].append((b.first_offset, b.last_offset, tuple(b.acknowledge_types)))
                count += 1
    return order, acks, count


class _Answer:
    """The per-partition answer being built, by (topic id, partition)."""

    def __init__(self) -> None:
        self.parts: dict[tuple, dict] = {}

    def part(self, key: tuple) -> dict:
        entry = self.parts.get(key)
        if entry is None:
            entry = self.parts[key] = {"partition_index": key[1], "error_code": E.none, "error_message": None,
                                       "acknowledge_error_code": E.none, "acknowledge_error_message": None,
                                       "current_leader": {"leader_id": -1, "leader_epoch": -1}, "records": b"",
                                       "acquired_records": []}
        return entry

    def topics(self, with_records: bool) -> list[dict]:
        by_topic: dict = {}
        for (topic_id, _p), entry in self.parts.items():
            if not with_records:
                entry = {k: entry[k] for k in ("partition_index", "error_code", "error_message", "current_leader")}
            by_topic.setdefault(topic_id, []).append(entry)
        return [{"topic_id": topic_id, "partitions": parts} for topic_id, parts in by_topic.items()]


def _resolve(ctx: RequestContext, keys) -> tuple[dict[tuple, TopicPartition], dict[tuple, ErrorCode]]:
    """Topic ids to partitions this principal may READ; the others with their error."""
    names = {}
    for topic_id, _p in keys:
        if topic_id not in names:  # a topic's id, or a filtered view's
            names[topic_id] = views.name_of_id(ctx, topic_id) if topic_id is not None else None
    readable = allowed_topics(ctx, Op.READ, {n for n in names.values() if n is not None})
    resolved, errors = {}, {}
    for key in keys:
        name = names[key[0]]
        if name is None:
            errors[key] = E.unknown_topic_id
        elif name not in readable:
            errors[key] = E.topic_authorization_failed
        else:
            resolved[key] = TopicPartition(name, key[1])
    return resolved, errors


async def _acknowledge(ctx: RequestContext, manager, group_id: str, member_id: str, acks, answer: _Answer,
                       field: str) -> None:
    keys = [k for k, batches in acks.items() if batches]
    resolved, errors = _resolve(ctx, keys)
    for key in keys:
        code = errors.get(key)
        if code is None:
            code = await manager.acknowledge(group_id, member_id, resolved[key], acks[key])
        answer.part(key)[field] = code


async def share_fetch(ctx: RequestContext, request) -> dict:
    manager = ctx.broker.share_manager
    lock_ms = manager.config.record_lock_duration_ms
    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return _top_error(E.invalid_request, "A share fetch names its group and member.", lock_ms)
    if not permitted(ctx, Op.READ, Res.GROUP, group_id):
        return _top_error(E.group_authorization_failed, None, lock_ms)
    order, acks, count = _acks_of(request.topics)
    if count > MAX_ACK_BATCHES:
        return _top_error(E.invalid_request, f"more than {MAX_ACK_BATCHES} acknowledgement batches", lock_ms)
    forgotten = [(f.topic_id, p) for f in request.forgotten_topics_data for p in f.partitions]
    await ctx.broker.ensure_share_state_topic()  # where acknowledgements are kept
    epoch = request.share_session_epoch
    session = manager.sessions.fetch(group_id, member_id, epoch, order, forgotten, count > 0)
    if session.error != E.none:
        return _top_error(session.error, session.message, lock_ms)
    if epoch == INITIAL_EPOCH:
        if session.closed is not None:
            manager.release_member(group_id, member_id)  # a new session: the old one's locks go back
        manager.session_started(group_id)
    answer = _Answer()
    await _acknowledge(ctx, manager, group_id, member_id, acks, answer, "acknowledge_error_code")
    renew = getattr(request, "is_renew_ack", False)
    if epoch == FINAL_EPOCH:
        manager.release_member(group_id, member_id)
    elif not renew and request.max_records > 0 and session.session is not None:
        keys = sorted(session.session.partitions, key=lambda k: (str(k[0]), k[1]))
        resolved, errors = _resolve(ctx, keys)
        for key, code in errors.items():
            answer.part(key)["error_code"] = code
        deadline = time.monotonic() + max(to_ms(request.max_wait), 0) / 1000
        while True:
            got = await _acquire(manager, group_id, member_id, resolved, request, answer)
            left = deadline - time.monotonic()
            if got or left <= 0 or not resolved:
                break
            await manager.wait_for_records(list(resolved.values()), left)
    return {"throttle_time": 0, "error_code": E.none, "error_message": None, "acquisition_lock_timeout": lock_ms,
            "responses": answer.topics(with_records=True), "node_endpoints": []}


async def _acquire(manager, group_id: str, member_id: str, resolved: dict, request, answer: _Answer) -> int:
    budget_records = request.max_records
    budget_bytes = max(request.max_bytes, 1)
    got = 0
    for key, tp in resolved.items():
        if budget_records <= 0 or budget_bytes <= 0:
            break
        result = await manager.acquire(group_id, member_id, tp, budget_records, budget_bytes,
                                       whole_batches=getattr(request, "share_acquire_mode", 0) == BATCH_OPTIMIZED)
        entry = answer.part(key) if result.error != E.none or result.acquired else None
        if entry is None:
            continue
        if result.error != E.none:
            entry["error_code"] = result.error
            continue
        entry["records"] = result.records
        entry["acquired_records"] = [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                      "delivery_count": a.delivery_count} for a in result.acquired]
        n = sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
        budget_records -= n
        budget_bytes -= result.size
        got += n
    return got


async def share_acknowledge(ctx: RequestContext, request) -> dict:
    manager = ctx.broker.share_manager
    lock_ms = manager.config.record_lock_duration_ms
    group_id, member_id = request.group_id, request.member_id

    def error(code: ErrorCode, message: str | None = None) -> dict:
        return _top_error(code, message, lock_ms)

    if not group_id or not member_id:
        return error(E.invalid_request, "A share acknowledge names its group and member.")
    if not permitted(ctx, Op.READ, Res.GROUP, group_id):
        return error(E.group_authorization_failed)
    _order, acks, count = _acks_of(request.topics)
    if count > MAX_ACK_BATCHES:
        return error(E.invalid_request, f"more than {MAX_ACK_BATCHES} acknowledgement batches")
    await ctx.broker.ensure_share_state_topic()
    epoch = request.share_session_epoch
    session = manager.sessions.acknowledge(group_id, member_id, epoch)
    if session.error != E.none:
        return error(session.error, session.message)
    answer = _Answer()
    await _acknowledge(ctx, manager, group_id, member_id, acks, answer, "error_code")
    if epoch == FINAL_EPOCH:
        manager.release_member(group_id, member_id)
    return {"throttle_time": 0, "error_code": E.none, "error_message": None, "acquisition_lock_timeout": lock_ms,
            "responses": answer.topics(with_records=False), "node_endpoints": []}
