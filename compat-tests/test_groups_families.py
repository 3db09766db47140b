"""Consumer groups of every client family against kbroker: the scenarios written once, run over
(family x protocol / client-side strategy). Each member is a process of its own speaking groupkit's
JSON lines (group_members/*.py, `KbrokerHarness group-member`, `harness.js group-member`,
`kcat -G` read by groupkit.KcatMember); a small `Family` adapter per client says how to start one.

| family | classic strategies (split) | consumer protocol | static member | broker restart |
|---|---|---|---|---|
| kafka-python 3.0 | range, roundrobin, sticky | - | yes | yes |
| aiokafka 0.14 | range, roundrobin, sticky | - | yes | yes |
| confluent-kafka 2.16 | range, roundrobin, cooperative-sticky | yes | yes | yes |
| kcat 1.7.1 (librdkafka 2.0.2, auto-commit) | range, cooperative-sticky | - | yes | - (kcat exits) |
| KafkaJS 2.2.4 | RoundRobinAssigner (its only one) | - | - (KafkaJS has none) | yes |
| Java kafka-clients 3.9 | range, roundrobin, cooperative-sticky | - | yes | yes |
| Java kafka-clients 4.3 | range, cooperative-sticky | yes | yes | yes |

The split scenario runs once per strategy (and once with the consumer protocol); the others once
per family and protocol, with the family's first strategy for classic. Scenarios:

- split: two members split 6 partitions, a third joins, every record read exactly once (kcat:
  at least once), the group's committed offsets (read with the family's own admin API) == log end;
  classic groups: DescribeGroups of the running group is Stable with the strategy's protocol and
  the members' assignments, Empty after they left;
- a SIGKILLed member's partitions go to the survivor after the session timeout, not before; only
  what it read and had not committed is read again;
- a member across a restart of the module's broker, then a new member resuming from the
  committed offsets;
- two new groups on a broker with the default `group.initial.rebalance.delay.ms` (3000): each first
  member assigned within 20 s of its start (client defaults: librdkafka's and Java's 45 s session),
  each group reads everything;
- a static member (`group.instance.id`) back with its partitions and no rebalance of the other
  member: after SIGKILL (classic) or after a clean close, which leaves with epoch -2 (consumer
  protocol: KIP-848 refuses a second member with a live instance id, UNRELEASED_INSTANCE_ID, until
  the old one's session ran out). The session is 30 s here, so a JVM on a loaded machine is back
  in time: the members' session.timeout.ms (classic), the group's `consumer.session.timeout.ms`
  (consumer protocol, a GROUP config set with kafka-python's IncrementalAlterConfigs);
- consumer protocol only: 1 -> 3 -> 1 members under a steady producer, every record once;
  a zombie's commit refused (raw OffsetCommit v9 at an old member epoch: STALE_MEMBER_EPOCH).

Everywhere a member reports its assignments with wall times (all but kcat and KafkaJS), no
partition was owned by two members at once (groupkit.check_single_owner). Timeouts are short:
classic members ask for a 6 s session (the broker's minimum) and 1 s heartbeats, and the broker
runs the consumer protocol with a 6 s session and 500 ms heartbeats, so a SIGKILL costs seconds,
not the 45 s default. Topics are created and filled with kafka-python."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from typing import Any, ClassVar

import groupkit as gk
import kafkajskit as kj
import pytest

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
SESSION_S = 6  # classic members' session.timeout.ms (the broker's minimum) = the consumer protocol's
HEARTBEAT_MS = 1000  # classic members' heartbeat.interval.ms
STATIC_SESSION_MS = 30000  # the static scenario's session: a restarted JVM is back well inside it, loaded or not
FIRST_ASSIGNMENT_S = 20  # well inside the clients' default 45 s session, JVM start on a loaded machine included
CONSUMER_PROTOCOL = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": str(SESSION_S * 1000),
    "group.consumer.min.session.timeout.ms": "1000",
}
KBROKER_OVERRIDES = {**CONSUMER_PROTOCOL, "group.initial.rebalance.delay.ms": "0"}


# --------------------------------------------------------------------------------------------
# client families


class Family:
    """How to run one client family's group member. `strategies`: the classic assignors the split
    scenario runs under (the first for every other scenario); `consumer`: the family also runs
    group.protocol=consumer; `static`: it has group.instance.id; `restart`: its member outlives a
    broker restart; `commits`: the member commits after each batch and reports it (kcat
    auto-commits: at least once); `protocol_names`: the protocol DescribeGroups reports for a
    strategy, when it differs from the strategy's name."""

    name = ""
    strategies: tuple[str, ...] = ()
    consumer = False
    static = True
    restart = True
    commits = True
    protocol_names: ClassVar[dict[str, str]] = {}

    def require(self, ctx: Ctx) -> None:
        raise NotImplementedError

    def member(self, ctx: Ctx, bootstrap: str, group: str, topic: str, name: str, protocol: str,
               strategy: str | None, instance_id: str | None, session_ms: int | None) -> gk.Member:
        raise NotImplementedError

    def committed(self, ctx: Ctx, bootstrap: str, group: str, topic: str) -> dict[int, int]:
        return kafka_python_committed(bootstrap, group, topic)

    def described(self, ctx: Ctx, bootstrap: str, group: str, topic: str) -> tuple[str, str, str, list]:
        """(state, protocol type, protocol, sorted member assignments) of a classic group."""
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            desc = admin.describe_groups([group])[group]
        finally:
            admin.close()
        owned = [sorted(p for t in m["member_assignment"]["assigned_partitions"] if t["topic"] == topic
                        for p in t["partitions"]) for m in desc["members"]]
        return desc["group_state"], desc["protocol_type"], desc["protocol_data"], sorted(owned)


