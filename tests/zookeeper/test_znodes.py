"""Kafka's ZooKeeper layout: every payload kbroker writes is the JSON Kafka writes (ZkData.scala),
round trips, and payloads written by Kafka itself (hand-written in Kafka's exact format, current
and older versions) decode to what Kafka would read from them."""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.znodes import BrokerRegistration, LeaderAndIsr, TopicAssignment

TOPIC_ID = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")
TOPIC_ID_KAFKA = "AAECAwQFBgcICQoLDA0ODw"  # Uuid.toString: url-safe base64, no padding


def parsed(data: bytes) -> dict:
    value = json.loads(data)
    assert isinstance(value, dict)
    return value


def compact(data: bytes) -> bool:
    """Kafka's Json.encodeAsBytes (Jackson) writes no whitespace between tokens."""
    return data == json.dumps(json.loads(data), separators=(",", ":")).encode()


def recent_ms(text: str) -> bool:
    return isinstance(text, str) and abs(int(text) - time.time() * 1000) < 60_000


# -- paths ---------------------------------------------------------------------------------------

def test_paths_are_kafkas():
    assert zk.CLUSTER_ID == "/cluster/id"
    assert zk.CONTROLLER == "/controller" and zk.CONTROLLER_EPOCH == "/controller_epoch"
    assert zk.broker_path(3) == "/brokers/ids/3"
    assert zk.BROKER_SEQID == "/brokers/seqid"
    assert zk.topic_path("orders") == "/brokers/topics/orders"
    assert zk.partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert zk.partition_path("orders", 2) == "/brokers/topics/orders/partitions/2"
    assert zk.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert zk.topic_config_path("orders") == "/config/topics/orders"
    assert zk.CONFIG_BROKERS == "/config/brokers"
    assert zk.CONFIG_CHANGES == "/config/changes" and zk.CONFIG_CHANGE_PREFIX == "config_change_"
    assert zk.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zk.ISR_CHANGE_NOTIFICATION == "/isr_change_notification"
    assert zk.LATEST_PRODUCER_ID_BLOCK == "/latest_producer_id_block"
    assert zk.LOG_DIR_EVENT_NOTIFICATION == "/log_dir_event_notification"
    assert zk.log_dir_event_path() == "/log_dir_event_notification/log_dir_event_"  # a sequential create's prefix
    assert zk.log_dir_event_path("log_dir_event_0000000003") == "/log_dir_event_notification/log_dir_event_0000000003"


def test_persistent_paths_are_kafkas_persistent_zk_paths():
    """ZkData.PersistentZkPaths: the fixed paths plus /config/<type> for every ConfigType.ALL
    (topics, clients, users, brokers, ips)."""
    kafka = {"/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
             "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
             "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
             "/config/brokers", "/config/ips"}
    assert set(zk.PERSISTENT_PATHS) == kafka
    assert len(zk.PERSISTENT_PATHS) == len(set(zk.PERSISTENT_PATHS))


# -- topic ids -----------------------------------------------------------------------------------

def test_topic_id_is_kafkas_base64_form():
    assert zk.uuid_to_kafka(TOPIC_ID) == TOPIC_ID_KAFKA
    assert zk.uuid_from_kafka(TOPIC_ID_KAFKA) == TOPIC_ID
    # url-safe alphabet: '-' and '_' where standard base64 has '+' and '/'
    tricky = uuid.UUID(bytes=b"\xfb\xff\xbf" + bytes(13))
    assert base64.b64encode(tricky.bytes).decode().startswith("+/+/")
    assert zk.uuid_to_kafka(tricky) == "-_-_AAAAAAAAAAAAAAAAAA"
    assert zk.uuid_from_kafka("-_-_AAAAAAAAAAAAAAAAAA") == tricky


@given(st.uuids())
def test_topic_id_round_trips(value):
    text = zk.uuid_to_kafka(value)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert zk.uuid_from_kafka(text) == value


# -- /cluster/id ---------------------------------------------------------------------------------

