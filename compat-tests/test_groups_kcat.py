"""kcat 1.7.1 (librdkafka 2.0.2) balanced consumers (`kcat -G group topic`) against kbroker.

Each member is a kcat process; `KcatMember` turns its output into groupkit events: `-f 'REC %p %o
%k\\n'` lines on stdout are records, and the "% Group ... rebalanced (memberid ...): assigned: /
revoked: <topic> [p], ..." lines kcat's rebalance callback writes on stderr give the assignment. kcat
exiting 0 after SIGTERM (it closes the consumer, which commits and leaves) is `closed`. librdkafka
auto-commits (enable.auto.commit, every 5 s and on revoke/close), so delivery is at-least-once;
what the broker stored is read with kafka-python's admin (DescribeGroups, OffsetFetch). librdkafka
defaults otherwise (session.timeout.ms 45 s) apart from auto.offset.reset=earliest."""

from __future__ import annotations

import re
import subprocess
import threading

import pytest

import groupkit as gk

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
# kcat's rebalance callback, eager ("assigned:" / "revoked:", the whole assignment) and
# cooperative ("incremental assignment of N partition(s)" / "incremental unassignment ...", the change)
EAGER = re.compile(r"rebalanced \(memberid ([^)]*)\): (assigned|revoked): (.*)$")
COOPERATIVE = re.compile(r"rebalanced: incremental (\w+) of \d+ partition\(s\) \(memberid ([^,)]*)[^)]*\): (.*)$")


class KcatMember(gk.Member):
    """A `kcat -G` process reporting groupkit events (see the module docstring)."""

    def __init__(self, kcat: str, bootstrap: str, group: str, topic: str, name: str, log_dir, extra=()) -> None:
        self.name = name
        self.argv = [kcat, "-b", bootstrap, "-G", group, "-u", "-f", "REC %p %o %k\\n",
                     "-X", "auto.offset.reset=earliest", *extra, topic]
        self.stderr_path = log_dir / f"member-{name}.stderr.log"
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1)
        self._lock = threading.Lock()
        self.events: list[dict] = []
        self.unparsed: list[str] = []
        self._owned: set[int] = set()
        self.member_id: str | None = None  # as the rebalance callback last reported it
        self._reader = threading.Thread(target=self._read, name=f"kcat-{name}", daemon=True)
        self._err_reader = threading.Thread(target=self._read_stderr, name=f"kcat-{name}-err", daemon=True)
        self._reader.start()
        self._err_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            fields = line.rstrip("\n").split(" ", 3)
            with self._lock:
                if len(fields) >= 3 and fields[0] == "REC":
                    self.events.append({"event": "record", "partition": int(fields[1]), "offset": int(fields[2]),
                                        "key": fields[3] if len(fields) > 3 else ""})
                elif line.strip():
                    self.unparsed.append(line.rstrip("\n"))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.write(line)
            self._stderr.flush()
            line = line.rstrip("\n")
            eager, cooperative = EAGER.search(line), COOPERATIVE.search(line)
            if eager:
                member_id, adds, listed = eager.group(1), eager.group(2) == "assigned", eager.group(3)
            elif cooperative:
                member_id, adds, listed = cooperative.group(2), cooperative.group(1) == "assignment", cooperative.group(3)
            else:
                if "rebalanced" in line:
                    with self._lock:
                        self.unparsed.append(line)
                continue
            partitions = {int(p) for p in re.findall(r"\[(\d+)\]", listed)}
            with self._lock:
                self.member_id = member_id
                # eager: revoke all, then assign all; cooperative: revoke/assign the difference
                if adds:
                    self._owned |= partitions
                else:
                    self._owned -= partitions
                self.events.append({"event": "assigned", "partitions": sorted(self._owned)})

    def terminate(self, timeout: float = 30.0) -> int | None:
        status = super().terminate(timeout)
        self._err_reader.join(5)
        if status == 0:
            with self._lock:
                self.events.append({"event": "closed"})
        return status

    def kill(self) -> None:
        super().kill()
        self._err_reader.join(5)


@pytest.fixture
def kafka(kt):
    return kt.require_module("kafka")


@pytest.fixture
def spawn(kt, tmp_path):
    kcat = kt.require_exe("kcat")
    started: list[KcatMember] = []

    def start(broker, group, topic, name, *extra):
        member = KcatMember(kcat, broker.bootstrap, group, topic, name, tmp_path, extra)
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def _admin(kafka, broker):
    return kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)


