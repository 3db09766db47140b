"""Appending transaction markers to the partitions this broker leads: what WriteTxnMarkers does
(Kafka's KafkaApis.handleWriteTxnMarkersRequest with ReplicaManager.appendRecords), and what the
local transaction coordinator calls directly for partitions led here.

Each marker is one control batch (COMMIT or ABORT, the coordinator epoch inside) appended as a
coordinator's write: the producer epoch is checked (an older one is INVALID_PRODUCER_EPOCH), so is
the coordinator epoch (an older one is TRANSACTION_COORDINATOR_FENCED), sequences are not. All
markers are appended first, then each is acknowledged once the partition's ISR has it (acks=all).
A marker on a `__consumer_offsets` partition then makes the transaction's offsets visible, or drops
them (`on_offsets_marker`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import validate_batches

logger = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

OffsetsMarkerHook = Callable[[int, int, bool], None]  # (offsets partition, producer id, commit)


@dataclass(frozen=True)
class MarkerWrite:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]


async def write_markers(replica_manager, writes: list[MarkerWrite], *, now_ms: int, wait_s: float,
                        wait_for_isr: bool, on_offsets_marker: OffsetsMarkerHook | None = None,
                        ) -> list[dict[tuple[str, int], ErrorCode]]:
    """One result per write: a code per partition."""
    results: list[dict[tuple[str, int], ErrorCode]] = []
    appended: list[tuple[int, tuple[str, int], object, int]] = []  # (write index, tp, Partition, end offset)
    for index, w in enumerate(writes):
        codes: dict[tuple[str, int], ErrorCode] = {}
        marker = EndTransactionMarker(COMMIT if w.commit else ABORT, w.coordinator_epoch)
        for topic, partition_index in w.partitions:
            tp = (topic, partition_index)
            try:
                partition = replica_manager.get_leader_partition(TopicPartition(topic, partition_index))
                buf = bytearray(build_end_txn_marker_batch(marker, producer_id=w.producer_id,
                                                           producer_epoch=w.producer_epoch, timestamp=now_ms))
                info = partition.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1,
                                                          from_client=False)
            except KafkaError as exc:
                codes[tp] = error_code_of(exc)
                continue
            codes[tp] = ErrorCode.none
            appended.append((index, tp, partition, info.last_offset + 1))
        results.append(codes)
    for index, tp, partition, end in appended:
        if wait_for_isr:
            code = await replica_manager.wait_for_replication(partition, end, wait_s)
            if code is not ErrorCode.none:
                results[index][tp] = code
                continue
        w = writes[index]
        if tp[0] == OFFSETS_TOPIC and on_offsets_marker is not None:
            on_offsets_marker(tp[1], w.producer_id, w.commit)
    return results