def test_cluster_id():
    data = zk.encode_cluster_id("MkU3OEVBNTcwNTJENDM2Qg")
    assert parsed(data) == {"version": "1", "id": "MkU3OEVBNTcwNTJENDM2Qg"}  # Kafka writes the version as a string
    assert compact(data)
    assert zk.decode_cluster_id(b'{"version":"1","id":"Zq1sa9Z4QjSCkmQ9qzVdEA"}') == "Zq1sa9Z4QjSCkmQ9qzVdEA"


# -- /brokers/ids/<id> ---------------------------------------------------------------------------

def test_broker_registration_v5_is_what_kafka_writes():
    data = zk.encode_broker(BrokerRegistration(1, "localhost", 9092))
    payload = parsed(data)
    assert recent_ms(payload.pop("timestamp"))
    assert payload == {"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                       "endpoints": ["PLAINTEXT://localhost:9092"], "jmx_port": -1, "port": 9092,
                       "host": "localhost", "version": 5}
    assert compact(data)
    # the key order a Kafka 3.x broker's registration shows in zookeeper-shell
    assert data.startswith(b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                           b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
                           b'"host":"localhost","version":5,"timestamp":"')


def test_broker_registration_rack_only_when_set():
    assert "rack" not in parsed(zk.encode_broker(BrokerRegistration(2, "h", 1)))
    assert parsed(zk.encode_broker(BrokerRegistration(2, "h", 1, rack="eu-west-1a")))["rack"] == "eu-west-1a"


@pytest.mark.parametrize("reg", [
    BrokerRegistration(1, "127.0.0.1", 9092),
    BrokerRegistration(7, "broker-7.example.com", 19093, rack="rack-b", epoch=4294967301),
])
def test_broker_registration_round_trips(reg):
    assert zk.decode_broker(reg.broker_id, zk.encode_broker(reg), reg.epoch) == reg
    assert reg.endpoint == f"PLAINTEXT://{reg.host}:{reg.port}"


def test_decode_broker_v5_written_by_kafka():
    data = (b'{"features":{"metadata.version":{"min_version":1,"max_version":21}},'
            b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-1:9092"],'
            b'"rack":"us-east-1a","jmx_port":9999,"port":9092,"host":"kafka-1","version":5,"timestamp":"1700000000000"}')
    assert zk.decode_broker(1, data, 8589934622) == BrokerRegistration(1, "kafka-1", 9092, "us-east-1a", 8589934622)


def test_decode_broker_v4_without_features():
    data = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://kafka-2:9092"],'
            b'"jmx_port":-1,"host":"kafka-2","timestamp":"1600000000000","port":9092,"version":4}')
    assert zk.decode_broker(2, data) == BrokerRegistration(2, "kafka-2", 9092, None, -1)


def test_decode_broker_v4_named_listeners():
    """Listener names are not security protocols: CLIENT and REPLICATION are both PLAINTEXT here,
    and Kafka's top-level host/port name the first of them."""
    data = (b'{"listener_security_protocol_map":{"CLIENT":"PLAINTEXT","REPLICATION":"PLAINTEXT"},'
            b'"endpoints":["CLIENT://10.0.0.5:9092","REPLICATION://10.0.0.5:9093"],"rack":"dc1","jmx_port":-1,'
            b'"host":"10.0.0.5","timestamp":"1600000000000","port":9092,"version":4}')
    endpoints = (("CLIENT", "PLAINTEXT", "10.0.0.5", 9092), ("REPLICATION", "PLAINTEXT", "10.0.0.5", 9093))
    assert zk.decode_broker(5, data) == BrokerRegistration(5, "10.0.0.5", 9092, "dc1", endpoints=endpoints)
    # the reader's own listener (inter-broker, or the control plane) decides the address it connects to
    assert zk.decode_broker(5, data, listener="REPLICATION") == BrokerRegistration(5, "10.0.0.5", 9093, "dc1",
                                                                                   endpoints=endpoints)


