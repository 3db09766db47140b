"""The transaction coordinator's decisions, as pure functions of a transactional id's metadata
(Kafka 3.9's TransactionCoordinator and the checks KafkaApis makes around it).

Each request gives a `Decision`: the cache entry to keep now (pending state set), the record to
append to `__transaction_state`, the error to answer once that append succeeded (at once if there
is nothing to append). When the append returns, `after_append` completes the transition — and for
a PrepareCommit/PrepareAbort record it already prepares the Complete one and names the markers to
send; when every marker is written the shell appends `complete` and calls `after_append` again.

What stays with the shell (not here): finding the id's `__transaction_state` partition and
answering NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, allocating producer ids, appending,
sending markers, scheduling the periodic timeout and expiration scans.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group.coordinator import partition_for as group_partition_for
from kbroker.txn.log_format import UnknownRecordTypeError, decode_key, decode_value
from kbroker.txn.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kbroker.txn.state import EXPIRATION_ALLOWED, IllegalStateTransition, TransactionState

E = ErrorCode
S = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"

# requests older than these cannot read PRODUCER_FENCED: Kafka answers INVALID_PRODUCER_EPOCH
_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2}  # InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn


@dataclass(frozen=True)
class TransactionConfig:
    """Kafka's defaults for the transaction.* broker configs."""

    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    transaction_max_timeout_ms: int = 15 * 60 * 1000
    transaction_state_partitions: int = 50  # transaction.state.log.num.partitions
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3600 * 1000
    offsets_topic_partitions: int = 50  # where AddOffsetsToTxn's group commits its offsets


@dataclass(frozen=True)
class TxnMarkers:
    """WriteTxnMarkers to send: one marker per partition, all with this producer, epoch and result."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class Decision:
    error: ErrorCode = E.none  # the answer once `write` is appended (at once without a write)
    metadata: TransactionMetadata | None = None  # the cache entry from now on; None: unchanged
    write: TxnTransitMetadata | None = None  # the record to append for the id
    producer_id: int = NO_PRODUCER_ID  # InitProducerId's answer
    producer_epoch: int = NO_PRODUCER_EPOCH
    is_epoch_fence: bool = False  # a failed write of it leaves `has_failed_epoch_fence` set


@dataclass(frozen=True)
class AppendOutcome:
    error: ErrorCode  # replaces the decision's answer when not NONE
    metadata: TransactionMetadata | None  # the cache entry now; None: remove the id (expired)
    markers: TxnMarkers | None = None  # send these, then append `complete`
    complete: TxnTransitMetadata | None = None
    partition_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The id's `__transaction_state` partition: Utils.abs(String.hashCode) % partitions, as Kafka."""
    return group_partition_for(transactional_id, num_partitions)  # the same hash as groups


def offsets_partition_for(group_id: str, config: TransactionConfig) -> TopicPartition:
    """The `__consumer_offsets` partition AddOffsetsToTxn adds: the one the group commits to."""
    return (OFFSETS_TOPIC, group_partition_for(group_id, config.offsets_topic_partitions))


