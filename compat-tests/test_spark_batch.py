"""Spark's built-in Kafka connector (spark-sql-kafka-0-10 4.0.0 on kafka-clients 3.9.0, through
PySpark 4.0.0) reading and writing kbroker topics in batch queries.

Spark plans every read from ListOffsets (earliest, latest, by timestamp) asked through the Admin
client, then fetches exactly those ranges: a wrong offset drops or repeats rows without an error.
So every check here is exact: each row's partition, offset, key, value, headers and CreateTime as
the producer wrote them, nothing missing, nothing twice.

- a 3-partition topic written by confluent-kafka under every codec, several records per batch
  (checked in the log files), read whole, by explicit offsets and by timestamp (per partition,
  global, a target between records of one compressed batch, a repeated timestamp, past the end);
- a topic whose log start was moved by DeleteRecords (one partition) and size retention (another);
- the batch replay example (`examples/spark/replay.py`): Spark writes keys, headers and an explicit
  partition column through its idempotent producer; kafka-python reads it back;
- read_committed: transactions committed and aborted by confluent-kafka and Java producers.
"""

from __future__ import annotations

import json
import time

import pytest

import sparkkit
import txnkit as tk
from kbroker.admin.client import AdminClient
from kbroker.wire.records import iter_batch_headers

pytestmark = pytest.mark.timeout(240)

KBROKER_OVERRIDES = {"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"}
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PER_PARTITION = 8  # records per partition and codec


def create_topic(kbroker, topic: str, partitions: int = 3, configs: dict[str, str] | None = None) -> None:
    with AdminClient(kbroker.bootstrap, timeout=30) as admin:
        admin.create_topic(topic, partitions=partitions, replication_factor=1, configs=configs or {})


def log_batches(kbroker, topic: str, partition: int) -> list:
    """The batch headers of one partition's log files, in offset order."""
    out = []
    for segment in sorted((kbroker.data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        out += [h for _pos, h in iter_batch_headers(data)]
    return out


def as_records(kt, msgs_by_partition: dict[int, list], ranges: dict[int, tuple[int, int]]) -> list:
    """The produced messages in [start, end) of each partition, as the Recs a read must return."""
    out = []
    for p, (start, end) in sorted(ranges.items()):
        for offset in range(start, end):
            m = msgs_by_partition[p][offset]
            out.append(kt.Rec(p, offset, m.key, m.value, m.headers, m.timestamp))
    return out


@pytest.fixture(scope="module")
def codec_topic(kt, kbroker):
    """(topic, messages by partition): PER_PARTITION messages per partition under each codec, in
    that order, each codec's round with later timestamps than the one before."""
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("spark", "codecs")
    create_topic(kbroker, topic)
    base = (int(time.time() * 1000) // 1000 * 1000) - 3_600_000
    produced = []
    for round_, codec in enumerate(CODEC_IDS):
        msgs = kt.make_messages(f"spark-{codec}", per_partition=PER_PARTITION, base_ts=base + round_ * 100_000)
        producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "compression.type": codec,
                                "linger.ms": 200, "enable.idempotence": True})
        for m in msgs:
            producer.produce(topic, key=m.key, value=m.value, partition=m.partition, headers=list(m.headers),
                             timestamp=m.timestamp)
        assert producer.flush(30) == 0, f"{codec}: messages left unacknowledged"
        produced += msgs
    return topic, kt.by_partition(produced)


def test_batch_read_every_codec(kt, kbroker, spark, codec_topic):
    topic, msgs = codec_topic
    if kbroker.data_dir is not None:  # the records really sit in compressed batches of several
        for p in msgs:
            batches = log_batches(kbroker, topic, p)
            assert sum(b.records_count for b in batches) == len(msgs[p])
            multi = {b.compression for b in batches if b.records_count > 1}
            assert multi == set(CODEC_IDS.values()), f"partition {p}: multi-record batches only of codecs {multi}"
    got = sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic)
    kt.assert_records_match([m for p in sorted(msgs) for m in msgs[p]], got)


def test_batch_read_by_offsets(kt, kbroker, spark, codec_topic):
    topic, msgs = codec_topic
    total = len(msgs[0])
    starting = {"0": 3, "1": -2, "2": 17}      # -2: earliest
    ending = {"0": 12, "1": 9, "2": -1}        # -1: latest
    got = sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic,
                              startingOffsets=json.dumps({topic: starting}), endingOffsets=json.dumps({topic: ending}))
    assert got == as_records(kt, msgs, {0: (3, 12), 1: (0, 9), 2: (17, total)})


