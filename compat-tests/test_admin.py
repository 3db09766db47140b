"""Admin APIs through stock admin clients: CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DeleteRecords, DescribeCluster, and CreateTopics' error paths."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ck(kt):
    return kt.require_module("confluent_kafka")


@pytest.fixture
def admin(ck, kbroker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kbroker.bootstrap})


def _create(admin, topic, partitions=1, config=None):
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def _produce(ck, kbroker, topic, n, partition=0, **conf):
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, **conf})
    errors = []
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, partition=partition,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    return errors


def test_create_partitions_grows_topic_and_refuses_shrinking(ck, admin, kbroker, kt):
    from confluent_kafka.admin import NewPartitions

    topic = kt.topic_name("admin", "parts")
    _create(admin, topic, 2)
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    md = admin.list_topics(topic, timeout=10)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2, 3, 4]
    with pytest.raises(ck.KafkaException) as err:
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    assert err.value.args[0].code() == ck.KafkaError.INVALID_PARTITIONS
    _produce(ck, kbroker, topic, 3, partition=4)


def test_describe_configs_lists_every_config_with_source(ck, admin, kt):
    from confluent_kafka.admin import ConfigResource, ConfigSource

    topic = kt.topic_name("admin", "describe")
    _create(admin, topic, config={"retention.ms": "3600000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert {"max.message.bytes", "min.insync.replicas", "message.timestamp.type", "retention.bytes"} <= set(configs)


def test_describe_broker_configs(ck, admin, kbroker):
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["log.retention.hours"].value == "336"
    assert configs["num.partitions"].value is not None


def test_alter_and_incremental_alter_configs(ck, admin, kt):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic = kt.topic_name("admin", "alter")
    _create(admin, topic)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "1000", "segment.bytes": "100000"})
    admin.alter_configs([resource])[resource].result(30)
    describe = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([describe])[describe].result(30)
    assert (configs["retention.ms"].value, configs["segment.bytes"].value) == ("1000", "100000")

    incremental = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
    ])
    admin.incremental_alter_configs([incremental])[incremental].result(30)
    configs = admin.describe_configs([describe])[describe].result(30)
    assert configs["retention.ms"].value == str(336 * 3600 * 1000)
    assert configs["max.message.bytes"].value == "2000"
    assert configs["segment.bytes"].value == "100000"  # incremental keeps the others

    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "soon"})
    with pytest.raises(ck.KafkaException) as err:
        admin.alter_configs([bad])[bad].result(30)
    assert err.value.args[0].code() == ck.KafkaError.INVALID_CONFIG


def test_max_message_bytes_is_enforced(ck, admin, kbroker, kt):
    topic = kt.topic_name("admin", "maxmsg")
    _create(admin, topic, config={"max.message.bytes": "1000"})
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "message.max.bytes": 100000})
    results = []
    producer.produce(topic, value=b"x" * 5000, on_delivery=lambda err, msg: results.append(err))
    producer.flush(30)  # alone in its batch: a batch is accepted or refused whole
    producer.produce(topic, value=b"small", on_delivery=lambda err, msg: results.append(err))
    producer.flush(30)
    codes = sorted((e.code() if e else 0) for e in results)
    assert codes == [0, ck.KafkaError.MSG_SIZE_TOO_LARGE]


def test_delete_records_moves_log_start(ck, admin, kbroker, kt):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    topic = kt.topic_name("admin", "delrec")
    _create(admin, topic)
    assert _produce(ck, kbroker, topic, 10) == []
    result = admin.delete_records([TopicPartition(topic, 0, 4)])
    low = result[TopicPartition(topic, 0, 4)].result(30)
    assert low.low_watermark == 4
    earliest = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(30).offset == 4
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                            "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic, 0, 4)])
    msg = consumer.poll(10)
    assert msg is not None and msg.error() is None and (msg.offset(), msg.value()) == (4, b"v4")
    consumer.close()


def test_describe_cluster(ck, admin, kbroker):
    cluster = admin.describe_cluster().result(30)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, kbroker.host, kbroker.port)]
    assert cluster.controller.id == 0 and cluster.cluster_id


def test_create_topic_error_paths(ck, admin, kt):
    from confluent_kafka.admin import NewTopic

    topic = kt.topic_name("admin", "errs")
    _create(admin, topic)
    cases = {
        topic: (NewTopic(topic, 1, 1), ck.KafkaError.TOPIC_ALREADY_EXISTS),
        "bad/name": (NewTopic("bad/name", 1, 1), ck.KafkaError.TOPIC_EXCEPTION),
        topic + "-rf": (NewTopic(topic + "-rf", 1, 3), ck.KafkaError.INVALID_REPLICATION_FACTOR),
        topic + "-asg": (NewTopic(topic + "-asg", 1, replica_assignment=[[7]]), ck.KafkaError.INVALID_REPLICA_ASSIGNMENT),
        topic + "-cfg": (NewTopic(topic + "-cfg", 1, 1, config={"cleanup.policy": "shred"}), ck.KafkaError.INVALID_CONFIG),
    }
    futures = admin.create_topics([t for t, _ in cases.values()])
    for name, (_, code) in cases.items():
        with pytest.raises(ck.KafkaException) as err:
            futures[name].result(30)
        assert err.value.args[0].code() == code, name
    # validate_only checks without creating
    only = topic + "-v"
    admin.create_topics([NewTopic(only, 2, 1)], validate_only=True)[only].result(30)
    assert only not in admin.list_topics(timeout=10).topics


def test_kafka_python_admin_describe_and_partitions(kt, kbroker):
    kafka = kt.require_module("kafka")
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

    topic = kt.topic_name("admin", "kp")
    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.bytes": "12345"})])
        admin.create_partitions({topic: NewPartitions(3)})
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        entries = described["topic"][topic]
        assert entries["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert entries["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert entries["retention.bytes"]["value"] == "12345"
        assert admin.describe_topics([topic])[0]["partitions"].__len__() == 3
    finally:
        admin.close()
    assert kafka is not None
