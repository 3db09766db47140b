"""Produce's delayed-delivery branch (see kbroker/delayed/): a batch whose records ask for a
delay, or that goes to a topic with `delivery.delay.ms`, is scheduled in the delay log before
the target gets what is left of it.

Order matters for idempotent producers: a retry of a batch the target already has is answered by
the normal path as a duplicate (nothing is scheduled twice); the producer's epoch and sequence are
checked before anything is written; the delayed records go to the delay log (acks=all there) and
only then is the rest appended to the target, which carries the batch's sequence range on. A
transactional batch is refused: its delayed records could not follow the transaction's outcome.

Also here: a Produce to `__delayed_messages` by `__admin_client` (another broker's forwarded
schedules, `kbroker delayed cancel`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import trio

from kbroker.delayed.format import DelayHeaderError
from kbroker.delayed.split import SplitBatch, delay_plan, may_delay, plan_records, remaining_batch
from kbroker.errors import (
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    NotLeaderOrFollowerError,
)
from kbroker.log.record_validation import validate_records
from kbroker.wire.records import decode_records, validate_batches

SPLIT_SLICE = 500  # records sorted between two yields to the event loop


@dataclass(frozen=True, slots=True)
class NothingAppended:
    """The answer's offsets when every record of a batch without a producer id was delayed."""
    first_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


async def append_with_delays(ctx, partition, buf, batches, acks: int):
    """Schedule the batch's delayed records and append the rest; None when nothing is delayed (the
    caller appends the batch as usual)."""
    service = ctx.broker.delayed
    tp = partition.topic_partition
    pos, header = batches[0]
    topic_delay = service.topic_delay_ms(tp.topic)
    honour_headers = service.honours_headers(tp.topic)
    if topic_delay <= 0 and not (honour_headers and may_delay(buf, pos, header)):
        return None
    try:
        split = await _split(buf, pos, header, (tp.topic, tp.partition), topic_delay, service.config.max_delay_ms,
                             honour_headers)
    except DelayHeaderError as exc:
        raise InvalidRecordError(str(exc)) from None
    if split is None:
        return None
    config = partition.log.config
    if config.validates_records:  # the delayed records reach the log only at delivery: check them now
        validate_records(buf, batches, config, int(time.time() * 1000), tp)
    if header.is_transactional:
        raise InvalidRecordError("delayed delivery is not available to transactional producers "
                                 "(a delay header, or the topic's delivery.delay.ms, on a transactional batch)")
    return await schedule_and_append(ctx, partition, header, split, acks)


async def schedule_and_append(ctx, partition, header, split: SplitBatch, acks: int):
    """Schedule a split batch's delayed records (per target) and append what it left for the
    partition; None when the batch is a retry the log answers as a duplicate. Retry topics
    (api/produce_retry.py) come here too."""
    tp = partition.topic_partition
    if header.producer_id >= 0:
        producers = partition.log.producer_state
        entry = producers.last_entry(header.producer_id)
        if entry is not None and entry.find_duplicate_batch(header) is not None:
            return None  # a retry: the log answers with the original offsets
        # the checks the append would make, before the delay log gets anything
        producers.prepare_update(header.producer_id, validate=True).append_data_batch(
            header.producer_epoch, header.base_sequence, header.last_sequence, header.max_timestamp, 0,
            header.last_offset_delta, False)
    by_target: dict = {}
    for record in split.delayed:  # one delay-log partition delivers each target's records
        by_target.setdefault(record.target, []).append(record)
    for target, records in by_target.items():
        code = await ctx.broker.delayed.schedule(target, records)
        if code != ErrorCode.none:
            raise KafkaError(f"{code.name} scheduling the delayed records", code=code)
    if ctx.broker.replica_manager.partitions.get(tp) is not partition or not partition.is_leader:
        raise NotLeaderOrFollowerError(f"This broker is no longer the leader of {tp}.")
    if split.remaining is None:
        return NothingAppended(log_start_offset=partition.log_start_offset)
    rest = bytearray(split.remaining)
    return partition.append_records_to_leader(rest, validate_batches(rest, from_client=False), acks)


async def _split(buf, pos: int, header, target, topic_delay: int, max_delay_ms: int, honour_headers: bool):
    """split_batch, a slice of records at a time: a batch of thousands of delayed records takes tens
    of ms to sort, and deliveries due meanwhile must not wait for all of it."""
    records = decode_records(buf, pos, header)
    now_ms = time.time_ns() // 1_000_000
    plan = delay_plan(target, now_ms, topic_delay, max_delay_ms, honour_headers=honour_headers)
    delayed, kept = [], []
    for start in range(0, len(records), SPLIT_SLICE):
        if start:
            await trio.lowlevel.checkpoint()
        more_delayed, more_kept = plan_records(records[start:start + SPLIT_SLICE], header, target, plan)
        delayed += more_delayed
        kept += more_kept
    return remaining_batch(header, delayed, kept)


async def append_to_delay_log(ctx, partition: int, records) -> dict:
    """A Produce to `__delayed_messages` by `__admin_client`; the partition's answer entry."""
    try:
        if not records:
            raise InvalidRecordError("no records")
        buf = bytes(records)
        validate_batches(buf)
        code, first = await ctx.broker.delayed.append_request(partition, buf)
    except KafkaError as exc:
        code, first, message = exc.code, -1, str(exc)
    else:
        message = None if code == ErrorCode.none else code.name
    return {"index": partition, "error_code": code, "base_offset": first, "log_append_time": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": message}