class PythonFamily(Family):
    def __init__(self, name: str, module: str, program: str, strategies: tuple[str, ...], consumer: bool = False):
        self.name, self.module, self.program, self.strategies, self.consumer = name, module, program, strategies, consumer

    def require(self, ctx: Ctx) -> None:
        ctx.kt.require_module(self.module)

    def member(self, ctx, bootstrap, group, topic, name, protocol, strategy, instance_id, session_ms):
        argv = [sys.executable, str(gk.HERE / "group_members" / self.program), bootstrap, group, topic]
        if protocol == "consumer":
            argv += ["--group-protocol", "consumer"]
        elif session_ms:
            argv += ["--session-timeout-ms", str(session_ms), "--heartbeat-interval-ms", str(HEARTBEAT_MS)]
        if strategy:
            argv += ["--strategy", strategy]
        if instance_id:
            argv += ["--instance-id", instance_id]
        return gk.Member(argv, name, ctx.tmp_path)


class Confluent(PythonFamily):
    def committed(self, ctx, bootstrap, group, topic):
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until the future is done
        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)
        result = futures[group].result(30)
        return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


class AioKafka(PythonFamily):
    def committed(self, ctx, bootstrap, group, topic):
        from aiokafka.admin import AIOKafkaAdminClient

        async def fetch():
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                return await admin.list_consumer_group_offsets(group)
            finally:
                await admin.close()

        offsets = asyncio.run(asyncio.wait_for(fetch(), 60))
        return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic and om.offset >= 0}


class Kcat(Family):
    name = "kcat"
    strategies = ("range", "cooperative-sticky")
    commits = False
    # "% ERROR: Local: All broker connections are down: 1/1 brokers are down: terminating": kcat
    # exits while the only broker restarts
    restart = False

    def require(self, ctx):
        ctx.kt.require_exe("kcat")

    def member(self, ctx, bootstrap, group, topic, name, protocol, strategy, instance_id, session_ms):
        extra = ["-X", f"partition.assignment.strategy={strategy}"] if strategy else []
        if session_ms:
            extra += ["-X", f"session.timeout.ms={session_ms}", "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}"]
        if instance_id:
            extra += ["-X", f"group.instance.id={instance_id}"]
        return gk.KcatMember(ctx.kt.require_exe("kcat"), bootstrap, group, topic, name, ctx.tmp_path, extra)


