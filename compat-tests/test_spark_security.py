"""Spark's built-in Kafka connector (kafka-clients 3.9.0 inside) over SASL_SSL with SCRAM-SHA-512,
the `kafka.`-prefixed client options a production job carries: a batch read planned through the
Admin client and fetched by executors, and a batch write through Spark's idempotent producer, both
checked exactly against what confluent-kafka wrote and reads back over the same listener."""

from __future__ import annotations

import pytest

import securitykit as sk
import sparkkit

pytestmark = pytest.mark.timeout(300)

PASSWORD = "spark-user-secret-4d1f"


@pytest.fixture(scope="module")
def secured(kt, tmp_path_factory):
    from kbroker.admin.client import AdminClient
    from kbroker.admin.users import Upsertion, alter_user_scram_credentials

    d = sk.trustme_certs(tmp_path_factory.mktemp("spark-security"))
    broker, sasl_port = sk.with_listener(kt, d / "broker", "SASL_SSL", {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(d / "broker.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "num.partitions": "3"})
    try:
        broker.start()
        with AdminClient(broker.bootstrap, timeout=30) as admin:
            alter_user_scram_credentials(admin, [Upsertion("spark", "SCRAM-SHA-512", PASSWORD)])
        yield f"127.0.0.1:{sasl_port}", d / "ca.pem"
    finally:
        broker.stop()


def spark_options(ca) -> dict[str, str]:
    return {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      f'username="spark" password="{PASSWORD}";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(ca)}


def confluent(ca) -> dict:
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "spark",
            "sasl.password": PASSWORD, "ssl.ca.location": str(ca)}


def test_spark_reads_and_writes_over_sasl_ssl(kt, spark, secured):
    from confluent_kafka import Consumer, Producer

    bootstrap, ca = secured
    topic, out_topic = kt.topic_name("spark-sasl"), kt.topic_name("spark-sasl-out")
    msgs = kt.make_messages("sparksec", partitions=3, per_partition=6)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **confluent(ca)})
    for m in msgs:
        producer.produce(topic, key=m.key, value=m.value, partition=m.partition, headers=list(m.headers),
                         timestamp=m.timestamp)
    assert producer.flush(30) == 0
    del producer
    rows = sparkkit.read_topic(kt, spark, bootstrap, topic, **spark_options(ca))
    kt.assert_records_match(msgs, rows)

    df = spark.createDataFrame([(f"k{i}", f"value-{i}", i % 3) for i in range(30)], ["key", "value", "partition"]) \
        .selectExpr("key", "value", "CAST(partition AS INT) AS partition")
    writer = df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
    for name, value in spark_options(ca).items():
        writer = writer.option(name, value)
    writer.save()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-sasl-check",
                         "auto.offset.reset": "earliest", **confluent(ca)})
    consumer.subscribe([out_topic])
    got = {}
    kt.wait_until(lambda: _drain(consumer, got) >= 30, 60, "Spark's 30 rows over SASL_SSL")
    consumer.close()
    assert {k: (v, p) for k, (v, p) in got.items()} == {f"k{i}": (f"value-{i}", i % 3) for i in range(30)}


def _drain(consumer, got: dict) -> int:
    msg = consumer.poll(0.5)
    if msg is not None and not msg.error():
        got[msg.key().decode()] = (msg.value().decode(), msg.partition())
    return len(got)
