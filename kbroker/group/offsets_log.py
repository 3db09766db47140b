"""The coordinator's records in `__consumer_offsets`, appended and replayed through the replica layer.

Appends go to the partition's leader with acks=all semantics, so once the cluster replicates,
a commit is acknowledged only when the ISR has it — as for any produce. A transactional offset
commit is its producer's transactional batch, appended as a coordinator's (epoch checked, no
sequence), and read back with its batch: the loader needs the producer id and the markers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kbroker.group.offsets_format import build_offsets_batch
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.internal_topic import read_internal_batches
from kbroker.wire.internal_records import InternalBatch
from kbroker.wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, validate_batches

OFFSETS_TOPIC = "__consumer_offsets"


class PartitionOffsetsLog:
    def __init__(self, replica_manager, now_ms: Callable[[], int]) -> None:
        self.replicas = replica_manager
        self.now_ms = now_ms

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]], *,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> int:
        """Append one batch; returns its base offset (orders commits, Kafka's appendedBatchOffset).
        InvalidProducerEpochError when a transactional batch's epoch is older than the producer's."""
        leader = self.replicas.get_leader_partition(TopicPartition(OFFSETS_TOPIC, partition))
        buf = bytearray(build_offsets_batch(entries, self.now_ms(), producer_id=producer_id,
                                            producer_epoch=producer_epoch))
        info = leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1,
                                               from_client=False)
        return info.first_offset

    def read_batches(self, partition: int) -> Iterator[InternalBatch]:
        return read_internal_batches(self.replicas, TopicPartition(OFFSETS_TOPIC, partition))

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """The `(key, value)` of every data record, markers and transactions left out."""
        for batch in self.read_batches(partition):
            for _offset, key, value in batch.records:
                yield key, value
