"""Java kafka-clients 3.9.0 consumer groups against kbroker, each member a JVM of its own running
`KbrokerHarness group-member` (groupkit's member protocol): split and rebalance under the range,
roundrobin and cooperative-sticky assignors with no record lost or read twice, SIGKILL takeover,
broker restart under a live member, publish-subscribe across groups. Committed offsets are read
back with the Java Admin's listConsumerGroupOffsets. Client defaults otherwise (session.timeout.ms
45 s, heartbeat.interval.ms 3 s); topics are created and filled with kafka-python (no JVM start)."""

from __future__ import annotations

import pytest

import groupkit as gk

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 6
STRATEGIES = ("range", "roundrobin", "cooperative-sticky")


@pytest.fixture
def kafka(kt):
    return kt.require_module("kafka")


@pytest.fixture
def spawn(java_harness, tmp_path):
    started: list[gk.Member] = []

    def start(broker, group, topic, name, strategy="range", instance_id=None):
        args = ["group-member", broker.bootstrap, group, topic, strategy] + ([instance_id] if instance_id else [])
        member = gk.Member(java_harness.argv(*args), name, tmp_path)
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def _topic(kafka, kt, broker):
    topic = kt.topic_name("java-group")
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


def _committed(java_harness, broker, group, topic):
    """The broker's stored offsets, through Admin.listConsumerGroupOffsets (OffsetFetch)."""
    out = {}
    for line in java_harness.ok("admin", broker.bootstrap, "group-offsets", group):
        if line.startswith("COMMITTED "):
            _, t, p, offset = line.split()
            if t == topic:
                out[int(p)] = int(offset)
    return out


def _ends(positions):
    ends = {}
    for p, o in positions:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_members_split_partitions_and_a_third_joins(kafka, kt, kbroker, java_harness, spawn, strategy):
    topic = _topic(kafka, kt, kbroker)
    group = f"g-{strategy}-{topic}"
    expected = _produce(kafka, kbroker, topic, 120, "first")
    a = spawn(kbroker, group, topic, "a", strategy)
    b = spawn(kbroker, group, topic, "b", strategy)
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    c = spawn(kbroker, group, topic, "c", strategy)
    # cooperative-sticky takes two rebalances: revoke from a and b, then hand the partitions to c
    gk.wait_balanced([a, b, c], PARTITIONS, 60)
    expected |= _produce(kafka, kbroker, topic, 120, "second")
    gk.wait_all_read([a, b, c], expected, 60)
    for m in (a, b, c):
        assert m.terminate() == 0, m.describe()
        assert m.closed_cleanly, m.describe()
    gk.check_exactly_once([a, b, c], expected)
    assert _committed(java_harness, kbroker, group, topic) == _ends(expected)


def test_killed_member_partitions_move_to_the_survivor(kafka, kt, kbroker, java_harness, spawn):
    topic = _topic(kafka, kt, kbroker)
    group = f"g-kill-{topic}"
    expected = _produce(kafka, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    b.kill()  # SIGKILL to the JVM: no LeaveGroup
    # the Java default session.timeout.ms is 45 s: then the coordinator drops b and a rejoins
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 90, "the survivor to own every partition", [a])
    expected |= _produce(kafka, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a], b, expected, 60)
    assert a.terminate() == 0, a.describe()
    gk.check_after_kill([a], b, expected)
    assert _committed(java_harness, kbroker, group, topic) == _ends(expected)


def test_member_resumes_across_a_broker_restart(kafka, kt, fresh_kbroker, java_harness, spawn):
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
    assert _committed(java_harness, fresh_kbroker, group, topic) == _ends(expected)
    # a new member of the same group starts at the committed offsets: nothing old is read again
    late = _produce(kafka, fresh_kbroker, topic, 12, "late")
    b = spawn(fresh_kbroker, group, topic, "b")
    gk.wait_all_read([b], late, 60)
    assert set(b.records) == late, b.describe()


def test_two_groups_each_read_the_whole_topic(kafka, kt, kbroker, java_harness, spawn):
    topic = _topic(kafka, kt, kbroker)
    expected = _produce(kafka, kbroker, topic, 60, "pubsub")
    g1 = spawn(kbroker, f"g1-{topic}", topic, "g1")
    g2 = spawn(kbroker, f"g2-{topic}", topic, "g2", "cooperative-sticky")
    gk.wait_all_read([g1], expected, 60)
    gk.wait_all_read([g2], expected, 60)
    for m in (g1, g2):
        assert m.terminate() == 0, m.describe()
    gk.check_exactly_once([g1], expected)
    gk.check_exactly_once([g2], expected)
    assert _committed(java_harness, kbroker, f"g1-{topic}", topic) == _ends(expected)
    assert _committed(java_harness, kbroker, f"g2-{topic}", topic) == _ends(expected)


def test_static_member_restarts_without_a_rebalance(kafka, kt, kbroker, java_harness, spawn):
    """group.instance.id: a SIGKILLed static member started again with the same instance id takes
    its partitions back at once (no rebalance: the other member is not reassigned) and resumes
    from its last commit."""
    topic = _topic(kafka, kt, kbroker)
    group = f"g-static-{topic}"
    expected = _produce(kafka, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a", "range", "instance-a")
    b = spawn(kbroker, group, topic, "b", "range", "instance-b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    gk.wait_for(lambda: gk.read_positions([a, b]) and a.committed == _ends(p for p in a.records)
                and b.committed == _ends(p for p in b.records), 30, "the commits", [a, b])
    a_rebalances = len([e for e in a.events if e.get("event") == "assigned"])
    b_partitions = b.assignment
    b.kill()
    b2 = spawn(kbroker, group, topic, "b2", "range", "instance-b")
    gk.wait_for(lambda: b2.assignment is not None, 30, "the restarted static member to be assigned", [a, b2])
    assert b2.assignment == b_partitions, b2.describe()
    expected |= _produce(kafka, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a, b2], b, expected, 60)
    assert len([e for e in a.events if e.get("event") == "assigned"]) == a_rebalances, a.describe()
    for m in (a, b2):
        assert m.terminate() == 0, m.describe()
    # b committed everything it read before the kill, so nothing is read twice
    gk.check_exactly_once([a, b, b2], expected)
    assert _committed(java_harness, kbroker, group, topic) == _ends(expected)
