"""The record plumbing the coordinators' internal topics share (`__consumer_offsets`,
`__transaction_state`): batches of (key, value) records as Kafka's coordinators append them, the
records read back, and the range-checked encodings of their key/value schemas. Each topic's own
schemas live with its coordinator (group/offsets_format.py, txn/log_format.py)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kbroker.wire.primitives import I16, DecodeError, Reader
from kbroker.wire.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
)


def build_internal_batch(entries: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch of `(key, value)` records (value None = tombstone), offsets from 0
    for the log to rebase, no producer id: what Kafka's coordinators append (all of a change's
    records in one batch, so they become visible together)."""
    return build_batch(
        (Record(i, timestamp_ms, key, value) for i, (key, value) in enumerate(entries)),
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
    )


def iter_internal_records(batch_bytes: bytes | bytearray | memoryview) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """Yield `(offset, key, value)` for every record of the complete batches, any codec. Control
    batches (transaction markers) are skipped: they carry no key of these schemas. A partial
    trailing batch is ignored, as a log read may end inside one; a malformed batch raises
    CorruptRecordError."""
    for pos, header in iter_batch_headers(batch_bytes):
        if header.is_control:
            continue
        for rec in decode_records(batch_bytes, pos, header):
            yield rec.offset, rec.key, rec.value


def checked_pack(fmt: struct.Struct, value: int, name: str) -> bytes:
    try:
        return fmt.pack(value)
    except struct.error:
        raise ValueError(f"{name} {value} does not fit its field") from None


def short_string(value: str) -> bytes:
    """A non-flexible (int16-length) string, refusing one too long for its length."""
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit an int16 length")
    return I16.pack(len(raw)) + raw


def required_string(r: Reader) -> str:
    value = r.string()
    if value is None:  # Reader.string already refuses a null here; this narrows the type
        raise DecodeError("null string in a non-nullable field")
    return value
