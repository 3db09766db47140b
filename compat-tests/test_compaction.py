"""Log compaction end to end: committed offsets in `__consumer_offsets` are compacted (the log
shrinks, the newest commit survives a restart), and a user topic with cleanup.policy=compact keeps
the newest value per key."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(180)

KBROKER_OVERRIDES = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": "16384",
    "log.cleaner.backoff.ms": "200",
}


@pytest.fixture
def kafka(kt):
    return kt.require_module("kafka")


def _log_bytes(broker, topic_dir: str) -> int:
    return sum(f.stat().st_size for f in (broker.data_dir / topic_dir).glob("*.log"))


def test_consumer_offsets_are_compacted_and_survive_a_restart(kafka, kt, kbroker):
    topic = kt.topic_name("compaction")
    admin = kafka.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
    admin.close()
    tp = kafka.TopicPartition(topic, 0)
    consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id="compacted-group",
                                   enable_auto_commit=False)
    consumer.assign([tp])
    commits = 1500
    for i in range(commits):
        consumer.commit({tp: kafka.OffsetAndMetadata(i, f"commit-{i}", -1)})
    consumer.close()
    written = commits * 60  # a commit record is well over 60 bytes on disk
    kt.wait_until(lambda: _log_bytes(kbroker, "__consumer_offsets-0") < written // 4, 30,
                  "the cleaner to compact __consumer_offsets-0")
    kbroker.restart()
    consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id="compacted-group",
                                   enable_auto_commit=False)
    try:
        committed = consumer.committed(tp, metadata=True)
        assert committed.offset == commits - 1 and committed.metadata == f"commit-{commits - 1}"
    finally:
        consumer.close()


def test_compacted_topic_keeps_the_newest_value_per_key(kafka, kt, kbroker):
    topic = kt.topic_name("compacted")
    admin = kafka.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    admin.create_topics([kafka.admin.NewTopic(topic, 1, 1, topic_configs={
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"})])
    admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=kbroker.bootstrap, acks="all", linger_ms=0)
    keys = [f"k{i}" for i in range(10)]
    for round_ in range(60):
        for k in keys:
            producer.send(topic, key=k.encode(), value=f"{k}-v{round_}".encode()).get(30)
    producer.close()
    total = 60 * len(keys)

    def read_all():
        consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=None,
                                       auto_offset_reset="earliest", enable_auto_commit=False)
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        out = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                out.extend(records)
            if out and out[-1].offset == total - 1:
                break
        consumer.close()
        return out

    def compacted():
        records = read_all()
        return records if len(records) < total // 2 else None

    records = kt.wait_until(compacted, 40, "the cleaner to compact the topic")
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets) and offsets[-1] == total - 1  # original offsets, nothing reordered
    newest = {}
    for r in records:
        newest[r.key.decode()] = r.value.decode()
    assert newest == {k: f"{k}-v59" for k in keys}  # the newest value of every key survives
