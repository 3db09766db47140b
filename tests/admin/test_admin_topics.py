"""`kbroker topics` without a real broker: the argument parsing (replica assignments, configs), the
partition filters and the describe output from made-up topics, and the client's topic requests
against fake brokers (what is sent, where it goes, how answers and errors come back)."""

import json
import uuid

import pytest

from kbroker.admin.client import (API_VERSIONS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS,
                                  INCREMENTAL_ALTER_CONFIGS, METADATA, AdminClient, AdminError, ConfigValue,
                                  KafkaErrorResponse, PartitionState, TopicState, kafka_uuid)
from kbroker.admin.topics import (describe_data, describe_text, min_isr_of, overridden_configs, parse_configs,
                                  parse_replica_assignment, partition_flags, topic_views)
from kbroker.cli import main
from test_admin_client import FakeBroker, api_versions  # the fake broker of the client tests

TOPIC_UUID = uuid.UUID("6f1c5f0e-8d7e-4b53-9d3e-1f7a2b4c5d6e")
TOPIC_ID = "bxxfDo1-S1OdPh96K0xdbg"  # as Kafka's tools print it: URL-safe base64, no padding
SERVED = {API_VERSIONS: (0, 4), METADATA: (0, 12), CREATE_TOPICS: (2, 7), DELETE_TOPICS: (1, 6),
          CREATE_PARTITIONS: (0, 3), DESCRIBE_CONFIGS: (1, 4), INCREMENTAL_ALTER_CONFIGS: (0, 1)}
STATIC_BROKER, DYNAMIC_TOPIC, DEFAULT = 4, 1, 5


# -- parsing -----------------------------------------------------------------------------------------

def test_replica_assignment_is_kafka_topics_syntax():
    assert parse_replica_assignment("1:2,2:3,3:1") == [[1, 2], [2, 3], [3, 1]]
    assert parse_replica_assignment(" 5 : 4 , 4:5") == [[5, 4], [4, 5]]  # preferred leader first, kept
    assert parse_replica_assignment("0") == [[0]]
    assert parse_replica_assignment("0,0,0") == [[0], [0], [0]]


@pytest.mark.parametrize("text, message", [
    ("1:1,2:3", "may not contain duplicate entries: 1"),
    ("1:2,3", "Partition 1 has different replication factor: [3]"),
    ("1:2,3:4:5", "Partition 1 has different replication factor"),
    ("1:x", "partition 0 is '1:x'"),
    ("1:2,,3:4", "partition 1 is ''"),
    ("", "partition 0 is ''"),
])
def test_bad_replica_assignments(text, message):
    with pytest.raises(AdminError) as e:
        parse_replica_assignment(text)
    assert message in str(e.value)


def test_configs():
    assert parse_configs(["retention.ms=1000", " cleanup.policy = compact,delete", "a=b=c", "retention.ms=5"]) == {
        "retention.ms": "5", "cleanup.policy": "compact,delete", "a": "b=c"}
    assert parse_configs(["message.timestamp.type="]) == {"message.timestamp.type": ""}
    for bad in ("retention.ms", "=1", " =1"):
        with pytest.raises(AdminError, match="expected KEY=VALUE"):
            parse_configs([bad])


def test_topic_ids_print_as_kafka_prints_them():
    assert kafka_uuid(TOPIC_UUID) == TOPIC_ID
    assert kafka_uuid(uuid.UUID(int=0)) is None and kafka_uuid(None) is None


# -- filters and output ------------------------------------------------------------------------------

def cfg(name, value, source=DEFAULT):
    return ConfigValue(name, value, source, False, False)


CONFIGS = [cfg("retention.ms", "1000", DYNAMIC_TOPIC), cfg("segment.bytes", "1048576", STATIC_BROKER),
           cfg("min.insync.replicas", "2", DYNAMIC_TOPIC), cfg("cleanup.policy", "delete")]
