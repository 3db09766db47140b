"""Consumer-protocol (KIP-848) subscriptions that change under a live member, with librdkafka
(`group.protocol=consumer`): a regular-expression subscription picks up a topic created after the
member joined, a partition increase of a subscribed topic is assigned, both without the member
rejoining; and a catastrophic pattern or a subscription to thousands of names is answered without
stalling the broker."""

from __future__ import annotations

import time
import uuid

import pytest

pytestmark = pytest.mark.timeout(120)

KBROKER_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


def _admin(ck, broker):
    return ck.admin.AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(ck, admin, name, partitions):
    for future in admin.create_topics([ck.admin.NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                      operation_timeout=30).values():
        future.result(30)


def _consumer(ck, broker, group):
    return ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                        "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})


def _wait_assigned(consumer, wanted: set[tuple[str, int]], timeout: float) -> set[tuple[str, int]]:
    deadline = time.monotonic() + timeout
    got: set[tuple[str, int]] = set()
    while time.monotonic() < deadline:
        consumer.poll(0.2)
        got = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        if got == wanted:
            return got
    raise AssertionError(f"assignment {sorted(got)} != {sorted(wanted)} after {timeout}s")


@pytest.fixture
def ck(kt):
    ck = kt.require_module("confluent_kafka")
    import confluent_kafka.admin  # noqa: F401

    return ck


def test_a_regex_subscription_picks_up_a_new_topic_and_a_partition_increase(ck, kbroker):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    admin = _admin(ck, kbroker)
    _create(ck, admin, f"{prefix}.eu", 2)
    _create(ck, admin, f"other{prefix}", 2)  # does not match
    consumer = _consumer(ck, kbroker, f"g-{prefix}")
    try:
        consumer.subscribe([f"^{prefix}\\..*"])
        _wait_assigned(consumer, {(f"{prefix}.eu", 0), (f"{prefix}.eu", 1)}, 30)
        _create(ck, admin, f"{prefix}.us", 3)
        _wait_assigned(consumer, {(f"{prefix}.eu", p) for p in range(2)} | {(f"{prefix}.us", p) for p in range(3)},
                       30)
        for future in admin.create_partitions([ck.admin.NewPartitions(f"{prefix}.eu", 4)]).values():
            future.result(30)
        _wait_assigned(consumer, {(f"{prefix}.eu", p) for p in range(4)} | {(f"{prefix}.us", p) for p in range(3)},
                       30)
    finally:
        consumer.close()


def test_a_catastrophic_pattern_and_thousands_of_names_do_not_stall_the_broker(kbroker):
    """Raw heartbeats: RE2 answers a pattern that backtracking engines take exponential time on;
    thousands of subscribed names (most of them absent) are one heartbeat."""
    import socket

    from kbroker.wire.protocol import decode_response, encode_request

    host, port = kbroker.bootstrap.rsplit(":", 1)

    def beat(sock, member, **fields):
        body = {"group_id": f"bad-{member}", "member_id": member, "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout": 10000, "subscribed_topic_names": [],
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": [], **fields}
        sock.sendall(encode_request(68, 1, 1, "bad", body))
        size = int.from_bytes(_recv(sock, 4), "big")
        return decode_response(68, 1, _recv(sock, size))[1]

    with socket.create_connection((host, int(port)), timeout=20) as sock:
        started = time.monotonic()
        r = beat(sock, "evil", subscribed_topic_regex="(a+)+$" + "a" * 40)
        assert r.error_code == 0, r
        r = beat(sock, "backref", subscribed_topic_regex="(a)\\1")  # not RE2: refused, not evaluated
        assert r.error_code == 128  # INVALID_REGULAR_EXPRESSION
        r = beat(sock, "many", subscribed_topic_names=[f"absent-{i}" for i in range(5000)])
        assert r.error_code == 0 and r.member_epoch == 1
        assert time.monotonic() - started < 10
    # and the broker still serves: ApiVersions answers
    assert kbroker.alive()


def _recv(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf
