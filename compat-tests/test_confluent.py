"""confluent-kafka (bundled librdkafka) against kbroker: AdminClient create/list_offsets/delete,
keyed produce with headers and timestamps under every codec, assign-based consume."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(120)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.fixture
def ck(kt):
    return kt.require_module("confluent_kafka")


def _admin(ck, kbroker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kbroker.bootstrap, "socket.timeout.ms": 15000})


def produce(ck, kbroker, topic, msgs, codec, acks="all"):
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "compression.type": codec, "acks": acks,
                            "linger.ms": 5, "message.timeout.ms": 30000, "enable.idempotence": False})
    reports: dict[int, tuple] = {}

    def on_delivery(idx):
        def cb(err, msg):
            reports[idx] = (err, None if err else (msg.partition(), msg.offset(), msg.timestamp()))
        return cb

    for i, m in enumerate(msgs):
        producer.produce(topic, key=m.key, value=m.value, partition=m.partition, timestamp=m.timestamp,
                         headers=list(m.headers), on_delivery=on_delivery(i))
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered within 30s"
    errors = {i: r[0] for i, r in reports.items() if r[0] is not None}
    assert not errors, f"delivery failures: {errors}"
    return [reports[i][1] for i in range(len(msgs))]


def consume_all(ck, kt, kbroker, topic, partitions, n, timeout=30.0):
    # librdkafka insists on a group.id even for assign(); nothing is committed or joined.
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": f"compat-unused-{topic}",
                            "enable.auto.commit": False, "enable.auto.offset.store": False,
                            "auto.offset.reset": "earliest", "socket.timeout.ms": 15000})
    try:
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            out.append(kt.Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                              tuple(msg.headers() or ()), msg.timestamp()[1]))
        return out
    finally:
        consumer.close()


def list_offsets(ck, admin, topic, partitions, spec):
    from confluent_kafka.admin import OffsetSpec

    s = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest()}.get(spec) if isinstance(spec, str) \
        else OffsetSpec.for_timestamp(spec)
    futures = admin.list_offsets({ck.TopicPartition(topic, p): s for p in partitions}, request_timeout=15)
    out = {}
    for tp, f in futures.items():
        info = f.result(timeout=20)
        out[tp.partition] = (None if info.offset < 0 else info.offset,
                             None if info.timestamp is None or info.timestamp < 0 else info.timestamp)
    return out


def topics(admin):
    return set(admin.list_topics(timeout=10).topics)


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(kbroker, ck, kt, codec):
    from confluent_kafka.admin import NewTopic

    topic = kt.topic_name("ck", codec)
    admin = _admin(ck, kbroker)
    for t, f in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)],
                                    request_timeout=15).items():
        f.result(timeout=20)
    md = kt.wait_until(lambda: (tm := admin.list_topics(topic, timeout=10).topics.get(topic)) and
                       tm.error is None and len(tm.partitions) == 3 and tm, 15, f"{topic} with 3 partitions")
    assert all(p.leader == 0 for p in md.partitions.values()), {p: v.leader for p, v in md.partitions.items()}

    msgs = kt.make_messages(f"ck-{codec}")
    reports = produce(ck, kbroker, topic, msgs, codec)
    per_partition = kt.by_partition(msgs)
    acked: dict[int, list[int]] = {}
    for m, (p, off, _ts) in zip(msgs, reports):
        assert p == m.partition
        acked.setdefault(p, []).append(off)
    assert acked == {p: list(range(len(v))) for p, v in per_partition.items()}, acked

    got = consume_all(ck, kt, kbroker, topic, [0, 1, 2], len(msgs))
    kt.assert_records_match(msgs, got)

    kt.assert_list_offsets(per_partition, lambda spec: list_offsets(ck, admin, topic, [0, 1, 2], spec),
                           kt.timestamp_targets(per_partition[0]))

    for t, f in admin.delete_topics([topic], request_timeout=15).items():
        f.result(timeout=20)
    kt.wait_until(lambda: topic not in topics(admin), 15, f"topic {topic} to disappear from metadata")


def test_idempotent_producer(kbroker, ck, kt):
    """librdkafka's idempotent producer: InitProducerId, then sequenced batches."""
    topic = kt.topic_name("ck", "idem")
    msgs = kt.make_messages("ck-idem", partitions=1, per_partition=20)
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "enable.idempotence": True, "acks": "all",
                            "compression.type": "lz4", "linger.ms": 5, "message.timeout.ms": 30000})
    errs = []
    for m in msgs:
        producer.produce(topic, key=m.key, value=m.value, partition=0, timestamp=m.timestamp,
                         headers=list(m.headers), on_delivery=lambda err, msg: err and errs.append(err))
    assert producer.flush(30) == 0 and not errs, errs
    kt.assert_records_match(msgs, consume_all(ck, kt, kbroker, topic, [0], len(msgs)))
