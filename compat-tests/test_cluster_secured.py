"""A three-broker cluster whose brokers talk to each other only over SASL_SSL (PLAIN with the
brokers' own credentials), and whose clients come in over another SASL_SSL listener with
SCRAM-SHA-512, through the failures of test_cluster_failover: the leader kill -9'ed and restarted
under an idempotent acks=all producer, and the leader paused past its ZooKeeper session. Every
acknowledged record is read back once, in order per partition, over the secured listener.

Each broker also keeps a PLAINTEXT listener for the test's own plumbing (clusterkit's admin calls
and the SCRAM user's creation); its INTERNAL and EXTERNAL listeners bind port 0, so a restarted
broker comes back on new ports and the others must learn them from its registration (Kafka's
version 5 JSON with every endpoint) and the controller's UpdateMetadata.
"""

from __future__ import annotations

import json

import pytest

import clusterkit as ck
import securitykit as sk
from kbroker.admin.client import AdminClient
from kbroker.admin.users import Upsertion, alter_user_scram_credentials
from kbroker.cluster_runner import BrokerProcess, LocalCluster, ZooKeeperServer, free_port

pytestmark = pytest.mark.timeout(600)

BROKER_PASSWORD = sk.secret("broker")
ALICE_PASSWORD = sk.secret("alice")
JAAS_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


@pytest.fixture
def secured(tmp_path):
    ck.require_zookeeper()
    pki = sk.make_pki(tmp_path / "pki")
    settings = {
        "zookeeper.session.timeout.ms": str(ck.SESSION_MS), "replica.lag.time.max.ms": "6000",
        "controlled.shutdown.retry.backoff.ms": "500", "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "6", "num.partitions": "3",
        "offsets.topic.replication.factor": "3", "default.replication.factor": "1",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config":
            f'{JAAS_PLAIN} username="broker" password="{BROKER_PASSWORD}" user_broker="{BROKER_PASSWORD}";',
        "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.broker_p12),
        "ssl.keystore.password": pki.keystore_password,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
        # the schema registry, secured like EXTERNAL: https with its keystore, basic auth against SCRAM
        "schema.registry.listener": "https://127.0.0.1:0", "schema.registry.security.listener": "EXTERNAL",
    }
    cluster = LocalCluster(tmp_path / "cluster", 3, overrides=settings)
    ck.LIVE_CLUSTERS.append(cluster)
    try:
        cluster.zookeeper = ZooKeeperServer(tmp_path / "cluster" / "zookeeper").start()
        connect = f"{cluster.zookeeper.connect}{cluster.chroot}"
        ports: set[int] = set()
        while len(ports) < 3:  # three different ones: a port handed out is free again until bound
            ports.add(free_port())
        for broker_id, port in zip((1, 2, 3), sorted(ports)):
            listeners = f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"
            cluster.brokers[broker_id] = BrokerProcess(broker_id, tmp_path / "cluster" / f"broker-{broker_id}",
                                                       connect, port=port,
                                                       overrides={**settings, "listeners": listeners})
            cluster.brokers[broker_id].start(wait=False)
        for broker in cluster.brokers.values():
            broker.wait_ready()
        def knows_all(address: str) -> bool:
            with AdminClient(address, timeout=5) as admin:
                return len(admin.metadata([])[0]) == 3

        ck.wait_for(lambda: all(knows_all(b.address) for b in cluster.brokers.values()), 30,
                    "every broker knows the others")
        with AdminClient(cluster.brokers[1].address, timeout=30) as admin:
            alter_user_scram_credentials(admin, [Upsertion("alice", "SCRAM-SHA-512", ALICE_PASSWORD)])
        yield cluster, pki
    finally:
        ck.stop_cluster(cluster)


def registration(cluster, broker_id: int) -> dict:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=f"{cluster.zookeeper.connect}{cluster.chroot}")
    zk.start(timeout=10)
    try:
        return json.loads(zk.get(f"/brokers/ids/{broker_id}")[0])
    finally:
        zk.stop()
        zk.close()


