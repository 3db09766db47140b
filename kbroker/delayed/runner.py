"""The deliveries of one `__delayed_messages` partition this broker leads (the trio shell around
`DelayIndex`): load, fire, deliver exactly once, in due order per target.

On leadership the runner takes a fresh producer id for its deliveries and scans the partition:
the earliest pending records go to memory, and an intent whose records have no tombstones (a
delivery a crash or failover cut short) is sent again first, with the producer id and sequence it
recorded, so the target keeps one copy. Then one task fires the wheel at each due time, a loader
task scans again whenever the clock nears the horizon, and one delivery task per target with
records due (at most `MAX_TARGETS` at a time) repeats: intent (acks=all), the batch to the
target (acks=all), tombstones for its records (acks=all). A failed step is retried with the same
intent; the target refusing the sequence (its state lost) moves to a new producer id.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

import trio

from kbroker.delayed.delay_log import DelayLog
from kbroker.delayed.format import (
    KIND_INTENT,
    KIND_SCHEDULE,
    DelayedRecord,
    Intent,
    Target,
    decode_intent,
    decode_key,
    decode_schedule,
    decode_schedule_head,
    encode_intent,
    encode_schedule,
    schedule_key,
)
from kbroker.delayed.index import DelayIndex, Pending, ScanCollector
from kbroker.delayed.target import TargetWriter, delivery_batch
from kbroker.errors import ErrorCode
from kbroker.wire.primitives import DecodeError
from kbroker.wire.records import increment_sequence

logger = logging.getLogger(__name__)
E = ErrorCode

LOAD_LEAD_MS = 5_000  # scan for the next records this long before the horizon comes due
MAX_TARGETS = 32  # deliveries under way at once, per delay-log partition
MAX_DELIVERY_RECORDS = 500
MAX_DELIVERY_BYTES = 512 * 1024
RETRY_MIN_S, RETRY_MAX_S = 0.05, 2.0
SCAN_YIELD_EVERY = 2_000
# the target will never take these: the records are dropped (logged), not retried forever
DROPPED = {E.message_too_large, E.record_list_too_large, E.invalid_record, E.corrupt_message, E.invalid_topic_exception}
NEW_PRODUCER = {E.out_of_order_sequence_number, E.unknown_producer_id, E.invalid_producer_epoch}


class PartitionRunner:
    def __init__(self, partition: int, leader_epoch: int, log: DelayLog, writer: TargetWriter,
                 allocate_producer_id: Callable[[], Awaitable[int]], now_ms: Callable[[], int], capacity: int,
                 target_exists: Callable[[Target], bool]) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.log = log
        self.writer = writer
        self.allocate_producer_id = allocate_producer_id
        self.now_ms = now_ms
        self.target_exists = target_exists
        self.index = DelayIndex(capacity, now_ms())
        self.ready: dict[Target, deque[Pending]] = {}
        self.redo: dict[Target, Intent] = {}
        self.delivering: set[Target] = set()
        self.producer_id = -1
        self.sequences: dict[Target, int] = {}
        self.loaded = trio.Event()
        self.cancel_scope = trio.CancelScope()
        self._wake = trio.Event()
        self._load_wake = trio.Event()
        self._nursery: trio.Nursery | None = None

    def stop(self) -> None:
        self.cancel_scope.cancel()

    async def run(self) -> None:
        with self.cancel_scope:
            self.producer_id = await self.allocate_producer_id()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self._scan(initial=True)
                self.loaded.set()
                nursery.start_soon(self._loader)
                await self._fire_loop()

    # -- appends (this broker's produce path, forwarded schedules, cancels) -----------------------
    async def append_schedules(self, records: list[DelayedRecord]) -> ErrorCode:
        """Earliest due first, a batch at a time (encoded as the delay log appends them): of thousands
        of records (tens of ms of work) the ones due soonest are in the index, and fire, before the
        rest are even encoded."""
        records = sorted(records, key=lambda r: r.due_ms)  # stable: equal due times keep their order

        def appended(first: int, offsets: list[int]) -> None:  # in the log now, even if not replicated
            for record, offset in zip(records[first:first + len(offsets)], offsets):
                self.index.add(Pending(record.id, record.due_ms, offset, record.target))
            self._wake.set()

        code, _offsets = await self.log.append(self.partition, (encode_schedule(r) for r in records), appended)
        return code

    def in_flight(self, record_id: bytes) -> bool:
        return record_id in self.index.in_flight

    async def cancel(self, record_ids: list[bytes]) -> ErrorCode:
        code, offsets = await self.log.append(self.partition, [(schedule_key(i), None) for i in record_ids])
        for record_id in record_ids[:len(offsets)]:
            self.index.remove(record_id)
        return code

    def pending_in_memory(self) -> int:
        return len(self.index)

    # -- firing -------------------------------------------------------------------------------------
    async def _fire_loop(self) -> None:
        assert self._nursery is not None
        while True:
            now = self.now_ms()
            for item in self.index.fire(now):
                self.ready.setdefault(item.target, deque()).append(item)
            for target in [*self.redo, *self.ready]:
                if target not in self.delivering and len(self.delivering) < MAX_TARGETS:
                    self.delivering.add(target)
                    self._nursery.start_soon(self._deliver, target)
            if self.index.needs_load(now, LOAD_LEAD_MS):
                self._load_wake.set()
            wake_at = self.index.next_expiration()
            if self.index.horizon is not None:
                load_at = self.index.horizon[0] - LOAD_LEAD_MS
                wake_at = load_at if wake_at is None else min(wake_at, load_at)
            delay = float("inf") if wake_at is None else max(0.0, (wake_at - self.now_ms()) / 1000)
            with trio.move_on_after(delay):
                await self._wake.wait()
            self._wake = trio.Event()

    # -- loading ------------------------------------------------------------------------------------
    async def _loader(self) -> None:
        while True:
            await self._load_wake.wait()
            self._load_wake = trio.Event()
            if self.index.needs_load(self.now_ms(), LOAD_LEAD_MS):
                await self._scan(initial=False)
                self._wake.set()

    async def _scan(self, *, initial: bool) -> None:
        low, limit = self.index.begin_scan()
        collector = ScanCollector(low, limit, set(self.index.in_flight))
        started = trio.current_time()
        try:
            for n, (offset, key, value) in enumerate(self.log.scan(self.partition)):
                try:
                    decoded = decode_key(key)
                    if decoded.kind == KIND_SCHEDULE:
                        assert decoded.record_id is not None
                        if value is None:
                            collector.tombstone(decoded.record_id)
                        else:
                            target, due = decode_schedule_head(value)
                            collector.schedule(Pending(decoded.record_id, due, offset, target))
                    elif decoded.kind == KIND_INTENT and value is not None and initial:
                        assert decoded.target is not None
                        collector.intent(decode_intent(decoded.target, value))
                except DecodeError as exc:
                    logger.warning("%s-%d offset %d: skipping an unreadable record: %s", "__delayed_messages",
                                   self.partition, offset, exc)
                if n % SCAN_YIELD_EVERY == SCAN_YIELD_EVERY - 1:
                    await trio.sleep(0)
        except BaseException:
            self.index.finish_scan([], low)  # nothing learnt: the next scan starts from the same place
            raise
        collected, next_key, interrupted = collector.result()
        if initial:
            for intent in interrupted:
                self.index.take_in_flight(record_id for record_id, _offset in intent.items)
                self.redo[intent.target] = intent
        self.index.finish_scan(collected, next_key)
        if collected or interrupted:
            logger.info("__delayed_messages-%d: %d pending records in memory, %d deliveries to resume, "
                        "%s on disk (scan of %.2f s)", self.partition, len(self.index), len(interrupted),
                        "none left" if next_key is None else f"more due from {next_key[0]}",
                        trio.current_time() - started)

    # -- delivering -----------------------------------------------------------------------------------
    def _next_delivery(self, target: Target) -> tuple[Intent, list[DelayedRecord], bool] | None:
        """(intent, its records, whether the intent is already written) of the target's next delivery."""
        intent = self.redo.pop(target, None)
        if intent is not None:
            records = self._records_at(intent.items)
            return intent, [records[o] for _i, o in intent.items if o in records], True
        queue = self.ready.get(target)
        if not queue:
            self.ready.pop(target, None)
            return None
        items = [queue.popleft() for _ in range(min(len(queue), MAX_DELIVERY_RECORDS))]
        records = self._records_at([(p.id, p.offset) for p in items])
        chosen: list[DelayedRecord] = []
        size = 0
        for i, item in enumerate(items):
            record = records.get(item.offset)
            if record is None:  # superseded in the log: nothing to send
                self.index.finish([item.id])
                continue
            size += len(record.key or b"") + len(record.value or b"") + 64
            if chosen and size > MAX_DELIVERY_BYTES:
                queue.extendleft(reversed(items[i:]))
                break
            chosen.append(record)
        if not queue:
            self.ready.pop(target, None)
        if not chosen:
            return self._next_delivery(target)
        offsets = {p.id: p.offset for p in items}
        intent = Intent(target, self.producer_id, 0, self.sequences.get(target, 0),
                        tuple((r.id, offsets[r.id]) for r in chosen))
        return intent, chosen, False

    def _records_at(self, items) -> dict[int, DelayedRecord]:
        out = {}
        for offset, (key, value) in self.log.read_at(self.partition, [o for _i, o in items]).items():
            if value is None:
                continue
            try:
                decoded = decode_key(key)
                if decoded.kind == KIND_SCHEDULE and decoded.record_id is not None:
                    out[offset] = decode_schedule(decoded.record_id, value)
            except DecodeError:
                continue
        return out

    async def _deliver(self, target: Target) -> None:
        try:
            while (work := self._next_delivery(target)) is not None:
                intent, records, written = work
                await self._deliver_one(target, intent, records, written)
        finally:
            self.delivering.discard(target)
            self._wake.set()

    async def _deliver_one(self, target: Target, intent: Intent, records: list[DelayedRecord], written: bool) -> None:
        backoff = RETRY_MIN_S
        ids = [record_id for record_id, _offset in intent.items]
        while records:
            if not written:
                code, _ = await self.log.append(self.partition, [encode_intent(intent)])
                written = code == E.none
            else:
                batch = delivery_batch(records, intent.producer_id, intent.producer_epoch, intent.base_sequence)
                code = await self.writer.send(target, batch)
                if code == E.none:
                    if intent.producer_id == self.producer_id:
                        self.sequences[target] = increment_sequence(intent.base_sequence, len(records))
                    break
                if code in DROPPED or not self.target_exists(target):
                    logger.warning("dropping %d delayed records for %s-%d: the target answers %s", len(records),
                                   target[0], target[1], code.name)
                    break
                if code in NEW_PRODUCER:  # the target lost our producer state: the batch is not there
                    logger.info("delivery to %s-%d refused with %s: sending with a new producer id", target[0],
                                target[1], code.name)
                    self.producer_id = await self.allocate_producer_id()
                    self.sequences.clear()
                    intent = Intent(target, self.producer_id, 0, 0, intent.items)
                    written = False
                    continue
            if code != E.none:
                await trio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)
        while True:  # tombstones: delivered (or dropped)
            code, _ = await self.log.append(self.partition, [(schedule_key(i), None) for i in ids])
            if code == E.none:
                break
            await trio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_MAX_S)
        self.index.finish(ids)
