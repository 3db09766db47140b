"""ListOffsets: earliest (-2), latest (-1, the LSO for read_committed), max timestamp (-3) and
real timestamps through the time index — the answers Spark plans every read from."""

from __future__ import annotations

from kbroker.api.context import RequestContext
from kbroker.api.views import source_of
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def lookup(partition, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) for one partition as Kafka answers it; -1/-1 when nothing qualifies."""
    log = partition.log
    limit = partition.fetchable_offset(read_committed)
    if timestamp == LATEST:
        return -1, limit
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    if timestamp == LATEST_TIERED:
        return -1, -1  # no tiered storage: Kafka answers "no offset"
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:
        found = log.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return -1, -1
    offset, ts = found
    if offset >= limit:
        return -1, -1
    return ts, offset


async def handle(ctx: RequestContext, request) -> dict:
    read_committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "leader_epoch": -1}
            try:
                partition = ctx.broker.replica_manager.get_leader_partition(TopicPartition(source_of(ctx, topic.name),
                                                                                       p.partition_index))
                ts, offset = lookup(partition, p.timestamp, read_committed)
                entry.update(error_code=ErrorCode.none, timestamp=ts, offset=offset,
                             leader_epoch=partition.leader_epoch)
            except KafkaError as exc:
                entry.update(error_code=error_code_of(exc), timestamp=-1, offset=-1)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
