"""The `delayed` phase: delivery precision of delayed messages. A producer (confluent-kafka,
idempotent, acks=all) sends `delayed_messages` records to a 3-partition topic, each with a
`delay.ms` header drawn uniformly from 1 ms to `delayed_max_ms`; a consumer assigned to the
partitions (in another thread, `fetch.wait.max.ms=10`, one `poll()` per record) notes when each
arrives. Lateness is the arrival time minus the due time the record carries in its `scheduled.at`
header (same clock: one machine), so it counts the broker's firing, its delivery (intent, append, tombstones) and the
consumer's fetch. Reported: p50/p99/max lateness, how many arrived more than 100 ms late, any early."""

from __future__ import annotations

import random
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

PARTITIONS = 3


def delayed_run(bootstrap: str, topic: str, count: int, max_delay_ms: int, deadline: float) -> dict:
    arrivals: dict[bytes, tuple[int, int]] = {}  # value -> (arrived ms, due ms)
    stop = threading.Event()
    ready = threading.Event()

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-delayed", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 10, "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        try:
            while not stop.is_set():
                # poll, not consume(n, timeout): that waits for n messages or the whole timeout, and
                # added up to its 50 ms to each arrival measured
                m = consumer.poll(0.05)
                ready.set()
                if m is None or m.error():
                    continue
                due = next((int(v) for k, v in (m.headers() or ()) if k == "scheduled.at"), None)
                if due is not None:
                    arrivals[m.value()] = (time.time_ns() // 1_000_000, due)
        finally:
            consumer.close()

    thread = threading.Thread(target=consume, name="delayed-consumer", daemon=True)
    thread.start()
    ready.wait(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "queue.buffering.max.messages": max(count * 2, 100_000)})
    producer.produce(topic, value=b"warm-up", partition=0, headers=[("delay.ms", b"1")])  # creates the delay log
    producer.flush(30)
    warm_by = time.perf_counter() + 30
    while b"warm-up" not in arrivals and time.perf_counter() < warm_by:
        time.sleep(0.05)
    arrivals.pop(b"warm-up", None)
    rng = random.Random(42)
    errors = []
    started = time.time()
    for i in range(count):
        producer.produce(topic, value=f"delayed-{i}".encode(), partition=i % PARTITIONS,
                         headers=[("delay.ms", str(rng.randint(1, max_delay_ms)).encode())],
                         on_delivery=lambda err, _m: errors.append(err) if err else None)
        producer.poll(0)
    left = producer.flush(60)
    produce_s = time.time() - started
    end_by = min(deadline, time.perf_counter() + max_delay_ms / 1000 + 30)
    while len(arrivals) < count - left - len(errors) and time.perf_counter() < end_by:
        time.sleep(0.1)
    stop.set()
    thread.join(15)
    lateness = sorted(arrived - due for arrived, due in arrivals.values())

    def pct(q: float) -> float | None:
        return float(lateness[min(len(lateness) - 1, int(q * len(lateness)))]) if lateness else None

    return {"sent": count, "acked": count - left - len(errors), "received": len(arrivals), "produce_s": produce_s,
            "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": float(lateness[-1]) if lateness else None,
            "late_over_100ms": sum(1 for x in lateness if x > 100), "early": sum(1 for x in lateness if x < 0),
            "lost": count - left - len(errors) - len(arrivals)}