def external(cluster) -> str:
    addresses = []
    for broker_id, broker in cluster.brokers.items():
        if broker.running:
            endpoints = registration(cluster, broker_id)["endpoints"]
            addresses += [e.split("://", 1)[1] for e in endpoints if e.startswith("EXTERNAL://")]
    return ",".join(addresses)


def registry_urls(cluster) -> dict[int, str]:
    """Each running broker's registry URL, as it published it for the others (port 0: its own)."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=f"{cluster.zookeeper.connect}{cluster.chroot}")
    zk.start(timeout=10)
    try:
        return {i: zk.get(f"/kbroker/schema_registry/brokers/{i}")[0].decode()
                for i, b in cluster.brokers.items() if b.running and zk.exists(f"/kbroker/schema_registry/brokers/{i}")}
    finally:
        zk.stop()
        zk.close()


def client_config(pki) -> dict:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": ALICE_PASSWORD, "ssl.ca.location": str(pki.ca)}


def _isr_full(cluster, topic, partitions):
    parts = ck.partitions(cluster, topic)
    return len(parts) == partitions and all(len(p["isr"]) == 3 and p["leader"] >= 0 for p in parts.values())


def test_registration_names_every_listener_with_its_protocol(secured):
    cluster, _pki = secured
    reg = registration(cluster, 2)
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_SSL",
                                                     "EXTERNAL": "SASL_SSL"}
    assert [e.split("://")[0] for e in reg["endpoints"]] == ["PLAINTEXT", "INTERNAL", "EXTERNAL"]
    assert reg["port"] == cluster.brokers[2].port  # Kafka's top-level host/port: the PLAINTEXT listener


def test_leader_kill9_under_a_scram_producer_with_sasl_ssl_replication(secured):
    cluster, pki = secured
    ck.create_topic(cluster, "secured-kills", 3, 3, {"min.insync.replicas": "2"})
    producer = ck.AckedProducer(external(cluster), "secured-kills", **client_config(pki)).start()
    try:
        for round_ in range(3):
            ck.wait_for(lambda: producer.acked_count > 200 * (round_ + 1), 60, "acknowledgements before a kill")
            victim = ck.leader_of(cluster, "secured-kills", round_ % 3)
            acked_before = producer.acked_count
            cluster.brokers[victim].kill()
            ck.wait_for(lambda: ck.leader_of(cluster, "secured-kills", round_ % 3) not in (-1, victim), 30,
                        f"a new leader after killing broker {victim}")
            ck.wait_for(lambda: producer.acked_count > acked_before + 100, 60, "produce goes on after the kill")
            cluster.brokers[victim].start()  # new INTERNAL and EXTERNAL ports: learnt from ZooKeeper
            ck.wait_for(lambda: _isr_full(cluster, "secured-kills", 3), 60,
                        f"broker {victim} back in every ISR over SASL_SSL")
    finally:
        producer.stop()
    assert producer.failed == []
    assert producer.acked_count > 600
    read = ck.read_all(external(cluster), "secured-kills", 3, **client_config(pki))
    ck.check_exactly_once_in_order(producer.acked, read)
    # the brokers refused nobody on their internal listener: replication authenticated every time
    for broker in cluster.brokers.values():
        assert "authentication failed" not in broker.log_tail(200_000)
        assert BROKER_PASSWORD not in broker.log_tail(200_000) and ALICE_PASSWORD not in broker.log_tail(200_000)


def test_paused_leader_steps_down_over_sasl_ssl(secured):
    cluster, pki = secured
    ck.create_topic(cluster, "secured-paused", 1, 3, {"min.insync.replicas": "2"})
    producer = ck.AckedProducer(external(cluster), "secured-paused", **client_config(pki),
                                **{"socket.timeout.ms": 8000, "request.timeout.ms": 8000}).start()
    try:
        ck.wait_for(lambda: producer.acked_count > 300, 60, "acknowledgements before the pause")
        old = ck.leader_of(cluster, "secured-paused")
        cluster.brokers[old].pause()
        ck.wait_for(lambda: ck.leader_of(cluster, "secured-paused") not in (-1, old), ck.SESSION_MS / 1000 + 20,
                    "a new leader while the old one is paused")
        new = ck.leader_of(cluster, "secured-paused")
        acked_before = producer.acked_count
        ck.wait_for(lambda: producer.acked_count > acked_before + 300, 60, "produce through the new leader")
        cluster.brokers[old].resume()
        ck.wait_for(lambda: old in ck.partitions(cluster, "secured-paused", via=new)[0]["isr"], 60,
                    f"broker {old} resumed, following over SASL_SSL and back in the ISR")
    finally:
        producer.stop()
    assert producer.failed == []
    ck.check_exactly_once_in_order(producer.acked, ck.read_all(external(cluster), "secured-paused", 1,
                                                               **client_config(pki)))
    assert new != old


def test_a_changed_scram_password_is_refused_by_every_broker(secured):
    """AlterUserScramCredentials through one broker: within seconds every broker refuses the old
    password and accepts the new one (the /config/users change notification)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    cluster, pki = secured
    new_password = sk.secret("alice-new")

    def authenticates(address: str, password: str) -> bool:
        admin = ConfluentAdmin({"bootstrap.servers": address, **client_config(pki), "sasl.password": password})
        try:
            admin.list_topics(timeout=4)
            return True
        except KafkaException:
            return False

    addresses = external(cluster).split(",")
    assert len(addresses) == 3 and all(authenticates(a, ALICE_PASSWORD) for a in addresses)
    with AdminClient(cluster.brokers[2].address, timeout=30) as admin:
        alter_user_scram_credentials(admin, [Upsertion("alice", "SCRAM-SHA-512", new_password)])
    for address in addresses:
        ck.wait_for(lambda: not authenticates(address, ALICE_PASSWORD), 10, f"{address} refusing the old password")
        assert authenticates(address, new_password)


