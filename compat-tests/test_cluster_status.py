"""`kbroker cluster status` and `kbroker topics describe` watching a four-broker cluster (real
ZooKeeper, real kbroker processes), run as a user runs them:

- a move whose target broker is paused (SIGSTOP) stays in progress: status lists it with its
  replicas, adding and removing replicas and why its progress is unknown; describe shows Kafka's
  Adding Replicas / Removing Replicas; with another broker stopped, the under-replicated and
  under-min-ISR counts, the offline brokers and each broker's replica and leader counts are right;
- once the paused broker resumes and the stopped one is back, the move completes and status shows
  no move and nothing under-replicated; the replicas' sizes (DescribeLogDirs, asked with the stock
  kafka-python admin client) agree between the leader and the replica the move added.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient

pytestmark = pytest.mark.timeout(300)
TOPIC = "watched"


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 4)
    yield c
    ck.stop_cluster(c)


def kbroker(bootstrap: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kbroker", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def broker_rows(status: str) -> dict[int, tuple[str, int, int]]:
    """broker id -> (state, replicas, leaders) from the status table."""
    lines = status.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("BROKER"))
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith("Partitions:"):
            break
        broker, _address, _rack, state, replicas, leaders = line.split()
        rows[int(broker.rstrip("*"))] = (state, int(replicas), int(leaders))
    return rows


def expected_rows(cluster, live: set[int]) -> dict[int, tuple[str, int, int]]:
    """The same counts, from a running broker's Metadata answer."""
    parts = ck.partitions(cluster, TOPIC)
    ids = live | {r for p in parts.values() for r in p["replicas"]}
    return {b: ("live" if b in live else "offline", sum(b in p["replicas"] for p in parts.values()),
                sum(p["leader"] == b for p in parts.values())) for b in ids}


def live_brokers(cluster, via: int) -> set[int]:
    with AdminClient(cluster.brokers[via].address, timeout=5) as admin:
        return set(admin.metadata([])[0])


