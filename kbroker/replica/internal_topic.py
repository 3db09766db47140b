"""Reading back a coordinator's internal topic partition (`__consumer_offsets`,
`__transaction_state`) that this broker leads: every batch from the log start to the log end (not
only to the last stable offset: a loader needs open transactions too, as Kafka's loaders read to
the log end), a chunk at a time."""

from __future__ import annotations

from collections.abc import Iterator

from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.internal_records import InternalBatch, iter_internal_batches
from kbroker.wire.records import iter_batch_headers

READ_CHUNK = 1 << 20


def read_internal_batches(replica_manager, tp: TopicPartition) -> Iterator[InternalBatch]:
    log = replica_manager.get_leader_partition(tp).log
    for _next_offset, batches in read_log_batches(log, log.log_start_offset, log.log_end_offset):
        yield from batches


def read_log_batches(log, offset: int, end: int) -> Iterator[tuple[int, list[InternalBatch]]]:
    """The batches of `log` from `offset` to `end`, a chunk at a time: (the offset after the chunk,
    its batches). A chunk may begin inside a batch it reads whole (its records before `offset` are
    the caller's to skip)."""
    while offset < end:
        data = log.read(offset, READ_CHUNK, max_offset=end).read_bytes()
        next_offset = offset
        for _pos, header in iter_batch_headers(data):
            next_offset = header.next_offset
        if next_offset <= offset:
            return  # nothing readable past here (a torn tail is cut at recovery)
        yield next_offset, list(iter_internal_batches(data))
        offset = next_offset
