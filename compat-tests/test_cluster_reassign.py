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


def reassign(cluster, *args: str, plan: dict | None = None, tmp_path=None, avoid: int | None = None
             ) -> subprocess.CompletedProcess:
    bootstrap = ",".join(b.address for i, b in cluster.brokers.items() if b.running and i != avoid)
    cmd = [sys.executable, "-m", "kbroker", "reassign", "--bootstrap-server", bootstrap, *args]
    if plan is not None:
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(plan))
        cmd += ["--plan", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def plan_of(topic: str, targets: list[list[int]]) -> dict:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                                         for p, r in enumerate(targets)]}


def test_every_replica_moves_to_other_brokers_under_load(cluster, tmp_path):
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("moved", assignment=[[1, 2], [2, 1], [1, 2]])
    ck.wait_for(lambda: ck.in_sync(cluster, "moved", 3, 2), 30, "moved online")
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "moved").start()
    reader = ck.GroupReader(ck.live_bootstrap(cluster), "moved", "movers")
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
    controller = ck.controller_id(cluster)
    ck.wait_for(lambda: len(ck.partitions(cluster, "stuck")[0]["isr"]) == 2, 30, "stuck online")
    target = 4 if controller != 4 else 3  # the paused broker must not be the controller
    producer = ck.AckedProducer(",".join(cluster.brokers[b].address for b in (1, 2)), "stuck").start()
    time.sleep(1)
    plan = plan_of("stuck", [[1, target]])
    cluster.brokers[target].pause()  # the new replica cannot fetch, so the move cannot complete
    try:
        assert reassign(cluster, "--execute", plan=plan, tmp_path=tmp_path, avoid=target).returncode == 0
        listed = reassign(cluster, "--list", avoid=target)
        assert f"stuck-0: replicas [1, {target}, 2], adding [{target}], removing [2]" in listed.stdout, listed.stdout
        verify = reassign(cluster, "--verify", plan=plan, tmp_path=tmp_path, avoid=target)
        assert verify.returncode == 1 and "still in progress" in verify.stdout
        cancelled = reassign(cluster, "--cancel", plan=plan, tmp_path=tmp_path, avoid=target)
        assert cancelled.returncode == 0, cancelled.stderr
        ck.wait_for(lambda: sorted(ck.partitions(cluster, "stuck", via=1)[0]["replicas"]) == [1, 2], 30,
                    "the original replicas back")
    finally:
        cluster.brokers[target].resume()
    assert sorted(ck.partitions(cluster, "stuck")[0]["isr"]) == [1, 2]
    producer.stop()
    assert not producer.failed
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "stuck", 1))
    ck.wait_for(lambda: not [d for d in (cluster.brokers[target].data_dir / "data").glob("stuck-*")
                             if not d.name.endswith("-delete")], 30, f"broker {target} drops its half-made copy")
    assert "No partition reassignments in progress." in reassign(cluster, "--list").stdout


def test_a_returning_broker_deletes_a_copy_that_moved_away_while_it_was_down(cluster, tmp_path):
    """A partition moves off a broker while that broker is dead (the StopReplica meant for it is
    never sent): when it starts again on its old data, the full UpdateMetadata it gets no longer
    places the partition there, and it deletes that copy as a stray; its other copies stay."""
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("wander", assignment=[[1, 4]])
        admin.create_topic("stays", assignment=[[4, 1]])
    ck.wait_for(lambda: ck.in_sync(cluster, "wander", 1, 2) and ck.in_sync(cluster, "stays", 1, 2), 30, "online")
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "wander").start()
    time.sleep(1)
    cluster.brokers[4].kill()
    ck.wait_for(lambda: ck.partitions(cluster, "wander")[0]["isr"] == [1], 30, "broker 4 out of the ISR")
    moved = reassign(cluster, "--execute", plan=plan_of("wander", [[1, 2]]), tmp_path=tmp_path, avoid=4)
    assert moved.returncode == 0, moved.stderr
    ck.wait_for(lambda: ck.in_sync(cluster, "wander", 1, 2) and
                ck.partitions(cluster, "wander")[0]["replicas"] == [1, 2], 60, "wander on brokers 1 and 2")
    data = cluster.brokers[4].data_dir / "data"
    assert (data / "wander-0").is_dir()  # the copy broker 4 had when it died
    cluster.brokers[4].start()
    ck.wait_for(lambda: not (data / "wander-0").exists(), 30, "broker 4 to delete its stray copy of wander-0")
    ck.wait_for(lambda: ck.in_sync(cluster, "stays", 1, 2), 60, "broker 4 back in the ISR of stays-0")
    assert (data / "stays-0").is_dir()
    producer.stop()
    assert not producer.failed
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "wander", 1))


