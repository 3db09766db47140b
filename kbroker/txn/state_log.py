"""The transaction coordinator's records in `__transaction_state`, appended and replayed through
the replica layer.

An append goes to the partition's leader and, in a cluster, is acknowledged once the ISR has it
(acks=all, bounded by `transaction.state.log.min.isr` through the topic's min.insync.replicas):
a transition the coordinator acts on is never one a failover could lose. The coordinator epoch
of a partition is its leader epoch, as Kafka's LeaderAndIsr hands it to the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.internal_topic import read_internal_batches
from kbroker.txn.log_format import TRANSACTION_STATE_TOPIC, build_txn_log_batch
from kbroker.wire.records import validate_batches


class TransactionStateLog:
    def __init__(self, replica_manager, now_ms: Callable[[], int], *, cluster: bool, timeout_s: float) -> None:
        self.replicas = replica_manager
        self.now_ms = now_ms
        self.cluster = cluster
        self.timeout_s = timeout_s

    def _leader(self, partition: int):
        return self.replicas.get_leader_partition(TopicPartition(TRANSACTION_STATE_TOPIC, partition))

    def leader_epoch(self, partition: int) -> int | None:
        """The partition's leader epoch while this broker leads it, else None."""
        try:
            return self._leader(partition).leader_epoch
        except KafkaError:
            return None

    async def append(self, partition: int, key: bytes, value: bytes | None) -> ErrorCode:
        """Append one record; the error code of the append or of its replication."""
        try:
            leader = self._leader(partition)
            buf = bytearray(build_txn_log_batch([(key, value)], self.now_ms()))
            info = leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1,
                                                   from_client=False)
        except KafkaError as exc:
            return error_code_of(exc)
        if not self.cluster:
            return ErrorCode.none
        return await self.replicas.wait_for_replication(leader, info.last_offset + 1, self.timeout_s)

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Every (key, value) record of the partition, oldest first (the loader's replay)."""
        for batch in read_internal_batches(self.replicas, TopicPartition(TRANSACTION_STATE_TOPIC, partition)):
            for _offset, key, value in batch.records:
                yield key, value
