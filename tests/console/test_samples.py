"""The console's sample store and sampling loop, on a fake clock (no broker, no waiting)."""

from __future__ import annotations

import threading

import anyio
import pytest

from kbroker.console.samples import (Point, SampleRound, SampleStore, lag_of, log_end_sum, run_sampler,
                                     sample_period)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def rounds(store: SampleStore, clock: Clock, readings: list[tuple[dict, dict]], step: float = 1.0) -> None:
    for lags, ends in readings:
        clock.now += step
        store.record(SampleRound(lags, ends))


def test_lag_points_are_kept_for_the_window_only():
    clock = Clock()
    store = SampleStore(1.0, window_s=10, clock=clock)
    rounds(store, clock, [({"g": lag}, {}) for lag in range(15)])
    points = store.lag("g")
    assert [p.value for p in points] == [float(v) for v in range(4, 15)]  # the last 10 s, both ends in
    assert points[0].t == clock.now - 10 and points[-1].t == clock.now
    assert store.lag("other") == []


def test_points_per_series_are_bounded():
    clock = Clock()
    store = SampleStore(1.0, window_s=1000, max_points=4, clock=clock)
    rounds(store, clock, [({"g": v}, {}) for v in range(10)])
    assert [p.value for p in store.lag("g")] == [6, 7, 8, 9]


def test_rate_from_successive_log_end_sums():
    clock = Clock()
    store = SampleStore(2.0, clock=clock)
    rounds(store, clock, [({}, {"t": 100})], step=2)
    assert store.rate("t") == []  # one sum: no rate yet
    rounds(store, clock, [({}, {"t": 120}), ({}, {"t": 120}), ({}, {"t": 130})], step=2)
    assert [p.value for p in store.rate("t")] == [10.0, 0.0, 5.0]
    assert [p.t for p in store.rate("t")] == [1004.0, 1006.0, 1008.0]


def test_a_negative_jump_starts_the_rate_again():
    """A topic deleted and created again (or one losing a partition): its sum goes down; no
    negative rate is charted, and the next rate counts from the new sum."""
    clock = Clock()
    store = SampleStore(1.0, clock=clock)
    rounds(store, clock, [({}, {"t": 500}), ({}, {"t": 510}), ({}, {"t": 3}), ({}, {"t": 7})])
    assert [p.value for p in store.rate("t")] == [10.0, 4.0]


def test_an_unknown_reading_records_no_point_and_the_next_rate_spans_the_gap():
    clock = Clock()
    store = SampleStore(1.0, clock=clock)
    rounds(store, clock, [({"g": 5}, {"t": 0}), ({"g": None}, {"t": None}), ({"g": 3}, {"t": 20})])
    assert [p.value for p in store.lag("g")] == [5.0, 3.0]
    assert store.rate("t") == [Point(1003.0, 10.0)]  # 20 messages over the 2 s since the last known sum


def test_a_series_not_seen_for_a_window_goes():
    clock = Clock()
    store = SampleStore(1.0, window_s=10, clock=clock)
    rounds(store, clock, [({"old": 1, "kept": 1}, {"t": 1})])
    rounds(store, clock, [({"kept": 2}, {})] * 11)
    assert store.groups() == ["kept"] and store.topics() == []


def test_groups_and_topics_are_bounded_dropping_the_one_seen_the_longest_ago():
    clock = Clock()
    store = SampleStore(1.0, max_groups=2, max_topics=2, clock=clock)
    rounds(store, clock, [({"a": 1, "b": 1}, {"x": 1, "y": 1}), ({"b": 2}, {"y": 2}), ({"c": 3}, {"z": 3})])
    assert store.groups() == ["b", "c"] and store.topics() == ["y", "z"]
    # a round larger than the bound keeps what it recorded first (by name), not the last ones
    rounds(store, clock, [({"d": 1, "e": 1, "f": 1}, {})])
    assert store.groups() == ["d", "e"]
    assert store.statistics()["groups"] == 2


def test_failed_round_is_remembered_until_one_succeeds():
    clock = Clock()
    store = SampleStore(1.0, clock=clock)
    store.failed("no broker answered")
    assert store.last_error == "no broker answered" and store.rounds == 0
    rounds(store, clock, [({"g": 1}, {})])
    assert store.last_error is None and store.rounds == 1


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        SampleStore(0)
    with pytest.raises(ValueError):
        SampleStore(1.0, max_groups=0)


def test_period_is_the_refresh_at_least_a_second():
    assert sample_period(0.5) == 1.0 and sample_period(5) == 5


def test_lag_and_sums():
    committed = {("t", 0): 5, ("t", 1): 2, ("gone", 0): 9}
    assert lag_of(committed, {("t", 0): 10, ("t", 1): 2, ("gone", 0): None}) == 5
    assert lag_of(committed, {}) is None
    assert log_end_sum([("t", 0), ("t", 1)], {("t", 0): 10, ("t", 1): 2}) == 12
    assert log_end_sum([("t", 0), ("t", 1)], {("t", 0): 10, ("t", 1): None}) is None
    assert log_end_sum([], {}) is None


def test_sampler_takes_a_round_every_period_survives_failures_and_stops_when_cancelled():
    clock = Clock()
    store = SampleStore(2.0, clock=clock)
    calls: list[float] = []
    sleeps: list[float] = []
    stops: list[threading.Event] = []

    def take(stop: threading.Event) -> SampleRound:
        stops.append(stop)
        calls.append(clock.now)
        clock.now += 0.5 if len(calls) != 2 else 5.0  # the second round is slow
        if len(calls) == 3:
            raise OSError("connection refused")
        return SampleRound({"g": len(calls)}, {})

    async def to_thread(fn, *args):
        return fn(*args)

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += seconds
        if len(sleeps) == 4:
            await anyio.sleep_forever()

    async def main() -> None:
        with anyio.move_on_after(0.5):
            await run_sampler(store, take, sleep=sleep, to_thread=to_thread)

    anyio.run(main)
    assert sleeps == [1.5, 1.0, 1.5, 1.5]  # the period less the round; half a period after a slow one
    assert [p.value for p in store.lag("g")] == [1.0, 2.0, 4.0]
    assert store.last_error is None and store.rounds == 3
    assert stops and stops[0].is_set()  # an abandoned round is told to stop


def test_sampler_records_a_failure_as_the_last_error():
    clock = Clock()
    store = SampleStore(1.0, clock=clock)

    def take(stop):
        raise OSError("no broker answered")

    async def sleep(seconds: float) -> None:
        await anyio.sleep_forever()

    async def main() -> None:
        with anyio.move_on_after(0.2):
            await run_sampler(store, take, sleep=sleep)  # the real worker thread

    anyio.run(main)
    assert store.last_error == "no broker answered"
