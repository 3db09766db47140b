"""Replication throttles: Kafka's ReplicationQuotaManager — a byte rate, its bound, and the
partitions it applies to.

The rate is Kafka's SimpleRate over a SampledStat: `replication.quota.window.num` (11) samples of
`replication.quota.window.size.seconds` (1 s) each (Kafka's defaults, fixed here); bytes recorded go into the current sample, a
sample idle for all the windows is reset, and the rate is the sum of the samples divided by the
time since the oldest one started (at least one window). The quota is exceeded when that rate is
above the bound (`leader.replication.throttled.rate` / `follower.replication.throttled.rate`, a
dynamic broker config; unset means no bound). Which partitions are throttled comes from the topic
configs `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
("partition:broker,..." or "*"), each broker keeping the partitions listed with its own id.

Pure and synchronous with an injected clock (milliseconds), so the arithmetic is tested with a
fake clock; the leader applies its quota in `ReplicaManager`, the follower in the fetcher.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from kbroker.log.topic_partition import TopicPartition

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNBOUNDED = 2**63 - 1  # Kafka's QUOTA_BYTES_PER_SECOND_DEFAULT (Long.MAX_VALUE)
SAMPLES = 11  # replication.quota.window.num: 10 whole windows and the current one
WINDOW_MS = 1000  # replication.quota.window.size.seconds
ALL_REPLICAS = "*"


@dataclass
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


class SampledRate:
    """Kafka's SimpleRate: bytes per second over the retained samples."""

    def __init__(self, samples: int = SAMPLES, window_ms: int = WINDOW_MS) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Bytes per second; the first window counts as a whole one (no spike from a tiny elapsed time)."""
        total, elapsed_ms = self.total_and_elapsed(now_ms)
        return total * 1000.0 / max(elapsed_ms, self.window_ms)

    def total_and_elapsed(self, now_ms: int) -> tuple[float, int]:
        """The bytes retained and the time since the oldest retained sample started."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return sum(s.value for s in self._samples), now_ms - oldest

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # one more slot than `samples`: the sample overlapping the start of the monitored window
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_ms:
                sample.reset(now_ms)


class ReplicationQuotaManager:
    """One direction's throttle (Kafka's leader or follower ReplicationQuotaManager)."""

    def __init__(self, now_ms: Callable[[], int], samples: int = SAMPLES, window_ms: int = WINDOW_MS) -> None:
        self.now_ms = now_ms
        self.bound = UNBOUNDED
        self._rate = SampledRate(samples, window_ms)
        self._throttled: dict[str, frozenset[int] | str] = {}  # topic -> partitions, or ALL_REPLICAS

    def update_quota(self, bound: int) -> None:
        self.bound = bound

    def mark_throttled(self, topic: str, partitions: frozenset[int] | str) -> None:
        self._throttled[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    def is_throttled(self, tp: TopicPartition) -> bool:
        partitions = self._throttled.get(tp.topic)
        if partitions is None:
            return False
        return partitions == ALL_REPLICAS or tp.partition in partitions

    def record(self, size: int) -> None:
        """Count bytes moved for a throttled partition (whether or not the quota is exceeded)."""
        if size > 0:
            self._rate.record(size, self.now_ms())

    def is_quota_exceeded(self) -> bool:
        if self.bound >= UNBOUNDED:
            return False
        return self._rate.measure(self.now_ms()) > self.bound

    def rate(self) -> float:
        return self._rate.measure(self.now_ms())

    def throttle_time_ms(self) -> int:
        """How long until the rate is back within the bound if nothing more is recorded (Kafka's
        QuotaUtils.throttleTime, with the first window counted whole as the rate counts it); 0 when
        it is within."""
        if not self.is_quota_exceeded():
            return 0
        if self.bound <= 0:  # nothing is allowed until every sample has expired
            return self._rate.samples * self._rate.window_ms
        total, elapsed_ms = self._rate.total_and_elapsed(self.now_ms())
        return max(math.ceil(total * 1000 / self.bound) - elapsed_ms, 1)

    @property
    def throttled_topics(self) -> int:
        return len(self._throttled)


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | str:
    """The partitions a "partition:broker,..." list names for `broker_id` (Kafka's
    parseThrottledPartitions); '*' is every partition."""
    value = value.strip()
    if value == ALL_REPLICAS:
        return ALL_REPLICAS
    out = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if broker and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def throttled_rate(key: str, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> int:
    """This broker's bound: its own dynamic value, else the cluster-wide dynamic default, else none
    (Kafka's BrokerConfigHandler)."""
    for source in (per_broker, cluster_default):
        if source.get(key) not in (None, ""):
            return int(source[key])
    return UNBOUNDED


class ReplicationQuotas:
    """The leader and follower throttles of one broker, fed by its dynamic configs."""

    def __init__(self, broker_id: int, now_ms: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuotaManager(now_ms)
        self.follower = ReplicationQuotaManager(now_ms)

    def update_rates(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> None:
        self.leader.update_quota(throttled_rate(LEADER_RATE, per_broker, cluster_default))
        self.follower.update_quota(throttled_rate(FOLLOWER_RATE, per_broker, cluster_default))

    def update_topic(self, topic: str, configs: Mapping[str, str] | None) -> None:
        """A topic's configs changed (None: it is gone): Kafka's TopicConfigHandler.updateThrottledList."""
        for key, quota in ((LEADER_REPLICAS, self.leader), (FOLLOWER_REPLICAS, self.follower)):
            value = (configs or {}).get(key, "")
            if value.strip():
                quota.mark_throttled(topic, throttled_partitions(value, self.broker_id))
            else:
                quota.remove_throttle(topic)
