"""Time and size retention end to end: old segments go, the log start offset (earliest) moves,
what is left stays readable."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(120)

KBROKER_OVERRIDES = {"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"}


def _setup(ck, kbroker, topic, config, timestamp_ms):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(30):
        producer.produce(topic, value=b"%03d" % i + b"x" * 300, partition=0, timestamp=timestamp_ms)
        producer.flush(10)
    return admin


def _earliest(admin, topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    result = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    return next(iter(result.values())).result(10).offset


def _wait_for(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_time_retention_deletes_expired_segments(kt, kbroker):
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("retention", "time")
    day_ago = int(time.time() * 1000) - 24 * 3600 * 1000
    admin = _setup(ck, kbroker, topic, {"segment.bytes": "2000", "retention.ms": "3600000"}, day_ago)
    # retention runs every 200 ms, possibly while the 30 records are still being produced: the
    # log start moves in steps until every closed segment (all older than retention.ms) is gone
    _wait_for(lambda: _earliest(admin, topic) == 30)
    segments = sorted((kbroker.data_dir / f"{topic}-0").glob("*.log"))
    assert [s.name for s in segments] == [f"{30:020d}.log"]  # a fresh active segment at the log end


def test_size_retention_keeps_the_newest_bytes(kt, kbroker):
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("retention", "size")
    admin = _setup(ck, kbroker, topic, {"segment.bytes": "2000", "retention.bytes": "4000"}, int(time.time() * 1000))
    directory = kbroker.data_dir / f"{topic}-0"
    # retention passes run every 200 ms: wait for the one that brings the log within retention.bytes
    _wait_for(lambda: sum(p.stat().st_size for p in directory.glob("*.log")) <= 4000 + 2000)
    start = _wait_for(lambda: _earliest(admin, topic))
    assert 0 < start < 30
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, 0, start)])
    got = []
    while len(got) < 30 - start:
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is None
        got.append(int(msg.value()[:3]))
    consumer.close()
    assert got == list(range(start, 30))
