"""Tiered storage scenarios' shared parts: a broker with an archive, topics whose closed segments
are archived and deleted locally, and one reader per client family (confluent-kafka/librdkafka,
kafka-python, aiokafka) that consumes from an offset with keys, headers and timestamps and asks
ListOffsets (earliest, latest, by timestamp) the family's own way. Scenarios are written once in
the test modules and parametrized over `FAMILIES`.

Every wait has a deadline; only processes started here are signalled, by PID.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from conftest import wait_until as wait_for
from kbroker.admin.client import AdminClient

FAMILIES = ("confluent", "kafka-python", "aiokafka")
MODULES = {"confluent": "confluent_kafka", "kafka-python": "kafka", "aiokafka": "aiokafka"}
EARLIEST_LOCAL, LATEST_TIERED = -4, -5
SEGMENT_BYTES = 32768

# the broker side of every tiered test: archive rounds and local retention every 200 ms
BROKER_OVERRIDES = {"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "200",
                    "log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"}
# archived segments leave the local disk at once (the records are an hour old)
TOPIC_CONFIGS = {"segment.bytes": str(SEGMENT_BYTES), "remote.storage.enable": "true", "local.retention.ms": "1000"}


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    with AdminClient(bootstrap, timeout=15) as admin:
        admin.create_topic(topic, partitions=partitions, replication_factor=replication_factor,
                           configs={**TOPIC_CONFIGS, **(configs or {})})


def produce(kt: Any, bootstrap: str, topic: str, msgs: list) -> None:
    """With librdkafka, batches kept under the segment size, every record acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": SEGMENT_BYTES // 2,
                         "acks": "all", "enable.idempotence": True})
    failures: list = []
    for m in msgs:
        producer.produce(topic, key=m.key, value=m.value, headers=list(m.headers), partition=m.partition,
                         timestamp=m.timestamp, on_delivery=lambda err, _msg: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and not failures, f"not every record was acknowledged: {failures[:3]}"


def local_log_start(data_dir: Path, topic: str, partition: int) -> int:
    """The base offset of the first local segment (what local retention left)."""
    bases = [int(p.name.split(".")[0]) for p in (Path(data_dir) / f"{topic}-{partition}").glob("*.log")]
    return min(bases) if bases else -1


def manifest(archive: Path, topic: str, partition: int) -> dict:
    [directory] = [d for d in Path(archive).iterdir() if d.name.startswith(f"{topic}-")]
    return json.loads((directory / str(partition) / "manifest.json").read_bytes())["manifest"]


def archive_dir(archive: Path, topic: str, partition: int) -> Path:
    [directory] = [d for d in Path(archive).iterdir() if d.name.startswith(f"{topic}-")]
    return directory / str(partition)


def wait_archived(data_dir: Path, archive: Path, topic: str, partitions: int, min_segments: int = 2,
                  timeout: float = 30) -> dict[int, int]:
    """Until every partition has `min_segments` archived and only its active segment left locally
    (every closed one archived and deleted); the local log starts, by partition."""
    def done() -> dict[int, int] | None:
        starts = {p: local_log_start(data_dir, topic, p) for p in range(partitions)}
        local_segments = {p: len(list((Path(data_dir) / f"{topic}-{p}").glob("*.log"))) for p in starts}
        if all(s > 0 and local_segments[p] == 1 and len(manifest(archive, topic, p)["segments"]) >= min_segments
               for p, s in starts.items()):
            return starts
        return None

    return wait_for(done, timeout, f"{topic}'s closed segments archived and deleted locally")


def list_offsets_raw(bootstrap: str, topic: str, partitions: int, timestamp: int) -> dict[int, int | None]:
    """ListOffsets through kbroker's own admin client (for the timestamps clients do not ask)."""
    with AdminClient(bootstrap, timeout=15) as admin:
        got = admin.list_offsets([(topic, p) for p in range(partitions)], timestamp)
    return {p: off for (_t, p), off in got.items()}


# --------------------------------------------------------------------------------------------
# readers: records from given offsets until each partition's end, and ListOffsets


def consume(family: str, kt: Any, bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int],
            isolation: str = "read_uncommitted", timeout: float = 30) -> list:
    """Every record from `starts[p]` until each partition's position reaches `ends[p]`, as kt.Rec."""
    reader = {"confluent": _consume_confluent, "kafka-python": _consume_kafka_python,
              "aiokafka": _consume_aiokafka}[family]
    return reader(kt, bootstrap, topic, starts, ends, isolation, timeout)


