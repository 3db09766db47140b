"""DeleteRecords: move a partition's log start offset forward (offset -1 = the high watermark)."""

from __future__ import annotations

from kbroker.api.access import Op, require_topic
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, KafkaError, OffsetOutOfRangeError, error_code_of
from kbroker.log.topic_partition import TopicPartition


async def handle(ctx: RequestContext, request) -> dict:
    rm = ctx.broker.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": ErrorCode.none}
            try:
                require_topic(ctx, Op.DELETE, topic.name)
                partition = rm.get_leader_partition(TopicPartition(topic.name, p.partition_index))
                offset = partition.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > partition.high_watermark:
                    raise OffsetOutOfRangeError(f"Cannot delete records up to {offset}: beyond the high watermark")
                partition.log.maybe_increment_log_start_offset(offset)
                entry["low_watermark"] = partition.log.log_start_offset
                if rm.remote_storage is not None and partition.log.config.remote_storage_enable:
                    await rm.remote_storage.advance_log_start_offset(partition, offset)  # the archive too
                    entry["low_watermark"] = rm.remote_storage.log_start_offset(partition)
            except KafkaError as exc:
                entry["error_code"] = error_code_of(exc)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