def test_broker_registration_with_secured_listeners_as_kafka_writes_it():
    endpoints = (("INTERNAL", "SASL_SSL", "10.0.0.5", 9094), ("EXTERNAL", "SSL", "broker.example.com", 9093))
    data = zk.encode_broker(BrokerRegistration(5, "10.0.0.5", 9094, endpoints=endpoints))
    payload = json.loads(data)
    assert payload["listener_security_protocol_map"] == {"INTERNAL": "SASL_SSL", "EXTERNAL": "SSL"}
    assert payload["endpoints"] == ["INTERNAL://10.0.0.5:9094", "EXTERNAL://broker.example.com:9093"]
    assert (payload["host"], payload["port"]) == (None, -1)  # no PLAINTEXT listener: Kafka writes null and -1
    reg = zk.decode_broker(5, data, listener="INTERNAL")
    assert (reg.host, reg.port, reg.endpoints) == ("10.0.0.5", 9094, endpoints)


def test_decode_broker_ipv6_endpoint():
    data = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://[::1]:9092"],'
            b'"jmx_port":-1,"host":"::1","timestamp":"1600000000000","port":9092,"version":4}')
    reg = zk.decode_broker(3, data)
    assert (reg.host, reg.port) == ("::1", 9092)


def test_decode_broker_v2_and_v1():
    v2 = (b'{"jmx_port":-1,"timestamp":"1453926093406","endpoints":["PLAINTEXT://old-kafka:9092"],'
          b'"host":"old-kafka","version":2,"port":9092}')
    v1 = b'{"jmx_port":-1,"timestamp":"1453926093406","host":"older-kafka","version":1,"port":9091}'
    assert zk.decode_broker(4, v2) == BrokerRegistration(4, "old-kafka", 9092)
    assert zk.decode_broker(4, v1) == BrokerRegistration(4, "older-kafka", 9091)


def test_decode_broker_prefers_the_plaintext_endpoint():
    """kbroker talks PLAINTEXT only. A Kafka broker with a TLS listener first registers it first in
    `endpoints`; the PLAINTEXT one (which Kafka also writes as the top-level host/port for clients
    that only speak PLAINTEXT) is the one to connect to."""
    data = (b'{"features":{},"listener_security_protocol_map":{"SSL":"SSL","PLAINTEXT":"PLAINTEXT"},'
            b'"endpoints":["SSL://kafka-3:9093","PLAINTEXT://kafka-3:9092"],"jmx_port":-1,"port":9092,'
            b'"host":"kafka-3","version":5,"timestamp":"1700000000000"}')
    reg = zk.decode_broker(3, data)
    assert (reg.host, reg.port) == ("kafka-3", 9092)


# -- /controller, /controller_epoch --------------------------------------------------------------

def test_controller_v2_is_what_kafka_writes():
    data = zk.encode_controller(2)
    payload = parsed(data)
    assert recent_ms(payload.pop("timestamp"))
    assert payload == {"version": 2, "brokerid": 2, "kraftControllerEpoch": -1}
    assert compact(data) and data.startswith(b'{"version":2,"brokerid":2,"timestamp":"')
    assert zk.decode_controller(data) == 2


def test_decode_controller_written_by_kafka():
    assert zk.decode_controller(b'{"version":2,"brokerid":3,"timestamp":"1698739526473","kraftControllerEpoch":-1}') == 3
    assert zk.decode_controller(b'{"version":1,"brokerid":1,"timestamp":"1560000000000"}') == 1
    # a KRaft controller during a migration writes its own epoch
    assert zk.decode_controller(b'{"version":2,"brokerid":3000,"timestamp":"1698739526473","kraftControllerEpoch":5}') == 3000


@pytest.mark.parametrize("data", [None, b"", b"not json", b"[1,2]", b'{"version":2}', b'{"brokerid":"x"}'])
def test_decode_controller_garbage_is_no_controller(data):
    assert zk.decode_controller(data) == -1


def test_controller_epoch():
    assert zk.encode_controller_epoch(7) == b"7"  # Kafka: epoch.toString, no JSON
    assert zk.decode_controller_epoch(b"7") == 7
    assert zk.decode_controller_epoch(b"12\n") == 12
    for epoch in (0, 1, 2**31 - 1):
        assert zk.decode_controller_epoch(zk.encode_controller_epoch(epoch)) == epoch


# -- /brokers/topics/<t> -------------------------------------------------------------------------

def test_topic_assignment_v3_is_what_kafka_writes():
    data = zk.encode_topic(TopicAssignment("orders", TOPIC_ID, {1: [2, 3, 1], 0: [1, 2, 3]}))
    assert parsed(data) == {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
                            "adding_replicas": {}, "removing_replicas": {}, "topic_id": TOPIC_ID_KAFKA}
    assert compact(data)


