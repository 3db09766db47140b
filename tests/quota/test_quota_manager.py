"""The client quota managers on a fake clock: stored configs to bounds, shared sensors, Kafka's
throttle times for byte rates, request time (bounded by a window) and controller mutations
(strict and permissive), the fetch window cap, and sensors expiring."""

import pytest

from kbroker.quota.entities import QuotaEntity
from kbroker.quota.manager import UNBOUNDED_MUTATIONS, ClientQuotas


class Clock:
    def __init__(self, t=1_000_000):
        self.t = t

    def __call__(self):
        return self.t


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def quotas(clock):
    return ClientQuotas(clock=clock)


def test_nothing_configured_is_inactive(quotas):
    assert not quotas.active
    assert all(not m.enabled for m in quotas.managers())
    quotas.apply({"users/alice": {"SCRAM-SHA-512": "salt=..,stored_key=..", "producer_byte_rate": "0"}})
    assert not quotas.active  # a credential and an invalid quota are not quotas


def test_stored_configs_become_bounds(quotas):
    quotas.apply({"users/alice": {"producer_byte_rate": "1000", "SCRAM-SHA-256": "x"},
                  "clients/<default>": {"consumer_byte_rate": "2000", "request_percentage": "25.0"},
                  "users/alice/clients/app": {"controller_mutation_rate": "3.0"},
                  "topics/x": {"producer_byte_rate": "1"}})
    assert quotas.active
    assert quotas.produce.quotas == {QuotaEntity("alice", None): 1000.0}
    assert quotas.fetch.quotas == {QuotaEntity(None, "<default>"): 2000.0}
    assert quotas.request.quotas == {QuotaEntity(None, "<default>"): 25.0}
    assert quotas.controller_mutation.quotas == {QuotaEntity("alice", "app"): 3.0}
    assert quotas.produce.quota("alice", "any") == 1000.0
    assert quotas.produce.quota("bob", "any") is None
    assert quotas.fetch.quota("bob", "any") == 2000.0
    quotas.apply({})
    assert not quotas.active


def test_produce_throttle_is_kafkas_and_a_user_quota_is_shared_by_its_client_ids(quotas, clock):
    quotas.apply({"users/alice": {"producer_byte_rate": "1000"}})
    assert quotas.produce.record_and_throttle("alice", "a", 10_000) == 0  # 1000/s over the 10 s floor
    assert quotas.produce.record_and_throttle("alice", "b", 5_000) == 5_000  # (1500-1000)/1000 * 10 s
    assert quotas.produce.record_and_throttle("bob", "a", 10**9) == 0  # no quota for bob
    assert quotas.produce.sensor("alice", "a") is quotas.produce.sensor("alice", "b")


def test_a_changed_bound_applies_to_the_rate_already_measured(quotas, clock):
    quotas.apply({"clients/app": {"producer_byte_rate": "1000"}})
    assert quotas.produce.record_and_throttle("u", "app", 10_000) == 0
    quotas.apply({"clients/app": {"producer_byte_rate": "500"}})
    assert quotas.produce.record_and_throttle("u", "app", 0) == 10_000  # (1000-500)/500 * 10 s
    quotas.apply({"clients/<default>": {"producer_byte_rate": "500"}})  # now the default applies to app
    assert quotas.produce.quota("u", "app") == 500.0


def test_request_time_is_a_percentage_and_its_throttle_at_most_one_window(quotas, clock):
    quotas.apply({"users/alice": {"request_percentage": "10"}})
    # 1 s of handler time = 100 (%·s) over the 10 s floor = 10 %: at the bound
    assert quotas.request.record_time_and_throttle("alice", "c", 1e9) == 0
    assert quotas.request.record_time_and_throttle("alice", "c", 1e9) == 1000  # capped: 10 s -> 1 window


def test_a_fetch_takes_at_most_the_quota_window_and_a_throttled_one_is_taken_back(quotas, clock):
    quotas.apply({"clients/c": {"consumer_byte_rate": "1000"}})
    assert quotas.fetch.max_value_in_window("u", "c") == 10_000  # bound x (samples - 1) x window
    assert quotas.fetch.max_value_in_window("u", "other") == float("inf")
    assert quotas.fetch.record_and_throttle("u", "c", 10_000) == 0
    assert quotas.fetch.record_and_throttle("u", "c", 4_000) == 4_000
    quotas.fetch.unrecord("u", "c", 4_000)
    assert quotas.fetch.record_and_throttle("u", "c", 0) == 0


def test_strict_mutations_refuse_once_exhausted_and_permissive_ones_throttle(quotas, clock):
    assert quotas.controller_mutation.quota_for("u", "c", strict=True) is UNBOUNDED_MUTATIONS
    quotas.apply({"clients/c": {"controller_mutation_rate": "2"}})
    strict = quotas.controller_mutation.quota_for("u", "c", strict=True)
    assert not strict.exceeded()
    strict.record(30)  # burst 22 (11 windows x 2/s): 30 is accepted while the bucket is not below 0
    assert strict.exceeded()
    assert strict.throttle_ms() == 4000  # -(-8) / 2 per second
    clock.t += 1000
    assert strict.throttle_ms() == 3000  # the time since deducted
    clock.t += 3000
    assert not quotas.controller_mutation.quota_for("u", "c", strict=True).exceeded()

    quotas.apply({"clients/d": {"controller_mutation_rate": "2"}})
    permissive = quotas.controller_mutation.quota_for("u", "d", strict=False)
    permissive.record(20)
    assert permissive.throttle_ms() == 0 and not permissive.exceeded()
    permissive.record(10)  # accepted, throttled for the 8 tokens below zero
    assert not permissive.exceeded()
    assert permissive.throttle_ms() == 4000


def test_idle_sensors_expire_after_an_hour(quotas, clock):
    quotas.apply({"clients/<default>": {"producer_byte_rate": "1000"}})
    quotas.produce.record_and_throttle("u", "a", 1)
    clock.t += 1800_000
    quotas.produce.record_and_throttle("u", "b", 1)
    clock.t += 1800_000
    assert quotas.expire() == 1  # a's, idle for an hour; b's stays
    assert set(quotas.produce._sensors) == {("", "b")}