class KafkaJS(Family):
    name = "kafkajs"
    strategies = ("roundrobin",)  # RoundRobinAssigner, KafkaJS's only assignor
    static = False
    protocol_names: ClassVar[dict[str, str]] = {"roundrobin": "RoundRobinAssigner"}

    def require(self, ctx):
        ctx.request.getfixturevalue("kafkajs")

    def member(self, ctx, bootstrap, group, topic, name, protocol, strategy, instance_id, session_ms):
        harness = ctx.request.getfixturevalue("kafkajs")
        argv = kj.member_argv(harness, bootstrap, group, topic, session_ms or 30000)  # 30 s: KafkaJS's default
        return gk.Member(argv, name, ctx.tmp_path, env=kj.member_env())

    def committed(self, ctx, bootstrap, group, topic):
        return ctx.request.getfixturevalue("kafkajs").committed(bootstrap, group, topic)

    def described(self, ctx, bootstrap, group, topic):
        """KafkaJS's own admin.describeGroups (member assignments decoded by KafkaJS)."""
        [g] = ctx.request.getfixturevalue("kafkajs").admin_ok(bootstrap, "describeGroups", [group])["groups"]
        return (g["state"], g["protocolType"], g["protocol"],
                sorted(sorted(m["assignment"].get(topic, [])) for m in g["members"]))


class Java(Family):
    def __init__(self, name: str, fixture: str, strategies: tuple[str, ...], consumer: bool):
        self.name, self.fixture, self.strategies, self.consumer = name, fixture, strategies, consumer

    def require(self, ctx):
        ctx.request.getfixturevalue(self.fixture)  # compiles the harness against this kafka-clients

    def member(self, ctx, bootstrap, group, topic, name, protocol, strategy, instance_id, session_ms):
        harness = ctx.request.getfixturevalue(self.fixture)
        props = []
        if protocol == "consumer":
            props.append("group.protocol=consumer")
        elif session_ms:
            props += [f"session.timeout.ms={session_ms}", f"heartbeat.interval.ms={HEARTBEAT_MS}"]
        argv = harness.argv("group-member", bootstrap, group, topic, strategy or "-", instance_id or "-", *props)
        return gk.Member(argv, name, ctx.tmp_path)

    def committed(self, ctx, bootstrap, group, topic):
        """Admin.listConsumerGroupOffsets (OffsetFetch) of the same kafka-clients version."""
        out = {}
        for line in ctx.request.getfixturevalue(self.fixture).ok("admin", bootstrap, "group-offsets", group):
            if line.startswith("COMMITTED "):
                _, t, p, offset = line.split()
                if t == topic and int(offset) >= 0:
                    out[int(p)] = int(offset)
        return out


FAMILIES = (
    PythonFamily("kafka-python", "kafka", "kafka_python_member.py", ("range", "roundrobin", "sticky")),
    AioKafka("aiokafka", "aiokafka", "aiokafka_member.py", ("range", "roundrobin", "sticky")),
    Confluent("confluent", "confluent_kafka", "confluent_member.py", ("range", "roundrobin", "cooperative-sticky"),
              consumer=True),
    Kcat(),
    KafkaJS(),
    Java("java39", "java_harness", ("range", "roundrobin", "cooperative-sticky"), consumer=False),
    # the strategies are the client's own code, the same as 3.9's: one eager, one cooperative
    Java("java43", "java_harness_43", ("range", "cooperative-sticky"), consumer=True),
)


class Variant:
    """One family with one protocol: classic under a client-side strategy, or the consumer protocol
    (the broker assigns: uniform)."""

    def __init__(self, family: Family, protocol: str, strategy: str | None) -> None:
        self.family, self.protocol, self.strategy = family, protocol, strategy

    @property
    def id(self) -> str:
        """"<family>/<strategy or consumer>": the family part is the module's xdist work unit
        (compat-tests/conftest.py's FamilyScheduling)."""
        return f"{self.family.name}/{self.strategy if self.protocol == 'classic' else 'consumer'}"

    @property
    def classic(self) -> bool:
        return self.protocol == "classic"


def _params(variants: list[Variant]) -> list:
    return [pytest.param(v, id=v.id) for v in variants]


CONSUMER_VARIANTS = [Variant(f, "consumer", None) for f in FAMILIES if f.consumer]
SPLIT_VARIANTS = [Variant(f, "classic", s) for f in FAMILIES for s in f.strategies] + CONSUMER_VARIANTS
PROTOCOL_VARIANTS = [Variant(f, "classic", f.strategies[0]) for f in FAMILIES] + CONSUMER_VARIANTS
STATIC_VARIANTS = [v for v in PROTOCOL_VARIANTS if v.family.static]
RESTART_VARIANTS = [v for v in PROTOCOL_VARIANTS if v.family.restart]


