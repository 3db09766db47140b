"""KafkaJS 2.2.4 (Node.js) against one kbroker, through kafkajs/harness.js (kafkajskit.py): the
suite's roundtrip under every codec KafkaJS has, the idempotent producer, and the admin calls with
Kafka's errors as KafkaJS reports them.

Roundtrip (per codec: none, gzip, snappy; KafkaJS has LZ4 and ZSTD only through native add-ons,
FINDINGS.md): createTopics (3 partitions) and fetchTopicMetadata (led by node 0); the suite's
messages (`make_messages`: keys, growing binary values, headers with a repeated key, explicit
timestamps) produced by the idempotent producer with acks=-1 in one send, acknowledged at offsets
dense from 0 in send order; the batches on disk carry the codec and the producer's id; read back by
assignment (KafkaJS: a group of its own with a fixed assigner) with exact keys, values, headers
(as KafkaJS groups a repeated key), timestamps and offsets; from explicit offsets (seek) on two
partitions; fetchTopicOffsets (earliest / latest) and fetchTopicOffsetsByTimestamp (before all, a
repeated timestamp, between two, after all: KafkaJS answers the latest offset where Kafka answers
-1); deleteTopics, and the topic gone from listTopics.
"""

from __future__ import annotations

import kafkajskit as kj
import pytest

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def kafkajs(kt, tmp_path_factory):
    """The KafkaJS harness: node + the locked KafkaJS, or a skip (a failure under CI=true)."""
    return kj.harness(kt, tmp_path_factory.mktemp("kafkajs"))


KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
TOPIC, BROKER = 2, 4  # KafkaJS ConfigResourceTypes


def _offsets_dense(msgs, acks) -> None:
    acked: dict[int, list[int]] = {}
    for m, (p, off) in zip(msgs, acks):
        assert p == m.partition, f"{m.key!r} acknowledged on partition {p}, sent to {m.partition}"
        acked.setdefault(p, []).append(off)
    assert acked == {p: list(range(len(v))) for p, v in acked.items()}, f"acknowledged offsets {acked}"


@pytest.mark.parametrize("codec", kj.CODECS)
def test_roundtrip(kt, kbroker, kafkajs, codec):
    b = kbroker.bootstrap
    client = kj.client(kt, kafkajs)
    topic = kt.topic_name("kafkajs", codec)
    kafkajs.create_topic(b, topic, 3)
    parts = kafkajs.partitions(b, topic)
    assert {p: (d["leader"], d["replicas"], d["isr"]) for p, d in parts.items()} == {
        p: (0, [0], [0]) for p in range(3)}, parts

    msgs = kj.as_kafkajs(kt.make_messages(f"kafkajs-{codec}"))
    per_partition = kt.by_partition(msgs)
    _offsets_dense(msgs, client.produce(b, topic, msgs, idempotent=True, codec=codec))
    if kbroker.data_dir is not None:
        for p in range(3):
            batches = kj.log_batches(kbroker.data_dir, topic, p)
            assert [(x.base_offset, x.records, x.codec) for x in batches] == [(0, 8, codec)], batches
            assert batches[0].producer_id >= 0 and batches[0].base_sequence == 0, batches

    kt.assert_records_match(msgs, client.consume(b, topic, len(msgs)))

    # from explicit offsets, two partitions only
    got = client.consume(b, topic, 2 * 8 - 5, seek="1:2,2:3")
    assert sorted((r.partition, r.offset) for r in got) == [(1, o) for o in range(2, 8)] + [(2, o) for o in range(3, 8)]

    # ListOffsets, KafkaJS's way
    ends = {e["partition"]: e for e in kafkajs.admin_ok(b, "fetchTopicOffsets", topic)}
    assert {p: (int(e["low"]), int(e["high"]), int(e["offset"])) for p, e in ends.items()} == {
        p: (0, 8, 8) for p in range(3)}, ends
    targets = kt.timestamp_targets(per_partition[0])
    answers = kafkajs.admin(b, *[("fetchTopicOffsetsByTimestamp", [topic, t]) for t in targets])
    for target, answer in zip(targets, answers):
        assert answer["ok"], answer
        got_offsets = {e["partition"]: int(e["offset"]) for e in answer["result"]}
        # Kafka answers -1 past the end; KafkaJS replaces it with the latest offset
        want = {p: kt.expected_offset_for_timestamp(per_partition[p], target) for p in range(3)}
        want = {p: len(per_partition[p]) if o is None else o for p, o in want.items()}
        assert got_offsets == want, f"by timestamp {target}: {got_offsets} != {want}"

    assert kafkajs.admin_ok(b, "deleteTopics", {"topics": [topic]}) is None
    kt.wait_until(lambda: topic not in kafkajs.admin_ok(b, "listTopics"), 20, f"{topic} gone from listTopics")


