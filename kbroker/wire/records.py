"""Kafka record batch format v2 (magic 2): header parsing, produce-path validation, in-place patches,
record decoding (all codecs) and batch building. Sans-I/O.

Layout of a batch (big-endian), CRC-32C covering `attributes` to the end of the batch:

    base_offset i64 | batch_length i32 | partition_leader_epoch i32 | magic i8 | crc u32 |
    attributes i16 | last_offset_delta i32 | base_timestamp i64 | max_timestamp i64 |
    producer_id i64 | producer_epoch i16 | base_sequence i32 | records_count i32 | records...

`batch_length` counts the bytes after itself, so a batch takes `batch_length + 12` bytes.
The produce hot path (`validate_batches`, the `set_*` patches) touches the 61-byte header and runs
one crc32c C call per batch; it never looks at individual records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import cramjam
from crc32c import crc32c

from kbroker.errors import CorruptRecordError, InvalidRecordError

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "COMPRESSION_NONE",
    "COMPRESSION_GZIP",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_LZ4",
    "COMPRESSION_ZSTD",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "BatchHeader",
    "Record",
    "parse_batch_header",
    "validate_batches",
    "iter_batch_headers",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_log_append_time",
    "decode_records",
    "build_batch",
    "with_records",
    "compress",
    "decompress",
    "increment_sequence",
]

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the part of a batch not counted by batch_length
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_V2 = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40  # KIP-534: base_timestamp holds the time after which tombstones may go

# Field offsets inside a batch.
_LEADER_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")

_INT32_MAX = 2**31 - 1

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class BatchHeader:
    """The 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: set by the log cleaner on batches holding tombstones; None when unset."""
        return self.base_timestamp if self.attributes & _DELETE_HORIZON_BIT else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence arithmetic: sequences wrap from 2**31-1 to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def parse_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos`. Raises CorruptRecordError when short, undersized or not magic 2.

    Does not check that the whole batch is inside `buf` nor its CRC (see validate_batches).
    """
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"record batch header truncated at position {pos}")
    h = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch size {h.size_in_bytes} is smaller than the minimum allowed overhead {BATCH_HEADER_SIZE}"
        )
    if h.magic != MAGIC_V2:
        raise CorruptRecordError(f"unsupported record batch magic {h.magic} at position {pos}")
    return h


def _batch_crc(mv: memoryview, pos: int, end: int) -> int:
    return crc32c(mv[pos + _ATTRIBUTES_OFFSET : end])


def validate_batches(buf: Buffer, *, from_client: bool = True) -> list[tuple[int, BatchHeader]]:
    """Check that `buf` holds one or more complete, CRC-valid v2 batches and nothing else.

    Returns `(position, header)` per batch. With `from_client` (the Produce path) Kafka's
    `LogValidator.validateBatch` client rules apply too: base offset 0, a positive record count
    equal to `last_offset_delta + 1`, no control batches, a sequence when there is a producer id.

    Errors as Kafka answers them: magic 0/1 is INVALID_RECORD (Kafka 4's
    `ProduceRequest.validateRecords`: "only allowed to contain record batches with magic version 2");
    any other magic, truncation, a bad size or CRC is CORRUPT_MESSAGE. Unlike Kafka, which silently
    drops a trailing partial batch, trailing bytes are CORRUPT_MESSAGE here.

    Kafka's produce v3+ also allows exactly one batch per partition (INVALID_RECORD otherwise);
    that is the Produce handler's check (`len(result) == 1`), since followers append many.
    """
    n = len(buf)
    if n == 0:
        raise InvalidRecordError("produce requests must have at least one record batch per partition")
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    unpack = _HEADER.unpack_from
    while pos < n:
        if n - pos < _MAGIC_OFFSET + 1:
            raise CorruptRecordError(f"{n - pos} trailing bytes after the last record batch")
        magic = mv[pos + _MAGIC_OFFSET]
        if magic != MAGIC_V2:
            if magic in (0, 1):
                raise InvalidRecordError(
                    "produce requests are only allowed to contain record batches with magic version 2"
                )
            raise CorruptRecordError(f"invalid magic found in record batch: {magic}")
        if n - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError("record batch header truncated")
        h = BatchHeader(*unpack(mv, pos))
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch size {h.batch_length + LOG_OVERHEAD} is smaller than the minimum "
                f"allowed overhead {BATCH_HEADER_SIZE}"
            )
        end = pos + LOG_OVERHEAD + h.batch_length
        if end > n:
            raise CorruptRecordError(f"record batch of {h.batch_length + LOG_OVERHEAD} bytes truncated to {n - pos}")
        computed = _batch_crc(mv, pos, end)
        if computed != h.crc:
            raise CorruptRecordError(f"record is corrupt (stored crc = {h.crc}, computed crc = {computed})")
        if h.last_offset_delta < 0:
            raise InvalidRecordError(f"batch has an invalid offset range: last offset delta {h.last_offset_delta}")
        if from_client:
            _validate_client_batch(h)
        out.append((pos, h))
        pos = end
    return out


