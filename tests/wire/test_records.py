"""Tests for kbroker.wire.records: v2 batch header, validation, in-place patches, codecs, decode/build."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.errors import CorruptRecordError, InvalidRecordError
from kbroker.wire.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    TIMESTAMP_LOG_APPEND_TIME,
    Record,
    build_batch,
    compress,
    decode_records,
    decompress,
    increment_sequence,
    iter_batch_headers,
    parse_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)

settings.register_profile("kbroker-records", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("kbroker-records-ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile("kbroker-records-ci" if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else "kbroker-records")

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


def recs(n: int = 3, base: int = 0, ts: int = 1_000) -> list[Record]:
    return [Record(base + i, ts + i, b"key%d" % i, b"value%d" % i, [("h", b"x")]) for i in range(n)]


def fix_crc(buf: bytearray) -> None:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))


# --- build / parse / decode round trips ---------------------------------------------------------

record_st = st.builds(
    lambda ts, key, value, headers: (ts, key, value, headers),
    st.integers(min_value=-1, max_value=2**40),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3),
)


@PROFILE
@given(
    rows=st.lists(record_st, min_size=1, max_size=20),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(min_value=0, max_value=2**62),
    gaps=st.lists(st.integers(min_value=0, max_value=5), min_size=20, max_size=20),
    pid=st.integers(min_value=-1, max_value=2**40),
    txn=st.booleans(),
)
def test_build_parse_decode_round_trip(rows, codec, base_offset, gaps, pid, txn):
    offset = base_offset
    records = []
    for i, (ts, key, value, headers) in enumerate(rows):
        records.append(Record(offset, ts, key, value, headers))
        offset += 1 + gaps[i]
    data = build_batch(records, base_offset=base_offset, compression=codec, producer_id=pid,
                       producer_epoch=3 if pid >= 0 else -1, base_sequence=7 if pid >= 0 else -1,
                       is_transactional=txn)
    [(pos, h)] = validate_batches(data, from_client=False)
    assert pos == 0
    assert h.base_offset == base_offset
    assert h.size_in_bytes == len(data)
    assert h.compression == codec
    assert h.records_count == len(records)
    assert h.last_offset == records[-1].offset
    assert h.max_timestamp == max(r.timestamp for r in records)
    assert h.is_transactional == txn
    assert h.producer_id == pid
    assert decode_records(data, 0, h) == records


@pytest.mark.parametrize("codec", CODECS)
def test_header_fields_and_properties(codec):
    data = build_batch(recs(4, base=10), base_offset=10, compression=codec, producer_id=42, producer_epoch=5,
                       base_sequence=2**31 - 2, is_transactional=True, partition_leader_epoch=9,
                       timestamp_type=TIMESTAMP_LOG_APPEND_TIME)
    h = parse_batch_header(data)
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (10, 9, 2)
    assert h.batch_length == len(data) - 12
    assert h.compression == codec
    assert h.timestamp_type == 1
    assert h.is_transactional and not h.is_control
    assert h.last_offset_delta == 3 and h.last_offset == 13 and h.next_offset == 14
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 5, 2**31 - 2)
    assert h.last_sequence == 1  # 2**31-2, 2**31-1, 0, 1
    assert h.records_count == 4


def test_control_batch_flag_and_sequence_helpers():
    data = build_batch([Record(0, 5, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], is_control=True,
                       producer_id=1, producer_epoch=0)
    h = parse_batch_header(data)
    assert h.is_control and h.last_sequence == -1
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(5, 3) == 8


def test_build_requires_records_and_offsets_in_range():
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([Record(5, 0, None, None)], base_offset=10)


def test_decode_log_append_time_uses_max_timestamp():
    buf = bytearray(build_batch(recs(3)))
    set_log_append_time(buf, 0, 99_999)
    h = parse_batch_header(buf)
    assert h.timestamp_type == 1 and h.max_timestamp == 99_999
    assert [r.timestamp for r in decode_records(buf, 0, h)] == [99_999] * 3
    validate_batches(buf)  # CRC was recomputed


# --- validation -------------------------------------------------------------------------------------


def test_validate_multiple_batches_positions():
    a = build_batch(recs(2))
    b = build_batch(recs(5), compression=COMPRESSION_ZSTD)
    out = validate_batches(a + b)
    assert [p for p, _ in out] == [0, len(a)]
    assert [h.records_count for _, h in out] == [2, 5]


def test_validate_accepts_memoryview_and_bytearray():
    a = build_batch(recs(2))
    assert validate_batches(memoryview(a))[0][1].records_count == 2
    assert validate_batches(bytearray(a))[0][1].records_count == 2


@PROFILE
@given(data=st.data())
def test_any_flip_in_crc_covered_bytes_is_detected(data):
    codec = data.draw(st.sampled_from(CODECS))
    buf = bytearray(build_batch(recs(data.draw(st.integers(1, 10))), compression=codec))
    i = data.draw(st.integers(min_value=17, max_value=len(buf) - 1))  # crc field and everything it covers
    buf[i] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)


@PROFILE
@given(cut=st.integers(min_value=1, max_value=200))
def test_truncated_or_trailing_input_is_corrupt(cut):
    a = build_batch(recs(3))
    with pytest.raises(CorruptRecordError):
        validate_batches(a[: max(len(a) - cut, 1)])
    with pytest.raises(CorruptRecordError):
        validate_batches(a + a[: min(cut, len(a) - 1)])


def test_old_magic_is_invalid_record_other_magic_corrupt():
    buf = bytearray(build_batch(recs(1)))
    buf[16] = 1
    with pytest.raises(InvalidRecordError):
        validate_batches(buf)
    buf[16] = 0
    with pytest.raises(InvalidRecordError):
        validate_batches(buf)
    buf[16] = 3
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)
    with pytest.raises(CorruptRecordError):
        parse_batch_header(buf)


def test_small_batch_length_and_empty_input():
    buf = bytearray(build_batch(recs(1)))
    struct.pack_into(">i", buf, 8, 48)
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)
    with pytest.raises(CorruptRecordError):
        parse_batch_header(buf)
    with pytest.raises(CorruptRecordError):
        parse_batch_header(buf[:60])
    with pytest.raises(InvalidRecordError):
        validate_batches(b"")


def test_client_rules():
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        validate_batches(build_batch(recs(1, base=5), base_offset=5))
    validate_batches(build_batch(recs(1, base=5), base_offset=5), from_client=False)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(build_batch(recs(1), is_control=True))
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate_batches(build_batch(recs(1), producer_id=7, producer_epoch=0, base_sequence=-1))
    # count disagreeing with the offset range (gaps in offsets)
    gappy = build_batch([Record(0, 0, None, b"a"), Record(2, 0, None, b"b")])
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batches(gappy)
    validate_batches(gappy, from_client=False)
    zero = bytearray(build_batch(recs(1)))
    struct.pack_into(">i", zero, 57, 0)
    fix_crc(zero)
    with pytest.raises(InvalidRecordError):
        validate_batches(zero)
    negative_delta = bytearray(build_batch(recs(1)))
    struct.pack_into(">i", negative_delta, 23, -1)
    fix_crc(negative_delta)
    with pytest.raises(InvalidRecordError):
        validate_batches(negative_delta, from_client=False)


def test_iter_batch_headers_stops_at_partial_tail():
    a, b = build_batch(recs(2)), build_batch(recs(3))
    buf = a + b[:-1]
    assert [p for p, _ in iter_batch_headers(buf)] == [0]
    assert [p for p, _ in iter_batch_headers(a + b, check_crc=True)] == [0, len(a)]


# --- in-place patches ------------------------------------------------------------------------------


def test_set_base_offset_and_leader_epoch_keep_crc_valid():
    a, b = build_batch(recs(2)), build_batch(recs(3))
    buf = bytearray(a + b)
    set_base_offset(buf, 0, 1000)
    set_base_offset(buf, len(a), 1002)
    set_partition_leader_epoch(buf, len(a), 17)
    out = validate_batches(buf, from_client=False)
    assert [h.base_offset for _, h in out] == [1000, 1002]
    assert [h.partition_leader_epoch for _, h in out] == [-1, 17]
    assert [r.offset for r in decode_records(buf, len(a), out[1][1])] == [1002, 1003, 1004]


def test_set_log_append_time_second_batch_only():
    a, b = build_batch(recs(2)), build_batch(recs(3), compression=COMPRESSION_LZ4)
    buf = bytearray(a + b)
    set_log_append_time(buf, len(a), 123)
    (_, ha), (_, hb) = validate_batches(buf)
    assert ha.timestamp_type == 0 and ha.max_timestamp == 1001
    assert hb.timestamp_type == 1 and hb.max_timestamp == 123


def test_set_log_append_time_rejects_truncated():
    buf = bytearray(build_batch(recs(2)))[:-3]
    with pytest.raises(CorruptRecordError):
        set_log_append_time(buf, 0, 1)


# --- codecs ----------------------------------------------------------------------------------------

PAYLOAD = b"".join(b"record payload %d " % i for i in range(5000))


@pytest.mark.parametrize("codec", CODECS)
def test_compress_round_trip(codec):
    assert decompress(codec, compress(codec, PAYLOAD)) == PAYLOAD
    assert decompress(codec, compress(codec, b"")) == b""


def test_snappy_accepts_raw_and_xerial():
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(COMPRESSION_SNAPPY, raw) == PAYLOAD
    framed = compress(COMPRESSION_SNAPPY, PAYLOAD)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    assert decompress(COMPRESSION_SNAPPY, framed) == PAYLOAD


def test_other_libraries_frames_decode():
    assert decompress(COMPRESSION_LZ4, lz4.frame.compress(PAYLOAD)) == PAYLOAD
    assert decompress(COMPRESSION_ZSTD, zstandard.ZstdCompressor().compress(PAYLOAD)) == PAYLOAD
    assert decompress(COMPRESSION_GZIP, gzip.compress(PAYLOAD)) == PAYLOAD
    assert lz4.frame.decompress(compress(COMPRESSION_LZ4, PAYLOAD)) == PAYLOAD
    assert zstandard.ZstdDecompressor().decompress(compress(COMPRESSION_ZSTD, PAYLOAD)) == PAYLOAD
    assert gzip.decompress(compress(COMPRESSION_GZIP, PAYLOAD)) == PAYLOAD


def test_lz4_frames_use_independent_blocks():
    frame = compress(COMPRESSION_LZ4, PAYLOAD)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] & 0x20, "Kafka's Java client rejects linked LZ4 blocks"


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD, 5, 7])
def test_garbage_compressed_data_is_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x7f\xff\xff\xffgarbage")
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\xff\xfe\xfd not compressed at all")


# --- decoding garbage ------------------------------------------------------------------------------


@PROFILE
@given(body=st.binary(max_size=200), count=st.integers(-2, 50), codec=st.sampled_from(CODECS + [6]),
       compress_body=st.booleans())
def test_decode_garbage_raises_only_corrupt_record(body, count, codec, compress_body):
    if compress_body and codec in CODECS:
        body = compress(codec, body)
    header = bytearray(build_batch(recs(1)))[:BATCH_HEADER_SIZE]
    buf = header + body
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, codec)
    struct.pack_into(">i", buf, 57, count)
    fix_crc(buf)
    h = parse_batch_header(buf)
    try:
        out = decode_records(buf, 0, h)
    except CorruptRecordError:
        return
    assert len(out) == count


@PROFILE
@given(data=st.data())
def test_decode_with_corrupted_record_bytes(data):
    """Flip bytes inside the records of an uncompressed batch: decode raises CorruptRecordError or
    returns records, never another exception."""
    buf = bytearray(build_batch(recs(data.draw(st.integers(1, 5)))))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(min_value=BATCH_HEADER_SIZE, max_value=len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    h = parse_batch_header(buf)
    try:
        decode_records(buf, 0, h)
    except CorruptRecordError:
        pass


def test_decode_rejects_out_of_bounds_batch():
    data = build_batch(recs(2))
    h = parse_batch_header(data)
    with pytest.raises(CorruptRecordError):
        decode_records(data[:-1], 0, h)


@PROFILE
@given(prefix=st.binary(max_size=120), data=st.data())
def test_validate_arbitrary_bytes_never_crashes(prefix, data):
    """Random bytes, or a valid batch with random header bytes, only ever raise Kafka's errors."""
    valid = bytearray(build_batch(recs(2)))
    for _ in range(data.draw(st.integers(0, 4))):
        valid[data.draw(st.integers(0, BATCH_HEADER_SIZE - 1))] = data.draw(st.integers(0, 255))
    for buf in (prefix, bytes(valid), prefix + bytes(valid)):
        try:
            out = validate_batches(buf)
        except (CorruptRecordError, InvalidRecordError):
            continue
        assert sum(h.size_in_bytes for _, h in out) == len(buf)
