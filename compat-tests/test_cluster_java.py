"""The Java kafka-clients 3.9 idempotent producer against a three-broker ZooKeeper cluster
(clusterkit) while partition leaders are SIGKILLed and started again.

`KbrokerHarness acked-producer` (enable.idempotence, acks=all, client retries) writes "v<i>" to
partition i % 3 of a topic with replication factor 3 and min.insync.replicas=2, and prints every
acknowledgement with its partition and offset. Three times, the current leader of one partition
(0, then 1, then 2) is killed with SIGKILL: another ISR member must take over within the ZooKeeper
session timeout and the producer must get acknowledgements on every partition again; the killed
broker is started again on its data directory and must catch up and rejoin the ISR of every
partition before the next round.

At the end (the producer closed on SIGTERM with nothing failed): every acknowledged record is in
the log exactly once, at the offset it was acknowledged with (clusterkit.check_exactly_once_in_order),
and each partition holds exactly what was sent to it, in send order, at offsets 0, 1, 2, ... — no
retry written twice, nothing unacknowledged left behind, no gap.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

import clusterkit as ck
import groupkit as gk

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3
KILLS = 3
INTERVAL_MS = 4  # ~250 records a second


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("cluster"), 3)
    yield c
    ck.stop_cluster(c)


def _acked(producer: gk.Member) -> dict[int, list[tuple[int, bytes]]]:
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for e in list(producer.events):
        if e.get("event") == "acked":
            out[e["partition"]].append((e["offset"], e["value"].encode()))
    return out


def _counts(producer: gk.Member) -> Counter:
    return Counter(e["partition"] for e in list(producer.events) if e.get("event") == "acked")


def _in_every_isr(cluster, topic: str, broker_id: int) -> bool:
    """Every broker's Metadata answer (the restarted one's included) has `broker_id` in the ISR of
    every partition."""
    for via in cluster.brokers:
        parts = ck.partitions(cluster, topic, via=via)
        if sorted(parts) != list(range(PARTITIONS)) or not all(broker_id in p["isr"] for p in parts.values()):
            return False
    return True


def test_idempotent_producer_survives_leader_kills(kt, java_harness, cluster, tmp_path):
    kt.require_module("confluent_kafka")  # clusterkit.read_all
    topic = f"java-kills-{uuid.uuid4().hex[:8]}"
    ck.create_topic(cluster, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    producer = gk.Member(java_harness.argv("acked-producer", cluster.bootstrap, topic, "0", str(INTERVAL_MS)),
                         "producer", tmp_path)
    try:
        gk.wait_for(lambda: all(_counts(producer)[p] >= 100 for p in range(PARTITIONS)), 60,
                    "acknowledgements on every partition", [producer])
        rounds = []
        for kill in range(KILLS):
            partition = kill % PARTITIONS
            victim = ck.leader_of(cluster, topic, partition)
            assert victim in cluster.brokers, f"partition {partition} has no leader: {ck.partitions(cluster, topic)}"
            before = _counts(producer)
            killed_at = time.monotonic()
            cluster.brokers[victim].kill()
            ck.wait_for(lambda: ck.partitions(cluster, topic).get(partition, {}).get("leader", -1) not in (-1, victim),
                        30, f"a new leader of partition {partition} after broker {victim} was killed")
            elected_s = time.monotonic() - killed_at
            # the producer carries on: new acknowledgements on every partition, the moved ones included
            gk.wait_for(lambda: all(_counts(producer)[p] >= before[p] + 50 for p in range(PARTITIONS)), 60,
                        f"acknowledgements on every partition after broker {victim} was killed", [producer])
            resumed_s = time.monotonic() - killed_at
            cluster.brokers[victim].start()
            ck.wait_for(lambda: _in_every_isr(cluster, topic, victim), 60,
                        f"broker {victim} back in the ISR of every partition of {topic}, as every broker sees it")
            rounds.append(f"broker {victim} (leader of {partition}): new leader after {elected_s:.1f} s, acks on "
                          f"every partition after {resumed_s:.1f} s, back in the ISR after "
                          f"{time.monotonic() - killed_at:.1f} s")
        before = _counts(producer)
        gk.wait_for(lambda: all(_counts(producer)[p] >= before[p] + 50 for p in range(PARTITIONS)), 30,
                    "acknowledgements after the last restart", [producer])
        assert producer.terminate(timeout=150) == 0, producer.describe()
    finally:
        producer.kill()

    failed = [e for e in producer.events if e.get("event") == "failed"]
    assert not failed, f"{len(failed)} sends failed, e.g. {failed[:3]}"
    closed = [e for e in producer.events if e.get("event") == "closed"]
    assert closed, producer.describe()
    sent = closed[0]["sent"]
    acked = _acked(producer)
    n_acked = sum(len(v) for v in acked.values())
    assert n_acked == sent, f"{sent} sent, {n_acked} acknowledged"
    read = ck.read_all(ck.live_bootstrap(cluster), topic, PARTITIONS, timeout_s=120)
    ck.check_exactly_once_in_order(acked, read)
    for p in range(PARTITIONS):
        log = read.get(p, [])
        assert [o for o, _ in log] == list(range(len(log))), f"partition {p}: offsets are not dense from 0"
        wanted = [f"v{i}".encode() for i in range(p, sent, PARTITIONS)]
        values = [v for _, v in log]
        first_diff = next((i for i, (x, y) in enumerate(zip(values, wanted)) if x != y), min(len(values), len(wanted)))
        assert values == wanted, (f"partition {p}: the log ({len(values)} records) is not exactly what was sent to "
                                  f"it in send order ({len(wanted)}); first difference at index {first_diff}")
    # the client calls back in send order per partition, so acknowledged offsets only grow
    for p, records in acked.items():
        bad = [i for i in range(1, len(records)) if records[i][0] <= records[i - 1][0]]
        assert not bad, (f"partition {p}: acknowledged offsets repeat or go back at {len(bad)} places; around the "
                         f"first, (offset, value) in acknowledgement order: {records[max(bad[0] - 3, 0):bad[0] + 3]}")

    print(f"{sent} records; " + "; ".join(rounds))
