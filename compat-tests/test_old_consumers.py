"""Consumers pinned to protocol versions Kafka 3.9 serves and Kafka 4 removed (KIP-896), reading what a
modern producer wrote in every codec: kbroker answers Fetch v0–3 with message sets down-converted
from its record batches, as Kafka 3.9 does (magic 1 for Fetch v2–3, magic 0 for v0–1; headers
dropped, offsets, keys, values and — magic 1 — timestamps kept; zstd: UNSUPPORTED_COMPRESSION_TYPE).

- kafka-python with `api_version=(0, 10, 0)` (no ApiVersions: Fetch v2, ListOffsets v0/v1) and
  `(0, 9)` (Fetch v1, magic 0);
- librdkafka (confluent-kafka) with `api.version.request=false` and `broker.version.fallback=0.9.0`
  (Fetch v1, ListOffsets v0). librdkafka 2.x treats any fallback of 0.10.0 or later as "ask the
  broker" and sends ApiVersions anyway (its own CONFWARN says so), so 0.9.0 is the oldest it can
  be forced to;
- committed offsets through OffsetCommit v0/v1 and OffsetFetch v0/v1 (kafka-python `(0, 8, 1)`,
  `(0, 8, 2)`).
"""

from __future__ import annotations

import dataclasses
import time

import pytest

pytestmark = pytest.mark.timeout(240)

CODECS = ("none", "gzip", "snappy", "lz4")
PARTITIONS, PER_PARTITION = 3, 12
# Fetch v0-2 predate KIP-74: a partition's limit is hard, so a batch larger than it is never sent
# (Kafka 3.9 answers such a fetch with no records, and so does kbroker). The largest batch here is
# about 17 KB uncompressed; a partition's records take two fetches or more.
FETCH_BYTES = 20_000


@pytest.fixture(scope="module")
def ck(kt):
    return kt.require_module("confluent_kafka")


@pytest.fixture(scope="module")
def kafka_python(kt):
    kt.require_module("kafka")
    kt.require_module("xxhash")  # kafka-python reads magic-0 LZ4 only with it
    return kt.require_module("kafka")


@pytest.fixture(scope="module")
def produced(ck, kt, kbroker):
    """One topic per codec (zstd too), written by a modern producer (librdkafka, record batches v2)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    out = {}
    for codec in CODECS + ("zstd",):
        topic = kt.topic_name("old", codec)
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)], request_timeout=15).values():
            f.result(timeout=20)
        msgs = kt.make_messages(codec, partitions=PARTITIONS, per_partition=PER_PARTITION)
        producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "compression.type": codec, "linger.ms": 20,
                                "batch.num.messages": 5})  # several batches per partition
        for m in msgs:
            producer.produce(topic, key=m.key, value=m.value, partition=m.partition, timestamp=m.timestamp,
                             headers=list(m.headers))
        assert producer.flush(30) == 0
        out[codec] = (topic, msgs)
    return out


def _without_headers(msgs):
    """Message sets v0/v1 have no headers: Kafka drops them when it down-converts, and so does kbroker."""
    return [dataclasses.replace(m, headers=()) for m in msgs]


# -- kafka-python ------------------------------------------------------------------------------------------

def kafka_python_consume(kafka_python, kt, kbroker, topic, api_version, n):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=kbroker.bootstrap, api_version=api_version,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=5000,
                             max_partition_fetch_bytes=FETCH_BYTES)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        out = []
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                out += [kt.Rec(tp.partition, r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp)
                        for r in records]
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_0_10_reads_message_sets_v1(kafka_python, kt, kbroker, produced, codec):
    topic, msgs = produced[codec]
    got = kafka_python_consume(kafka_python, kt, kbroker, topic, (0, 10, 0), len(msgs))
    kt.assert_records_match(_without_headers(msgs), got)  # magic 1: timestamps too


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_0_9_reads_message_sets_v0(kafka_python, kt, kbroker, produced, codec):
    topic, msgs = produced[codec]
    got = kafka_python_consume(kafka_python, kt, kbroker, topic, (0, 9), len(msgs))
    kt.assert_records_match(_without_headers(msgs), got, check_timestamps=False)  # magic 0: none
    assert {r.timestamp for r in got} == {None}


@pytest.mark.parametrize("api_version", [(0, 10, 0), (0, 9)])
def test_kafka_python_zstd_is_unsupported_compression_type(kafka_python, kt, kbroker, produced, api_version):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import UnsupportedCompressionTypeError

    topic, _ = produced["zstd"]
    consumer = KafkaConsumer(bootstrap_servers=kbroker.bootstrap, api_version=api_version,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        with pytest.raises(UnsupportedCompressionTypeError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                assert not consumer.poll(timeout_ms=500), "zstd records reached an old-version consumer"
    finally:
        consumer.close()


@pytest.mark.parametrize("api_version", [(0, 8, 1), (0, 8, 2)])
def test_kafka_python_0_8_commits_and_fetches_offsets(kafka_python, kt, kbroker, produced, api_version):
    """OffsetCommit v0 / OffsetFetch v0 for 0.8.1, v1 / v1 for 0.8.2 (the commit timestamp per partition)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, _ = produced["none"]
    group = kt.topic_name("old-group", "-".join(map(str, api_version)))
    tp = TopicPartition(topic, 1)
    consumer = KafkaConsumer(bootstrap_servers=kbroker.bootstrap, api_version=api_version, group_id=group,
                             enable_auto_commit=False)
    try:
        consumer.assign([tp])
        try:
            consumer.commit({tp: OffsetAndMetadata(5, "old-meta", -1)})
        except TypeError:  # kafka-python < 2.1: no leader epoch in OffsetAndMetadata
            consumer.commit({tp: OffsetAndMetadata(5, "old-meta")})
        assert consumer.committed(tp) == 5
    finally:
        consumer.close()


