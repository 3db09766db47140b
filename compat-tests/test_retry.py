"""Retry and dead-letter topics against a real broker, written once and run through confluent-kafka
(librdkafka) and kafka-python: `retry.topics` creates the tiers and the dead-letter topic (and
AlterConfigs adds tiers; removed ones stay), bad values are INVALID_CONFIG; the example consumer
(examples/retry_consumer.py) fails records, which come back with retry.count 1, 2 after the tiers'
delays and then land in the dead-letter topic with the reason, while records that succeed are not
retried; a SIGKILL with retries pending loses and doubles nothing; `retry.target=retry-topic`,
a malformed `retry.count` and a transactional producer."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import delayedkit as dk
import retrykit as rk

pytestmark = pytest.mark.timeout(180)
KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
REPO = Path(__file__).resolve().parent.parent
INVALID_CONFIG = 40


@pytest.mark.parametrize("family", rk.FAMILIES)
def test_retry_topics_created_added_kept_and_validated(kbroker, kt, family):
    kt.require_module(rk.MODULES[family])
    b, topic = kbroker.bootstrap, kt.topic_name(family, "tiers")
    for configs, words in [({"retry.topics": "30x"}, "not a duration"), ({"retry.topics": "1s,1s"}, "listed twice"),
                           ({"retry.topics": "31d"}, "delayed.delivery.max.delay.ms"),
                           ({"max.delivery.attempts": "0"}, "max.delivery.attempts"),
                           ({"retry.target": "nowhere"}, "retry.target"),
                           ({"retry.delay.ms": "1000"}, "<main topic>.retry.<tier>")]:
        error = rk.create_topic(family, b, topic, 3, configs)
        assert error is not None and error.startswith(f"{INVALID_CONFIG} ") and words in error, error
    assert rk.create_topic(family, b, topic, 3, {"retry.topics": "1s,5m"}) is None
    tiers = {f"{topic}.retry.1s": 3, f"{topic}.retry.5m": 3, f"{topic}.dlq": 3}
    assert rk.wait_for_counts(family, b, {topic: 3, **tiers}) == {topic: 3, **tiers}
    assert rk.alter_topic(family, b, topic, {"retry.topics": "5m,1h"}) is None  # 1h added, 1s removed: kept
    assert rk.wait_for_counts(family, b, {**tiers, f"{topic}.retry.1h": 3}) == {**tiers, f"{topic}.retry.1h": 3}
    error = rk.alter_topic(family, b, topic, {"retry.topics": "5m,2x"})
    assert error is not None and error.startswith(f"{INVALID_CONFIG} ") and "not a duration" in error, error


def _run_example(family: str, bootstrap: str, topic: str, group: str) -> list[tuple]:
    run = subprocess.run([sys.executable, "examples/retry_consumer.py", "--bootstrap", bootstrap, "--topic", topic,
                          "--tiers", "500ms,1s", "--group", group, "--client", family, "--idle-exit-s", "2.5"],
                         capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert run.returncode == 0, run.stderr[-3000:]
    lines = []
    for line in run.stdout.splitlines():  # <ms> ok|failed <topic> <partition> <offset> <value> retry.count=<n> [-> t]
        ms, outcome, t, partition, offset, value, count, *to = line.split()
        lines.append((int(ms), outcome, t, int(partition), int(offset), value, int(count.split("=")[1]),
                      to[1] if to else None))
    return lines


@pytest.mark.parametrize("family", rk.FAMILIES)
def test_example_consumer_retries_through_the_tiers_then_dead_letters(kbroker, kt, family):
    kt.require_module(rk.MODULES[family])
    b, topic = kbroker.bootstrap, kt.topic_name(family, "example")
    assert rk.create_topic(family, b, topic, 2, {"retry.topics": "500ms,1s"}) is None  # max.delivery.attempts: 3
    producer = dk.Producer(family, b)
    try:
        producer.send(topic, [(f"k{i}".encode(), f"ok-{i}".encode(), [], dk.now_ms()) for i in range(4)]
                      + [(b"kf", b"flaky-0", [("trace", b"t1")], dk.now_ms())], partition=0)
        producer.send(topic, [(b"kp", b"poison-0", [], dk.now_ms()), (b"k4", b"ok-4", [], dk.now_ms())], partition=1)
    finally:
        producer.close()
    lines = _run_example(family, b, topic, kt.topic_name("group"))
    by_value: dict[str, list[tuple]] = {}
    for line in lines:
        by_value.setdefault(line[5], []).append(line)
    for i in range(5):  # records that succeed are handled once, never retried
        assert [(o, c, to) for _ms, o, _t, _p, _off, _v, c, to in by_value.pop(f"ok-{i}")] == [("ok", 0, None)]
    flaky, poison = by_value.pop("flaky-0"), by_value.pop("poison-0")
    assert not by_value, by_value
    assert [(o, c, p, to) for _ms, o, _t, p, _off, _v, c, to in flaky] == [
        ("failed", 0, 0, f"{topic}.retry.500ms"), ("ok", 1, 0, None)]
    assert [(o, c, p, to) for _ms, o, _t, p, _off, _v, c, to in poison] == [
        ("failed", 0, 1, f"{topic}.retry.500ms"), ("failed", 1, 1, f"{topic}.retry.1s"),
        ("failed", 2, 1, f"{topic}.retry.1s")]
    # back after the tiers' delays (never before; late by the delivery and the consumer's poll at most)
    for (first, second), delay in [((flaky[0], flaky[1]), 500), ((poison[0], poison[1]), 500),
                                   ((poison[1], poison[2]), 1000)]:
        assert delay <= second[0] - first[0] <= delay + 3000, (first, second)

    dead = dk.read(family, b, f"{topic}.dlq", 2, timeout=1.5, partition=1)  # a second would be there by now
    assert [(g.key, g.value) for g in dead] == [(b"kp", b"poison-0")]
    headers = dict(dead[0].headers)
    assert headers["dlq.reason"] == b"max.delivery.attempts 3 exceeded"
    assert (headers["dlq.source.topic"], headers["dlq.source.partition"]) == (f"{topic}.retry.1s".encode(), b"1")
    assert headers["retry.count"] == b"2" and headers["error"].startswith(b"ValueError: cannot process")
    assert (headers["original.topic"], headers["original.partition"], headers["original.offset"]) == \
        (topic.encode(), b"1", str(poison[0][4]).encode())
    assert dk.read(family, b, f"{topic}.dlq", 1, timeout=0.5, partition=0) == []
    redelivered = [g for g in dk.read(family, b, topic, 6, timeout=5, partition=0) if g.value == b"flaky-0"][1:]
    assert [(g.key, dk.header(g.headers, "retry.count"), dk.header(g.headers, "retry.topic"),
             dk.header(g.headers, "trace")) for g in redelivered] == [(b"kf", b"1", f"{topic}.retry.500ms".encode(), b"t1")]


@pytest.mark.parametrize("family", rk.FAMILIES)
def test_sigkill_with_retries_pending_nothing_lost_or_doubled(fresh_kbroker, kt, family):
    kt.require_module(rk.MODULES[family])
    broker = fresh_kbroker
    b, topic = broker.bootstrap, kt.topic_name(family, "retry-kill")
    assert rk.create_topic(family, b, topic, 1, {"retry.topics": "1s,2s"}) is None
    rk.wait_for_counts(family, b, {f"{topic}.retry.1s": 1, f"{topic}.retry.2s": 1, f"{topic}.dlq": 1})
    producer = dk.Producer(family, b)  # idempotent: the tiers keep its sequences in empty batches
    try:
        first = producer.send(f"{topic}.retry.1s", [(f"k{i}".encode(), f"a{i}".encode(), [("error", b"e")], dk.now_ms())
                                                    for i in range(30)])
        second = producer.send(f"{topic}.retry.2s", [(None, f"b{i}".encode(), [("retry.count", b"1")], dk.now_ms())
                                                     for i in range(30)])
        dead = producer.send(f"{topic}.retry.2s", [(None, f"d{i}".encode(), [("retry.count", b"2")], dk.now_ms())
                                                   for i in range(15)])
    finally:
        producer.close()
    time.sleep(1.2)  # the 1 s tier delivered (or being delivered), the 2 s one pending
    broker.kill()
    broker.restart()

    got = dk.read(family, b, topic, 60, timeout=30)
    assert len(got) == 60 and len({g.value for g in got}) == 60, [g.value for g in got]
    for sent, count, tier, delay in [(first, b"1", "1s", 1000), (second, b"2", "2s", 2000)]:
        mine = [g for g in got if g.value in {s.value for s in sent}]
        assert [g.value for g in mine] == [s.value for s in sent]  # all once, in the order they were sent
        for s, g in zip(sent, mine):
            assert g.key == s.key and g.timestamp == s.timestamp
            assert dk.header(g.headers, "retry.count") == count
            assert dk.header(g.headers, "retry.topic") == f"{topic}.retry.{tier}".encode()
            due = int(dk.header(g.headers, "scheduled.at"))
            assert s.sent_ms + delay <= due <= s.acked_ms + delay and g.received_ms >= due - 5
    letters = dk.read(family, b, f"{topic}.dlq", 16, timeout=2)
    assert [g.value for g in letters] == [s.value for s in dead]
    assert {dk.header(g.headers, "dlq.reason") for g in letters} == {b"max.delivery.attempts 3 exceeded"}


def test_retry_target_tier_malformed_count_and_transactions_refused(kbroker, kt):
    ck = kt.require_module("confluent_kafka")
    kt.require_module("kafka")
    b, topic = kbroker.bootstrap, kt.topic_name("target", "tiers")
    assert rk.create_topic("confluent", b, topic, 1, {"retry.topics": "1s"}) is None
    tier = f"{topic}.retry.1s"
    rk.wait_for_counts("confluent", b, {tier: 1})
    assert rk.alter_topic("confluent", b, tier, {"retry.target": "retry-topic"}) is None  # incremental: keeps the delay

    producer = dk.Producer("kafka-python", b, idempotent=False)  # no producer id: the tier appends nothing now
    try:
        sent = producer.send(tier, [(b"k", b"into-the-tier", [], dk.now_ms())])
    finally:
        producer.close()
    got = dk.read("kafka-python", b, tier, 1, timeout=10)
    assert [(g.value, dk.header(g.headers, "retry.count"), dk.header(g.headers, "retry.topic")) for g in got] == \
        [(b"into-the-tier", b"1", tier.encode())]
    assert got[0].received_ms >= sent[0].sent_ms + 1000
    assert dk.read("kafka-python", b, topic, 1, timeout=0.5) == []

    errors: list = []
    plain = ck.Producer({"bootstrap.servers": b, "message.timeout.ms": 10000})
    plain.produce(tier, value=b"bad", headers=[("retry.count", b"two")], on_delivery=lambda e, _m: errors.append(e))
    plain.flush(15)
    assert errors and errors[0] is not None and errors[0].code() == ck.KafkaError.INVALID_RECORD, errors

    txn = ck.Producer({"bootstrap.servers": b, "transactional.id": kt.topic_name("tid")})
    txn.init_transactions(30)
    txn.begin_transaction()
    errors.clear()
    txn.produce(tier, value=b"in-a-transaction", on_delivery=lambda e, _m: errors.append(e))
    txn.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == ck.KafkaError.INVALID_RECORD, errors
    txn.abort_transaction(30)
