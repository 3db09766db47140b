"""Progress of loading the partition logs at start-up: partitions loaded / total, and time left.

After a crash every unflushed segment is recovered batch by batch, which takes minutes for a broker
with thousands of partitions; an operator watching the log must see it move, as Kafka's
"n/m completed in <dir>" lines show. `LoadProgress` is told of each loaded partition and reports a
line at most once per `interval_s` (and always for the last one), estimating the time left from the
pace so far. The clock is injected so tests drive it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["LoadProgress", "format_duration"]


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


class LoadProgress:
    def __init__(self, total: int, report: Callable[[str], None], *, interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.recovered = 0  # partitions whose segments were checked batch by batch
        self._report = report
        self._interval = interval_s
        self._clock = clock
        self._started = clock()
        self._last_report = self._started

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def loaded(self, where: str, recovered: bool) -> None:
        """One more partition log loaded (from log dir `where`); `recovered` when it needed recovery."""
        self.done += 1
        self.recovered += recovered
        now = self._clock()
        if self.done < self.total and now - self._last_report < self._interval:
            return
        self._last_report = now
        elapsed = now - self._started
        line = f"loaded {self.done}/{self.total} partition logs ({self.recovered} recovered) in {where}, " \
               f"{format_duration(elapsed)}"
        if self.done < self.total:
            left = elapsed / self.done * (self.total - self.done)
            line += f", about {format_duration(left)} left"
        self._report(line)
