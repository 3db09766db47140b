"""Fetch with isolation_level=1 through the dispatch table: records up to the last stable offset and
the aborted transactions overlapping them as (producer id, first offset); read_uncommitted answers
null there, as Kafka does."""

import functools

import pytest
import trio

from kbroker.api.dispatch import handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.protocol import decode_response, encode_request
from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers, validate_batches

FETCH = 1
COMMITTED, ABORTED, OPEN, PLAIN = 1, 2, 3, 4  # producer ids


@pytest.fixture
def broker(tmp_path):
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path)}), ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "txn", num_partitions=1))
    partition = b.replica_manager.get_leader_partition(TopicPartition("txn", 0))
    sequences = {}

    def data(pid, value, txn=True):
        buf = bytearray(build_batch([Record(0, 1_000, None, value, [])], producer_id=pid, producer_epoch=0,
                                    base_sequence=sequences.get(pid, 0), is_transactional=txn))
        sequences[pid] = sequences.get(pid, 0) + 1
        partition.append_records_to_leader(buf, validate_batches(buf), 1)

    def marker(pid, control_type):
        buf = bytearray(build_end_txn_marker_batch(EndTransactionMarker(control_type, 0), producer_id=pid,
                                                   producer_epoch=0, timestamp=1_000))
        partition.append_records_to_leader(buf, validate_batches(buf, from_client=False), 1, from_client=False)

    data(PLAIN, b"plain-0", txn=False)  # 0
    data(COMMITTED, b"committed")  # 1
    data(ABORTED, b"aborted-0")  # 2
    data(ABORTED, b"aborted-1")  # 3
    marker(COMMITTED, COMMIT)  # 4
    marker(ABORTED, ABORT)  # 5
    data(PLAIN, b"plain-1", txn=False)  # 6
    data(OPEN, b"open")  # 7: never ends, so the LSO stays at 7
    data(PLAIN, b"plain-2", txn=False)  # 8
    yield b
    b.shutdown()


def fetch(broker, version: int, isolation_level: int, fetch_offset: int = 0):
    topic = {"topic": "txn", "topic_id": broker.metadata.topic("txn").topic_id,
             "partitions": [{"partition": 0, "fetch_offset": fetch_offset, "partition_max_bytes": 1 << 20}]}
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation_level,
            "session_id": 0, "session_epoch": -1, "topics": [topic]}
    frame = encode_request(FETCH, version, 3, "test", body)
    chunks = trio.run(handle_frame, broker, bytearray(frame[4:]))
    response = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
    _, decoded = decode_response(FETCH, version, response[4:])
    return decoded.responses[0].partitions[0]


def values_of(records: bytes) -> list[bytes]:
    return [r.value for pos, h in iter_batch_headers(records) if not h.is_control
            for r in decode_records(records, pos, h)]


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_read_committed_lists_the_aborted_transactions_of_the_range(broker, version):
    p = fetch(broker, version, isolation_level=1)
    assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, 9, 7)
    assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions] == [(ABORTED, 2)]
    # the consumer drops the aborted values itself; the broker returns every batch below the LSO
    assert values_of(p.records) == [b"plain-0", b"committed", b"aborted-0", b"aborted-1", b"plain-1"]


@pytest.mark.parametrize("version", [4, 17])
def test_read_uncommitted_answers_null(broker, version):
    p = fetch(broker, version, isolation_level=0)
    assert p.aborted_transactions is None
    assert values_of(p.records)[-2:] == [b"open", b"plain-2"]


def test_a_range_after_the_abort_has_none(broker):
    p = fetch(broker, 12, isolation_level=1, fetch_offset=6)
    assert values_of(p.records) == [b"plain-1"] and list(p.aborted_transactions) == []
    at_lso = fetch(broker, 12, isolation_level=1, fetch_offset=7)
    assert (at_lso.records or b"", list(at_lso.aborted_transactions)) == (b"", [])
