"""confluent-kafka (bundled librdkafka) consumer groups against kbroker, each member a process of its
own (groupkit): split and rebalance with no record lost or read twice (eager and cooperative
strategies), SIGKILL takeover, broker restart under live members, publish-subscribe across groups,
the first assignment of a new group well inside librdkafka's session timeout, and a static member
(`group.instance.id`) that comes back after SIGKILL without a rebalance. Client settings are
librdkafka's defaults apart from `auto.offset.reset=earliest` and the strategy under test."""

from __future__ import annotations

import sys
import time

import pytest

import groupkit as gk

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
MEMBER = str(gk.HERE / "group_members" / "confluent_member.py")
SESSION_TIMEOUT_S = 45  # librdkafka's session.timeout.ms default


@pytest.fixture
def ck(kt):
    return kt.require_module("confluent_kafka")


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


def _admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _topic(ck, kt, broker):
    from confluent_kafka.admin import NewTopic

    topic = kt.topic_name("ck-group")
    admin = _admin(broker)  # kept referenced: the futures fail with _DESTROY once it is collected
    for future in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                                               operation_timeout=30).values():
        future.result(30)
    return topic


def _produce(ck, broker, topic, n, tag):
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    acked, failed = set(), []

    def on_delivery(err, msg):
        if err is not None:
            failed.append(err)
        else:
            acked.add((msg.partition(), msg.offset()))

    for i in range(n):
        producer.produce(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode(), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0, "messages still in flight after 30 s"
    assert not failed, f"delivery failed: {failed[:3]}"
    assert len(acked) == n
    return acked


def _committed(ck, broker, group, topic):
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = _admin(broker)
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)
    result = futures[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic}


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_members_split_partitions_and_a_third_joins(ck, kt, kbroker, spawn, strategy):
    topic = _topic(ck, kt, kbroker)
    group = f"g-{strategy}-{topic}"
    expected = _produce(ck, kbroker, topic, 120, "first")
    a = spawn(kbroker, group, topic, "a", "--strategy", strategy)
    b = spawn(kbroker, group, topic, "b", "--strategy", strategy)
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    c = spawn(kbroker, group, topic, "c", "--strategy", strategy)
    gk.wait_balanced([a, b, c], PARTITIONS, 60)
    expected |= _produce(ck, kbroker, topic, 120, "second")
    gk.wait_all_read([a, b, c], expected, 60)
    for m in (a, b, c):
        assert m.terminate() == 0, m.describe()
        assert m.closed_cleanly, m.describe()
    gk.check_exactly_once([a, b, c], expected)
    assert _committed(ck, kbroker, group, topic) == gk.end_offsets(expected)


def test_killed_member_partitions_move_to_the_survivor(ck, kt, kbroker, spawn):
    topic = _topic(ck, kt, kbroker)
    group = f"g-kill-{topic}"
    expected = _produce(ck, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    b.kill()
    # librdkafka's default session.timeout.ms is 45 s: then the coordinator drops b and a rejoins
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 2 * SESSION_TIMEOUT_S,
                "the survivor to own every partition", [a])
    expected |= _produce(ck, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a], b, expected, 60)
    assert a.terminate() == 0, a.describe()
    gk.check_after_kill([a], b, expected)
    assert _committed(ck, kbroker, group, topic) == gk.end_offsets(expected)


def test_members_resume_across_a_broker_restart(ck, kt, fresh_kbroker, spawn):
    topic = _topic(ck, kt, fresh_kbroker)
    group = f"g-restart-{topic}"
    expected = _produce(ck, fresh_kbroker, topic, 60, "before")
    a = spawn(fresh_kbroker, group, topic, "a")
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 60, "the member to be assigned", [a])
    gk.wait_all_read([a], expected, 60)
    gk.wait_for(lambda: a.committed == gk.end_offsets(expected), 30, "the commits", [a])
    fresh_kbroker.restart()
    expected |= _produce(ck, fresh_kbroker, topic, 60, "after")
    gk.wait_all_read([a], expected, 90)
    assert a.terminate() == 0, a.describe()
    gk.check_exactly_once([a], expected)
    assert _committed(ck, fresh_kbroker, group, topic) == gk.end_offsets(expected)
    # a new member of the same group starts at the committed offsets: nothing old is read again
    late = _produce(ck, fresh_kbroker, topic, 12, "late")
    b = spawn(fresh_kbroker, group, topic, "b")
    gk.wait_all_read([b], late, 60)
    assert set(b.records) == late, b.describe()


def test_two_groups_each_read_the_whole_topic(ck, kt, kbroker, spawn):
    topic = _topic(ck, kt, kbroker)
    expected = _produce(ck, kbroker, topic, 60, "pubsub")
    g1 = spawn(kbroker, f"g1-{topic}", topic, "g1")
    g2 = spawn(kbroker, f"g2-{topic}", topic, "g2")
    gk.wait_all_read([g1], expected, 60)
    gk.wait_all_read([g2], expected, 60)
    for m in (g1, g2):
        assert m.terminate() == 0
    gk.check_exactly_once([g1], expected)
    gk.check_exactly_once([g2], expected)


def test_first_member_is_assigned_well_before_the_session_timeout(ck, kt, kbroker, spawn):
    # the module's broker runs with the default group.initial.rebalance.delay.ms (3000)
    topic = _topic(ck, kt, kbroker)
    started = time.monotonic()  # the member subscribes right after it starts: this bounds from above
    a = spawn(kbroker, f"g-first-{topic}", topic, "a")
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 15, "the first member's assignment", [a])
    took = time.monotonic() - started
    assert took < 15 < SESSION_TIMEOUT_S, f"assigned {took:.1f}s after start"
    assert a.terminate() == 0, a.describe()


def test_static_member_back_after_sigkill_keeps_its_partitions_without_a_rebalance(ck, kt, kbroker, spawn):
    topic = _topic(ck, kt, kbroker)
    group = f"g-static-{topic}"
    expected = _produce(ck, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a", "--instance-id", "static-a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    owned, seen_by_b = a.assignment, b.assignments
    killed_at = time.monotonic()
    a.kill()
    a2 = spawn(kbroker, group, topic, "a2", "--instance-id", "static-a")
    # back with the same instance id inside the session timeout: the coordinator hands the new
    # member id the old assignment; the group stays Stable
    gk.wait_for(lambda: a2.assignment is not None, SESSION_TIMEOUT_S - 15, "the restarted static member's assignment",
                [a2, b])
    assert time.monotonic() - killed_at < SESSION_TIMEOUT_S
    assert a2.assignment == owned, a2.describe()
    expected |= _produce(ck, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a2, b], a, expected, 60)
    assert b.assignments == seen_by_b, f"the other member went through a rebalance\n{b.describe()}"
    assert a2.assignments == [owned], a2.describe()
    gk.check_after_kill([a2, b], a, expected)
    for m in (a2, b):
        assert m.terminate() == 0, m.describe()
