"""Down-conversion of record batches to message sets v0/v1 (Fetch v0–3), as Kafka 3.9's
RecordsUtil.downConvert: property tests over random batches in every codec, read back by a parser
written here from Kafka's message format and by kafka-python's own legacy record reader."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kbroker.wire.control import COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.down_convert import (
    UnsupportedCompression,
    down_convert,
    magic_for_fetch_version,
    message_set,
    xxh32_short,
)
from kbroker.wire.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Record,
    build_batch,
    compress,
)

CODECS = (COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4)


# -- an independent reader of magic 0/1 message sets (Kafka's LegacyRecord layout) ----------------

def _decompress(codec: int, data: bytes, magic: int) -> bytes:
    from kafka import codec as kc  # kafka-python's codecs: not kbroker's

    if codec == COMPRESSION_GZIP:
        return kc.gzip_decode(data)
    if codec == COMPRESSION_SNAPPY:
        return kc.snappy_decode(data)
    if codec == COMPRESSION_LZ4:
        if magic == 0:  # the frame must carry Kafka 0.8's header checksum (over the magic number too)
            assert data[6] == (xxh32_short(data[:6]) >> 8) & 0xFF
            return kc.lz4_decode_old_kafka(data)
        assert data[6] == (xxh32_short(data[4:6]) >> 8) & 0xFF  # the standard one
        return kc.lz4_decode(data)
    raise AssertionError(f"codec {codec}")


def read_message_set(buf: bytes, magic: int, wrapper=None) -> list[tuple]:
    """(offset, timestamp, timestamp type, key, value) per message, compressed sets opened,
    inner offsets resolved as a consumer does; every CRC, magic and size checked."""
    out = []
    pos = 0
    while pos < len(buf):
        offset, size = struct.unpack_from(">qi", buf, pos)
        body = buf[pos + 12: pos + 12 + size]
        assert len(body) == size, "no partial message"
        (crc,) = struct.unpack_from(">I", body, 0)
        assert zlib.crc32(body[4:]) == crc
        got_magic, attributes = body[4], body[5]
        assert got_magic == magic
        p = 6
        ts, ts_type = None, None
        if magic == 1:
            (ts,) = struct.unpack_from(">q", body, p)
            p += 8
            ts_type = (attributes >> 3) & 1
        (klen,) = struct.unpack_from(">i", body, p)
        p += 4
        key = None if klen < 0 else body[p:p + klen]
        p += max(klen, 0)
        (vlen,) = struct.unpack_from(">i", body, p)
        p += 4
        value = None if vlen < 0 else body[p:p + vlen]
        assert p + max(vlen, 0) == len(body)
        codec = attributes & 0x07
        if codec:
            assert wrapper is None and key is None, "one level of nesting, the wrapper has no key"
            inner = read_message_set(_decompress(codec, value, magic), magic, wrapper=(offset, ts, ts_type))
            if magic == 1:  # relative inner offsets: the wrapper's offset is the last inner one's
                last = inner[-1][0]
                inner = [(offset - last + o, t, tt, k, v) for o, t, tt, k, v in inner]
                if ts_type == 1:  # LogAppendTime: the wrapper's timestamp is every message's
                    assert all(t == ts for _, t, _, _, _ in inner)
                else:
                    assert ts == max(t for _, t, _, _, _ in inner)
            else:
                assert inner[-1][0] == offset
            out += inner
        else:
            out.append((offset, ts, ts_type, key, value))
        pos += 12 + size
    return out


def read_with_kafka_python(buf: bytes) -> list[tuple]:
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(buf)
    out = []
    while records.has_next():
        for r in records.next_batch():
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


# -- strategies ----------------------------------------------------------------------------------

_blob = st.one_of(st.none(), st.binary(max_size=40))
_headers = st.lists(st.tuples(st.text(max_size=5), _blob), max_size=2)


@st.composite
def batches(draw, codecs=CODECS):
    """A log's worth of batches: (bytes, [(offset, timestamp, key, value, codec, log append time)])
    for the data batches; control batches and offset gaps between batches mixed in."""
    buf = bytearray()
    expected = []
    offset = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()) and draw(st.booleans()):
            buf += build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 0), producer_id=5, producer_epoch=0,
                                              timestamp=1_000, base_offset=offset)
            offset += 1
            continue
        codec = draw(st.sampled_from(codecs))
        n = draw(st.integers(1, 8))
        base_ts = draw(st.integers(0, 2**41))
        recs = []
        for i in range(n):
            offset += draw(st.integers(0, 2)) if i else 0  # compaction leaves gaps inside a batch
            recs.append(Record(offset, base_ts + draw(st.integers(0, 10_000)), draw(_blob), draw(_blob), draw(_headers)))
            offset += 1
        log_append = draw(st.booleans())
        append_time = base_ts + 20_000 if log_append else None
        buf += build_batch(recs, base_offset=recs[0].offset, compression=codec,
                           timestamp_type=TIMESTAMP_LOG_APPEND_TIME if log_append else TIMESTAMP_CREATE_TIME,
                           max_timestamp=append_time, is_transactional=draw(st.booleans()),
                           producer_id=7, producer_epoch=0, base_sequence=0)
        expected.append(([(r.offset, append_time if log_append else r.timestamp, r.key, r.value) for r in recs],
                         codec, log_append))
        offset += draw(st.integers(0, 3))
    return bytes(buf), expected


def _expected(expected, magic: int, fetch_offset: int) -> list[tuple]:
    """What Kafka's downConvert keeps: every record of a compressed batch, those at or after the
    fetch offset of an uncompressed one; timestamps and their type only in magic 1."""
    out = []
    for recs, codec, log_append in expected:
        for offset, ts, key, value in recs:
            if codec == COMPRESSION_NONE and offset < fetch_offset:
                continue
            out.append((offset, ts if magic == 1 else None, (1 if log_append else 0) if magic == 1 else None,
                        key, value))
    return out


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(batches(), st.sampled_from([0, 1]), st.data())
def test_message_sets_hold_the_batches_records(log, magic, data):
    buf, expected = log
    offsets = [o for recs, _, _ in expected for o, *_ in recs]
    fetch_offset = data.draw(st.sampled_from(offsets)) if offsets else 0
    converted = down_convert(buf, magic, fetch_offset)
    want = _expected(expected, magic, fetch_offset)
    got = read_message_set(converted, magic)
    assert got == want[:len(got)]  # in order, nothing altered, nothing invented
    assert bool(got) == bool(want)  # the first batch with records is always sent
    if len(got) < len(want):  # whole converted batches, while they fit in Kafka's size: max(the
        # unconverted size, the first converted batch's)
        first = next(kept for batch in expected if (kept := _expected([batch], magic, fetch_offset)))
        assert len(converted) <= len(buf) or got == first
    # a real client's reader agrees
    assert [(o, k, v) for o, _, k, v in read_with_kafka_python(converted)] == [(o, k, v) for o, _, _, k, v in got]


@SETTINGS
@given(batches(), st.sampled_from([0, 1]))
def test_a_log_of_compressed_batches_converts_whole(log, magic):
    """Compressed batches shrink or stay the same size when rewritten as one wrapper message each,
    so when every batch is compressed and small the whole read is converted."""
    buf, expected = log
    converted = down_convert(buf, magic, 0)
    got = read_message_set(converted, magic)
    want = _expected(expected, magic, 0)
    if all(codec != COMPRESSION_NONE for _, codec, _ in expected) and len(got) < len(want):
        assert len(converted) <= len(buf)
    assert got == want[:len(got)]


@SETTINGS
@given(batches(codecs=(COMPRESSION_ZSTD,)), st.sampled_from([0, 1]))
def test_a_zstd_batch_first_is_unsupported_compression(log, magic):
    buf, expected = log
    if not expected:
        assert down_convert(buf, magic, 0) == b""  # only markers: nothing to convert
        return
    with pytest.raises(UnsupportedCompression) as info:
        down_convert(buf, magic, 0)
    assert info.value.code == 76  # UNSUPPORTED_COMPRESSION_TYPE


def test_a_zstd_batch_after_others_ends_the_answer_before_it():
    first = build_batch([Record(0, 5, b"k", b"a", [])], compression=COMPRESSION_GZIP)
    zstd = build_batch([Record(1, 6, b"k", b"b", [])], base_offset=1, compression=COMPRESSION_ZSTD)
    last = build_batch([Record(2, 7, b"k", b"c", [])], base_offset=2)
    converted = down_convert(first + zstd + last, 1, 0)
    assert [m[0] for m in read_message_set(converted, 1)] == [0]  # the fetcher asks again at 1 and gets the error
    with pytest.raises(UnsupportedCompression):
        down_convert(zstd + last, 1, 1)


def test_headers_are_dropped_and_control_batches_skipped():
    data = build_batch([Record(0, 10, b"k", b"v", [("h", b"x")])], producer_id=3, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
    marker = build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 0), producer_id=3, producer_epoch=0,
                                        timestamp=11, base_offset=1)
    after = build_batch([Record(2, 12, None, b"w", [])], base_offset=2)
    assert read_message_set(down_convert(data + marker + after, 1, 0), 1) == [
        (0, 10, 0, b"k", b"v"), (2, 12, 0, None, b"w")]
    assert down_convert(marker, 0, 1) == b""


def test_uncompressed_records_below_the_fetch_offset_go_compressed_ones_stay():
    recs = [Record(i, 100 + i, None, b"%d" % i, []) for i in range(4)]
    plain, gzip = build_batch(recs), build_batch(recs, compression=COMPRESSION_GZIP)
    assert [m[0] for m in read_message_set(down_convert(plain, 0, 2), 0)] == [2, 3]
    assert [m[0] for m in read_message_set(down_convert(gzip, 0, 2), 0)] == [0, 1, 2, 3]


def test_the_first_batch_is_sent_whole_even_when_larger_than_the_read():
    """Kafka's size: max(unconverted, first converted batch); tiny records grow in magic 1."""
    recs = [Record(i, 0, None, b"", []) for i in range(50)]
    batch = build_batch(recs)
    converted = down_convert(batch + build_batch([Record(r.offset + 50, 0, None, b"", []) for r in recs],
                                                 base_offset=50), 1, 0)
    assert len(message_set(recs, 1)) > 2 * len(batch)  # the first batch grows past both batches' size
    assert [m[0] for m in read_message_set(converted, 1)] == list(range(50))  # sent whole, and alone


