"""A consumer group of each client family (kafka-python, confluent-kafka, aiokafka, Java
kafka-clients 3.9, kcat) keeps consuming while its group coordinator is SIGKILLed, on a
three-broker ZooKeeper cluster (clusterkit), and no committed offset is lost; and a consumer-protocol
(KIP-848) group whose coordinator is SIGKILLed in the middle of a reconciliation finishes it on the
new coordinator with no partition ever owned twice.

Per family, on a cluster of its own: a 6-partition topic with replication factor 3 is written by an
idempotent acks=all producer (confluent-kafka, 100 records a second) the whole time; two members
split it, each a process of its own running the groupkit member program of its family
(group_members/*.py, `KbrokerHarness group-member`, `kcat -G` read by groupkit.KcatMember),
client defaults apart from auto.offset.reset=earliest. The group's coordinator (FindCoordinator; it
must be the leader of `__consumer_offsets` partition abs(String.hashCode(group)) % 6, as in Kafka)
is killed with SIGKILL. The controller moves that partition's leadership to another ISR member
within the ZooKeeper session timeout (6 s), whose coordinator rebuilds the group from the log; the
members find it and carry on.

Checked: each partition's log holds exactly as many records as were acknowledged for it, and every
one of them is read at least once (nothing else is read); a watcher asks the group's committed
offsets (OffsetFetch through whichever broker coordinates at that moment) several times a second
from before the kill to the end, and no partition's committed offset ever goes backwards or
disappears; every commit a member had seen acknowledged before the kill is still there under the
new coordinator; both members commit through the new coordinator (kcat: every partition's
auto-committed offset moves on) and they own every partition between them afterwards; finally
the committed offsets reach the log end of every partition while the members run, and are still
there after SIGTERM (exit status 0).
"""

from __future__ import annotations

import sys
import threading
import time
import uuid

import pytest

import clusterkit as ck
import groupkit as gk
from kbroker.admin.client import LATEST, AdminClient

pytestmark = pytest.mark.timeout(200)

PARTITIONS = 6
OFFSETS_PARTITIONS = 6  # clusterkit's offsets.topic.num.partitions
RATE_PER_S = 100  # the producer's pace: enough to keep every partition moving, light on 2 cores
FAMILIES = ("kafka-python", "confluent-kafka", "aiokafka", "java", "kcat")
PYTHON_MEMBERS = {"kafka-python": ("kafka", "kafka_python_member.py"),
                  "confluent-kafka": ("confluent_kafka", "confluent_member.py"),
                  "aiokafka": ("aiokafka", "aiokafka_member.py")}


def java_string_hash(value: str) -> int:
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str) -> int:
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


class PacedProducer(ck.AckedProducer):
    """clusterkit's idempotent acks=all producer, at RATE_PER_S records a second."""

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, key=str(self.sent % 64).encode(), value=f"v{self.sent}".encode(),
                                      on_delivery=self._delivered)
                self.sent += 1
                next_at += 1 / RATE_PER_S
            except BufferError:
                pass
            while (delay := next_at - time.monotonic()) > 0 and not self._stop.is_set():
                self.producer.poll(min(delay, 0.05))
            self.producer.poll(0)

    def close(self) -> None:
        if self.producer is not None:
            self.stop(flush_s=30)
            self.producer = None  # destroyed now, while its brokers still run

    @property
    def without_offset(self) -> int:
        """Deliveries reported without an offset (librdkafka's implicit acks)."""
        return sum(1 for recs in self.acked.values() for o, _ in recs if o is None or o < 0)