# --------------------------------------------------------------------------------------------
# fixtures and helpers


class Ctx:
    """What a family adapter needs from the test: kt, the pytest request (for the Java and KafkaJS
    harness fixtures), a log dir; and the members started, killed at teardown."""

    def __init__(self, kt, request, tmp_path) -> None:
        self.kt, self.request, self.tmp_path = kt, request, tmp_path
        self.started: list[gk.Member] = []

    def use(self, variant: Variant) -> Variant:
        self.kt.require_module("kafka")  # topics and records
        variant.family.require(self)
        return variant

    def spawn(self, variant: Variant, broker, group: str, topic: str, name: str, instance_id: str | None = None,
              session_ms: int | None = SESSION_S * 1000) -> gk.Member:
        """A member; `session_ms` (classic only): its session timeout, with 1 s heartbeats; None: the
        client's defaults."""
        member = variant.family.member(self, broker.bootstrap, group, topic, name, variant.protocol,
                                       variant.strategy, instance_id, session_ms)
        self.started.append(member)
        return member


@pytest.fixture
def ctx(kt, request, tmp_path):
    c = Ctx(kt, request, tmp_path)
    yield c
    for member in c.started:
        member.kill()


@pytest.fixture(scope="module")
def kafkajs(kt, tmp_path_factory):
    """The KafkaJS harness: node + the locked KafkaJS, or a skip (a failure under CI=true)."""
    return kj.harness(kt, tmp_path_factory.mktemp("kafkajs"))


@pytest.fixture(scope="module")
def delayed_kbroker(kt, tmp_path_factory):
    """A second broker of the module's with Kafka's default group.initial.rebalance.delay.ms (3000)."""
    if kt.EXTERNAL:
        yield kt.ExternalBroker(kt.EXTERNAL)
        return
    yield from kt._running(kt.Broker(tmp_path_factory.mktemp("kbroker-delayed"), CONSUMER_PROTOCOL))


def _topic(kt, broker, partitions: int = PARTITIONS) -> str:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    topic = kt.topic_name("group")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    return topic


def _produce(broker, topic: str, n: int, tag: str) -> set[tuple[int, int]]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=20, reconnect_backoff_max_ms=1000)
    try:
        futures = [producer.send(topic, key=f"{tag}-{i}".encode(), value=f"{tag}-value-{i}".encode())
                   for i in range(n)]
        producer.flush(30)
        return {(md.partition, md.offset) for md in (f.get(30) for f in futures)}
    finally:
        producer.close(10)


def kafka_python_committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets([group])[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic and om.offset >= 0}