def test_batch_read_by_timestamp(kt, kbroker, spark, codec_topic):
    topic, msgs = codec_topic
    ts = {p: [m.timestamp for m in msgs[p]] for p in msgs}
    total = len(ts[0])
    gzip_round = PER_PARTITION  # the gzip round's first offset
    start_targets = {
        0: ts[0][0] - 5,                      # before everything: 0
        1: ts[1][gzip_round + 3],             # repeated timestamp (messages 2 and 3): the first of the two
        2: ts[2][3 * PER_PARTITION + 5] - 1,  # between two records of one lz4 batch
    }
    end_targets = {
        0: ts[0][4 * PER_PARTITION + 1],      # exact timestamp of a zstd record: it is not included
        1: ts[1][-1] + 1,                     # past the end: latest
        2: ts[2][4 * PER_PARTITION + 6] - 1,
    }
    starts = {p: kt.expected_offset_for_timestamp(msgs[p], t) for p, t in start_targets.items()}
    ends = {p: kt.expected_offset_for_timestamp(msgs[p], t) for p, t in end_targets.items()}
    assert starts == {0: 0, 1: gzip_round + 2, 2: 3 * PER_PARTITION + 5} and ends[1] is None  # the scenario
    got = sparkkit.read_topic(
        kt, spark, kbroker.bootstrap, topic,
        startingOffsetsByTimestamp=json.dumps({topic: {str(p): t for p, t in start_targets.items()}}),
        endingOffsetsByTimestamp=json.dumps({topic: {str(p): t for p, t in end_targets.items()}}))
    assert got == as_records(kt, msgs, {p: (starts[p], total if ends[p] is None else ends[p]) for p in msgs})

    # one timestamp for every partition (every partition has the same timestamps)
    middle = ts[0][2 * PER_PARTITION + 4]
    got = sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic, startingTimestamp=str(middle))
    assert got == as_records(kt, msgs, {p: (2 * PER_PARTITION + 4, total) for p in msgs})

    # no record at or after the target: an error by default, nothing with the "latest" strategy
    past = json.dumps({topic: {"0": ts[0][-1] + 1, "1": ts[1][0], "2": ts[2][-1] + 1}})
    with pytest.raises(Exception, match=f"No offset matched from request of topic-partition {topic}-[02] "):
        sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic, startingOffsetsByTimestamp=past)
    got = sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic, startingOffsetsByTimestamp=past,
                              startingOffsetsByTimestampStrategy="latest")
    assert got == as_records(kt, msgs, {1: (0, total)})


def test_read_after_log_start_moved(kt, kbroker, spark):
    """DeleteRecords on partition 0, size retention on partition 2: Spark starts at each log start."""
    ck = kt.require_module("confluent_kafka")
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    topic = kt.topic_name("spark", "logstart")
    create_topic(kbroker, topic, configs={"segment.bytes": "1200", "retention.bytes": "2400"})
    now = int(time.time() * 1000)
    counts = {0: 6, 1: 6, 2: 30}  # partition 2's ~330-byte records outgrow retention.bytes, the others' do not
    msgs = [kt.Msg(p, f"k-{p}-{i}".encode(), b"%03d" % i + (b"x" * 300 if p == 2 else b""),
                   (("i", str(i).encode()),), now - 60_000 + i)
            for p, count in counts.items() for i in range(count)]
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 0, "enable.idempotence": True})
    for m in msgs:
        producer.produce(topic, key=m.key, value=m.value, partition=m.partition, headers=list(m.headers),
                         timestamp=m.timestamp)
        producer.flush(30)  # one record a batch: retention has segments to delete
    by_p = kt.by_partition(msgs)
    admin = ConfluentAdmin({"bootstrap.servers": kbroker.bootstrap})
    deleted = admin.delete_records([TopicPartition(topic, 0, 4)])
    assert next(iter(deleted.values())).result(30).low_watermark == 4

    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        def settled_log_start():
            first = consumer.get_watermark_offsets(TopicPartition(topic, 2), timeout=10)[0]
            time.sleep(0.6)  # three retention passes
            return first if first > 0 and consumer.get_watermark_offsets(TopicPartition(topic, 2), timeout=10)[0] == first else None
        start2 = kt.wait_until(settled_log_start, 30, "retention to move partition 2's log start")
        assert consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, len(by_p[1]))
    finally:
        consumer.close()
    ranges = {0: (4, len(by_p[0])), 1: (0, len(by_p[1])), 2: (start2, len(by_p[2]))}
    expected = as_records(kt, by_p, ranges)
    assert sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic) == expected

    # offsets below the log start: skipped with failOnDataLoss=false, refused otherwise
    from_zero = json.dumps({topic: {"0": 0, "1": 0, "2": 0}})
    assert sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic, startingOffsets=from_zero,
                               failOnDataLoss="false") == expected
    with pytest.raises(Exception, match="(?s)Some data may have been lost.*OffsetOutOfRangeException"):
        sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic, startingOffsets=from_zero, failOnDataLoss="true")


