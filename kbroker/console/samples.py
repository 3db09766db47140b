"""What the console samples for its charts: each group's total lag and each topic's messages/s over
the last minutes.

`SampleStore` is pure (no web stack, no sockets, an injected clock): a round of samples — every
group's lag, every topic's log-end offsets summed — goes in with `record`, and each series keeps
the last `window_s` seconds (at most `max_points` points), for at most `max_groups` groups and
`max_topics` topics: a new series past the bound drops the one seen the longest ago, and a series
not seen for a whole window goes. A topic's messages/s is derived from two successive log-end sums;
a sum that went down (the topic was deleted and created again, or lost a partition) starts the
rate again from the new sum instead of charting a negative rate.

`run_sampler` is the loop the web application runs in its lifespan: one round every period, taken
in a worker thread by the function it is handed (the backend's, which asks the brokers: one
ListGroups and OffsetFetch round, one ListOffsets round), never two rounds at once, until it is
cancelled.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, Iterable, Mapping, NamedTuple

import anyio
import anyio.to_thread

WINDOW_S = 600.0
MAX_SERIES = 200  # groups, and topics, sampled and kept
MAX_POINTS = 600  # per series: a point a second over the default window
MIN_PERIOD_S = 1.0

__all__ = ["MAX_POINTS", "MAX_SERIES", "MIN_PERIOD_S", "WINDOW_S", "Point", "SampleRound", "SampleStore",
           "lag_of", "log_end_sum", "run_sampler", "sample_period"]


class Point(NamedTuple):
    t: float  # the store's clock (monotonic seconds)
    value: float


class SampleRound(NamedTuple):
    """One round's readings; None: not known this round (no point is recorded)."""

    group_lag: Mapping[str, int | None]
    topic_log_end: Mapping[str, int | None]  # the topic's log-end offsets, summed over its partitions


def sample_period(refresh_s: float) -> float:
    """The sampling period: the pages' refresh, at least MIN_PERIOD_S."""
    return max(MIN_PERIOD_S, refresh_s)


class _Series:
    __slots__ = ("points", "last_seen", "base")

    def __init__(self, max_points: int, now: float) -> None:
        self.points: deque[Point] = deque(maxlen=max_points)
        self.last_seen = now
        self.base: Point | None = None  # topics: the last log-end sum, the start of the next rate


class _Bounded:
    """Series by name, at most `limit`: a new one past the bound drops the one seen the longest ago
    (never one seen at `now`, so a round larger than the bound keeps what it recorded first)."""

    def __init__(self, limit: int, max_points: int) -> None:
        self.limit, self.max_points = limit, max_points
        self.series: dict[str, _Series] = {}

    def touch(self, name: str, now: float) -> _Series | None:
        s = self.series.get(name)
        if s is None:
            if len(self.series) >= self.limit:
                oldest = min(self.series, key=lambda k: self.series[k].last_seen)
                if self.series[oldest].last_seen >= now:
                    return None
                del self.series[oldest]
            s = self.series[name] = _Series(self.max_points, now)
        s.last_seen = now
        return s

    def prune(self, horizon: float) -> None:
        for name in [k for k, s in self.series.items() if s.last_seen < horizon]:
            del self.series[name]
        for s in self.series.values():
            while s.points and s.points[0].t < horizon:
                s.points.popleft()

    def points(self, name: str) -> list[Point]:
        s = self.series.get(name)
        return list(s.points) if s is not None else []


