"""Filtered views against a real broker process, through stock clients.

The source topic is written by confluent-kafka producers in phases shaped to give every kind of
batch a view must handle: batches matching whole (sent as they are), runs of batches matching
nothing (one empty batch, in the middle and at the very end of the log), partial batches
uncompressed and under each codec (rebuilt), and records tagged through a custom header. Every
acknowledged record's (partition, offset, value) is kept; a reader must get exactly the matching
ones, at their source offsets, in order — and reach the end of each partition.

- by assign, for confluent-kafka (librdkafka), Java kafka-clients 3.9, kafka-python and aiokafka:
  ListOffsets on the view answers the source's offsets; the read gets exactly the matching records
  and moves past the empty batches to the end (two views: tags/headers, and a custom tag header);
- a consumer group on the view (confluent-kafka, kafka-python members): reads everything once,
  commits; the broker restarts; more records; a new member of the group resumes after the
  committed offsets and reads exactly the new matching records;
- ListOffsets by timestamp, seek into a gap, and lag (committed vs high watermark) on a view;
- Produce to a view is refused with INVALID_TOPIC_EXCEPTION by both producers;
- CreateTopics validation (missing source, a view of a view, a bad filter), DescribeConfigs,
  topic listing, deleting a source with views refused, deleting a view.
"""

from __future__ import annotations

import itertools
import sys
import time
import uuid

import pytest

import groupkit as gk
import txnkit

pytestmark = pytest.mark.timeout(300)

KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}

SOURCE = "orders"
PARTITIONS = 2
VIEW = "orders-eu"
VIEW_FILTER = 'any(eu) or header.region == "eu"'
CUSTOM_VIEW = "orders-ab"
CUSTOM_FILTER = "all(a, b) and not any(c)"
BASE_TS = 1_700_000_000_000

ISOLATION = {"confluent": txnkit.READ_COMMITTED, "java": txnkit.READ_COMMITTED,
             "kafka-python": txnkit.READ_UNCOMMITTED, "aiokafka": txnkit.READ_UNCOMMITTED}
MEMBERS = {"confluent": "confluent_member.py", "kafka-python": "kafka_python_member.py"}


def main_view_matches(headers: list[tuple[str, bytes]]) -> bool:
    tags = {t.strip() for k, v in headers if k == "tags" for t in v.split(b",")}
    return b"eu" in tags or (("region", b"eu") in headers)


def custom_view_matches(headers: list[tuple[str, bytes]]) -> bool:
    tags = {t.strip() for k, v in headers if k == "labels" for t in v.split(b",")}
    return {b"a", b"b"} <= tags and b"c" not in tags


def mixed(i: int) -> list[tuple[str, bytes]]:
    return [[("tags", b"eu")], [("tags", b"x"), ("region", b"eu")], [("tags", b"us,x")], [("region", b"us")]][i % 4]


PHASES = [  # (codec, number of records, headers of record i)
    ("none", 12, lambda i: [("tags", b"eu,x")]),  # whole batches match
    ("none", 8, lambda i: [("tags", b"us")]),  # three batches matching nothing in a row
    ("none", 8, lambda i: []),
    ("none", 8, lambda i: [("tags", b" us , europe")]),
    ("gzip", 12, mixed), ("snappy", 12, mixed), ("lz4", 12, mixed), ("zstd", 12, mixed), ("none", 12, mixed),
    ("none", 12, lambda i: [("labels", [b"a,b", b"a", b"a,b,c", b"b , a"][i % 4])]),  # the custom header
    ("none", 10, lambda i: [("tags", b"us")]),  # a run matching nothing at the end of the log
]


