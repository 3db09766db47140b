"""The transaction coordinator: the shell that runs coordinator_rules' decisions (Kafka's
TransactionCoordinator, TransactionStateManager and the marker completion).

Owns: which `__transaction_state` partitions this broker coordinates and their transactional ids
(loaded from the log when the partition's leadership arrives, under its leader epoch as the
coordinator epoch), the appends of each transition, the markers of each ending transaction (sent
in the background; the Complete record is appended once every partition has its marker), and the
periodic scans that abort transactions past their timeout and forget expired ids.

A request for an id whose partition is loading answers COORDINATOR_LOAD_IN_PROGRESS; one not
coordinated here, NOT_COORDINATOR. On the single node every partition is led here and loaded on
first use.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

from kbroker.errors import ErrorCode
from kbroker.txn import coordinator_rules as rules
from kbroker.txn.coordinator_rules import Decision, TransactionConfig, TxnMarkers
from kbroker.txn.log_format import encode_key, encode_value
from kbroker.txn.markers import TxnMarkerWriter
from kbroker.txn.metadata import TopicPartition, TransactionMetadata, TxnTransitMetadata
from kbroker.txn.state_log import TransactionStateLog

logger = logging.getLogger(__name__)
E = ErrorCode

RETRY_BACKOFF_S = 0.1  # between rounds of markers that failed (Kafka's retry.backoff.ms)


@dataclass
class CoordinatedPartition:
    coordinator_epoch: int
    entries: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, state_log: TransactionStateLog, markers: TxnMarkerWriter,
                 allocate_producer_id: Callable[[], Awaitable[int]], now_ms: Callable[[], int], *,
                 cluster: bool) -> None:
        self.config = config
        self.state_log = state_log
        self.markers = markers
        self.allocate_producer_id = allocate_producer_id
        self.now_ms = now_ms
        self.cluster = cluster
        self.partitions: dict[int, CoordinatedPartition] = {}
        self.loading: set[int] = set()
        self._spare_producer_id: int | None = None
        self._nursery: trio.Nursery | None = None
        self._waiting: list[tuple[Callable[..., Awaitable[Any]], tuple]] = []  # background work before run()

    # -- ownership ----------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return rules.partition_for(transactional_id, self.config.transaction_state_partitions)

    def _coordinated(self, transactional_id: str) -> tuple[int, CoordinatedPartition] | ErrorCode:
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return E.coordinator_load_in_progress
        owned = self.partitions.get(partition)
        if owned is None and not self.cluster:
            epoch = self.state_log.leader_epoch(partition)
            if epoch is not None:  # the single node leads every partition: load it on first use
                owned = self.become_leader(partition, epoch)
        if owned is None:
            return E.not_coordinator
        return partition, owned

    def become_leader(self, partition: int, coordinator_epoch: int) -> CoordinatedPartition:
        """This broker now leads `__transaction_state-<partition>`: replay it, then finish the
        transactions a previous coordinator left half-ended (markers again, then Complete)."""
        self.loading.add(partition)
        try:
            entries = rules.load_transactions(self.state_log.read(partition), coordinator_epoch)
        finally:
            self.loading.discard(partition)
        owned = self.partitions[partition] = CoordinatedPartition(coordinator_epoch, entries)
        for outcome in rules.completions_after_load(list(entries.values()), self.now_ms()):
            assert outcome.metadata is not None and outcome.markers is not None and outcome.complete is not None
            entries[outcome.metadata.transactional_id] = outcome.metadata
            self._spawn(self._complete, partition, outcome.markers, outcome.complete)
        if entries:
            logger.info("coordinating %d transactional ids of __transaction_state-%d (coordinator epoch %d)",
                        len(entries), partition, coordinator_epoch)
        return owned

    def load_led_partitions(self) -> int:
        """The single node at start: load every partition led here, so transactions a crash left
        open time out and half-ended ones complete without waiting for their producer."""
        loaded = 0
        for partition in range(self.config.transaction_state_partitions):
            epoch = self.state_log.leader_epoch(partition)
            if epoch is not None and partition not in self.partitions:
                loaded += len(self.become_leader(partition, epoch).entries)
        return loaded

    def resign(self, partition: int) -> None:
        """Another broker coordinates these ids now; markers in flight stop at their next round."""
        self.partitions.pop(partition, None)

    # -- requests -----------------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, txn_timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[ErrorCode, int, int]:
        if not transactional_id:
            return E.invalid_request, -1, -1
        if self._spare_producer_id is None:
            self._spare_producer_id = await self.allocate_producer_id()
        found = self._coordinated(transactional_id)
        if isinstance(found, ErrorCode):
            return found, -1, -1
        partition, owned = found
        decision = rules.init_producer_id(
            owned.entries.get(transactional_id), transactional_id, txn_timeout_ms, expected,
            allocate_producer_id=self._take_spare_producer_id, config=self.config,
            coordinator_epoch=owned.coordinator_epoch, now_ms=self.now_ms())
        error = await self._apply(partition, owned, transactional_id, decision)
        if error is not E.none:
            return error, -1, -1
        return E.none, decision.producer_id, decision.producer_epoch

    def _take_spare_producer_id(self) -> int:
        producer_id, self._spare_producer_id = self._spare_producer_id, None
        assert producer_id is not None
        return producer_id

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        found = self._coordinated(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        partition, owned = found
        decision = rules.add_partitions(owned.entries.get(transactional_id), transactional_id, producer_id,
                                        producer_epoch, partitions, now_ms=self.now_ms())
        return await self._apply(partition, owned, transactional_id, decision)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        found = self._coordinated(transactional_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(partitions, found)
        _partition, owned = found
        return rules.verify_partitions(owned.entries.get(transactional_id), transactional_id, producer_id,
                                       producer_epoch, partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        return await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                         [rules.offsets_partition_for(group_id, self.config)])

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        found = self._coordinated(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        partition, owned = found
        decision = rules.end_txn(owned.entries.get(transactional_id), transactional_id, producer_id,
                                 producer_epoch, commit, now_ms=self.now_ms())
        return await self._apply(partition, owned, transactional_id, decision)

    # -- operators ----------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        found = self._coordinated(transactional_id)
        if isinstance(found, ErrorCode):
            return found, None
        _partition, owned = found
        md = owned.entries.get(transactional_id)
        return (E.transactional_id_not_found, None) if md is None else (E.none, md)

    def transactions(self) -> Iterable[TransactionMetadata]:
        """Every id coordinated here (ListTransactions filters them)."""
        for owned in list(self.partitions.values()):
            yield from list(owned.entries.values())

    # -- applying a decision ------------------------------------------------------------------------
    async def _apply(self, partition: int, owned: CoordinatedPartition, transactional_id: str,
                     decision: Decision) -> ErrorCode:
        if decision.metadata is not None:
            owned.entries[transactional_id] = decision.metadata
        if decision.write is None:
            return decision.error
        error = await self._append(partition, transactional_id, decision.write)
        outcome = self._after_append(partition, owned, transactional_id, decision.write, error,
                                     is_epoch_fence=decision.is_epoch_fence)
        if outcome.markers is not None and outcome.complete is not None:
            self._spawn(self._complete, partition, outcome.markers, outcome.complete)
        return outcome.error if outcome.error is not E.none else decision.error

    async def _append(self, partition: int, transactional_id: str, write: TxnTransitMetadata) -> ErrorCode:
        value = write.to_log_value()
        return await self.state_log.append(partition, encode_key(transactional_id),
                                           None if value is None else encode_value(value))

    def _after_append(self, partition: int, owned: CoordinatedPartition, transactional_id: str,
                      written: TxnTransitMetadata, error: ErrorCode, **kw) -> rules.AppendOutcome:
        now_owned = self.partitions.get(partition)
        current = now_owned.entries.get(transactional_id) if now_owned is not None else None
        outcome = rules.after_append(current, written, owned.coordinator_epoch, error, now_ms=self.now_ms(), **kw)
        if now_owned is not None and now_owned.coordinator_epoch == owned.coordinator_epoch:
            if outcome.metadata is None:
                now_owned.entries.pop(transactional_id, None)
            else:
                now_owned.entries[transactional_id] = outcome.metadata
        return outcome

    def _still_coordinating(self, partition: int, coordinator_epoch: int) -> CoordinatedPartition | None:
        owned = self.partitions.get(partition)
        return owned if owned is not None and owned.coordinator_epoch == coordinator_epoch else None

    async def _complete(self, partition: int, markers: TxnMarkers, complete: TxnTransitMetadata) -> None:
        """Write every marker, then the Complete record; stop if the partition moves away (the new
        coordinator does this again from its log)."""
        txn_id = markers.transactional_id
        pending = set(markers.partitions)
        while pending:
            owned = self._still_coordinating(partition, markers.coordinator_epoch)
            if owned is None:
                return
            results = await self.markers.write(markers, pending)
            owned = self._still_coordinating(partition, markers.coordinator_epoch)
            if owned is None:
                return
            for tp, code in results.items():
                if code in (E.none, E.unknown_topic_or_partition):  # written, or the topic is gone
                    pending.discard(tp)
                    md = owned.entries.get(txn_id)
                    if md is not None and tp in md.partitions:
                        owned.entries[txn_id] = rules.marker_written(md, tp)
                elif code in (E.invalid_producer_epoch, E.transaction_coordinator_fenced):
                    # a newer producer epoch or coordinator took over this transaction (Kafka drops it too)
                    logger.warning("markers of %s to %s abandoned: %s", txn_id, tp, code.name)
                    return
            if pending:
                await trio.sleep(RETRY_BACKOFF_S)
        while True:
            owned = self._still_coordinating(partition, markers.coordinator_epoch)
            if owned is None:
                return
            error = await self._append(partition, txn_id, complete)
            outcome = self._after_append(partition, owned, txn_id, complete, error, keep_pending_on_error=True)
            if outcome.error in (E.none, E.not_coordinator):
                return
            await trio.sleep(RETRY_BACKOFF_S)  # e.g. not enough replicas for a moment: Kafka retries too

    # -- background work ----------------------------------------------------------------------------
    def _spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        if self._nursery is None:
            self._waiting.append((fn, args))
        else:
            self._nursery.start_soon(fn, *args)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Marker completions and the periodic scans run in here."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for fn, args in self._waiting:
                nursery.start_soon(fn, *args)
            self._waiting.clear()
            nursery.start_soon(self._every, self.config.abort_timed_out_transactions_interval_ms,
                               self.abort_timed_out_transactions)
            nursery.start_soon(self._every, self.config.remove_expired_transactional_ids_interval_ms,
                               self.remove_expired_transactional_ids)
            task_status.started()
            await trio.sleep_forever()

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                logger.exception("transaction coordinator scan failed")

    async def abort_timed_out_transactions(self) -> int:
        """Ongoing transactions older than their timeout: fence the producer (epoch + 1) and abort."""
        aborted = 0
        now = self.now_ms()
        for partition, owned in list(self.partitions.items()):
            for md in rules.timed_out_transactions(list(owned.entries.values()), now):
                decision = rules.abort_timed_out(owned.entries.get(md.transactional_id), md.producer_id, now_ms=now)
                if decision is None:
                    continue
                logger.info("aborting transaction of %s: open for longer than its timeout of %d ms",
                            md.transactional_id, md.txn_timeout_ms)
                self._spawn(self._apply, partition, owned, md.transactional_id, decision)
                aborted += 1
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        removed = 0
        now = self.now_ms()
        for partition, owned in list(self.partitions.items()):
            for md in rules.expired_transactional_ids(list(owned.entries.values()), now, self.config):
                self._spawn(self._apply, partition, owned, md.transactional_id, rules.expire(md))
                removed += 1
        return removed