ORDERS = TopicState("orders", TOPIC_ID, False, (
    PartitionState(0, 1, (1, 2, 3), (1, 2, 3), ()),  # healthy
    PartitionState(1, 2, (2, 3, 1), (2, 1), (3,)),  # under-replicated, at min ISR
    PartitionState(2, -1, (3, 1, 2), (3,), (3,)),  # no leader: unavailable and under min ISR
    PartitionState(3, 3, (3, 1, 2), (3,), (3,)),  # leader not a live broker; ISR below min
))
LIVE = {1, 2}


def test_partition_flags_follow_kafka_topics():
    p0, p1, p2, p3 = ORDERS.partitions
    flags = [partition_flags(p, LIVE, 2) for p in ORDERS.partitions]
    assert flags[0] == {"under_replicated": False, "unavailable": False, "under_min_isr": False, "at_min_isr": False}
    assert flags[1] == {"under_replicated": True, "unavailable": False, "under_min_isr": False, "at_min_isr": True}
    assert flags[2] == {"under_replicated": True, "unavailable": True, "under_min_isr": True, "at_min_isr": False}
    assert flags[3] == {"under_replicated": True, "unavailable": True, "under_min_isr": True, "at_min_isr": False}
    # min ISR unknown: only a missing leader is under it; a live leader makes p3 available
    assert partition_flags(p3, {1, 2, 3}, None)["unavailable"] is False
    assert partition_flags(p3, {1, 2, 3}, None)["under_min_isr"] is False
    assert partition_flags(p2, {1, 2, 3}, None)["under_min_isr"] is True


def test_configs_shown_are_those_not_at_their_default():
    assert overridden_configs(CONFIGS) == {"min.insync.replicas": "2", "retention.ms": "1000",
                                           "segment.bytes": "1048576"}
    assert min_isr_of(CONFIGS) == 2
    assert min_isr_of([cfg("min.insync.replicas", "x")]) is None
    assert min_isr_of([]) is None


def test_describe_text_is_kafka_topics_layout():
    plain = TopicState("plain", None, False, (PartitionState(0, 1, (1,), (1,), ()),))
    views = topic_views([ORDERS, plain], {"orders": CONFIGS, "plain": [cfg("min.insync.replicas", "1")]}, LIVE, [])
    assert describe_text(views, filtered=False).split("\n") == [
        f"Topic: orders\tTopicId: {TOPIC_ID}\tPartitionCount: 4\tReplicationFactor: 3\t"
        "Configs: min.insync.replicas=2,retention.ms=1000,segment.bytes=1048576",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tOffline: ",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,1\tOffline: 3",
        "\tTopic: orders\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3\tOffline: 3",
        "\tTopic: orders\tPartition: 3\tLeader: 3\tReplicas: 3,1,2\tIsr: 3\tOffline: 3",
        "Topic: plain\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: ",  # no topic id: not shown
        "\tTopic: plain\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tOffline: ",
    ]


@pytest.mark.parametrize("wanted, partitions", [
    (["under_replicated"], [1, 2, 3]),
    (["unavailable"], [2, 3]),
    (["under_min_isr"], [2, 3]),
    (["at_min_isr"], [1]),
    (["at_min_isr", "unavailable"], [1, 2, 3]),  # several filters: a partition matching any
])
def test_filters_print_only_matching_partition_lines(wanted, partitions):
    healthy = TopicState("healthy", TOPIC_ID, False, (PartitionState(0, 1, (1, 2), (1, 2), ()),))
    views = topic_views([ORDERS, healthy], {"orders": CONFIGS, "healthy": [cfg("min.insync.replicas", "1")]},
                        LIVE, wanted)
    assert [v.topic.name for v in views] == ["orders"]  # no partition of "healthy" matches: left out
    lines = describe_text(views, filtered=True).split("\n")
    assert [int(line.split("\tPartition: ")[1].split("\t")[0]) for line in lines] == partitions
    assert all(line.startswith("\tTopic: orders\t") for line in lines)  # no header line with a filter


