"""A Metadata request that auto-creates a topic another broker has just created never answers
TOPIC_ALREADY_EXISTS (issue 22, item 4): Kafka answers LEADER_NOT_AVAILABLE, which every client
retries (KafkaJS treats TOPIC_ALREADY_EXISTS as fatal). On a three-broker cluster (real ZooKeeper):

- raw Metadata v4 requests (allow_auto_topic_creation, hand-written frames) for 30 fresh topics,
  each asked of the three brokers at the same instant by three threads, again until every
  partition has a leader: only NONE and LEADER_NOT_AVAILABLE are ever answered for the topic;
- producers of two client families — confluent-kafka (librdkafka) through broker 1 and broker 3,
  kafka-python through broker 2 — send to 10 more fresh topics at the same instant: every record
  is acknowledged, none fails.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

import clusterkit as ck

pytestmark = pytest.mark.timeout(240)

TOPIC_ALREADY_EXISTS, LEADER_NOT_AVAILABLE = 36, 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("cluster"), 3, {"num.partitions": "2"})
    yield c
    ck.stop_cluster(c)


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def metadata_v4(sock: socket.socket, kt, topic: str, correlation_id: int) -> tuple[int, list[int]]:
    """One Metadata v4 (allow_auto_topic_creation=true) for `topic`: its error code and its
    partitions' leaders."""
    body = struct.pack(">i", 1) + _string(topic) + b"\x01"
    sock.sendall(kt.frame(kt.request_header_v1(3, 4, correlation_id) + body))
    data = kt.recv_frame(sock)
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values

    def string():
        nonlocal pos
        (n,) = take(">h")
        s = data[pos:pos + max(n, 0)].decode()
        pos += max(n, 0)
        return s

    (corr, _throttle, brokers) = take(">iii")
    assert corr == correlation_id
    for _ in range(brokers):
        take(">i"), string(), take(">i"), string()
    string()  # cluster id
    take(">i")  # controller
    (count,) = take(">i")
    assert count == 1
    (error,) = take(">h")
    assert string() == topic
    take(">b")
    (partitions,) = take(">i")
    leaders = []
    for _ in range(partitions):
        (_perr, _index, leader) = take(">hii")
        leaders.append(leader)
        for _ in range(2):  # replicas, isr (offline replicas from v5)
            (n,) = take(">i")
            take(f">{n}i")
    return error, leaders


def test_concurrent_auto_creation_through_three_brokers_is_never_topic_already_exists(cluster, kt):
    addresses = [b.address for b in cluster.brokers.values()]
    sockets = []
    for address in addresses:
        host, port = address.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=10)
        s.settimeout(10)
        sockets.append(s)
    seen: dict[int, int] = {}
    lock = threading.Lock()
    try:
        for i in range(30):
            topic = f"auto-{i}-{time.monotonic_ns() % 10**9}"
            barrier = threading.Barrier(3)
            failures: list[BaseException] = []

            def ask(sock: socket.socket, n: int, topic=topic, barrier=barrier, failures=failures) -> None:
                try:
                    barrier.wait(10)
                    deadline = time.monotonic() + 30
                    corr = n * 10_000
                    while True:
                        corr += 1
                        error, leaders = metadata_v4(sock, kt, topic, corr)
                        with lock:
                            seen[error] = seen.get(error, 0) + 1
                        if error == 0 and leaders and all(leader >= 0 for leader in leaders):
                            return
                        assert time.monotonic() < deadline, f"{topic}: no leaders after 30 s (last error {error})"
                        time.sleep(0.02)
                except BaseException as exc:  # noqa: BLE001 - reported below
                    failures.append(exc)

            threads = [threading.Thread(target=ask, args=(s, n)) for n, s in enumerate(sockets)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not failures, failures
            assert TOPIC_ALREADY_EXISTS not in seen, f"{topic}: TOPIC_ALREADY_EXISTS answered ({seen})"
    finally:
        for s in sockets:
            s.close()
    assert set(seen) <= {0, LEADER_NOT_AVAILABLE}, seen
    print(f"Metadata answers by error code: {seen}")


def test_producers_of_two_families_create_the_same_topics_at_once(cluster, kt):
    kt.require_module("confluent_kafka")
    kt.require_module("kafka")
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    addresses = [b.address for b in cluster.brokers.values()]
    confluent = [Producer({"bootstrap.servers": addresses[i], "acks": "all", "message.timeout.ms": 30000,
                           "topic.metadata.refresh.fast.interval.ms": 50}) for i in (0, 2)]
    kafka_python = KafkaProducer(bootstrap_servers=addresses[1], acks="all", max_block_ms=30000)
    failed: list[str] = []
    acked = 0
    try:
        for i in range(10):
            topic = f"produced-{i}-{time.monotonic_ns() % 10**9}"
            barrier = threading.Barrier(3)
            results: list[str | None] = []

            def with_librdkafka(p, topic=topic, barrier=barrier, results=results) -> None:
                barrier.wait(10)
                errors = []
                p.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
                p.flush(40)
                results.append(None if errors == [None] else f"librdkafka: {errors}")

            def with_kafka_python(topic=topic, barrier=barrier, results=results) -> None:
                barrier.wait(10)
                try:
                    kafka_python.send(topic, b"y").get(timeout=40)
                    results.append(None)
                except Exception as exc:  # noqa: BLE001 - reported below
                    results.append(f"kafka-python: {exc!r}")

            threads = [threading.Thread(target=with_librdkafka, args=(p,)) for p in confluent]
            threads.append(threading.Thread(target=with_kafka_python))
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            failed += [f"{topic}: {r}" for r in results if r is not None]
            acked += sum(1 for r in results if r is None)
    finally:
        kafka_python.close(5)
    assert not failed, failed
    assert acked == 30
