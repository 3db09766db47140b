"""The share-partition state machine of KIP-932 (Kafka's queues): which records of one
(share group, topic-partition) are in flight, who holds them, how often they were delivered.
Pure code: every event is a method `(state, arguments, now_ms) -> (new state, Outcome)`; time
comes in as `now_ms`, nothing is read from a clock, nothing is written anywhere.

Kafka's rules (core/.../share/SharePartition.java), in kbroker's terms:
- The window: records below `start_offset` (SPSO) are delivery-complete; [start_offset,
  end_offset] (SPEO, inclusive; start_offset - 1 when empty) are in flight as `InFlightBatch`es
  covering every offset, never more than `max_record_locks` offsets (Kafka's in-flight limit: a
  stuck head holds the window, so memory is bounded). The start offset moves over the leading run
  of ACKNOWLEDGED/ARCHIVED records after every event.
- acquire: AVAILABLE records of the fetched range inside the window first (lowest offsets), then
  new records beyond the end; each acquisition counts a delivery and locks the record for the
  member until now + record lock duration.
- AVAILABLE is re-entered (RELEASE, lock expiry, member leaving) only below the delivery count
  limit; at the limit the record is ARCHIVED instead (`ArchiveReason.DELIVERY_LIMIT`). kbroker adds
  a redelivery backoff: the record is AVAILABLE from `available_at_ms` on, doubling per delivery.
- acknowledge is all or nothing: a request with any bad batch changes nothing. Shape errors
  (unordered or overlapping batches, first > last, a type list of the wrong length, an unknown
  type) are INVALID_REQUEST; touching an offset not ACQUIRED by the member (or past the end) is
  INVALID_RECORD_STATE. Offsets below the start offset are done already and skipped, as Kafka does.
- Time: an event first lets the locks whose deadline is <= now_ms expire (reported in
  `Outcome.expired`), so the state never depends on how often `expire` was called; an expired
  record comes back at deadline + backoff, not at whenever expiry was noticed.

`snapshot()`/`restore()` give and take Kafka's persisted form (WriteShareGroupState): ACQUIRED
records are written as AVAILABLE with their delivery count, so a new leader redelivers them;
locks and backoffs do not survive. A restored AVAILABLE record already at the delivery limit is
archived by the next acquire that reaches it instead of being delivered again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter

from kbroker.errors import ErrorCode
from kbroker.share.partition_types import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    ArchivedRecords,
    ArchiveReason,
    InFlightBatch,
    InFlightCounts,
    LockRelease,
    Outcome,
    PersisterStateBatch,
    RecordState,
    ShareConfig,
    ShareSnapshot,
)

__all__ = [
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "ArchiveReason",
    "ArchivedRecords",
    "InFlightBatch",
    "InFlightCounts",
    "LockRelease",
    "Outcome",
    "PersisterStateBatch",
    "RecordState",
    "ShareConfig",
    "SharePartition",
    "ShareSnapshot",
]

AVAILABLE, ACQUIRED = RecordState.AVAILABLE, RecordState.ACQUIRED
ACKNOWLEDGED, ARCHIVED = RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_START = attrgetter("first_offset")  # bisect key


@dataclass(frozen=True, slots=True)
class SharePartition:
    """The state of one share-partition; events return a new one (Kafka's SharePartition)."""

    config: ShareConfig
    start_offset: int
    end_offset: int
    batches: tuple[InFlightBatch, ...] = ()

    @classmethod
    def initial(cls, start_offset: int, config: ShareConfig | None = None) -> SharePartition:
        """A share-partition with nothing in flight, starting at `start_offset` (share.auto.offset.reset)."""
        return cls(config or ShareConfig(), start_offset, start_offset - 1)

    # ---------------------------------------------------------------------------------------------
    # events

    def acquire(
        self, member_id: str, first_offset: int, last_offset: int, max_records: int, now_ms: int
    ) -> tuple[SharePartition, Outcome]:
        """Lock records of [first_offset, last_offset] (what the log read returned) for `member_id`,
        at most `max_records`: AVAILABLE ones inside the window first, then new ones past its end
        (offsets between the end and `first_offset` have no record and are archived as gaps)."""
        w = _Work(self, now_ms)
        w.expire()
        cfg = self.config
        budget = max_records
        lo, hi = max(first_offset, w.start), min(last_offset, w.end)
        if budget > 0 and lo <= hi:
            i = w.index_of(lo)
            while budget > 0 and i < len(w.batches) and w.batches[i].first_offset <= hi:
                b = w.batches[i]
                if b.state is AVAILABLE and b.available_at_ms <= now_ms:
                    a, z = max(b.first_offset, lo), min(b.last_offset, hi)
                    if b.delivery_count >= cfg.delivery_count_limit:  # restored at the limit
                        w.archive(a, z, b.delivery_count, ArchiveReason.DELIVERY_LIMIT)
                        i = w.put(i, InFlightBatch(a, z, ARCHIVED, b.delivery_count))
                    else:
                        z = min(z, a + budget - 1)
                        count = b.delivery_count + 1
                        i = w.put(i, InFlightBatch(a, z, ACQUIRED, count, member_id, now_ms + cfg.record_lock_duration_ms))
                        w.acquired.append(AcquiredRecords(a, z, count))
                        budget -= z - a + 1
                i += 1
        if budget > 0 and last_offset > w.end:
            new_first = max(first_offset, w.end + 1)
            head = w.first_pending()
            window_from = head if head is not None else new_first
            new_last = min(last_offset, new_first + budget - 1, window_from + cfg.max_record_locks - 1)
            if new_last >= new_first:
                if head is None:  # nothing pending: the window restarts at the new records
                    w.batches.clear()
                    w.start = new_first
                elif new_first > w.end + 1:
                    w.batches.append(InFlightBatch(w.end + 1, new_first - 1, ARCHIVED, 0))
                deadline = now_ms + cfg.record_lock_duration_ms
                w.batches.append(InFlightBatch(new_first, new_last, ACQUIRED, 1, member_id, deadline))
                w.acquired.append(AcquiredRecords(new_first, new_last, 1))
                w.end = new_last
                w.changed = True
        return w.finish()

    def acknowledge(
        self, member_id: str, batches: Iterable[AcknowledgementBatch | tuple[int, int, Sequence[int]]], now_ms: int
    ) -> tuple[SharePartition, Outcome]:
        """ACCEPT → ACKNOWLEDGED, RELEASE → AVAILABLE (after the backoff; ARCHIVED at the delivery
        limit), REJECT → ARCHIVED, GAP → ARCHIVED (not reported), RENEW → lock extended by the lock
        duration. All or nothing: on an error the state returned is `self`."""
        parsed: list[tuple[int, int, tuple[int, ...]]] = []
        prev_last = -1
        for first, last, types in batches:
            types = tuple(types)
            if (
                first > last
                or first <= prev_last
                or not types
                or (len(types) > 1 and len(types) != last - first + 1)
                or any(t not in _ACK_TYPES for t in types)
            ):
                return self, Outcome(ErrorCode.invalid_request)
            parsed.append((first, last, types))
            prev_last = last
        w = _Work(self, now_ms)
        w.expire()
        for first, last, types in parsed:
            if last < w.start:
                continue  # delivery-complete already
            if last > w.end:
                return self, Outcome(ErrorCode.invalid_record_state)
            for lo, hi, ack in _segments(first, last, types, w.start):
                if not w.acknowledge(member_id, lo, hi, AcknowledgeType(ack)):
                    return self, Outcome(ErrorCode.invalid_record_state)
        return w.finish()

    def expire(self, now_ms: int) -> tuple[SharePartition, Outcome]:
        """Locks whose deadline is <= now_ms end: their records are AVAILABLE again (after the
        backoff, counted from the deadline) or ARCHIVED at the delivery limit."""
        w = _Work(self, now_ms)
        w.expire()
        return w.finish()

    def release_member(self, member_id: str, now_ms: int) -> tuple[SharePartition, Outcome]:
        """The member left or was fenced: its locks end now, as on expiry (`Outcome.released`)."""
        w = _Work(self, now_ms)
        w.expire()
        for i, b in enumerate(w.batches):
            if b.state is ACQUIRED and b.member_id == member_id:
                w.batches[i] = w.release(b, now_ms)
                w.released.append(LockRelease(b.first_offset, b.last_offset, member_id, b.delivery_count))
        return w.finish()

    def reset_start(self, offset: int, now_ms: int) -> tuple[SharePartition, Outcome]:
        """Move the start offset anywhere (AlterShareGroupOffsets, share.auto.offset.reset) and
        forget the window; only while nobody holds a lock (NON_EMPTY_GROUP otherwise), as Kafka
        only alters the offsets of an empty share group."""
        if offset < 0:
            raise ValueError(f"share-partition start offset must not be negative: {offset}")
        w = _Work(self, now_ms)
        w.expire()
        if any(b.state is ACQUIRED for b in w.batches):
            return self, Outcome(ErrorCode.non_empty_group)
        new = SharePartition(self.config, offset, offset - 1)
        return new, w.outcome()

    def advance_log_start(self, log_start_offset: int, now_ms: int) -> tuple[SharePartition, Outcome]:
        """The log start offset moved (retention, DeleteRecords): records below it are gone, so they
        are ARCHIVED whatever their state (locks included; a late acknowledgement of them is
        skipped as below the start offset) and not reported for dead-lettering."""
        w = _Work(self, now_ms)
        w.expire()
        if log_start_offset > w.start:
            if w.batches and w.batches[0].first_offset < log_start_offset:
                z = min(log_start_offset - 1, w.end)
                i = w.index_of(z)
                w.put(i, InFlightBatch(w.batches[i].first_offset, z, ARCHIVED, w.batches[i].delivery_count))
                del w.batches[:i]
            w.start = log_start_offset
            w.end = max(w.end, log_start_offset - 1)
            w.changed = True
        return w.finish()

    def with_config(self, config: ShareConfig) -> SharePartition:
        """The same records under new limits (a group config changed); existing locks keep their deadlines."""
        return replace(self, config=config)

    # ---------------------------------------------------------------------------------------------
    # queries

    def batch_at(self, offset: int) -> InFlightBatch | None:
        """The in-flight batch holding `offset`, None outside the window."""
        if not self.start_offset <= offset <= self.end_offset:
            return None
        return self.batches[bisect_right(self.batches, offset, key=_START) - 1]

    def next_fetch_offset(self, now_ms: int) -> int:
        """Where the next log read starts (Kafka's nextFetchOffset): the first record acquire
        would take at now_ms, else the offset after the window."""
        limit, cfg = self.config.delivery_count_limit, self.config
        for b in self.batches:
            if b.state is AVAILABLE and b.available_at_ms <= now_ms:
                return b.first_offset
            if (
                b.state is ACQUIRED
                and b.lock_deadline_ms <= now_ms
                and b.delivery_count < limit
                and b.lock_deadline_ms + cfg.backoff_ms(b.delivery_count) <= now_ms
            ):
                return b.first_offset
        return self.end_offset + 1

    def can_acquire(self, now_ms: int) -> bool:
        """Whether a fetch could acquire anything (Kafka's canAcquireRecords): a record is ready
        for redelivery, or the window has room for new records."""
        if self.next_fetch_offset(now_ms) <= self.end_offset:
            return True
        return self.end_offset - self.start_offset + 1 < self.config.max_record_locks

    def next_event_ms(self, now_ms: int) -> int | None:
        """The earliest time something changes by time alone (a lock deadline, the end of a
        backoff after now_ms), for the caller's timer; None when nothing waits on time."""
        times = [
            b.lock_deadline_ms if b.state is ACQUIRED else b.available_at_ms
            for b in self.batches
            if b.state is ACQUIRED or (b.state is AVAILABLE and b.available_at_ms > now_ms)
        ]
        return min(times, default=None)

    def counts(self) -> InFlightCounts:
        per = dict.fromkeys(RecordState, 0)
        for b in self.batches:
            per[b.state] += b.size
        return InFlightCounts(per[AVAILABLE], per[ACQUIRED], per[ACKNOWLEDGED], per[ARCHIVED])

    @property
    def acquired_count(self) -> int:
        return sum(b.size for b in self.batches if b.state is ACQUIRED)

    def lag(self, log_end_offset: int) -> int:
        """Records of the log not yet delivery-complete (neither acknowledged nor archived)."""
        pending = max(log_end_offset - self.start_offset, 0)
        for b in self.batches:
            if b.first_offset >= log_end_offset:
                break
            if b.state.is_terminal:
                pending -= min(b.last_offset, log_end_offset - 1) - b.first_offset + 1
        return pending

    # ---------------------------------------------------------------------------------------------
    # persistence

    def snapshot(self) -> ShareSnapshot:
        """The persisted form: start offset and state batches; ACQUIRED is written as AVAILABLE."""
        out: list[PersisterStateBatch] = []
        for b in self.batches:
            state = AVAILABLE if b.state is ACQUIRED else b.state
            if out and out[-1].delivery_state == state and out[-1].delivery_count == b.delivery_count:
                out[-1] = out[-1]._replace(last_offset=b.last_offset)
            else:
                out.append(PersisterStateBatch(b.first_offset, b.last_offset, int(state), b.delivery_count))
        return ShareSnapshot(self.start_offset, tuple(out))

    @classmethod
    def restore(cls, snapshot: ShareSnapshot, config: ShareConfig | None = None) -> SharePartition:
        """The state a new leader starts from (Kafka's maybeInitialize). Offsets between the start
        offset and the last batch that no batch names were never delivered: AVAILABLE, count 0.
        Raises ValueError on a snapshot Kafka would refuse (unordered batches, below the start)."""
        start = max(snapshot.start_offset, 0)  # Kafka: -1 (never initialized) means 0
        batches: list[InFlightBatch] = []
        nxt = start
        for sb in snapshot.state_batches:
            if sb.first_offset < nxt or sb.last_offset < sb.first_offset or sb.delivery_count < 0:
                raise ValueError(f"share-partition snapshot batch out of order or invalid: {sb} (start {start})")
            if sb.delivery_state not in (0, 1, 2, 4):
                raise ValueError(f"share-partition snapshot batch with unknown state: {sb}")
            if sb.first_offset > nxt:
                batches.append(InFlightBatch(nxt, sb.first_offset - 1, AVAILABLE, 0))
            state = AVAILABLE if sb.delivery_state == 1 else RecordState(sb.delivery_state)
            batches.append(InFlightBatch(sb.first_offset, sb.last_offset, state, sb.delivery_count))
            nxt = sb.last_offset + 1
        w = _Work(SharePartition(config or ShareConfig(), start, nxt - 1, tuple(batches)), 0)
        w.changed = True
        return w.finish()[0]


# -------------------------------------------------------------------------------------------------
# one event's work on a mutable copy of the batches


class _Work:
    __slots__ = ("acquired", "archived", "base", "batches", "changed", "end", "expired", "now", "released", "start")

    def __init__(self, base: SharePartition, now_ms: int) -> None:
        self.base = base
        self.now = now_ms
        self.batches = list(base.batches)
        self.start, self.end = base.start_offset, base.end_offset
        self.changed = False
        self.acquired: list[AcquiredRecords] = []
        self.archived: list[ArchivedRecords] = []
        self.expired: list[LockRelease] = []
        self.released: list[LockRelease] = []

    def index_of(self, offset: int) -> int:
        return bisect_right(self.batches, offset, key=_START) - 1

    def put(self, i: int, new: InFlightBatch) -> int:
        """Replace the offsets `new` covers inside batch i by `new`; returns new's index."""
        old = self.batches[i]
        parts = []
        if old.first_offset < new.first_offset:
            parts.append(_cut(old, old.first_offset, new.first_offset - 1))
        parts.append(new)
        if new.last_offset < old.last_offset:
            parts.append(_cut(old, new.last_offset + 1, old.last_offset))
        self.batches[i : i + 1] = parts
        self.changed = True
        return i + len(parts) - 1 - (new.last_offset < old.last_offset)

    def first_pending(self) -> int | None:
        return next((b.first_offset for b in self.batches if not b.state.is_terminal), None)

    def archive(self, first: int, last: int, count: int, reason: ArchiveReason) -> None:
        self.archived.append(ArchivedRecords(first, last, count, reason))

    def release(self, b: InFlightBatch, at_ms: int) -> InFlightBatch:
        """An ACQUIRED batch given back at `at_ms`: AVAILABLE after the backoff, or ARCHIVED."""
        self.changed = True
        cfg = self.base.config
        if b.delivery_count >= cfg.delivery_count_limit:
            self.archive(b.first_offset, b.last_offset, b.delivery_count, ArchiveReason.DELIVERY_LIMIT)
            return InFlightBatch(b.first_offset, b.last_offset, ARCHIVED, b.delivery_count)
        available_at = at_ms + cfg.backoff_ms(b.delivery_count)
        if available_at <= self.now:
            available_at = 0  # available already
        return InFlightBatch(b.first_offset, b.last_offset, AVAILABLE, b.delivery_count, available_at_ms=available_at)

    def expire(self) -> None:
        for i, b in enumerate(self.batches):
            if b.state is ACQUIRED and b.lock_deadline_ms <= self.now:
                self.batches[i] = self.release(b, b.lock_deadline_ms)
                self.expired.append(LockRelease(b.first_offset, b.last_offset, b.member_id or "", b.delivery_count))

    def acknowledge(self, member_id: str, lo: int, hi: int, ack: AcknowledgeType) -> bool:
        """Apply one acknowledge type to [lo, hi] (inside the window); False if an offset there is
        not ACQUIRED by the member (the caller then drops this work)."""
        i = self.index_of(lo)
        while i < len(self.batches) and self.batches[i].first_offset <= hi:
            b = self.batches[i]
            if b.state is not ACQUIRED or b.member_id != member_id:
                return False
            a, z, count = max(b.first_offset, lo), min(b.last_offset, hi), b.delivery_count
            if ack is AcknowledgeType.ACCEPT:
                new = InFlightBatch(a, z, ACKNOWLEDGED, count)
            elif ack is AcknowledgeType.RELEASE:
                new = self.release(InFlightBatch(a, z, ACQUIRED, count, member_id), self.now)
            elif ack is AcknowledgeType.RENEW:
                new = InFlightBatch(a, z, ACQUIRED, count, member_id, self.now + self.base.config.record_lock_duration_ms)
            else:  # REJECT, GAP
                if ack is AcknowledgeType.REJECT:
                    self.archive(a, z, count, ArchiveReason.REJECTED)
                new = InFlightBatch(a, z, ARCHIVED, count)
            i = self.put(i, new) + 1
        return True

    def outcome(self) -> Outcome:
        return Outcome(
            acquired=_merge_ranges(self.acquired),
            archived=_merge_ranges(self.archived),
            expired=_merge_ranges(self.expired),
            released=_merge_ranges(self.released),
        )

    def finish(self) -> tuple[SharePartition, Outcome]:
        """Merge like neighbours, forget backoffs that are over, drop the delivery-complete head."""
        if not self.changed:
            return self.base, Outcome()
        out: list[InFlightBatch] = []
        for b in self.batches:
            if not out and b.state.is_terminal:
                continue
            if b.state is AVAILABLE and 0 < b.available_at_ms <= self.now:
                b = _cut(b, b.first_offset, b.last_offset, available_at_ms=0)
            if out:
                p = out[-1]
                if (
                    p.state is b.state
                    and p.delivery_count == b.delivery_count
                    and p.member_id == b.member_id
                    and p.lock_deadline_ms == b.lock_deadline_ms
                    and p.available_at_ms == b.available_at_ms
                ):
                    out[-1] = _cut(p, p.first_offset, b.last_offset)
                    continue
            out.append(b)
        start = out[0].first_offset if out else self.end + 1
        return SharePartition(self.base.config, start, self.end, tuple(out)), self.outcome()


def _cut(b: InFlightBatch, first: int, last: int, available_at_ms: int | None = None) -> InFlightBatch:
    """`b` over other offsets (faster than dataclasses.replace)."""
    available_at = b.available_at_ms if available_at_ms is None else available_at_ms
    return InFlightBatch(first, last, b.state, b.delivery_count, b.member_id, b.lock_deadline_ms, available_at)


def _segments(first: int, last: int, types: tuple[int, ...], start: int) -> Iterable[tuple[int, int, int]]:
    """[first, last] from `start` on, cut into ranges of one acknowledge type."""
    lo = max(first, start)
    if len(types) == 1:
        yield lo, last, types[0]
        return
    seg_lo, seg_type = lo, types[lo - first]
    for offset in range(lo + 1, last + 1):
        t = types[offset - first]
        if t != seg_type:
            yield seg_lo, offset - 1, seg_type
            seg_lo, seg_type = offset, t
    yield seg_lo, last, seg_type


def _merge_ranges(items: list) -> tuple:
    """Sort by first offset and join neighbours that agree on everything but the offsets."""
    items.sort(key=lambda r: r[0])
    out: list = []
    for r in items:
        if out and out[-1][1] + 1 == r[0] and out[-1][2:] == r[2:]:
            out[-1] = out[-1]._replace(last_offset=r[1])
        else:
            out.append(r)
    return tuple(out)