def _reached(positions: dict[int, int], ends: dict[int, int]) -> bool:
    return all(positions.get(p, -1) >= end for p, end in ends.items())


def _consume_confluent(kt, bootstrap, topic, starts, ends, isolation, timeout):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-unused", "enable.auto.commit": False,
                         "isolation.level": isolation, "auto.offset.reset": "error",
                         "max.partition.fetch.bytes": 65536})
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(topic, p) for p in ends])}
            if _reached(positions, ends):
                break
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, f"confluent-kafka consumer error: {msg.error()}"
            out.append(kt.Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                              msg.timestamp()[1]))
    finally:
        consumer.close()
    return out


def _consume_kafka_python(kt, bootstrap, topic, starts, ends, isolation, timeout):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level=isolation, auto_offset_reset="none", request_timeout_ms=15000,
                             max_partition_fetch_bytes=65536, fetch_max_bytes=262144)
    out = []
    try:
        tps = {p: TopicPartition(topic, p) for p in starts}
        consumer.assign(list(tps.values()))
        for p, offset in starts.items():
            consumer.seek(tps[p], offset)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _reached({p: consumer.position(tps[p]) for p in ends}, ends):
                break
            for batch in consumer.poll(200).values():
                out += [kt.Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in batch]
    finally:
        consumer.close()
    return out


def _consume_aiokafka(kt, bootstrap, topic, starts, ends, isolation, timeout):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    isolation_level=isolation, auto_offset_reset="none", request_timeout_ms=15000,
                                    max_partition_fetch_bytes=65536, fetch_max_bytes=262144)
        out = []
        await consumer.start()
        try:
            tps = {p: TopicPartition(topic, p) for p in starts}
            consumer.assign(list(tps.values()))
            for p, offset in starts.items():
                consumer.seek(tps[p], offset)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if _reached({p: await consumer.position(tps[p]) for p in ends}, ends):
                    break
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    out += [kt.Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                            for r in batch]
        finally:
            await consumer.stop()
        return out

    return asyncio.run(asyncio.wait_for(run(), timeout + 30))


def offsets(family: str, bootstrap: str, topic: str, partitions: int, spec: str | int) -> dict[int, tuple[int | None, int | None]]:
    """ListOffsets the family's way: {partition: (offset or None, timestamp or None)} for
    'earliest', 'latest' or a timestamp in ms."""
    return {"confluent": _offsets_confluent, "kafka-python": _offsets_kafka_python,
            "aiokafka": _offsets_aiokafka}[family](bootstrap, topic, partitions, spec)


def _offsets_confluent(bootstrap, topic, partitions, spec):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-unused"})
    try:
        if spec in ("earliest", "latest"):
            marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
            return {p: (low if spec == "earliest" else high, None) for p, (low, high) in marks.items()}
        got = consumer.offsets_for_times([TopicPartition(topic, p, spec) for p in range(partitions)], timeout=10)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None, None) for tp in got}
    finally:
        consumer.close()


def _offsets_kafka_python(bootstrap, topic, partitions, spec):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=15000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        if spec == "earliest":
            return {tp.partition: (o, None) for tp, o in consumer.beginning_offsets(tps).items()}
        if spec == "latest":
            return {tp.partition: (o, None) for tp, o in consumer.end_offsets(tps).items()}
        got = consumer.offsets_for_times({tp: spec for tp in tps})
        return {tp.partition: (v.offset, v.timestamp) if v is not None else (None, None) for tp, v in got.items()}
    finally:
        consumer.close()


def _offsets_aiokafka(bootstrap, topic, partitions, spec):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=15000)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            if spec == "earliest":
                return {tp.partition: (o, None) for tp, o in (await consumer.beginning_offsets(tps)).items()}
            if spec == "latest":
                return {tp.partition: (o, None) for tp, o in (await consumer.end_offsets(tps)).items()}
            got = await consumer.offsets_for_times({tp: spec for tp in tps})
            return {tp.partition: (v.offset, v.timestamp) if v is not None else (None, None) for tp, v in got.items()}
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), 60))
