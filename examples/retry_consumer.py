"""A consumer whose failed records go to kbroker's retry tiers (docs/features.md, "Retry and
dead-letter topics"), with kafka-python or confluent-kafka (`--client`).

The topic has `retry.topics` (say `30s,5m,1h`); the broker made `<topic>.retry.<tier>` and
`<topic>.dlq`. For each record the handler is called; when it raises, the record (key, value,
headers, CreateTime) is produced to the next tier — `tiers[retry.count]`, the last tier again once
they are used up — on the record's own partition index, with an `error` header and, on its first
failure, `original.topic` / `original.partition` / `original.offset`. The broker sends it back
after the tier's delay with `retry.count` one higher, or to `<topic>.dlq` once it has had the
topic's `max.delivery.attempts`. The consumer commits only after the tier acknowledged the record
(acks=all): a crash in between redelivers the record, never loses it (at least once).

    python examples/retry_consumer.py --bootstrap 127.0.0.1:9092 --topic orders --tiers 30s,5m,1h \\
        --group billing --client confluent --idle-exit-s 10

The demonstration handler fails for values starting with `poison` (always) or `flaky` (the first
time only: records without `retry.count`), and prints one line per record handled:
`<ms> ok|failed <topic> <partition> <offset> <value> retry.count=<n> [-> <tier topic>]`.
"""

from __future__ import annotations

import argparse
import sys
import time

RETRY_INFIX = ".retry."


def header(headers, name: str) -> bytes | None:
    found = None
    for key, value in headers or ():
        if key == name:
            found = value
    return found


def retry_count(headers) -> int:
    raw = header(headers, "retry.count")
    return int(raw) if raw else 0


def main_topic(topic: str) -> str:
    """The main topic of a record read from it or, with retry.target=retry-topic, from a tier."""
    main, sep, _tier = topic.rpartition(RETRY_INFIX)
    return main if sep else topic


def next_tier_topic(topic: str, headers, tiers: list[str]) -> str:
    return f"{main_topic(topic)}{RETRY_INFIX}{tiers[min(retry_count(headers), len(tiers) - 1)]}"


def retry_headers(headers, error: Exception, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The record's headers for its tier: its own (the broker reads retry.count from them), the
    error that failed it, and where it was first read."""
    out = [(k, v) for k, v in headers or () if k != "error"]
    if header(out, "original.topic") is None:
        out += [("original.topic", topic.encode()), ("original.partition", str(partition).encode()),
                ("original.offset", str(offset).encode())]
    return out + [("error", f"{type(error).__name__}: {error}".encode()[:1000])]


def demo_handler(value: bytes, headers) -> None:
    if value.startswith(b"poison"):
        raise ValueError("cannot process a poison record")
    if value.startswith(b"flaky") and retry_count(headers) == 0:
        raise TimeoutError("the service behind the handler timed out")


def report(outcome: str, topic: str, partition: int, offset: int, value: bytes, headers, to: str | None = None) -> None:
    line = f"{time.time_ns() // 1_000_000} {outcome} {topic} {partition} {offset} {value.decode(errors='replace')} " \
           f"retry.count={retry_count(headers)}"
    print(line + (f" -> {to}" if to else ""), flush=True)


class ConfluentClient:
    def __init__(self, bootstrap: str, group: str, topics: list[str]) -> None:
        import confluent_kafka as ck

        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                     "linger.ms": 5})
        self.consumer.subscribe(topics)

    def poll(self):
        """[(topic, partition, offset, key, value, headers, CreateTime)] of one poll."""
        out = []
        for m in self.consumer.consume(100, 0.5):
            if m.error() is None:
                out.append((m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.headers() or [],
                            m.timestamp()[1]))
        return out

    def send(self, topic: str, partition: int, key, value, headers, timestamp: int) -> None:
        self.producer.produce(topic, key=key, value=value, headers=headers, partition=partition, timestamp=timestamp,
                              on_delivery=self._check)

    @staticmethod
    def _check(err, _msg) -> None:
        if err is not None:
            raise RuntimeError(f"a failed record was not acknowledged by its tier: {err}")

    def flush_and_commit(self) -> None:
        if self.producer.flush(30):
            raise RuntimeError("failed records still unacknowledged after 30 s")
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonClient:
    def __init__(self, bootstrap: str, group: str, topics: list[str]) -> None:
        import kafka

        self.consumer = kafka.KafkaConsumer(*topics, bootstrap_servers=bootstrap, group_id=group,
                                            enable_auto_commit=False, auto_offset_reset="earliest",
                                            fetch_max_wait_ms=100)
        self.producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                                            linger_ms=5)
        self.pending: list = []

    def poll(self):
        out = []
        for tp, records in self.consumer.poll(timeout_ms=500).items():
            out += [(tp.topic, tp.partition, r.offset, r.key, r.value, r.headers or [], r.timestamp) for r in records]
        return out

    def send(self, topic: str, partition: int, key, value, headers, timestamp: int) -> None:
        self.pending.append(self.producer.send(topic, key=key, value=value, headers=headers, partition=partition,
                                               timestamp_ms=timestamp))

    def flush_and_commit(self) -> None:
        self.producer.flush(timeout=30)
        for future in self.pending:
            future.get(timeout=30)  # raises if the tier did not take it
        self.pending.clear()
        self.consumer.commit()

    def close(self) -> None:
        self.producer.close(timeout=10)
        self.consumer.close()


CLIENTS = {"confluent": ConfluentClient, "kafka-python": KafkaPythonClient}


def run(client, tiers: list[str], handler, idle_exit_s: float | None) -> None:
    last_record = time.monotonic()
    while idle_exit_s is None or time.monotonic() - last_record < idle_exit_s:
        records = client.poll()
        if not records:
            continue
        last_record = time.monotonic()
        for topic, partition, offset, key, value, headers, timestamp in records:
            try:
                handler(value, headers)
            except Exception as exc:  # noqa: BLE001 - any failure of the handler is retried
                to = next_tier_topic(topic, headers, tiers)
                client.send(to, partition, key, value, retry_headers(headers, exc, topic, partition, offset), timestamp)
                report("failed", topic, partition, offset, value, headers, to)
            else:
                report("ok", topic, partition, offset, value, headers)
        client.flush_and_commit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", required=True, help="the main topic")
    parser.add_argument("--tiers", required=True, help="the topic's retry.topics, e.g. 30s,5m,1h")
    parser.add_argument("--group", required=True)
    parser.add_argument("--client", choices=sorted(CLIENTS), default="confluent")
    parser.add_argument("--also-tiers", action="store_true",
                        help="also read the tiers (for tiers with retry.target=retry-topic)")
    parser.add_argument("--idle-exit-s", type=float, default=None, help="exit once nothing came for this long")
    args = parser.parse_args(argv)
    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]
    topics = [args.topic] + ([f"{args.topic}{RETRY_INFIX}{t}" for t in tiers] if args.also_tiers else [])
    client = CLIENTS[args.client](args.bootstrap, args.group, topics)
    try:
        run(client, tiers, demo_handler, args.idle_exit_s)
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
