"""read_committed consumers over TCP against a real broker process: they must skip the records of
an aborted transaction, which they can only do from the aborted transactions the Fetch response
lists.

Clients cannot write transaction markers yet (Produce refuses control batches; the transaction
coordinator is being built), so the transactions are appended straight into the partition's log in
the data dir while the broker is down, as the coordinator's markers would be.
"""

from __future__ import annotations

import time

import pytest

from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.wire.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import Record, build_batch, validate_batches

pytestmark = pytest.mark.timeout(180)

COMMITTING, ABORTING = 4000, 4001  # producer ids
COMMITTED = [b"plain-0", b"committed-0", b"committed-1", b"plain-1"]
EVERY_VALUE = [b"plain-0", b"committed-0", b"aborted-0", b"aborted-1", b"committed-1", b"plain-1"]


def write_transactions(log: Log) -> None:
    """Interleaved: the aborted transaction's records sit between the committed one's."""
    sequences: dict[int, int] = {}

    def data(value: bytes, pid: int = -1) -> None:
        seq = sequences.get(pid, 0) if pid >= 0 else -1
        buf = bytearray(build_batch([Record(0, int(time.time() * 1000), None, value, [])], producer_id=pid,
                                    producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                                    is_transactional=pid >= 0))
        sequences[pid] = seq + 1
        log.append_as_leader(buf, validate_batches(buf), leader_epoch=0)

    def marker(pid: int, control_type: int) -> None:
        buf = bytearray(build_end_txn_marker_batch(EndTransactionMarker(control_type, 0), producer_id=pid,
                                                   producer_epoch=0, timestamp=int(time.time() * 1000)))
        log.append_as_leader(buf, validate_batches(buf, from_client=False), leader_epoch=0, from_client=False)

    data(b"plain-0")  # 0
    data(b"committed-0", COMMITTING)  # 1
    data(b"aborted-0", ABORTING)  # 2
    data(b"aborted-1", ABORTING)  # 3
    data(b"committed-1", COMMITTING)  # 4
    marker(COMMITTING, COMMIT)  # 5
    marker(ABORTING, ABORT)  # 6
    data(b"plain-1")  # 7


@pytest.fixture
def txn_topic(fresh_kbroker, kt):
    kafka = kt.require_module("kafka")
    broker = fresh_kbroker
    topic = kt.topic_name("read-committed")
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()
    broker.stop()
    log = Log.open(broker.data_dir / f"{topic}-0", LogConfig())
    try:
        write_transactions(log)
        log.flush()
    finally:
        log.close()
    broker.start()
    return broker, topic


def kafka_python_values(kafka, bootstrap: str, topic: str, isolation_level: str, expected: int) -> list[bytes]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                   isolation_level=isolation_level, request_timeout_ms=15000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        values.extend(r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs)  # nothing more
        return values
    finally:
        consumer.close()


def test_kafka_python_read_committed_skips_the_aborted_transaction(txn_topic, kt):
    kafka = kt.require_module("kafka")
    broker, topic = txn_topic
    assert kafka_python_values(kafka, broker.bootstrap, topic, "read_committed", len(COMMITTED)) == COMMITTED
    assert kafka_python_values(kafka, broker.bootstrap, topic, "read_uncommitted", len(EVERY_VALUE)) == EVERY_VALUE


def test_confluent_read_committed_skips_the_aborted_transaction(txn_topic, kt):
    ck = kt.require_module("confluent_kafka")
    broker, topic = txn_topic
    for isolation_level, expected in (("read_committed", COMMITTED), ("read_uncommitted", EVERY_VALUE)):
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"rc-{isolation_level}",
                                "enable.auto.commit": False, "enable.partition.eof": True,
                                "isolation.level": isolation_level})
        try:
            consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                    break
                values.append(msg.value())
        finally:
            consumer.close()
        assert values == expected, isolation_level
