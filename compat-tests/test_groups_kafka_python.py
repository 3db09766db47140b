"""kafka-python 3.x consumer groups against kbroker, each member a process of its own (groupkit):
split and rebalance with no record lost or read twice, SIGKILL takeover, broker restart under live
members, publish-subscribe across groups. Client settings are kafka-python's defaults."""

from __future__ import annotations

import sys

import pytest

import groupkit as gk

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
MEMBER = str(gk.HERE / "group_members" / "kafka_python_member.py")


@pytest.fixture
def kafka(kt):
    return kt.require_module("kafka")


@pytest.fixture
def spawn(tmp_path):
    started: list[gk.Member] = []

    def start(broker, group, topic, name, *extra):
        member = gk.Member([sys.executable, MEMBER, broker.bootstrap, group, topic, *extra], name, tmp_path)
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def _topic(kafka, kt, broker):
    topic = kt.topic_name("kp-group")
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    return topic


def _produce(kafka, broker, topic, n, tag):
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=20,
                                   reconnect_backoff_max_ms=1000)
    try:
        futures = [producer.send(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode())
                   for i in range(n)]
        producer.flush(30)
        return {(f.get(30).partition, f.get(30).offset) for f in futures}
    finally:
        producer.close(10)


def _committed(kafka, broker, group, topic):
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets([group])[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}


def _ends(expected):
    ends = {}
    for p, o in expected:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky"])
def test_members_split_partitions_and_a_third_joins(kafka, kt, kbroker, spawn, strategy):
    topic = _topic(kafka, kt, kbroker)
    group = f"g-{strategy}-{topic}"
    expected = _produce(kafka, kbroker, topic, 120, "first")
    a = spawn(kbroker, group, topic, "a", "--strategy", strategy)
    b = spawn(kbroker, group, topic, "b", "--strategy", strategy)
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    c = spawn(kbroker, group, topic, "c", "--strategy", strategy)
    gk.wait_balanced([a, b, c], PARTITIONS, 60)
    expected |= _produce(kafka, kbroker, topic, 120, "second")
    gk.wait_all_read([a, b, c], expected, 60)
    for m in (a, b, c):
        assert m.terminate() == 0, m.describe()
        assert m.closed_cleanly, m.describe()
    gk.check_exactly_once([a, b, c], expected)
    assert _committed(kafka, kbroker, group, topic) == _ends(expected)


def test_killed_member_partitions_move_to_the_survivor(kafka, kt, kbroker, spawn):
    topic = _topic(kafka, kt, kbroker)
    group = f"g-kill-{topic}"
    expected = _produce(kafka, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    b.kill()
    # kafka-python's default session.timeout.ms is 45 s: then the coordinator drops b and a rejoins
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 90, "the survivor to own every partition", [a])
    expected |= _produce(kafka, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a], b, expected, 60)
    assert a.terminate() == 0, a.describe()
    gk.check_after_kill([a], b, expected)
    assert _committed(kafka, kbroker, group, topic) == _ends(expected)


def test_members_resume_across_a_broker_restart(kafka, kt, fresh_kbroker, spawn):
    topic = _topic(kafka, kt, fresh_kbroker)
    group = f"g-restart-{topic}"
    expected = _produce(kafka, fresh_kbroker, topic, 60, "before")
    a = spawn(fresh_kbroker, group, topic, "a")
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 60, "the member to be assigned", [a])
    gk.wait_all_read([a], expected, 60)
    gk.wait_for(lambda: a.committed == _ends(expected), 30, "the commits", [a])
    fresh_kbroker.restart()
    expected |= _produce(kafka, fresh_kbroker, topic, 60, "after")
    gk.wait_all_read([a], expected, 90)
    assert a.terminate() == 0, a.describe()
    gk.check_exactly_once([a], expected)
    assert _committed(kafka, fresh_kbroker, group, topic) == _ends(expected)
    # a new member of the same group starts at the committed offsets: nothing old is read again
    late = _produce(kafka, fresh_kbroker, topic, 12, "late")
    b = spawn(fresh_kbroker, group, topic, "b")
    gk.wait_all_read([b], late, 60)
    assert set(b.records) == late, b.describe()


def test_two_groups_each_read_the_whole_topic(kafka, kt, kbroker, spawn):
    topic = _topic(kafka, kt, kbroker)
    expected = _produce(kafka, kbroker, topic, 60, "pubsub")
    g1 = spawn(kbroker, f"g1-{topic}", topic, "g1")
    g2 = spawn(kbroker, f"g2-{topic}", topic, "g2")
    gk.wait_all_read([g1], expected, 60)
    gk.wait_all_read([g2], expected, 60)
    for m in (g1, g2):
        assert m.terminate() == 0
    gk.check_exactly_once([g1], expected)
    gk.check_exactly_once([g2], expected)
