"""One partition replica on this broker: its log, role, ISR and high watermark rules.

The log stores; this class decides. As leader it tracks each follower's log end offset (learnt
from the follower's fetches) and when it last caught up; the high watermark is the smallest log
end offset in the ISR — counting members an ISR change in flight is adding or removing (Kafka's
"maximal ISR"), so a shrink the controller has not yet accepted never lets it run ahead. On a
single node the ISR is this broker alone and the high watermark follows the log end offset. The
last stable offset stops before the first still-open transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from kbroker.errors import KafkaStorageError, NotEnoughReplicasError
from kbroker.replica.group_commit import GroupCommit
from kbroker.log.config import LONG_MAX
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition

NO_LEADER = -1


@dataclass
class FollowerState:
    """A follower as its leader sees it (Kafka's Replica)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_ms: int = 0


class Partition:
    def __init__(self, tp: TopicPartition, log: Log, topic_id: uuid.UUID, replicas: list[int], node_id: int,
                 on_new_data: Callable[[TopicPartition], None],
                 on_log_failure: Callable[[Log, OSError], KafkaStorageError] | None = None, *,
                 follower_seen_ms: Callable[[int], int] | None = None) -> None:
        self.topic_partition = tp
        self.log = log
        self.topic_id = topic_id
        self.replicas = list(replicas)
        self.node_id = node_id
        self.leader_id = node_id
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.isr = [node_id]
        self.pending_isr: list[int] | None = None  # an AlterPartition in flight
        self.isr_backoff_until_ms = 0  # a refused ISR change is not proposed again before then
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        self.times_followed = 0  # bumped whenever it stops leading: waits for acks=all watch it
        self._on_new_data = on_new_data
        self.flush_interval_messages = log.config.flush_interval_messages
        self.min_insync_replicas = 1
        self.group_commit = GroupCommit(log)
        self._on_log_failure = on_log_failure  # an I/O error: the log's dir goes offline
        self._follower_seen_ms = follower_seen_ms  # replica id -> its latest fetch (the replica manager's)

    def replace_log(self, log: Log) -> None:
        """The log moved to another log dir (the swap of a move): serve the new one."""
        self.log = log
        self.group_commit = GroupCommit(log)

    def storage_error(self, log: Log, exc: OSError) -> KafkaStorageError:
        if self._on_log_failure is not None:
            return self._on_log_failure(log, exc)
        return KafkaStorageError(f"I/O error on the log of {self.topic_partition}: {exc}")

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
        """The log's LSO (Kafka's UnifiedLog.lastStableOffset): read_committed reads stop there."""
        return self.log.last_stable_offset

    @property
    def maximal_isr(self) -> list[int]:
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def fetchable_offset(self, read_committed: bool) -> int:
        return self.last_stable_offset if read_committed else self.high_watermark

    # -- roles (LeaderAndIsr) -----------------------------------------------------------------------
    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int], partition_epoch: int,
                    now_ms: int) -> bool:
        """Become (or stay) leader at `leader_epoch`; True if this broker was not leading before."""
        was_leader = self.is_leader
        new_epoch = leader_epoch != self.leader_epoch or not was_leader
        self.leader_id = self.node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.pending_isr = None
        if new_epoch:
            self.leader_epoch_start_offset = self.log.log_end_offset
            # OffsetForLeaderEpoch must know where this epoch starts before anything is appended in
            # it: in memory at once. The file is written within a second by the server's epoch writer
            # (thousands of partitions change leader at once in a failover; Kafka 3.7+ writes it in
            # the background too), fsynced by the log's next flush, and recovery re-reads epochs
            # from the unflushed batches.
            self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset, sync=False, write=False)
            # followers are unknown until they fetch; ISR members count as caught up from now
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
                              for r in replicas if r != self.node_id}
        else:
            for r in replicas:
                if r != self.node_id:
                    self.followers.setdefault(r, FollowerState())
            for r in list(self.followers):
                if r not in replicas:
                    del self.followers[r]
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int],
                      partition_epoch: int) -> bool:
        """Follow `leader_id` at `leader_epoch`; True if the leader or epoch changed."""
        changed = leader_id != self.leader_id or leader_epoch != self.leader_epoch
        self.times_followed += 1
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.pending_isr = None
        self.followers = {}
        self._on_new_data(self.topic_partition)  # parked reads and acks=all waits re-check the role
        return changed

    # -- appends ------------------------------------------------------------------------------------
    def append_records_to_leader(self, buf: bytearray, batches: list, required_acks: int, *,
                                 from_client: bool = True):
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr requirement of "
                f"{self.min_insync_replicas} for partition {self.topic_partition}"
            )
        log = self.log
        if self.followers and self._follower_seen_ms is not None:
            self._mark_caught_up_followers(log.log_end_offset)
        try:
            info = log.append_as_leader(buf, batches, leader_epoch=self.leader_epoch, from_client=from_client)
        except OSError as exc:
            raise self.storage_error(log, exc) from exc
        self.maybe_increment_high_watermark()
        if self.followers:
            self._on_new_data(self.topic_partition)  # followers' parked fetches want the new batch
        return info

    def set_log_config(self, config, min_insync_replicas: int) -> None:
        """The log never flushes by itself: `flush.messages` is applied here, with group commit."""
        self.min_insync_replicas = min_insync_replicas
        self.flush_interval_messages = config.flush_interval_messages
        self.log.update_config(config.with_(flush_interval_messages=LONG_MAX))

    async def maybe_flush(self) -> None:
        """Before acknowledging: fsync if `flush.messages` appended messages are not on disk yet."""
        if self.log.unflushed_messages >= self.flush_interval_messages:
            commit = self.group_commit
            try:
                await commit.flush_to(self.log.log_end_offset)
            except KafkaStorageError as exc:
                if isinstance(exc.__cause__, OSError):
                    raise self.storage_error(commit.log, exc.__cause__) from exc
                raise

    # -- the leader's view of its followers ---------------------------------------------------------
    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched from `fetch_offset`: everything below it is on the follower."""
        state = self.followers.get(replica_id)
        if state is None:
            return
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_log_end_offset = leader_end
        state.last_fetch_ms = now_ms
        self.maybe_increment_high_watermark()

    def _mark_caught_up_followers(self, log_end_offset: int) -> None:
        """Before the log end moves: a follower at it was caught up as of its latest fetch. An
        idle partition of a fetch session is not read for each of the follower's fetches
        (api/fetch_reads.py), so its caught-up time is brought forward here, where it starts to matter
        (`isr_shrink` ignores a follower at the log end)."""
        for replica_id, state in self.followers.items():
            if state.log_end_offset == log_end_offset:
                seen = self._follower_seen_ms(replica_id)
                if seen > state.last_caught_up_ms:
                    state.last_caught_up_ms = seen
                if seen > state.last_fetch_ms:
                    state.last_fetch_ms = seen

    def isr_expansion(self, replica_id: int) -> list[int] | None:
        """The ISR with `replica_id` added, when it has caught up (Kafka's isFollowerInSync)."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return None
        state = self.followers.get(replica_id)
        if state is None or replica_id not in self.replicas:
            return None
        end = state.log_end_offset
        if end >= self.high_watermark and end >= self.leader_epoch_start_offset:
            return self.isr + [replica_id]
        return None

    def isr_shrink(self, now_ms: int, lag_max_ms: int) -> list[int] | None:
        """The ISR without followers that have not caught up for `lag_max_ms`."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        end = self.log.log_end_offset
        out = [r for r in self.isr if r != self.node_id and r in self.followers
               and self.followers[r].log_end_offset != end  # at our end it is in sync, however idle
               and now_ms - self.followers[r].last_caught_up_ms > lag_max_ms]
        if not out:
            return None
        return [r for r in self.isr if r not in out]

    def maybe_increment_high_watermark(self) -> None:
        """HW = the smallest log end offset in the (maximal) ISR; alone in the ISR, our own."""
        if not self.is_leader:
            return
        new_hw = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica != self.node_id:
                state = self.followers.get(replica)
                new_hw = min(new_hw, state.log_end_offset if state is not None else -1)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            self._on_new_data(self.topic_partition)

    def replication_done(self, required_offset: int) -> bool:
        """acks=all: every ISR member has everything below `required_offset`."""
        return self.high_watermark >= required_offset

    # -- the follower side --------------------------------------------------------------------------
    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
