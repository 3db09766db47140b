"""Kafka's quota statistics, as its metrics library computes them: `SampledRate` (Rate over a
WindowedSum, `org.apache.kafka.common.metrics.stats.Rate`/`SampledStat`) and `TokenBucket`
(`stats.TokenBucket`, KIP-599), each with the bound a `Quota` puts on it and the throttle time
Kafka derives from a violation (`QuotaUtils.throttleTime`, `ControllerMutationQuotaManager.throttleTimeMs`).

Pure and synchronous: every call takes the time in milliseconds, so the arithmetic is tested on a
fake clock (tests/quota/).
"""

from __future__ import annotations

import math

__all__ = ["SampledRate", "TokenBucket", "java_round"]


def java_round(x: float) -> int:
    """Java's Math.round(double): the closest long, ties toward positive infinity."""
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return 2**63 - 1 if x > 0 else -(2**63)
    return math.floor(x + 0.5)


class _Sample:
    __slots__ = ("start_ms", "last_event_ms", "value", "events")

    def __init__(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0


class SampledRate:
    """The sum of what was recorded over `samples` windows of `window_ms`, per second.

    Kafka's rules, kept exactly: a value goes into the current sample, a new one starts when the
    current one is `window_ms` old (one extra slot is kept for the sample overlapping the monitored
    window); a sample with no event for `samples * window_ms` is reset; the rate divides the sum by
    the time since the oldest sample started, counted as at least `samples - 1` whole windows
    (so a client's first second is not measured as a burst) and at least 1 ms.
    """

    __slots__ = ("samples", "window_ms", "_samples", "_current")

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:  # SampledStat.Sample.isComplete (no event window)
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def total(self, now_ms: int) -> float:
        """WindowedSum.measure: the sum over the samples still in the window."""
        self._purge(now_ms)
        return sum(s.value for s in self._samples)

    def window_size_ms(self, now_ms: int) -> int:
        """Rate.windowSize: the time the rate divides by."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        oldest = min(s.start_ms for s in self._samples)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Rate.measure: per second."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """QuotaUtils.throttleTime: how long until the rate is back at `bound` if nothing more is
        recorded, (O - T) / T * W over the precise window the rate used; 0 within the bound."""
        value = self.measure(now_ms)
        if value <= bound:
            return 0
        return java_round((value - bound) / bound * self.window_size_ms(now_ms))


class TokenBucket:
    """KIP-599's token bucket: refilled at `rate` tokens per second, holding at most
    `samples * window_s * rate`; exhausted below zero. Starts full (Kafka's starts at zero tokens
    at time 0, which a wall clock makes full)."""

    __slots__ = ("samples", "window_ms", "tokens", "_last_ms")

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.tokens = 0.0
        self._last_ms: int | None = None

    def _burst(self, rate: float) -> float:
        return self.samples * (self.window_ms / 1000) * rate

    def _refill(self, rate: float, now_ms: int) -> None:
        burst = self._burst(rate)
        if self._last_ms is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + rate * (now_ms - self._last_ms) / 1000)
        self._last_ms = now_ms

    def measure(self, rate: float, now_ms: int) -> float:
        self._refill(rate, now_ms)
        return self.tokens

    def record(self, value: float, rate: float, now_ms: int) -> None:
        self._refill(rate, now_ms)
        self.tokens = min(self._burst(rate), self.tokens - value)

    @staticmethod
    def throttle_ms(tokens: float, rate: float) -> int:
        """ControllerMutationQuotaManager.throttleTimeMs: the time to refill a negative bucket to zero."""
        return java_round(-tokens / rate * 1000) if tokens < 0 else 0
