"""Sending a delivery to its target partition: one batch of the delivery service's idempotent
producer (the id, epoch and base sequence its intent recorded), acks=all.

The target led here is appended directly (the append's producer state drops a batch sent twice);
another leader gets a Produce request over a channel the server layer injects (`request`), as the
transaction markers do; its client id is `__admin_client`, which the receiving broker knows not to
delay again. A delivered record keeps key, value, headers (the delay headers replaced by
`scheduled.at`) and the producer's CreateTime.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kbroker.delayed.format import DelayedRecord, Target, delivered_headers
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import Record, build_batch, validate_batches

logger = logging.getLogger(__name__)

PRODUCE, PRODUCE_VERSION = 0, 9
Request = Callable[[int, int, int, dict], Awaitable[Any]]  # (broker id, api key, version, body) -> response
LeaderOf = Callable[[tuple[str, int]], "int | None"]  # None: the topic is gone; -1: no leader now


def delivery_batch(records: list[DelayedRecord], producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    return build_batch([Record(i, r.timestamp, r.key, r.value, list(delivered_headers(r.headers, r.due_ms)))
                        for i, r in enumerate(records)],
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)


class TargetWriter:
    def __init__(self, node_id: int, replica_manager, leader_of: LeaderOf, *, cluster: bool, timeout_s: float) -> None:
        self.node_id = node_id
        self.replicas = replica_manager
        self.leader_of = leader_of
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.request: Request | None = None  # set in a cluster

    async def send(self, target: Target, batch: bytes) -> ErrorCode:
        leader = self.leader_of(target)
        if leader is None:
            return ErrorCode.unknown_topic_or_partition
        if leader == self.node_id:
            return await self._append_here(target, batch)
        if leader < 0 or self.request is None:
            return ErrorCode.not_leader_or_follower
        try:
            response = await self.request(leader, PRODUCE, PRODUCE_VERSION, {
                "transactional_id": None, "acks": -1, "timeout": int(self.timeout_s * 1000),
                "topic_data": [{"name": target[0], "partition_data": [{"index": target[1], "records": batch}]}]})
        except Exception as exc:  # noqa: BLE001 - unreachable, moving: the delivery is retried
            logger.info("delivery to %s-%d at broker %d failed: %s", target[0], target[1], leader, exc)
            return ErrorCode.not_leader_or_follower
        for topic in response.responses:
            for p in topic.partition_responses:
                if topic.name == target[0] and p.index == target[1]:
                    return ErrorCode(p.error_code)
        return ErrorCode.unknown_server_error

    async def _append_here(self, target: Target, batch: bytes) -> ErrorCode:
        try:
            partition = self.replicas.get_leader_partition(TopicPartition(*target))
            buf = bytearray(batch)
            info = partition.append_records_to_leader(buf, validate_batches(buf), -1)
            await partition.maybe_flush()
        except KafkaError as exc:
            return error_code_of(exc)
        if not self.cluster:
            return ErrorCode.none
        return await self.replicas.wait_for_replication(partition, info.last_offset + 1, self.timeout_s)