class SampleStore:
    """Lag per group and messages/s per topic over the last `window_s` seconds. Thread-safe: the
    sampler records from its worker thread while pages read."""

    def __init__(self, period_s: float, window_s: float = WINDOW_S, max_groups: int = MAX_SERIES,
                 max_topics: int = MAX_SERIES, max_points: int = MAX_POINTS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if period_s <= 0 or window_s <= 0 or max_groups < 1 or max_topics < 1 or max_points < 2:
            raise ValueError("a sample store needs a positive period and window, a series and two points")
        self.period_s, self.window_s, self.clock = period_s, window_s, clock
        self._lags = _Bounded(max_groups, max_points)
        self._rates = _Bounded(max_topics, max_points)
        self._lock = threading.Lock()
        self.rounds = 0
        self.last_round: float | None = None
        self.last_error: str | None = None  # why the last round failed; None after one that did not

    def record(self, sample: SampleRound, at: float | None = None) -> None:
        now = self.clock() if at is None else at
        with self._lock:
            for group, lag in sorted(sample.group_lag.items()):
                s = self._lags.touch(group, now)
                if s is not None and lag is not None:
                    s.points.append(Point(now, float(lag)))
            for topic, total in sorted(sample.topic_log_end.items()):
                s = self._rates.touch(topic, now)
                if s is None or total is None:
                    continue
                base, s.base = s.base, Point(now, float(total))
                if base is not None and now > base.t and total >= base.value:
                    s.points.append(Point(now, (total - base.value) / (now - base.t)))
            horizon = now - self.window_s
            self._lags.prune(horizon)
            self._rates.prune(horizon)
            self.rounds += 1
            self.last_round, self.last_error = now, None

    def failed(self, error: str) -> None:
        """A round that could not be taken: no points (the charts show a gap), and why."""
        with self._lock:
            self.last_error = error

    def lag(self, group: str) -> list[Point]:
        with self._lock:
            return self._lags.points(group)

    def rate(self, topic: str) -> list[Point]:
        """Messages/s: each point the rate since the round before."""
        with self._lock:
            return self._rates.points(topic)

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._lags.series)

    def topics(self) -> list[str]:
        with self._lock:
            return sorted(self._rates.series)

    def statistics(self) -> dict[str, object]:
        """A snapshot for debugging."""
        with self._lock:
            return {"rounds": self.rounds, "groups": len(self._lags.series), "topics": len(self._rates.series),
                    "points": sum(len(s.points) for b in (self._lags, self._rates) for s in b.series.values()),
                    "last_error": self.last_error}


async def run_sampler(store: SampleStore, take: Callable[[threading.Event], SampleRound],
                      sleep: Callable[[float], object] | None = None,
                      to_thread: Callable[..., object] | None = None) -> None:
    """Take a round every `store.period_s` seconds, in a worker thread, until cancelled. `take(stop)`
    asks the brokers; `stop` is set when the sampler is cancelled, so an abandoned round ends early
    instead of asking on after the console stopped. A round that overruns the period is followed
    by half a period of rest, so a slow cluster is sampled less often, never harder."""
    sleep = sleep or anyio.sleep
    to_thread = to_thread or (lambda fn, *args: anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True))
    stop = threading.Event()
    try:
        while True:
            started = store.clock()
            try:
                sample = await to_thread(take, stop)  # type: ignore[misc]
            except Exception as exc:  # noqa: BLE001 - a broker away is a gap in the charts, not the end
                store.failed(str(exc) or type(exc).__name__)
            else:
                store.record(sample)
            elapsed = store.clock() - started
            await sleep(max(store.period_s - elapsed, store.period_s / 2))  # type: ignore[misc]
    finally:
        stop.set()


def lag_of(committed: Mapping[tuple[str, int], int], log_end: Mapping[tuple[str, int], int | None]) -> int | None:
    """A group's total lag: log end - committed, summed over its committed partitions whose log end
    is known (as the group page's total); None when none is."""
    lags = [end - offset for tp, offset in committed.items() if (end := log_end.get(tp)) is not None]
    return sum(lags) if lags else None


def log_end_sum(partitions: Iterable[tuple[str, int]], log_end: Mapping[tuple[str, int], int | None]) -> int | None:
    """A topic's log-end offsets summed; None when one of them is not known."""
    ends = [log_end.get(tp) for tp in partitions]
    return None if not ends or None in ends else sum(ends)  # type: ignore[arg-type]
