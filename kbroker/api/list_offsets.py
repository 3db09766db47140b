"""ListOffsets: earliest (-2), latest (-1, the LSO for read_committed), max timestamp (-3) and
real timestamps through the time index — the answers Spark plans every read from. For a topic with
tiered storage the archive takes part: earliest is the archive's start, earliest-local (-4) the
local log start, latest-tiered (-5) the last archived offset, and timestamps are looked up in the
archive first (its offsets come first).

v0 (Kafka 3.9 serves it, Kafka 4 removed it) is the old offset API: up to `max_num_offsets`
offsets, newest first, of segment starts whose files were last modified at or before the
timestamp (-1: the log end, -2: the log start), capped at the high watermark for consumers
(`legacy_offsets`, Kafka's UnifiedLog.legacyFetchOffsetsBefore)."""

from __future__ import annotations

import time

from kbroker.api.access import Op, require_topic
from kbroker.api.context import RequestContext
from kbroker.api.views import source_of
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def lookup(partition, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) for one partition as Kafka answers it; -1/-1 when nothing qualifies.

    A leader just elected whose high watermark has not yet reached the start of its epoch (its
    followers have not fetched from it yet) may hold a high watermark below the one its
    predecessor answered. Kafka then refuses what it cannot answer for certain — latest, and a
    lookup that finds nothing below the limit — with OFFSET_NOT_AVAILABLE, which clients retry:
    a latest offset that went back would make Spark report data loss and re-read records."""
    log = partition.log
    limit = partition.fetchable_offset(read_committed)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    if timestamp == LATEST_TIERED:
        return -1, -1  # no tiered storage: Kafka answers "no offset"
    if timestamp == LATEST:
        found = None
    elif timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:
        found = log.fetch_offset_by_timestamp(timestamp)
    if found is not None and found[0] < limit:
        offset, ts = found
        return ts, offset
    if partition.high_watermark < partition.leader_epoch_start_offset:
        raise KafkaError(f"{partition.topic_partition}: the high watermark {partition.high_watermark} is behind "
                         f"the start of leader epoch {partition.leader_epoch} at {partition.leader_epoch_start_offset}",
                         code=ErrorCode.offset_not_available)
    return (-1, limit) if timestamp == LATEST else (-1, -1)


def answered_epoch(partition, timestamp: int, offset: int) -> int:
    """The leader epoch an answer carries, as Kafka's (UnifiedLog.fetchOffsetByTimestamp): the
    partition's current epoch for latest; for every other lookup the epoch the answered offset was
    written in (Kafka: the earliest cached epoch for earliest, the batch's partition leader epoch for
    a timestamp or the max timestamp); -1 when no offset is answered, or its epoch is not known."""
    if offset < 0:
        return -1
    if timestamp == LATEST:
        return partition.leader_epoch
    epoch = partition.log.leader_epoch_cache.epoch_for_offset(offset)
    return -1 if epoch is None else epoch


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


def legacy_offsets(partition, timestamp: int, max_num_offsets: int, from_consumer: bool,
                   now_ms: int | None = None) -> list[int]:
    """ListOffsets v0's answer for one partition (Kafka's Partition.legacyFetchOffsetsForTimestamp)."""
    log = partition.log
    segments = list(log.segments)
    points = [(max(s.base_offset, log.log_start_offset), s.last_modified_ms) for s in segments]
    if segments[-1].size > 0:
        points.append((log.log_end_offset, int(time.time() * 1000) if now_ms is None else now_ms))
    if timestamp == LATEST:
        start = len(points) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    offsets = sorted((points[start - j][0] for j in range(count)), reverse=True)
    if from_consumer:
        hw = partition.high_watermark
        if any(o > hw for o in offsets):
            kept = offsets
            while kept and kept[0] > hw:
                kept = kept[1:]
            offsets = [hw] + kept
    return offsets


def _handle_v0(ctx: RequestContext, request) -> dict:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "error_code": ErrorCode.none, "old_style_offsets": []}
            try:
                require_topic(ctx, Op.DESCRIBE, topic.name)
                if p.timestamp < EARLIEST:  # v0 knows only latest (-1) and earliest (-2)
                    raise KafkaError(f"timestamp {p.timestamp} needs a newer ListOffsets version",
                                     code=ErrorCode.unsupported_version)
                partition = ctx.broker.replica_manager.get_leader_partition(
                    TopicPartition(source_of(ctx, topic.name), p.partition_index))
                entry["old_style_offsets"] = legacy_offsets(partition, p.timestamp, p.max_num_offsets,
                                                            from_consumer=request.replica_id == -1)
            except KafkaError as exc:
                entry["error_code"] = error_code_of(exc)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


async def handle(ctx: RequestContext, request) -> dict:
    if ctx.version == 0:
        return _handle_v0(ctx, request)
    read_committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "leader_epoch": -1}
            try:
                require_topic(ctx, Op.DESCRIBE, topic.name)  # a view's own name: its readers need no more
                partition = ctx.broker.replica_manager.get_leader_partition(TopicPartition(source_of(ctx, topic.name),
                                                                                       p.partition_index))
                remote = ctx.broker.replica_manager.remote_storage
                if remote is not None and partition.log.config.remote_storage_enable:
                    ts, offset = await lookup_tiered(remote, partition, p.timestamp, read_committed)
                else:
                    ts, offset = lookup(partition, p.timestamp, read_committed)
                entry.update(error_code=ErrorCode.none, timestamp=ts, offset=offset,
                             leader_epoch=answered_epoch(partition, p.timestamp, offset))
            except KafkaError as exc:
                entry.update(error_code=error_code_of(exc), timestamp=-1, offset=-1)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