def test_reads_what_other_clients_wrote(kt, kbroker, kafkajs):
    """Records written by librdkafka (gzip and snappy batches, a repeated header key between two
    others) read by KafkaJS: exact, headers as KafkaJS groups them."""
    ck = kt.require_module("confluent_kafka")
    b = kbroker.bootstrap
    topic = kt.topic_name("kafkajs", "from-librdkafka")
    kafkajs.create_topic(b, topic, 3)
    msgs = kt.make_messages("librdkafka-to-kafkajs")
    for codec, part in (("gzip", msgs[:12]), ("snappy", msgs[12:])):
        producer = ck.Producer({"bootstrap.servers": b, "compression.type": codec, "linger.ms": 50,
                                "enable.idempotence": True})
        for m in part:
            producer.produce(topic, key=m.key, value=m.value, partition=m.partition, headers=list(m.headers),
                             timestamp=m.timestamp)
        assert producer.flush(30) == 0
    kt.assert_records_match(kj.as_kafkajs(msgs), kj.client(kt, kafkajs).consume(b, topic, len(msgs)))


def test_idempotent_producer(kt, kbroker, kafkajs):
    """Each KafkaJS idempotent producer gets a producer id (InitProducerId) and numbers its batches
    from 0; the broker knows both (DescribeProducers through kafka-python: last sequence = records
    sent - 1), and a second producer's records follow the first's. A non-idempotent producer
    writes batches without a producer id."""
    kafka = kt.require_module("kafka")
    b = kbroker.bootstrap
    client = kj.client(kt, kafkajs)
    topic = kt.topic_name("kafkajs", "idempotent")
    kafkajs.create_topic(b, topic, 2)
    first = kj.as_kafkajs(kt.make_messages("idem-1", partitions=2, per_partition=5))
    second = kj.as_kafkajs(kt.make_messages("idem-2", partitions=2, per_partition=3))
    plain = kj.as_kafkajs(kt.make_messages("plain", partitions=2, per_partition=2))
    _offsets_dense(first, client.produce(b, topic, first, idempotent=True, codec="gzip"))
    acks = client.produce(b, topic, second, idempotent=True)
    assert sorted(acks) == [(p, o) for p in range(2) for o in range(5, 8)], acks
    client.produce(b, topic, plain, idempotent=False)

    admin = kafka.KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=15000)
    try:
        tps = [kafka.TopicPartition(topic, p) for p in range(2)]
        described = admin.describe_producers(tps)
    finally:
        admin.close()
    for tp in tps:
        states = sorted((s.producer_id, s.producer_epoch, s.last_sequence) for s in described[tp].active_producers)
        assert len(states) == 2 and states[0][0] != states[1][0], f"partition {tp.partition}: {states}"
        assert sorted((e, seq) for _pid, e, seq in states) == [(0, 2), (0, 4)], f"partition {tp.partition}: {states}"
    if kbroker.data_dir is not None:
        for p in range(2):
            batches = kj.log_batches(kbroker.data_dir, topic, p)
            # (KafkaJS writes base sequence 0, not Kafka's -1, into a batch without a producer id)
            assert [(x.base_offset, x.records, x.base_sequence) for x in batches[:2]] == [(0, 5, 0), (5, 3, 0)]
            assert [(x.base_offset, x.records, x.producer_id) for x in batches[2:]] == [(8, 2, -1)], batches
            assert batches[0].producer_id != batches[1].producer_id, batches
    rest = client.consume(b, topic, 20)
    kt.assert_records_match(first + second + plain, rest)


