"""ListOffsets: earliest (-2), latest (-1, the LSO for read_committed), max timestamp (-3) and
real timestamps through the time index — the answers Spark plans every read from. For a topic with
tiered storage the archive takes part: earliest is the archive's start, earliest-local (-4) the
local log start, latest-tiered (-5) the last archived offset, and timestamps are looked up in the
archive first (its offsets come first)."""

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


async def lookup_tiered(remote, partition, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """`lookup` for a partition whose history is archived (kbroker.tiered.RemoteLogManager)."""
    if timestamp == EARLIEST:
        return -1, await remote.earliest_offset(partition)
    if timestamp == LATEST_TIERED:
        return -1, await remote.highest_offset(partition)
    if timestamp == MAX_TIMESTAMP:
        archived = await remote.max_timestamp_and_offset(partition)
        local = lookup(partition, timestamp, read_committed)
        if archived is not None and archived[1] >= local[0]:  # equal: the archived one comes first
            return archived[1], archived[0]
        return local
    if timestamp >= 0:
        found = await remote.find_offset_by_timestamp(partition, timestamp)
        if found is not None:
            return found[1], found[0]
    return lookup(partition, timestamp, read_committed)


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
                remote = ctx.broker.replica_manager.remote_storage
                if remote is not None and partition.log.config.remote_storage_enable:
                    ts, offset = await lookup_tiered(remote, partition, p.timestamp, read_committed)
                else:
                    ts, offset = lookup(partition, p.timestamp, read_committed)
                entry.update(error_code=ErrorCode.none, timestamp=ts, offset=offset,
                             leader_epoch=partition.leader_epoch)
            except KafkaError as exc:
                entry.update(error_code=error_code_of(exc), timestamp=-1, offset=-1)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
