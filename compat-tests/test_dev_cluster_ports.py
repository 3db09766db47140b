"""`kbroker dev-cluster` on the ports applications are configured for (issue 22, item 7): broker i
on `--base-port` + i - 1 (9092, 9093, ... by default), ZooKeeper on `--zookeeper-port` (2181), a
port in use replaced by a free one with a line on stderr saying so, and `--advertise-host
localhost` advertised in Metadata while the brokers listen on 127.0.0.1.

The test never touches 9092 or 2181 (a developer's own cluster may be there): it picks a free
pair of ports as the base, holds the first one itself, and checks that broker 1 falls back with
the message while broker 2 gets the second; then confluent-kafka and kafka-python produce and
consume through `localhost:<port>` and Metadata names `localhost`. The defaults themselves are
unit-tested (tests/test_dev_cluster_port_choice.py)."""

from __future__ import annotations

import re
import signal
import socket
import time

import pytest

import clusterkit as ck
from test_dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(180)


def _free_pair() -> tuple[int, socket.socket]:
    """A port P with P + 1 free too, P held by the returned listening socket."""
    from kbroker.dev_cluster import port_free

    for _ in range(50):
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        if port < 65535 and port_free(port + 1):
            held.listen()
            return port, held
        held.close()
    raise AssertionError("no free pair of ports")


def test_base_port_fallback_and_advertised_localhost(tmp_path, kt):
    ck.require_zookeeper()
    kt.require_module("confluent_kafka")
    kt.require_module("kafka")
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, KafkaProducer

    from kbroker.cluster_runner import free_port

    base_port, held = _free_pair()
    zk_port = free_port()
    base = tmp_path / "cluster"
    dc = DevCluster(base, "--brokers", "2", "--base-port", str(base_port), "--zookeeper-port", str(zk_port),
                    "--advertise-host", "localhost", "--override", "controlled.shutdown.retry.backoff.ms=500",
                    "--override", "group.initial.rebalance.delay.ms=0")
    try:
        bootstrap = dc.wait_for_line("bootstrap: ", 120).split(" ", 1)[1]
        dc.wait_for_line("kbroker dev-cluster: 2 brokers running", 10)
        text = "\n".join(dc.lines)
        assert re.search(rf"^zookeeper: 127\.0\.0\.1:{zk_port} \(pid \d+\)", text, re.MULTILINE), text
        fallback = re.fullmatch(rf"kbroker dev-cluster: port {base_port} is in use: broker 1 listens on "
                                rf"127\.0\.0\.1:(\d+) instead", dc.stderr.strip())
        assert fallback, dc.stderr
        first = int(fallback.group(1))
        assert first not in (base_port, base_port + 1)
        assert bootstrap == f"localhost:{first},localhost:{base_port + 1}"
        assert re.search(rf"^broker 2: 127\.0\.0\.1:{base_port + 1} \(pid \d+\), advertised as localhost:"
                         rf"{base_port + 1},", text, re.MULTILINE), text

        second = f"localhost:{base_port + 1}"  # what an application's config names
        admin = AdminClient({"bootstrap.servers": second})
        admin.create_topics([NewTopic("ports", num_partitions=2, replication_factor=2)])["ports"].result(30)
        cluster = admin.list_topics(timeout=10)
        assert sorted((b.host, b.port) for b in cluster.brokers.values()) == sorted(
            [("localhost", first), ("localhost", base_port + 1)])

        producer = Producer({"bootstrap.servers": second, "acks": "all"})
        for i in range(20):
            producer.produce("ports", key=str(i).encode(), value=f"c{i}".encode())
        assert producer.flush(60) == 0
        kp = KafkaProducer(bootstrap_servers=second, acks="all")
        for i in range(20):
            kp.send("ports", f"k{i}".encode())
        kp.flush(60)
        kp.close(5)

        expected = {f"c{i}" for i in range(20)} | {f"k{i}" for i in range(20)}
        consumer = Consumer({"bootstrap.servers": second, "group.id": "ports-c", "auto.offset.reset": "earliest"})
        consumer.subscribe(["ports"])
        seen: set[str] = set()
        deadline = time.monotonic() + 60
        while seen != expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.add(msg.value().decode())
        consumer.close()
        assert seen == expected
        reader = KafkaConsumer("ports", bootstrap_servers=second, auto_offset_reset="earliest",
                               consumer_timeout_ms=10000)
        assert {m.value.decode() for m in reader} == expected
        reader.close()

        dc.proc.send_signal(signal.SIGTERM)
        assert dc.wait(120) == 0, dc.stderr
    finally:
        held.close()
        dc.cleanup()