class CommitWatch:
    """Polls the group's committed offsets through whichever broker coordinates it, in a thread:
    `samples` is [(monotonic time, coordinator id, {partition: offset})]."""

    def __init__(self, cluster, group: str, topic: str, interval_s: float = 0.25) -> None:
        self.cluster, self.group, self.topic, self.interval_s = cluster, group, topic, interval_s
        self.samples: list[tuple[float, int, dict[int, int]]] = []
        self.errors = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"commit-watch-{group}", daemon=True)

    def sample(self) -> tuple[int, dict[int, int]]:
        with AdminClient(ck.live_bootstrap(self.cluster), timeout=5) as admin:
            coordinator = admin.find_coordinator(self.group)
            offsets = admin.committed_offsets(self.group)
            if admin.find_coordinator(self.group) != coordinator:
                raise RuntimeError("the coordinator moved during the sample")
        return coordinator.node_id, {p: o for (t, p), o in offsets.items() if t == self.topic}

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                coordinator, offsets = self.sample()
                self.samples.append((time.monotonic(), coordinator, offsets))
            except Exception as exc:  # noqa: BLE001 - the coordinator may be dead or moving
                self.errors += 1
                self.last_error = repr(exc)
            self._stop.wait(self.interval_s)

    def start(self) -> "CommitWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def latest(self) -> dict[int, int] | None:
        return self.samples[-1][2] if self.samples else None

    def check_monotonic(self) -> None:
        """No partition's committed offset goes down or disappears from one sample to the next."""
        seen: dict[int, tuple[int, float, int]] = {}
        t0 = self.samples[0][0] if self.samples else 0.0
        for t, coordinator, offsets in self.samples:
            for p, (before, t_before, c_before) in seen.items():
                now = offsets.get(p)
                assert now is not None and now >= before, (
                    f"partition {p}: committed offset {before} (coordinator {c_before}, t={t_before - t0:.2f} s) "
                    f"then {now if now is not None else 'nothing'} (coordinator {coordinator}, t={t - t0:.2f} s)")
            seen.update({p: (o, t, coordinator) for p, o in offsets.items()})


@pytest.fixture
def cluster(tmp_path):
    c = ck.start_cluster(tmp_path / "cluster", 3)
    yield c
    ck.stop_cluster(c)


@pytest.fixture
def spawn(request, kt, tmp_path):
    """spawn(family, bootstrap, group, topic, name) -> a groupkit member of that client family."""
    started: list[gk.Member] = []

    def start(family, bootstrap, group, topic, name):
        if family in PYTHON_MEMBERS:
            module, program = PYTHON_MEMBERS[family]
            kt.require_module(module)
            member = gk.Member([sys.executable, str(gk.HERE / "group_members" / program), bootstrap, group, topic],
                               name, tmp_path)
        elif family == "java":
            harness = request.getfixturevalue("java_harness")
            member = gk.Member(harness.argv("group-member", bootstrap, group, topic, "range"), name, tmp_path)
        elif family == "kcat":
            member = gk.KcatMember(kt.require_exe("kcat"), bootstrap, group, topic, name, tmp_path)
        else:
            raise ValueError(family)
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def _commits(member: gk.Member) -> int:
    return sum(1 for e in list(member.events) if e.get("event") == "committed")


