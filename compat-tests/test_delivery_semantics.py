"""The at-most-once and at-least-once examples of docs/groups.md, run as written (kafka-python),
with a crash injected at the one point where the two differ."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


@pytest.fixture
def kafka(kt):
    return kt.require_module("kafka")


def _produce(kafka, kt, broker, n=30):
    topic = kt.topic_name("semantics")
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, 3, 1)])
    finally:
        admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [producer.send(topic, value=f"m{i}".encode()) for i in range(n)]
    producer.flush(30)
    produced = {(f.get(30).partition, f.get(30).offset) for f in futures}
    producer.close(10)
    return topic, produced


def _run(example, broker, group, topic, *extra):
    done = subprocess.run([sys.executable, str(EXAMPLES / example), "--bootstrap", broker.bootstrap,
                           "--group", group, "--topic", topic, "--idle-exit-s", "3", "--session-timeout-ms", "6000", *extra],
                          capture_output=True, text=True, timeout=90)
    processed = [tuple(int(x) for x in line.split()[:2]) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, processed, done.stderr


def test_at_most_once_loses_the_batch_committed_before_a_crash(kafka, kt, kbroker):
    topic, produced = _produce(kafka, kt, kbroker)
    group = f"amo-{topic}"
    code, first, err = _run("at_most_once.py", kbroker, group, topic, "--crash-after-commit", "1")
    assert code == 17, err
    assert first == []  # it died after committing, before processing anything
    code, second, err = _run("at_most_once.py", kbroker, group, topic)
    assert code == 0, err
    counts = Counter(first + second)
    assert all(n == 1 for n in counts.values()), "at-most-once processed a record twice"
    lost = produced - set(counts)
    assert lost, "the batch committed before the crash should never be processed"
    assert set(counts) <= produced


def test_at_least_once_reads_the_uncommitted_batch_again(kafka, kt, kbroker):
    topic, produced = _produce(kafka, kt, kbroker)
    group = f"alo-{topic}"
    code, first, err = _run("at_least_once.py", kbroker, group, topic, "--crash-before-commit", "1")
    assert code == 17, err
    assert first, "the first batch is processed before the crash"
    code, second, err = _run("at_least_once.py", kbroker, group, topic)
    assert code == 0, err
    counts = Counter(first + second)
    assert set(counts) == produced, "at-least-once must not lose a record"
    assert {pos for pos, n in counts.items() if n == 2} == set(first)  # exactly the uncommitted batch
    # and a third run finds everything committed
    code, third, err = _run("at_least_once.py", kbroker, group, topic)
    assert code == 0 and third == [], err