# -- librdkafka forced to 0.9.0 ------------------------------------------------------------------------------

def old_librdkafka(ck, kbroker, group: str):
    return ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group,
                        "api.version.request": False, "broker.version.fallback": "0.9.0",
                        "auto.offset.reset": "earliest", "enable.auto.commit": False,
                        "fetch.message.max.bytes": FETCH_BYTES, "socket.timeout.ms": 15000})


def librdkafka_consume(ck, kt, kbroker, topic, n):
    consumer = old_librdkafka(ck, kbroker, f"old-unused-{topic}")
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out, errors = [], []
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != ck.KafkaError._PARTITION_EOF:
                    errors.append(msg.error())
                    if len(errors) >= 3:
                        break
                continue
            out.append(kt.Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                              msg.timestamp()))
        return out, errors
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_0_9_reads_message_sets_v0(ck, kt, kbroker, produced, codec):
    topic, msgs = produced[codec]
    got, errors = librdkafka_consume(ck, kt, kbroker, topic, len(msgs))
    assert not errors
    kt.assert_records_match(_without_headers(msgs), got, check_timestamps=False)
    assert {r.timestamp for r in got} == {(ck.TIMESTAMP_NOT_AVAILABLE, 0)}  # magic 0 has none


def test_librdkafka_0_9_zstd_is_unsupported_compression_type(ck, kt, kbroker, produced):
    topic, _ = produced["zstd"]
    got, errors = librdkafka_consume(ck, kt, kbroker, topic, 1)
    assert got == []
    assert errors and {e.code() for e in errors} == {ck.KafkaError.UNSUPPORTED_COMPRESSION_TYPE}


def test_downconversion_disabled_is_unsupported_version(ck, kt, kbroker):
    """`message.downconversion.enable=false` on the topic: an old fetcher gets UNSUPPORTED_VERSION, as
    from Kafka; a current one reads on."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = kt.topic_name("old", "nodc")
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"message.downconversion.enable": "false"})],
                                 request_timeout=15).values():
        f.result(timeout=20)
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap})
    producer.produce(topic, key=b"k", value=b"v", partition=0)
    assert producer.flush(30) == 0
    got, errors = librdkafka_consume(ck, kt, kbroker, topic, 1)
    assert got == [] and errors and {e.code() for e in errors} == {ck.KafkaError.UNSUPPORTED_VERSION}
    current = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": f"new-{topic}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        current.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = current.poll(0.5)
        assert msg is not None and not msg.error() and msg.value() == b"v"
    finally:
        current.close()


def test_librdkafka_fallback_0_10_asks_the_broker_and_reads_zstd(ck, kt, kbroker, produced):
    """`broker.version.fallback=0.10.0` with `api.version.request=false` does not hold librdkafka 2.x to
    old versions: it sends ApiVersions anyway and fetches record batches, zstd ones included — which
    is why the old-protocol tests above use 0.9.0."""
    topic, msgs = produced["zstd"]
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": f"old-unused-{topic}",
                            "api.version.request": False, "broker.version.fallback": "0.10.0",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(msgs) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert not msg.error(), msg.error()
                got.append(kt.Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                  tuple(msg.headers() or ()), msg.timestamp()[1]))
    finally:
        consumer.close()
    kt.assert_records_match(msgs, got)  # headers and all: record batches, not message sets