def _validate_client_batch(h: BatchHeader) -> None:
    if h.base_offset != 0:
        raise InvalidRecordError(f"the baseOffset of the record batch in the append should be 0, but it is {h.base_offset}")
    if h.records_count <= 0:
        raise InvalidRecordError(f"invalid reported count for record batch: {h.records_count}")
    if h.records_count != h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range [0, {h.last_offset_delta}] and count of records {h.records_count}"
        )
    if h.attributes & _CONTROL_BIT:
        raise InvalidRecordError("clients are not allowed to write control records")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {h.base_sequence} in record batch with producerId {h.producer_id}"
        )


def iter_batch_headers(buf: Buffer, pos: int = 0, end: int | None = None, *, check_crc: bool = False):
    """Yield `(position, header)` for the complete batches in `buf[pos:end]`; stops at a partial tail.

    Raises CorruptRecordError on a malformed header (or a CRC mismatch with `check_crc`).
    """
    if end is None:
        end = len(buf)
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        h = parse_batch_header(mv, pos)
        nxt = pos + LOG_OVERHEAD + h.batch_length
        if nxt > end:
            return
        if check_crc and _batch_crc(mv, pos, nxt) != h.crc:
            raise CorruptRecordError(f"record batch at position {pos} fails its CRC")
        yield pos, h
        pos = nxt


# --- in-place patches ------------------------------------------------------------------------------


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Not covered by the CRC, so no recomputation."""
    _I64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Not covered by the CRC, so no recomputation."""
    _I32.pack_into(buf, pos + _LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Kafka's `setMaxTimestamp(LOG_APPEND_TIME, ts)`: set the timestamp-type bit and max_timestamp,
    then recompute the CRC (both fields are covered by it). Record timestamps read as `timestamp`."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    (batch_length,) = _I32.unpack_from(mv, pos + 8)
    if batch_length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + batch_length > len(mv):
        raise CorruptRecordError("record batch truncated")
    (attributes,) = _I16.unpack_from(mv, pos + _ATTRIBUTES_OFFSET)
    _I16.pack_into(mv, pos + _ATTRIBUTES_OFFSET, attributes | _TIMESTAMP_TYPE_BIT)
    _I64.pack_into(mv, pos + _MAX_TIMESTAMP_OFFSET, timestamp)
    _U32.pack_into(mv, pos + _CRC_OFFSET, _batch_crc(mv, pos, pos + LOG_OVERHEAD + batch_length))


# --- compression -----------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def compress(codec: int, data: Buffer) -> bytes:
    """Compress a records section the way Kafka's Java producer frames it."""
    if codec == COMPRESSION_GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == COMPRESSION_SNAPPY:
        # Xerial framing, as snappy-java's SnappyOutputStream writes (readable by every client).
        parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)]
        mv = memoryview(data)
        for i in range(0, len(mv), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(mv[i : i + _XERIAL_BLOCK]))
            parts.append(_I32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == COMPRESSION_LZ4:
        # LZ4 frame with independent blocks: Kafka's KafkaLZ4BlockInputStream rejects linked blocks.
        c = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    if codec == COMPRESSION_NONE:
        return bytes(data)
    raise CorruptRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Inverse of `compress`; snappy accepts both Xerial-framed (Java) and raw (librdkafka) input.

    Raises CorruptRecordError on any malformed input.
    """
    try:
        if codec == COMPRESSION_GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == COMPRESSION_SNAPPY:
            if bytes(data[:8]) == _XERIAL_MAGIC:
                return _xerial_decompress(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == COMPRESSION_LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == COMPRESSION_ZSTD:
            return bytes(cramjam.zstd.decompress(data))
        if codec == COMPRESSION_NONE:
            return bytes(data)
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"cannot decompress record batch (codec {codec}): {e}") from None
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _xerial_decompress(data: Buffer) -> bytes:
    mv = memoryview(data)
    n = len(mv)
    if n < _XERIAL_HEADER.size:
        raise CorruptRecordError("truncated xerial snappy header")
    pos = _XERIAL_HEADER.size
    out = []
    while pos < n:
        if n - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = _I32.unpack_from(mv, pos)
        pos += 4
        if size < 0 or pos + size > n:
            raise CorruptRecordError("xerial snappy block exceeds its input")
        out.append(bytes(cramjam.snappy.decompress_raw(mv[pos : pos + size])))
        pos += size
    return b"".join(out)


# --- records -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """One record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


class RecordLike(Protocol):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]


