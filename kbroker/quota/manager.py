"""Kafka's client quota managers: produce and fetch byte rates (ClientQuotaManager), request time
(ClientRequestQuotaManager) and controller mutations (ControllerMutationQuotaManager), and
`ClientQuotas`, the four of them fed from the stored quota configs.

Each manager keeps Kafka's "overridden quotas" (entity -> bound, for its one key) and a sensor per
set of metric tags (entities.metric_tags: who shares a rate); a request's (user, client id) is
resolved to its sensor once and cached until the quotas change, so an enforced request costs a dict
lookup, a few additions and a comparison. `enabled` is False while no entity has a quota of the
manager's type: the dispatch then records nothing at all (Kafka's `quotasEnabled`).

Pure and synchronous, with an injected millisecond clock.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Mapping

from kbroker.quota.entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    enabled_levels,
    metric_tags,
    parse_entity_path,
    parse_quota_value,
    quota_limit,
)
from kbroker.quota.stats import SampledRate, TokenBucket
from kbroker.zookeeper.znodes import sanitize

__all__ = ["ClientQuotaManager", "RequestQuotaManager", "ControllerMutationQuotaManager", "MutationQuota",
           "UNBOUNDED_MUTATIONS", "ClientQuotas", "monotonic_ms", "INACTIVE_SENSOR_EXPIRATION_MS"]

logger = logging.getLogger(__name__)

INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000  # ClientQuotaManager.InactiveSensorExpirationTimeSeconds
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9  # ClientRequestQuotaManager.NanosToPercentagePerSecond


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Sensor:
    """One shared rate and its bound (None: no bound) — a Kafka quota Sensor."""

    __slots__ = ("tags", "rate", "bound", "last_record_ms")

    def __init__(self, tags: tuple[str, str], rate, bound: float | None, now_ms: int) -> None:
        self.tags = tags
        self.rate = rate
        self.bound = bound
        self.last_record_ms = now_ms


class ClientQuotaManager:
    """A byte-rate quota (produce: `producer_byte_rate`, fetch: `consumer_byte_rate`)."""

    def __init__(self, key: str, samples: int = 11, window_s: int = 1,
                 clock: Callable[[], int] = monotonic_ms) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000
        self.clock = clock
        self.quotas: dict[QuotaEntity, float] = {}
        self.levels = 0
        self._sensors: dict[tuple[str, str], Sensor] = {}
        self._resolved: dict[tuple[str, str], Sensor] = {}  # (principal name, client id) -> its sensor

    @property
    def enabled(self) -> bool:
        return bool(self.quotas)

    def _new_stat(self):
        return SampledRate(self.samples, self.window_ms)

    def update(self, quotas: Mapping[QuotaEntity, float]) -> None:
        """Replace the quotas of this type; sensors already made keep their samples and take their
        new bound (Kafka's updateQuotaMetricConfigs)."""
        if dict(quotas) == self.quotas:
            return
        self.quotas = dict(quotas)
        self.levels = enabled_levels(self.quotas)
        self._resolved.clear()
        for tags, sensor in self._sensors.items():
            bound = quota_limit(self.quotas, tags)
            if bound != sensor.bound:
                logger.info("%s quota of %s changes from %s to %s", self.key, _describe_tags(tags), sensor.bound, bound)
                sensor.bound = bound

    def sensor(self, user: str, client_id: str) -> Sensor:
        """The sensor of a request's principal name and client id (made on first use)."""
        key = (user, client_id)
        sensor = self._resolved.get(key)
        if sensor is None:
            tags = metric_tags(self.levels, self.quotas, sanitize(user), sanitize(client_id))
            sensor = self._sensors.get(tags)
            if sensor is None:
                sensor = self._sensors[tags] = Sensor(tags, self._new_stat(), quota_limit(self.quotas, tags),
                                                      self.clock())
            self._resolved[key] = sensor
        return sensor

    def quota(self, user: str, client_id: str) -> float | None:
        """The bound that applies to this principal name and client id (None: unbounded)."""
        return quota_limit(self.quotas, metric_tags(self.levels, self.quotas, sanitize(user), sanitize(client_id)))

    def record_and_throttle(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        """recordAndGetThrottleTimeMs: record `value`, then the time (ms) the client must wait for
        the rate to come back to its bound; 0 within it."""
        sensor = self.sensor(user, client_id)
        if sensor.bound is None:  # no quota applies: nothing to measure (Kafka records it for its metrics)
            return 0
        now = self.clock() if now_ms is None else now_ms
        sensor.last_record_ms = now
        sensor.rate.record(value, now)
        return self._throttle(sensor, now)

    def _throttle(self, sensor: Sensor, now: int) -> int:
        return min(sensor.rate.throttle_ms(sensor.bound, now), 2**31 - 1)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """unrecordQuotaSensor: take back what a throttled fetch did not send."""
        sensor = self.sensor(user, client_id)
        if sensor.bound is not None:
            sensor.rate.record(-value, self.clock() if now_ms is None else now_ms)

    def bounded(self, user: str, client_id: str) -> bool:
        """Whether a quota of this type applies to this principal name and client id."""
        return self.sensor(user, client_id).bound is not None

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """getMaxValueInQuotaWindow: the most one request can take without being sure to be
        throttled, bound * (samples - 1) * window (a fetch's max_bytes is capped to it)."""
        bound = self.sensor(user, client_id).bound
        if bound is None:
            return float("inf")
        return bound * (self.samples - 1) * self.window_ms / 1000

    def expire(self, now_ms: int | None = None) -> int:
        """Drop sensors idle for an hour (Kafka purges inactive sensors); returns how many."""
        now = self.clock() if now_ms is None else now_ms
        idle = [tags for tags, s in self._sensors.items() if now - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]
        for tags in idle:
            del self._sensors[tags]
        if idle:
            self._resolved.clear()
        return len(idle)


class RequestQuotaManager(ClientQuotaManager):
    """`request_percentage`: a request's handling time as a percentage of one second, per window;
    the throttle time is at most one window (ClientRequestQuotaManager.maxThrottleTimeMs)."""

    def __init__(self, samples: int = 11, window_s: int = 1, clock: Callable[[], int] = monotonic_ms) -> None:
        super().__init__(REQUEST_PERCENTAGE, samples, window_s, clock)

    def record_time_and_throttle(self, user: str, client_id: str, nanos: float, now_ms: int | None = None) -> int:
        return self.record_and_throttle(user, client_id, nanos * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms)

    def _throttle(self, sensor: Sensor, now: int) -> int:
        return min(sensor.rate.throttle_ms(sensor.bound, now), self.window_ms)


class MutationQuota:
    """One request's controller mutation quota (Kafka's Strict/PermissiveControllerMutationQuota).

    Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): once the bucket is below
    zero no mutation is accepted (`check` raises) until it refills; a mutation is never refused
    while it is not. Permissive (older versions): every mutation is accepted and the client is
    throttled once the bucket is exhausted. `throttle_ms` is the time still to wait, the time
    since it was computed deducted."""

    __slots__ = ("_manager", "_sensor", "strict", "_throttle_ms", "_recorded_ms")

    def __init__(self, manager: "ControllerMutationQuotaManager", sensor: Sensor, strict: bool) -> None:
        self._manager = manager
        self._sensor = sensor
        self.strict = strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    def _note(self, tokens: float, now: int) -> int:
        self._throttle_ms = TokenBucket.throttle_ms(tokens, self._sensor.bound)
        self._recorded_ms = now
        return self._throttle_ms

    def exceeded(self) -> bool:
        """Whether a strict quota refuses the next mutation: the bucket is below zero now."""
        sensor = self._sensor
        if not self.strict or sensor.bound is None:
            return False
        now = self._manager.clock()
        tokens = sensor.rate.measure(sensor.bound, now)
        if tokens < 0:
            self._note(tokens, now)
            return True
        return False

    def record(self, permits: float) -> None:
        """`permits` mutations (partitions created or deleted) accepted."""
        sensor = self._sensor
        now = self._manager.clock()
        sensor.last_record_ms = now
        if sensor.bound is None:
            return
        sensor.rate.record(permits, sensor.bound, now)
        if not self.strict:
            tokens = sensor.rate.measure(sensor.bound, now)
            if tokens < 0:
                self._note(tokens, now)

    def throttle_ms(self) -> int:
        return max(0, self._throttle_ms - (self._manager.clock() - self._recorded_ms))


class _Unbounded:
    """UnboundedControllerMutationQuota: no quota of this type anywhere."""

    strict = False

    @staticmethod
    def exceeded() -> bool:
        return False

    @staticmethod
    def record(permits: float) -> None:
        return None

    @staticmethod
    def throttle_ms() -> int:
        return 0


UNBOUNDED_MUTATIONS = _Unbounded()


class ControllerMutationQuotaManager(ClientQuotaManager):
    """`controller_mutation_rate`: partitions created or deleted per second, a token bucket of
    `controller.quota.window.num` x `controller.quota.window.size.seconds` worth of mutations."""

    def __init__(self, samples: int = 11, window_s: int = 1, clock: Callable[[], int] = monotonic_ms) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, samples, window_s, clock)

    def _new_stat(self):
        return TokenBucket(self.samples, self.window_ms)

    def quota_for(self, user: str, client_id: str, strict: bool):
        """newQuotaFor: the request's quota, strict or permissive; unbounded while no entity has one."""
        if not self.quotas:
            return UNBOUNDED_MUTATIONS
        return MutationQuota(self, self.sensor(user, client_id), strict)

    def record_and_throttle(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        """Strict recording, as Kafka's override: refused (and not recorded) while the bucket is
        below zero, the throttle time then being the time to refill it to zero."""
        now = self.clock() if now_ms is None else now_ms
        sensor = self.sensor(user, client_id)
        sensor.last_record_ms = now
        if sensor.bound is None:
            return 0
        tokens = sensor.rate.measure(sensor.bound, now)
        if tokens < 0:
            return TokenBucket.throttle_ms(tokens, sensor.bound)
        sensor.rate.record(value, sensor.bound, now)
        return 0


def _describe_tags(tags: tuple[str, str]) -> str:
    user, client_id = tags
    return " ".join(p for p in (f"user {user}" if user else "", f"client-id {client_id}" if client_id else "") if p) \
        or "clients with no client id"


class ClientQuotas:
    """The broker's four client quota managers, fed the stored quota configs by `apply`.

    `active` is True while any quota of any type exists: the one test the request path makes when
    none is configured."""

    def __init__(self, samples: int = 11, window_s: int = 1, controller_samples: int = 11,
                 controller_window_s: int = 1, clock: Callable[[], int] = monotonic_ms) -> None:
        self.clock = clock
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s, clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s, clock)
        self.request = RequestQuotaManager(samples, window_s, clock)
        self.controller_mutation = ControllerMutationQuotaManager(controller_samples, controller_window_s, clock)
        self.active = False
        self.configs: dict[QuotaEntity, dict[str, float]] = {}

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return self.produce, self.fetch, self.request, self.controller_mutation

    def apply(self, stored: Mapping[str, Mapping[str, str]]) -> None:
        """Every entity's stored configs (entity path -> {key: value}, as the metadata store keeps
        them) become the managers' quotas; keys that are not quotas (a user's SCRAM credentials)
        are not looked at, values that do not parse are logged and left out."""
        configs: dict[QuotaEntity, dict[str, float]] = {}
        for path, entries in stored.items():
            entity = parse_entity_path(path)
            if entity is None:
                continue
            for key, value in entries.items():
                if key not in QUOTA_KEYS:
                    continue
                try:
                    configs.setdefault(entity, {})[key] = parse_quota_value(key, value)
                except (TypeError, ValueError):
                    logger.warning("ignoring the stored quota %s=%r of %s: not a positive number", key, value, entity)
        self.configs = configs
        for manager in self.managers():
            manager.update({entity: values[manager.key] for entity, values in configs.items()
                            if manager.key in values})
        self.active = any(m.enabled for m in self.managers())

    def expire(self, now_ms: int | None = None) -> int:
        return sum(m.expire(now_ms) for m in self.managers())
