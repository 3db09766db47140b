"""Long polls on partitions, a mixin of the ReplicaManager: a Fetch short of min.bytes, a drain or
a share fetch waiting for an append (`wait_for_data`: one event registered per partition, for
one wait), and an incremental fetch session's watch (`watch`: registered once, held weakly, told of
every change of its partitions; api/fetch_reads.py). `_wake(tp)` — an append, a high-watermark
move, a leadership change, a partition removed — ends both kinds. `delayed_fetches` counts the
fetches parked (Kafka's Fetch purgatory size, on the metrics listener)."""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import trio

from kbroker.log.topic_partition import TopicPartition


class DataWaits:
    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[trio.Event]] = {}
        # incremental fetch sessions' watches, held weakly: a session that goes takes its watch along
        self._watchers: dict[TopicPartition, weakref.WeakSet] = {}
        self.delayed_fetches = 0

    def _wake(self, tp: TopicPartition) -> None:
        for event in self._waiters.pop(tp, ()):
            event.set()
        watchers = self._watchers.get(tp)
        if watchers is not None:
            if not watchers:
                del self._watchers[tp]
            for watcher in list(watchers):
                watcher.changed(tp)

    def watch(self, watcher, partitions: Iterable[TopicPartition]) -> None:
        """`watcher.changed(tp)` on every append, high-watermark move or leadership change of
        `partitions`, for as long as the watcher lives (it is held weakly)."""
        for tp in partitions:
            watchers = self._watchers.get(tp)
            if watchers is None:
                watchers = self._watchers[tp] = weakref.WeakSet()
            watchers.add(watcher)

    async def wait_for_event(self, event: trio.Event, timeout_s: float) -> bool:
        """A Fetch short of min_bytes waits here for its session's watch (counted in `delayed_fetches`)."""
        self.delayed_fetches += 1
        try:
            with trio.move_on_after(max(timeout_s, 0)):
                await event.wait()
            return event.is_set()
        finally:
            self.delayed_fetches -= 1

    async def wait_for_fetch_data(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """A Fetch short of min_bytes waits here (counted in `delayed_fetches`)."""
        self.delayed_fetches += 1
        try:
            return await self.wait_for_data(partitions, timeout_s)
        finally:
            self.delayed_fetches -= 1

    async def wait_for_data(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Sleep until an append lands on one of `partitions` or the timeout passes; True if woken."""
        event = trio.Event()
        tps = list(partitions)
        for tp in tps:
            self._waiters.setdefault(tp, set()).add(event)
        try:
            with trio.move_on_after(max(timeout_s, 0)):
                await event.wait()
        finally:
            for tp in tps:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[tp]
        return event.is_set()