class Source:
    """The source topic's acknowledged records: (partition, offset, value, headers, timestamp)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: list[tuple[int, int, str, list, int]] = []
        self._ts = itertools.count(BASE_TS, 10)

    def produce(self, tag: str, codec: str, count: int, headers_of) -> list[tuple[int, int, str]]:
        """One flush: one batch per partition (records go round-robin to the partitions)."""
        from confluent_kafka import Producer

        acked = []
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 2000, "compression.type": codec,
                             "batch.num.messages": 100000, "enable.idempotence": True})

        def delivered(err, msg):
            assert err is None, f"produce failed: {err}"
            acked.append((msg.partition(), msg.offset(), msg.value().decode(), headers[msg.value()],
                          msg.timestamp()[1]))

        headers = {}
        for i in range(count):
            value = f"{tag}-{i}".encode()
            headers[value] = headers_of(i)
            producer.produce(SOURCE, value=value, key=value, partition=i % PARTITIONS, headers=headers[value],
                             timestamp=next(self._ts), on_delivery=delivered)
        assert producer.flush(30) == 0, "records still unacknowledged after 30 s"
        self.acked += acked
        return acked

    def expected(self, matches, records=None) -> dict[int, list[tuple[int, str]]]:
        return txnkit.expected_by_partition((p, o, v) for p, o, v, h, _ts in (records or self.acked) if matches(h))


@pytest.fixture(scope="module")
def source(kbroker, kt) -> Source:
    kt.require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    for f in admin.create_topics([NewTopic(SOURCE, PARTITIONS, 1)]).values():
        f.result(30)
    for name, configs in ((VIEW, {"view.source": SOURCE, "view.filter": VIEW_FILTER}),
                          (CUSTOM_VIEW, {"view.source": SOURCE, "view.filter": CUSTOM_FILTER,
                                         "view.tags.header": "labels"})):
        for f in admin.create_topics([NewTopic(name, num_partitions=-1, replication_factor=-1, config=configs)]).values():
            f.result(30)
    src = Source(kbroker.bootstrap)
    for n, (codec, count, headers_of) in enumerate(PHASES):
        src.produce(f"p{n}", codec, count, headers_of)
    return src


@pytest.mark.parametrize("family", ["confluent", "java", "kafka-python", "aiokafka"])
def test_a_view_read_by_assign_gets_exactly_the_matching_records_and_reaches_the_end(kbroker, kt, request, source,
                                                                                     family):
    java = txnkit.require_family(kt, request, family)
    isolation = ISOLATION[family]
    for view, matches in ((VIEW, main_view_matches), (CUSTOM_VIEW, custom_view_matches)):
        ends = txnkit.list_offsets(kbroker.bootstrap, view, range(PARTITIONS), isolation)
        assert ends == txnkit.list_offsets(kbroker.bootstrap, SOURCE, range(PARTITIONS), isolation)
        result = txnkit.read(family, kbroker.bootstrap, view, isolation, ends, timeout=30, java=java,
                             fetcher_position=True)
        txnkit.check_read(result, source.expected(matches), ends)
        if result.client_end_offsets is not None:
            assert result.client_end_offsets == ends


@pytest.mark.parametrize("family", ["confluent", "kafka-python"])
def test_a_group_on_a_view_commits_and_resumes_across_a_broker_restart(kbroker, kt, source, family, tmp_path):
    kt.require_module(txnkit.MODULES[family])
    member_script = str(gk.HERE / "group_members" / MEMBERS[family])
    group = f"view-readers-{family}-{uuid.uuid4().hex[:6]}"
    first = gk.Member([sys.executable, member_script, kbroker.bootstrap, group, VIEW], f"{family}-1", tmp_path)
    try:
        expected = {(p, o) for p, recs in source.expected(main_view_matches).items() for o, _ in recs}
        gk.wait_all_read([first], expected, 90)
        gk.wait_for(lambda: first.committed == gk.end_offsets(expected), 30, "the commits of every record", [first])
    finally:
        first.terminate()
    gk.check_exactly_once([first], expected)
    kbroker.restart()
    new = source.produce(f"after-restart-{family}", "none", 16, mixed)
    second = gk.Member([sys.executable, member_script, kbroker.bootstrap, group, VIEW], f"{family}-2", tmp_path)
    try:
        new_expected = {(p, o) for p, recs in source.expected(main_view_matches, new).items() for o, _ in recs}
        assert new_expected, "the new records include matching ones"
        gk.wait_all_read([second], new_expected, 90)
        time.sleep(1)  # anything older would have been read by now
    finally:
        second.terminate()
    gk.check_exactly_once([second], new_expected)  # resumed after the commits: nothing older again


def test_list_offsets_by_time_seek_and_lag_on_a_view(kbroker, kt, source):
    from confluent_kafka import Consumer, TopicPartition

    matching = [r for r in source.acked if main_view_matches(r[3]) and r[0] == 0]
    skipped = [r for r in source.acked if not main_view_matches(r[3]) and r[0] == 0]
    gap = skipped[len(skipped) // 2]  # a filtered-out record: a gap in the view
    group = f"lag-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        for p in range(PARTITIONS):
            assert consumer.get_watermark_offsets(TopicPartition(VIEW, p), timeout=10) == \
                consumer.get_watermark_offsets(TopicPartition(SOURCE, p), timeout=10)
        by_time = consumer.offsets_for_times([TopicPartition(VIEW, 0, gap[4])], timeout=10)
        assert by_time[0].offset == gap[1]  # the source's offset, even though the view skips that record
        consumer.assign([TopicPartition(VIEW, 0, gap[1])])  # seek into the gap
        msg = None
        deadline = time.monotonic() + 20
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error():
                msg = None
        first_after = min(r for r in matching if r[1] > gap[1])
        assert msg is not None and (msg.offset(), msg.value().decode()) == (first_after[1], first_after[2])
        consumer.commit(offsets=[TopicPartition(VIEW, 0, msg.offset() + 1)], asynchronous=False)
        [committed] = consumer.committed([TopicPartition(VIEW, 0)], timeout=10)
        _low, high = consumer.get_watermark_offsets(TopicPartition(VIEW, 0), timeout=10)
        assert committed.offset == msg.offset() + 1 and high - committed.offset > 0  # the lag, in source offsets
    finally:
        consumer.close()


def test_producing_to_a_view_is_refused_by_every_producer(kbroker, kt, source):
    from confluent_kafka import KafkaError, Producer

    errors = []
    producer = Producer({"bootstrap.servers": kbroker.bootstrap, "message.timeout.ms": 10000})
    producer.produce(VIEW, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(20)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]  # INVALID_TOPIC_EXCEPTION

    kt.require_module("kafka")
    from kafka import KafkaProducer
    from kafka.errors import InvalidTopicError

    kp = KafkaProducer(bootstrap_servers=kbroker.bootstrap, retries=0)
    try:
        with pytest.raises(InvalidTopicError):
            kp.send(VIEW, b"x").get(timeout=20)
    finally:
        kp.close()


def test_views_are_created_validated_described_listed_and_deleted_like_topics(kbroker, kt, source):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})

    def create(name, configs):
        [f] = admin.create_topics([NewTopic(name, num_partitions=-1, replication_factor=-1, config=configs)]).values()
        try:
            f.result(30)
            return None
        except Exception as exc:  # noqa: BLE001 - the KafkaException carrying the broker's answer
            return exc.args[0]

    missing = create("v-missing", {"view.source": "no-such-topic", "view.filter": "any(a)"})
    assert missing.code() == KafkaError.INVALID_CONFIG and "does not exist" in missing.str()
    bad = create("v-bad", {"view.source": SOURCE, "view.filter": "any(a) and"})
    assert bad.code() == KafkaError.INVALID_CONFIG and "position 10" in bad.str()
    of_view = create("v-of-view", {"view.source": VIEW, "view.filter": "any(a)"})
    assert of_view.code() == KafkaError.INVALID_CONFIG and "itself a view" in of_view.str()
    extra = create("v-extra", {"view.source": SOURCE, "view.filter": "any(a)", "retention.ms": "1000"})
    assert extra.code() == KafkaError.INVALID_CONFIG

    listed = admin.list_topics(timeout=10).topics
    assert VIEW in listed and len(listed[VIEW].partitions) == PARTITIONS
    [described] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, VIEW)]).values()
    configs = {k: e.value for k, e in described.result(10).items()}
    assert configs == {"view.source": SOURCE, "view.filter": VIEW_FILTER, "view.tags.header": "tags"}

    assert create("v-temp", {"view.source": SOURCE, "view.filter": "any(a)"}) is None
    [f] = admin.delete_topics([SOURCE]).values()
    with pytest.raises(Exception) as refused:
        f.result(30)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION  # the message (DeleteTopics v5+) names v-temp
    [f] = admin.delete_topics(["v-temp"]).values()
    f.result(30)
    assert "v-temp" not in admin.list_topics(timeout=10).topics
    assert SOURCE in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("family", ["confluent", "java", "kafka-python"])
def test_read_committed_on_a_view_skips_aborted_matching_records(kbroker, kt, request, family):
    """Transactions on the source: a view read at read_committed gets the matching records of
    committed transactions only (partial batches keep their producer id and transactional bit,
    control batches pass), at read_uncommitted those of the aborted one too."""
    java = txnkit.require_family(kt, request, family)
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    source, view = f"payments-{family}", f"payments-{family}-eu"
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    for f in admin.create_topics([NewTopic(source, 1, 1)]).values():
        f.result(30)
    for f in admin.create_topics([NewTopic(view, config={"view.source": source, "view.filter": "any(eu)"})]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": f"views-{uuid.uuid4().hex[:6]}",
                         "linger.ms": 1000})
    producer.init_transactions(30)
    acked = {}
    for txn, commit in (("t1", True), ("t2", False), ("t3", True)):
        producer.begin_transaction()
        for i in range(6):
            value = f"{txn}-{i}".encode()
            producer.produce(source, value=value, key=value, partition=0,
                             headers=[("tags", b"eu" if i % 2 == 0 else b"us")],
                             on_delivery=lambda err, msg: acked.__setitem__(msg.value().decode(), msg.offset()))
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    txnkit.settled_ends(kt, kbroker.bootstrap, source, [0])  # the last commit's markers are written
    for isolation, txns in ((txnkit.READ_COMMITTED, ("t1", "t3")), (txnkit.READ_UNCOMMITTED, ("t1", "t2", "t3"))):
        ends = txnkit.list_offsets(kbroker.bootstrap, view, [0], isolation)
        result = txnkit.read(family, kbroker.bootstrap, view, isolation, ends, timeout=30, java=java,
                             fetcher_position=True)
        expected = {0: sorted((acked[f"{t}-{i}"], f"{t}-{i}") for t in txns for i in range(0, 6, 2))}
        txnkit.check_read(result, expected, ends)
