"""Which pending delayed records of one delay-log partition memory holds, pure and clock-free.

Memory holds every pending record whose (due, offset) key is below the *horizon* and no other: the
earliest ones, in the timing wheel, at most about `capacity` of them. The rest stay in the delay
log only. As time nears the horizon, the shell scans the log (`begin_scan`, a `ScanCollector` fed
every record in offset order, `finish_scan`) for the next earliest ones and the horizon moves on;
a record scheduled live goes to memory when its key is below the horizon. Too many in memory and
the latest half is dropped back to the log (the horizon comes down to the first dropped key).

During a scan the live events are kept aside and replayed once the scan's result is in, so a
record appended after the scan's end offset is neither lost nor counted twice. Fired records are
*in flight* until their delivery's tombstones are written; recently finished ids are remembered
(boundedly) so a producer's late retry of an already delivered record is not scheduled again.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass

from kbroker.delayed.format import Intent, Target
from kbroker.delayed.wheel import TimingWheel

Key = tuple[int, int]  # (due ms, offset of the schedule record)
BEFORE_ALL: Key = (-(2**63), -1)


@dataclass(frozen=True, slots=True)
class Pending:
    id: bytes
    due_ms: int
    offset: int
    target: Target

    @property
    def key(self) -> Key:
        return (self.due_ms, self.offset)


class RecentIds:
    """A bounded set: the oldest ids are forgotten first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._ids: OrderedDict[bytes, None] = OrderedDict()

    def add(self, record_id: bytes) -> None:
        self._ids[record_id] = None
        self._ids.move_to_end(record_id)
        while len(self._ids) > self.limit:
            self._ids.popitem(last=False)

    def __contains__(self, record_id: bytes) -> bool:
        return record_id in self._ids


