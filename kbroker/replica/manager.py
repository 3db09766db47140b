"""ReplicaManager: the partitions this broker hosts, appends with acks, fetches with long polling.

It follows the metadata store (topics created, grown, reconfigured, deleted) and owns the waiting
side of Fetch: a fetch that has too few bytes parks on an event that any append to one of its
partitions sets, so a long poll is answered the moment data arrives, with no polling loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable

import trio

from kbroker.config import BrokerConfig, effective_topic_value, log_config_for
from kbroker.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from kbroker.log.log_manager import LogManager
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.store import MetadataStore, TopicInfo
from kbroker.replica.partition import Partition

logger = logging.getLogger(__name__)


@dataclass
class FetchPartitionResult:
    topic_partition: TopicPartition
    error: KafkaError | None = None
    records: list = field(default_factory=list)  # file ranges of whole batches, sent with sendfile
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    @property
    def size(self) -> int:
        return sum(r.size for r in self.records)


class ReplicaManager:
    def __init__(self, node_id: int, config: BrokerConfig, log_manager: LogManager, metadata: MetadataStore) -> None:
        self.node_id = node_id
        self.config = config
        self.log_manager = log_manager
        self.metadata = metadata
        self.partitions: dict[TopicPartition, Partition] = {}
        self._waiters: dict[TopicPartition, set[trio.Event]] = {}
        metadata.add_listener(self._on_topic_change)

    # -- following the metadata --------------------------------------------------------------
    def startup(self) -> None:
        for info in list(self.metadata.topics().values()):
            self._on_topic_change(info.name, info)

    def _on_topic_change(self, name: str, info: TopicInfo | None) -> None:
        if info is None:
            for tp in [tp for tp in self.partitions if tp.topic == name]:
                del self.partitions[tp]
                self.log_manager.delete_log(tp)
                self._wake(tp)
            return
        log_config = log_config_for(self.config, info.configs)
        min_isr = int(effective_topic_value(self.config, info.configs, "min.insync.replicas"))
        for index, replicas in enumerate(info.assignment):
            tp = TopicPartition(name, index)
            partition = self.partitions.get(tp)
            if partition is None:
                if self.node_id not in replicas:
                    continue
                log = self.log_manager.get_or_create_log(tp, log_config)
                partition = self.partitions[tp] = Partition(tp, log, info.topic_id, replicas, self.node_id, self._wake)
                partition.set_log_config(log_config, min_isr)
                # a leader alone in its ISR owns its whole log: the checkpointed HW may lag after a crash
                partition.maybe_increment_high_watermark()
            else:
                partition.set_log_config(log_config, min_isr)

    # -- lookups ------------------------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            info = self.metadata.topic(tp.topic)
            if info is None or not 0 <= tp.partition < info.num_partitions:
                raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition {tp}.")
            raise NotLeaderOrFollowerError(f"This broker is not a replica of {tp}.")
        return partition

    def get_leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.get_partition(tp)
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"This broker is not the leader of {tp}.")
        return partition

    # -- long-poll plumbing -------------------------------------------------------------------
    def _wake(self, tp: TopicPartition) -> None:
        for event in self._waiters.pop(tp, ()):
            event.set()

    async def wait_for_data(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Sleep until an append lands on one of `partitions` or the timeout passes; True if woken."""
        event = trio.Event()
        tps = list(partitions)
        for tp in tps:
            self._waiters.setdefault(tp, set()).add(event)
        try:
            with trio.move_on_after(max(timeout_s, 0)):
                await event.wait()
        finally:
            for tp in tps:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[tp]
        return event.is_set()

    # -- reads --------------------------------------------------------------------------------
    def read_partition(self, tp: TopicPartition, fetch_offset: int, max_bytes: int, read_committed: bool,
                       min_one_message: bool, replica_id: int = -1) -> FetchPartitionResult:
        try:
            partition = self.get_leader_partition(tp)
            log = partition.log
            max_offset = log.log_end_offset if replica_id >= 0 else partition.fetchable_offset(read_committed)
            result = FetchPartitionResult(tp, high_watermark=partition.high_watermark,
                                          last_stable_offset=partition.last_stable_offset,
                                          log_start_offset=log.log_start_offset)
            # an offset between the fetchable limit and the log end is in range; it yields nothing yet
            if log.log_start_offset <= fetch_offset and max_offset <= fetch_offset <= log.log_end_offset:
                return result
            info = log.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message)
            result.records = info.records
            return result
        except KafkaError as exc:
            return FetchPartitionResult(tp, error=exc)

    def statistics(self) -> dict[str, int]:
        return {"partitions": len(self.partitions), "parked_fetch_partitions": len(self._waiters)}
