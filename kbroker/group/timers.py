"""Deadlines keyed by name, driven by an injected clock: the coordinator's delayed operations.

Scheduling a key again replaces its deadline; `run_due(now)` fires what is due in deadline order.
Nothing here sleeps, so the state machine is tested with a fake clock; the server runs one task
that sleeps until `next_deadline()` and is woken through `on_change` when an earlier one appears.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Callable, Hashable


class TimerQueue:
    """A heap of (deadline, seq, key) beside the live deadline per key. Moving a deadline later (a
    session timer renewed by every heartbeat) only updates the live entry; its heap entry is moved
    when it surfaces, so a member heartbeating every few seconds costs one heap operation per
    session timeout, not one per heartbeat."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        # key -> [deadline, seq, action, the deadline its heap entry carries (never later)]
        self._live: dict[Hashable, list] = {}
        self._seq = itertools.count()
        self.on_change: Callable[[], None] = lambda: None

    def schedule(self, key: Hashable, deadline_ms: int, action: Callable[[], None]) -> None:
        entry = self._live.get(key)
        if entry is not None and entry[3] <= deadline_ms:  # later (or the same): its heap entry stays
            entry[0] = deadline_ms
            entry[2] = action
            return
        seq = next(self._seq)
        self._live[key] = [deadline_ms, seq, action, deadline_ms]
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if earliest is None or deadline_ms < earliest:
            self.on_change()

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)  # its heap entry is skipped when it surfaces

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def next_deadline(self) -> int | None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            live = self._live.get(key)
            if live is None or live[1] != seq:
                heapq.heappop(heap)  # cancelled or replaced
            elif live[0] > deadline:
                live[3] = live[0]  # moved later since it was pushed: it goes back in at its deadline
                heapq.heapreplace(heap, (live[0], seq, key))
            else:
                return deadline
        return None

    def run_due(self, now_ms: int) -> int:
        fired = 0
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > now_ms:
                return fired
            _deadline, _seq, key = heapq.heappop(self._heap)
            action = self._live.pop(key)[2]
            action()
            fired += 1
