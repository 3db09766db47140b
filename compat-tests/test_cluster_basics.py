"""A three-broker ZooKeeper cluster (real ZooKeeper, real kbroker processes): every broker gives the
same metadata, topics created through one broker are served by all, auto-created topics take
`default.replication.factor`, ZooKeeper holds Kafka's layout, and the topics CLI shows the ISR."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("cluster"), 3, {"default.replication.factor": "3"})
    yield c
    ck.stop_cluster(c)


def _views(cluster, topic):
    return {broker_id: ck.partitions(cluster, topic, via=broker_id) for broker_id in cluster.brokers}


def test_every_broker_reports_the_same_metadata(cluster):
    ck.create_topic(cluster, "same", 6, 3)
    # UpdateMetadata reaches the brokers one after the other: each must show all 6 partitions
    ck.wait_for(lambda: all(len(v) == 6 for v in _views(cluster, "same").values()), 10, "every broker to list 6")
    views = _views(cluster, "same")
    first = views[1]
    assert len(first) == 6 and all(v == first for v in views.values()), views
    leaders = sorted(p["leader"] for p in first.values())
    assert set(leaders) == {1, 2, 3}, "leadership is spread over the brokers"
    for p in first.values():
        assert sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3] and p["offline"] == []
    controllers = set()
    for broker in cluster.brokers.values():
        with AdminClient(broker.address, timeout=10) as admin:
            brokers, _ = admin.metadata(["same"])
            assert sorted(brokers) == [1, 2, 3]
            body = admin._any().call(60, {"include_cluster_authorized_operations": False}, version=1)  # DescribeCluster
            controllers.add(body.controller_id)
            assert sorted(b.broker_id for b in body.brokers) == [1, 2, 3]
    assert len(controllers) == 1 and controllers.pop() in (1, 2, 3)


def test_topic_created_through_one_broker_is_served_by_all(cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition

    with AdminClient(cluster.brokers[2].address, timeout=30) as admin:
        admin.create_topic("via-two", partitions=3, replication_factor=3)
    ck.wait_for(lambda: all(p["leader"] >= 0 for p in ck.partitions(cluster, "via-two", via=3).values())
                and len(ck.partitions(cluster, "via-two", via=3)) == 3, 20, "via-two online on broker 3")
    for broker in cluster.brokers.values():  # each broker alone as bootstrap: it routes to the leaders
        producer = Producer({"bootstrap.servers": broker.address, "acks": "all"})
        for i in range(30):
            producer.produce("via-two", key=str(i), value=f"{broker.broker_id}-{i}")
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.brokers[1].address, "group.id": "x",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("via-two", p, 0) for p in range(3)])
    values = set()
    for _ in range(200):
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.add(msg.value().decode())
        if len(values) == 90:
            break
    consumer.close()
    assert values == {f"{b}-{i}" for b in (1, 2, 3) for i in range(30)}


def test_auto_created_topic_takes_default_replication_factor(cluster):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": ck.live_bootstrap(cluster), "acks": "all"})
    producer.produce("auto-made", value=b"x")
    assert producer.flush(30) == 0
    parts = ck.partitions(cluster, "auto-made")
    assert len(parts) == 3  # num.partitions
    assert all(len(p["replicas"]) == 3 for p in parts.values())


def test_zookeeper_holds_kafkas_layout(cluster):
    from kazoo.client import KazooClient

    ck.create_topic(cluster, "layout", 2, 3, {"retention.ms": "3600000"})
    zk = KazooClient(hosts=f"{cluster.zookeeper.connect}/kbroker")
    zk.start(timeout=10)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        registration = json.loads(zk.get("/brokers/ids/2")[0])
        assert registration["endpoints"] == [f"PLAINTEXT://{cluster.brokers[2].address}"]
        assert registration["version"] == 5 and registration["port"] == cluster.brokers[2].port
        controller = json.loads(zk.get("/controller")[0])
        assert controller["brokerid"] in (1, 2, 3) and controller["version"] == 2
        assert int(zk.get("/controller_epoch")[0]) >= 1
        assert json.loads(zk.get("/cluster/id")[0])["id"]
        topic = json.loads(zk.get("/brokers/topics/layout")[0])
        assert topic["version"] == 3 and sorted(topic["partitions"]) == ["0", "1"] and topic["topic_id"]
        state = json.loads(zk.get("/brokers/topics/layout/partitions/0/state")[0])
        assert set(state) >= {"controller_epoch", "leader", "leader_epoch", "isr", "version"}
        assert sorted(state["isr"]) == [1, 2, 3] and state["leader"] == topic["partitions"]["0"][0]
        assert json.loads(zk.get("/config/topics/layout")[0]) == {"version": 1, "config": {"retention.ms": "3600000"}}
    finally:
        zk.stop()
        zk.close()


def test_topics_cli_describes_leaders_and_isr(cluster):
    ck.create_topic(cluster, "described", 3, 2)
    out = subprocess.run([sys.executable, "-m", "kbroker", "topics", "describe", "--topic", "described",
                          "--bootstrap-server", cluster.brokers[1].address, "--output", "json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    described = json.loads(out.stdout)
    text = json.dumps(described)
    parts = ck.partitions(cluster, "described")
    for index, p in parts.items():
        assert str(p["leader"]) in text
    under = subprocess.run([sys.executable, "-m", "kbroker", "topics", "describe", "--topic", "described",
                            "--under-replicated-partitions", "--bootstrap-server", cluster.brokers[1].address],
                           capture_output=True, text=True, timeout=60)
    assert under.returncode == 0 and under.stdout.strip() == "", under.stdout


def test_partitions_added_and_topic_deleted_cluster_wide(cluster):
    ck.create_topic(cluster, "grows", 2, 3)
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_partitions("grows", 5)
    ck.wait_for(lambda: all(len(ck.partitions(cluster, "grows", via=b)) == 5 for b in cluster.brokers), 20,
                "5 partitions on every broker")
    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        assert admin.delete_topics(["grows"]) == {"grows": None}
    ck.wait_for(lambda: all(ck.partitions(cluster, "grows", via=b) == {} for b in cluster.brokers), 20,
                "grows gone from every broker")
    for broker in cluster.brokers.values():  # Kafka's asynchronous delete: renamed now, removed later
        ck.wait_for(lambda: [p for p in (broker.data_dir / "data").glob("grows-*") if not p.name.endswith("-delete")]
                    == [] and len(list((broker.data_dir / "data").glob("grows-*-delete"))) == 5, 20,
                    f"grows' logs marked for deletion on broker {broker.broker_id}")


def test_producer_ids_are_unique_across_the_cluster(cluster):
    ids = []
    for broker in cluster.brokers.values():
        with AdminClient(broker.address, timeout=10) as admin:
            for _ in range(3):
                body = admin._any().call(22, {"transactional_id": None, "transaction_timeout": 60000,
                                              "producer_id": -1, "producer_epoch": -1}, version=4)
                assert body.error_code == 0
                ids.append(body.producer_id)
    assert len(set(ids)) == len(ids) == 9


def test_topic_config_changed_through_one_broker_is_seen_by_all(cluster):
    ck.create_topic(cluster, "configured", 1, 3)
    with AdminClient(cluster.brokers[1].address, timeout=30) as admin:
        admin.alter_topic_configs("configured", {"retention.ms": "123456"}, [])

    def seen_everywhere():
        for broker in cluster.brokers.values():
            with AdminClient(broker.address, timeout=10) as admin:
                configs = {c.name: c.value for c in admin.describe_topic_configs(["configured"])["configured"]}
                if configs.get("retention.ms") != "123456":
                    return False
        return True

    ck.wait_for(seen_everywhere, 20, "the new retention.ms on every broker")


def test_api_versions_adds_the_inter_broker_apis_in_a_cluster(cluster):
    from kbroker.api.dispatch import DISPATCH

    with AdminClient(cluster.brokers[1].address, timeout=10) as admin:
        served = admin._any().versions
    # everything but the SASL APIs, which only SASL listeners serve, and share groups' (off by default)
    assert served == {k: (spec.min_version, spec.max_version) for k, spec in DISPATCH.items()
                      if not spec.sasl_only and spec.group_protocol != "share"}
    assert {4, 5, 6, 7, 56} <= set(served)


def test_requests_of_an_older_controller_epoch_are_refused(cluster):
    """A deposed controller cannot move leaders: brokers answer STALE_CONTROLLER_EPOCH (11)."""
    ck.create_topic(cluster, "fenced", 1, 3)
    before = ck.partitions(cluster, "fenced")
    stale = {"controller_id": 9, "controller_epoch": 0, "broker_epoch": -1, "type_": 0, "live_leaders": [],
             "topic_states": [{"topic_name": "fenced", "topic_id": None, "partition_states": [
                 {"partition_index": 0, "controller_epoch": 0, "leader": 3, "leader_epoch": 99, "isr": [3],
                  "partition_epoch": 99, "replicas": [1, 2, 3]}]}]}
    for broker in cluster.brokers.values():
        with AdminClient(broker.address, timeout=10) as admin:
            assert admin._any().call(4, stale, version=7).error_code == 11
            update = {"controller_id": 9, "controller_epoch": 0, "broker_epoch": -1, "topic_states": [],
                      "live_brokers": []}
            assert admin._any().call(6, update, version=8).error_code == 11
    assert ck.partitions(cluster, "fenced") == before


def test_a_joining_brokers_first_metadata_names_the_cluster(cluster):
    """A broker answers Metadata only once the controller has told it the cluster: a client that
    asks the moment it listens (librdkafka's admin client looking for the controller) learns every
    broker and the controller, never an empty cluster."""
    import socket
    import struct
    import time

    from kbroker.wire.protocol import decode_response, encode_request

    joining = cluster.add_broker(4, wait=False)
    try:
        deadline = time.monotonic() + 60
        while True:  # connect the moment the listener is up
            assert time.monotonic() < deadline and joining.running, joining.log_tail()
            try:
                s = socket.create_connection((joining.host, joining.port), timeout=30)
                break
            except OSError:
                time.sleep(0.005)
        with s:
            s.sendall(encode_request(3, 12, 1, "first-metadata", {"topics": [], "allow_auto_topic_creation": False,
                                                                 "include_topic_authorized_operations": False}))
            stream = s.makefile("rb")
            size = struct.unpack(">i", stream.read(4))[0]
            _, body = decode_response(3, 12, stream.read(size))
        assert sorted(b.node_id for b in body.brokers) == [1, 2, 3, 4]
        assert body.controller_id in (1, 2, 3)
    finally:
        joining.stop(30)
        del cluster.brokers[4]


def test_a_follower_names_the_current_leader_to_produce_and_fetch(cluster):
    """KIP-951: Produce v10+ and Fetch v12+ sent to a follower answer NOT_LEADER_OR_FOLLOWER with
    the current leader and its endpoint (Fetch's endpoints from v16), so clients skip a Metadata
    round trip."""
    from kbroker.wire.records import Record, build_batch
    from kbroker.zookeeper.znodes import uuid_from_kafka

    with AdminClient(ck.live_bootstrap(cluster), timeout=30) as admin:
        admin.create_topic("kip951", assignment=[[1, 2, 3]])
    ck.wait_for(lambda: ck.in_sync(cluster, "kip951", 1, 3), 30, "kip951 online")
    leader = ck.partitions(cluster, "kip951")[0]["leader"]
    follower = next(b for b in (1, 2, 3) if b != leader)
    leader_address = cluster.brokers[leader].address
    with AdminClient(cluster.brokers[follower].address, timeout=30) as admin:
        conn = admin._any()
        produced = conn.call(0, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": "kip951", "partition_data": [{"index": 0, "records": build_batch([Record(0, 0, None, b"v")])}]}]}, 11)
        p = produced.responses[0].partition_responses[0]
        assert p.error_code == 6 and p.current_leader.leader_id == leader
        assert [f"{e.host}:{e.port}" for e in produced.node_endpoints] == [leader_address]
        fetched = conn.call(1, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                    {"topic_id": uuid_from_kafka(admin.describe_topics(["kip951"])[1][0].topic_id),
                                     "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                                                     "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                                     "log_start_offset": -1}]}],
                                "forgotten_topics_data": [], "rack_id": ""}, 16)
        f = fetched.responses[0].partitions[0]
        assert f.error_code == 6 and f.current_leader.leader_id == leader
        assert [f"{e.host}:{e.port}" for e in fetched.node_endpoints] == [leader_address]
