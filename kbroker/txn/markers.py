"""Writing a transaction's COMMIT or ABORT markers to its partitions (Kafka's
TransactionMarkerChannelManager, one round at a time).

The partitions are grouped by their current leader: the ones led here are appended directly
(`write_local`, the same code WriteTxnMarkers runs), each other leader gets one WriteTxnMarkers
request (`request`, injected by the server layer, which owns the sockets). The answer is a code
per partition; the coordinator retries the ones that failed until each is written or its topic is
gone. A partition whose leader is unknown answers NOT_LEADER_OR_FOLLOWER, to be retried.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio

from kbroker.errors import ErrorCode
from kbroker.txn.coordinator_rules import TxnMarkers
from kbroker.txn.metadata import TopicPartition

logger = logging.getLogger(__name__)

WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION = 27, 1

LocalWrite = Callable[[TxnMarkers, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]
Request = Callable[[int, int, int, dict], Awaitable[Any]]  # (broker id, api key, version, body) -> response
LeaderOf = Callable[[TopicPartition], "int | None"]  # None: the topic no longer exists


def write_txn_markers_body(markers: TxnMarkers, partitions: Iterable[TopicPartition]) -> dict:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return {"markers": [{
        "producer_id": markers.producer_id, "producer_epoch": markers.producer_epoch,
        "transaction_result": markers.commit, "coordinator_epoch": markers.coordinator_epoch,
        "topics": [{"name": t, "partition_indexes": sorted(ps)} for t, ps in sorted(by_topic.items())],
    }]}


def parse_write_txn_markers_response(response: Any) -> dict[TopicPartition, ErrorCode]:
    return {(t.name, p.partition_index): ErrorCode(p.error_code)
            for marker in response.markers for t in marker.topics for p in t.partitions}


class TxnMarkerWriter:
    def __init__(self, node_id: int, leader_of: LeaderOf, write_local: LocalWrite) -> None:
        self.node_id = node_id
        self.leader_of = leader_of
        self.write_local = write_local
        self.request: Request | None = None  # set in a cluster

    async def write(self, markers: TxnMarkers, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        results: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            leader = self.leader_of(tp)
            if leader is None:
                results[tp] = ErrorCode.unknown_topic_or_partition
            elif leader < 0 or (leader != self.node_id and self.request is None):
                results[tp] = ErrorCode.not_leader_or_follower
            else:
                by_leader.setdefault(leader, []).append(tp)

        async def one(leader: int, tps: list[TopicPartition]) -> None:
            results.update(await self._write_to(leader, markers, tps))

        async with trio.open_nursery() as nursery:
            for leader, tps in by_leader.items():
                nursery.start_soon(one, leader, tps)
        return results

    async def _write_to(self, leader: int, markers: TxnMarkers, tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        if leader == self.node_id:
            return await self.write_local(markers, tps)
        assert self.request is not None
        try:
            response = await self.request(leader, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION,
                                          write_txn_markers_body(markers, tps))
        except Exception as exc:  # the leader is unreachable (dead, or moving): retried
            logger.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return dict.fromkeys(tps, ErrorCode.not_leader_or_follower)
        answered = parse_write_txn_markers_response(response)
        return {tp: answered.get(tp, ErrorCode.unknown_server_error) for tp in tps}
