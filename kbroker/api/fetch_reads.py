"""What a Fetch reads, partition by partition (api/fetch.py's half that touches the logs), and how
an incremental fetch session (KIP-227) avoids reading what has not changed.

`read(...)` reads the given partitions as a sessionless fetch would (errors for unknown ids and
denied topics, KIP-74's first batch beyond the limits, the follower's progress told to the leader).

In an incremental session, each of the session's partitions keeps a `memo` of what its last
read depended on when that read found nothing to send — no records, no error, offsets the session
already sent, a fetch offset at the end of what the fetcher may read, and for a follower its place
in the ISR (one outside it is read at each fetch, so the leader proposes it again until it is in). A memoised partition is
not read again while its log end, high watermark, log start, leadership and request stay the same.

A `SessionWatch` (the session's own memo) makes that O(what changed) rather than O(partitions):
it is registered with the replica manager for every (source) partition of the session, and an
append, a high-watermark move or a leadership change of one marks that partition dirty and ends
the session's long poll. A request then reads only the partitions it lists, the dirty ones and
the unsettled ones (memo-less: their last read had news or an error); every `FULL_PASS_S` (and
when the watch is new) it checks them all, which catches what does not wake anyone (a log start
moved by retention or DeleteRecords). A follower's caught-up time for the partitions it was not
read for is kept by the leader at its next append (`Partition`'s `follower_seen_ms`), from the
time of the follower's latest fetch, so an idle partition costs its follower's fetch nothing.
"""

from __future__ import annotations

from collections.abc import Hashable

import trio

from kbroker.api import views
from kbroker.api.context import RequestContext
from kbroker.errors import (
    ErrorCode,
    TopicAuthorizationError,
    UnknownTopicIdError,
    error_code_of,
)
from kbroker.fetch_session import (
    CachedPartition,
    PartitionRequest,
    PartitionResult,
    TopicIdPartition,
)
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.manager import FetchPartitionResult
from kbroker.replica.turns import Turns

FULL_PASS_S = 5.0  # how often an incremental session checks every partition (log start moves wake no one)

Item = tuple[TopicIdPartition, PartitionRequest, "CachedPartition | None"]
Read = tuple[TopicIdPartition, PartitionRequest, FetchPartitionResult]


class SessionWatch:
    """One incremental session's view of change: its (source) partitions, those changed since its
    last request (`dirty`), those whose last read had news (`unsettled`, by session key), and the
    event that ends its long poll."""

    __slots__ = ("__weakref__", "by_source", "denied", "dirty", "event", "names", "next_full_pass", "tps",
                 "unsettled")

    def __init__(self, denied: frozenset, tps: list[TopicPartition],
                 by_source: dict[TopicPartition, list[CachedPartition]], names: frozenset) -> None:
        self.names = names  # the session's topic names (the watch is dropped when its partitions change)
        self.denied = denied
        self.tps = tps
        self.by_source = by_source
        self.dirty: set[TopicPartition] = set()
        self.unsettled: set[Hashable] = set()
        self.event = trio.Event()
        self.next_full_pass = 0.0  # the first request checks everything

    def changed(self, tp: TopicPartition) -> None:
        """The replica manager's call: `tp` got an append, a new high watermark or a new leader."""
        self.dirty.add(tp)
        self.event.set()

    def select(self, cached: list[CachedPartition], partitions: dict, requested: list[Hashable],
               now: float) -> list[CachedPartition]:
        """The session's partitions this read must look at (all of them on a full pass)."""
        self.event = trio.Event()
        if now >= self.next_full_pass:
            self.next_full_pass = now + FULL_PASS_S
            self.dirty = set()
            return cached
        keys = set(requested)
        keys |= self.unsettled
        if self.dirty:
            for tp in self.dirty:
                keys.update(e.tip.key for e in self.by_source.get(tp, ()))
            self.dirty = set()
        if not keys:
            return []
        if len(keys) * 4 > len(cached):  # many: in the session's order (fairness under max_bytes)
            return [e for e in cached if e.tip.key in keys]
        return [partitions[k] for k in keys if k in partitions]

    def settled(self, entry: CachedPartition) -> None:
        if entry.memo is None:
            self.unsettled.add(entry.tip.key)
        else:
            self.unsettled.discard(entry.tip.key)


