"""The consumer group protocol (KIP-848, `group.protocol=consumer`) with confluent-kafka's
librdkafka, each member a process of its own (groupkit): members 1 -> 3 -> 1 under a producer with
every record read and no partition owned by two members at once (from the members' own assignment
callbacks, timestamped where they ran), a SIGKILLed member's partitions taken over after the
broker's session timeout, a static member back after SIGKILL with its partitions, and a zombie's
commit refused. The broker's heartbeat interval and session timeout are short for the test
(`group.consumer.*`, lowered minimums)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import groupkit as gk

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
SESSION_TIMEOUT_S = 6
MEMBER = str(gk.HERE / "group_members" / "confluent_member.py")
KBROKER_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_S * 1000),
    "group.consumer.min.session.timeout.ms": "1000",
}


@pytest.fixture
def ck(kt):
    return kt.require_module("confluent_kafka")


@pytest.fixture
def spawn(tmp_path):
    started: list[gk.Member] = []

    def start(broker, group, topic, name, *extra):
        member = gk.Member([sys.executable, MEMBER, broker.bootstrap, group, topic, "--group-protocol", "consumer",
                            *extra], name, tmp_path)
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def _topic(ck, kt, broker, partitions=PARTITIONS):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = kt.topic_name("kip848")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                      operation_timeout=30).values():
        future.result(30)
    return topic


def _produce(ck, broker, topic, n, tag):
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    acked = set()
    for i in range(n):
        producer.produce(topic, key=f"{tag}-{i}".encode(), value=b"v",
                         on_delivery=lambda err, msg: err is None and acked.add((msg.partition(), msg.offset())))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == n
    return acked


class SteadyProducer:
    """Produces a record every few milliseconds until stopped; what it acknowledged is `acked`."""

    def __init__(self, ck, broker, topic) -> None:
        self.producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        self.topic, self.acked, self._stop = topic, set(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, key=f"steady-{i}".encode(), value=b"v", on_delivery=self._delivered)
            self.producer.poll(0.005)
            i += 1

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.add((msg.partition(), msg.offset()))

    def stop(self) -> set[tuple[int, int]]:
        self._stop.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0
        return set(self.acked)


def test_members_one_to_three_to_one_under_load(ck, kt, kbroker, spawn):
    topic = _topic(ck, kt, kbroker)
    group = f"g-{topic}"
    steady = SteadyProducer(ck, kbroker, topic)
    try:
        a = spawn(kbroker, group, topic, "a")
        gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 30, "the first member to own everything", [a])
        b = spawn(kbroker, group, topic, "b")
        c = spawn(kbroker, group, topic, "c")
        gk.wait_balanced([a, b, c], PARTITIONS, 30)
        time.sleep(1)
        for m in (b, c):
            assert m.terminate() == 0, m.describe()
        gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 30, "the last member to own everything", [a])
    finally:
        expected = steady.stop()
    gk.wait_all_read([a], expected - set(b.records) - set(c.records), 60)
    assert a.terminate() == 0, a.describe()
    gk.check_exactly_once([a, b, c], expected)
    gk.check_single_owner([a, b, c])


def test_a_killed_member_is_replaced_after_the_session_timeout(ck, kt, kbroker, spawn):
    topic = _topic(ck, kt, kbroker)
    group = f"g-kill-{topic}"
    expected = _produce(ck, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 30)
    gk.wait_all_read([a, b], expected, 30)
    killed_at, killed_wall = time.monotonic(), time.time()
    b.kill()
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), SESSION_TIMEOUT_S + 10,
                "the survivor to own every partition", [a])
    assert time.monotonic() - killed_at >= SESSION_TIMEOUT_S - 1  # not before the session ran out
    expected |= _produce(ck, kbroker, topic, 60, "after")
    gk.wait_all_read_after_kill([a], b, expected, 30)
    assert a.terminate() == 0, a.describe()
    gk.check_after_kill([a], b, expected)
    gk.check_single_owner([a, b], {"b": killed_wall})


def test_a_static_member_back_in_time_keeps_its_partitions(ck, kt, kbroker, spawn):
    topic = _topic(ck, kt, kbroker)
    group = f"g-static-{topic}"
    expected = _produce(ck, kbroker, topic, 60, "before")
    a = spawn(kbroker, group, topic, "a", "--instance-id", "static-a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 30)
    gk.wait_all_read([a, b], expected, 30)
    owned, seen_by_b = a.assignment, b.assignments
    a.terminate()  # a static member's close leaves with epoch -2: its assignment waits for it
    a2 = spawn(kbroker, group, topic, "a2", "--instance-id", "static-a")
    gk.wait_for(lambda: a2.assignment == owned, SESSION_TIMEOUT_S - 1, "the static member's partitions", [a2, b])
    assert b.assignments == seen_by_b, f"the other member's partitions moved\n{b.describe()}"
    for m in (a2, b):
        assert m.terminate() == 0, m.describe()


def test_a_zombie_commit_is_refused(ck, kt, kbroker):
    """A member fenced from the group (its epoch moved on) cannot commit: STALE_MEMBER_EPOCH."""
    from kbroker.wire.protocol import decode_response, encode_request

    import socket

    topic = _topic(ck, kt, kbroker, partitions=1)
    host, port = kbroker.bootstrap.rsplit(":", 1)

    def ask(sock, key, version, body):
        sock.sendall(encode_request(key, version, 1, "zombie", body))
        size = int.from_bytes(gk_recv(sock, 4), "big")
        return decode_response(key, version, gk_recv(sock, size))[1]

    with socket.create_connection((host, int(port)), timeout=10) as sock:
        beat = ask(sock, 68, 1, {"group_id": f"z-{topic}", "member_id": "zombie-1", "member_epoch": 0,
                                 "instance_id": None, "rack_id": None, "rebalance_timeout": 10000,
                                 "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                                 "server_assignor": None, "topic_partitions": []})
        assert beat.error_code == 0 and beat.member_epoch == 1
        ask(sock, 68, 1, {"group_id": f"z-{topic}", "member_id": "other", "member_epoch": 0, "instance_id": None,
                          "rack_id": None, "rebalance_timeout": 10000, "subscribed_topic_names": [topic],
                          "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})

        def commit(epoch):
            body = ask(sock, 8, 9, {"group_id": f"z-{topic}", "generation_id_or_member_epoch": epoch,
                                    "member_id": "zombie-1", "group_instance_id": None,
                                    "topics": [{"name": topic, "partitions": [
                                        {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                         "committed_metadata": ""}]}]})
            return body.topics[0].partitions[0].error_code

        assert commit(1) == 0
        assert commit(0) == 113  # STALE_MEMBER_EPOCH


def gk_recv(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf
