"""A hierarchical timing wheel (Kafka's TimingWheel with its DelayQueue of buckets), pure and
clock-free: the caller says what time it is.

Level 0 buckets span `tick_ms`; each level up spans `wheel_size` buckets of the level below. An
item goes to the lowest level whose span from the current time still reaches its due time, so far
items sit together in coarse buckets and only the (few) non-empty buckets are in the heap. When a
coarse bucket comes due its items cascade down to finer levels; when a level-0 bucket comes due
its items fire. A level-0 bucket comes due at the last millisecond it covers, so nothing ever fires
early and nothing fires more than `tick_ms - 1` ms after its due time (given `advance` is called
at `next_expiration()`). Items fired together come out in (due, order) order; `order` breaks ties
(the delay log's offset: first scheduled, first out).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Bucket:
    expiration: int
    items: dict[Hashable, tuple[int, int]] = field(default_factory=dict)  # id -> (due, order)


class TimingWheel:
    def __init__(self, tick_ms: int = 1, wheel_size: int = 64, start_ms: int = 0) -> None:
        if tick_ms < 1 or wheel_size < 2:
            raise ValueError("tick_ms must be >= 1 and wheel_size >= 2")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.current_ms = start_ms
        self._buckets: dict[tuple[int, int], _Bucket] = {}  # (level, virtual slot) -> bucket
        self._heap: list[tuple[int, int, int]] = []  # (expiration, level, virtual slot); stale entries skipped
        self._where: dict[Hashable, tuple[int, int] | None] = {}  # id -> bucket key; None: ready
        self._ready: dict[Hashable, tuple[int, int]] = {}  # due at or before current_ms: fire next advance

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, item_id: Hashable) -> bool:
        return item_id in self._where

    def _tick(self, level: int) -> int:
        return self.tick_ms * self.wheel_size ** level

    def add(self, item_id: Hashable, due_ms: int, order: int = 0) -> None:
        """Schedule `item_id` (replacing an earlier schedule of the same id)."""
        if item_id in self._where:
            self.cancel(item_id)
        if due_ms <= self.current_ms:
            self._ready[item_id] = (due_ms, order)
            self._where[item_id] = None
            return
        level = 0
        while due_ms // self._tick(level) - self.current_ms // self._tick(level) >= self.wheel_size:
            level += 1
        tick = self._tick(level)
        slot = due_ms // tick
        key = (level, slot)
        bucket = self._buckets.get(key)
        if bucket is None:
            # a level-0 bucket is due at its last millisecond; a coarser one at its first, to cascade
            expiration = (slot + 1) * tick - 1 if level == 0 else slot * tick
            bucket = self._buckets[key] = _Bucket(expiration)
            heapq.heappush(self._heap, (expiration, level, slot))
        bucket.items[item_id] = (due_ms, order)
        self._where[item_id] = key

    def cancel(self, item_id: Hashable) -> bool:
        """Forget `item_id`; False if it is not scheduled (fired already, or never added)."""
        if item_id not in self._where:
            return False
        key = self._where.pop(item_id)
        if key is None:
            del self._ready[item_id]
            return True
        bucket = self._buckets[key]
        del bucket.items[item_id]
        if not bucket.items:
            del self._buckets[key]  # its heap entry goes stale and is skipped
        return True

    def next_expiration(self) -> int | None:
        """When `advance` next has something to do (cascade or fire); None when empty."""
        if self._ready:
            return self.current_ms
        heap = self._heap
        while heap:
            expiration, level, slot = heap[0]
            bucket = self._buckets.get((level, slot))
            if bucket is not None and bucket.expiration == expiration:
                return expiration
            heapq.heappop(heap)
        return None

    def advance(self, now_ms: int) -> list[tuple[Hashable, int, int]]:
        """Move the clock to `now_ms` (never back) and return the fired items as (id, due, order),
        in (due, order) order."""
        if now_ms > self.current_ms:
            self.current_ms = now_ms
        now = self.current_ms
        fired = [(item_id, due, order) for item_id, (due, order) in self._ready.items()]
        for item_id in self._ready:
            del self._where[item_id]
        self._ready = {}
        heap = self._heap
        while heap and heap[0][0] <= now:
            expiration, level, slot = heapq.heappop(heap)
            bucket = self._buckets.get((level, slot))
            if bucket is None or bucket.expiration != expiration:
                continue
            del self._buckets[(level, slot)]
            for item_id, (due, order) in bucket.items.items():
                del self._where[item_id]
                if due <= now:
                    fired.append((item_id, due, order))
                else:
                    self.add(item_id, due, order)  # cascades into a finer level
        fired.sort(key=lambda f: (f[1], f[2]))
        return fired

    def items(self) -> list[tuple[Hashable, int, int]]:
        """Every scheduled item as (id, due, order), unordered (for eviction and listings)."""
        out = [(i, d, o) for i, (d, o) in self._ready.items()]
        for bucket in self._buckets.values():
            out.extend((i, d, o) for i, (d, o) in bucket.items.items())
        return out