def produce(bootstrap: str, partition: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(TOPIC, value=b"%06d" % i + b"x" * 1000, partition=partition)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def test_status_and_describe_follow_a_move_and_the_brokers(cluster):
    controller = ck.controller_id(cluster)
    a, b, d = sorted(set(cluster.brokers) - {controller})  # b is stopped, d paused (the move's target)
    c = controller
    bootstrap = ",".join(cluster.brokers[i].address for i in (c, a))  # never the stopped or paused one
    with AdminClient(bootstrap, timeout=30) as admin:
        admin.create_topic(TOPIC, assignment=[[c, a], [a, b], [b, c]], configs={"min.insync.replicas": "2"})
    ck.wait_for(lambda: ck.in_sync(cluster, TOPIC, 3, 2), 30, f"{TOPIC} online")
    produce(bootstrap, 0, 3000)  # about 3 MB for the move to copy

    healthy = kbroker(bootstrap, "cluster", "status")
    assert "Partitions: 3  Under-replicated: 0  Offline: 0  Under-min-ISR: 0" in healthy, healthy
    assert "Reassignments in progress: 0" in healthy
    assert broker_rows(healthy) == expected_rows(cluster, {1, 2, 3, 4})

    cluster.brokers[b].stop()  # a controlled shutdown: partitions 1 and 2 lose a replica
    cluster.brokers[d].pause()  # the move's new replica cannot fetch, so the move cannot complete
    try:
        with AdminClient(bootstrap, timeout=30) as admin:
            assert admin.alter_partition_reassignments({(TOPIC, 0): [c, d]}) == {(TOPIC, 0): None}
        ck.wait_for(lambda: live_brokers(cluster, c) == {c, a} and live_brokers(cluster, a) == {c, a}, 60,
                    f"brokers {b} and {d} gone from the cluster")
        ck.wait_for(lambda: [len(p["isr"]) for _, p in sorted(ck.partitions(cluster, TOPIC).items())] == [2, 1, 1],
                    30, "the ISRs of partitions 1 and 2 without the stopped broker")

        status = kbroker(bootstrap, "cluster", "status")
        lines = status.split("\n")
        assert lines[0].endswith(f"Controller: {c}  Brokers: 2 live, 2 offline"), status
        assert broker_rows(status) == expected_rows(cluster, {c, a}), status
        assert broker_rows(status)[d] == ("offline", 1, 0) and broker_rows(status)[b] == ("offline", 2, 0)
        # the moving partition keeps its two original replicas in sync: not under-replicated (Kafka's rule)
        assert "Partitions: 3  Under-replicated: 2  Offline: 0  Under-min-ISR: 2" in lines, status
        assert "Reassignments in progress: 1" in lines
        [row] = [line for line in lines if line.startswith(f"{TOPIC}-0 ")]
        assert row.split()[:4] == [f"{TOPIC}-0", f"{c},{d},{a}", str(d), str(a)], row
        assert "[????????????????????]    ?  ? / " in row and f"(broker {d}: offline)" in row, row

        data = json.loads(kbroker(bootstrap, "cluster", "status", "--json"))
        assert data["under_replicated_partitions"] == [f"{TOPIC}-1", f"{TOPIC}-2"]
        [move] = data["reassignments"]
        assert (move["replicas"], move["adding"], move["removing"], move["leader"]) == ([c, d, a], [d], [a], c)
        assert move["leader_bytes"] > 3_000_000 and move["progress"] is None  # the leader answered, d cannot

        described = kbroker(bootstrap, "topics", "describe", "--topic", TOPIC).split("\n")
        assert described[0].startswith(f"Topic: {TOPIC}\t") and "\tReplicationFactor: 2\t" in described[0]
        [p0] = [line for line in described if "\tPartition: 0\t" in line]
        assert f"\tReplicas: {c},{d},{a}\t" in p0 and f"\tAdding Replicas: {d}\tRemoving Replicas: {a}\t" in p0, p0
        assert "\tProgress: [????????????????????]" in p0
        assert "Adding Replicas" not in "".join(line for line in described if "\tPartition: 0\t" not in line)
        under = kbroker(bootstrap, "topics", "describe", "--under-replicated-partitions").splitlines()
        assert [line.split("\t")[2] for line in under] == ["Partition: 1", "Partition: 2"]
    finally:
        cluster.brokers[d].resume()
    cluster.brokers[b].start()

    def settled() -> bool:
        with AdminClient(bootstrap, timeout=10) as admin:
            if admin.list_partition_reassignments():
                return False
        return (ck.in_sync(cluster, TOPIC, 3, 2) and live_brokers(cluster, c) == {1, 2, 3, 4}
                and ck.partitions(cluster, TOPIC)[0]["replicas"] == [c, d])

    ck.wait_for(settled, 90, "the move to complete and every broker back in the ISRs")
    status = kbroker(bootstrap, "cluster", "status")
    assert "Partitions: 3  Under-replicated: 0  Offline: 0  Under-min-ISR: 0" in status, status
    assert "Reassignments in progress: 0" in status and "offline" not in status
    assert broker_rows(status) == expected_rows(cluster, {1, 2, 3, 4})
    assert broker_rows(status)[d][1] == 1 and broker_rows(status)[a][1] == 1  # partition 0 moved from a to d
    described = kbroker(bootstrap, "topics", "describe", "--topic", TOPIC)
    assert "Adding Replicas" not in described and "Progress" not in described

    # the sizes status works from, as a stock client reads them: the added replica holds what the leader holds
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        def sizes() -> dict[int, int]:
            out = {}
            for entry in admin.describe_log_dirs({TOPIC: [0]}, brokers=[c, d, a]):
                for result in entry["log_dirs"]:
                    for t in result["topics"]:
                        for p in t["partitions"]:
                            out[entry["broker"]] = p["partition_size"]
            return out

        ck.wait_for(lambda: (s := sizes()).keys() == {c, d} and s[c] == s[d] > 3_000_000, 30,
                    f"broker {d} to hold partition 0 byte for byte, broker {a} to have dropped it")
    finally:
        admin.close()