def _topic(kafka, kt, broker):
    topic = kt.topic_name("kcat-group")
    admin = _admin(kafka, broker)
    try:
        admin.create_topics([kafka.admin.NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    return topic


def _produce(kafka, broker, topic, n, tag):
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=20,
                                   reconnect_backoff_max_ms=1000)
    try:
        futures = [producer.send(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode())
                   for i in range(n)]
        producer.flush(30)
        return {(f.get(30).partition, f.get(30).offset) for f in futures}
    finally:
        producer.close(10)


def _committed(kafka, broker, group, topic):
    admin = _admin(kafka, broker)
    try:
        offsets = admin.list_group_offsets([group])[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}


def _described(kafka, broker, group):
    admin = _admin(kafka, broker)
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


def _ends(positions):
    ends = {}
    for p, o in positions:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


def check_at_least_once(members, expected):
    read = set(gk.read_positions(members))
    assert expected <= read, f"never read: {sorted(expected - read)[:20]}"
    assert read <= expected, f"read positions that were never produced: {sorted(read - expected)[:20]}"


def _check_owners(kafka, broker, group, topic, members, batch):
    """The broker's view (DescribeGroups, assignments decoded by kafka-python) is what each kcat
    reported, and each record of `batch` (produced since the last rebalance) is read by its owner."""
    desc = _described(kafka, broker, group)
    assert desc["group_state"] == "Stable", desc
    owned = {m["member_id"]: {p for t in m["member_assignment"]["assigned_partitions"] if t["topic"] == topic
                              for p in t["partitions"]} for m in desc["members"]}
    assert owned == {m.member_id: m.assignment for m in members}, (desc, *(m.describe() for m in members))
    gk.wait_all_read(members, batch, 60)
    for m in members:
        theirs = {pos for pos in m.records if pos in batch}
        assert theirs == {pos for pos in batch if pos[0] in m.assignment}, m.describe()


@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"])
def test_members_split_partitions_and_a_third_joins(kafka, kt, kbroker, spawn, strategy):
    topic = _topic(kafka, kt, kbroker)
    group = f"g-split-{topic}"
    extra = ("-X", f"partition.assignment.strategy={strategy}")
    expected = _produce(kafka, kbroker, topic, 120, "first")
    a = spawn(kbroker, group, topic, "a", *extra)
    b = spawn(kbroker, group, topic, "b", *extra)
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    second = _produce(kafka, kbroker, topic, 60, "second")
    _check_owners(kafka, kbroker, group, topic, [a, b], second)
    c = spawn(kbroker, group, topic, "c", *extra)
    gk.wait_balanced([a, b, c], PARTITIONS, 60)
    third = _produce(kafka, kbroker, topic, 60, "third")
    _check_owners(kafka, kbroker, group, topic, [a, b, c], third)
    expected |= second | third
    for m in (a, b, c):
        assert m.terminate() == 0, m.describe()
        assert m.closed_cleanly
    check_at_least_once([a, b, c], expected)
    assert _committed(kafka, kbroker, group, topic) == _ends(expected)


def test_killed_member_partitions_move_to_the_survivor(kafka, kt, kbroker, spawn):
    topic = _topic(kafka, kt, kbroker)
    group = f"g-kill-{topic}"
    expected = _produce(kafka, kbroker, topic, 120, "before")
    a = spawn(kbroker, group, topic, "a")
    b = spawn(kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    b.kill()  # SIGKILL: no commit, no LeaveGroup
    # librdkafka's default session.timeout.ms is 45 s: then the coordinator drops b and a rejoins
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 90, "the survivor to own every partition", [a])
    expected |= _produce(kafka, kbroker, topic, 120, "after")
    gk.wait_all_read_after_kill([a], b, expected, 60)
    assert a.terminate() == 0, a.describe()
    gk.check_after_kill([a], b, expected)  # only b's uncommitted records are read twice
    assert _committed(kafka, kbroker, group, topic) == _ends(expected)


def test_two_groups_each_read_the_whole_topic(kafka, kt, kbroker, spawn):
    topic = _topic(kafka, kt, kbroker)
    expected = _produce(kafka, kbroker, topic, 60, "pubsub")
    g1 = spawn(kbroker, f"g1-{topic}", topic, "g1")
    g2 = spawn(kbroker, f"g2-{topic}", topic, "g2")
    gk.wait_all_read([g1], expected, 60)
    gk.wait_all_read([g2], expected, 60)
    for m in (g1, g2):
        assert m.terminate() == 0, m.describe()
    gk.check_exactly_once([g1], expected)
    gk.check_exactly_once([g2], expected)
    assert _committed(kafka, kbroker, f"g1-{topic}", topic) == _ends(expected)
    assert _committed(kafka, kbroker, f"g2-{topic}", topic) == _ends(expected)
