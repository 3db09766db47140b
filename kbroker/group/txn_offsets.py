"""Transactional offset commits (TxnOffsetCommit), mixed into GroupCoordinator: the group side of
exactly-once, after Kafka's GroupCoordinator.handleTxnCommitOffsets and
GroupMetadata.pendingTransactionalOffsetCommits.

A transaction's offsets are written to the group's `__consumer_offsets` partition as one
transactional batch of its producer and pend, per producer id, until the transaction's marker is
written to that partition: COMMIT makes them the group's committed offsets, ABORT drops them.
Until then OffsetFetch does not see them (with `require_stable` it answers UNSTABLE_OFFSET_COMMIT
for their partitions) and the group is not removed as empty.

The order rule (Kafka's CommitRecordMetadataAndOffset): a committed transaction's offset replaces
the committed one only if its record was appended after it, so a plain commit written while the
transaction was open is not overwritten by it — in memory and when the log is replayed alike.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import TypeVar

from kbroker.errors import ErrorCode
from kbroker.group.consumer import consumer_commit_error
from kbroker.group.metadata import GroupMetadata, OffsetAndMetadata
from kbroker.group.state import GroupState

E = ErrorCode
K = TypeVar("K")
TopicPartitionKey = tuple[str, int]


def materialize(committed: MutableMapping[K, OffsetAndMetadata], pending: dict[K, OffsetAndMetadata]) -> None:
    """A committed transaction's offsets join `committed`, each only where the current one was
    appended before it (Kafka's completePendingTxnOffsetCommit)."""
    for key, offset in pending.items():
        current = committed.get(key)
        if current is None or current.record_offset < offset.record_offset:
            committed[key] = offset


def drop_pending_txn_offsets(group: GroupMetadata, partitions: Iterable[TopicPartitionKey]) -> None:
    """Deleted offsets take a transaction's pending ones along (Kafka's removeOffsets). The
    producer's entry stays, even emptied, until its marker: the group is kept until then too."""
    doomed = set(partitions)
    for pending in group.pending_txn_offsets.values():
        for tp in doomed & pending.keys():
            del pending[tp]


class TxnOffsetsMixin:
    """Needs GroupCoordinator's `groups`, `clock`, `partition_for`, `_validate_status`,
    `_validate_current_member` and `_store_offsets`."""

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           group_instance_id: str | None, generation_id: int,
                           offsets: dict[TopicPartitionKey, OffsetAndMetadata]
                           ) -> dict[TopicPartitionKey, ErrorCode]:
        """Write `offsets` as the producer's transactional batch; they pend until
        `complete_transaction`. An epoch older than the producer's last one in the partition is
        INVALID_PRODUCER_EPOCH (Kafka answers it at every version). Unlike OffsetCommit, a
        commit during a rebalance is accepted, and one without member and generation (all
        TxnOffsetCommit requests before v3) is never refused for a non-empty group."""
        error = self._validate_status(group_id)
        if error is None:
            group = self.groups.get(group_id)
            if group is None:  # Kafka creates it here, before validating
                group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp=self.clock())
            error = self._validate_txn_commit(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return {tp: error for tp in offsets}
        return self._store_offsets(group, offsets, producer_id=producer_id, producer_epoch=producer_epoch)

    def _validate_txn_commit(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                             generation_id: int) -> ErrorCode | None:
        """Kafka's validateOffsetCommit with isTransactional: members are checked only when the
        request names one (member id, instance id or a generation)."""
        if group.is_(GroupState.DEAD):
            return E.coordinator_not_available
        if group.consumer is not None:  # a consumer-protocol group: its member at its epoch
            error = consumer_commit_error(group, member_id, generation_id, 9, transactional=True)
            return E.illegal_generation if error == E.stale_member_epoch else error
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.illegal_generation
            return error
        return None

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The COMMIT (`commit` true) or ABORT marker of `producer_id` was written to
        `__consumer_offsets-<offsets_partition>`: the producer's pending offsets in that partition's
        groups become committed (by the order rule) or are dropped (Kafka's handleTxnCompletion).
        A group that is not loaded here gets the marker from the log when it loads."""
        for group in list(self.groups.values()):
            if producer_id not in group.pending_txn_offsets or group.is_(GroupState.DEAD):
                continue
            if self.partition_for(group.group_id) != offsets_partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id)
            if commit:
                materialize(group.offsets, pending)

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartitionKey]) -> set[TopicPartitionKey]:
        """Those of `partitions` with a transaction's offsets pending in the group (Kafka's
        hasPendingOffsetCommitsForTopicPartition): OffsetFetch with require_stable refuses them."""
        group = self.groups.get(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        return {tp for tp in partitions if any(tp in pending for pending in group.pending_txn_offsets.values())}
