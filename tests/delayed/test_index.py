"""DelayIndex and ScanCollector on a fake clock: memory holds exactly the earliest pending records
(below the horizon, at most about `capacity`), the rest come back from scans as time passes;
every record fires exactly once, never early, in due order; live events during a scan are neither
lost nor doubled; an interrupted delivery's records are carried, not fired again."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.delayed.format import Intent
from kbroker.delayed.index import DelayIndex, Pending, ScanCollector

T = ("t", 0)


def pid(n: int) -> bytes:
    return n.to_bytes(16, "big")


class FakeLog:
    """The delay log as the index's shell sees it: schedule records and tombstones in offset order."""

    def __init__(self) -> None:
        self.records: list[tuple[str, Pending | bytes]] = []

    def schedule(self, record_id: bytes, due: int) -> Pending:
        item = Pending(record_id, due, len(self.records), T)
        self.records.append(("s", item))
        return item

    def tombstone(self, record_id: bytes) -> None:
        self.records.append(("t", record_id))

    def scan(self, index: DelayIndex, upto: int | None = None) -> tuple[list, object, list]:
        low, limit = index.begin_scan()
        collector = ScanCollector(low, limit, set(index.in_flight))
        for kind, what in self.records[:upto]:
            if kind == "s":
                collector.schedule(what)
            else:
                collector.tombstone(what)
        return collector.result()


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**6), capacity=st.sampled_from([2, 5, 16, 1000]), n=st.integers(0, 120))
def test_every_record_fires_once_in_due_order_with_bounded_memory(seed, capacity, n):
    rng = random.Random(seed)
    log, now = FakeLog(), 1_000
    index = DelayIndex(capacity, now)
    pending_scan = None
    fired: list[Pending] = []
    cancelled: set[bytes] = set()
    scheduled: dict[bytes, int] = {}
    for i in range(n):
        action = rng.random()
        if action < 0.6:
            item = log.schedule(pid(i), now + rng.randint(-10, 5_000))
            scheduled[item.id] = item.due_ms
            index.add(item)
        elif action < 0.7 and scheduled:
            victim = rng.choice(sorted(scheduled))
            if victim not in index.in_flight and victim not in {f.id for f in fired}:
                log.tombstone(victim)
                index.remove(victim)
                cancelled.add(victim)
        elif action < 0.8 and pending_scan is None and index.needs_load(now, 100):
            pending_scan = log.scan(index)  # live events may arrive before it finishes
        elif action < 0.85 and pending_scan is not None:
            collected, next_key, _ = pending_scan
            index.finish_scan(collected, next_key)
            pending_scan = None
        else:
            now += rng.randint(0, 700)
            got = index.fire(now)
            assert [g.key for g in got] == sorted(g.key for g in got)
            assert all(g.due_ms <= now for g in got)
            fired.extend(got)
            index.finish(g.id for g in got)
        assert len(index) <= capacity
    if pending_scan is not None:
        index.finish_scan(*pending_scan[:2])
    for _ in range(10_000):  # drain: scans whenever the horizon nears
        if index.needs_load(now, 100):
            collected, next_key, _ = log.scan(index)
            index.finish_scan(collected, next_key)
        nxt = index.next_expiration()
        if nxt is None and index.horizon is None:
            break
        now = max(now, nxt if nxt is not None else index.horizon[0])
        got = index.fire(now)
        assert all(g.due_ms <= now for g in got)
        fired.extend(got)
        index.finish(g.id for g in got)
    ids = [f.id for f in fired]
    assert len(ids) == len(set(ids)), "fired twice"
    assert set(ids) == set(scheduled) - cancelled


def test_memory_drops_the_latest_half_and_scans_bring_them_back_in_order():
    log, index = FakeLog(), DelayIndex(4, 0)
    for i, due in enumerate([50, 10, 40, 30, 20, 60]):
        index.add(log.schedule(pid(i), due))
    assert len(index) <= 4 and index.horizon is not None
    out = []
    now = 0
    while True:
        if index.needs_load(now, 5):
            index.finish_scan(*log.scan(index)[:2])
        nxt = index.next_expiration()
        if nxt is None and index.horizon is None:
            break
        now = nxt if nxt is not None else index.horizon[0]
        out += [p.due_ms for p in index.fire(now)]
    assert out == [10, 20, 30, 40, 50, 60]


def test_records_appended_during_a_scan_are_kept_once():
    log, index = FakeLog(), DelayIndex(100, 0)
    first = log.schedule(pid(1), 100)
    low, limit = index.begin_scan()
    collector = ScanCollector(low, limit, set())
    collector.schedule(first)
    late = log.schedule(pid(2), 50)  # after the scan's end offset
    index.add(late)
    index.remove(pid(3))  # a cancel of something the scan never saw is harmless
    index.finish_scan(*collector.result()[:2])
    assert sorted(p.due_ms for p in index.fire(1000)) == [50, 100]


def test_an_interrupted_intent_is_carried_and_not_collected():
    collector = ScanCollector((-(2**63), -1), 100, set())
    a, b, c = Pending(pid(1), 10, 0, T), Pending(pid(2), 11, 1, T), Pending(pid(3), 12, 2, T)
    for p in (a, b, c):
        collector.schedule(p)
    collector.intent(Intent(T, 7, 0, 0, ((a.id, 0),)))
    collector.tombstone(a.id)  # the first delivery finished
    collector.intent(Intent(T, 7, 0, 1, ((b.id, 1),)))  # the second was cut short
    collected, next_key, interrupted = collector.result()
    assert [p.id for p in collected] == [c.id] and next_key is None
    assert interrupted == [Intent(T, 7, 0, 1, ((b.id, 1),))]


def test_finished_ids_are_not_scheduled_again():
    index = DelayIndex(10, 0)
    index.begin_scan()
    index.finish_scan([], None)  # loaded: nothing on disk
    index.add(Pending(pid(1), 5, 0, T))
    assert [p.id for p in index.fire(5)] == [pid(1)]
    index.add(Pending(pid(1), 5, 9, T))  # a producer's late retry reaching the log again
    index.finish([pid(1)])
    index.add(Pending(pid(1), 5, 10, T))
    assert index.fire(100) == []
