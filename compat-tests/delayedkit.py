"""Delayed delivery scenarios' shared parts: one producer and one reader per client family
(confluent-kafka/librdkafka and kafka-python), so test_delayed.py and test_cluster_delayed.py are
written once and parametrized over the families, and the checks every scenario ends with: each
acknowledged delayed record delivered exactly once, not before its due time, with its key, value,
headers (the delay headers replaced by `scheduled.at`) and CreateTime, in due order.

Every wait has a deadline.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

FAMILIES = ("confluent", "kafka-python")
MODULES = {"confluent": "confluent_kafka", "kafka-python": "kafka"}


@dataclasses.dataclass(frozen=True)
class Sent:
    value: bytes
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int  # the CreateTime the producer set
    sent_ms: int  # wall clock just before the produce
    acked_ms: int  # wall clock once acknowledged


@dataclasses.dataclass(frozen=True)
class Got:
    offset: int
    value: bytes
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    received_ms: int


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Producer:
    """An idempotent producer (acks=all) of one family; `send` waits for every acknowledgement."""

    def __init__(self, family: str, bootstrap: str, idempotent: bool = True, **extra: Any) -> None:
        self.family = family
        if family == "confluent":
            import confluent_kafka as ck

            self._p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent, "acks": "all",
                                   "linger.ms": 5, "message.timeout.ms": 60000, **extra})
        else:
            import kafka

            self._p = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=idempotent, acks="all",
                                          linger_ms=5, request_timeout_ms=30000, max_block_ms=30000, **extra)

    def send(self, topic: str, items: list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]],
             partition: int = 0, timeout: float = 60.0) -> list[Sent]:
        """items: (key, value, headers, CreateTime). Raises if any is not acknowledged."""
        sent_ms = now_ms()
        if self.family == "confluent":
            errors: list = []

            def report(err, _msg) -> None:
                if err is not None:
                    errors.append(err)

            for key, value, headers, ts in items:
                self._p.produce(topic, value=value, key=key, headers=headers, timestamp=ts, partition=partition,
                                on_delivery=report)
                self._p.poll(0)
            left = self._p.flush(timeout)
            if left or errors:
                raise AssertionError(f"not acknowledged: {left} left, errors {errors[:3]}")
        else:
            futures = [self._p.send(topic, value=value, key=key, headers=headers, timestamp_ms=ts, partition=partition)
                       for key, value, headers, ts in items]
            self._p.flush(timeout=timeout)
            for f in futures:
                f.get(timeout=timeout)
        acked_ms = now_ms()
        return [Sent(value, key, tuple(headers), ts, sent_ms, acked_ms) for key, value, headers, ts in items]

    def close(self) -> None:
        if self.family == "confluent":
            self._p.flush(10)
        else:
            self._p.close(timeout=10)


def read(family: str, bootstrap: str, topic: str, count: int, timeout: float, partition: int = 0) -> list[Got]:
    """Records of one partition from the start until `count` are in (or the timeout: what came)."""
    out: list[Got] = []
    deadline = time.monotonic() + timeout
    if family == "confluent":
        import confluent_kafka as ck

        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "delayed-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 20})
        try:
            c.assign([ck.TopicPartition(topic, partition, 0)])
            while len(out) < count and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None or m.error():
                    continue
                out.append(Got(m.offset(), m.value(), m.key(), tuple(m.headers() or ()), m.timestamp()[1], now_ms()))
        finally:
            c.close()
    else:
        import kafka

        c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20,
                                request_timeout_ms=30000)
        try:
            tp = kafka.TopicPartition(topic, partition)
            c.assign([tp])
            c.seek(tp, 0)
            while len(out) < count and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=200).values():
                    received = now_ms()
                    out.extend(Got(r.offset, r.value, r.key, tuple(r.headers or ()), r.timestamp, received)
                               for r in recs)
        finally:
            c.close()
    return out


def header(headers, name: str) -> bytes | None:
    return next((v for k, v in headers if k == name), None)


def due_bounds(s: Sent, topic_delay_ms: int = 0) -> tuple[int, int]:
    """The due time the broker can have given the record: asked relative to its arrival."""
    at = header(s.headers, "deliver.at")
    if at is not None:
        return int(at), int(at)
    delay = header(s.headers, "delay.ms")
    delay_ms = int(delay) if delay is not None else topic_delay_ms
    return s.sent_ms + delay_ms, s.acked_ms + delay_ms


def check_delivered(sent: list[Sent], got: list[Got], topic_delay_ms: int = 0, late_ms: int | None = None) -> None:
    """Every sent record exactly once; delayed ones not early (per `scheduled.at` and the consumer's
    clock), headers and CreateTime kept, delayed records in due order."""
    by_value = {}
    for g in got:
        assert g.value not in by_value, f"{g.value!r} delivered twice (offsets {by_value[g.value].offset}, {g.offset})"
        by_value[g.value] = g
    missing = [s.value for s in sent if s.value not in by_value]
    assert not missing, f"{len(missing)} of {len(sent)} acknowledged records never delivered, e.g. {missing[:5]}"
    extra = set(by_value) - {s.value for s in sent}
    assert not extra, f"delivered records nobody sent: {sorted(extra)[:5]}"
    scheduled_order = []
    for s in sent:
        g = by_value[s.value]
        assert g.key == s.key and g.timestamp == s.timestamp, (s, g)
        delayed = header(s.headers, "delay.ms") is not None or header(s.headers, "deliver.at") is not None \
            or topic_delay_ms > 0
        kept = tuple(h for h in s.headers if h[0] not in ("delay.ms", "deliver.at"))
        if not delayed:
            assert g.headers == kept, (s, g)
            continue
        at = header(g.headers, "scheduled.at")
        assert at is not None, f"{s.value!r}: no scheduled.at header: {g.headers}"
        assert g.headers == kept + (("scheduled.at", at),), (s.headers, g.headers)
        low, high = due_bounds(s, topic_delay_ms)
        assert low <= int(at) <= high, f"{s.value!r}: scheduled.at {at} outside [{low}, {high}]"
        assert g.received_ms >= int(at) - 5, f"{s.value!r} received {int(at) - g.received_ms} ms before its due time"
        if late_ms is not None:
            assert g.received_ms - int(at) <= late_ms, f"{s.value!r} {g.received_ms - int(at)} ms late"
        scheduled_order.append((g.offset, int(at)))
    dues = [at for _offset, at in sorted(scheduled_order)]
    assert dues == sorted(dues), "delayed records not delivered in due order"


def create_delay_log_in_cluster(cluster, partitions: int, replicas: int) -> None:
    """A first delayed record creates `__delayed_messages`; wait until each of its `partitions` has
    its `replicas` in sync."""
    import clusterkit as ck
    from kbroker.delayed.format import DELAYED_TOPIC

    warm = f"delayed-warm-{time.time_ns()}"
    ck.create_topic(cluster, warm, 1, 1)
    producer = Producer("confluent", ck.live_bootstrap(cluster))
    try:
        producer.send(warm, [(None, b"w", [("delay.ms", b"50")], now_ms())])
    finally:
        producer.close()
    ck.wait_for(lambda: ck.in_sync(cluster, DELAYED_TOPIC, partitions, replicas), 60, f"{DELAYED_TOPIC} in sync")
