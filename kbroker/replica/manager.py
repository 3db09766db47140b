"""ReplicaManager: the partitions this broker hosts, appends with acks, fetches with long polling.

On the embedded single node it follows the metadata store (topics created, grown, reconfigured,
deleted). In a cluster the controller decides: LeaderAndIsr makes partitions leaders or
followers (followers fetch through `ReplicaFetcherManager`), StopReplica removes them, and the
metadata store only supplies configs. The leader learns its followers' progress from their
fetches, moves the high watermark, and asks the controller to change the ISR (AlterPartition)
when a follower falls behind `replica.lag.time.max.ms` or catches up.

It also owns the waiting side of Fetch and of acks=all: a fetch that has too few bytes, or a
produce waiting for its ISR, parks on an event that appends, high watermark moves and role
changes of its partitions set, so nothing polls.

Replication throttles (`quota.py`) are kept current from the topic configs here; as leader it
sends nothing for a throttled partition to a follower outside the ISR while the leader quota is
exceeded (Kafka's shouldLeaderThrottle), and counts what it sends to followers for throttled
partitions.

Log dirs: an I/O error on a log takes its log dir offline (LogManager) and its partitions with it
(`offline_partitions`: KAFKA_STORAGE_ERROR to every request, never re-created elsewhere), and
`log_dir_failure_listeners` hear of it (in a cluster: the notification the controller watches);
when no log dir is left the broker halts, as Kafka does. AlterReplicaLogDirs moves are `log_dir_mover.py`.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable

import trio

from kbroker.config import BrokerConfig, effective_topic_value, log_config_for
from kbroker.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetMovedToTieredStorageError,
    StaleControllerEpochError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from kbroker.log.log import Log
from kbroker.log.log_manager import LogManager
from kbroker.log.topic_partition import MAX_DIR_NAME
from kbroker.log.log_txn import AbortedTransaction
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.store import MetadataStore, TopicInfo
from kbroker.replica.data_waits import DataWaits
from kbroker.replica.log_dir_mover import LogDirMover
from kbroker.replica.partition import NO_LEADER, Partition
from kbroker.replica.quota import ReplicationQuotas
from kbroker.replica.turns import Turns

logger = logging.getLogger(__name__)

# (topic, partition, leader_epoch, partition_epoch, new_isr) -> per partition (error, state or None)
AlterPartitionSender = Callable[[list[tuple[str, int, int, int, list[int]]]], Awaitable[dict]]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


ISR_REFUSAL_BACKOFF_MS = 500  # how long a leader waits to propose again an ISR change the controller refused


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True)
class RemoteRead:
    """A consumer's read the archive serves (tiered storage): what `read_remote` completes."""

    fetch_offset: int
    max_bytes: int
    min_one_message: bool
    with_aborted: bool


@dataclass
class FetchPartitionResult:
    topic_partition: TopicPartition
    error: KafkaError | None = None
    records: list = field(default_factory=list)  # file ranges of whole batches, sent with sendfile
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # read_committed: the aborted transactions overlapping `records` (empty when none were read);
    # None for read_uncommitted, a follower's fetch, or an error (Kafka answers null then)
    aborted_transactions: list[AbortedTransaction] | None = None
    # an offset below the local log start of a tiered partition: read from the archive (read_remote)
    remote_read: RemoteRead | None = None

    @property
    def size(self) -> int:
        return sum(r.size for r in self.records)


