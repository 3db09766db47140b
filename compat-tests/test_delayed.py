"""Delayed and scheduled messages against a real broker, through confluent-kafka (librdkafka) and
kafka-python (delayedkit's adapters): `delay.ms` and `deliver.at` headers, a topic's
`delivery.delay.ms`, a topic with `delivery.delay.headers.enable=false`, headers and CreateTime
kept, due order, idempotent producers (the target's sequence stays in order), `kbroker delayed
list|cancel`, a transactional producer refused, and a SIGKILL mid-way with a restart: every
acknowledged record delivered once, none early."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest

import delayedkit as dk

pytestmark = pytest.mark.timeout(180)


def family_client(kt, family: str) -> None:
    kt.require_module(dk.MODULES[family])


def create_topic(kt, bootstrap: str, topic: str, configs: dict[str, str] | None = None) -> None:
    kafka = kt.require_module("kafka")
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, 1, 1, topic_configs=configs or {})])
    finally:
        admin.close()


@pytest.mark.parametrize("family", dk.FAMILIES)
def test_delay_headers_headers_kept_due_order_idempotent(kbroker, kt, family):
    family_client(kt, family)
    topic = kt.topic_name(family, "delayed")
    create_topic(kt, kbroker.bootstrap, topic)
    producer = dk.Producer(family, kbroker.bootstrap)
    try:
        create_time = dk.now_ms() - 60_000
        items = [(b"now-key", b"now-0", [("h", b"1")], create_time)]
        for i, delay in enumerate([1500, 700, 1100, 700, 300]):  # out of due order on purpose
            items.append((f"k{i}".encode(), f"delay-{i}".encode(), [("delay.ms", str(delay).encode()), ("h", b"x")],
                          create_time + i))
        sent = producer.send(topic, items)
        at = dk.now_ms() + 900
        sent += producer.send(topic, [(b"at", b"deliver-at", [("deliver.at", str(at).encode())], create_time)])
        sent += producer.send(topic, [(None, b"now-1", [], create_time)])  # the sequence goes on in order
    finally:
        producer.close()
    got = dk.read(family, kbroker.bootstrap, topic, len(sent), timeout=20)
    dk.check_delivered(sent, got)
    immediate = [g.value for g in got if dk.header(g.headers, "scheduled.at") is None]
    assert immediate == [b"now-0", b"now-1"]


@pytest.mark.parametrize("family", dk.FAMILIES)
def test_topic_default_delay(kbroker, kt, family):
    family_client(kt, family)
    topic = kt.topic_name(family, "default-delay")
    create_topic(kt, kbroker.bootstrap, topic, {"delivery.delay.ms": "1200"})
    producer = dk.Producer(family, kbroker.bootstrap)
    try:
        sent = producer.send(topic, [(None, f"d{i}".encode(), [], dk.now_ms()) for i in range(20)])
        sent += producer.send(topic, [(None, b"own", [("delay.ms", b"300")], dk.now_ms())])  # the header wins
    finally:
        producer.close()
    early = dk.read(family, kbroker.bootstrap, topic, 1, timeout=0.5)
    assert [g.value for g in early if g.value != b"own"] == [], "records delivered before the topic's delay"
    got = dk.read(family, kbroker.bootstrap, topic, len(sent), timeout=20)
    dk.check_delivered(sent[:-1], [g for g in got if g.value != b"own"], topic_delay_ms=1200)
    dk.check_delivered(sent[-1:], [g for g in got if g.value == b"own"])
    assert got[0].value == b"own"


def test_topic_that_does_not_honour_delay_headers(kbroker, kt):
    family_client(kt, "confluent")
    topic = kt.topic_name("no-headers", "delayed")
    create_topic(kt, kbroker.bootstrap, topic, {"delivery.delay.headers.enable": "false"})
    producer = dk.Producer("confluent", kbroker.bootstrap)
    try:
        sent = producer.send(topic, [(None, b"plain", [("delay.ms", b"60000"), ("deliver.at", b"not a time")],
                                      dk.now_ms())])
    finally:
        producer.close()
    got = dk.read("confluent", kbroker.bootstrap, topic, 1, timeout=10)
    assert [(g.value, g.headers) for g in got] == [(b"plain", sent[0].headers)], "delay headers acted on"


def kt_repo():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent


def kbroker_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "delayed", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=60, cwd=str(kt_repo()))


def test_list_and_cancel_from_the_command_line(kbroker, kt):
    family_client(kt, "confluent")
    topic = kt.topic_name("cli", "delayed")
    create_topic(kt, kbroker.bootstrap, topic)
    producer = dk.Producer("confluent", kbroker.bootstrap)
    delays = [1500, 8000, 1500, 8000]  # k1 and k3 are cancelled, well before they are due
    try:
        sent = producer.send(topic, [(f"k{i}".encode(), f"c{i}".encode(), [("delay.ms", str(d).encode())],
                                      dk.now_ms()) for i, d in enumerate(delays)])
    finally:
        producer.close()
    listed = kbroker_cli(kbroker.bootstrap, "list", "--topic", topic, "--output", "json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["KEY"]: r for r in json.loads(listed.stdout)}
    assert {"k1", "k3"} <= set(rows) <= {"k0", "k1", "k2", "k3"} and {r["TOPIC"] for r in rows.values()} == {topic}
    cancelled = kbroker_cli(kbroker.bootstrap, "cancel", rows["k1"]["ID"], rows["k3"]["ID"])
    assert cancelled.returncode == 0, cancelled.stderr
    again = kbroker_cli(kbroker.bootstrap, "cancel", rows["k1"]["ID"])
    assert again.returncode == 1 and "no pending delivery" in again.stderr
    rows_after = json.loads(kbroker_cli(kbroker.bootstrap, "list", "--topic", topic, "--output", "json").stdout)
    assert {r["KEY"] for r in rows_after} <= {"k0", "k2"}
    # past every due time (a third must not come), and long enough to read the two even when the
    # CLI runs above took that long under load
    wait_s = max((sent[-1].acked_ms + 8000 - dk.now_ms()) / 1000 + 1.5, 5)
    got = dk.read("confluent", kbroker.bootstrap, topic, 3, timeout=wait_s)
    dk.check_delivered([sent[0], sent[2]], got)


def test_transactional_producer_refused(kbroker, kt):
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("txn", "delayed")
    create_topic(kt, kbroker.bootstrap, topic)
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "transactional.id": kt.topic_name("tid")})
    producer.init_transactions(30)
    producer.begin_transaction()
    errors = []
    producer.produce(topic, value=b"x", headers=[("delay.ms", b"1000")],
                     on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == ck.KafkaError.INVALID_RECORD, errors
    producer.abort_transaction(30)


@pytest.mark.parametrize("family", dk.FAMILIES)
def test_sigkill_mid_way_nothing_lost_or_doubled(fresh_kbroker, kt, family):
    family_client(kt, family)
    broker = fresh_kbroker
    topic = kt.topic_name(family, "delayed-kill")
    create_topic(kt, broker.bootstrap, topic)
    rng = random.Random(7)
    producer = dk.Producer(family, broker.bootstrap)
    sent = []
    try:
        base = dk.now_ms()
        for chunk in range(4):
            sent += producer.send(topic, [(None, f"r{chunk}-{i}".encode(), [("delay.ms", str(rng.randint(200, 3500)).encode())],
                                           base) for i in range(50)])
    finally:
        producer.close()
    time.sleep(1.0)  # some delivered, most pending, some deliveries under way
    broker.kill()
    broker.restart()
    got = dk.read(family, broker.bootstrap, topic, len(sent), timeout=30)
    dk.check_delivered(sent, got)