def test_schema_registry_over_https_forwards_to_the_writer_and_survives_its_kill(secured):
    """Every broker's registry is https with basic authentication (alice's SCRAM password); a
    registration through a broker that does not lead `_schemas`-0 is forwarded over TLS to the one
    that does, which checks alice's credentials again. The writer is then SIGKILLed: the others go
    on, and every acknowledged schema is answered by every registry with its id."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    cluster, pki = secured
    ck.wait_for(lambda: len(registry_urls(cluster)) == 3, 30, "three registry URLs in ZooKeeper")
    urls = registry_urls(cluster)
    assert all(url.startswith("https://127.0.0.1:") for url in urls.values())

    def client(broker_id, password=ALICE_PASSWORD):
        return SchemaRegistryClient({"url": urls[broker_id], "ssl.ca.location": str(pki.ca), "max.retries": 0,
                                     "basic.auth.user.info": f"alice:{password}"})

    def schema(i):
        return Schema(json.dumps({"type": "record", "name": f"S{i}", "fields": [{"name": "f", "type": "int"}]}),
                      "AVRO")

    ids = {0: client(1).register_schema("s-0", schema(0))}  # creates _schemas
    ck.wait_for(lambda: ck.in_sync(cluster, "_schemas", 1, 3), 30, "_schemas in sync")
    writer = ck.leader_of(cluster, "_schemas")
    others = [i for i in urls if i != writer]
    ids[1] = client(others[0]).register_schema("s-1", schema(1))  # forwarded over TLS
    with pytest.raises(Exception) as refused:
        client(others[1], "wrong").register_schema("s-x", schema(99))
    assert getattr(refused.value, "http_status_code", None) == 401
    cluster.brokers[writer].kill()
    ck.wait_for(lambda: ck.leader_of(cluster, "_schemas") not in (-1, writer), 30, "a new writer")
    ck.wait_for(lambda: _registers(client(others[1]), "s-2", schema(2), ids), 60, "a registration after the kill")
    for broker_id in others:
        for i, schema_id in ids.items():
            assert json.loads(client(broker_id).get_schema(schema_id).schema_str)["name"] == f"S{i}"
    assert len(set(ids.values())) == 3


def _registers(client, subject, schema, ids) -> bool:
    try:
        ids[len(ids)] = client.register_schema(subject, schema)
        return True
    except Exception:
        return False
