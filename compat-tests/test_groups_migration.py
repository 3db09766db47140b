"""A live group rolled from the classic protocol to the consumer protocol (KIP-848) and back, with
confluent-kafka members (processes of their own, groupkit) under a steady producer:
`group.consumer.migration.policy=bidirectional` (Kafka 4's default). Classic members (eager `range`
and `cooperative-sticky`) form a group; a consumer-protocol member joins (the group becomes a
consumer group, the classic members stay in it through JoinGroup/SyncGroup/Heartbeat answered by
the coordinator); the classic members are replaced one by one by consumer-protocol members; then
the reverse. Every acknowledged record is read, nothing is read twice by a graceful hand-over, no
partition is ever owned by two members at once (timestamped assignment callbacks), and the group
type seen by ListGroups follows the roll."""

from __future__ import annotations

import sys
import time

import pytest

import groupkit as gk
import socket

from kbroker.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
MEMBER = str(gk.HERE / "group_members" / "confluent_member.py")
KBROKER_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}


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


def _topic(kt, broker):
    from confluent_kafka.admin import AdminClient as CkAdmin, NewTopic

    topic = kt.topic_name("migrate")
    admin = CkAdmin({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
                                      operation_timeout=30).values():
        future.result(30)
    return topic


def _group_type(broker, group) -> str | None:
    """The group's type as ListGroups v5 reports it."""

    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode_request(16, 5, 1, "migration-test", {"states_filter": [], "types_filter": []}))
        size = int.from_bytes(_recv(sock, 4), "big")
        body = decode_response(16, 5, _recv(sock, size))[1]
    return next((g.group_type for g in body.groups if g.group_id == group), None)


def _recv(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


@pytest.mark.parametrize("classic", ["cooperative-sticky", "range"])
def test_a_group_rolls_from_classic_to_consumer_and_back(ck, kt, kbroker, spawn, classic):
    topic = _topic(kt, kbroker)
    group = f"g-{classic}-{topic}"
    steady = gk.SteadyProducer(ck, kbroker.bootstrap, topic)
    members: list[gk.Member] = []
    try:
        old = [spawn(kbroker, group, topic, f"classic-{i}", "--strategy", classic) for i in range(2)]
        members += old
        gk.wait_balanced(old, PARTITIONS, 30)
        assert _group_type(kbroker, group) == "classic"

        new1 = spawn(kbroker, group, topic, "consumer-1", "--group-protocol", "consumer")
        members.append(new1)
        gk.wait_balanced(old + [new1], PARTITIONS, 30)
        assert _group_type(kbroker, group) == "consumer"  # upgraded while its classic members stay

        assert old[0].terminate() == 0, old[0].describe()
        new2 = spawn(kbroker, group, topic, "consumer-2", "--group-protocol", "consumer")
        members.append(new2)
        gk.wait_balanced([old[1], new1, new2], PARTITIONS, 30)
        assert old[1].terminate() == 0, old[1].describe()
        gk.wait_balanced([new1, new2], PARTITIONS, 30)
        assert _group_type(kbroker, group) == "consumer"

        # and back: classic members join the consumer group, the consumer-protocol ones leave
        back = spawn(kbroker, group, topic, "classic-back", "--strategy", classic)
        members.append(back)
        gk.wait_balanced([new1, new2, back], PARTITIONS, 30)
        assert new1.terminate() == 0, new1.describe()
        gk.wait_balanced([new2, back], PARTITIONS, 30)
        assert new2.terminate() == 0, new2.describe()
        gk.wait_for(lambda: back.assignment == set(range(PARTITIONS)), 30, "the last member to own everything",
                    [back])
        assert _group_type(kbroker, group) == "classic"  # downgraded when the last consumer member left
        time.sleep(0.5)
    finally:
        expected = steady.stop()
    gk.wait_all_read([back], expected - gk.read_positions(members).keys(), 60)
    assert back.terminate() == 0, back.describe()
    gk.check_exactly_once(members, expected)
    gk.check_single_owner(members)
