"""The replication throttle's arithmetic (Kafka's ReplicationQuotaManager over a SimpleRate of 11
one-second samples) with a fake clock, and how configs select the throttled partitions."""

import pytest

from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.quota import (
    ALL_REPLICAS,
    UNBOUNDED,
    ReplicationQuotaManager,
    ReplicationQuotas,
    SampledRate,
    throttled_partitions,
    throttled_rate,
)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock():
    return Clock()


def test_the_first_window_counts_whole_then_the_rate_spreads_over_the_elapsed_time(clock):
    rate = SampledRate()
    rate.record(1000, clock.ms)
    assert rate.measure(clock.ms) == 1000  # not 1000 bytes in 0 ms
    clock.ms += 500
    assert rate.measure(clock.ms) == 1000
    clock.ms += 1500
    assert rate.measure(clock.ms) == 500  # 1000 bytes over 2 s
    rate.record(3000, clock.ms)
    assert rate.measure(clock.ms) == 2000  # 4000 bytes over 2 s
    clock.ms += 2000
    assert rate.measure(clock.ms) == 1000


def test_samples_idle_for_every_window_expire(clock):
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(5000, clock.ms)
    clock.ms += 10_999
    assert rate.measure(clock.ms) == pytest.approx(5000 / 10.999)
    clock.ms += 1
    assert rate.measure(clock.ms) == 0


def test_old_samples_are_recycled_so_the_rate_follows_recent_traffic(clock):
    rate = SampledRate(samples=11, window_ms=1000)
    for _ in range(30):  # 10 kB/s for 30 s, then 1 kB/s for 30 s
        rate.record(10_000, clock.ms)
        clock.ms += 1000
    assert rate.measure(clock.ms) == pytest.approx(10_000, rel=0.1)
    for _ in range(30):
        rate.record(1000, clock.ms)
        clock.ms += 1000
    assert rate.measure(clock.ms) == pytest.approx(1000, rel=0.1)


def test_unbounded_is_never_exceeded(clock):
    quota = ReplicationQuotaManager(clock)
    quota.record(10**12)
    assert quota.bound == UNBOUNDED and not quota.is_quota_exceeded() and quota.throttle_time_ms() == 0


def test_exceeded_above_the_bound_until_the_time_it_says(clock):
    quota = ReplicationQuotaManager(clock)
    quota.update_quota(1000)
    assert not quota.is_quota_exceeded()
    quota.record(1000)
    assert not quota.is_quota_exceeded()  # at the bound is within it
    quota.record(500)
    assert quota.is_quota_exceeded()
    wait = quota.throttle_time_ms()
    assert wait == 1500  # 1500 bytes need 1.5 s at 1000 B/s
    clock.ms += wait - 2
    assert quota.is_quota_exceeded()
    clock.ms += 2
    assert not quota.is_quota_exceeded()


def test_a_zero_rate_lets_nothing_more_through_until_the_samples_expire(clock):
    quota = ReplicationQuotaManager(clock)
    quota.update_quota(0)
    assert not quota.is_quota_exceeded()
    quota.record(1)
    assert quota.is_quota_exceeded() and quota.throttle_time_ms() == 11_000
    clock.ms += 11_000
    assert not quota.is_quota_exceeded()


@pytest.mark.parametrize("rate, chunk", [(1_000_000, 1_048_576), (5_000_000, 1_048_576), (100_000, 16_384)])
def test_a_fetcher_obeying_the_quota_moves_data_at_the_rate(clock, rate, chunk):
    """A follower fetching a chunk whenever the quota allows and waiting `throttle_time_ms` when it
    does not: over a minute the bytes moved are the rate, give or take one chunk."""
    quota = ReplicationQuotaManager(clock)
    quota.update_quota(rate)
    moved, start = 0, clock.ms
    while clock.ms - start < 60_000:
        if quota.is_quota_exceeded():
            clock.ms += max(quota.throttle_time_ms(), 10)
        else:
            quota.record(chunk)
            moved += chunk
    assert moved == pytest.approx(rate * 60, abs=2 * chunk + rate * 60 * 0.02)


def test_throttled_partitions_are_the_ones_listed_for_this_broker():
    assert throttled_partitions("0:101,1:102,2:101", 101) == {0, 2}
    assert throttled_partitions(" 0:101 , 3:101", 101) == {0, 3}
    assert throttled_partitions("0:102", 101) == frozenset()
    assert throttled_partitions("*", 7) == ALL_REPLICAS


def test_is_throttled_follows_the_topic_configs(clock):
    quotas = ReplicationQuotas(101, clock)
    quotas.update_topic("t", {"leader.replication.throttled.replicas": "0:101,1:102",
                              "follower.replication.throttled.replicas": "*"})
    assert quotas.leader.is_throttled(TopicPartition("t", 0))
    assert not quotas.leader.is_throttled(TopicPartition("t", 1))
    assert quotas.follower.is_throttled(TopicPartition("t", 5))
    assert not quotas.follower.is_throttled(TopicPartition("other", 0))
    quotas.update_topic("t", {"leader.replication.throttled.replicas": "", "retention.ms": "5"})
    assert not quotas.leader.is_throttled(TopicPartition("t", 0)) and quotas.leader.throttled_topics == 0
    assert not quotas.follower.is_throttled(TopicPartition("t", 5))
    quotas.update_topic("t", {"follower.replication.throttled.replicas": "*"})
    quotas.update_topic("t", None)  # deleted
    assert not quotas.follower.is_throttled(TopicPartition("t", 5))


def test_the_rate_is_the_brokers_own_then_the_cluster_default_then_none(clock):
    key = "leader.replication.throttled.rate"
    assert throttled_rate(key, {key: "5"}, {key: "9"}) == 5
    assert throttled_rate(key, {}, {key: "9"}) == 9
    assert throttled_rate(key, {}, {}) == UNBOUNDED
    quotas = ReplicationQuotas(1, clock)
    quotas.update_rates({"follower.replication.throttled.rate": "100"}, {key: "200"})
    assert (quotas.leader.bound, quotas.follower.bound) == (200, 100)
    quotas.update_rates({}, {})
    assert (quotas.leader.bound, quotas.follower.bound) == (UNBOUNDED, UNBOUNDED)