def error_for_version(api_key: int, version: int, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for clients too old to know it (KafkaApis)."""
    if error is E.producer_fenced and version < _FENCED_SINCE.get(api_key, 0):
        return E.invalid_producer_epoch
    return error


def coordinator_error_for_append(error: ErrorCode) -> ErrorCode:
    """What a failed `__transaction_state` append tells the client (TransactionStateManager)."""
    if error in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append,
                 E.request_timed_out):
        return E.coordinator_not_available
    if error in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if error in (E.message_too_large, E.record_list_too_large):
        return E.unknown_server_error
    return error


def _error(error: ErrorCode) -> Decision:
    return Decision(error=error)


# --- InitProducerId ----------------------------------------------------------------------------


def init_producer_id(
    current: TransactionMetadata | None,
    transactional_id: str | None,
    txn_timeout_ms: int,
    expected: tuple[int, int] | None,
    *,
    allocate_producer_id: Callable[[], int],
    config: TransactionConfig,
    coordinator_epoch: int,
    now_ms: int,
) -> Decision:
    """`expected` is the request's (producer id, epoch) when not (-1, -1) (KIP-360 recovery).
    `allocate_producer_id` may raise a KafkaError, whose code is answered."""
    if expected is not None and (expected[0] == NO_PRODUCER_ID) != (expected[1] == NO_PRODUCER_EPOCH):
        return _error(E.invalid_request)
    if expected == (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
        expected = None
    if transactional_id is None:  # an idempotent producer: a fresh id, nothing stored
        try:
            return Decision(producer_id=allocate_producer_id(), producer_epoch=0)
        except KafkaError as exc:
            return _error(exc.code)
    if not transactional_id:
        return _error(E.invalid_request)
    if not 0 < txn_timeout_ms <= config.transaction_max_timeout_ms:
        return _error(E.invalid_transaction_timeout)
    created = None
    if current is None:
        try:
            producer_id = allocate_producer_id()
        except KafkaError as exc:
            return _error(exc.code)
        # kept in the cache even if the first write fails, as Kafka does
        current = created = TransactionMetadata(
            transactional_id, producer_id, txn_timeout_ms, now_ms, coordinator_epoch=coordinator_epoch,
        )
    decision = _init_transit(current, txn_timeout_ms, expected, allocate_producer_id, now_ms)
    if created is not None and decision.metadata is None:
        decision = replace(decision, metadata=created)
    return decision


def _init_transit(
    md: TransactionMetadata,
    txn_timeout_ms: int,
    expected: tuple[int, int] | None,
    allocate_producer_id: Callable[[], int],
    now_ms: int,
) -> Decision:
    if md.pending_transition_in_progress:
        return _error(E.concurrent_transactions)
    if expected is not None and not (
        md.producer_epoch == NO_PRODUCER_EPOCH  # just created: recovering from UNKNOWN_PRODUCER_ID
        or expected[0] == md.producer_id  # the epoch is checked when bumping
        or (expected[0] == md.last_producer_id and is_epoch_exhausted(expected[1]))  # retry of a rotation
    ):
        return _error(E.producer_fenced)
    if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
        return _error(E.concurrent_transactions)
    if md.state is S.ONGOING:
        if md.producer_epoch == MAX_EPOCH:
            # only after a failed fence from epoch 32766; Kafka's fence throws, answered as this
            return _error(E.unknown_server_error)
        # abort it under a bumped epoch first; the client retries and bumps again (or rotates)
        return _fence_and_abort(md, now_ms, answer=E.concurrent_transactions)
    if md.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
        if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
            try:
                new_id = allocate_producer_id()
            except KafkaError as exc:
                return _error(exc.code)
            pending, transit = md.prepare_producer_id_rotation(new_id, txn_timeout_ms, now_ms, expected is not None)
        elif md.is_producer_epoch_exhausted:
            # an exhausted epoch and another expected one (a stale producer): Kafka's
            # prepareIncrementProducerEpoch throws, which its handler answers as this
            return _error(E.unknown_server_error)
        else:
            prepared = md.prepare_increment_producer_epoch(
                txn_timeout_ms, None if expected is None else expected[1], now_ms
            )
            if prepared is None:
                return _error(E.producer_fenced)
            pending, transit = prepared
        return Decision(metadata=pending, write=transit, producer_id=transit.producer_id,
                        producer_epoch=transit.producer_epoch)
    raise IllegalStateTransition(f"{md.transactional_id} found in state {md.state.state_name}")


def _fence_and_abort(md: TransactionMetadata, now_ms: int, answer: ErrorCode) -> Decision:
    """Kafka's prepareFenceProducerEpoch followed by an abort not from the client: PrepareAbort is
    written under the bumped epoch (last epoch forgotten), fencing the transaction's producer."""
    fenced, fence = md.prepare_fence_producer_epoch()
    bumped = replace(fenced, pending_state=None, producer_epoch=fence.producer_epoch,
                     last_producer_epoch=NO_PRODUCER_EPOCH)
    pending, transit = bumped.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms)
    return Decision(error=answer, metadata=pending, write=transit, is_epoch_fence=True)


# --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------


