"""Client quotas and connection limits against a kbroker process, with stock clients.

One broker for the module serves PLAINTEXT and SASL_PLAINTEXT (PLAIN, JAAS users alice and bob),
with `quota.window.num=3`: Kafka measures a quota's rate over that many windows of
`quota.window.size.seconds` and lets a client send a whole measuring span's worth before throttling
it, so with Kafka's default 11 windows a greedy client's throughput over any ~10 s swings around
its quota by tens of per cent (Kafka's sampled rate, which kbroker's is: docs/benchmarks.md#quotas);
over 3 windows a 10 s span says whether the quota holds.

- Admin clients: the Java Admin (alterClientQuotas, describeClientQuotas through
  KbrokerHarness's admin subcommand), kafka-python (3.0 has no client-quota methods: its
  AlterClientQuotas / DescribeClientQuotas protocol messages through its connection) and
  `kbroker quotas` write and read the same quotas; confluent-kafka's Python AdminClient has no
  client-quota calls (librdkafka has none), its producers and consumers are the throttled clients.
- A producer quota of 1 MB/s holds a greedy confluent-kafka producer within ±10 % over 10 s while
  an unthrottled producer (another client id) keeps its throughput; the same for a consumer quota
  and a greedy consumer; throttle_time_ms reaches the client (librdkafka's `throttle` statistics).
- Kafka's precedence between user, user/client-id, client-id and default quotas, over SASL users:
  the quota a request was held to is read back from its throttle time.
- max.connections.per.ip refuses the extra connection, at once, on a broker of its own.
- A three-broker ZooKeeper cluster (Kafka's default quota window): a quota set through one broker
  is in Kafka's znode with its notification, reaches the other brokers within a second, and the
  partition's leader throttles by it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

import pytest
import securitykit as sk

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("kbroker")]

QUOTA = 1_000_000  # bytes/s
WINDOW_NUM = 3
PASSWORDS = {"alice": sk.secret("alice"), "bob": sk.secret("bob")}


@pytest.fixture(scope="module")
def setup(kt, tmp_path_factory):
    if kt.EXTERNAL:
        pytest.skip("KBROKER_COMPAT_EXTERNAL: this module starts a broker of its own with a SASL listener")
    workdir = tmp_path_factory.mktemp("quotas")
    ports = {"PLAINTEXT": kt.free_port(), "SASL_PLAINTEXT": kt.free_port()}
    overrides = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "quota.window.num": str(WINDOW_NUM),
        "group.initial.rebalance.delay.ms": "0",
    }
    secrets = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": sk.jaas_plain(PASSWORDS)}
    broker = sk.secure_broker(kt, workdir / "broker", overrides, secrets, ports["PLAINTEXT"])
    gen = kt._running(broker)
    next(gen)
    try:
        yield broker, f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    finally:
        try:
            next(gen)
        except StopIteration:
            pass


@pytest.fixture(scope="module")
def kbroker(setup):
    return setup[0]


# -- admin clients ------------------------------------------------------------------------------------

def _kafka_python_admin(bootstrap):
    import kafka

    return kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def kp_alter(bootstrap, entity: dict, ops: dict, validate_only=False):
    """kafka-python's AlterClientQuotas message: [(entity, error code, message)]."""
    from kafka.protocol.admin import AlterClientQuotasRequest

    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(entries=[entry(
        entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[entry.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])],
        validate_only=validate_only)
    admin = _kafka_python_admin(bootstrap)
    try:
        async def send():
            return await admin._manager.send(request)
        response = admin._manager.run(send)
    finally:
        admin.close()
    return [({e.entity_type: e.entity_name for e in r.entity}, r.error_code, r.error_message) for r in response.entries]


