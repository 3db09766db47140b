"""Tiered storage in a three-broker ZooKeeper cluster sharing one archive directory: the leader
archives, every replica deletes locally only what is archived, a consumer reads from offset 0
through the archive; after a kill -9 of the leader the new leader serves the same history from the
same archive and goes on archiving; the killed broker, restarted behind the new leader's local log
start, is told OFFSET_MOVED_TO_TIERED_STORAGE, restarts its log at that start and rejoins the ISR.
Every acknowledged record stays readable, once, in order."""

from __future__ import annotations

import pytest

import clusterkit as ck
import tieredkit as tk

pytestmark = pytest.mark.timeout(240)


def _local_segments(broker, topic: str) -> int:
    return len(list((broker.data_dir / "data" / f"{topic}-0").glob("*.log")))


def _read_all(kt, bootstrap: str, topic: str, end: int) -> list:
    return tk.consume("confluent", kt, bootstrap, topic, {0: 0}, {0: end}, timeout=60)


def test_archive_shared_by_a_cluster_survives_a_leader_kill(kt, tmp_path):
    kt.require_module("confluent_kafka")
    archive = tmp_path / "archive"
    cluster = ck.start_cluster(tmp_path / "cluster", 3, {**tk.BROKER_OVERRIDES, "rsm.config.dir": str(archive)})
    try:
        topic = "tiered-replicated"
        ck.create_topic(cluster, topic, 1, 3, {**tk.TOPIC_CONFIGS, "min.insync.replicas": "2"})
        msgs = kt.make_messages("cluster", partitions=1, per_partition=30)
        tk.produce(kt, ck.live_bootstrap(cluster), topic, msgs)
        leader = ck.leader_of(cluster, topic)
        ck.wait_for(lambda: all(_local_segments(b, topic) == 1 for b in cluster.brokers.values()), 40,
                    "every replica to keep only its active segment locally")
        assert len(tk.manifest(archive, topic, 0)["segments"]) >= 2
        kt.assert_records_match(msgs, _read_all(kt, ck.live_bootstrap(cluster), topic, len(msgs)))

        cluster.brokers[leader].kill()
        ck.wait_for(lambda: ck.leader_of(cluster, topic) not in (-1, leader), 30, "a new leader")
        kt.assert_records_match(msgs, _read_all(kt, ck.live_bootstrap(cluster), topic, len(msgs)))

        # the new leader archives what comes next; the old one, behind its local log start, catches up
        more = kt.make_messages("cluster-more", partitions=1, per_partition=30, base_ts=msgs[-1].timestamp + 1000)
        tk.produce(kt, ck.live_bootstrap(cluster), topic, more)
        new_leader = ck.leader_of(cluster, topic)
        ck.wait_for(lambda: _local_segments(cluster.brokers[new_leader], topic) == 1, 40,
                    "the new leader's closed segments archived and deleted locally")
        local_start = tk.list_offsets_raw(cluster.brokers[new_leader].address, topic, 1, tk.EARLIEST_LOCAL)[0]
        assert local_start > len(msgs)
        cluster.brokers[leader].start()
        ck.wait_for(lambda: ck.in_sync(cluster, topic, 1, 3), 60, f"broker {leader} back in the ISR")
        restarted_start = min(int(p.name.split(".")[0])
                              for p in (cluster.brokers[leader].data_dir / "data" / f"{topic}-0").glob("*.log"))
        assert restarted_start >= len(msgs), "the restarted replica did not copy the archived history"
        assert "restarting the log there" in cluster.brokers[leader].log_tail(200_000), \
            "the restarted replica was not sent to the leader's local log start (OFFSET_MOVED_TO_TIERED_STORAGE)"

        everything = msgs + more
        got = _read_all(kt, ck.live_bootstrap(cluster), topic, len(everything))
        assert [r.offset for r in got] == list(range(len(everything)))
        assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == \
            [(m.key, m.value, m.headers, m.timestamp) for m in everything]
    finally:
        ck.stop_cluster(cluster)
