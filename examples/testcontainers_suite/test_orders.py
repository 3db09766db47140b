"""An order service's tests as they are written against testcontainers: topics, keyed ordering,
a consumer group that commits, and a transaction. Nothing here knows which broker runs."""

import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer


def _topic(name):
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_bootstrap_server_is_host_and_port(kafka):
    host, port = kafka.get_bootstrap_server().rsplit(":", 1)
    assert host == kafka.get_container_host_ip()
    assert int(port) == kafka.get_exposed_port(9093)


def test_orders_of_one_customer_stay_in_order(bootstrap):
    topic = _topic("orders")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(10)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(30):
        producer.send(topic, key=f"customer-{i % 3}".encode(), value=f"order-{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=_topic("billing"),
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    seen = {}
    for message in consumer:
        seen.setdefault(message.key, []).append(int(message.value.decode().split("-")[1]))
        if sum(map(len, seen.values())) == 30:
            break
    consumer.close()
    assert {k: v for k, v in seen.items()} == {f"customer-{c}".encode(): list(range(c, 30, 3)) for c in range(3)}


def test_auto_created_topic_uses_the_broker_settings(bootstrap):
    topic = _topic("events")
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"first")
    assert producer.flush(10) == 0
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 3  # KAFKA_NUM_PARTITIONS from the fixture


def test_committed_offsets_resume_the_group(bootstrap):
    topic, group = _topic("payments"), _topic("ledger")
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, str(i).encode(), partition=0)
    producer.flush(10)

    def consume(count):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([topic])
        values = []
        while len(values) < count:
            message = consumer.poll(10)
            assert message is not None, f"only {values} arrived"
            if message.error():
                continue
            values.append(int(message.value()))
        consumer.commit(asynchronous=False)
        consumer.close()
        return values

    assert consume(4) == [0, 1, 2, 3]
    assert consume(6) == [4, 5, 6, 7, 8, 9]


def test_a_transaction_is_all_or_nothing(bootstrap):
    topic = _topic("transfers")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": _topic("transfer-service")})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"debit", partition=0)
    producer.abort_transaction(10)
    producer.begin_transaction()
    producer.produce(topic, b"credit", partition=0)
    producer.commit_transaction(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _topic("audit"), "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    while not values:
        message = consumer.poll(10)
        if message is None:
            break
        if message.error():
            raise KafkaException(message.error())
        values.append(message.value())
    consumer.close()
    assert values == [b"credit"]