class DelayIndex:
    def __init__(self, capacity: int, now_ms: int, *, tick_ms: int = 1, recent_limit: int = 65536) -> None:
        self.capacity = max(capacity, 2)
        self.wheel = TimingWheel(tick_ms, 64, now_ms)
        self.items: dict[bytes, Pending] = {}
        self.horizon: Key | None = BEFORE_ALL  # None: every pending record is in memory
        self.in_flight: set[bytes] = set()
        self.finished = RecentIds(recent_limit)
        self._deferred: list[tuple[str, object]] | None = None  # live events while a scan runs
        self._scan_dropped = False

    def __len__(self) -> int:
        return len(self.items)

    @property
    def scanning(self) -> bool:
        return self._deferred is not None

    # -- live events ----------------------------------------------------------------------------
    def add(self, item: Pending) -> None:
        """A schedule record was appended (or re-appended: the same id moves to the new offset)."""
        if item.id in self.in_flight or item.id in self.finished:
            return
        if item.id in self.items:
            self._drop(item.id)
        if self.horizon is None or item.key < self.horizon:
            self._keep(item)
            if len(self.items) > self.capacity:
                self._evict()
        elif self._deferred is not None:
            self._deferred.append(("add", item))

    def remove(self, record_id: bytes) -> None:
        """A tombstone was appended: cancelled (or delivered by an earlier leader)."""
        self._drop(record_id)
        self.finished.add(record_id)
        if self._deferred is not None:
            self._deferred.append(("remove", record_id))

    def fire(self, now_ms: int) -> list[Pending]:
        """The records due by `now_ms`, in (due, offset) order; they are in flight from now."""
        out = []
        for record_id, _due, _order in self.wheel.advance(now_ms):
            item = self.items.pop(record_id)
            self.in_flight.add(record_id)
            out.append(item)
        return out

    def take_in_flight(self, record_ids) -> None:
        """Records a delivery interrupted by a crash carries again (they must not fire twice)."""
        for record_id in record_ids:
            self._drop(record_id)
            self.in_flight.add(record_id)

    def finish(self, record_ids) -> None:
        """Delivered (or dropped): their tombstones are written."""
        for record_id in record_ids:
            self.in_flight.discard(record_id)
            self.finished.add(record_id)

    def next_expiration(self) -> int | None:
        return self.wheel.next_expiration()

    def needs_load(self, now_ms: int, lead_ms: int) -> bool:
        return self.horizon is not None and not self.scanning and self.horizon[0] - now_ms <= lead_ms

    # -- scans ----------------------------------------------------------------------------------
    def begin_scan(self) -> tuple[Key, int]:
        """(the lowest key the scan collects, how many it may collect)."""
        assert self.horizon is not None and not self.scanning
        self._deferred = []
        self._scan_dropped = False
        return self.horizon, max(self.capacity - len(self.items), self.capacity // 4, 1)

    def finish_scan(self, collected: list[Pending], next_key: Key | None) -> None:
        """Load what the scan found; `next_key` is the smallest key it left on disk (None: none)."""
        deferred, self._deferred = self._deferred or [], None
        if not self._scan_dropped:  # an eviction meanwhile lowered the horizon: the result is stale
            for item in collected:
                if item.id not in self.in_flight and item.id not in self.finished and item.id not in self.items:
                    self._keep(item)
            self.horizon = next_key
        for kind, event in deferred:
            if kind == "add":
                self.add(event)  # type: ignore[arg-type]
            else:
                self._drop(event)  # type: ignore[arg-type]
        if len(self.items) > self.capacity:
            self._evict()

    # -- memory ---------------------------------------------------------------------------------
    def _keep(self, item: Pending) -> None:
        self.items[item.id] = item
        self.wheel.add(item.id, item.due_ms, item.offset)

    def _drop(self, record_id: bytes) -> None:
        if self.items.pop(record_id, None) is not None:
            self.wheel.cancel(record_id)

    def _evict(self) -> None:
        ordered = sorted(self.items.values(), key=lambda p: p.key)
        keep = self.capacity // 2
        for item in ordered[keep:]:
            self._drop(item.id)
        self.horizon = ordered[keep].key if self.horizon is None else min(self.horizon, ordered[keep].key)
        if self.scanning:
            self._scan_dropped = True


class ScanCollector:
    """Fed every record of a delay-log partition in offset order: keeps the `limit` earliest pending
    records with a key at or past `low` (memory bounded by `limit`), the smallest key it had to
    leave out, and the last intent per target whose records have no tombstones yet (a delivery a
    crash or failover interrupted)."""

    def __init__(self, low: Key, limit: int, skip: set[bytes]) -> None:
        self.low = low
        self.limit = max(limit, 1)
        self.skip = skip
        self.pending: dict[bytes, Pending] = {}
        self._latest: list[tuple[int, int, bytes]] = []  # max-heap of (-due, -offset, id); stale entries
        self.next_key: Key | None = None
        self.intents: dict[Target, Intent] = {}
        self._open: dict[Target, set[bytes]] = {}  # ids of the last intent per target not yet tombstoned
        self._intent_of: dict[bytes, Target] = {}

    def schedule(self, item: Pending) -> None:
        self.pending.pop(item.id, None)
        if item.key < self.low or item.id in self.skip:
            return
        self.pending[item.id] = item
        heapq.heappush(self._latest, (-item.due_ms, -item.offset, item.id))
        while len(self.pending) > self.limit:
            due, offset, record_id = heapq.heappop(self._latest)
            found = self.pending.get(record_id)
            if found is None or found.key != (-due, -offset):
                continue
            del self.pending[record_id]
            if self.next_key is None or found.key < self.next_key:
                self.next_key = found.key
        if len(self._latest) > 2 * self.limit + 1024:
            self._latest = [(-p.due_ms, -p.offset, p.id) for p in self.pending.values()]
            heapq.heapify(self._latest)

    def tombstone(self, record_id: bytes) -> None:
        self.pending.pop(record_id, None)
        target = self._intent_of.pop(record_id, None)
        if target is not None:
            self._open[target].discard(record_id)

    def intent(self, intent: Intent) -> None:
        for record_id in self._open.pop(intent.target, ()):
            self._intent_of.pop(record_id, None)
        self.intents[intent.target] = intent
        ids = {record_id for record_id, _offset in intent.items}
        self._open[intent.target] = ids
        for record_id in ids:
            self._intent_of[record_id] = intent.target

    def result(self) -> tuple[list[Pending], Key | None, list[Intent]]:
        """(the pending records collected, in key order; the smallest key left out; interrupted intents)."""
        interrupted = [self.intents[t] for t, ids in self._open.items() if ids]
        carried = {record_id for intent in interrupted for record_id, _offset in intent.items}
        collected = sorted((p for p in self.pending.values() if p.id not in carried), key=lambda p: p.key)
        return collected, self.next_key, interrupted
