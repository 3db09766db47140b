"""Message format v0/v1 (magic 0 and 1), as Produce v0–2 carry it, up-converted to a v2 batch.

kbroker serves Produce from v0 because librdkafka only compresses with gzip/snappy/lz4 when the
broker lists Produce v0 (it checks the codec against the lowest Produce version). Old clients
that pin those versions send legacy message sets; Kafka 3.x converts them on append, and so does
kbroker, so the log holds record batches v2 only.
"""

from __future__ import annotations

import struct

from kbroker.wire.primitives import I32 as _I32, I64 as _I64

def is_legacy_message_set(records: bytes | None) -> bool:
    """Magic sits at byte 16 in both layouts (offset, size, crc | base offset, length, epoch)."""
    return records is not None and len(records) > 16 and records[16] in (0, 1)


def up_convert_message_set(records: bytes) -> bytes:
    """A magic 0/1 message set as a single v2 batch with the same codec, as Kafka 3.x converts on append.

    Raises CorruptRecordError for a bad CRC, a truncated message or nested compression.
    """
    from kbroker.wire.records import build_batch, Record, NO_TIMESTAMP

    out: list[Record] = []
    codec = 0
    for magic, attributes, timestamp, key, value in _legacy_messages(records):
        inner_codec = attributes & 0x07
        if inner_codec == 0:
            out.append(Record(len(out), timestamp, key, value, []))
            continue
        from kbroker.wire.records import decompress

        codec = inner_codec
        for _m, inner_attributes, inner_ts, inner_key, inner_value in _legacy_messages(decompress(inner_codec, value or b"")):
            if inner_attributes & 0x07:
                raise _corrupt("nested compression in a legacy message set")
            ts = timestamp if magic == 1 and attributes & 0x08 else inner_ts
            out.append(Record(len(out), ts if ts is not None else NO_TIMESTAMP, inner_key, inner_value, []))
    if not out:
        raise _corrupt("empty legacy message set")
    return build_batch([Record(r.offset, NO_TIMESTAMP if r.timestamp is None else r.timestamp, r.key, r.value, [])
                        for r in out], compression=codec)


def _corrupt(message: str) -> Exception:
    from kbroker.errors import CorruptRecordError

    return CorruptRecordError(message)


def _legacy_messages(buf: bytes):
    import zlib

    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        if pos + 12 > len(view):
            raise _corrupt("truncated legacy message header")
        (size,) = _I32.unpack_from(view, pos + 8)
        start, end = pos + 12, pos + 12 + size
        if size < 14 or end > len(view):
            raise _corrupt("legacy message size out of bounds")
        (crc,) = struct.unpack_from(">I", view, start)
        if zlib.crc32(view[start + 4 : end]) != crc:
            raise _corrupt("legacy message CRC mismatch")
        magic, attributes = view[start + 4], view[start + 5]
        p = start + 6
        timestamp = None
        if magic == 1:
            if p + 8 > end:
                raise _corrupt("truncated legacy timestamp")
            (timestamp,) = _I64.unpack_from(view, p)
            p += 8
        elif magic != 0:
            raise _corrupt(f"unexpected magic {magic} in a legacy message set")
        key, p = _legacy_bytes(view, p, end)
        value, p = _legacy_bytes(view, p, end)
        yield magic, attributes, timestamp, key, value
        pos = end


def _legacy_bytes(view: memoryview, p: int, end: int) -> tuple[bytes | None, int]:
    if p + 4 > end:
        raise _corrupt("truncated legacy field")
    (length,) = _I32.unpack_from(view, p)
    p += 4
    if length == -1:
        return None, p
    if length < 0 or p + length > end:
        raise _corrupt("legacy field length out of bounds")
    return bytes(view[p : p + length]), p + length