def kp_describe(bootstrap, components=(), strict=False):
    """kafka-python's DescribeClientQuotas message: {entity tuple: {key: value}} or (error code, message)."""
    from kafka.protocol.admin import DescribeClientQuotasRequest

    component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        components=[component(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict)
    admin = _kafka_python_admin(bootstrap)
    try:
        async def send():
            return await admin._manager.send(request)
        response = admin._manager.run(send)
    finally:
        admin.close()
    if response.error_code:
        return response.error_code, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def java_quotas(java_harness, bootstrap, *args):
    return [json.loads(line) for line in java_harness.ok("admin", bootstrap, *args)]


def cli(*args):
    cp = subprocess.run([sys.executable, "-m", "kbroker", "quotas", *args], capture_output=True, text=True, timeout=60)
    return cp.returncode, cp.stdout, cp.stderr


def test_java_kafka_python_and_kbroker_quotas_share_the_quotas(kbroker, java_harness):
    b = kbroker.bootstrap
    user, client = f"u-{uuid.uuid4().hex[:6]}", f"c-{uuid.uuid4().hex[:6]}"
    assert java_quotas(java_harness, b, "alter-quotas", f"user={user}", "apply", "set:producer_byte_rate=2048",
                       "set:request_percentage=12.5") == [{"call": "alter-quotas", "result": "ok"}]
    assert kp_alter(b, {"user": user, "client-id": client}, {"consumer_byte_rate": 4096}) == [
        ({"user": user, "client-id": client}, 0, None)]
    assert kp_alter(b, {"client-id": None}, {"controller_mutation_rate": 5}) == [({"client-id": None}, 0, None)]
    # kafka-python reads what Java wrote, Java what kafka-python wrote
    assert kp_describe(b, [("user", 0, user)], strict=True) == {
        (("user", user),): {"producer_byte_rate": 2048.0, "request_percentage": 12.5}}
    lines = java_quotas(java_harness, b, "describe-quotas", "loose", f"user={user}")
    assert sorted(lines, key=json.dumps) == sorted([
        {"entity": {"user": user}, "quotas": {"producer_byte_rate": 2048.0, "request_percentage": 12.5}},
        {"entity": {"client-id": client, "user": user}, "quotas": {"consumer_byte_rate": 4096.0}}], key=json.dumps)
    assert java_quotas(java_harness, b, "describe-quotas", "strict", "client-id=<default>") == [
        {"entity": {"client-id": None}, "quotas": {"controller_mutation_rate": 5.0}}]
    # and `kbroker quotas`, both ways
    code, out, err = cli("describe", "--bootstrap-server", b, "--user", user, "--client", "--output", "json")
    assert code == 0, err
    assert json.loads(out) == [{"entity": {"user": user, "client-id": client}, "quotas": {"consumer_byte_rate": 4096.0}}]
    code, out, err = cli("alter", "--bootstrap-server", b, "--user", user, "--delete-config", "request_percentage",
                         "--add-config", "producer_byte_rate=1000")
    assert code == 0, err
    assert kp_describe(b, [("user", 0, user)], strict=True) == {(("user", user),): {"producer_byte_rate": 1000.0}}
    # Kafka's errors, as each client reports them
    assert java_quotas(java_harness, b, "alter-quotas", f"user={user}", "apply", "set:no_such_quota=1") == [
        {"call": "alter-quotas", "error": "InvalidRequestException", "message": "Invalid configuration key no_such_quota"}]
    assert kp_alter(b, {"user": user}, {"producer_byte_rate": 1.5}) == [
        ({"user": user}, 42, "Configuration producer_byte_rate must be a LONG value")]
    assert kp_describe(b, [("user", 0, "a"), ("user", 1, None)]) == (42, "Duplicate user filter component entity type")
    code, _, err = cli("alter", "--bootstrap-server", b, "--client", client, "--add-config", "consumer_byte_rate=0")
    assert code == 1 and "INVALID_REQUEST" in err and "must be greater than 0" in err
    kp_alter(b, {"client-id": None}, {"controller_mutation_rate": None})


# -- throttled clients ----------------------------------------------------------------------------------

class Producing(threading.Thread):
    """A confluent-kafka producer sending 1 KiB values as fast as it can, noting each ack's time."""

    def __init__(self, bootstrap, topic, client_id, seconds, **conf):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.topic, self.seconds, self.acks, self.stats = topic, seconds, [], []
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                                  "batch.size": 16384, "queue.buffering.max.kbytes": 4096,
                                  "statistics.interval.ms": 500, "stats_cb": self.stats.append, **conf})
        self.start_time = None

    def run(self):
        value, p = b"v" * 1024, self.producer
        self.start_time = time.monotonic()
        while time.monotonic() - self.start_time < self.seconds:
            try:
                p.produce(self.topic, value, on_delivery=lambda err, _m: err is None and self.acks.append(time.monotonic()))
            except BufferError:
                p.poll(0.005)
            p.poll(0)
        p.purge()
        p.flush(2)

    def rate(self, begin, end):
        """Bytes of value acknowledged per second between `begin` and `end` seconds after the start."""
        t0 = self.start_time
        return sum(1024 for a in self.acks if t0 + begin <= a < t0 + end) / (end - begin)

    def max_throttle_ms(self):
        return max([b.get("throttle", {}).get("max", 0) for s in self.stats
                    for b in json.loads(s).get("brokers", {}).values()] or [0])


