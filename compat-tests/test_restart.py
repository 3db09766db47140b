"""Durability across SIGKILL: whatever the broker acknowledged with acks=all must be readable after
a restart on the same data dir and port."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(180)


def consume_to_end(kafka, kt, bootstrap, topic, partitions, timeout=30.0):
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                   request_timeout_ms=15000)
    try:
        tps = [kafka.TopicPartition(topic, p) for p in partitions]
        ends = {tp.partition: o for tp, o in consumer.end_offsets(tps, timeout_ms=15000).items()}
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list = []
        deadline = time.monotonic() + timeout
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                out.extend(kt.Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in recs)
        return ends, out
    finally:
        consumer.close()


def test_acked_messages_survive_sigkill(fresh_kbroker, kt):
    kafka = kt.require_module("kafka")
    broker = fresh_kbroker
    topic = kt.topic_name("restart")
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()
    msgs = kt.make_messages("restart", per_partition=40)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="gzip",
                                   linger_ms=2, request_timeout_ms=15000, max_block_ms=20000)
    try:
        futs = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers), partition=m.partition,
                              timestamp_ms=m.timestamp) for m in msgs]
        producer.flush(timeout=30)
        metas = [f.get(timeout=30) for f in futs]  # every one acknowledged
    finally:
        producer.close(timeout=5)
    assert len(metas) == len(msgs)

    broker.kill()
    broker.restart()

    ends, got = consume_to_end(kafka, kt, broker.bootstrap, topic, [0, 1, 2])
    assert ends == {0: 40, 1: 40, 2: 40}, f"log end offsets after restart {ends}"
    kt.assert_records_match(msgs, got)

    # the log goes on where it stopped: no offset is handed out twice
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", request_timeout_ms=15000,
                                   max_block_ms=20000)
    try:
        md = producer.send(topic, key=b"after", value=b"restart", partition=1).get(timeout=20)
    finally:
        producer.close(timeout=5)
    assert (md.partition, md.offset) == (1, 40)


def test_acked_before_kill_during_load(fresh_kbroker, kt):
    """SIGKILL while a producer is mid-stream: every acknowledged message is there afterwards,
    at the offset it was acknowledged with, and the log has no holes."""
    ck = kt.require_module("confluent_kafka")
    broker = fresh_kbroker
    topic = kt.topic_name("restart", "load")
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                            "enable.idempotence": False, "message.timeout.ms": 20000,
                            "compression.type": "lz4", "retries": 0})
    acked: dict[tuple[int, int], bytes] = {}

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()

    # warm up: the topic exists (auto-created, 1 partition) before the kill
    producer.produce(topic, key=b"warm", value=b"warm-0", partition=0, on_delivery=on_delivery)
    assert producer.flush(20) == 0 and acked, "warm-up message not acknowledged"
    i = 0
    deadline = time.monotonic() + 30
    while len(acked) < 300 and time.monotonic() < deadline:
        if i - len(acked) < 200:  # keep up to ~200 in flight, so the kill lands mid-stream
            producer.produce(topic, key=f"k{i}".encode(), value=f"load-{i}".encode() * 5, partition=0,
                             on_delivery=on_delivery)
            i += 1
            producer.poll(0)
        else:
            producer.poll(0.01)
    assert len(acked) >= 300, f"only {len(acked)} acks in 30s"
    broker.kill()
    acked_at_kill = dict(acked)  # callbacks after the kill can only report failures or earlier acks
    producer.purge()
    producer.flush(5)
    acked_snapshot = dict(acked)

    broker.restart()
    kafka = kt.require_module("kafka")
    ends, got = consume_to_end(kafka, kt, broker.bootstrap, topic, [0])
    by_offset = {r.offset: r.value for r in got}
    assert [r.offset for r in got] == list(range(ends[0])), "holes or reordering in the log after restart"
    lost = {k: v for k, v in acked_snapshot.items() if by_offset.get(k[1]) != v}
    assert not lost, (f"{len(lost)} of {len(acked_snapshot)} acknowledged messages lost or changed after SIGKILL "
                      f"(e.g. {sorted(lost)[:5]}); log end {ends[0]}")
    assert ends[0] >= len(acked_at_kill)