def _read_varint(b: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Zigzag varint at `b[pos]`; bounded by `end` and `max_bytes` (5 for int32, 10 for int64)."""
    result = 0
    shift = 0
    limit = min(end, pos + max_bytes)
    while pos < limit:
        byte = b[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordError("malformed or truncated varint in record")


def decode_records(buf: Buffer, pos: int, header: BatchHeader) -> list[Record]:
    """Decode the records of the batch at `buf[pos]` (header from parse_batch_header) into absolute
    offsets and timestamps (LogAppendTime batches report max_timestamp for every record).

    Raises CorruptRecordError on anything malformed: bad codec data, varints, sizes, counts.
    """
    end = pos + header.size_in_bytes
    if pos < 0 or end > len(buf):
        raise CorruptRecordError("record batch truncated")
    section = memoryview(buf)[pos + BATCH_HEADER_SIZE : end]
    data = decompress(header.compression, section) if header.compression else bytes(section)
    count = header.records_count
    n = len(data)
    if count < 0 or count > n:  # a record takes at least 7 bytes; this bounds the loop cheaply
        raise CorruptRecordError(f"invalid record count {count} for {n} bytes of records")
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append_time = header.max_timestamp if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else None
    out: list[Record] = []
    p = 0
    rv = _read_varint
    for _ in range(count):
        length, p = rv(data, p, n, 5)
        if length < 0 or p + length > n:
            raise CorruptRecordError(f"invalid record size {length}")
        rend = p + length
        if p >= rend:
            raise CorruptRecordError("empty record")
        p += 1  # record attributes, unused
        ts_delta, p = rv(data, p, rend, 10)
        off_delta, p = rv(data, p, rend, 5)
        key, p = _read_bytes(data, p, rend)
        value, p = _read_bytes(data, p, rend)
        nheaders, p = rv(data, p, rend, 5)
        if nheaders < 0 or nheaders > rend - p:
            raise CorruptRecordError(f"invalid header count {nheaders}")
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(nheaders):
            hkey, p = _read_bytes(data, p, rend)
            if hkey is None:
                raise CorruptRecordError("invalid negative header key size")
            hval, p = _read_bytes(data, p, rend)
            try:
                headers.append((hkey.decode("utf-8"), hval))
            except UnicodeDecodeError:
                raise CorruptRecordError("header key is not valid UTF-8") from None
        if p != rend:
            raise CorruptRecordError(f"invalid record size: expected {length} bytes, read {length - (rend - p)}")
        ts = log_append_time if log_append_time is not None else base_ts + ts_delta
        out.append(Record(base_offset + off_delta, ts, key, value, headers))
    if p != n:
        raise CorruptRecordError(f"{n - p} bytes remain after the declared {count} records")
    return out


def _read_bytes(b: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    size, pos = _read_varint(b, pos, end, 5)
    if size < 0:
        if size == -1:
            return None, pos
        raise CorruptRecordError(f"invalid negative field size {size}")
    if pos + size > end:
        raise CorruptRecordError("record field exceeds its record")
    return b[pos : pos + size], pos + size


def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)  # zigzag over 64 bits covers int32 fields too
    v &= 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(value))
        out += value


def _encode_record(rec: RecordLike, offset_delta: int, ts_delta: int) -> bytes:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, ts_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, rec.key)
    _write_bytes(body, rec.value)
    headers = rec.headers or ()
    _write_varint(body, len(headers))
    for hkey, hval in headers:
        _write_bytes(body, hkey.encode("utf-8"))
        _write_bytes(body, hval)
    prefix = bytearray()
    _write_varint(prefix, len(body))
    return bytes(prefix + body)


def build_batch(
    records: Iterable[RecordLike],
    *,
    base_offset: int = 0,
    compression: int = COMPRESSION_NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode one v2 batch. Record offsets are **absolute**: each record's offset delta is
    `record.offset - base_offset` (so `decode_records` output round-trips unchanged). The base
    timestamp is the first record's, max_timestamp the largest. At least one record is required,
    except with `last_offset_delta` and `max_timestamp` given (an empty batch, as the log cleaner
    keeps for producer state).

    The log cleaner's rebuilds (Kafka's MemoryRecords.filterTo) pass `last_offset_delta` (the
    original batch's, so the producer's last sequence survives), `max_timestamp` (LogAppendTime
    batches keep theirs) and `delete_horizon_ms` (KIP-534: stored as the base timestamp, with record
    timestamps relative to it).
    """
    recs = list(records)
    if not recs and (last_offset_delta is None or max_timestamp is None):
        raise ValueError("a record batch needs at least one record")
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = recs[0].timestamp if recs else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(r.timestamp for r in recs)
    encoded = []
    last_delta = 0
    for r in recs:
        delta = r.offset - base_offset
        if not 0 <= delta <= _INT32_MAX:
            raise ValueError(f"record offset {r.offset} out of range for base offset {base_offset}")
        last_delta = max(last_delta, delta)
        encoded.append(_encode_record(r, delta, r.timestamp - base_ts))
    if last_offset_delta is not None:
        if last_offset_delta < last_delta:
            raise ValueError(f"last offset delta {last_offset_delta} below a record's delta {last_delta}")
        last_delta = last_offset_delta
    body = b"".join(encoded)
    if compression != COMPRESSION_NONE and recs:
        body = compress(compression, body)
    attributes = (compression & _COMPRESSION_MASK) if recs else COMPRESSION_NONE
    if delete_horizon_ms is not None:
        attributes |= _DELETE_HORIZON_BIT
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= _TRANSACTIONAL_BIT
    if is_control:
        attributes |= _CONTROL_BIT
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body)
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out, 0, base_offset, batch_length, partition_leader_epoch, MAGIC_V2, 0, attributes, last_delta,
        base_ts, max_timestamp, producer_id, producer_epoch, base_sequence, len(recs),
    )
    out += body
    _U32.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def with_records(header: BatchHeader, records_section: Buffer, records_count: int) -> bytes:
    """A copy of the batch `header` describes holding another records section (already compressed
    with the header's codec): every header field kept — base offset, last offset delta,
    timestamps, producer id, epoch and sequence, attributes, leader epoch — but the length, the
    record count and the CRC. A view's partially matching batch is rebuilt so (see views/)."""
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out, 0, header.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records_section),
        header.partition_leader_epoch, MAGIC_V2, 0, header.attributes, header.last_offset_delta,
        header.base_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, records_count,
    )
    out += records_section
    _U32.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)
