"""Soak (only with --run-soak): 100 kill -9s of partition leaders under an idempotent acks=all
load on a three-broker cluster, each killed broker restarted and back in the ISR before the next
kill. At the end every acknowledged record is read back exactly once, in order per partition. The
figures of the last run are in docs/cluster.md ("Soak")."""

from __future__ import annotations

import time

import pytest

import clusterkit as ck

KILLS = 100


@pytest.mark.soak
@pytest.mark.timeout(7200)
def test_hundred_leader_kills_under_load(tmp_path):
    cluster = ck.start_cluster(tmp_path / "cluster", 3)
    try:
        ck.create_topic(cluster, "soak", 6, 3, {"min.insync.replicas": "2"})
        producer = ck.AckedProducer(ck.live_bootstrap(cluster), "soak").start()
        failovers = []
        try:
            for kill in range(KILLS):
                partition = kill % 6
                victim = ck.wait_for(lambda: (lambda l: l if l in cluster.brokers else None)(
                    ck.leader_of(cluster, "soak", partition)), 30, f"kill {kill}: partition {partition}'s leader")
                before = producer.acked_count
                killed_at = time.monotonic()
                cluster.brokers[victim].kill()
                ck.wait_for(lambda: ck.leader_of(cluster, "soak", partition) not in (-1, victim), 60,
                            f"kill {kill}: a new leader for partition {partition}")
                ck.wait_for(lambda: producer.acked_count > before + 50, 120, f"kill {kill}: produce goes on")
                failovers.append(time.monotonic() - killed_at)
                cluster.brokers[victim].start()
                ck.wait_for(lambda: all(len(p["isr"]) == 3 for p in ck.partitions(cluster, "soak").values()),
                            120, f"kill {kill}: broker {victim} back in every ISR")
        finally:
            producer.stop()
        assert producer.failed == []
        ck.check_exactly_once_in_order(producer.acked, ck.read_all(ck.live_bootstrap(cluster), "soak", 6))
        failovers.sort()
        print(f"\nsoak: {KILLS} leader kills, {producer.acked_count} records acknowledged and read back once; "
              f"kill to produce-resumed median {failovers[len(failovers) // 2]:.1f} s, "
              f"max {failovers[-1]:.1f} s")
    finally:
        ck.stop_cluster(cluster)