def _set_quota(bootstrap, entity, ops):
    assert kp_alter(bootstrap, entity, ops) == [(entity, 0, None)]


def test_a_producer_quota_holds_a_greedy_producer_and_spares_the_others(kbroker):
    b = kbroker.bootstrap
    topic, greedy, free = f"quota-p-{uuid.uuid4().hex[:8]}", f"greedy-{uuid.uuid4().hex[:6]}", "unthrottled"
    _set_quota(b, {"client-id": greedy}, {"producer_byte_rate": QUOTA})
    baseline = Producing(b, topic, free, 3)
    baseline.run()
    alone = baseline.rate(1, 3)
    throttled, other = Producing(b, topic, greedy, 14), Producing(b, topic, free, 14)
    throttled.start(), other.start()
    throttled.join(40), other.join(40)
    held = throttled.rate(WINDOW_NUM, WINDOW_NUM + 10)  # after one measuring span, over 10 s
    assert 0.9 * QUOTA <= held <= 1.1 * QUOTA, f"greedy producer at {held / 1e6:.3f} MB/s for a 1 MB/s quota"
    assert throttled.max_throttle_ms() > 0  # throttle_time_ms reached the client
    assert other.max_throttle_ms() == 0
    beside = other.rate(WINDOW_NUM, WINDOW_NUM + 10)
    # a shared 2-core machine: the other producer is judged against the quota (ten times it, so never
    # throttled) and loosely against its own rate alone, which other work on the machine moves
    assert beside >= 0.25 * alone and beside > 10 * QUOTA, \
        f"unthrottled producer at {beside / 1e6:.1f} MB/s beside the throttled one, {alone / 1e6:.1f} MB/s alone"


def _fill(bootstrap, topic, megabytes):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 65536, "client.id": "filler"})
    value = b"f" * 1024
    for _ in range(megabytes * 1000):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


class Consuming(threading.Thread):
    """A confluent-kafka consumer reading as fast as it can. A throttled fetch is answered empty
    and fetched again after the throttle, so the quota holds within a fetch's size per measuring
    span: fetches of ~100 kB (librdkafka's default is 1 MB a partition) keep that small."""

    def __init__(self, bootstrap, topic, client_id, seconds, **conf):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer, TopicPartition

        self.seconds, self.received, self.stats = seconds, [], []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                                  "enable.auto.commit": False, "statistics.interval.ms": 500,
                                  "stats_cb": self.stats.append, **conf})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.start_time = None

    def run(self):
        self.start_time = time.monotonic()
        while time.monotonic() - self.start_time < self.seconds:
            for m in self.consumer.consume(500, 0.1):
                if not m.error():
                    self.received.append((time.monotonic(), len(m.value())))
        self.consumer.close()

    def rate(self, begin, end):
        t0 = self.start_time
        return sum(n for t, n in self.received if t0 + begin <= t < t0 + end) / (end - begin)

    def max_throttle_ms(self):
        return max([b.get("throttle", {}).get("max", 0) for s in self.stats
                    for b in json.loads(s).get("brokers", {}).values()] or [0])