def test_replay_writes_keys_headers_partitions(kt, kbroker, spark, codec_topic):
    """examples/spark/replay.py from a time to an offset per partition; kafka-python reads the
    target: the selected records, each at its source partition, in order, with the source's key,
    value and headers plus the replay's two, CreateTime set when Spark wrote it, by an idempotent
    producer."""
    kafka = kt.require_module("kafka")
    replay = sparkkit.example("replay")
    topic, msgs = codec_topic
    target = kt.topic_name("spark", "replay")
    create_topic(kbroker, target)
    since = {p: msgs[p][PER_PARTITION + p].timestamp for p in msgs}  # 8, 9, 10 by timestamp
    until = {0: 30, 1: -1, 2: 11}
    started_ms = int(time.time() * 1000)
    written = replay.replay(
        spark, kbroker.bootstrap, topic, target,
        starting={"startingOffsetsByTimestamp": replay.by_partition(topic, json.dumps(since))},
        ending={"endingOffsets": replay.by_partition(topic, json.dumps(until))})
    finished_ms = int(time.time() * 1000)
    ranges = {0: (PER_PARTITION, 30), 1: (PER_PARTITION + 1, len(msgs[1])), 2: (PER_PARTITION + 2, 11)}
    assert written == sum(end - start for start, end in ranges.values())

    consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, enable_auto_commit=False,
                                   consumer_timeout_ms=1000)
    try:
        tps = [kafka.TopicPartition(target, p) for p in msgs]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: list = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got += records
    finally:
        consumer.close()
    by_target = kt.by_partition(kt.Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                                for r in got)
    assert {p: len(v) for p, v in by_target.items()} == {p: end - start for p, (start, end) in ranges.items()}
    for p, (start, end) in ranges.items():
        for i, rec in enumerate(by_target[p]):
            src = msgs[p][start + i]
            where = f"target partition {p} offset {rec.offset}"
            assert rec.offset == i, f"{where}: offsets not dense from 0"
            assert (rec.key, rec.value) == (src.key, src.value), f"{where}: not source offset {start + i}"
            assert rec.headers == src.headers + (("replayed-from", f"{topic}/{p}/{start + i}".encode()),
                                                 ("source-timestamp", str(src.timestamp).encode())), where
            assert started_ms - 1000 <= rec.timestamp <= finished_ms + 1000, f"{where}: CreateTime {rec.timestamp}"
    assert all(r.timestamp_type == 0 for r in got), "Spark's producer writes CreateTime"
    if kbroker.data_dir is not None:
        for p in ranges:
            batches = log_batches(kbroker, target, p)
            assert batches and all(b.producer_id >= 0 and b.base_sequence >= 0 for b in batches), \
                f"partition {p}: Spark's writes are not idempotent: {batches}"


@pytest.mark.parametrize("family", ["confluent", "java"])
def test_read_committed(kt, kbroker, spark, request, tmp_path, family):
    """Committed, aborted and committed again: Spark with kafka.isolation.level=read_committed reads
    the committed records at their acknowledged offsets, read_uncommitted reads them all; neither
    returns a control record."""
    topic = kt.topic_name("spark", f"txn-{family}")
    create_topic(kbroker, topic, partitions=2)
    producers = tk.Producers(kt, request, tmp_path)
    try:
        producer = producers.start(family, kbroker.bootstrap, topic, f"spark-{family}-{time.time_ns()}")
        producer.init()
        acks = {}
        for outcome, count in (("commit", 6), ("abort", 4), ("commit", 5)):
            producer.begin()
            acks[outcome] = acks.get(outcome, []) + producer.send(tk.values(f"{family}-{outcome}-{count}", count, 2))
            if outcome == "commit":
                producer.commit()
            else:
                producer.abort()
        producer.close()
    finally:
        producers.close_all()
    kt.wait_until(lambda: tk.list_offsets(kbroker.bootstrap, topic, [0, 1], tk.READ_COMMITTED)
                  == tk.list_offsets(kbroker.bootstrap, topic, [0, 1], tk.READ_UNCOMMITTED),
                  20, "the last stable offset to reach the high watermark")

    def values(**options):
        return [(r.partition, r.offset, r.value.decode()) for r in
                sparkkit.read_topic(kt, spark, kbroker.bootstrap, topic, **options)]

    assert values(**{"kafka.isolation.level": "read_committed"}) == sorted(acks["commit"])
    assert values() == sorted(acks["commit"] + acks["abort"])