def test_magic_per_fetch_version():
    assert [magic_for_fetch_version(v) for v in range(6)] == [0, 0, 1, 1, None, None]


def test_message_bytes_as_kafka_writes_them():
    """One uncompressed magic 1 message, byte for byte (LegacyRecord.write): offset, size, crc,
    magic, attributes, timestamp, key, value."""
    got = message_set([Record(7, 1234, b"k", b"val", [])], 1)
    body = struct.pack(">bbq", 1, 0, 1234) + struct.pack(">i", 1) + b"k" + struct.pack(">i", 3) + b"val"
    assert got == struct.pack(">qiI", 7, len(body) + 4, zlib.crc32(body)) + body
    v0 = message_set([Record(7, 1234, None, None, [])], 0)
    body0 = struct.pack(">bbii", 0, 0, -1, -1)
    assert v0 == struct.pack(">qiI", 7, len(body0) + 4, zlib.crc32(body0)) + body0


def test_xxh32_and_lz4_header_checksums():
    assert [xxh32_short(b""), xxh32_short(b"a"), xxh32_short(b"abc")] == [0x02CC5D05, 0x550D7456, 0x32D153FF]
    frame = compress(COMPRESSION_LZ4, b"x" * 100)
    assert frame[6] == (xxh32_short(frame[4:6]) >> 8) & 0xFF  # cramjam's frame: the standard checksum
    v0 = message_set([Record(0, 0, None, b"x" * 100, []), Record(1, 0, None, b"y", [])], 0, COMPRESSION_LZ4)
    assert [m[4] for m in read_message_set(v0, 0)] == [b"x" * 100, b"y"]