def test_a_consumer_quota_holds_a_greedy_consumer_and_spares_the_others(kbroker):
    b = kbroker.bootstrap
    topic, greedy = f"quota-c-{uuid.uuid4().hex[:8]}", f"greedy-{uuid.uuid4().hex[:6]}"
    _fill(b, topic, 40)
    _set_quota(b, {"client-id": greedy}, {"consumer_byte_rate": QUOTA})
    small = {"max.partition.fetch.bytes": 102400, "fetch.max.bytes": 102400, "message.max.bytes": 102400}
    throttled, other = Consuming(b, topic, greedy, 14, **small), Consuming(b, topic, "unthrottled-c", 14)
    throttled.start(), other.start()
    throttled.join(40), other.join(40)
    held = throttled.rate(WINDOW_NUM, WINDOW_NUM + 10)
    assert 0.9 * QUOTA <= held <= 1.1 * QUOTA, f"greedy consumer at {held / 1e6:.3f} MB/s for a 1 MB/s quota"
    assert throttled.max_throttle_ms() > 0
    assert sum(n for _, n in other.received) == 40 * 1000 * 1024  # the other read everything...
    assert other.received[-1][0] - other.start_time < 10  # ...at its own pace, not the quota's


# -- precedence -------------------------------------------------------------------------------------------

def _quota_applied(bootstrap, client_id, user=None):
    """Produce one ~60 kB record with a fresh sensor and read back, from the throttle time the broker
    answered, the quota it was held to: throttle = (rate - Q) / Q x window, rate = bytes / window."""
    from confluent_kafka import Producer

    stats = []
    conf = {"bootstrap.servers": bootstrap, "client.id": client_id, "statistics.interval.ms": 100,
            "stats_cb": stats.append, "linger.ms": 0}
    if user is not None:
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
                     "sasl.password": PASSWORDS[user]})
    p = Producer(conf)
    p.produce("quota-precedence", b"p" * 60_000)
    assert p.flush(20) == 0
    deadline = time.monotonic() + 5
    throttle = 0
    while time.monotonic() < deadline and not throttle:
        p.poll(0.1)
        throttle = max([br.get("throttle", {}).get("max", 0) for s in stats
                        for br in json.loads(s).get("brokers", {}).values()] or [0])
    window_s = WINDOW_NUM - 1  # a fresh rate counts samples - 1 whole windows
    rate = 60_000 / window_s
    return rate / (1 + throttle / 1000 / window_s) if throttle else None


def test_user_and_client_id_quotas_resolve_with_kafkas_precedence(kbroker, setup):
    _, sasl = setup
    b = kbroker.bootstrap
    tag = uuid.uuid4().hex[:6]
    app, special, other = f"app-{tag}", f"special-{tag}", f"other-{tag}"
    _set_quota(b, {"user": "alice"}, {"producer_byte_rate": 20_000})
    _set_quota(b, {"client-id": app}, {"producer_byte_rate": 12_000})
    _set_quota(b, {"user": "alice", "client-id": special}, {"producer_byte_rate": 8_000})
    _set_quota(b, {"client-id": None}, {"producer_byte_rate": 25_000})
    try:
        cases = [("alice", app, 20_000),     # /config/users/alice beats /config/clients/app
                 ("alice", special, 8_000),  # /config/users/alice/clients/special beats both
                 ("bob", app, 12_000),       # no quota of bob's: /config/clients/app
                 ("bob", other, 25_000),     # then /config/clients/<default>
                 (None, f"anon-{tag}", 25_000),  # PLAINTEXT: User:ANONYMOUS, a user with no quota
                 # a client-id quota is one rate for every user of the client id: bob's ~60 kB and
                 # these count together, so this record is held as if to half the quota
                 (None, app, 6_000)]
        for user, client_id, expected in cases:
            applied = _quota_applied(sasl if user else b, client_id, user)
            assert applied is not None and abs(applied - expected) <= 0.08 * expected, \
                f"{user or 'ANONYMOUS'} with client id {client_id}: held to ~{applied} B/s, expected {expected}"
    finally:
        for entity in ({"user": "alice"}, {"client-id": app}, {"user": "alice", "client-id": special},
                       {"client-id": None}):
            kp_alter(b, entity, {"producer_byte_rate": None})


