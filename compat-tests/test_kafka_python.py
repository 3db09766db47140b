"""kafka-python 3.x against kbroker: admin create/delete, keyed produce with headers and timestamps
under every codec, assign-based consume (no group), ListOffsets earliest/latest/by-timestamp."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(120)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
COMMON = dict(request_timeout_ms=15000, reconnect_backoff_max_ms=1000)


@pytest.fixture
def kafka(kt):
    return kt.require_module("kafka")


def _admin(kafka, kbroker):
    return kafka.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, client_id="compat-kp-admin", **COMMON)


def _consumer(kafka, kbroker):
    return kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=None, enable_auto_commit=False,
                               auto_offset_reset="earliest", client_id="compat-kp-consumer", **COMMON)


def _codec_available(kt, codec: str) -> None:
    if codec == "none":
        return
    from kafka import codec as kc

    has = {"gzip": kc.has_gzip, "snappy": kc.has_snappy, "lz4": kc.has_lz4, "zstd": kc.has_zstd}[codec]()
    kt.require(has, f"kafka-python has no {codec} codec installed "
                    f"({'python-snappy' if codec == 'snappy' else codec} missing from the test extra)")


def produce(kafka, kbroker, topic, msgs, codec, acks="all"):
    compression = None if codec == "none" else codec
    producer = kafka.KafkaProducer(bootstrap_servers=kbroker.bootstrap, compression_type=compression, acks=acks,
                                   linger_ms=5, max_block_ms=30000, client_id="compat-kp-producer", **COMMON)
    try:
        futures = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers), partition=m.partition,
                                 timestamp_ms=m.timestamp) for m in msgs]
        producer.flush(timeout=30)
        return [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)


def consume_all(kafka, kt, kbroker, topic, partitions, n, timeout=30.0):
    tps = [kafka.TopicPartition(topic, p) for p in partitions]
    consumer = _consumer(kafka, kbroker)
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            for tp, recs in consumer.poll(timeout_ms=500).items():
                for r in recs:
                    out.append(kt.Rec(r.partition, r.offset, r.key, r.value,
                                      tuple((k, v) for k, v in r.headers), r.timestamp))
        return out
    finally:
        consumer.close()


def list_offsets(kafka, kbroker, topic, partitions, spec):
    tps = [kafka.TopicPartition(topic, p) for p in partitions]
    consumer = _consumer(kafka, kbroker)
    try:
        if spec == "earliest":
            return {tp.partition: (o, None) for tp, o in consumer.beginning_offsets(tps, timeout_ms=15000).items()}
        if spec == "latest":
            return {tp.partition: (o, None) for tp, o in consumer.end_offsets(tps, timeout_ms=15000).items()}
        res = consumer.offsets_for_times({tp: spec for tp in tps}, timeout_ms=15000)
        return {tp.partition: ((v.offset, v.timestamp) if v is not None else (None, None)) for tp, v in res.items()}
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(kbroker, kafka, kt, codec):
    _codec_available(kt, codec)
    topic = kt.topic_name("kp", codec)
    admin = _admin(kafka, kbroker)
    try:
        admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, wait_for_metadata=True)
        described = admin.describe_topics([topic])
        assert len(described) == 1 and described[0]["error_code"] == 0, described
        parts = sorted(p["partition_index"] for p in described[0]["partitions"])
        assert parts == [0, 1, 2]
        assert all(p["leader_id"] == 0 for p in described[0]["partitions"]), described

        msgs = kt.make_messages(f"kp-{codec}")
        metas = produce(kafka, kbroker, topic, msgs, codec)
        per_partition = kt.by_partition(msgs)
        # the acks: in send order, offsets dense per partition
        acked: dict[int, list[int]] = {}
        for m, md in zip(msgs, metas):
            assert md.partition == m.partition
            acked.setdefault(md.partition, []).append(md.offset)
        assert acked == {p: list(range(len(v))) for p, v in per_partition.items()}, acked

        got = consume_all(kafka, kt, kbroker, topic, [0, 1, 2], len(msgs))
        kt.assert_records_match(msgs, got)

        kt.assert_list_offsets(per_partition, lambda spec: list_offsets(kafka, kbroker, topic, [0, 1, 2], spec),
                               kt.timestamp_targets(per_partition[0]))

        admin.delete_topics([topic])
        kt.wait_until(lambda: topic not in admin.list_topics(), 15, f"topic {topic} to disappear from metadata")
    finally:
        admin.close()


def test_auto_create_and_default_partitions(kbroker, kafka, kt):
    """Producing to an unknown topic auto-creates it with num.partitions (1)."""
    topic = kt.topic_name("kp", "auto")
    msgs = [kt.Msg(0, b"k", b"v", (("h", b"1"),), int(time.time() * 1000))]
    produce(kafka, kbroker, topic, msgs, "none")
    consumer = _consumer(kafka, kbroker)
    try:
        assert consumer.partitions_for_topic(topic) == {0}
    finally:
        consumer.close()
    kt.assert_records_match(msgs, consume_all(kafka, kt, kbroker, topic, [0], 1))


def test_describe_producers(kbroker, kafka, kt):
    """An idempotent producer shows up in DescribeProducers (KIP-664) with its epoch, last sequence
    and last timestamp; a partition it never wrote has no producer; an unknown one is an error."""
    topic = kt.topic_name("kp", "producers")
    admin = _admin(kafka, kbroker)
    try:
        admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}}, wait_for_metadata=True)
        producer = kafka.KafkaProducer(bootstrap_servers=kbroker.bootstrap, enable_idempotence=True, acks="all",
                                       max_block_ms=30000, client_id="compat-kp-idempotent", **COMMON)
        last_ts = int(time.time() * 1000)
        try:
            futures = [producer.send(topic, value=b"v%d" % i, partition=0, timestamp_ms=last_ts - 5 + i)
                       for i in range(5)]
            producer.flush(timeout=30)
            assert [f.get(timeout=30).offset for f in futures] == [0, 1, 2, 3, 4]
        finally:
            producer.close(timeout=10)
        tp0, tp1 = kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)
        described = admin.describe_producers([tp0, tp1])
        assert described[tp1].active_producers == []
        [state] = described[tp0].active_producers
        assert state.producer_id >= 0
        assert (state.producer_epoch, state.last_sequence, state.last_timestamp) == (0, 4, last_ts - 1)
        assert (state.coordinator_epoch, state.current_transaction_start_offset) == (-1, -1)
        with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
            admin.describe_producers([kafka.TopicPartition(topic, 7)], broker_id=0)
    finally:
        admin.close()