def _check_producer(md: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode | None:
    if md is None or md.producer_id != producer_id:
        return E.invalid_producer_id_mapping
    if md.producer_epoch != producer_epoch:
        return E.producer_fenced
    return None


def add_partitions(
    current: TransactionMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    *,
    now_ms: int,
) -> Decision:
    """AddPartitionsToTxn (and AddOffsetsToTxn with `offsets_partition_for`'s partition)."""
    if not transactional_id:
        return _error(E.invalid_request)
    error = _check_producer(current, producer_id, producer_epoch)
    if error is not None:
        return _error(error)
    assert current is not None
    if current.pending_transition_in_progress or current.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return _error(E.concurrent_transactions)
    added = frozenset(partitions)
    if current.state is S.ONGOING and added <= current.partitions:
        return _error(E.none)  # nothing new: no write
    pending, transit = current.prepare_add_partitions(added, now_ms)
    return Decision(metadata=pending, write=transit)


def add_offsets(
    current: TransactionMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
    *,
    config: TransactionConfig,
    now_ms: int,
) -> Decision:
    return add_partitions(current, transactional_id, producer_id, producer_epoch,
                          [offsets_partition_for(group_id, config)], now_ms=now_ms)


def verify_partitions(
    current: TransactionMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn v4's verify-only mode (KIP-890, from other brokers): which partitions are
    in the transaction; nothing changes, the pending state is not looked at (the append checks)."""
    wanted = list(partitions)
    if not transactional_id:
        return dict.fromkeys(wanted, E.invalid_request)
    error = _check_producer(current, producer_id, producer_epoch)
    if error is None and current is not None and current.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        error = E.concurrent_transactions
    if error is not None:
        return dict.fromkeys(wanted, error)
    assert current is not None
    return {tp: E.none if tp in current.partitions else E.transaction_abortable for tp in wanted}


# --- EndTxn ------------------------------------------------------------------------------------


def end_txn(
    current: TransactionMetadata | None,
    transactional_id: str | None,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    *,
    now_ms: int,
) -> Decision:
    """EndTxn from the client: Ongoing -> PrepareCommit/PrepareAbort. A retry after the transaction
    completed the same way answers NONE; while it completes, CONCURRENT_TRANSACTIONS."""
    if not transactional_id:
        return _error(E.invalid_request)
    if current is None or current.producer_id != producer_id:
        return _error(E.invalid_producer_id_mapping)
    if producer_epoch != current.producer_epoch:  # clients never bump the epoch here
        return _error(E.producer_fenced)
    if current.pending_transition_in_progress:
        return _error(E.concurrent_transactions)
    state = current.state
    if state is S.ONGOING:
        pending, transit = current.prepare_abort_or_commit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms)
        return Decision(metadata=pending, write=transit)
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return _error(E.none if commit == (state is S.COMPLETE_COMMIT) else E.invalid_txn_state)
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return _error(E.concurrent_transactions if commit == (state is S.PREPARE_COMMIT) else E.invalid_txn_state)
    if state is S.EMPTY:
        return _error(E.invalid_txn_state)
    raise IllegalStateTransition(f"{current.transactional_id} found in state {state.state_name}")


# --- after the append --------------------------------------------------------------------------


def after_append(
    current: TransactionMetadata | None,
    written: TxnTransitMetadata,
    coordinator_epoch: int,
    append_error: ErrorCode,
    *,
    now_ms: int,
    is_epoch_fence: bool = False,
    keep_pending_on_error: bool = False,
) -> AppendOutcome:
    """`current` is the cache entry when the append returned (None: gone), `coordinator_epoch` the
    one the write was made under. A Prepare record that landed yields the markers to send and the
    Complete record to write after them; a tombstone that landed removes the id."""
    if append_error is not E.none:
        error = coordinator_error_for_append(append_error)
        if current is None or current.coordinator_epoch != coordinator_epoch:
            return AppendOutcome(error, current)
        if written.state is S.DEAD:  # the expiration failed: the id stays as it was
            return AppendOutcome(error, replace(current, pending_state=None))
        updated = current if keep_pending_on_error else replace(current, pending_state=None)
        if is_epoch_fence:
            updated = replace(updated, has_failed_epoch_fence=True)  # the bumped epoch stays, unseen
        return AppendOutcome(error, updated)
    if current is None or current.coordinator_epoch != coordinator_epoch:
        # the partition moved away (and maybe back) meanwhile: the client finds the coordinator again
        return AppendOutcome(E.not_coordinator, current)
    if written.state is S.DEAD:
        if current.pending_state is S.DEAD and current.producer_epoch == written.producer_epoch:
            return AppendOutcome(E.none, None)
        return AppendOutcome(E.none, replace(current, pending_state=None))
    done = current.complete_transition_to(written)
    if done.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return _begin_markers(done, now_ms)
    return AppendOutcome(E.none, done)


def _begin_markers(md: TransactionMetadata, now_ms: int) -> AppendOutcome:
    markers = TxnMarkers(md.transactional_id, md.producer_id, md.producer_epoch, md.coordinator_epoch,
                         md.state is S.PREPARE_COMMIT, md.partitions)
    pending, complete = md.prepare_complete(now_ms)
    return AppendOutcome(E.none, pending, markers=markers, complete=complete)


def marker_written(current: TransactionMetadata, partition: TopicPartition) -> TransactionMetadata:
    """A partition acknowledged its marker (or no longer exists): it is no longer waited for."""
    return current.remove_partition(partition)


# --- loading, timeouts, expiration -------------------------------------------------------------


def load_transactions(
    records: Iterable[tuple[bytes | None, bytes | None]], coordinator_epoch: int
) -> dict[str, TransactionMetadata]:
    """Replay a `__transaction_state` partition's (key, value) records, oldest first: the newest
    value per id wins, a tombstone removes it, unknown key versions are skipped (as Kafka)."""
    loaded: dict[str, TransactionMetadata] = {}
    for key, value in records:
        if key is None:
            continue
        try:
            transactional_id = decode_key(key)
        except UnknownRecordTypeError:
            continue
        decoded = decode_value(value)
        if decoded is None:
            loaded.pop(transactional_id, None)
        else:
            loaded[transactional_id] = TransactionMetadata.from_log_value(transactional_id, decoded, coordinator_epoch)
    return loaded


def completions_after_load(loaded: Iterable[TransactionMetadata], now_ms: int) -> list[AppendOutcome]:
    """Transactions a previous coordinator left in PrepareCommit/PrepareAbort: send their markers
    again and complete them (Kafka does this when it loads a partition)."""
    return [_begin_markers(md, now_ms) for md in loaded
            if md.pending_state is None and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]


def timed_out_transactions(entries: Iterable[TransactionMetadata], now_ms: int) -> list[TransactionMetadata]:
    """Ongoing transactions open longer than their timeout (and not already changing)."""
    return [md for md in entries if md.pending_state is None and md.state is S.ONGOING
            and md.txn_start_timestamp + md.txn_timeout_ms < now_ms]


def abort_timed_out(current: TransactionMetadata | None, producer_id: int, *, now_ms: int) -> Decision | None:
    """Kafka's abortTimedOutTransactions for one id found by `timed_out_transactions`: bump the epoch
    (fencing the producer) and abort. None when the id changed since the scan."""
    if current is None or current.producer_id != producer_id or current.pending_transition_in_progress:
        return None
    if current.state is not S.ONGOING:
        return None  # completed between the scan and now (Kafka's endTransaction would refuse it)
    if current.producer_epoch == MAX_EPOCH:
        return None  # Kafka's fence throws here and the scan moves on
    return _fence_and_abort(current, now_ms, answer=E.none)


def expired_transactional_ids(
    entries: Iterable[TransactionMetadata], now_ms: int, config: TransactionConfig
) -> list[TransactionMetadata]:
    """Idle ids (Empty, CompleteCommit, CompleteAbort) not updated for transactional.id.expiration.ms."""
    return [md for md in entries if md.pending_state is None and md.state in EXPIRATION_ALLOWED
            and md.txn_last_update_timestamp <= now_ms - config.transactional_id_expiration_ms]


def expire(current: TransactionMetadata) -> Decision:
    """Write the id's tombstone (the transit's `to_log_value()` is None) and drop it once written."""
    pending, transit = current.prepare_dead()
    return Decision(metadata=pending, write=transit)
