"""Transaction markers: Kafka's control record key/value layout and control batch attributes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.errors import CorruptRecordError
from kbroker.wire.control import (
    ABORT,
    COMMIT,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    read_end_txn_marker,
)
from kbroker.wire.records import NO_SEQUENCE, decode_records, parse_batch_header, validate_batches


def test_key_and_value_bytes_match_kafka():
    # ControlRecordType.recordKey: version 0 + type; EndTransactionMarker.serializeValue: version 0 + epoch.
    assert EndTransactionMarker(ABORT, 7).key() == b"\x00\x00\x00\x00"
    assert EndTransactionMarker(COMMIT, 7).key() == b"\x00\x00\x00\x01"
    assert EndTransactionMarker(COMMIT, 7).value() == b"\x00\x00\x00\x00\x00\x07"


def test_control_batch_layout():
    data = build_end_txn_marker_batch(EndTransactionMarker(ABORT, 3), producer_id=42, producer_epoch=5,
                                      timestamp=1234, base_offset=10, partition_leader_epoch=2)
    h = parse_batch_header(data)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (42, 5, NO_SEQUENCE, 1)
    assert (h.base_offset, h.last_offset_delta, h.partition_leader_epoch, h.max_timestamp) == (10, 0, 2, 1234)
    assert validate_batches(data, from_client=False)  # CRC and header are valid
    [rec] = decode_records(data, 0, h)
    assert (rec.key, rec.value, rec.headers) == (b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x03", [])
    # Kafka's DefaultRecord for a marker is 1 + 16 bytes, the batch 61 + 17 = 78 bytes.
    assert len(data) == 78
    assert read_end_txn_marker(data, 0, h) == EndTransactionMarker(ABORT, 3)


@given(st.sampled_from([ABORT, COMMIT]), st.integers(-(2**31), 2**31 - 1))
def test_round_trip(type_, epoch):
    m = EndTransactionMarker(type_, epoch)
    assert EndTransactionMarker.deserialize(m.key(), m.value()) == m


def test_newer_versions_read_as_v0_and_bad_ones_rejected():
    assert EndTransactionMarker.deserialize(b"\x00\x01\x00\x01xx", b"\x00\x01\x00\x00\x00\x09zz") == \
        EndTransactionMarker(COMMIT, 9)
    for key, value in [(b"\x00\x00\x00", b"\x00" * 6), (b"\xff\xff\x00\x00", b"\x00" * 6),
                       (b"\x00\x00\x00\x00", b"\x00" * 5), (b"\x00\x00\x00\x00", b"\xff\xff\x00\x00\x00\x00"),
                       (b"\x00\x00\x00\x02", b"\x00" * 6), (None, b"\x00" * 6)]:
        with pytest.raises(CorruptRecordError):
            EndTransactionMarker.deserialize(key, value)
    with pytest.raises(ValueError):
        EndTransactionMarker(2, 0)
