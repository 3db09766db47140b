"""Produce: validate record batches (header + CRC-32C only), append through the replica layer.

acks=0 gets no response at all; per-partition failures are answered in that partition's entry.
"""

from __future__ import annotations

import logging

from kbroker.api.context import RequestContext
from kbroker.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    error_code_of,
)
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.store import INTERNAL_TOPICS
from kbroker.wire import legacy
from kbroker.wire.records import validate_batches

logger = logging.getLogger(__name__)


def _error(index: int, exc: KafkaError) -> dict:
    return {"index": index, "error_code": error_code_of(exc), "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": str(exc)}


async def produce_partition(ctx: RequestContext, topic: str, index: int, records, acks: int) -> dict:
    rm = ctx.broker.replica_manager
    try:
        if acks not in (-1, 0, 1):
            raise InvalidRequiredAcksError(f"Invalid required acks {acks}")
        if topic in INTERNAL_TOPICS:
            raise InvalidTopicError(f"Cannot append to internal topic {topic}")
        partition = rm.get_leader_partition(TopicPartition(topic, index))
        if ctx.version < 3 and legacy.is_legacy_message_set(records):
            records = legacy.up_convert_message_set(bytes(records))
        # a writable view into the request frame is patched and written as it is: no copy
        buf = records if isinstance(records, memoryview) and not records.readonly else bytearray(records or b"")
        batches = validate_batches(buf)
        if len(batches) != 1:  # Kafka's rule since Produce v3: one batch per partition
            raise InvalidRecordError("Produce requests must carry exactly one record batch per partition")
        info = partition.append_records_to_leader(buf, batches, acks)
        await partition.maybe_flush()
    except KafkaError as exc:
        return _error(index, exc)
    return {"index": index, "error_code": ErrorCode.none, "base_offset": info.first_offset,
            "log_append_time": info.log_append_time_ms, "log_start_offset": info.log_start_offset,
            "record_errors": [], "error_message": None}


async def handle(ctx: RequestContext, request) -> dict | None:
    acks = request.acks
    responses = []
    for topic in request.topic_data:
        partitions = [await produce_partition(ctx, topic.name, p.index, p.records, acks) for p in topic.partition_data]
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time": 0}
