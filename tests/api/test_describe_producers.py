"""DescribeProducers v0 through the dispatch table on a real single-node broker: each partition's
producers with their epoch, last sequence, last timestamp, coordinator epoch and the start of an
ongoing transaction; Kafka's per-partition errors; served in every mode."""

import functools

import pytest
import trio

from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.control import COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.protocol import decode_response, encode_request
from kbroker.wire.records import Record, build_batch, validate_batches

DESCRIBE_PRODUCERS = 61
IDEMPOTENT, COMMITTED, ONGOING = 7, 8, 9  # producer ids


@pytest.fixture
def broker(tmp_path):
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path)}), ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "producers", num_partitions=2))
    partition = b.replica_manager.get_leader_partition(TopicPartition("producers", 0))

    def data(pid, epoch, seq, n, ts, txn=False):
        buf = bytearray(build_batch([Record(i, ts, None, b"v", []) for i in range(n)], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=seq, is_transactional=txn))
        partition.append_records_to_leader(buf, validate_batches(buf), 1)

    data(IDEMPOTENT, 2, 0, 3, 1_000)
    data(IDEMPOTENT, 2, 3, 2, 2_000)  # 3-4
    data(COMMITTED, 0, 0, 1, 3_000, txn=True)  # 5
    marker = bytearray(build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 4), producer_id=COMMITTED,
                                                  producer_epoch=0, timestamp=4_000))
    partition.append_records_to_leader(marker, validate_batches(marker, from_client=False), 1, from_client=False)
    data(ONGOING, 1, 0, 2, 5_000, txn=True)  # 7-8
    yield b
    b.shutdown()


def ask(broker, topics) -> object:
    frame = encode_request(DESCRIBE_PRODUCERS, 0, 5, "test", {"topics": topics})
    response = trio.run(handle_frame, broker, bytearray(frame[4:]))
    correlation_id, body = decode_response(DESCRIBE_PRODUCERS, 0, response[4:])
    assert correlation_id == 5
    return body


def partitions_of(body) -> dict:
    return {(t.name, p.partition_index): p for t in body.topics for p in t.partitions}


def test_served_at_v0_in_every_mode():
    spec = DISPATCH[DESCRIBE_PRODUCERS]
    assert (spec.name, spec.min_version, spec.max_version, spec.cluster_only) == ("DescribeProducers", 0, 0, False)


def test_each_producer_of_the_partition(broker):
    got = partitions_of(ask(broker, [{"name": "producers", "partition_indexes": [0, 1]}]))
    assert got[("producers", 0)].error_code == ErrorCode.none
    producers = [(p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp, p.coordinator_epoch,
                  p.current_txn_start_offset) for p in got[("producers", 0)].active_producers]
    assert producers == [
        (IDEMPOTENT, 2, 4, 2_000, -1, -1),
        (COMMITTED, 0, 0, 4_000, 4, -1),  # the marker: its timestamp and coordinator epoch, no transaction now
        (ONGOING, 1, 1, 5_000, -1, 7),
    ]
    assert (got[("producers", 1)].error_code, got[("producers", 1)].active_producers) == (ErrorCode.none, ())


def test_kafka_errors_per_partition(broker):
    tp = TopicPartition("producers", 1)
    partition = broker.replica_manager.partitions.pop(tp)  # the topic is known, this broker holds no replica
    try:
        got = partitions_of(ask(broker, [
            {"name": "producers", "partition_indexes": [1, 5]},
            {"name": "missing", "partition_indexes": [0]},
            {"name": "bad/name", "partition_indexes": [0]},
        ]))
    finally:
        broker.replica_manager.partitions[tp] = partition
    assert {key: p.error_code for key, p in got.items()} == {
        ("producers", 1): ErrorCode.not_leader_or_follower,
        ("producers", 5): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
        ("bad/name", 0): ErrorCode.invalid_topic_exception,
    }
    assert all(p.active_producers == () and p.error_message for p in got.values())


def test_a_follower_answers_from_its_own_state(broker):
    partition = broker.replica_manager.get_leader_partition(TopicPartition("producers", 0))
    partition.make_follower(1, partition.leader_epoch + 1, [1, 0], [1, 0], 1)  # as Kafka: any replica answers
    got = partitions_of(ask(broker, [{"name": "producers", "partition_indexes": [0]}]))[("producers", 0)]
    assert got.error_code == ErrorCode.none
    assert [p.producer_id for p in got.active_producers] == [IDEMPOTENT, COMMITTED, ONGOING]
