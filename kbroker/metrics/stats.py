"""The counters the request path bumps, owned by the broker (`Broker.stats`, None when
`metrics.listener` is unset, so the hot path then pays one attribute test).

Per request and per partition the work is plain integer and float additions on objects found by
one dict lookup: no locks, no label resolution, no prometheus_client call. The collector turns
them into Kafka-named metric families when a scrape asks (collector.py).
"""

from __future__ import annotations

from bisect import bisect_left

# upper bounds (ms) of the request latency histogram's buckets; the last bucket is +Inf
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
                                         30000)


class TopicStats:
    """Kafka's BrokerTopicMetrics of one topic: what clients produced and were sent (replication
    excluded, as in Kafka)."""

    __slots__ = ("bytes_in", "messages_in", "bytes_out")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0


class RequestStats:
    """Kafka's RequestMetrics of one API: requests per version and the TotalTimeMs histogram."""

    __slots__ = ("per_version", "buckets", "sum_ms")

    def __init__(self) -> None:
        self.per_version: dict[int, int] = {}
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)  # not cumulative; the last is +Inf
        self.sum_ms = 0.0

    @property
    def count(self) -> int:
        return sum(self.buckets)

    def cumulative_buckets(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), the last bound +Inf: a Prometheus histogram."""
        total, out = 0, []
        for bound, n in zip((*LATENCY_BUCKETS_MS, float("inf")), self.buckets):
            total += n
            out.append((bound, total))
        return out


class BrokerStats:
    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.requests: dict[str, RequestStats] = {}

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def record_produce(self, topic: str, nbytes: int, messages: int) -> None:
        stats = self.topics.get(topic) or self.topic(topic)
        stats.bytes_in += nbytes
        stats.messages_in += messages

    def record_fetch(self, topic: str, nbytes: int) -> None:
        stats = self.topics.get(topic) or self.topic(topic)
        stats.bytes_out += nbytes

    def record_request(self, name: str, version: int, seconds: float) -> None:
        stats = self.requests.get(name)
        if stats is None:
            stats = self.requests[name] = RequestStats()
        stats.per_version[version] = stats.per_version.get(version, 0) + 1
        ms = seconds * 1000.0
        stats.buckets[bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        stats.sum_ms += ms

    def forget_topic(self, name: str) -> None:
        """A deleted topic's series end with it (Kafka removes its BrokerTopicMetrics too)."""
        self.topics.pop(name, None)
