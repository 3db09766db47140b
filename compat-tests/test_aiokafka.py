"""aiokafka against kbroker: AIOKafkaAdminClient create/delete, keyed produce with headers and
timestamps under every codec, assign-based consume (no group), ListOffsets."""

from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = pytest.mark.timeout(120)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
COMMON = dict(request_timeout_ms=15000, retry_backoff_ms=100)


@pytest.fixture
def aiokafka(kt):
    return kt.require_module("aiokafka")


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def produce(aiokafka, kbroker, topic, msgs, codec):
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=kbroker.bootstrap, acks="all", linger_ms=5,
                                         compression_type=None if codec == "none" else codec, **COMMON)
    await producer.start()
    try:
        futs = [await producer.send(topic, key=m.key, value=m.value, partition=m.partition,
                                    timestamp_ms=m.timestamp, headers=list(m.headers)) for m in msgs]
        return [await asyncio.wait_for(f, 30) for f in futs]
    finally:
        await producer.stop()


async def consume_all(aiokafka, kt, kbroker, topic, partitions, n, timeout=30.0):
    from aiokafka import TopicPartition

    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=None,
                                         enable_auto_commit=False, auto_offset_reset="earliest", **COMMON)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for tp, recs in batch.items():
                for r in recs:
                    out.append(kt.Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp))
        return out
    finally:
        await consumer.stop()


async def list_offsets(aiokafka, kbroker, topic, partitions, spec):
    from aiokafka import TopicPartition

    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=None,
                                         enable_auto_commit=False, **COMMON)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        if spec == "earliest":
            return {tp.partition: (o, None) for tp, o in (await consumer.beginning_offsets(tps)).items()}
        if spec == "latest":
            return {tp.partition: (o, None) for tp, o in (await consumer.end_offsets(tps)).items()}
        res = await consumer.offsets_for_times({tp: spec for tp in tps})
        return {tp.partition: ((v.offset, v.timestamp) if v is not None else (None, None)) for tp, v in res.items()}
    finally:
        await consumer.stop()


async def _roundtrip(aiokafka, kt, kbroker, codec):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = kt.topic_name("aio", codec)
    admin = AIOKafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        desc = await admin.describe_topics([topic])
        assert len(desc) == 1 and desc[0]["error_code"] == 0, desc
        assert sorted(p["partition"] for p in desc[0]["partitions"]) == [0, 1, 2], desc
        assert all(p["leader"] == 0 for p in desc[0]["partitions"]), desc

        msgs = kt.make_messages(f"aio-{codec}")
        metas = await produce(aiokafka, kbroker, topic, msgs, codec)
        per_partition = kt.by_partition(msgs)
        acked: dict[int, list[int]] = {}
        for m, md in zip(msgs, metas):
            assert md.partition == m.partition
            acked.setdefault(md.partition, []).append(md.offset)
        assert acked == {p: list(range(len(v))) for p, v in per_partition.items()}, acked

        got = await consume_all(aiokafka, kt, kbroker, topic, [0, 1, 2], len(msgs))
        kt.assert_records_match(msgs, got)

        results = {}
        targets = kt.timestamp_targets(per_partition[0])
        for spec in ["earliest", "latest", *targets]:
            results[spec] = await list_offsets(aiokafka, kbroker, topic, [0, 1, 2], spec)
        kt.assert_list_offsets(per_partition, results.__getitem__, targets)

        await admin.delete_topics([topic])
        deadline = time.monotonic() + 15
        while topic in await admin.list_topics():
            assert time.monotonic() < deadline, f"topic {topic} still listed 15s after delete"
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(kbroker, aiokafka, kt, codec):
    run(_roundtrip(aiokafka, kt, kbroker, codec))
