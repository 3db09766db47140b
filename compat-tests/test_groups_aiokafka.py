"""aiokafka consumer groups against kbroker, each member a process of its own (groupkit): split and
rebalance with no record lost or read twice, SIGKILL takeover, broker restart under live members,
publish-subscribe across groups. Client settings are aiokafka's defaults (members turn auto-commit
off and commit after each batch)."""

from __future__ import annotations

import asyncio
import sys

import pytest

import groupkit as gk

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
MEMBER = str(gk.HERE / "group_members" / "aiokafka_member.py")


@pytest.fixture
def aiokafka(kt):
    return kt.require_module("aiokafka")


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


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def _topic(aiokafka, kt, broker):
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = kt.topic_name("aio-group")

    async def create():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        finally:
            await admin.close()

    run(create())
    return topic


def _produce(aiokafka, broker, topic, n, tag):
    async def produce():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            futures = [await producer.send(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode())
                       for i in range(n)]
            return {(md.partition, md.offset) for md in [await asyncio.wait_for(f, 30) for f in futures]}
        finally:
            await producer.stop()

    return run(produce())


def _committed(aiokafka, broker, group, topic):
    from aiokafka.admin import AIOKafkaAdminClient

    async def fetch():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            return await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()

    return {tp.partition: om.offset for tp, om in run(fetch()).items() if tp.topic == topic}


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky"])
def test_members_split_partitions_and_a_third_joins(aiokafka, kt, kbroker, spawn, strategy):
    topic = _topic(aiokafka, kt, kbroker)
    group = f"g-{strategy}-{topic}"
    expected = _produce(aiokafka, kbroker, topic, 120, "first")
    a = spawn(kbroker, group, topic, "a", "--strategy", strategy)
    b = spawn(kbroker, group, topic, "b", "--strategy", strategy)
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    c = spawn(kbroker, group, topic, "c", "--strategy", strategy)
    gk.wait_balanced([a, b, c], PARTITIONS, 60)
    expected |= _produce(aiokafka, kbroker, topic, 120, "second")
    gk.wait_all_read([a, b, c], expected, 60)
    for m in (a, b, c):
        assert m.terminate() == 0, m.describe()
        assert m.closed_cleanly, m.describe()
    gk.check_exactly_once([a, b, c], expected)
    assert _committed(aiokafka, kbroker, group, topic) == gk.end_offsets(expected)


def test_killed_member_partitions_move_to_the_survivor(aiokafka, kt, kbroker, spawn):
    topic = _topic(aiokafka, kt, kbroker)
    group = f"g-kill-{topic}"
    expected = _produce(aiokafka, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    b.kill()
    # aiokafka's default session_timeout_ms is 10 s: then the coordinator drops b and a rejoins
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 60, "the survivor to own every partition", [a])
    expected |= _produce(aiokafka, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a], b, expected, 60)
    assert a.terminate() == 0, a.describe()
    gk.check_after_kill([a], b, expected)
    assert _committed(aiokafka, kbroker, group, topic) == gk.end_offsets(expected)


def test_members_resume_across_a_broker_restart(aiokafka, kt, fresh_kbroker, spawn):
    topic = _topic(aiokafka, kt, fresh_kbroker)
    group = f"g-restart-{topic}"
    expected = _produce(aiokafka, fresh_kbroker, topic, 60, "before")
    a = spawn(fresh_kbroker, group, topic, "a")
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 60, "the member to be assigned", [a])
    gk.wait_all_read([a], expected, 60)
    gk.wait_for(lambda: a.committed == gk.end_offsets(expected), 30, "the commits", [a])
    fresh_kbroker.restart()
    expected |= _produce(aiokafka, fresh_kbroker, topic, 60, "after")
    gk.wait_all_read([a], expected, 90)
    assert a.terminate() == 0, a.describe()
    gk.check_exactly_once([a], expected)
    assert _committed(aiokafka, fresh_kbroker, group, topic) == gk.end_offsets(expected)
    # a new member of the same group starts at the committed offsets: nothing old is read again
    late = _produce(aiokafka, fresh_kbroker, topic, 12, "late")
    b = spawn(fresh_kbroker, group, topic, "b")
    gk.wait_all_read([b], late, 60)
    assert set(b.records) == late, b.describe()


def test_two_groups_each_read_the_whole_topic(aiokafka, kt, kbroker, spawn):
    topic = _topic(aiokafka, kt, kbroker)
    expected = _produce(aiokafka, kbroker, topic, 60, "pubsub")
    g1 = spawn(kbroker, f"g1-{topic}", topic, "g1")
    g2 = spawn(kbroker, f"g2-{topic}", topic, "g2")
    gk.wait_all_read([g1], expected, 60)
    gk.wait_all_read([g2], expected, 60)
    for m in (g1, g2):
        assert m.terminate() == 0
    gk.check_exactly_once([g1], expected)
    gk.check_exactly_once([g2], expected)