def set_group_configs(broker, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs of a GROUP resource (kafka-python's admin)."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, group, configs)], raise_on_unknown=False)
    finally:
        admin.close()
    assert result == {"group": {group: "OK"}}, result


def _reported_commits(members: list[gk.Member]) -> dict[int, int]:
    out: dict[int, int] = {}
    for m in members:
        for p, o in m.committed.items():
            out[p] = max(out.get(p, 0), o)
    return out


def wait_committed(variant: Variant, members: list[gk.Member], broker, group: str, topic: str,
                   expected: set[tuple[int, int]], timeout: float = 30, gone: tuple[gk.Member, ...] = ()) -> None:
    """Until the group has committed the end of what was read: from the reports of `members` and of
    the `gone` (killed: not watched), or (kcat, auto-commit every 5 s) from the broker."""
    ends = gk.end_offsets(expected)
    if variant.family.commits:
        gk.wait_for(lambda: _reported_commits([*members, *gone]) == ends, timeout, f"the commits {ends}", members)
        return
    deadline = time.monotonic() + timeout
    while (got := kafka_python_committed(broker.bootstrap, group, topic)) != ends:
        assert time.monotonic() < deadline, f"committed {got} != {ends} after {timeout} s\n" + "\n".join(
            m.describe() for m in members)
        time.sleep(0.5)


def stop_all(members: list[gk.Member]) -> dict[str, float]:
    """SIGTERM to every member at once, then each must close cleanly (exit status 0). Returns when
    each was told to stop: check_single_owner's end of its last assignment."""
    stopped = {m.name: m.request_stop() for m in members}
    for m in members:
        assert m.terminate() == 0, m.describe()
        assert m.closed_cleanly, m.describe()
    return stopped


def timeline(members: list[gk.Member], t0: float) -> str:
    """Every member's assignment reports, with their wall times relative to `t0`."""
    return "\n".join(f"{m.name}: " + ", ".join(f"{e.get('t', t0) - t0:+.2f}s {e['partitions']}"
                                                 for e in m.events if e.get("event") == "assigned")
                     for m in members)


def check_read(variant: Variant, members: list[gk.Member], expected: set[tuple[int, int]]) -> None:
    if variant.family.commits:
        gk.check_exactly_once(members, expected)
    else:  # auto-commit: a rebalance may hand over partitions with records read after the last commit
        read = set(gk.read_positions(members))
        assert expected <= read, f"never read: {sorted(expected - read)[:20]}"
        assert read <= expected, f"read positions that were never produced: {sorted(read - expected)[:20]}"


def check_described(ctx: Ctx, variant: Variant, broker, group: str, topic: str, members: list[gk.Member]) -> None:
    """DescribeGroups of a running classic group: Stable, the strategy's protocol, what each member reported."""
    protocol = variant.family.protocol_names.get(variant.strategy, variant.strategy)
    want = ("Stable", "consumer", protocol, sorted(sorted(m.assignment or ()) for m in members))
    got: list[Any] = []

    def matches():
        got[:] = [variant.family.described(ctx, broker.bootstrap, group, topic)]
        return got[0] == want

    gk.wait_for(matches, 10, f"DescribeGroups to show {want} (last: {got})", members)


# --------------------------------------------------------------------------------------------
# the scenarios


def _two_members_reading(ctx, kt, kbroker, variant, tag: str, batch: str):
    """A fresh topic with 60 records and two members of a new group splitting it, both reading:
    (topic, group, acknowledged positions, member a, member b)."""
    ctx.use(variant)
    topic = _topic(kt, kbroker)
    group = f"g-{tag}-{topic}"
    expected = _produce(kbroker, topic, 60, batch)
    a = ctx.spawn(variant, kbroker, group, topic, "a")
    b = ctx.spawn(variant, kbroker, group, topic, "b")
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    return topic, group, expected, a, b


@pytest.mark.parametrize("variant", _params(SPLIT_VARIANTS))
def test_members_split_partitions_and_a_third_joins(ctx, kt, kbroker, variant):
    topic, group, expected, a, b = _two_members_reading(ctx, kt, kbroker, variant, "split", "first")
    c = ctx.spawn(variant, kbroker, group, topic, "c")
    # cooperative: two rebalances (a and b revoke, then c is given what they released)
    gk.wait_balanced([a, b, c], PARTITIONS, 60)
    expected |= _produce(kbroker, topic, 60, "second")
    gk.wait_all_read([a, b, c], expected, 60)
    if variant.classic:
        check_described(ctx, variant, kbroker, group, topic, [a, b, c])
    wait_committed(variant, [a, b, c], kbroker, group, topic, expected)
    stopped = stop_all([a, b, c])
    check_read(variant, [a, b, c], expected)
    assert variant.family.committed(ctx, kbroker.bootstrap, group, topic) == gk.end_offsets(expected)
    gk.check_single_owner([a, b, c], stopped)
    if variant.classic:
        state = variant.family.described(ctx, kbroker.bootstrap, group, topic)
        assert state[0] == "Empty" and state[3] == [], state


@pytest.mark.parametrize("variant", _params(PROTOCOL_VARIANTS))
def test_killed_member_partitions_move_to_the_survivor_after_the_session(ctx, kt, kbroker, variant):
    topic, group, expected, a, b = _two_members_reading(ctx, kt, kbroker, variant, "kill", "before")
    killed_at, killed_wall = time.monotonic(), time.time()
    b.kill()  # SIGKILL: no LeaveGroup, no last commit
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), SESSION_S + 20, "the survivor to own every partition",
                [a])
    took = time.monotonic() - killed_at
    assert took >= SESSION_S - 1, f"b's partitions moved {took:.1f} s after the kill, before its session ran out"
    expected |= _produce(kbroker, topic, 60, "after")
    gk.wait_all_read_after_kill([a], b, expected, 60)
    stopped = stop_all([a])
    gk.check_after_kill([a], b, expected)  # only what b read after its last commit is read again
    assert variant.family.committed(ctx, kbroker.bootstrap, group, topic) == gk.end_offsets(expected)
    gk.check_single_owner([a, b], {**stopped, "b": killed_wall})


