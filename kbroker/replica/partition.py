"""One partition replica on this broker: its log, role, ISR and high watermark rules.

The log stores; this class decides. The high watermark only moves when every ISR member has the
data (on a single node the ISR is this broker alone, so it follows the log end offset), and the
last stable offset stops before the first still-open transaction.
"""

from __future__ import annotations

import uuid
from typing import Callable

from kbroker.errors import NotEnoughReplicasError
from kbroker.replica.group_commit import GroupCommit
from kbroker.log.config import LONG_MAX
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition


class Partition:
    def __init__(self, tp: TopicPartition, log: Log, topic_id: uuid.UUID, replicas: list[int], node_id: int,
                 on_new_data: Callable[[TopicPartition], None]) -> None:
        self.topic_partition = tp
        self.log = log
        self.topic_id = topic_id
        self.replicas = list(replicas)
        self.node_id = node_id
        self.leader_id = node_id
        self.leader_epoch = 0
        self.isr = [node_id]
        self._on_new_data = on_new_data
        self.flush_interval_messages = log.config.flush_interval_messages
        self.min_insync_replicas = 1
        self.group_commit = GroupCommit(log)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first_open = self.log.producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if first_open is None else min(hw, first_open)

    def fetchable_offset(self, read_committed: bool) -> int:
        return self.last_stable_offset if read_committed else self.high_watermark

    def append_records_to_leader(self, buf: bytearray, batches: list, required_acks: int):
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr requirement of "
                f"{self.min_insync_replicas} for partition {self.topic_partition}"
            )
        info = self.log.append_as_leader(buf, batches, leader_epoch=self.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    def set_log_config(self, config, min_insync_replicas: int) -> None:
        """The log never flushes by itself: `flush.messages` is applied here, with group commit."""
        self.min_insync_replicas = min_insync_replicas
        self.flush_interval_messages = config.flush_interval_messages
        self.log.update_config(config.with_(flush_interval_messages=LONG_MAX))

    async def maybe_flush(self) -> None:
        """Before acknowledging: fsync if `flush.messages` appended messages are not on disk yet."""
        if self.log.unflushed_messages >= self.flush_interval_messages:
            await self.group_commit.flush_to(self.log.log_end_offset)

    def maybe_increment_high_watermark(self) -> None:
        """HW = the smallest log end offset in the ISR; alone in the ISR, that is our own."""
        new_hw = self.log.log_end_offset
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            self._on_new_data(self.topic_partition)