def _log_end(cluster, topic) -> dict[int, int]:
    with AdminClient(ck.live_bootstrap(cluster), timeout=10) as admin:
        ends = admin.list_offsets([(topic, p) for p in range(PARTITIONS)], LATEST)
    return {p: o for (_, p), o in ends.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_group_consumes_across_a_coordinator_failover(family, kt, cluster, spawn):
    kt.require_module("confluent_kafka")  # the producer
    if family == "kcat":
        kt.require_exe("kcat")
    topic = f"failover-{family}-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    ck.create_topic(cluster, topic, PARTITIONS, 3)
    bootstrap = cluster.bootstrap  # every broker: the members must survive losing any one of them
    producer = PacedProducer(bootstrap, topic).start()
    watch = CommitWatch(cluster, group, topic)
    try:
        a = spawn(family, bootstrap, group, topic, "a")
        b = spawn(family, bootstrap, group, topic, "b")
        members = [a, b]
        gk.wait_balanced(members, PARTITIONS, 60)
        watch.start()
        # both members are consuming and every partition has a commit before the coordinator dies
        gk.wait_for(lambda: len(watch.latest() or {}) == PARTITIONS, 45,
                    "committed offsets for every partition", members)
        rebalances_before = [len(m.assignments) for m in members]
        commits_before = [_commits(m) for m in members]

        with AdminClient(ck.live_bootstrap(cluster), timeout=10) as admin:
            coordinator = admin.find_coordinator(group).node_id
        offsets_leader = ck.leader_of(cluster, "__consumer_offsets", offsets_partition(group))
        assert coordinator == offsets_leader, (
            f"FindCoordinator names broker {coordinator}, but __consumer_offsets-{offsets_partition(group)} "
            f"(abs(hashCode) % {OFFSETS_PARTITIONS}) is led by {offsets_leader}")
        acknowledged = {}  # every commit a member saw acknowledged before the kill
        for m in members:
            for p, o in m.committed.items():
                acknowledged[p] = max(acknowledged.get(p, 0), o)
        before_kill = dict(watch.latest())
        killed_at = time.monotonic()
        cluster.brokers[coordinator].kill()

        # the controller elects a new leader of the offsets partition; its coordinator has the group
        def new_coordinator():
            fresh = [s for s in watch.samples if s[0] > killed_at and s[1] != coordinator]
            return fresh[0] if fresh else None

        first_after = gk.wait_for(new_coordinator, 45, f"a coordinator other than broker {coordinator}", members)
        failover_s = first_after[0] - killed_at
        after = first_after[2]
        lost = {p: (o, after.get(p)) for p, o in acknowledged.items() if after.get(p, -1) < o}
        assert not lost, (f"acknowledged commits lost in the failover from broker {coordinator} to {first_after[1]}: "
                          f"partition -> (acknowledged before the kill, read back after) {lost}")
        watch.check_monotonic()

        # the members carry on through the new coordinator: every partition's commit moves past
        # where it stood when the coordinator died, and the two members still share the topic
        gk.wait_for(lambda: all(watch.latest().get(p, -1) > before_kill[p] for p in range(PARTITIONS)), 90,
                    "commits through the new coordinator on every partition", members)
        gk.wait_balanced(members, PARTITIONS, 60)
        if family != "kcat":  # kcat auto-commits and reports no commits of its own
            for m, n in zip(members, commits_before):
                gk.wait_for(lambda: _commits(m) > n, 30, f"member {m.name} to commit after the failover", members)

        time.sleep(2)  # a little more after the failover
        producer.close()
        assert not producer.failed, f"deliveries failed: {producer.failed[:5]}"
        ends = _log_end(cluster, topic)
        # idempotence: each partition holds exactly the records acknowledged for it (librdkafka may
        # report a delivery without its offset, when a later batch acknowledged it implicitly: it
        # counts here, and the summary line below says how many there were)
        acked = {p: len(producer.acked.get(p, [])) for p in range(PARTITIONS)}
        assert ends == acked and sum(acked.values()) == producer.sent, \
            f"log end offsets {ends} != acknowledged records per partition {acked} ({producer.sent} sent)"
        expected = {(p, o) for p, end in ends.items() for o in range(end)}
        gk.wait_all_read(members, expected, 90)
        gk.wait_for(lambda: watch.latest() == {p: e for p, e in ends.items() if e}, 60,
                    f"the committed offsets to reach the log end {ends}", members)
        rebalances = [len(m.assignments) - n for m, n in zip(members, rebalances_before)]
        for m in members:
            assert m.terminate() == 0, m.describe()
        watch.stop()
        final = watch.sample()[1]
        assert final == {p: e for p, e in ends.items() if e}, f"committed {final} != log end {ends} after close"

        read = gk.read_positions(members)
        assert expected <= set(read), f"never read: {sorted(expected - set(read))[:20]}"
        assert set(read) <= expected, f"read positions never produced: {sorted(set(read) - expected)[:20]}"
        watch.check_monotonic()
        twice = sum(1 for n in read.values() if n > 1)
        print(f"{family}: coordinator {coordinator} killed, broker {first_after[1]} answered after {failover_s:.1f} s; "
              f"{len(expected)} records ({producer.without_offset} acknowledged without an offset), {twice} read "
              f"twice; assignments after the kill {rebalances}; {len(watch.samples)} offset samples "
              f"({watch.errors} failed)")
    finally:
        watch.stop()
        producer.close()


CONSUMER_PROTOCOL = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "100",
                     "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "1000"}


def test_consumer_protocol_group_survives_a_coordinator_kill_mid_reconciliation(kt, tmp_path, spawn):
    """KIP-848 (librdkafka, group.protocol=consumer) on the three-broker cluster: a third member joins
    and, while the group reconciles towards the new target, the coordinator is SIGKILLed. The new
    coordinator rebuilds the group from `__consumer_offsets` (its epochs, targets and current
    assignments) and the reconciliation finishes there: the three members share the topic, no
    partition was ever owned by two members at once (from their timestamped assignment callbacks),
    no acknowledged commit is lost, every acknowledged record is read."""
    kt.require_module("confluent_kafka")
    cluster = ck.start_cluster(tmp_path / "cluster", 3, CONSUMER_PROTOCOL)
    try:
        _consumer_protocol_failover(cluster, tmp_path)
    finally:
        ck.stop_cluster(cluster)


def _consumer_protocol_failover(cluster, tmp_path) -> None:
    topic = f"kip848-failover-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    ck.create_topic(cluster, topic, PARTITIONS, 3)
    bootstrap = cluster.bootstrap
    program = str(gk.HERE / "group_members" / "confluent_member.py")
    started: list[gk.Member] = []

    def member(name):
        m = gk.Member([sys.executable, program, bootstrap, group, topic, "--group-protocol", "consumer"], name,
                      tmp_path)
        started.append(m)
        return m

    producer = PacedProducer(bootstrap, topic).start()
    watch = CommitWatch(cluster, group, topic)
    try:
        a, b = member("a"), member("b")
        gk.wait_balanced([a, b], PARTITIONS, 60)
        watch.start()
        gk.wait_for(lambda: len(watch.latest() or {}) == PARTITIONS, 45, "committed offsets for every partition",
                    [a, b])
        with AdminClient(ck.live_bootstrap(cluster), timeout=10) as admin:
            coordinator = admin.find_coordinator(group).node_id
        acknowledged = {}
        for m in (a, b):
            for p, o in m.committed.items():
                acknowledged[p] = max(acknowledged.get(p, 0), o)
        reports_before = [len(m.assignments) for m in (a, b)]
        c = member("c")
        # c's join gives the group a new target: a and b are told to revoke first, and c receives
        # what they released only at its next heartbeat — kill the coordinator as the first revocation
        # is reported, before c owns its share
        gk.wait_for(lambda: any(len(m.assignments) > n for m, n in zip((a, b), reports_before)), 30,
                    "a member to revoke partitions for the third one", [a, b, c])
        killed_at = time.monotonic()
        cluster.brokers[coordinator].kill()
        c_at_kill = c.assignment
        first_after = gk.wait_for(
            lambda: next((s for s in watch.samples if s[0] > killed_at and s[1] != coordinator), None), 45,
            f"a coordinator other than broker {coordinator}", [a, b, c])
        lost = {p: (o, first_after[2].get(p)) for p, o in acknowledged.items() if first_after[2].get(p, -1) < o}
        assert not lost, f"acknowledged commits lost in the failover: {lost}"
        gk.wait_balanced([a, b, c], PARTITIONS, 60)
        time.sleep(1)
        producer.close()
        assert not producer.failed, f"deliveries failed: {producer.failed[:5]}"
        ends = _log_end(cluster, topic)
        expected = {(p, o) for p, end in ends.items() for o in range(end)}
        gk.wait_all_read([a, b, c], expected, 90)
        for m in (a, b, c):
            assert m.terminate() == 0, m.describe()
        read = gk.read_positions([a, b, c])
        assert expected <= set(read) <= expected | set(read), f"never read: {sorted(expected - set(read))[:20]}"
        watch.check_monotonic()
        gk.check_single_owner([a, b, c])
        print(f"coordinator {coordinator} killed with c owning {sorted(c_at_kill or ())} of its "
              f"{max((len(x) for x in c.assignments), default=0)} partitions; broker {first_after[1]} answered "
              f"{first_after[0] - killed_at:.1f} s later")
    except BaseException:
        print(ck.failure_report(cluster))
        raise
    finally:
        watch.stop()
        producer.close()
        for m in started:
            m.kill()