def test_describe_json():
    views = topic_views([ORDERS], {"orders": CONFIGS}, LIVE, ["unavailable"])
    [topic] = json.loads(json.dumps(describe_data(views)))
    assert {k: v for k, v in topic.items() if k != "partitions"} == {
        "topic": "orders", "topic_id": TOPIC_ID, "internal": False, "partition_count": 4,
        "replication_factor": 3, "min_insync_replicas": 2,
        "configs": {"min.insync.replicas": "2", "retention.ms": "1000", "segment.bytes": "1048576"}}
    assert topic["partitions"][0] == {"partition": 2, "leader": None, "replicas": [3, 1, 2], "isr": [3],
                                      "offline": [3], "under_replicated": True, "unavailable": True,
                                      "under_min_isr": True, "at_min_isr": False, "reassignment": None}
    assert [p["partition"] for p in topic["partitions"]] == [2, 3]


# -- argument errors before any request --------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["create", "t", "--replica-assignment", "1:2", "--partitions", "3"], "cannot be combined"),
    (["create", "t", "--replica-assignment", "1:2", "--replication-factor", "2"], "cannot be combined"),
    (["create", "t", "--replica-assignment", "1:2,3"], "different replication factor"),
    (["create", "t", "--partitions", "0"], "partitions must be greater than 0"),
    (["create", "t", "--replication-factor", "40000"], "between 1 and 32767"),
    (["create", "t", "--config", "retention.ms"], "expected KEY=VALUE"),
    (["alter", "t"], "nothing to alter"),
    (["alter", "t", "--config", "retention.ms=1", "--delete-config", "retention.ms"], "both set and deleted"),
])
def test_bad_arguments_are_reported_before_connecting(capsys, argv, message):
    # port 1: nothing listens there, so a request would fail with "cannot connect" instead
    assert main(["topics", *argv, "--bootstrap-server", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kbroker topics: ") and message in err and err.count("\n") == 1


def test_usage_errors_exit_2():
    for argv in (["topics"], ["topics", "create"], ["topics", "alter", "t", "--partitions", "x"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


# -- the client against fake brokers -----------------------------------------------------------------

@pytest.fixture
def fake():
    brokers = []

    def start(handler):
        b = FakeBroker(handler)
        brokers.append(b)
        return b

    yield start
    for b in brokers:
        b.close()


def metadata_answer(brokers, controller, topics=()):
    return {"brokers": [{"node_id": n, "host": "127.0.0.1", "port": port} for n, port in brokers],
            "controller_id": controller, "cluster_id": "c", "topics": list(topics)}


class Cluster:
    """Two fake brokers: `boot` (node 1) answers Metadata naming `ctrl` (node 2) as the controller;
    topic requests are recorded as (broker, api key, body) and answered by `answer(api_key, body)`."""

    def __init__(self, fake, answer, served=SERVED, not_controller_first=False):
        self.seen = []
        self.answer = answer
        self.served = served
        self.not_controller = not_controller_first
        self.ctrl = fake(lambda h, body, port: self._handle("ctrl", h, body))
        self.boot = fake(lambda h, body, port: self._handle("boot", h, body))

    def _handle(self, who, h, body):
        if h.api_key == API_VERSIONS:
            return api_versions(h, self.served)
        if h.api_key == METADATA and not body.topics and body.topics is not None:
            return metadata_answer([(1, self.boot.port), (2, self.ctrl.port)], 2)
        self.seen.append((who, h.api_key, h.api_version, body))
        if who == "boot" and h.api_key in (CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS):
            raise AssertionError("a topic change went to a broker that is not the controller")
        if self.not_controller and h.api_key == CREATE_TOPICS:
            self.not_controller = False
            return {"topics": [{"name": body.topics[0].name, "error_code": 41}]}
        return self.answer(h.api_key, body)


def test_create_goes_to_the_controller_with_kafka_topics_fields(fake):
    def answer(api_key, body):
        t = body.topics[0]
        return {"topics": [{"name": t.name, "topic_id": TOPIC_UUID, "num_partitions": 2,
                            "replication_factor": 1, "error_code": 0}]}

    cluster = Cluster(fake, answer, not_controller_first=True)  # NOT_CONTROLLER once: looked up again
    with AdminClient(cluster.boot.bootstrap, timeout=5) as client:
        created = client.create_topic("t", assignment=[[2, 1], [1, 2]], configs={"retention.ms": "1000"})
        assert created == ("t", TOPIC_ID, 2, 1)
        client.create_topic("u", partitions=3)
    creates = [(who, v, body) for who, key, v, body in cluster.seen if key == CREATE_TOPICS]
    assert len(creates) == 3 and {who for who, _v, _b in creates} == {"ctrl"} and creates[0][1] == 7
    t = creates[1][2].topics[0]
    assert (t.name, t.num_partitions, t.replication_factor) == ("t", -1, -1)
    assert [(a.partition_index, list(a.broker_ids)) for a in t.assignments] == [(0, [2, 1]), (1, [1, 2])]
    assert [(c.name, c.value) for c in t.configs] == [("retention.ms", "1000")]
    u = creates[2][2].topics[0]
    assert (u.num_partitions, u.replication_factor, u.assignments) == (3, -1, ())  # -1: the broker's default


def test_create_without_defaults_on_an_old_broker_is_refused(fake):
    cluster = Cluster(fake, lambda k, b: pytest.fail("sent"), served={**SERVED, CREATE_TOPICS: (0, 3)})
    with AdminClient(cluster.boot.bootstrap, timeout=5) as client:
        with pytest.raises(AdminError, match="give both --partitions and --replication-factor"):
            client.create_topic("t", partitions=3)


def test_errors_come_back_by_kafka_name(fake):
    def answer(api_key, body):
        if api_key == CREATE_TOPICS:
            return {"topics": [{"name": "t", "error_code": 36, "error_message": "Topic 't' already exists."}]}
        if api_key == CREATE_PARTITIONS:
            return {"results": [{"name": "t", "error_code": 37, "error_message": "no decrease"}]}
        return {"responses": [{"name": n, "error_code": 3} for n in [t.name for t in body.topics]]}

    cluster = Cluster(fake, answer)
    with AdminClient(cluster.boot.bootstrap, timeout=5) as client:
        with pytest.raises(KafkaErrorResponse, match="TOPIC_ALREADY_EXISTS") as e:
            client.create_topic("t", 1, 1)
        assert e.value.name == "TOPIC_ALREADY_EXISTS"
        with pytest.raises(KafkaErrorResponse, match=r"INVALID_PARTITIONS \(no decrease\)"):
            client.create_partitions("t", 1)
        assert client.delete_topics(["t"])["t"].name == "UNKNOWN_TOPIC_OR_PARTITION"
    assert main(["topics", "create", "t", "--if-not-exists", "--bootstrap-server", cluster.boot.bootstrap]) == 0
    assert main(["topics", "create", "t", "--bootstrap-server", cluster.boot.bootstrap]) == 1
    assert main(["topics", "delete", "t", "--if-exists", "--bootstrap-server", cluster.boot.bootstrap]) == 0
    assert main(["topics", "delete", "t", "--bootstrap-server", cluster.boot.bootstrap]) == 1


def test_alter_sends_set_and_delete_operations(fake):
    def answer(api_key, body):
        if api_key == CREATE_PARTITIONS:
            return {"results": [{"name": "t", "error_code": 0}]}
        return {"responses": [{"resource_type": 2, "resource_name": "t", "error_code": 0}]}

    cluster = Cluster(fake, answer)
    assert main(["topics", "alter", "t", "--partitions", "6", "--config", "retention.ms=5", "--config",
                 "cleanup.policy=compact,delete", "--delete-config", "segment.bytes",
                 "--bootstrap-server", cluster.boot.bootstrap]) == 0
    [(who, _k, _v, grow)] = [s for s in cluster.seen if s[1] == CREATE_PARTITIONS]
    assert who == "ctrl" and [(t.name, t.count) for t in grow.topics] == [("t", 6)]
    [(_w, _k, _v, alter)] = [s for s in cluster.seen if s[1] == INCREMENTAL_ALTER_CONFIGS]
    [resource] = alter.resources
    assert (resource.resource_type, resource.resource_name) == (2, "t")
    assert [(c.name, c.config_operation, c.value) for c in resource.configs] == [
        ("retention.ms", 0, "5"), ("cleanup.policy", 0, "compact,delete"), ("segment.bytes", 1, None)]


def describe_cluster(fake, served=SERVED):
    """Brokers 1 and 2 live, 3 down; topic 'orders' as ORDERS above, min.insync.replicas=2."""
    def topic_entity(t):
        return {"name": t.name, "topic_id": TOPIC_UUID, "is_internal": False, "partitions": [
            {"partition_index": p.partition, "leader_id": p.leader, "replica_nodes": list(p.replicas),
             "isr_nodes": list(p.isr), "offline_replicas": list(p.offline)} for p in reversed(t.partitions)]}

    def answer(api_key, body):
        if api_key == METADATA:
            if body.topics is None or [t.name for t in body.topics] == ["orders"]:
                return metadata_answer([(1, 9001), (2, 9002)], 1, [topic_entity(ORDERS)])
            return metadata_answer([(1, 9001), (2, 9002)], 1, [
                {"name": t.name, "error_code": 3, "partitions": []} for t in body.topics])
        [resource] = body.resources
        return {"results": [{"resource_type": 2, "resource_name": resource.resource_name, "error_code": 0,
                             "configs": [{"name": c.name, "value": c.value, "config_source": c.source}
                                         for c in CONFIGS]}]}

    return Cluster(fake, answer, served=served)


def test_describe_end_to_end(fake, capsys):
    cluster = describe_cluster(fake)
    assert main(["topics", "describe", "--topic", "orders", "--bootstrap-server", cluster.boot.bootstrap]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"Topic: orders\tTopicId: {TOPIC_ID}\tPartitionCount: 4\tReplicationFactor: 3")
    assert lines[2] == "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,1\tOffline: 3"
    [(_w, _k, version, _b)] = [s for s in cluster.seen if s[1] == METADATA]
    assert version == 12  # offline replicas (v5+) and topic ids (v10+)

    assert main(["topics", "describe", "--under-min-isr-partitions", "--bootstrap-server",
                 cluster.boot.bootstrap]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[2] for line in out] == ["Partition: 2", "Partition: 3"]
    assert main(["topics", "describe", "--under-replicated-partitions", "--output", "json",
                 "--bootstrap-server", cluster.boot.bootstrap]) == 0
    [topic] = json.loads(capsys.readouterr().out)
    assert [p["partition"] for p in topic["partitions"]] == [1, 2, 3]

    assert main(["topics", "describe", "--topic", "gone", "--bootstrap-server", cluster.boot.bootstrap]) == 1
    assert capsys.readouterr().err == "kbroker topics: topic 'gone': UNKNOWN_TOPIC_OR_PARTITION\n"


def test_describe_needs_metadata_v5(fake):
    cluster = describe_cluster(fake, served={**SERVED, METADATA: (0, 4)})
    with AdminClient(cluster.boot.bootstrap, timeout=5) as client:
        with pytest.raises(AdminError, match="Metadata up to v4; describing topics needs v5"):
            client.describe_topics(["orders"])


def test_list_and_exclude_internal(fake, capsys):
    def answer(api_key, body):
        assert api_key == METADATA and body.topics is None  # null: every topic
        return metadata_answer([(1, 9001)], 1, [
            {"name": "__consumer_offsets", "is_internal": True, "partitions": []},
            {"name": "b", "partitions": []}, {"name": "a", "partitions": []},
            {"name": "__transaction_state", "is_internal": False, "partitions": []}])  # internal by name

    cluster = Cluster(fake, answer)
    assert main(["topics", "list", "--bootstrap-server", cluster.boot.bootstrap]) == 0
    assert capsys.readouterr().out.split() == ["__consumer_offsets", "__transaction_state", "a", "b"]
    assert main(["topics", "list", "--exclude-internal", "--bootstrap-server", cluster.boot.bootstrap]) == 0
    assert capsys.readouterr().out.split() == ["a", "b"]