def test_admin_calls_and_kafkas_errors(kt, kbroker, kafkajs):
    """KafkaJS's admin client: results, and Kafka's error codes as KafkaJS's error types."""
    b = kbroker.bootstrap
    topic = kt.topic_name("kafkajs", "admin")
    assert kafkajs.admin_ok(b, "createTopics", {"topics": [{"topic": topic, "numPartitions": 3}]}) is True
    # the same again: TOPIC_ALREADY_EXISTS, which KafkaJS's createTopics answers as `false`
    assert kafkajs.admin_ok(b, "createTopics", {"topics": [{"topic": topic, "numPartitions": 3}]}) is False
    # with another error beside it, KafkaJS throws every topic's error
    err = kafkajs.admin_error(b, "createTopics", {"topics": [{"topic": topic, "numPartitions": 3},
                                                             {"topic": "bad name!", "numPartitions": 1}]})
    assert err["name"] == "KafkaJSAggregateError", err
    assert sorted((e["name"], e["topic"], e["type"], e["code"]) for e in err["errors"]) == [
        ("KafkaJSCreateTopicError", "bad name!", "INVALID_TOPIC_EXCEPTION", 17),
        ("KafkaJSCreateTopicError", topic, "TOPIC_ALREADY_EXISTS", 36)], err
    for spec, error_type, code in (({"numPartitions": 1, "replicationFactor": 3}, "INVALID_REPLICATION_FACTOR", 38),
                                   ({"numPartitions": 0}, "INVALID_PARTITIONS", 37)):
        name = kt.topic_name("kafkajs", "refused")
        err = kafkajs.admin_error(b, "createTopics", {"topics": [{"topic": name, **spec}]})
        assert [(e["type"], e["code"], e["topic"]) for e in err["errors"]] == [(error_type, code, name)], err

    # metadata, partitions
    assert sorted(kafkajs.partitions(b, topic)) == [0, 1, 2]
    assert kafkajs.admin_ok(b, "createPartitions", {"topicPartitions": [{"topic": topic, "count": 5}]}) is None
    kt.wait_until(lambda: sorted(kafkajs.partitions(b, topic)) == [0, 1, 2, 3, 4], 15, "5 partitions")
    err = kafkajs.admin_error(b, "createPartitions", {"topicPartitions": [{"topic": topic, "count": 2}]})
    assert (err["name"], err["type"], err["code"]) == ("KafkaJSProtocolError", "INVALID_PARTITIONS", 37), err
    err = kafkajs.admin_error(b, "createPartitions", {"topicPartitions": [{"topic": topic, "count": 5}]})
    assert (err["type"], err["code"]) == ("INVALID_PARTITIONS", 37), err
    missing = kt.topic_name("kafkajs", "missing")
    err = kafkajs.admin_error(b, "createPartitions", {"topicPartitions": [{"topic": missing, "count": 4}]})
    assert (err["type"], err["code"]) == ("UNKNOWN_TOPIC_OR_PARTITION", 3), err
    err = kafkajs.admin_error(b, "fetchTopicMetadata", {"topics": [missing]})
    assert (err["type"], err["code"]) == ("UNKNOWN_TOPIC_OR_PARTITION", 3), err
    assert missing not in kafkajs.admin_ok(b, "listTopics"), "fetchTopicMetadata of the admin client auto-created"

    # the cluster
    cluster = kafkajs.admin_ok(b, "describeCluster")
    assert [(x["nodeId"], f"{x['host']}:{x['port']}") for x in cluster["brokers"]] == [(0, b)], cluster
    assert cluster["controller"] == 0 and cluster["clusterId"], cluster

    # topic configs: AlterConfigs then DescribeConfigs
    answers = kafkajs.admin(
        b,
        ("alterConfigs", [{"validateOnly": False, "resources": [
            {"type": TOPIC, "name": topic, "configEntries": [{"name": "retention.ms", "value": "3600000"}]}]}]),
        ("describeConfigs", [{"resources": [{"type": TOPIC, "name": topic,
                                             "configNames": ["retention.ms", "cleanup.policy"]}],
                              "includeSynonyms": False}]),
        ("alterConfigs", [{"validateOnly": False, "resources": [
            {"type": TOPIC, "name": topic, "configEntries": [{"name": "retention.ms", "value": "soon"}]}]}]),
        retries=1)
    assert answers[0]["ok"], answers[0]
    [res] = answers[1]["result"]["resources"]
    entries = {e["configName"]: (e["configValue"], e["isDefault"]) for e in res["configEntries"]}
    assert entries == {"retention.ms": ("3600000", False), "cleanup.policy": ("delete", True)}, entries
    assert (answers[2]["error"]["type"], answers[2]["error"]["code"]) == ("INVALID_CONFIG", 40), answers[2]

    # groups nobody joined
    [g] = kafkajs.admin_ok(b, "describeGroups", ["no-such-group"])["groups"]
    assert (g["state"], g["members"]) == ("Dead", []), g
    [t] = kafkajs.admin_ok(b, "fetchOffsets", {"groupId": "no-such-group", "topics": [topic]})
    assert [(p["partition"], p["offset"]) for p in t["partitions"]] == [(p, "-1") for p in range(5)], t

    # delete
    err = kafkajs.admin_error(b, "deleteTopics", {"topics": [missing]})
    assert (err["name"], err["cause"]["type"], err["cause"]["code"]) == (
        "KafkaJSNumberOfRetriesExceeded", "UNKNOWN_TOPIC_OR_PARTITION", 3), err
    assert kafkajs.admin_ok(b, "deleteTopics", {"topics": [topic]}) is None
    kt.wait_until(lambda: topic not in kafkajs.admin_ok(b, "listTopics"), 20, f"{topic} gone from listTopics")


def test_alter_broker_config_kafka_accepts(kt, kbroker, kafkajs):
    """What a Node application setting `cleanup.policy` on a broker gets from Kafka 3.8: OK (issue 22
    item 2; INVALID_CONFIG for the whole resource before). validateOnly: nothing changes for the
    module's other topics."""
    b = kbroker.bootstrap
    answer = kafkajs.admin(b, ("alterConfigs", [{"validateOnly": True, "resources": [
        {"type": BROKER, "name": "0", "configEntries": [{"name": "cleanup.policy", "value": "compact"}]}]}]),
        retries=1)[0]
    assert answer["ok"], answer["error"]
