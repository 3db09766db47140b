"""Per-record produce errors (KIP-467) and LogAppendTime through stock producers and consumers.

- A compacted topic refuses records without a key: the batch holding them fails with INVALID_RECORD
  and the broker's reason ("Compacted topic cannot accept message without key ..."), delivered to
  each message of that batch; batches of keyed records (another partition) are acknowledged and
  read back.
- A CreateTime topic with `message.timestamp.before.max.ms` / `.after.max.ms` refuses a record
  stamped outside them with INVALID_TIMESTAMP and the range Kafka prints; records within pass.
- `message.timestamp.type=LogAppendTime`, as a topic config and as the broker's
  `log.message.timestamp.type`: the broker stamps each batch, the produce answer carries that time
  (clients report it instead of the producer's) and consumers read it as a LogAppendTime timestamp.

Each scenario runs over confluent-kafka (librdkafka) and the Java producer (KbrokerHarness
`produce-each`, which reports every record's outcome).
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.timeout(180)

HOUR_MS = 3_600_000


def _create(kt, bootstrap, topic, partitions, config):
    kt.require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)


def confluent_produce(request, kt, bootstrap, topic, records):
    """records: (partition, key, value, timestamp or None) -> per record ("ok", partition, offset,
    timestamp) or ("error", Kafka error name, message)."""
    ck = kt.require_module("confluent_kafka")
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "message.timeout.ms": 30000})
    outcomes: list = [None] * len(records)

    def report(i):
        def on_delivery(err, msg):
            name = "DIFFERENT_RECORD" if err and err.code() == ck.KafkaError._INVALID_DIFFERENT_RECORD else \
                err and err.name()
            outcomes[i] = (("error", name, None) if err else  # librdkafka keeps only the code
                           ("ok", msg.partition(), msg.offset(), msg.timestamp()[1]))
        return on_delivery

    for i, (partition, key, value, ts) in enumerate(records):
        producer.produce(topic, value=value, key=key, partition=partition, timestamp=ts or 0,
                         on_delivery=report(i))
    assert producer.flush(30) == 0
    return outcomes


def java_produce(request, kt, bootstrap, topic, records):
    harness = request.getfixturevalue("java_harness")
    lines = "".join(f"{p}\t{ts if ts else -1}\t{kt.b64(k)}\t{kt.b64(v)}\t\n" for p, k, v, ts in records)
    outcomes: list = [None] * len(records)
    for line in harness.ok("produce-each", bootstrap, topic, "none", "all", stdin=lines):
        if line.startswith("ACK "):
            _, i, partition, offset, ts = line.split(" ")
            outcomes[int(i)] = ("ok", int(partition), int(offset), int(ts))
        elif line.startswith("FAIL "):
            _, i, cls, message = line.split(" ", 3)
            name = {"org.apache.kafka.common.InvalidRecordException": "INVALID_RECORD",
                    "org.apache.kafka.common.errors.InvalidTimestampException": "INVALID_TIMESTAMP"}.get(cls, cls)
            # (Kafka's own wording, "one more more invalid records")
            if message.startswith("Failed to append record because it was part of a batch which had one"):
                name = "DIFFERENT_RECORD"
            outcomes[int(i)] = ("error", name, message)
    return outcomes


PRODUCERS = pytest.mark.parametrize("produce", [confluent_produce, java_produce], ids=["confluent", "java"])


def consume_all(kt, bootstrap, topic, partitions, n):
    """(partition, offset, timestamp type, timestamp, key) of the first n records, by confluent-kafka."""
    ck = kt.require_module("confluent_kafka")
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    out, deadline = [], time.monotonic() + 30
    try:
        while len(out) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                ts_type, ts = msg.timestamp()
                out.append((msg.partition(), msg.offset(), ts_type, ts, msg.key()))
    finally:
        consumer.close()
    return sorted(out)


@PRODUCERS
def test_keyless_records_on_a_compacted_topic_fail_with_the_brokers_reason(request, kt, kbroker, produce):
    """Partition 0's batch mixes keyless and keyed records: the keyless ones fail with INVALID_RECORD,
    the keyed one with them (the clients' "part of a batch with invalid records", which proves they
    read record_errors' indexes); partition 1's batch of keyed records is stored."""
    topic = kt.topic_name("recerr", f"compact-{produce.__name__}")
    _create(kt, kbroker.bootstrap, topic, 2, {"cleanup.policy": "compact"})
    records = [(0, None, b"no-key-1", None), (0, b"k0", b"keyed-0", None), (0, None, b"no-key-2", None),
               (1, b"k1", b"keyed-1", None), (1, b"k2", b"keyed-2", None)]
    outcomes = produce(request, kt, kbroker.bootstrap, topic, records)
    assert [o[:2] for o in outcomes[:3]] == [("error", "INVALID_RECORD"), ("error", "DIFFERENT_RECORD"),
                                             ("error", "INVALID_RECORD")], outcomes
    for outcome in (outcomes[0], outcomes[2]):
        if outcome[2] is not None:  # the Java client reports the broker's reason
            assert outcome[2] == f"Compacted topic cannot accept message without key in topic partition {topic}-0."
    assert [o[:3] for o in outcomes[3:]] == [("ok", 1, 0), ("ok", 1, 1)], outcomes
    assert [(p, o, k) for p, o, _, _, k in consume_all(kt, kbroker.bootstrap, topic, 2, 2)] == \
        [(1, 0, b"k1"), (1, 1, b"k2")]


@PRODUCERS
def test_timestamps_out_of_bounds_fail_with_invalid_timestamp(request, kt, kbroker, produce):
    topic = kt.topic_name("recerr", f"ts-{produce.__name__}")
    _create(kt, kbroker.bootstrap, topic, 2, {"message.timestamp.before.max.ms": str(HOUR_MS),
                                              "message.timestamp.after.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    records = [(0, b"old", b"v", now - 2 * HOUR_MS), (1, b"now", b"v", now), (1, b"soon", b"v", now + 60_000)]
    outcomes = produce(request, kt, kbroker.bootstrap, topic, records)
    assert outcomes[0][:2] == ("error", "INVALID_TIMESTAMP"), outcomes
    if outcomes[0][2] is not None:
        assert outcomes[0][2].startswith(f"Timestamp {now - 2 * HOUR_MS} of message with offset 0 is out of range. "
                                         "The timestamp should be within ["), outcomes
    assert [o[:3] for o in outcomes[1:]] == [("ok", 1, 0), ("ok", 1, 1)], outcomes
    stored = consume_all(kt, kbroker.bootstrap, topic, 2, 2)
    assert [(ts_type, ts) for _, _, ts_type, ts, _ in stored] == [(1, now), (1, now + 60_000)]  # CreateTime


def _assert_log_append_time(request, kt, bootstrap, topic, produce):
    before = int(time.time() * 1000)
    records = [(0, b"k%d" % i, b"v", 1_000 + i) for i in range(3)]  # the producer's stamps: 1970
    outcomes = produce(request, kt, bootstrap, topic, records)
    after = int(time.time() * 1000)
    assert all(o[0] == "ok" for o in outcomes), outcomes
    for _, _, _, ts in outcomes:
        assert before - 1000 <= ts <= after + 1000, outcomes  # the broker's clock, from the produce answer
    stored = consume_all(kt, bootstrap, topic, 1, 3)
    acked = {offset: ts for _, _, offset, ts in outcomes}
    assert [(ts_type, ts) for _, offset, ts_type, ts, _ in stored] == [(2, acked[o]) for _, o, *_ in stored]


@PRODUCERS
def test_log_append_time_as_a_topic_config(request, kt, kbroker, produce):
    topic = kt.topic_name("recerr", f"lat-{produce.__name__}")
    _create(kt, kbroker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    _assert_log_append_time(request, kt, kbroker.bootstrap, topic, produce)


@pytest.fixture(scope="module")
def log_append_time_broker(kt, tmp_path_factory):
    yield from kt._running(kt.Broker(tmp_path_factory.mktemp("lat-broker"),
                                     {"log.message.timestamp.type": "LogAppendTime"}))


@PRODUCERS
def test_log_append_time_as_the_brokers_default(request, kt, log_append_time_broker, produce):
    topic = kt.topic_name("recerr", f"lat-broker-{produce.__name__}")
    _create(kt, log_append_time_broker.bootstrap, topic, 1, {})
    _assert_log_append_time(request, kt, log_append_time_broker.bootstrap, topic, produce)


def test_a_delayed_keyless_record_for_a_compacted_topic_is_refused_when_produced(kt, kbroker):
    """Delayed records reach the target's log only when due: their check is made when produced, so
    they fail at once rather than at every delivery attempt."""
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("recerr", "compact-delayed")
    _create(kt, kbroker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "message.timeout.ms": 30000})
    errors = []
    producer.produce(topic, value=b"later", partition=0, headers=[("delay.ms", b"200")],
                     on_delivery=lambda err, msg: errors.append(err and err.name()))
    assert producer.flush(30) == 0
    assert errors == ["INVALID_RECORD"]