@pytest.mark.parametrize("variant", _params(RESTART_VARIANTS))
def test_members_resume_across_a_broker_restart(ctx, kt, kbroker, variant):
    """The module's broker restarts (SIGTERM, start on the same port and data dir) under a live member."""
    ctx.use(variant)
    broker = kbroker
    topic = _topic(kt, broker)
    group = f"g-restart-{topic}"
    expected = _produce(broker, topic, 60, "before")
    a = ctx.spawn(variant, broker, group, topic, "a")
    gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 60, "the member to be assigned", [a])
    gk.wait_all_read([a], expected, 60)
    wait_committed(variant, [a], broker, group, topic, expected)
    broker.restart()
    expected |= _produce(broker, topic, 60, "after")
    gk.wait_all_read([a], expected, 90)
    wait_committed(variant, [a], broker, group, topic, expected)
    stop_all([a])
    gk.check_exactly_once([a], expected)
    assert variant.family.committed(ctx, broker.bootstrap, group, topic) == gk.end_offsets(expected)
    # a new member of the same group starts at the committed offsets: nothing old is read again
    late = _produce(broker, topic, 12, "late")
    b = ctx.spawn(variant, broker, group, topic, "b")
    gk.wait_all_read([b], late, 60)
    assert set(b.records) == late, b.describe()


@pytest.mark.parametrize("variant", _params(PROTOCOL_VARIANTS))
def test_two_new_groups_are_assigned_fast_and_each_reads_everything(ctx, kt, delayed_kbroker, variant):
    """Client defaults (session timeout, heartbeats); the broker waits group.initial.rebalance.delay.ms
    (3000) for more classic members before the first assignment."""
    ctx.use(variant)
    broker = delayed_kbroker
    topic = _topic(kt, broker)
    expected = _produce(broker, topic, 60, "pubsub")
    started = time.monotonic()  # each member subscribes right after it starts: this bounds from above
    g1 = ctx.spawn(variant, broker, f"g1-{topic}", topic, "g1", session_ms=None)
    g2 = ctx.spawn(variant, broker, f"g2-{topic}", topic, "g2", session_ms=None)
    gk.wait_for(lambda: g1.assignment == g2.assignment == set(range(PARTITIONS)), FIRST_ASSIGNMENT_S,
                "each group's first assignment", [g1, g2])
    took = time.monotonic() - started
    assert took < FIRST_ASSIGNMENT_S, f"assigned {took:.1f} s after start"
    for m in (g1, g2):
        gk.wait_all_read([m], expected, 60)
        wait_committed(variant, [m], broker, f"{m.name}-{topic}", topic, expected)
    stop_all([g1, g2])
    for m in (g1, g2):
        gk.check_exactly_once([m], expected)
        assert variant.family.committed(ctx, broker.bootstrap, f"{m.name}-{topic}", topic) == gk.end_offsets(expected)