# -- connection limits -------------------------------------------------------------------------------------

def test_max_connections_per_ip_refuses_the_extra_connection(kt, tmp_path):
    import socket

    broker = kt.Broker(tmp_path / "limited", {"max.connections.per.ip": "3"})
    gen = kt._running(broker)
    next(gen)
    try:
        held = []
        # the probe's connection has closed: three may be open at once
        for i in range(3):
            s = socket.create_connection((broker.host, broker.port), timeout=5)
            s.sendall(kt.api_versions_v0_request(i))
            kt.parse_api_versions_v0(kt.recv_frame(s))
            held.append(s)
        extra = socket.create_connection((broker.host, broker.port), timeout=5)
        started = time.monotonic()
        try:
            extra.sendall(kt.api_versions_v0_request(9))
            assert extra.recv(10) == b""  # closed, unanswered
        except ConnectionResetError:
            pass
        assert time.monotonic() - started < 2  # at once, not after a timeout
        held.pop().close()
        kt.wait_until(lambda: kt.probe(broker.host, broker.port), 5, "a freed slot")
        kt.wait_until(lambda: "address already has the configured maximum of 3 connections" in
                      broker.stderr_path.read_text(), 5, "the refusal logged")
        for s in held:
            s.close()
    finally:
        try:
            next(gen)
        except StopIteration:
            pass


# -- a cluster ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import clusterkit as ck

    c = ck.start_cluster(tmp_path_factory.mktemp("quota-cluster"), 3)
    yield c
    ck.stop_cluster(c)


def test_cluster_quotas_in_kafkas_znodes_reach_every_broker(cluster, kt):
    """Set through one broker, in Kafka's `/config/clients/<c>` znode with a `/config/changes`
    notification; described alike by the other two within a second; and enforced by the broker
    that leads the partition (each broker measures its own share, as Kafka's do)."""
    import clusterkit as ck
    from kazoo.client import KazooClient

    from kbroker.admin.client import AdminClient as KbrokerAdmin
    from kbroker.admin.quotas import describe_client_quotas

    client = f"cluster-{uuid.uuid4().hex[:6]}"
    code, _, err = cli("alter", "--bootstrap-server", cluster.brokers[1].address, "--client", client,
                       "--add-config", "producer_byte_rate=5000")
    assert code == 0, err

    def everyone_has_it():
        for broker in cluster.brokers.values():
            with KbrokerAdmin(broker.address, timeout=10) as admin:  # that broker alone answers
                if [e.values for e in describe_client_quotas(admin, [("client-id", client)], strict=True)] != [
                        {"producer_byte_rate": 5000.0}]:
                    return False
        return True

    started = time.monotonic()
    ck.wait_for(everyone_has_it, 5, "every broker to describe the quota")
    assert time.monotonic() - started < 2

    zk = KazooClient(hosts=f"{cluster.zookeeper.connect}/kbroker")
    zk.start(timeout=10)
    try:
        assert json.loads(zk.get(f"/config/clients/{client}")[0]) == {
            "version": 1, "config": {"producer_byte_rate": "5000"}}
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": f"clients/{client}"} in changes
    finally:
        zk.stop()
        zk.close()

    topic = f"quota-cluster-{uuid.uuid4().hex[:6]}"
    ck.create_topic(cluster, topic, num_partitions=1, replication_factor=1)
    leader = ck.leader_of(cluster, topic)
    from confluent_kafka import Producer

    stats = []
    p = Producer({"bootstrap.servers": cluster.brokers[leader].address, "client.id": client,
                  "statistics.interval.ms": 100, "stats_cb": stats.append, "linger.ms": 0})
    p.produce(topic, b"c" * 60_000)
    assert p.flush(20) == 0

    def throttled():
        p.poll(0.1)
        return max([b.get("throttle", {}).get("max", 0) for s in stats
                    for b in json.loads(s).get("brokers", {}).values()] or [0])

    ms = ck.wait_for(throttled, 5, "the throttle time in librdkafka's statistics")
    # one fresh rate: (60 kB / 10 s - 5000) / 5000 x 10 s, about 2 s
    assert 1500 <= ms <= 2600, ms
