"""Prometheus metrics on a real single-node broker (`metrics.listener`), scraped over HTTP after a
stock-client workload whose every count is known: records and bytes in per topic (equal to what
the logs hold), bytes out, log end offsets, request counts and latency histograms per API, a
group's lag from its committed offsets, a parked Fetch in the purgatory, connections, process
metrics — under the names Kafka's JMX exporter and kafka-exporter give them."""

from __future__ import annotations

import threading
import time

import pytest

import metricskit as mk
from kbroker.admin.client import AdminClient

pytestmark = pytest.mark.timeout(120)

KBROKER_OVERRIDES = {"metrics.listener": mk.LISTENER_ANY_PORT, "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def url(kbroker, kt):
    if kbroker.proc is None:
        pytest.skip("an external broker: its metrics endpoint is its own business")
    return kt.wait_until(lambda: mk.metrics_url(kbroker.stderr_path), 10, "the broker to log its metrics endpoint")


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with AdminClient(bootstrap, timeout=15) as admin:
        admin.create_topic(topic, partitions=partitions, replication_factor=1, configs={})


def test_a_known_workload_is_counted_and_the_groups_lag_is_exported(kbroker, kt, url):
    ck = kt.require_module("confluent_kafka")
    topic, group = kt.topic_name("metrics", "workload"), kt.topic_name("metrics", "group")
    _create(kbroker.bootstrap, topic, 2)
    per_partition = {0: 30, 1: 20}
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "acks": "all", "linger.ms": 5})
    delivered: list = []
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=b"%03d" % i * 30, partition=partition,
                             on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0 and delivered == [None] * 50

    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in per_partition])
        received = 0
        deadline = time.monotonic() + 30
        while received < 50 and time.monotonic() < deadline:
            message = consumer.poll(1)
            received += message is not None and message.error() is None
        assert received == 50
        # committed: 10 of partition 0's 30 records, all of partition 1's 20
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 10), ck.TopicPartition(topic, 1, 20)], asynchronous=False)
        got = mk.scrape(url)  # the consumer's connections are still open
    finally:
        consumer.close()

    bytes_in = mk.value(got, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert mk.value(got, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 50
    assert bytes_in == mk.total(got, "kafka_log_log_size", topic=topic) > 50 * 90  # what the logs hold, exactly
    assert mk.value(got, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in  # all read
    for partition, count in per_partition.items():
        assert mk.value(got, "kafka_log_log_logendoffset", topic=topic, partition=str(partition)) == count
    lag = {p: mk.value(got, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition=str(p))
           for p in per_partition}
    assert lag == {0: 20, 1: 0}
    assert mk.value(got, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic, partition="0") == 10

    produces = mk.total(got, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produces >= 2  # at least one per partition's batch... or one for both: librdkafka's choice
    assert mk.value(got, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produces
    assert mk.value(got, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == produces
    assert mk.total(got, "kafka_network_requestmetrics_requests_total", request="Fetch") >= 1
    assert mk.total(got, "kafka_network_requestmetrics_requests_total", request="OffsetCommit") >= 1
    assert mk.value(got, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    assert mk.value(got, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert mk.value(got, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert mk.value(got, "process_open_fds") > 0 and mk.value(got, "process_resident_memory_bytes") > 10e6

    # counters only grow: one more record is one more message in
    producer.produce(topic, value=b"one more", partition=1)
    assert producer.flush(30) == 0
    after = mk.scrape(url)
    assert mk.value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 51
    assert mk.value(after, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="1") == 1


def test_a_long_poll_is_seen_in_the_fetch_purgatory(kbroker, kt, url):
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("metrics", "purgatory")
    _create(kbroker.bootstrap, topic, 1)
    consumer = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": kt.topic_name("metrics", "idle"),
                            "fetch.wait.max.ms": 5000, "enable.auto.commit": False})
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            consumer.poll(0.2)

    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        kt.wait_until(lambda: mk.value(mk.scrape(url), "kafka_server_delayedoperationpurgatory_purgatorysize",
                                       delayedoperation="Fetch") >= 1, 15, "a parked fetch in the purgatory")
    finally:
        stop.set()
        poller.join(10)
        consumer.close()


def test_a_delayed_record_counts_once_when_produced_not_again_when_delivered(kbroker, kt, url):
    ck = kt.require_module("confluent_kafka")
    topic = kt.topic_name("metrics", "delayed")
    _create(kbroker.bootstrap, topic, 1)
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "acks": "all"})
    producer.produce(topic, value=b"later", partition=0, headers=[("delay.ms", b"300")])
    assert producer.flush(30) == 0
    assert mk.value(mk.scrape(url), "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 1
    kt.wait_until(lambda: mk.value(mk.scrape(url), "kafka_log_log_logendoffset", topic=topic, partition="0") == 1,
                  15, "the delayed record's delivery")
    assert mk.value(mk.scrape(url), "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 1