def test_topic_assignment_without_topic_id_omits_it():
    assert "topic_id" not in parsed(zk.encode_topic(TopicAssignment("t", None, {0: [1]})))


def test_topic_assignment_during_reassignment():
    a = TopicAssignment("orders", TOPIC_ID, {0: [1, 2, 3, 4], 1: [2, 3]}, adding={0: [4]}, removing={0: [1]})
    payload = parsed(zk.encode_topic(a))
    assert payload["adding_replicas"] == {"0": [4]} and payload["removing_replicas"] == {"0": [1]}
    assert zk.decode_topic("orders", zk.encode_topic(a)) == a


@given(st.dictionaries(st.integers(0, 200), st.lists(st.integers(0, 10_000), min_size=1, max_size=5, unique=True),
                       max_size=20),
       st.none() | st.uuids())
@settings(max_examples=60)
def test_topic_assignment_round_trips(partitions, topic_id):
    a = TopicAssignment("t", topic_id, partitions)
    b = zk.decode_topic("t", zk.encode_topic(a))
    assert b == a
    assert b.as_list() == [partitions[p] for p in sorted(partitions)]


def test_decode_topic_v3_written_by_kafka():
    data = (b'{"partitions":{"2":[3,1,2],"0":[1,2,3],"1":[2,3,1]},"topic_id":"Q2t7i0vTQhSbuH9bH5yD5A",'
            b'"adding_replicas":{},"removing_replicas":{},"version":3}')
    a = zk.decode_topic("orders", data)
    assert a.topic == "orders"
    assert a.topic_id == uuid.UUID("436b7b8b-4bd3-4214-9bb8-7f5b1f9c83e4")
    assert zk.uuid_to_kafka(a.topic_id) == "Q2t7i0vTQhSbuH9bH5yD5A"
    assert a.partitions == {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    assert a.as_list() == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    assert (a.adding, a.removing) == ({}, {})


@pytest.mark.parametrize("data", [
    b'{"version":2,"partitions":{"0":[1,2],"1":[2,1]},"adding_replicas":{},"removing_replicas":{}}',  # Kafka 2.4-2.7
    b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}',  # older Kafka
])
def test_decode_topic_without_topic_id(data):
    a = zk.decode_topic("legacy", data)
    assert a.topic_id is None
    assert a.partitions == {0: [1, 2], 1: [2, 1]}
    assert (a.adding, a.removing) == ({}, {})


def test_decode_topic_tolerates_missing_parts():
    assert zk.decode_topic("t", b"{}").partitions == {}
    assert zk.decode_topic("t", b'{"version":3,"partitions":{"0":[1]},"adding_replicas":null}').adding == {}


# -- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------------------

def test_partition_state_v1_is_what_kafka_writes():
    data = zk.encode_partition_state(LeaderAndIsr(2, 5, (2, 3), 3, partition_epoch=11))
    # the layout of a Kafka 3.x state znode, byte for byte (RECOVERED leaders write no recovery state)
    assert data == b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2,3]}'


def test_partition_state_round_trips_with_the_znode_version_as_partition_epoch():
    state = LeaderAndIsr(-1, 6, (2,), 4, partition_epoch=0)
    back = zk.decode_partition_state(zk.encode_partition_state(state), 17)
    assert back == state.with_(partition_epoch=17)


@pytest.mark.parametrize("data, expected", [
    (b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2,3]}', LeaderAndIsr(2, 5, (2, 3), 3, 9)),
    (b'{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":12,"isr":[3]}', LeaderAndIsr(-1, 12, (3,), 7, 9)),
    # an unclean election with leader recovery marks the state RECOVERING
    (b'{"controller_epoch":8,"leader":1,"version":1,"leader_epoch":13,"isr":[1],"leader_recovery_state":1}',
     LeaderAndIsr(1, 13, (1,), 8, 9)),
])
def test_decode_partition_state_written_by_kafka(data, expected):
    assert zk.decode_partition_state(data, 9) == expected


