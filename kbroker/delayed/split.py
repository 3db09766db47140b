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
from collections.abc import Callable
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
    return split_records(buf, pos, header, target,
                         delay_plan(target, now_ms, topic_delay_ms, max_delay_ms, honour_headers=honour_headers))


# where a record goes, when and with which headers; None: it stays in the produced batch
Planned = tuple[Target, int, tuple]
Plan = Callable[[Record], "Planned | None"]


def delay_plan(target: Target, now_ms: int, topic_delay_ms: int, max_delay_ms: int, *,
               honour_headers: bool = True) -> Plan:
    """The plan of a produce to `target`: a record waits until its delay headers (or the topic's
    delay) say, in its own partition."""
    def plan(rec: Record) -> Planned | None:
        due = due_time(rec.headers if honour_headers else (), now_ms, topic_delay_ms, max_delay_ms)
        return None if due is None else (target, due, tuple(rec.headers))
    return plan


def split_records(buf, pos: int, header: BatchHeader, source: Target, plan: Plan) -> SplitBatch | None:
    """The batch at `pos` of partition `source` taken apart by `plan` (also used by retry topics,
    whose records go to another topic); None when `plan` keeps every record."""
    return remaining_batch(header, *plan_records(decode_records(buf, pos, header), header, source, plan))


def plan_records(records: list[Record], header: BatchHeader, source: Target,
                 plan: Plan) -> tuple[list[DelayedRecord], list[Record]]:
    """Some of a batch's decoded records (produced to `source`) sorted by `plan` into (delayed,
    kept); a long batch is sorted a slice at a time, so the caller can let other work run between
    slices. An idempotent producer's record gets an id from its producer id, epoch and sequence."""
    delayed: list[DelayedRecord] = []
    kept: list[Record] = []
    for rec in records:
        planned = plan(rec)
        if planned is None:
            kept.append(rec)
            continue
        target, due, headers = planned
        if header.producer_id >= 0:
            sequence = increment_sequence(header.base_sequence, rec.offset - header.base_offset)
            record_id = idempotent_id(source, header.producer_id, header.producer_epoch, sequence)
        else:
            record_id = random_id()
        delayed.append(DelayedRecord(record_id, target, due, rec.timestamp, rec.key, rec.value, headers))
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
