"""KafkaJS 2.2.4 consumer groups against kbroker: each member a Node process of its own running
`harness.js group-member` (groupkit's member protocol; kafkajskit.member_argv), committing after each
batch with consumer.commitOffsets. KafkaJS has one assignor (RoundRobinAssigner), no static
membership and no cooperative rebalancing, so these are the eager round-robin scenarios of the other
families' group modules: a split and a third member joining, a SIGKILLed member's partitions taken
over after its session timeout (10 s here), a member carrying on across a broker restart and a new
member resuming from the committed offsets, two groups each reading the whole topic. Records are
produced and committed offsets read back (fetchOffsets) with KafkaJS too; describeGroups of the
running group is compared with what the members report."""

from __future__ import annotations

import groupkit as gk
import kafkajskit as kj
import pytest

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def kafkajs(kt, tmp_path_factory):
    """The KafkaJS harness: node + the locked KafkaJS, or a skip (a failure under CI=true)."""
    return kj.harness(kt, tmp_path_factory.mktemp("kafkajs"))


PARTITIONS = 6
SESSION_TIMEOUT_MS = 10000
KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def spawn(kafkajs, tmp_path):
    started: list[gk.Member] = []

    def start(broker, group, topic, name):
        member = gk.Member(kj.member_argv(kafkajs, broker.bootstrap, group, topic, SESSION_TIMEOUT_MS), name,
                           tmp_path, env=kj.member_env())
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def _topic(kt, kafkajs, broker):
    topic = kt.topic_name("kafkajs-group")
    kafkajs.create_topic(broker.bootstrap, topic, PARTITIONS)
    return topic


def _produce(kt, kafkajs, broker, topic, n, tag):
    msgs = [kt.Msg(i % PARTITIONS, f"{tag}-{i}".encode(), f"{tag}-value-{i}".encode(), (), -1) for i in range(n)]
    acks = kj.client(kt, kafkajs).produce(broker.bootstrap, topic, msgs)
    return gk.expected_positions(acks)


def test_members_split_partitions_and_a_third_joins(kt, kbroker, kafkajs, spawn):
    topic = _topic(kt, kafkajs, kbroker)
    group = f"g-split-{topic}"
    expected = _produce(kt, kafkajs, kbroker, topic, 120, "first")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    c = spawn(kbroker, group, topic, "c")
    gk.wait_balanced([a, b, c], PARTITIONS, 60)
    expected |= _produce(kt, kafkajs, kbroker, topic, 120, "second")
    gk.wait_all_read([a, b, c], expected, 60)

    [g] = kafkajs.admin_ok(kbroker.bootstrap, "describeGroups", [group])["groups"]
    assert (g["state"], g["protocolType"], g["protocol"]) == ("Stable", "consumer", "RoundRobinAssigner"), g
    described = sorted(sorted(m["assignment"].get(topic, [])) for m in g["members"])
    assert described == sorted(sorted(m.assignment) for m in (a, b, c)), (g, [m.assignment for m in (a, b, c)])
    assert all(m["topics"] == [topic] for m in g["members"]), g

    for m in (a, b, c):
        assert m.terminate() == 0, m.describe()
        assert m.closed_cleanly, m.describe()
    gk.check_exactly_once([a, b, c], expected)
    assert kafkajs.committed(kbroker.bootstrap, group, topic) == gk.end_offsets(expected)
    [g] = kafkajs.admin_ok(kbroker.bootstrap, "describeGroups", [group])["groups"]
    assert (g["state"], g["members"]) == ("Empty", []), g


def test_killed_member_partitions_move_to_the_survivor(kt, kbroker, kafkajs, spawn):
    topic = _topic(kt, kafkajs, kbroker)
    group = f"g-kill-{topic}"
    expected = _produce(kt, kafkajs, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    b.kill()  # SIGKILL: no LeaveGroup; the coordinator drops b after its session timeout
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), SESSION_TIMEOUT_MS / 1000 + 30,
                "the survivor to own every partition", [a])
    expected |= _produce(kt, kafkajs, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a], b, expected, 60)
    assert a.terminate() == 0, a.describe()
    gk.check_after_kill([a], b, expected)
    assert kafkajs.committed(kbroker.bootstrap, group, topic) == gk.end_offsets(expected)


def test_member_resumes_across_a_broker_restart(kt, fresh_kbroker, kafkajs, spawn):
    topic = _topic(kt, kafkajs, fresh_kbroker)
    group = f"g-restart-{topic}"
    expected = _produce(kt, kafkajs, fresh_kbroker, topic, 60, "before")
    a = spawn(fresh_kbroker, group, topic, "a")
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 60, "the member to be assigned", [a])
    gk.wait_all_read([a], expected, 60)
    gk.wait_for(lambda: a.committed == gk.end_offsets(expected), 30, "the commits", [a])
    fresh_kbroker.restart()
    expected |= _produce(kt, kafkajs, fresh_kbroker, topic, 60, "after")
    gk.wait_all_read([a], expected, 90)
    assert a.terminate() == 0, a.describe()
    gk.check_exactly_once([a], expected)
    assert kafkajs.committed(fresh_kbroker.bootstrap, group, topic) == gk.end_offsets(expected)
    # two new members of the same group start at the committed offsets: nothing old is read again
    late = _produce(kt, kafkajs, fresh_kbroker, topic, 24, "late")
    b = spawn(fresh_kbroker, group, topic, "b")
    c = spawn(fresh_kbroker, group, topic, "c")
    gk.wait_all_read([b, c], late, 60)
    assert set(gk.read_positions([b, c])) == late, (b.describe(), c.describe())


def test_two_groups_each_read_the_whole_topic(kt, kbroker, kafkajs, spawn):
    topic = _topic(kt, kafkajs, kbroker)
    expected = _produce(kt, kafkajs, kbroker, topic, 60, "pubsub")
    g1 = spawn(kbroker, f"g1-{topic}", topic, "g1")
    g2 = spawn(kbroker, f"g2-{topic}", topic, "g2")
    gk.wait_all_read([g1], expected, 60)
    gk.wait_all_read([g2], expected, 60)
    for m in (g1, g2):
        assert m.terminate() == 0, m.describe()
    gk.check_exactly_once([g1], expected)
    gk.check_exactly_once([g2], expected)
    for g in (f"g1-{topic}", f"g2-{topic}"):
        assert kafkajs.committed(kbroker.bootstrap, g, topic) == gk.end_offsets(expected)
