"""One transactional id's metadata and its prepare/complete transitions (Kafka's TransactionMetadata).

Kafka changes a transactional id in two steps, and so does kbroker: `prepare_*` checks the
transition against the state table, returns the metadata with `pending_state` set (kept in the
cache while the record is written, so other requests see CONCURRENT_TRANSACTIONS) and the
`TxnTransitMetadata` to write; once the record is appended, `complete_transition_to` applies it
after Kafka's sanity checks. Both objects are immutable: every step returns a new value.

Not in the log (so a reloaded id starts without them, as in Kafka): the last producer id and
epoch (KIP-360 retries), the pending state, the failed-fence flag. The coordinator epoch is the
`__transaction_state` partition's leader epoch when this coordinator loaded it; markers carry it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kbroker.txn.log_format import TransactionLogValue, group_partitions
from kbroker.txn.state import PENDING_TRANSACTION, IllegalStateTransition, TransactionState, check_transition

S = TransactionState
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1  # Short.MaxValue

TopicPartition = tuple[str, int]  # kbroker.log's TopicPartition is such a tuple


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Clients never get Short.MaxValue, so the coordinator can always fence them with one more bump."""
    return producer_epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The state a transition leads to: what is written to `__transaction_state` (Kafka's name)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int

    def to_log_value(self) -> TransactionLogValue | None:
        """The record value; None (a tombstone) for Dead, which is how an id expires."""
        if self.state is S.DEAD:
            return None
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms,
            state=self.state,
            partitions=None if self.state is S.EMPTY else group_partitions(self.partitions),
            last_update_timestamp_ms=self.txn_last_update_timestamp,
            start_timestamp_ms=self.txn_start_timestamp,
        )


