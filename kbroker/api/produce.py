"""Produce: validate record batches (header + CRC-32C only), append through the replica layer.

acks=0 gets no response at all; per-partition failures are answered in that partition's entry.
acks=all answers a partition once every ISR member has its batch (the high watermark passed it);
all partitions of a request are appended first, then waited for together; the wait is Deferred,
so the connection appends the client's next requests meanwhile (answers keep request order).
"""

from __future__ import annotations

import logging

import trio

from kbroker.api.access import Op, cluster_allowed, require_topic, require_transactional_id
from kbroker.api.context import Deferred, RequestContext
from kbroker.api.leaders import add_current_leaders
from kbroker.api.produce_delayed import append_to_delay_log, append_with_delays
from kbroker.api.produce_retry import append_to_retry_tier
from kbroker.api.views import refuse_produce
from kbroker.delayed.format import ADMIN_CLIENT_ID, DELAYED_TOPIC
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
from kbroker.wire.protocol import to_ms
from kbroker.wire.records import validate_batches

logger = logging.getLogger(__name__)


def _error(index: int, exc: KafkaError) -> dict:
    """A partition's failure; a batch rejected for some records names them (KIP-467, v8+)."""
    record_errors = [{"batch_index": i, "batch_index_error_message": message}
                     for i, message in getattr(exc, "record_errors", ())]
    return {"index": index, "error_code": error_code_of(exc), "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "record_errors": record_errors, "error_message": str(exc)}


async def produce_partition(ctx: RequestContext, topic: str, index: int, records, acks: int,
                            waits: list | None = None, denied: KafkaError | None = None) -> dict:
    rm = ctx.broker.replica_manager
    try:
        if denied is not None:  # the request's transactional id is not the principal's to write
            raise denied
        if acks not in (-1, 0, 1):
            raise InvalidRequiredAcksError(f"Invalid required acks {acks}")
        if topic in INTERNAL_TOPICS:
            # the delay log takes a broker's forwarded schedules (CLUSTER_ACTION) and `kbroker delayed
            # cancel`'s tombstones (ALTER on the cluster); anyone else naming itself after them is
            # refused like any client writing an internal topic
            if (topic == DELAYED_TOPIC and ctx.header.client_id == ADMIN_CLIENT_ID
                    and (cluster_allowed(ctx, Op.CLUSTER_ACTION) or cluster_allowed(ctx, Op.ALTER))):
                return await append_to_delay_log(ctx, index, records)
            require_topic(ctx, Op.WRITE, topic)
            raise InvalidTopicError(f"Cannot append to internal topic {topic}")
        require_topic(ctx, Op.WRITE, topic)
        refuse_produce(ctx, topic)
        partition = rm.get_leader_partition(TopicPartition(topic, index))
        if ctx.version < 3 and legacy.is_legacy_message_set(records):
            records = legacy.up_convert_message_set(bytes(records))
        # a writable view into the request frame is patched and written as it is: no copy
        buf = records if isinstance(records, memoryview) and not records.readonly else bytearray(records or b"")
        batches = validate_batches(buf)
        if len(batches) != 1:  # Kafka's rule since Produce v3: one batch per partition
            raise InvalidRecordError("Produce requests must carry exactly one record batch per partition")
        info = None
        if ctx.header.client_id != ADMIN_CLIENT_ID:  # not a delivery
            info = await append_to_retry_tier(ctx, partition, buf, batches, acks)
            if info is None and ctx.broker.delayed.enabled:
                info = await append_with_delays(ctx, partition, buf, batches, acks)
        if info is None:
            info = partition.append_records_to_leader(buf, batches, acks)
        await partition.maybe_flush()
    except KafkaError as exc:
        return _error(index, exc)
    stats = ctx.broker.stats
    # BytesIn/MessagesIn count what clients produce: not an idempotent retry's duplicate, nor the
    # broker's own delivery of a delayed or retried record (a Produce from the delay log's leader
    # in a cluster; it was counted when produced)
    if stats is not None and not getattr(info, "duplicate", False) and ctx.header.client_id != ADMIN_CLIENT_ID:
        stats.record_produce(topic, len(buf), batches[0][1].records_count)
    if waits is not None:  # a duplicate waits too: the original batch may not be replicated yet
        waits.append((partition, info.last_offset + 1, index))
    return {"index": index, "error_code": ErrorCode.none, "base_offset": info.first_offset,
            "log_append_time": info.log_append_time_ms, "log_start_offset": info.log_start_offset,
            "record_errors": [], "error_message": None}


async def handle(ctx: RequestContext, request) -> dict | None:
    acks = request.acks
    responses = []
    waits: list | None = [] if acks == -1 and ctx.broker.cluster else None
    denied = None
    transactional_id = getattr(request, "transactional_id", None)
    if transactional_id is not None:
        try:
            require_transactional_id(ctx, Op.WRITE, transactional_id)
        except KafkaError as exc:
            denied = exc
    for topic in request.topic_data:
        partitions = [await produce_partition(ctx, topic.name, p.index, p.records, acks, waits, denied)
                      for p in topic.partition_data]
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    data = {"responses": responses, "throttle_time": 0}
    if ctx.broker.cluster and ctx.version >= 10:
        add_current_leaders(ctx, data, ((t["name"], p["index"], p) for t in data["responses"]
                                        for p in t["partition_responses"]))
    if not waits:
        return data

    deadline = trio.current_time() + max(to_ms(request.timeout), 0) / 1000

    async def replicated() -> dict:
        await _wait_for_isr(ctx, deadline, responses, waits)
        return data
    return Deferred(replicated)


async def _wait_for_isr(ctx: RequestContext, deadline: float, responses: list[dict], waits: list) -> None:
    """acks=all in a cluster: each partition's answer waits until its ISR has the batch (or the
    request's timeout, counted from its arrival, runs out)."""
    rm = ctx.broker.replica_manager
    entries = {(t["name"], p["index"]): p for t in responses for p in t["partition_responses"]}
    for partition, required, index in waits:
        code = await rm.wait_for_replication(partition, required, max(deadline - trio.current_time(), 0))
        if code != ErrorCode.none:
            entry = entries[(partition.topic_partition.topic, index)]
            entry.update(error_code=code, base_offset=-1, log_append_time=-1, log_start_offset=-1,
                         error_message=f"{code.name} waiting for the in-sync replicas")
