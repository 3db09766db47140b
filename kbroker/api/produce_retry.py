"""Produce's retry-tier branch (kbroker/retry/): every record produced to a topic with
`retry.delay.ms` is scheduled through the delayed-delivery machinery — back to the main topic (or
into the tier) after the tier's delay, or to the dead-letter topic at once once it has had its
`max.delivery.attempts` — and the tier keeps what a delayed batch leaves its target: an empty
batch carrying an idempotent producer's sequence, or nothing. Duplicates, sequence checks and the
scheduling are produce_delayed's; a transactional batch is refused like a delayed one.
"""

from __future__ import annotations

import time

from kbroker.api.produce_delayed import schedule_and_append
from kbroker.delayed.split import split_records
from kbroker.errors import InvalidRecordError
from kbroker.retry.tiers import RetryRecordError, plan_record
from kbroker.retry.topics import route_for


async def append_to_retry_tier(ctx, partition, buf, batches, acks: int):
    """The append's answer; None when the partition's topic is not a retry tier (the caller goes on as usual)."""
    tp = partition.topic_partition
    try:
        route = route_for(ctx.broker.metadata, tp.topic, tp.partition)
        if route is None:
            return None
        pos, header = batches[0]
        if header.is_transactional:
            raise InvalidRecordError(f"{tp.topic} is a retry tier: transactional producers cannot write to it "
                                     "(its records are scheduled outside the transaction)")
        now_ms = time.time_ns() // 1_000_000

        def plan(rec):
            planned = plan_record(route, rec.headers, now_ms)
            return planned.target, planned.due_ms, planned.headers
        split = split_records(buf, pos, header, (tp.topic, tp.partition), plan)
    except RetryRecordError as exc:
        raise InvalidRecordError(str(exc)) from None
    info = None if split is None else await schedule_and_append(ctx, partition, header, split, acks)
    if info is None:  # a duplicate the log answers with the original offsets (or a batch of no records)
        info = partition.append_records_to_leader(buf, batches, acks)
    return info
