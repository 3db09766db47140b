"""Partition reassignment in a four-broker cluster (real ZooKeeper, real kbroker processes), driven
through `kbroker reassign` as a user would:

- every replica of a topic moves to other brokers while an idempotent acks=all producer and a
  consumer group run: every acknowledged record is read back exactly once, in order per
  partition, the group consumes all of them, and the old brokers' copies are deleted;
- a move whose new replica cannot catch up (its broker paused) is listed as in progress and
  cancelled: the partition is back on its original replicas with a full ISR, and the half-made
  copy is deleted once its broker resumes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 4)
    yield c
    ck.stop_cluster(c)


def reassign(cluster, *args: str, plan: dict | None = None, tmp_path=None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "kbroker", "reassign", "--bootstrap-server", ck.live_bootstrap(cluster), *args]
    if plan is not None:
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(plan))
        cmd += ["--plan", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def plan_of(topic: str, targets: list[list[int]]) -> dict:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                                         for p, r in enumerate(targets)]}


class GroupReader:
    """A confluent-kafka consumer in a group, committing as it goes: every value it received."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        self.consumer.subscribe([topic])
        self.values: set[bytes] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and not msg.error():
                self.values.add(msg.value())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def test_every_replica_moves_to_other_brokers_under_load(cluster, tmp_path):
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("moved", assignment=[[1, 2], [2, 1], [1, 2]])
    ck.wait_for(lambda: all(len(p["isr"]) == 2 for p in ck.partitions(cluster, "moved").values()), 30, "moved online")
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "moved").start()
    reader = GroupReader(ck.live_bootstrap(cluster), "moved", "movers")
    time.sleep(2)
    targets = [[3, 4], [4, 3], [3, 4]]
    started = reassign(cluster, "--execute", plan=plan_of("moved", targets), tmp_path=tmp_path)
    assert started.returncode == 0, started.stderr
    assert "Successfully started partition reassignment" in started.stdout

    def done() -> bool:
        return reassign(cluster, "--verify", plan=plan_of("moved", targets), tmp_path=tmp_path).returncode == 0

    ck.wait_for(done, 90, "the moves to complete")
    time.sleep(1)  # the producer keeps going on the new replicas
    producer.stop()
    parts = ck.partitions(cluster, "moved")
    assert {p: (v["replicas"], sorted(v["isr"])) for p, v in parts.items()} == {
        p: (t, sorted(t)) for p, t in enumerate(targets)}
    assert not producer.failed and producer.acked_count > 100
    read = ck.read_all(ck.live_bootstrap(cluster), "moved", 3)
    ck.check_exactly_once_in_order(producer.acked, read)
    acked = {v for values in producer.acked.values() for _, v in values}
    ck.wait_for(lambda: acked <= reader.values, 60, "the group to consume every acknowledged record")
    reader.stop()
    for b in (1, 2):  # the old copies are deleted (renamed for deletion first, as Kafka does)
        ck.wait_for(lambda: not [d for d in (cluster.brokers[b].data_dir / "data").glob("moved-*")
                                 if not d.name.endswith("-delete")], 30, f"broker {b} drops its old copies")
    listed = reassign(cluster, "--list")
    assert "No partition reassignments in progress." in listed.stdout


def test_a_stuck_move_is_listed_and_cancelled(cluster, tmp_path):
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("stuck", assignment=[[1, 2]])
    ck.wait_for(lambda: len(ck.partitions(cluster, "stuck")[0]["isr"]) == 2, 30, "stuck online")
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "stuck").start()
    time.sleep(1)
    cluster.brokers[4].pause()  # the new replica cannot fetch, so the move cannot complete
    try:
        assert reassign(cluster, "--execute", plan=plan_of("stuck", [[1, 4]]), tmp_path=tmp_path).returncode == 0
        listed = reassign(cluster, "--list")
        assert "stuck-0: replicas [1, 4, 2], adding [4], removing [2]" in listed.stdout, listed.stdout
        verify = reassign(cluster, "--verify", plan=plan_of("stuck", [[1, 4]]), tmp_path=tmp_path)
        assert verify.returncode == 1 and "still in progress" in verify.stdout
        cancelled = reassign(cluster, "--cancel", plan=plan_of("stuck", [[1, 4]]), tmp_path=tmp_path)
        assert cancelled.returncode == 0, cancelled.stderr
        ck.wait_for(lambda: sorted(ck.partitions(cluster, "stuck")[0]["replicas"]) == [1, 2], 30,
                    "the original replicas back")
    finally:
        cluster.brokers[4].resume()
    assert sorted(ck.partitions(cluster, "stuck")[0]["isr"]) == [1, 2]
    producer.stop()
    assert not producer.failed
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "stuck", 1))
    ck.wait_for(lambda: not [d for d in (cluster.brokers[4].data_dir / "data").glob("stuck-*")
                             if not d.name.endswith("-delete")], 30, "broker 4 drops its half-made copy")
    assert "No partition reassignments in progress." in reassign(cluster, "--list").stdout