@pytest.fixture
def restoring_cluster(tmp_path):
    # long enough that a bounce (a controlled shutdown and a start on two loaded cores) stays within it
    c = ck.start_cluster(tmp_path / "cluster", 4, {"replica.restore.delay.ms": "10000"})
    yield c
    ck.stop_cluster(c)


def test_a_lost_broker_is_replaced_after_the_restore_delay(restoring_cluster, tmp_path):
    """replica.restore.delay.ms: a broker back before the delay moves nothing; one that stays gone
    has its replicas re-created on live brokers, and the ISRs are full again, nothing lost."""
    cluster = restoring_cluster
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("kept", assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    ck.wait_for(lambda: ck.in_sync(cluster, "kept", 3, 3, via=1), 30, "kept online")
    before = {p: v["replicas"] for p, v in ck.partitions(cluster, "kept", via=1).items()}
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "kept").start()

    gone = time.monotonic()
    cluster.brokers[3].stop()  # gone (its session closed at once) and back within the delay
    cluster.brokers[3].start()
    assert time.monotonic() - gone < 10, "the bounce took longer than replica.restore.delay.ms"
    ck.wait_for(lambda: ck.in_sync(cluster, "kept", 3, 3, via=1), 60, "broker 3 back in every ISR")
    time.sleep(3)  # a move started while it was away would show by now: nothing may have moved
    views = {b: ck.partitions(cluster, "kept", via=b) for b in (1, 2, 3, 4)}
    assert all({p: v["replicas"] for p, v in view.items()} == before for view in views.values()), views

    cluster.brokers[3].kill()  # gone for good
    ck.wait_for(lambda: ck.in_sync(cluster, "kept", 3, 3, via=1) and all(
                3 not in p["replicas"] for p in ck.partitions(cluster, "kept", via=1).values()),
                ck.SESSION_MS / 1000 + 60, "every partition back at three in-sync replicas on live brokers")
    after = {p: v["replicas"] for p, v in ck.partitions(cluster, "kept", via=1).items()}
    assert after == {p: [4 if r == 3 else r for r in replicas] for p, replicas in before.items()}
    producer.stop()
    assert not producer.failed and producer.acked_count > 100
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "kept", 3))


def test_a_decommissioned_broker_is_emptied_then_stopped_under_load(cluster):
    """`kbroker cluster decommission 3` moves every replica and leadership off broker 3 while an
    idempotent acks=all producer runs; once it says so, stopping broker 3 loses nothing."""
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("drained", assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    ck.wait_for(lambda: ck.in_sync(cluster, "drained", 3, 3, via=1), 30, "drained online")
    producer = ck.AckedProducer(ck.live_bootstrap(cluster), "drained").start()
    time.sleep(1)
    done = subprocess.run([sys.executable, "-m", "kbroker", "cluster", "decommission", "3", "--wait", "90",
                           "--bootstrap-server", ck.live_bootstrap(cluster)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Broker 3 holds no replicas and leads no partitions: it is safe to stop." in done.stdout
    parts = ck.partitions(cluster, "drained", via=1)
    assert all(3 not in p["replicas"] and p["leader"] != 3 and len(p["isr"]) == 3 for p in parts.values()), parts
    cluster.brokers[3].stop()
    time.sleep(1)  # the producer carries on without broker 3
    producer.stop()
    assert not producer.failed and producer.acked_count > 100
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "drained", 3))
