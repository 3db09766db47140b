"""Tests for kbroker.txn.log_format: `__transaction_state` keys and values against bytes built by
hand from Kafka's TransactionLogKey/TransactionLogValue schemas, round trips, garbage, batches."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.txn.log_format import (
    TransactionLogValue,
    UnknownRecordTypeError,
    build_txn_log_batch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    group_partitions,
    iter_txn_log_records,
)
from kbroker.txn.state import TransactionState as S
from kbroker.wire.primitives import DecodeError


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str) -> bytes:
    return i16(len(v.encode())) + v.encode()


def cs(v: str) -> bytes:
    """Compact string: uvarint length+1 (short strings only here)."""
    return bytes([len(v.encode()) + 1]) + v.encode()


def test_status_bytes_are_kafkas() -> None:
    assert [(st.value, st.state_name) for st in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence"),
    ]


def test_key_v0_bytes() -> None:
    assert encode_key("my-txn") == i16(0) + s("my-txn")
    assert decode_key(i16(0) + s("my-txn")) == "my-txn"


def test_unknown_key_version_is_its_own_error() -> None:
    with pytest.raises(UnknownRecordTypeError):
        decode_key(i16(1) + s("x"))
    with pytest.raises(DecodeError):
        decode_key(i16(0) + s("x") + b"\x00")


ONGOING = TransactionLogValue(
    producer_id=4000, producer_epoch=3, transaction_timeout_ms=60000, state=S.ONGOING,
    partitions=(("a", (0, 2)), ("b", (1,))), last_update_timestamp_ms=1_700_000_000_123,
    start_timestamp_ms=1_700_000_000_000,
)


def test_value_v0_bytes() -> None:
    expected = (
        i16(0) + i64(4000) + i16(3) + i32(60000) + i8(1)
        + i32(2) + s("a") + i32(2) + i32(0) + i32(2) + s("b") + i32(1) + i32(1)
        + i64(1_700_000_000_123) + i64(1_700_000_000_000)
    )
    assert encode_value(ONGOING) == expected
    assert decode_value(expected) == ONGOING


def test_value_v1_flexible_bytes() -> None:
    expected = (
        i16(1) + i64(4000) + i16(3) + i32(60000) + i8(1)
        + bytes([3]) + cs("a") + bytes([3]) + i32(0) + i32(2) + b"\x00"
        + cs("b") + bytes([2]) + i32(1) + b"\x00"
        + i64(1_700_000_000_123) + i64(1_700_000_000_000) + b"\x00"
    )
    assert encode_value(ONGOING, version=1) == expected
    assert decode_value(expected) == ONGOING


def test_empty_writes_null_partitions() -> None:
    empty = TransactionLogValue(7, 0, 900000, S.EMPTY, None, 10, -1)
    assert encode_value(empty) == i16(0) + i64(7) + i16(0) + i32(900000) + i8(0) + i32(-1) + i64(10) + i64(-1)
    assert encode_value(empty, version=1)[17] == 0  # compact null array
    assert decode_value(encode_value(empty)) == empty
    with pytest.raises(ValueError):
        encode_value(TransactionLogValue(7, 0, 1, S.EMPTY, (("a", (0,)),), 10, -1))


def test_complete_writes_an_empty_array() -> None:
    done = TransactionLogValue(7, 0, 1000, S.COMPLETE_COMMIT, (), 10, 5)
    assert encode_value(done)[17:21] == i32(0)
    assert decode_value(encode_value(done)).partition_set() == frozenset()


def test_tombstone() -> None:
    assert decode_value(None) is None


def test_tagged_fields_are_skipped() -> None:
    data = bytearray(encode_value(ONGOING, version=1))
    data[-1:] = b"\x01\x05\x02zz"  # one unknown tag (5) of two bytes
    assert decode_value(bytes(data)) == ONGOING


@pytest.mark.parametrize("data", [
    i16(2) + b"\x00" * 40,  # unknown version
    encode_value(ONGOING)[:-1],  # truncated
    encode_value(ONGOING) + b"\x00",  # trailing byte
    encode_value(ONGOING)[:16] + i8(8) + encode_value(ONGOING)[17:],  # unknown status
    encode_value(ONGOING)[:17] + i32(1_000_000) + encode_value(ONGOING)[21:],  # huge array
])
def test_garbage_is_refused(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_value(data)


def test_group_partitions() -> None:
    assert group_partitions({("b", 1), ("a", 2), ("a", 0)}) == (("a", (0, 2)), ("b", (1,)))
    assert ONGOING.partition_set() == {("a", 0), ("a", 2), ("b", 1)}


values = st.builds(
    TransactionLogValue,
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    transaction_timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from([x for x in S if x is not S.EMPTY]),
    partitions=st.sets(st.tuples(st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1)), max_size=20)
    .map(group_partitions),
    last_update_timestamp_ms=st.integers(-1, 2**62),
    start_timestamp_ms=st.integers(-1, 2**62),
)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([0, 1]))
def test_round_trip(value: TransactionLogValue, version: int) -> None:
    data = encode_value(value, version)
    assert decode_value(data) == value
    assert encode_value(decode_value(data), version) == data


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_never_crash(data: bytes) -> None:
    try:
        decode_value(data)
    except DecodeError:
        pass


def test_batch_round_trip() -> None:
    entries = [(encode_key("t1"), encode_value(ONGOING)), (encode_key("t2"), None)]
    batch = build_txn_log_batch(entries, 1234)
    assert [(k, v) for _o, k, v in iter_txn_log_records(batch)] == entries
