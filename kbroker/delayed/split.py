"""A produce batch taken apart for delayed delivery, pure: which records wait (and until when), and
the batch the target partition gets instead.

`may_delay` is on every produce's path, so it opens no record: for an uncompressed batch it is one
search of the records' bytes for the header names (a batch without them is not delayed, whatever
else it holds); a compressed batch is decompressed first (the search alone would miss them).

The target still receives a batch, carrying the records that are not delayed, with the original
producer id, epoch, base sequence and offset span, as Kafka's log cleaner keeps a batch whose
records it removed: an idempotent producer's next sequence stays in order, and a retry of the same
batch is recognised as a duplicate. A batch of no producer whose records all wait is not appended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbroker.delayed.format import DelayedRecord, Target, due_time, idempotent_id, random_id
from kbroker.wire.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    decompress,
    increment_sequence,
)

_DELAY_HEADER_NAMES = re.compile(rb"del(?:ay\.ms|iver\.at)")


def may_delay(buf, pos: int, header: BatchHeader) -> bool:
    """Whether any record of the batch at `pos` may carry a delay header (no false negatives)."""
    section = memoryview(buf)[pos + BATCH_HEADER_SIZE:pos + header.size_in_bytes]
    if header.compression:
        section = decompress(header.compression, section)
    return _DELAY_HEADER_NAMES.search(section) is not None


@dataclass(frozen=True, slots=True)
class SplitBatch:
    delayed: list[DelayedRecord]
    remaining: bytes | None  # what the target gets; None: nothing


def split_batch(buf, pos: int, header: BatchHeader, target: Target, now_ms: int, topic_delay_ms: int,
                max_delay_ms: int, *, honour_headers: bool = True) -> SplitBatch | None:
    """The batch's delayed records and the batch left for the target; None when nothing is delayed.
    DelayHeaderError for a malformed delay header. `honour_headers` False: only the topic's delay
    counts (the delay headers are ordinary headers)."""
    delayed, kept = delay_records(decode_records(buf, pos, header), header, target, now_ms, topic_delay_ms,
                                  max_delay_ms, honour_headers=honour_headers)
    return remaining_batch(header, delayed, kept)


def delay_records(records: list[Record], header: BatchHeader, target: Target, now_ms: int, topic_delay_ms: int,
                  max_delay_ms: int, *, honour_headers: bool = True) -> tuple[list[DelayedRecord], list[Record]]:
    """Some of a batch's decoded records sorted into (delayed, kept); a long batch is sorted a slice
    at a time, so the caller can let other work run between slices."""
    delayed: list[DelayedRecord] = []
    kept: list[Record] = []
    for rec in records:
        due = due_time(rec.headers if honour_headers else (), now_ms, topic_delay_ms, max_delay_ms)
        if due is None:
            kept.append(rec)
            continue
        if header.producer_id >= 0:
            sequence = increment_sequence(header.base_sequence, rec.offset - header.base_offset)
            record_id = idempotent_id(target, header.producer_id, header.producer_epoch, sequence)
        else:
            record_id = random_id()
        delayed.append(DelayedRecord(record_id, target, due, rec.timestamp, rec.key, rec.value, tuple(rec.headers)))
    return delayed, kept


def remaining_batch(header: BatchHeader, delayed: list[DelayedRecord], kept: list[Record]) -> SplitBatch | None:
    """The split of a batch whose records were sorted into `delayed` and `kept`."""
    if not delayed:
        return None
    if not kept and header.producer_id < 0:
        return SplitBatch(delayed, None)
    remaining = build_batch(
        kept, base_offset=header.base_offset, compression=header.compression, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        timestamp_type=header.timestamp_type, last_offset_delta=header.last_offset_delta,
        max_timestamp=None if kept else header.max_timestamp)
    return SplitBatch(delayed, remaining)
