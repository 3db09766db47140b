"""KafkaJS 2.2.4 against a three-broker kbroker cluster (real ZooKeeper, clusterkit), every client
process a Node process of `kafkajs/harness.js`.

1. Through a leader's kill -9: an idempotent acks=-1 KafkaJS producer (`acked-producer`: "v<i>" to
   partition (i // 4) % 3, four records of one partition a send, one send after another: a send
   spanning partitions loses records when a leader moves, a KafkaJS bug, FINDINGS.md) writes to a
   topic with replication
   factor 3 and min.insync.replicas=2 while a KafkaJS consumer-group member reads it; the leader of
   partition 0 is SIGKILLed, another ISR member takes over, the producer is acknowledged on every
   partition again, the killed broker is started again and rejoins every ISR, the producer stops.
   No send failed; every acknowledged record is in the log once, at its acknowledged offset, in
   order (clusterkit.check_exactly_once_in_order over a KafkaJS read of the whole log); the log is
   exactly what was sent, dense from 0; the group member read every acknowledged record and
   committed the end of every partition.
2. The roundtrip on three brokers: createTopics with replication factor 3 through one broker,
   every broker's metadata agreeing on leaders and a full ISR, the suite's messages produced with
   gzip and acks=-1 and read back exactly.
3. Auto-creation (issue 22 item 4): three KafkaJS producers, each bootstrapped from a different
   broker, send at once to the same new topics (Metadata with allowAutoTopicCreation), five rounds:
   every send succeeds (KafkaJS treats TOPIC_ALREADY_EXISTS as fatal), one topic each time.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections import Counter

import clusterkit as ck
import groupkit as gk
import kafkajskit as kj
import pytest
import txnkit as tk

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def kafkajs(kt, tmp_path_factory):
    """The KafkaJS harness: node + the locked KafkaJS, or a skip (a failure under CI=true)."""
    return kj.harness(kt, tmp_path_factory.mktemp("kafkajs"))


PARTITIONS = 3
PER_SEND = 4
ROUNDS = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("kafkajs-cluster"), 3)
    yield c
    ck.stop_cluster(c)


@pytest.fixture
def members(tmp_path):
    started: list[gk.Member] = []

    def start(argv, name):
        member = gk.Member(argv, name, tmp_path, env=kj.member_env())
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def _all_running(cluster) -> None:
    for broker in cluster.brokers.values():  # one an earlier test killed and left down when it failed
        if not broker.running:
            broker.start()


def _acked(producer: gk.Member) -> dict[int, list[tuple[int, bytes]]]:
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for e in list(producer.events):
        if e.get("event") == "acked":
            out[e["partition"]].append((e["offset"], e["value"].encode()))
    return out


def _counts(producer: gk.Member) -> Counter:
    return Counter(e["partition"] for e in list(producer.events) if e.get("event") == "acked")


def _in_every_isr(cluster, topic: str, broker_id: int) -> bool:
    for via in cluster.brokers:
        parts = ck.partitions(cluster, topic, via=via)
        if sorted(parts) != list(range(PARTITIONS)) or not all(broker_id in p["isr"] for p in parts.values()):
            return False
    return True


def _log_end(kafkajs, bootstrap: str, topic: str) -> dict[int, int]:
    return {e["partition"]: int(e["high"]) for e in kafkajs.admin_ok(bootstrap, "fetchTopicOffsets", topic)}


def test_producer_and_group_member_through_a_leader_kill(kt, cluster, kafkajs, members):
    _all_running(cluster)
    topic = f"kafkajs-kill-{uuid.uuid4().hex[:8]}"
    bootstrap = ck.live_bootstrap(cluster)
    kafkajs.create_topic(bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    ck.wait_for(lambda: ck.in_sync(cluster, topic, PARTITIONS, 3), 30, f"{topic} with a full ISR")
    group = f"g-{topic}"
    producer = members(kafkajs.argv("acked-producer", bootstrap, topic, str(PARTITIONS), "2", str(PER_SEND)), "producer")
    reader = members(kj.member_argv(kafkajs, bootstrap, group, topic, 10000), "reader")

    gk.wait_for(lambda: all(_counts(producer)[p] >= 100 for p in range(PARTITIONS)), 60,
                "acknowledgements on every partition", [producer, reader])
    victim = ck.leader_of(cluster, topic, 0)
    assert victim in cluster.brokers, f"partition 0 has no leader: {ck.partitions(cluster, topic)}"
    before = _counts(producer)
    killed_at = time.monotonic()
    cluster.brokers[victim].kill()
    ck.wait_for(lambda: ck.partitions(cluster, topic).get(0, {}).get("leader", -1) not in (-1, victim), 30,
                f"a new leader of partition 0 after broker {victim} was killed")
    elected_s = time.monotonic() - killed_at
    gk.wait_for(lambda: all(_counts(producer)[p] >= before[p] + 50 for p in range(PARTITIONS)), 60,
                f"acknowledgements on every partition after broker {victim} was killed", [producer, reader])
    resumed_s = time.monotonic() - killed_at
    cluster.brokers[victim].start()
    ck.wait_for(lambda: _in_every_isr(cluster, topic, victim), 60, f"broker {victim} back in every ISR of {topic}")
    rejoined_s = time.monotonic() - killed_at
    before = _counts(producer)
    gk.wait_for(lambda: all(_counts(producer)[p] >= before[p] + 50 for p in range(PARTITIONS)), 30,
                "acknowledgements after the restart", [producer, reader])
    assert producer.terminate(timeout=60) == 0, producer.describe()

    failed = [e for e in producer.events if e.get("event") == "failed"]
    assert not failed, f"{len(failed)} sends failed, e.g. {failed[:3]}"
    [closed] = [e for e in producer.events if e.get("event") == "closed"]
    sent = closed["sent"]
    acked = _acked(producer)
    assert sum(len(v) for v in acked.values()) == sent, f"{sent} sent, {sum(len(v) for v in acked.values())} acknowledged"

    live = ck.live_bootstrap(cluster)
    ends = _log_end(kafkajs, live, topic)
    result = kj.txn_read(kafkajs, live, topic, tk.READ_UNCOMMITTED, ends, timeout=60)
    read: dict[int, list[tuple[int, bytes]]] = {}
    for p, offset, _key, value in result.records:
        read.setdefault(p, []).append((offset, value.encode()))
    ck.check_exactly_once_in_order(acked, read)
    for p in range(PARTITIONS):
        log = read.get(p, [])
        assert [o for o, _ in log] == list(range(len(log))), f"partition {p}: offsets are not dense from 0"
        wanted = [f"v{i}".encode() for i in range(sent) if (i // PER_SEND) % PARTITIONS == p]
        assert [v for _, v in log] == wanted, (
            f"partition {p}: the log ({len(log)} records) is not what was sent to it, in order")

    # the group member read through the kill (at least once) and commits the end of every partition
    expected = {(p, o) for p, recs in acked.items() for o, _v in recs}
    gk.wait_all_read([reader], expected, 60)
    gk.wait_for(lambda: reader.committed == ends, 30, f"the member's commits to reach {ends}", [reader])
    assert reader.terminate() == 0, reader.describe()
    assert kafkajs.committed(live, group, topic) == ends
    print(f"{sent} records; broker {victim} killed: new leader after {elapsed(elected_s)}, acks on every partition "
          f"after {elapsed(resumed_s)}, back in every ISR after {elapsed(rejoined_s)}; the member read "
          f"{len(reader.records)} records for {len(expected)} positions")


def elapsed(s: float) -> str:
    return f"{s:.1f} s"


def test_roundtrip_on_three_brokers(kt, cluster, kafkajs):
    _all_running(cluster)
    topic = f"kafkajs-rf3-{uuid.uuid4().hex[:8]}"
    first = cluster.brokers[min(cluster.brokers)].address
    kafkajs.create_topic(first, topic, PARTITIONS, 3)
    ck.wait_for(lambda: all(ck.in_sync(cluster, topic, PARTITIONS, 3, via=b) for b in cluster.brokers), 30,
                f"every broker to see {topic} with a full ISR")
    views = [kafkajs.partitions(b.address, topic) for b in cluster.brokers.values()]
    assert all(v == views[0] for v in views), views
    assert sorted(views[0]) == [0, 1, 2] and all(sorted(p["replicas"]) == sorted(cluster.brokers)
                                                 for p in views[0].values()), views[0]
    msgs = kj.as_kafkajs(kt.make_messages("kafkajs-cluster"))
    client = kj.client(kt, kafkajs)
    acks = client.produce(first, topic, msgs, idempotent=True, codec="gzip")
    per_partition: dict[int, list[int]] = {}
    for m, (p, off) in zip(msgs, acks):
        assert p == m.partition
        per_partition.setdefault(p, []).append(off)
    assert per_partition == {p: list(range(8)) for p in range(PARTITIONS)}, per_partition
    kt.assert_records_match(msgs, client.consume(ck.live_bootstrap(cluster), topic, len(msgs)))


def test_auto_creation_from_producers_on_every_broker(kt, cluster, kafkajs):
    _all_running(cluster)
    addresses = [b.address for b in cluster.brokers.values()]
    client = kj.client(kt, kafkajs)
    failures = []
    for round_ in range(ROUNDS):
        topic = f"kafkajs-auto-{round_}-{uuid.uuid4().hex[:8]}"

        def send(i, topic=topic, round_=round_):
            msgs = [kt.Msg(0, f"k{i}-{j}".encode(), f"from-{i}-{j}".encode(), (), -1) for j in range(3)]
            try:
                return client.produce(addresses[i], topic, msgs, idempotent=False)
            except AssertionError as exc:  # the harness's error, KafkaJS's error type in it
                failures.append(f"round {round_}, producer via {addresses[i]}: {str(exc)[:1500]}")
                return None

        with concurrent.futures.ThreadPoolExecutor(len(addresses)) as pool:
            results = list(pool.map(send, range(len(addresses))))
        assert not failures, "\n".join(failures)
        offsets = sorted(o for r in results for _p, o in r)
        assert offsets == list(range(3 * len(addresses))), f"round {round_}: {offsets}"
        assert len(kafkajs.partitions(addresses[0], topic)) == 3  # the cluster's num.partitions