def test_leader_and_isr_with_():
    s = LeaderAndIsr(1, 2, (1, 2), 3, 4)
    assert s.with_(isr=(1,)) == LeaderAndIsr(1, 2, (1,), 3, 4)
    assert s == LeaderAndIsr(1, 2, (1, 2), 3, 4)  # unchanged


# -- /config/topics/<t>, /config/changes ---------------------------------------------------------

def test_config_v1_is_what_kafka_writes():
    data = zk.encode_config({"retention.ms": "86400000", "cleanup.policy": "compact"})
    assert parsed(data) == {"version": 1, "config": {"retention.ms": "86400000", "cleanup.policy": "compact"}}
    assert compact(data)
    assert parsed(zk.encode_config({})) == {"version": 1, "config": {}}


def test_decode_config_written_by_kafka():
    assert zk.decode_config(b'{"version":1,"config":{"min.insync.replicas":"2","retention.ms":"1000"}}') == {
        "min.insync.replicas": "2", "retention.ms": "1000"}
    assert zk.decode_config(b'{"version":1,"config":{}}') == {}
    assert zk.decode_config(None) == {}


@given(st.dictionaries(st.text(min_size=1), st.text()))
def test_config_round_trips(config):
    assert zk.decode_config(zk.encode_config(config)) == config


def test_config_change_v2_is_what_kafka_writes():
    data = zk.encode_config_change("topics", "orders")
    assert data == b'{"version":2,"entity_path":"topics/orders"}'
    assert zk.decode_config_change(data) == ("topics", "orders")


@pytest.mark.parametrize("data, expected", [
    (b'{"version":2,"entity_path":"topics/payments"}', ("topics", "payments")),
    (b'{"version":2,"entity_path":"brokers/<default>"}', ("brokers", "<default>")),
    (b'{"version":2,"entity_path":"brokers/1"}', ("brokers", "1")),
    (b'{"version":2,"entity_path":"users/alice/clients/app"}', ("users", "alice/clients/app")),
    (b'{"version":2,"entity_path":"nonsense"}', None),
    (b'{"version":2}', None),
])
def test_decode_config_change(data, expected):
    assert zk.decode_config_change(data) == expected


# -- /latest_producer_id_block -------------------------------------------------------------------

def test_producer_id_block_is_what_kafka_writes():
    data = zk.encode_producer_id_block(2, 1000, 1000)
    assert parsed(data) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}  # strings, as Kafka
    assert compact(data)
    assert zk.next_producer_id_block_start(data) == 2000


def test_producer_id_block_written_by_kafka():
    assert zk.next_producer_id_block_start(b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}') == 1000
    big = b'{"version":1,"broker":3,"block_start":"9223372036854774808","block_end":"9223372036854775806"}'
    assert zk.next_producer_id_block_start(big) == 9223372036854775807
    assert zk.next_producer_id_block_start(None) == 0
    assert zk.next_producer_id_block_start(b"") == 0


def test_producer_id_blocks_chain_without_gaps_or_overlap():
    start = zk.next_producer_id_block_start(None)
    seen = []
    for broker in (1, 2, 1, 3):
        data = zk.encode_producer_id_block(broker, start, 1000)
        seen.append((start, start + 999))
        start = zk.next_producer_id_block_start(data)
    assert seen == [(0, 999), (1000, 1999), (2000, 2999), (3000, 3999)]


# -- /log_dir_event_notification ------------------------------------------------------------------

def test_log_dir_event_is_kafkas_json():
    """LogDirEventNotificationSequenceZNode.encode: version 1, the broker, event 1 (a log dir failure)."""
    assert json.loads(zk.encode_log_dir_event(3)) == {"version": 1, "broker": 3, "event": 1}
    assert zk.decode_log_dir_event(zk.encode_log_dir_event(3)) == 3
    assert zk.decode_log_dir_event(b'{"version":1,"broker":12,"event":1}') == 12  # as Kafka writes it


@pytest.mark.parametrize("data", [b"", None, b"not json", b"\xff\xfe", b"[1]", b'{"version":1}',
                                  b'{"broker":"3"}', b'{"broker":true}', b'{"broker":1.5}'])
def test_unreadable_log_dir_event_names_no_broker(data):
    assert zk.decode_log_dir_event(data) is None
