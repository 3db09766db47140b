"""The record plumbing the coordinators' internal topics share (`__consumer_offsets`,
`__transaction_state`): batches of (key, value) records as Kafka's coordinators append them, the
records read back, and the range-checked encodings of their key/value schemas. Each topic's own
schemas live with its coordinator (group/offsets_format.py, txn/log_format.py)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kbroker.wire.control import EndTransactionMarker, read_end_txn_marker
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


def build_internal_batch(entries: list[tuple[bytes, bytes | None]], timestamp_ms: int, *,
                         producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> bytes:
    """One uncompressed v2 batch of `(key, value)` records (value None = tombstone), offsets from 0
    for the log to rebase: what Kafka's coordinators append (all of a change's records in one
    batch, so they become visible together). Without a producer id it belongs to no producer; with
    one it is that producer's transactional batch at base sequence 0, as Kafka's
    GroupMetadataManager writes a transactional offset commit."""
    transactional = producer_id != NO_PRODUCER_ID
    return build_batch(
        (Record(i, timestamp_ms, key, value) for i, (key, value) in enumerate(entries)),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0 if transactional else NO_SEQUENCE,
        is_transactional=transactional,
    )


@dataclass(frozen=True, slots=True)
class InternalBatch:
    """One batch of an internal topic as a coordinator's loader needs it: its records, and what
    makes them part of a transaction (producer id, transactional bit) or ends one (a control
    batch's COMMIT/ABORT marker)."""

    producer_id: int
    is_transactional: bool
    is_control: bool
    marker: EndTransactionMarker | None  # a control batch's; None when empty (cleaned) or no marker
    records: list[tuple[int, bytes | None, bytes | None]]  # (offset, key, value); empty for control


def iter_internal_batches(batch_bytes: bytes | bytearray | memoryview) -> Iterator[InternalBatch]:
    """Every complete batch, control batches included (Kafka's loaders read the markers of
    transactional offset commits). A partial trailing batch is ignored, a malformed batch raises
    CorruptRecordError, as in `iter_internal_records`."""
    for pos, header in iter_batch_headers(batch_bytes):
        if header.is_control:
            yield InternalBatch(header.producer_id, header.is_transactional, True,
                                read_end_txn_marker(batch_bytes, pos, header), [])
        else:
            records = [(rec.offset, rec.key, rec.value) for rec in decode_records(batch_bytes, pos, header)]
            yield InternalBatch(header.producer_id, header.is_transactional, False, None, records)


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