@dataclass(frozen=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    txn_timeout_ms: int
    txn_last_update_timestamp: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    state: TransactionState = S.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_timestamp: int = -1
    coordinator_epoch: int = 0
    pending_state: TransactionState | None = None
    # an epoch fence whose write failed already bumped the epoch in memory: the next fence must not
    # bump again (that epoch was never returned to a client, so reusing it is safe)
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log_value(
        cls, transactional_id: str, value: TransactionLogValue, coordinator_epoch: int
    ) -> TransactionMetadata:
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            txn_timeout_ms=value.transaction_timeout_ms,
            state=value.state,
            partitions=value.partition_set(),
            txn_start_timestamp=value.start_timestamp_ms,
            txn_last_update_timestamp=value.last_update_timestamp_ms,
            coordinator_epoch=coordinator_epoch,
        )

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in PENDING_TRANSACTION

    # --- prepare: (metadata with pending_state, what to write) ------------------------------------

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_timestamp: int,
        update_timestamp: int,
    ) -> tuple[TransactionMetadata, TxnTransitMetadata]:
        if self.pending_state is not None:
            raise IllegalStateTransition(
                f"{self.transactional_id}: transition to {state.state_name} while "
                f"{self.pending_state.state_name} is pending"
            )
        if producer_id < 0:
            raise ValueError(f"illegal new producer id {producer_id}")
        if state is not S.DEAD and epoch < 0:  # a never-initialised id may be expired at epoch -1
            raise ValueError(f"illegal new producer epoch {epoch}")
        check_transition(self.state, state)
        transit = TxnTransitMetadata(
            producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, partitions,
            start_timestamp, update_timestamp,
        )
        return replace(self, pending_state=state), transit

    def prepare_fence_producer_epoch(self) -> tuple[TransactionMetadata, TxnTransitMetadata]:
        """Bump the epoch of an Ongoing transaction so its producer is fenced before it is aborted."""
        if self.producer_epoch == MAX_EPOCH:
            raise IllegalStateTransition("cannot fence a producer at epoch Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.txn_timeout_ms,
            self.partitions, self.txn_start_timestamp, self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> tuple[TransactionMetadata, TxnTransitMetadata] | None:
        """InitProducerId on an idle id: the next epoch, or None when `expected_epoch` is fenced
        (PRODUCER_FENCED). A retry with the previous epoch gets the current one again (KIP-360)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalStateTransition(f"no more epochs for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump the producer never heard about; a new producer would have reset it
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(S.EMPTY, self.producer_id, epoch, last_epoch, timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> tuple[TransactionMetadata, TxnTransitMetadata]:
        if self.has_pending_transaction:
            raise IllegalStateTransition("cannot rotate producer ids while a transaction is pending")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, new_producer_id, 0, last_epoch, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(
        self, added: frozenset[TopicPartition], now_ms: int
    ) -> tuple[TransactionMetadata, TxnTransitMetadata]:
        # the first partition starts the transaction (and its timeout)
        idle = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        start = now_ms if idle else self.txn_start_timestamp
        return self._prepare(
            S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            self.partitions | added, start, now_ms,
        )

    def prepare_abort_or_commit(
        self, state: TransactionState, now_ms: int
    ) -> tuple[TransactionMetadata, TxnTransitMetadata]:
        return self._prepare(
            state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            self.partitions, self.txn_start_timestamp, now_ms,
        )

    def prepare_complete(self, now_ms: int) -> tuple[TransactionMetadata, TxnTransitMetadata]:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        # the Prepare record is in the log, so a fence that failed before no longer matters
        cleared = replace(self, has_failed_epoch_fence=False)
        return cleared._prepare(
            state, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            frozenset(), self.txn_start_timestamp, now_ms,
        )

    def prepare_dead(self) -> tuple[TransactionMetadata, TxnTransitMetadata]:
        return self._prepare(
            S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch, self.txn_timeout_ms,
            frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp,
        )

    def remove_partition(self, partition: TopicPartition) -> TransactionMetadata:
        """A marker was written to `partition`: it no longer waits for one (Kafka's removePartition)."""
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalStateTransition(f"removing a marked partition in state {self.state.state_name}")
        return replace(self, partitions=self.partitions - {partition})

    # --- complete: the record is in the log ------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> TransactionMetadata:
        """Apply `transit` after Kafka's checks; any failure is a coordinator bug, never a client's."""
        to = self.pending_state
        if to is None or to is not transit.state:
            raise self._failure(transit)
        same_producer = transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        changes: dict = {}
        if to is S.EMPTY:  # InitProducerId
            bump = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id
            )
            if (self.producer_epoch != transit.producer_epoch and not bump) or transit.partitions or (
                transit.txn_start_timestamp != -1
            ):
                raise self._failure(transit)
            changes = dict(
                txn_timeout_ms=transit.txn_timeout_ms, producer_epoch=transit.producer_epoch,
                last_producer_epoch=transit.last_producer_epoch, producer_id=transit.producer_id,
                last_producer_id=transit.last_producer_id,
            )
        elif to is S.ONGOING:  # AddPartitionsToTxn / AddOffsetsToTxn
            if not same_producer or not self.partitions <= transit.partitions or (
                self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                raise self._failure(transit)
            changes = dict(txn_start_timestamp=transit.txn_start_timestamp, partitions=transit.partitions)
        elif to in (S.PREPARE_COMMIT, S.PREPARE_ABORT):  # EndTxn
            if not same_producer or self.partitions != transit.partitions or (
                self.txn_timeout_ms != transit.txn_timeout_ms
                or self.txn_start_timestamp != transit.txn_start_timestamp
            ):
                raise self._failure(transit)
        elif to in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):  # every marker written
            if not same_producer or self.txn_timeout_ms != transit.txn_timeout_ms or (
                transit.txn_start_timestamp == -1
            ):
                raise self._failure(transit)
            changes = dict(txn_start_timestamp=transit.txn_start_timestamp, partitions=frozenset())
        else:
            # PrepareEpochFence is never written (the abort is); Dead ends in removal from the cache
            raise self._failure(transit)
        return replace(
            self, **changes, txn_last_update_timestamp=transit.txn_last_update_timestamp,
            pending_state=None, state=to,
        )

    def _failure(self, transit: TxnTransitMetadata) -> IllegalStateTransition:
        return IllegalStateTransition(
            f"{self.transactional_id}: cannot complete {self.state.state_name} -> {transit.state.state_name} "
            f"(pending {self.pending_state.state_name if self.pending_state else None})"
        )
