"""Graceful shutdown (SIGTERM) and recovery of a torn log tail, with a real broker process."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


def _produce(kafka, bootstrap, topic, values):
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for v in values:
            producer.send(topic, value=v, partition=0).get(timeout=20)
    finally:
        producer.close()


def _consume_all(kafka, bootstrap, topic):
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(topic, 0)
        end = consumer.end_offsets([tp])[tp]
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        out = []
        for _ in range(100):
            for records in consumer.poll(timeout_ms=200).values():
                out.extend((r.offset, r.value) for r in records)
            if len(out) >= end:
                break
        return end, out
    finally:
        consumer.close()


def test_sigterm_flushes_and_marks_a_clean_shutdown(fresh_kbroker, kt):
    kafka = kt.require_module("kafka")
    topic = kt.topic_name("shutdown", "term")
    values = [b"m%d" % i for i in range(20)]
    _produce(kafka, fresh_kbroker.bootstrap, topic, values)
    assert fresh_kbroker.stop() == 0
    assert (fresh_kbroker.data_dir / ".kafka_cleanshutdown").exists()
    fresh_kbroker.start()
    assert not (fresh_kbroker.data_dir / ".kafka_cleanshutdown").exists()  # consumed by the start
    end, records = _consume_all(kafka, fresh_kbroker.bootstrap, topic)
    assert end == 20 and records == list(enumerate(values))


def test_torn_tail_is_truncated_and_acknowledged_data_kept(fresh_kbroker, kt):
    kafka = kt.require_module("kafka")
    topic = kt.topic_name("shutdown", "torn")
    values = [b"a%d" % i for i in range(10)]
    _produce(kafka, fresh_kbroker.bootstrap, topic, values)
    fresh_kbroker.kill()
    segment = fresh_kbroker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    good_size = segment.stat().st_size
    with open(segment, "ab") as f:  # half a batch header, as a crash mid-write leaves it
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x01\x00\x00\x00")
    fresh_kbroker.start()
    assert segment.stat().st_size == good_size
    _produce(kafka, fresh_kbroker.bootstrap, topic, [b"after"])
    end, records = _consume_all(kafka, fresh_kbroker.bootstrap, topic)
    assert end == 11 and records == list(enumerate(values + [b"after"]))