@pytest.mark.parametrize("variant", _params(STATIC_VARIANTS))
def test_static_member_comes_back_to_its_partitions_without_a_rebalance(ctx, kt, kbroker, variant):
    ctx.use(variant)
    topic = _topic(kt, kbroker)
    group = f"g-static-{topic}"
    session_ms = STATIC_SESSION_MS if variant.classic else None
    if not variant.classic:  # the group's own session timeout (KIP-848 GROUP config), not the broker's 6 s
        set_group_configs(kbroker, group, {"consumer.session.timeout.ms": str(STATIC_SESSION_MS)})
    expected = _produce(kbroker, topic, 60, "before")
    a = ctx.spawn(variant, kbroker, group, topic, "a", instance_id="static-a", session_ms=session_ms)
    b = ctx.spawn(variant, kbroker, group, topic, "b", session_ms=session_ms)
    gk.wait_balanced([a, b], PARTITIONS, 60)
    gk.wait_all_read([a, b], expected, 60)
    wait_committed(variant, [a, b], kbroker, group, topic, expected)
    owned, seen_by_b = a.assignment, b.assignments
    gone_wall = time.time()
    if variant.classic:
        a.kill()  # SIGKILL: the coordinator keeps the static member's place for its session
    else:
        assert a.terminate() == 0, a.describe()  # leaves with epoch -2: its assignment waits for it
    a2 = ctx.spawn(variant, kbroker, group, topic, "a2", instance_id="static-a", session_ms=session_ms)
    gk.wait_for(lambda: a2.assignment, 30, "the restarted static member's partitions", [a2, b])
    assert [s for s in a2.assignments if s] == [owned], a2.describe()
    expected |= _produce(kbroker, topic, 60, "after")
    gk.wait_all_read_after_kill([a2, b], a, expected, 60)
    assert all(s == seen_by_b[-1] for s in b.assignments[len(seen_by_b):]), (
        f"the other member's partitions moved\n{timeline([a, a2, b], gone_wall)}\n{b.describe()}")
    wait_committed(variant, [a2, b], kbroker, group, topic, expected, gone=(a,))
    stopped = stop_all([a2, b])
    check_read(variant, [a, a2, b], expected)  # a committed what it read: nothing is read twice
    assert variant.family.committed(ctx, kbroker.bootstrap, group, topic) == gk.end_offsets(expected)
    gk.check_single_owner([a, a2, b], {**stopped, "a": gone_wall})


@pytest.mark.parametrize("variant", _params(CONSUMER_VARIANTS))
def test_consumer_protocol_members_one_to_three_to_one_under_load(ctx, kt, kbroker, variant):
    """KIP-848 reconciliation under a steady producer: every record read exactly once and no
    partition ever owned by two members (revocations are acknowledged before a partition moves)."""
    ctx.use(variant)
    ck = kt.require_module("confluent_kafka")  # the producer
    topic = _topic(kt, kbroker)
    group = f"g-load-{topic}"
    steady = gk.SteadyProducer(ck, kbroker.bootstrap, topic)
    try:
        a = ctx.spawn(variant, kbroker, group, topic, "a")
        gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 30, "the first member to own everything", [a])
        b = ctx.spawn(variant, kbroker, group, topic, "b")
        c = ctx.spawn(variant, kbroker, group, topic, "c")
        gk.wait_balanced([a, b, c], PARTITIONS, 30)
        time.sleep(1)
        stopped = stop_all([b, c])
        gk.wait_for(lambda: a.assignment == set(range(PARTITIONS)), 30, "the last member to own everything", [a])
    finally:
        expected = steady.stop()
    gk.wait_all_read([a], expected - set(b.records) - set(c.records), 60)
    stopped.update(stop_all([a]))
    gk.check_exactly_once([a, b, c], expected)
    gk.check_single_owner([a, b, c], stopped)


def test_consumer_protocol_zombie_commit_is_refused(kt, kbroker):
    """A member fenced from the group (its epoch moved on) cannot commit: STALE_MEMBER_EPOCH."""
    from kbroker.wire.protocol import decode_response, encode_request

    kt.require_module("kafka")
    topic = _topic(kt, kbroker, partitions=1)
    group = f"z-{topic}"
    host, port = kbroker.bootstrap.rsplit(":", 1)

    def ask(sock, key, version, body):
        sock.sendall(encode_request(key, version, 1, "zombie", body))
        size = int.from_bytes(kt.recv_exact(sock, 4), "big")
        return decode_response(key, version, kt.recv_exact(sock, size))[1]

    def heartbeat(sock, member_id):
        return ask(sock, 68, 1, {"group_id": group, "member_id": member_id, "member_epoch": 0, "instance_id": None,
                                 "rack_id": None, "rebalance_timeout": 10000, "subscribed_topic_names": [topic],
                                 "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})

    def commit(sock, epoch):
        body = ask(sock, 8, 9, {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": "zombie-1",
                                "group_instance_id": None,
                                "topics": [{"name": topic, "partitions": [
                                    {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                     "committed_metadata": ""}]}]})
        return body.topics[0].partitions[0].error_code

    with socket.create_connection((host, int(port)), timeout=10) as sock:
        beat = heartbeat(sock, "zombie-1")
        assert beat.error_code == 0 and beat.member_epoch == 1
        heartbeat(sock, "other")  # a second member: the group epoch moves on
        assert commit(sock, 1) == 0
        assert commit(sock, 0) == 113  # STALE_MEMBER_EPOCH