def session_topic_names(session, cached: list[CachedPartition]) -> frozenset:
    """The topic names of a session's partitions: its watch's while that stands, else counted."""
    watch = session.memo
    if isinstance(watch, SessionWatch):
        return watch.names
    return frozenset(e.tip.topic for e in cached if e.tip.topic is not None)


def session_watch(ctx: RequestContext, session, cached: list[CachedPartition], denied: frozenset,
                  names: frozenset) -> SessionWatch:
    """The session's watch, made (and registered) anew when its partitions or the denied topics
    changed (`names`: `session_topic_names`); an old watch is dropped with the replica manager's
    weak references to it."""
    watch = session.memo
    if isinstance(watch, SessionWatch) and watch.denied == denied:
        return watch
    by_source: dict[TopicPartition, list[CachedPartition]] = {}
    for e in cached:
        if e.tip.topic is not None and e.tip.topic not in denied:
            by_source.setdefault(TopicPartition(views.source_of(ctx, e.tip.topic), e.tip.partition), []).append(e)
    watch = session.memo = SessionWatch(denied, list(by_source), by_source, names)
    ctx.broker.replica_manager.watch(watch, watch.tps)
    return watch


async def read(ctx: RequestContext, items: list[Item], max_bytes: int, read_committed: bool, replica_id: int,
               denied: frozenset, watch: SessionWatch | None = None) -> list[Read]:
    """Each item's read; a memoised, unchanged session partition is left out (it has no news)."""
    rm = ctx.broker.replica_manager
    hard_limit = ctx.version <= 2  # Kafka's hardMaxBytesLimit: before KIP-74 no batch goes beyond the limits
    budget = max_bytes
    out: list[Read] = []
    turns = Turns()  # a read of thousands of partitions (a full pass, a catch-up) takes turns
    for i, (tip, req, entry) in enumerate(items):
        await turns.take(i)
        name = tip.topic
        if name is None:
            result = FetchPartitionResult(TopicPartition("", tip.partition), error=UnknownTopicIdError())
        elif name in denied:
            result = FetchPartitionResult(TopicPartition(name, tip.partition), error=TopicAuthorizationError())
        else:
            if entry is not None and entry.memo is not None and _unchanged(rm, entry.memo, req):
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
            if watch is not None:
                watch.settled(entry)
        out.append((tip, req, result))
    return out


def session_result(result: FetchPartitionResult) -> PartitionResult:
    return PartitionResult(error_code_of(result.error) if result.error else ErrorCode.none, result.high_watermark,
                           result.last_stable_offset, result.log_start_offset, result.size, payload=result)


def _memo(ctx: RequestContext, name: str | None, partition: int, req: PartitionRequest, result: FetchPartitionResult,
          read_committed: bool, replica_id: int, sent: CachedPartition) -> tuple | None:
    """What a read that found nothing new depended on, or None when it may have found something:
    records, an error, a read from the archive, a fetch offset short of what it may read, or
    offsets the session has not sent yet (this answer will; the next read makes the memo)."""
    if name is None or result.error is not None or result.records or (
            result.high_watermark, result.last_stable_offset, result.log_start_offset) != (
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
    if replica_id >= 0 and (replica_id not in p.isr or p.pending_isr is not None):
        return None  # caught up outside the ISR: each fetch lets the leader propose it again (Kafka's)
    return (p, log, log.log_end_offset, log.high_watermark, log.log_start_offset, p.leader_epoch, p.leader_id, req)


def _unchanged(rm, memo: tuple, req: PartitionRequest) -> bool:
    p, log, end, hw, start, epoch, leader, memo_req = memo
    return (memo_req is req and p.log is log and log.log_end_offset == end and log.high_watermark == hw
            and log.log_start_offset == start and p.leader_epoch == epoch and p.leader_id == leader
            and rm.partitions.get(p.topic_partition) is p)
