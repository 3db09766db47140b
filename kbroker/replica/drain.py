"""Retired partitions' drains (kbroker's own partition decrease; docs/cluster.md, "Decreasing
partitions"): the leader of each retired partition copies what is unread there into the
partitions that remain, and keeps copying whatever still arrives.

A decrease hides partitions N.. from Metadata, but they stay hosted, replicated and writable:
producers that never learn of a lower count (librdkafka only ever raises a topic's partition
count) keep writing to them, and nothing a producer was acknowledged may be lost. So, for each
retired partition it leads, this broker runs one task that reads its own log up to the high
watermark, sends every record (key, value, headers, timestamp) to the partition the producers'
default partitioner picks among the N (the topic's `retired.records.partitioner`) with acks=all,
and only then commits its position as the consumer group `kbroker-retire-<topic>`. A new leader
resumes from that commit: a chunk may be copied twice, never skipped.

Where the copy starts, the first time: the lowest offset any consumer group with commits on the
topic has committed on that partition (its log start where such a group has none there), or the
log start when no group has commits on the topic — what some group has not read yet. That start
is committed at once, so every later leader agrees on it.

Once drained, emptied by retention and retired for at least retention.ms, the leader marks the
partition removable in the topic znode; the controller removes a decrease's retired partitions
when all of them are.

Requests go to other brokers over channels injected by server/ (`open_channel`), like the
followers' fetches.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import trio

from kbroker.errors import ErrorCode, KafkaError
from kbroker.log.topic_partition import TopicPartition
from kbroker.partitioners import target_partition
from kbroker.wire.records import build_batch, decode_records, iter_batch_headers

logger = logging.getLogger(__name__)

PRODUCE, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, LIST_GROUPS = 0, 8, 9, 10, 16
CHUNK_BYTES = 1024 * 1024
SCAN_INTERVAL_S = 1.0
RETRY_S = 0.5
STALL_REPORT_S = 10.0  # a drain behind its log end that long says why, for the operator
DRAIN_GROUP_PREFIX = "kbroker-retire-"


def drain_group(topic: str) -> str:
    return f"{DRAIN_GROUP_PREFIX}{topic}"


class DrainError(Exception):
    """A request of the drain failed; it is tried again."""


class PartitionDrains:
    """One task per retired partition this broker leads."""

    def __init__(self, node_id: int, replica_manager, metadata, open_channel: Callable[[str, int], Any],
                 partitioner_of: Callable[[str], str]) -> None:
        self.node_id = node_id
        self.rm = replica_manager
        self.metadata = metadata
        self.open_channel = open_channel
        self.partitioner_of = partitioner_of
        self._running: set[TopicPartition] = set()
        self._channels: dict[tuple[str, int], Any] = {}

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                for tp in self._to_drain():
                    self._running.add(tp)
                    nursery.start_soon(self._drain, tp)
                await trio.sleep(SCAN_INTERVAL_S)

    def _to_drain(self) -> list[TopicPartition]:
        if not self.metadata.has_retired_partitions():
            return []
        return [tp for tp in list(self.rm.partitions) if tp not in self._running and self._still_mine(tp)]

    def _still_mine(self, tp: TopicPartition) -> bool:
        if not self.metadata.is_retired(tp.topic, tp.partition):  # first: it is rarely so
            return False
        partition = self.rm.partitions.get(tp)
        return partition is not None and partition.is_leader

    async def _drain(self, tp: TopicPartition) -> None:
        since = stalled_since = trio.current_time()
        try:
            position = None
            while self._still_mine(tp):
                try:
                    if position is None:
                        position = await self._start(tp)
                        logger.info("draining retired partition %s from offset %d", tp, position)
                    before = position
                    position = await self._copy_once(tp, position)
                    partition = self.rm.partitions.get(tp)
                    if partition is None or position != before or position >= partition.log_end_offset:
                        stalled_since = trio.current_time()
                    elif trio.current_time() - stalled_since > STALL_REPORT_S:
                        logger.warning("drain of %s has not moved for %.0f s: at %d, high watermark %d, log end %d",
                                       tp, trio.current_time() - stalled_since, position, partition.high_watermark,
                                       partition.log_end_offset)
                        stalled_since = trio.current_time()
                    if self._removable(tp, position, since):
                        await self.metadata.mark_removable(tp.topic, tp.partition)
                        since = float("inf")  # said once; the controller takes it from here
                except (DrainError, KafkaError) as exc:
                    logger.info("drain of %s: %s; trying again", tp, exc)
                    await trio.sleep(RETRY_S)
                except Exception:  # noqa: BLE001 - a bug here must not take the broker down
                    logger.exception("drain of %s failed; trying again", tp)
                    await trio.sleep(5 * RETRY_S)
        finally:
            self._running.discard(tp)

    def _removable(self, tp: TopicPartition, position: int, since: float) -> bool:
        """Drained, emptied by retention, and retired for at least retention.ms: the partition
        may go (a producer that still writes there after that long is not waited for)."""
        partition = self.rm.partitions[tp]
        retention_ms = partition.log.config.retention_ms
        return (retention_ms >= 0 and position >= partition.log_end_offset
                and partition.log_start_offset >= partition.log_end_offset
                and (trio.current_time() - since) * 1000 >= retention_ms)

    async def _copy_once(self, tp: TopicPartition, position: int) -> int:
        """Copy one chunk past `position` (or wait a little for one); the new position."""
        partition = self.rm.partitions[tp]
        position = max(position, partition.log_start_offset)
        end = partition.high_watermark
        if position >= end:
            await self.rm.wait_for_data([tp], RETRY_S)
            return position
        buf = partition.log.read(position, CHUNK_BYTES, max_offset=end).read_bytes()
        records, next_position = [], position
        for pos, header in iter_batch_headers(buf):
            next_position = max(next_position, header.last_offset + 1)
            if not header.is_control:
                records.extend(r for r in decode_records(buf, pos, header) if position <= r.offset < end)
        next_position = min(next_position, end)
        if records:
            count = self.metadata.topic(tp.topic).num_partitions
            partitioner = self.partitioner_of(tp.topic)
            routed: dict[int, list] = {}
            for r in records:
                routed.setdefault(target_partition(r.key, tp.partition, count, partitioner), []).append(r)
            await self._produce(tp.topic, routed)
        if next_position > position:
            await self._commit(tp, next_position)
        return next_position

    # -- requests to other brokers --------------------------------------------------------------
    def _channel_to(self, broker_id: int):
        broker = self.metadata.broker(broker_id)
        if broker is None:
            raise DrainError(f"broker {broker_id} is not known")
        key = (broker.host, broker.port)
        if key not in self._channels:
            self._channels[key] = self.open_channel(broker.host, broker.port)
        return self._channels[key]

    async def _call(self, broker_id: int, api_key: int, version: int, body: dict) -> Any:
        try:
            return await self._channel_to(broker_id).request(api_key, version, body)
        except Exception as exc:  # noqa: BLE001 - any channel failure: the drain tries again
            raise DrainError(f"request to broker {broker_id} failed: {exc}") from exc

    async def _produce(self, topic: str, routed: dict[int, list]) -> None:
        """acks=all, one batch per target partition; retried until every one is written."""
        pending = dict(routed)
        while pending:
            by_leader: dict[int, list[int]] = {}
            for p in pending:
                state = self.metadata.partition_state(topic, p)
                by_leader.setdefault(state.leader if state is not None else -1, []).append(p)
            for leader, ps in by_leader.items():
                if leader < 0:
                    logger.info("drain: no leader known for %s partitions %s; trying again", topic, ps)
                    continue
                data = [{"index": p, "records": build_batch(
                    [_Copy(i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(pending[p])])}
                    for p in ps]
                try:
                    body = await self._call(leader, PRODUCE, 9, {
                        "transactional_id": None, "acks": -1, "timeout": 30000,
                        "topic_data": [{"name": topic, "partition_data": data}]})
                except DrainError as exc:
                    logger.info("drain: %s", exc)
                    continue
                for resp in body.responses[0].partition_responses:
                    if resp.error_code == ErrorCode.none:
                        pending.pop(int(resp.index), None)
                    else:
                        logger.info("drain: writing to %s-%d: error %s; trying again", topic, resp.index,
                                    ErrorCode(resp.error_code).name)
            if pending:
                await trio.sleep(RETRY_S)

    async def _coordinator(self, group: str) -> int:
        for broker in self.metadata.brokers():
            try:
                body = await self._call(broker.node_id, FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
            except DrainError:
                continue
            if body.error_code == ErrorCode.none:
                return int(body.node_id)
        raise DrainError(f"no coordinator for group {group}")

    async def _committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
        coordinator = await self._coordinator(group)
        body = await self._call(coordinator, OFFSET_FETCH, 7, {
            "group_id": group, "require_stable": False, "topics": [{"name": topic, "partition_indexes": partitions}]})
        if body.error_code != ErrorCode.none:
            raise DrainError(f"OffsetFetch of {group}: error {body.error_code}")
        return {int(p.partition_index): int(p.committed_offset)
                for t in body.topics for p in t.partitions if p.error_code == ErrorCode.none and p.committed_offset >= 0}

    async def _commit(self, tp: TopicPartition, offset: int) -> None:
        group = drain_group(tp.topic)
        coordinator = await self._coordinator(group)
        body = await self._call(coordinator, OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": tp.topic, "partitions": [{"partition_index": tp.partition, "committed_offset": offset,
                                                          "committed_leader_epoch": -1,
                                                          "committed_metadata": None}]}]})
        code = body.topics[0].partitions[0].error_code
        if code != ErrorCode.none:
            raise DrainError(f"OffsetCommit of {group} for {tp}: error {code}")

    async def _start(self, tp: TopicPartition) -> int:
        """The drain's committed position, or (the first time) where the unread tail starts."""
        mine = await self._committed(drain_group(tp.topic), tp.topic, [tp.partition])
        if tp.partition in mine:
            return mine[tp.partition]
        log_start = self.rm.partitions[tp].log_start_offset
        groups: set[str] = set()
        for broker in self.metadata.brokers():
            body = await self._call(broker.node_id, LIST_GROUPS, 4, {"states_filter": []})
            groups.update(g.group_id for g in body.groups if not g.group_id.startswith(DRAIN_GROUP_PREFIX))
        info = self.metadata.topic(tp.topic)
        every = sorted(set(range(info.num_partitions if info else 0)) | self.metadata.retired_partitions(tp.topic))
        starts = []
        for group in sorted(groups):
            committed = await self._committed(group, tp.topic, every)
            if committed:
                starts.append(committed.get(tp.partition, log_start))
        start = max(log_start, min(starts)) if starts else log_start
        await self._commit(tp, start)
        return start


class _Copy:
    __slots__ = ("offset", "timestamp", "key", "value", "headers")

    def __init__(self, offset: int, timestamp: int, key, value, headers) -> None:
        self.offset, self.timestamp, self.key, self.value, self.headers = offset, timestamp, key, value, headers
