"""Record batches (magic 2) down-converted to message sets v0/v1 (magic 0 and 1), for Fetch v0–3.

Kafka 3.9 answers a Fetch below v4 from the log's record batches converted to the message format
the fetcher knows — magic 0 for Fetch v0–1, magic 1 for v2–3 (KafkaApis.maybeConvertFetchedData,
RecordsUtil.downConvert, LazyDownConversionRecords); Kafka 4 dropped those versions (KIP-896).
This module is that conversion, sans-I/O, and is only ever reached by such a fetch: the modern
path never opens a batch.

What Kafka does, and so this module:
- control batches (transaction markers) are skipped: magic 0/1 has no such thing;
- a zstd-compressed batch cannot be converted (magic < 2 has no zstd): when it is the first batch
  to convert the partition's answer is UNSUPPORTED_COMPRESSION_TYPE (`UnsupportedCompression`),
  otherwise the answer stops before it and the fetcher meets the error on its next fetch there;
- an uncompressed batch loses its records below the fetch offset (v0/v1 records are not batched,
  and some librdkafka versions count on it); a compressed one is converted whole, as the fetcher
  skips the earlier records of a compressed set itself;
- each batch keeps its codec: its records are decompressed, written as messages with their
  offsets, keys and values (headers are dropped: v0/v1 have none), and compressed again into one
  wrapper message, whose offset is the last record's. Inner offsets are absolute in magic 0,
  relative to the first record in magic 1. LZ4 in magic 0 carries the frame-header checksum Kafka
  0.8–0.9 computed wrongly (over the magic number too), as Kafka still writes it;
- timestamps (magic 1): each record's, and the wrapper's the largest; a LogAppendTime batch
  gives every message and the wrapper its append time, with the timestamp-type attribute bit;
- size: Kafka sends max(the unconverted size, the first converted batch's size), truncating the
  converted bytes there. Here whole converted batches are kept while they fit in that size, so the
  answer is never larger than Kafka's and never ends in a partial message.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable

from kbroker.errors import ErrorCode, KafkaError
from kbroker.wire.records import (
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    TIMESTAMP_LOG_APPEND_TIME,
    Buffer,
    Record,
    compress,
    decode_records,
    iter_batch_headers,
)

__all__ = ["UnsupportedCompression", "down_convert", "magic_for_fetch_version", "message_set"]

_TIMESTAMP_TYPE_BIT = 0x08
_OFFSET_SIZE = struct.Struct(">qi")
_CRC = struct.Struct(">I")
_V0_HEAD = struct.Struct(">bb")  # magic, attributes
_V1_HEAD = struct.Struct(">bbq")  # magic, attributes, timestamp
_LEN = struct.Struct(">i")
_NULL = _LEN.pack(-1)


class UnsupportedCompression(KafkaError):
    """A zstd batch where the fetcher needs magic 0 or 1 (Kafka's UnsupportedCompressionTypeException)."""

    code = ErrorCode.unsupported_compression_type


def magic_for_fetch_version(version: int) -> int | None:
    """The message format a Fetch version reads: 0 for v0–1, 1 for v2–3, None (record batches) above."""
    if version <= 1:
        return 0
    if version <= 3:
        return 1
    return None


def down_convert(records: Buffer, to_magic: int, fetch_offset: int) -> bytes:
    """The whole batches in `records` (as a log read returns them) as a message set of `to_magic`.

    Raises UnsupportedCompression when the first batch with records to convert is zstd-compressed,
    CorruptRecordError when a batch cannot be decoded.
    """
    out = bytearray()
    limit = len(records)  # Kafka's size: the unconverted one, or the first converted batch's
    for pos, header in iter_batch_headers(records):
        if header.is_control:
            continue
        if header.compression == COMPRESSION_ZSTD:
            if not out:
                raise UnsupportedCompression("Down-conversion of zstandard-compressed batches is not supported")
            break
        batch = decode_records(records, pos, header)
        if header.compression == COMPRESSION_NONE:
            batch = [r for r in batch if r.offset >= fetch_offset]
        if not batch:
            continue
        append_time = header.max_timestamp if header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME else None
        converted = message_set(batch, to_magic, header.compression, append_time)
        if out and len(out) + len(converted) > limit:
            break
        out += converted
    return bytes(out)


def message_set(records: Iterable[Record], magic: int, codec: int = COMPRESSION_NONE,
                log_append_time: int | None = None) -> bytes:
    """`records` (absolute offsets, ascending) as messages of `magic`: one message each when
    uncompressed, else one wrapper message holding them compressed with `codec`.
    `log_append_time`: the batch is LogAppendTime, every timestamp is that one."""
    recs = list(records)
    if codec == COMPRESSION_NONE:
        out = bytearray()
        for r in recs:
            out += _message(magic, r.offset, _attributes(magic, 0, log_append_time), _ts(r, log_append_time),
                            r.key, r.value)
        return bytes(out)
    if codec == COMPRESSION_ZSTD:
        raise UnsupportedCompression(f"ZStandard compression is not supported for magic {magic}")
    base = recs[0].offset
    inner = bytearray()
    inner_attributes = _attributes(magic, 0, log_append_time)
    for r in recs:
        inner += _message(magic, r.offset - base if magic > 0 else r.offset, inner_attributes,
                          _ts(r, log_append_time), r.key, r.value)
    value = compress(codec, bytes(inner))
    if codec == COMPRESSION_LZ4 and magic == 0:
        value = _broken_lz4_header_checksum(value)
    wrapper_ts = log_append_time if log_append_time is not None else max([-1] + [r.timestamp for r in recs])
    return _message(magic, recs[-1].offset, _attributes(magic, codec, log_append_time), wrapper_ts, None, value)


def _ts(record: Record, log_append_time: int | None) -> int:
    return log_append_time if log_append_time is not None else record.timestamp


def _attributes(magic: int, codec: int, log_append_time: int | None) -> int:
    if magic > 0 and log_append_time is not None:
        return codec | _TIMESTAMP_TYPE_BIT
    return codec


def _message(magic: int, offset: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    """offset | size | crc | magic | attributes | [timestamp] | key | value (Kafka's LegacyRecord)."""
    body = _V1_HEAD.pack(1, attributes, timestamp) if magic == 1 else _V0_HEAD.pack(0, attributes)
    body += _NULL if key is None else _LEN.pack(len(key)) + key
    body += _NULL if value is None else _LEN.pack(len(value)) + value
    return _OFFSET_SIZE.pack(offset, len(body) + 4) + _CRC.pack(zlib.crc32(body)) + body


# -- LZ4 in magic 0 -------------------------------------------------------------------------------

_PRIME1, _PRIME2, _PRIME3, _PRIME4, _PRIME5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (all an LZ4 frame descriptor needs)."""
    if len(data) >= 16:
        raise ValueError("xxh32_short hashes fewer than 16 bytes")
    h = (seed + _PRIME5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        h = (h + int.from_bytes(data[i:i + 4], "little") * _PRIME3) & _M32
        h = (_rotl(h, 17) * _PRIME4) & _M32
        i += 4
    for byte in data[i:]:
        h = (h + byte * _PRIME5) & _M32
        h = (_rotl(h, 11) * _PRIME1) & _M32
    h ^= h >> 15
    h = (h * _PRIME2) & _M32
    h ^= h >> 13
    h = (h * _PRIME3) & _M32
    return h ^ (h >> 16)


def _broken_lz4_header_checksum(frame: bytes) -> bytes:
    """Kafka's magic-0 LZ4 frame (Lz4BlockOutputStream with useBrokenFlagDescriptorChecksum): the
    header checksum byte computed over the magic number and the descriptor, not the descriptor
    alone. The frames written here have no content size: magic(4) FLG BD HC."""
    if frame[4] & 0x08:  # content size present: not a frame this module writes
        raise ValueError("LZ4 frame with a content size")
    checksum = (xxh32_short(frame[:6]) >> 8) & 0xFF
    return frame[:6] + bytes([checksum]) + frame[7:]