class ReplicaManager(DataWaits):
    def __init__(self, node_id: int, config: BrokerConfig, log_manager: LogManager, metadata: MetadataStore,
                 *, cluster: bool = False, now_ms: Callable[[], int] = wall_clock_ms,
                 quota_clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.node_id = node_id
        self.config = config
        self.log_manager = log_manager
        self.metadata = metadata
        self.cluster = cluster
        self.now_ms = now_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        DataWaits.__init__(self)  # long polls: _wake, wait_for_data, watch (data_waits.py)
        self._follower_seen_ms: dict[int, int] = {}  # replica id -> when it last fetched from us
        self.controller_epoch = -1
        self.fetchers = None  # ReplicaFetcherManager, in a cluster
        self._configs_applied: dict[str, dict[str, str]] = {}  # cluster: topic -> the overrides last applied
        # (tp, is_leader) after a role change: the group coordinator loads or unloads its groups
        self.leadership_listeners: list[Callable[[TopicPartition, bool], None]] = []
        self._isr_requests: dict[TopicPartition, tuple[Partition, list[int]]] = {}
        self._isr_wake = trio.Event()
        # requests parked now (Kafka's purgatory sizes): acks=all produces, fetches short of min.bytes
        self.delayed_produces = 0  # (fetches short of min.bytes: DataWaits.delayed_fetches)
        self.quotas = ReplicationQuotas(node_id, quota_clock_ms)
        # tiered storage: the RemoteLogManager (kbroker.tiered), set by the broker when enabled
        self.remote_storage = None
        self.offline_partitions: dict[TopicPartition, Partition] = {}  # their log dir failed
        self.log_dir_mover = LogDirMover(self, lambda: config.get("replica.alter.log.dirs.io.max.bytes.per.second"))
        self.halt: Callable[[], None] = lambda: os._exit(1)  # no log dir left (Kafka's Exit.halt(1))
        self.log_dir_failure_listeners: list[Callable[[Any, list[TopicPartition]], None]] = []
        log_manager.dir_failure_listener = self._on_log_dir_failure
        metadata.add_listener(self._on_topic_change)

    # -- following the metadata --------------------------------------------------------------
    def startup(self) -> None:
        for info in list(self.metadata.topics().values()):
            self._on_topic_change(info.name, info)

    def _new_partition(self, tp: TopicPartition, log: Log, topic_id: uuid.UUID, replicas: list[int]) -> Partition:
        partition = Partition(tp, log, topic_id, replicas, self.node_id, self._wake, self.handle_log_failure,
                              follower_seen_ms=self.follower_seen_ms)
        if self.log_manager.get_future_log(tp) is not None:  # a move interrupted by a restart resumes
            self.log_dir_mover.start_move(tp)
        return partition

    def _on_topic_change(self, name: str, info: TopicInfo | None) -> None:
        self.quotas.update_topic(name, None if info is None else info.configs)
        if self.cluster:  # the controller places replicas; metadata brings configs only
            if info is None:
                self._configs_applied.pop(name, None)
            elif self._configs_applied.get(name) != info.configs:  # every UpdateMetadata names the topic
                self._apply_configs(name, info)
                self._configs_applied[name] = dict(info.configs)
            return
        if info is None:
            for tp in [tp for tp in self.offline_partitions if tp.topic == name]:
                del self.offline_partitions[tp]
                self.log_manager.delete_log(tp)
            for tp in [tp for tp in self.partitions if tp.topic == name]:
                del self.partitions[tp]
                self.log_manager.delete_log(tp)
                self._wake(tp)
            return
        log_config, min_isr = self._log_settings(info.configs)
        for index, replicas in enumerate(info.assignment):
            tp = TopicPartition(name, index)
            partition = self.partitions.get(tp)
            if partition is None:
                if self.node_id not in replicas or tp in self.offline_partitions:
                    continue
                log = self.log_manager.get_or_create_log(tp, log_config)
                partition = self.partitions[tp] = self._new_partition(tp, log, info.topic_id, replicas)
                partition.set_log_config(log_config, min_isr)
                # a leader alone in its ISR owns its whole log: the checkpointed HW may lag after a crash
                partition.maybe_increment_high_watermark()
            else:
                partition.set_log_config(log_config, min_isr)

    def reconfigure_logs(self) -> None:
        """The broker's defaults changed (a dynamic broker config): every partition's config again,
        its topic's overrides over the new defaults (Kafka's DynamicLogConfig.updateLogsConfig)."""
        by_topic: dict[str, tuple[Any, int]] = {}
        for tp, partition in self.partitions.items():
            if tp.topic not in by_topic:
                by_topic[tp.topic] = self._log_settings(self._topic_configs(tp.topic))
            partition.set_log_config(*by_topic[tp.topic])

    def _apply_configs(self, name: str, info: TopicInfo) -> None:
        log_config, min_isr = self._log_settings(info.configs)
        retired = self.metadata.retired_partitions(name) if self.cluster else set()  # a decrease still draining
        for index in set(range(len(info.assignment))) | retired:
            partition = self.partitions.get(TopicPartition(name, index))
            if partition is not None:
                partition.set_log_config(log_config, min_isr)

    def _log_settings(self, configs: dict[str, str]) -> tuple[Any, int]:
        """A topic's log config and min.insync.replicas: its overrides over the broker's defaults."""
        return (log_config_for(self.config, configs),
                int(effective_topic_value(self.config, configs, "min.insync.replicas")))

    def _topic_configs(self, name: str) -> dict[str, str]:
        """A topic's overrides as the metadata knows them (none for a topic it does not know yet)."""
        configs = self.metadata.configs_of(name)
        if configs is None:
            info = self.metadata.topic(name)
            configs = info.configs if info else {}
        return configs

    # -- roles, in a cluster (LeaderAndIsr, StopReplica) ------------------------------------------
    def check_controller_epoch(self, epoch: int) -> None:
        if epoch < self.controller_epoch:
            raise StaleControllerEpochError(f"controller epoch {epoch} is older than {self.controller_epoch}")
        self.controller_epoch = epoch

    async def become_leader_or_follower(self, request: Any) -> dict[tuple[str, int], ErrorCode]:
        """Apply a LeaderAndIsr request: partitions whose leader epoch is newer than ours take
        their new role. Errors per partition (the request as a whole is fenced by its epoch).
        Creating thousands of logs takes a while: other connections get turns in between."""
        self.check_controller_epoch(request.controller_epoch)
        errors: dict[tuple[str, int], ErrorCode] = {}
        leaders: list[Partition] = []
        followers: list[Partition] = []
        for topic in request.topic_states:
            log_config, min_isr = self._log_settings(self._topic_configs(topic.topic_name))
            for ps in topic.partition_states:
                key = (topic.topic_name, ps.partition_index)
                tp = TopicPartition(*key)
                if self.node_id not in ps.replicas:
                    errors[key] = ErrorCode.unknown_topic_or_partition
                    continue
                if tp in self.offline_partitions:  # Kafka: the controller learns the replica is offline
                    errors[key] = ErrorCode.kafka_storage_error
                    continue
                partition = self.partitions.get(tp)
                if partition is not None and ps.leader_epoch <= partition.leader_epoch:
                    errors[key] = ErrorCode.stale_controller_epoch  # Kafka's answer to an old leader epoch
                    continue
                if partition is None:
                    try:
                        log = self.log_manager.get_or_create_log(tp, log_config)
                    except KafkaStorageError:
                        errors[key] = ErrorCode.kafka_storage_error
                        continue
                    topic_id = topic.topic_id if topic.topic_id is not None else uuid.UUID(int=0)
                    partition = self._new_partition(tp, log, topic_id, list(ps.replicas))
                    partition.leader_id = NO_LEADER
                    partition.leader_epoch = -1
                    self.partitions[tp] = partition
                    if len(self.partitions) % 32 == 0:
                        await trio.sleep(0)
                partition.set_log_config(log_config, min_isr)
                if ps.leader == self.node_id:  # followers count as caught up from now (Kafka's makeLeader)
                    partition.make_leader(ps.leader_epoch, list(ps.isr), list(ps.replicas), ps.partition_epoch,
                                          self.now_ms())
                    leaders.append(partition)
                else:
                    partition.make_follower(ps.leader, ps.leader_epoch, list(ps.isr), list(ps.replicas),
                                            ps.partition_epoch)
                    followers.append(partition)
                self._isr_requests.pop(tp, None)
                errors[key] = ErrorCode.none
        endpoints = {b.broker_id: (b.host_name, b.port) for b in request.live_leaders}
        if self.fetchers is not None:
            self.fetchers.remove_partitions([p.topic_partition for p in leaders])
            self.fetchers.add_partitions({p.topic_partition: (p.leader_id, endpoints.get(p.leader_id))
                                          for p in followers if p.leader_id != NO_LEADER})
            self.fetchers.remove_partitions([p.topic_partition for p in followers if p.leader_id == NO_LEADER])
        for partition in leaders + followers:
            self._wake(partition.topic_partition)
            for listener in self.leadership_listeners:
                listener(partition.topic_partition, partition.is_leader)
        if leaders or followers:
            logger.info("broker %d leads %d and follows %d partitions after LeaderAndIsr (controller epoch %d)",
                        self.node_id, len(leaders), len(followers), request.controller_epoch)
        return errors

    def stop_replicas(self, request: Any) -> dict[tuple[str, int], ErrorCode]:
        self.check_controller_epoch(request.controller_epoch)
        errors = {}
        stopped = []
        for topic in request.topic_states:
            for ps in topic.partition_states:
                tp = TopicPartition(topic.topic_name, ps.partition_index)
                stopped.append(tp)
                partition = self.partitions.get(tp)
                if ps.delete_partition:
                    self.partitions.pop(tp, None)
                    self.offline_partitions.pop(tp, None)
                    if self.log_manager.get_log(tp) is not None:
                        self.log_manager.delete_log(tp)
                elif partition is not None:
                    partition.make_follower(NO_LEADER, max(partition.leader_epoch, ps.leader_epoch), partition.isr,
                                            partition.replicas, partition.partition_epoch)
                if partition is not None:
                    for listener in self.leadership_listeners:
                        listener(tp, False)
                self._wake(tp)
                errors[(tp.topic, tp.partition)] = ErrorCode.none
        if self.fetchers is not None:
            self.fetchers.remove_partitions(stopped)
        return errors

    def delete_partitions(self, tps: list[TopicPartition]) -> None:
        """Stray replicas (a full UpdateMetadata no longer places them here): stopped and deleted,
        as a StopReplica with deletion would have done had it arrived."""
        for tp in tps:
            partition = self.partitions.pop(tp, None)
            self.offline_partitions.pop(tp, None)
            if self.log_manager.get_log(tp) is not None:
                self.log_manager.delete_log(tp)
            if partition is not None:
                for listener in self.leadership_listeners:
                    listener(tp, False)
            self._wake(tp)
        if self.fetchers is not None and tps:
            self.fetchers.remove_partitions(tps)

    # -- ISR changes (the leader side) ------------------------------------------------------------
    def update_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int) -> None:
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return
        now = self.now_ms()
        partition.update_follower_fetch(replica_id, fetch_offset, now)
        expanded = partition.isr_expansion(replica_id)
        if expanded is not None and now >= partition.isr_backoff_until_ms:
            logger.info("%s: expanding ISR %s -> %s (follower %d caught up)", tp, partition.isr, expanded, replica_id)
            self._propose_isr(partition, expanded)

    def maybe_shrink_isr(self) -> int:
        """Periodic: followers that have not caught up for replica.lag.time.max.ms leave the ISR."""
        lag_max = self.config.get("replica.lag.time.max.ms")
        now = self.now_ms()
        shrunk = 0
        for partition in list(self.partitions.values()):
            new_isr = partition.isr_shrink(now, lag_max)
            if new_isr is not None and now >= partition.isr_backoff_until_ms:
                logger.info("%s: shrinking ISR %s -> %s (followers behind for %d ms)", partition.topic_partition,
                            partition.isr, new_isr, lag_max)
                self._propose_isr(partition, new_isr)
                shrunk += 1
        return shrunk

    def _propose_isr(self, partition: Partition, new_isr: list[int]) -> None:
        partition.pending_isr = new_isr
        self._isr_requests[partition.topic_partition] = (partition, new_isr)
        self._isr_wake.set()

    async def run_isr_changes(self, send: AlterPartitionSender) -> None:
        """Sends the ISR changes leaders propose to the controller, batched, and applies the answers."""
        while True:
            await self._isr_wake.wait()
            self._isr_wake = trio.Event()
            batch, self._isr_requests = self._isr_requests, {}
            if not batch:
                continue
            items = [(tp.topic, tp.partition, p.leader_epoch, p.partition_epoch, isr) for tp, (p, isr) in batch.items()]
            try:
                answers = await send(items)
            except Exception as exc:  # noqa: BLE001 - retried: the proposal stays pending
                logger.info("AlterPartition failed (%s); retrying", exc)
                for tp, entry in batch.items():
                    self._isr_requests.setdefault(tp, entry)
                await trio.sleep(0.2)
                self._isr_wake.set()
                continue
            turns = Turns()  # thousands at once after a restart: requests go on meanwhile
            for i, (tp, (partition, isr)) in enumerate(batch.items()):
                await turns.take(i)
                error, state = answers.get((tp.topic, tp.partition), (ErrorCode.unknown_server_error, None))
                if self.partitions.get(tp) is not partition or partition.pending_isr is not isr:
                    continue  # superseded by a LeaderAndIsr
                partition.pending_isr = None
                if error == ErrorCode.none and state is not None and state.leader_epoch == partition.leader_epoch:
                    partition.isr = list(state.isr)
                    partition.partition_epoch = state.partition_epoch
                    logger.info("%s: ISR is now %s", tp, partition.isr)
                else:  # e.g. INELIGIBLE_REPLICA for a follower in controlled shutdown: not at every fetch
                    partition.isr_backoff_until_ms = self.now_ms() + ISR_REFUSAL_BACKOFF_MS
                    logger.info("%s: ISR change to %s refused with %s", tp, isr, ErrorCode(error).name)
                partition.maybe_increment_high_watermark()
                self._wake(tp)

    async def wait_for_replication(self, partition: Partition, required_offset: int, timeout_s: float) -> ErrorCode:
        """acks=all: until every ISR member has the records below `required_offset`."""
        self.delayed_produces += 1
        try:
            return await self._wait_for_replication(partition, required_offset, timeout_s)
        finally:
            self.delayed_produces -= 1

    async def _wait_for_replication(self, partition: Partition, required_offset: int, timeout_s: float) -> ErrorCode:
        tp = partition.topic_partition
        followed = partition.times_followed
        deadline = trio.current_time() + timeout_s
        while True:
            # a new leader epoch with this broker still leading (a follower left the ISR) is fine,
            # as in Kafka; having followed in between is not
            if self.partitions.get(tp) is not partition or not partition.is_leader or \
                    partition.times_followed != followed:
                return ErrorCode.not_leader_or_follower
            if partition.replication_done(required_offset):
                if len(partition.isr) < partition.min_insync_replicas:
                    return ErrorCode.not_enough_replicas_after_append
                return ErrorCode.none
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                return ErrorCode.request_timed_out
            await self.wait_for_data([tp], remaining)

    # -- lookups ------------------------------------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            if tp in self.offline_partitions:
                raise KafkaStorageError(f"Partition {tp} is offline: its log directory failed.")
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

    # -- the followers' latest fetches ------------------------------------------------------------
    def follower_fetched(self, replica_id: int) -> None:
        """A follower's Fetch arrived: it holds every partition of its session at the offsets the
        session knows, as of now (see `Partition.append_records_to_leader`)."""
        self._follower_seen_ms[replica_id] = self.now_ms()

    def follower_seen_ms(self, replica_id: int) -> int:
        return self._follower_seen_ms.get(replica_id, 0)

    # -- reads --------------------------------------------------------------------------------
    def read_partition(self, tp: TopicPartition, fetch_offset: int, max_bytes: int, read_committed: bool,
                       min_one_message: bool, replica_id: int = -1, current_leader_epoch: int = -1
                       ) -> FetchPartitionResult:
        try:
            partition = self.get_leader_partition(tp)
            check_leader_epoch(partition, current_leader_epoch)
            log = partition.log
            max_offset = log.log_end_offset if replica_id >= 0 else partition.fetchable_offset(read_committed)
            with_aborted = read_committed and replica_id < 0  # a follower copies the log whole
            remote = self.remote_storage if log.config.remote_storage_enable else None
            result = FetchPartitionResult(tp, high_watermark=partition.high_watermark,
                                          last_stable_offset=partition.last_stable_offset,
                                          log_start_offset=remote.log_start_offset(partition) if remote
                                          else log.log_start_offset,
                                          aborted_transactions=[] if with_aborted else None)
            if remote is not None and fetch_offset < log.log_start_offset:
                if replica_id >= 0:  # Kafka: a follower starts from the leader's local log start instead
                    raise OffsetMovedToTieredStorageError(
                        f"offset {fetch_offset} of {tp} is below the local log start {log.log_start_offset}")
                result.remote_read = RemoteRead(fetch_offset, max_bytes, min_one_message, with_aborted)
                return result
            # an offset between the fetchable limit and the log end is in range; it yields nothing yet
            if log.log_start_offset <= fetch_offset and max_offset <= fetch_offset <= log.log_end_offset:
                return result
            try:
                info = log.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message,
                                include_aborted_txns=with_aborted)
            except OSError as exc:
                raise self.handle_log_failure(log, exc) from exc
            if replica_id < 0 or not self.should_leader_throttle(partition, replica_id):
                result.records = info.records  # a throttled follower gets nothing this time and asks again
                result.aborted_transactions = info.aborted_transactions
            return result
        except KafkaError as exc:
            return FetchPartitionResult(tp, error=exc)

    async def read_remote(self, result: FetchPartitionResult) -> None:
        """Complete a read below the local log start from the archive (tiered storage): the
        records and aborted transactions, or the error (OFFSET_OUT_OF_RANGE below its start)."""
        wanted, result.remote_read = result.remote_read, None
        if wanted is None:
            return
        try:
            partition = self.get_leader_partition(result.topic_partition)
            info = await self.remote_storage.read(partition, wanted.fetch_offset, wanted.max_bytes,
                                                  wanted.min_one_message, wanted.with_aborted)
            result.records = info.records
            result.aborted_transactions = info.aborted_transactions
        except KafkaError as exc:
            result.error, result.records, result.aborted_transactions = exc, [], None
        except Exception as exc:  # noqa: BLE001 - a store failure is this partition's error, retriable
            logger.exception("%s: reading the archive failed", result.topic_partition)
            result.error, result.records, result.aborted_transactions = KafkaStorageError(str(exc)), [], None

    # -- replication throttles (the leader side) ---------------------------------------------------
    def should_leader_throttle(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's rule: only a follower outside the ISR is held back, so the throttle never pushes
        an in-sync follower out of the ISR; and only while the leader quota is exceeded."""
        quota = self.quotas.leader
        return replica_id not in partition.isr and quota.is_throttled(partition.topic_partition) \
            and quota.is_quota_exceeded()

    def record_sent_to_follower(self, results: Iterable[FetchPartitionResult]) -> None:
        """The bytes of throttled partitions in a follower's fetch answer count towards the leader
        quota, in sync or not, so the total replication traffic stays within the rate (Kafka)."""
        quota = self.quotas.leader
        size = sum(r.size for r in results if quota.is_throttled(r.topic_partition))
        quota.record(size)

    # -- log dirs: failures and moves ---------------------------------------------------------------
    def handle_log_failure(self, log: Log, exc: OSError) -> KafkaStorageError:
        """An I/O error on `log`: its log dir goes offline with every partition in it (once);
        returns the error the request that hit it answers."""
        self.log_manager.fail_dir_of(log, exc)
        return KafkaStorageError(f"I/O error on {log.dir.name}, its log directory is offline: {exc}")

    def _on_log_dir_failure(self, d, tps: list[TopicPartition]) -> None:
        for tp in tps:
            partition = self.partitions.pop(tp, None)
            if partition is None:
                continue
            self.offline_partitions[tp] = partition
            self._isr_requests.pop(tp, None)
            self.log_dir_mover.cancel_move(tp)
            for listener in self.leadership_listeners:
                listener(tp, False)
            self._wake(tp)
        if self.fetchers is not None and tps:
            self.fetchers.remove_partitions(tps)
        for dir_listener in self.log_dir_failure_listeners:
            dir_listener(d, tps)
        if not self.log_manager.live_log_dirs:
            logger.critical("shutting down: every log dir (%s) has failed",
                            ", ".join(str(d) for d in self.log_manager.log_dirs))
            self.halt()

    def alter_replica_log_dir(self, tp: TopicPartition, path: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition, with Kafka's rules and answers."""
        lm = self.log_manager
        if len(tp.suffixed_dir_name("-future")) > MAX_DIR_NAME:
            return ErrorCode.invalid_topic_exception
        dest = lm.log_dir_named(path)
        if dest is None:
            return ErrorCode.log_dir_not_found
        if dest in lm.offline_dirs or tp in self.offline_partitions:
            return ErrorCode.kafka_storage_error
        partition = self.partitions.get(tp)
        if partition is None:  # placed there when it is created (Kafka answers REPLICA_NOT_AVAILABLE)
            lm.preferred_dirs[tp] = dest
            return ErrorCode.replica_not_available
        if lm.future_dir_of(tp) not in (None, dest):  # another destination: that move stops
            self.log_dir_mover.cancel_move(tp)
            lm.abandon_future_log(tp)
        if lm.dir_of(tp) == dest:
            return ErrorCode.none
        try:
            lm.create_future_log(tp, dest)
        except OSError as exc:
            lm.mark_dir_offline(dest, f"creating the future log of {tp}: {exc}")
            return ErrorCode.kafka_storage_error
        self.log_dir_mover.start_move(tp)
        return ErrorCode.none

    def complete_log_dir_move(self, partition: Partition) -> None:
        """The mover's swap: synchronous, between two appends."""
        tp = partition.topic_partition
        try:
            log = self.log_manager.replace_current_with_future_log(tp)
        except OSError as exc:
            self.handle_log_failure(partition.log, exc)
            return
        partition.replace_log(log)

    def shutdown(self) -> None:
        if self.fetchers is not None:
            self.fetchers.remove_partitions(list(self.partitions))

    def statistics(self) -> dict[str, int]:
        return {"partitions": len(self.partitions), "parked_fetch_partitions": len(self._waiters)}


def check_leader_epoch(partition: Partition, current_leader_epoch: int) -> None:
    """A client or follower naming an epoch (-1: none) must name ours (Kafka's KIP-320 fencing)."""
    if current_leader_epoch < 0 or current_leader_epoch == partition.leader_epoch:
        return
    if current_leader_epoch < partition.leader_epoch:
        raise FencedLeaderEpochError(
            f"leader epoch {current_leader_epoch} is older than {partition.leader_epoch} for {partition.topic_partition}")
    raise UnknownLeaderEpochError(
        f"leader epoch {current_leader_epoch} is newer than {partition.leader_epoch} for {partition.topic_partition}")
