"""GroupCoordinator: the shell that owns the groups of this broker's `__consumer_offsets`
partitions — routing (which partition coordinates a group), loading them from the log when this
broker becomes their leader and dropping them when it stops, the timers, committed offsets
(commit, fetch, delete, expire), listing and deleting groups. Each group protocol is its own
module mixed in: the classic one (classic.py), the consumer protocol (consumer.py, consumer_classic.py),
share groups (share.py); transactional offset commits are txn_offsets'.

Everything here is synchronous and driven by an injected clock: join and sync answers are
delivered through callbacks when the group completes, and timeouts live in a TimerQueue that
the server polls. Group changes and commits are written as records to `__consumer_offsets`
through an OffsetsLog before they take effect, and replayed from it by `load_partition`
(offsets_replay).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group import offsets_format as fmt
from kbroker.group.classic import ClassicGroupsMixin, answer_parked_not_coordinator
from kbroker.group.consumer_classic import ClassicMembersMixin
from kbroker.group.consumer import ConsumerGroupsMixin, NoTopics, TopicSource, consumer_commit_error
from kbroker.group.metadata import GroupMetadata, OffsetAndMetadata
from kbroker.group.offsets_replay import OffsetsReplay
from kbroker.group.share import ShareGroupsMixin
from kbroker.group.state import GroupState
from kbroker.group.timers import TimerQueue
from kbroker.group.txn_offsets import TxnOffsetsMixin, drop_pending_txn_offsets
from kbroker.group.types import (  # noqa: F401
    UNKNOWN_MEMBER_ID,
    GroupConfig,
    GroupSummary,
    JoinResult,
    MemberSummary,
    OffsetsLog,
    SyncResult,
    append_error,
    java_string_hash,
    partition_for,
)
from kbroker.wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

logger = logging.getLogger(__name__)

S = GroupState
E = ErrorCode
PARTITION_CACHE_SIZE = 100_000  # group ids whose partition is remembered (then forgotten all at once)


class GroupCoordinator(ClassicGroupsMixin, ConsumerGroupsMixin, ClassicMembersMixin, ShareGroupsMixin, TxnOffsetsMixin):
    def __init__(self, config: GroupConfig, log: OffsetsLog, clock: Callable[[], int]) -> None:
        self.config = config
        self.log = log
        self.clock = clock
        self.groups: dict[str, GroupMetadata] = {}
        self.timers = TimerQueue()
        self.loading: set[int] = set()
        self.owned: set[int] | None = None  # in a cluster: the offsets partitions this broker leads
        self.active = True
        self._join_ops: dict[str, tuple] = {}  # group -> ("initial", delay, remaining) | ("delayed",)
        self._revoking: dict[tuple, int] = {}
        self.consumer_rebalances: dict[str, int] = {}
        self.consumer_rebalances_total = 0
        self.topics: TopicSource = NoTopics()  # the broker sets its metadata here
        self._partitions: dict[str, int] = {}  # group id -> its __consumer_offsets partition (a hash)
        self.share_groups: dict = {}  # group id -> share_protocol.ShareGroupState (share.py)
        self.share_member_gone: list = []  # (group id, member id) listeners: the share-partitions

    # -- routing and status -------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        cached = self._partitions.get(group_id)
        if cached is None:
            if len(self._partitions) >= PARTITION_CACHE_SIZE:
                self._partitions.clear()
            cached = self._partitions[group_id] = partition_for(group_id, self.config.offsets_topic_partitions)
        return cached

    def _validate_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None:
        if group_id is None or (not group_id and not allow_empty_id):
            return E.invalid_group_id
        if not self.active:
            return E.coordinator_not_available
        if self.owned is not None and self.partition_for(group_id) not in self.owned:
            return E.not_coordinator
        if self.partition_for(group_id) in self.loading:
            return E.coordinator_load_in_progress
        return None

    def poll(self) -> int:
        """Fire the timeouts that are due; the server calls it when `timers.next_deadline()` passes."""
        return self.timers.run_due(self.clock())

    # -- offsets ------------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[tuple[str, int], OffsetAndMetadata], api_version: int = 8
                       ) -> dict[tuple[str, int], ErrorCode]:
        def all_(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {tp: code for tp in offsets}

        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # a commit from a generation (member epoch) this group never had
                return all_(E.group_id_not_found if api_version >= 9 else E.illegal_generation)
            group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp=self.clock())
        if group.consumer is not None:
            error = consumer_commit_error(group, member_id, generation_id, api_version, transactional=False)
            return all_(error) if error is not None else self._store_offsets(group, offsets)
        if group.is_(S.DEAD):
            return all_(E.coordinator_not_available)
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.illegal_generation
            if error is not None:
                return all_(error)
        elif not group.is_(S.EMPTY):
            return all_(E.unknown_member_id)  # only members may commit for an active group
        if group.is_(S.COMPLETING_REBALANCE):
            return all_(E.rebalance_in_progress)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self._schedule_heartbeat(group, group.members[member_id])
        return self._store_offsets(group, offsets)

    def _store_offsets(self, group: GroupMetadata, offsets: dict[tuple[str, int], OffsetAndMetadata], *,
                       producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
                       ) -> dict[tuple[str, int], ErrorCode]:
        """Write the offsets in one batch: committed at once, or with a producer id pending in its
        transaction (Kafka's storeOffsets)."""
        results: dict[tuple[str, int], ErrorCode] = {}
        valid: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = E.offset_metadata_too_large
            else:
                valid[tp] = om
        if valid:
            entries = [(fmt.encode_key(fmt.OffsetKey(group.group_id, topic, partition)),
                        fmt.encode_offset_value(fmt.OffsetValue(om.offset, om.leader_epoch, om.metadata,
                                                                om.commit_timestamp, om.expire_timestamp)))
                       for (topic, partition), om in valid.items()]
            try:
                record_offset = self.log.append(self.partition_for(group.group_id), entries,
                                                producer_id=producer_id, producer_epoch=producer_epoch)
            except KafkaError as exc:
                code = append_error(exc, for_commit=True)
                results.update({tp: code for tp in valid})
            else:
                written = {tp: replace(om, record_offset=record_offset) for tp, om in valid.items()}
                if producer_id == NO_PRODUCER_ID:
                    group.offsets.update(written)  # appended last, so newer than any other
                else:
                    group.pending_txn_offsets.setdefault(producer_id, {}).update(written)
                results.update({tp: E.none for tp in valid})
        return results

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      member_id: str | None = None, member_epoch: int = -1,
                      ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetAndMetadata | None]]:
        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None and not (member_id is None and member_epoch < 0):
            member = group.consumer.members.get(member_id or "")
            if member is None:
                return E.unknown_member_id, {}
            if member.epoch != member_epoch:
                return E.stale_member_epoch, {}
        committed = group.offsets if group is not None else {}
        if partitions is None:
            return E.none, dict(committed)
        return E.none, {tp: committed.get(tp) for tp in partitions}

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                       ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        error = self._validate_status(group_id)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.group_id_not_found, {}
        results: dict[tuple[str, int], ErrorCode] = {}
        if group.consumer is not None and not group.consumer.members:
            eligible = list(partitions)
        elif group.consumer is None and group.is_(S.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == "consumer":
            eligible = [tp for tp in partitions if not group.is_subscribed_to(tp[0])]
            results.update({tp: E.group_subscribed_to_topic for tp in partitions if group.is_subscribed_to(tp[0])})
        else:
            return E.non_empty_group, {}
        if eligible:
            self._remove_offsets(group, [tp for tp in eligible if tp in group.offsets])
            drop_pending_txn_offsets(group, eligible)
            results.update({tp: E.none for tp in eligible})
        return E.none, results

    def _remove_offsets(self, group: GroupMetadata, partitions: list[tuple[str, int]]) -> None:
        if not partitions:
            return
        entries = [(fmt.encode_key(fmt.OffsetKey(group.group_id, t, p)), None) for t, p in partitions]
        self.log.append(self.partition_for(group.group_id), entries)
        for tp in partitions:
            group.offsets.pop(tp, None)

    def expire_offsets(self) -> int:
        """Drop offsets past `offsets.retention.minutes`: of an Empty group counted from when it
        became empty, of topics an active consumer group no longer subscribes to from their commit,
        of a group never managed here (simple commits) from their commit. An Empty group left
        without offsets is removed. Returns how many offsets were removed."""
        now = self.clock()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) in self.loading:
                continue
            expired = []
            for tp, om in group.offsets.items():
                if om.expire_timestamp != -1:
                    due = om.expire_timestamp <= now
                elif group.consumer is not None:  # empty, or a topic no longer subscribed to
                    due = (not group.consumer.members or not group.is_subscribed_to(tp[0])) \
                        and om.commit_timestamp + retention <= now
                elif group.protocol_type is None:
                    due = om.commit_timestamp + retention <= now
                elif group.is_(S.EMPTY):
                    base = group.state_timestamp if group.state_timestamp >= 0 else om.commit_timestamp
                    due = base + retention <= now
                elif group.protocol_type == "consumer" and group.subscribed_topics is not None \
                        and group.is_(S.STABLE):
                    due = tp[0] not in group.subscribed_topics and om.commit_timestamp + retention <= now
                else:
                    due = False
                if due:
                    expired.append(tp)
            try:
                self._remove_offsets(group, expired)
            except KafkaError as exc:
                logger.warning("could not expire offsets of group %s: %s", group.group_id, exc)
                continue
            removed += len(expired)
            if group.is_(S.EMPTY) and not group.offsets and not group.members and not group.pending_txn_offsets \
                    and (group.consumer is None or not group.consumer.members):
                self._delete_group(group)
        return removed

    # -- list / describe / delete -------------------------------------------------------------------
    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None
                    ) -> tuple[ErrorCode, list[tuple[str, str, str, str]]]:
        """(group id, protocol type, state, group type) of each group, filtered by state and type
        names (case-insensitively, as Kafka)."""
        if not self.active:
            return E.coordinator_not_available, []
        error = E.coordinator_load_in_progress if self.loading else E.none
        wanted = {s.lower() for s in states} if states else None
        kinds = {t.lower() for t in types} if types else None
        out = []
        for g in self.groups.values():
            state = g.consumer.state_name() if g.consumer is not None else g.state.value
            if (wanted is None or state.lower() in wanted) and (kinds is None or g.group_type in kinds):
                out.append((g.group_id, g.protocol_type or "", state, g.group_type))
        for group_id, share in self.share_groups.items():  # Kafka lists them as type and protocol "share"
            state = share.state_name()
            if share.exists and (wanted is None or state.lower() in wanted) and (kinds is None or "share" in kinds):
                out.append((group_id, "share", state, "share"))
        return error, out

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results = {}
        for group_id in group_ids:
            error = self._validate_status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(S.DEAD) or (group.consumer is not None and group.consumer.deleted):
                results[group_id] = E.group_id_not_found
            elif not group.is_(S.EMPTY) or (group.consumer is not None and group.consumer.members):
                results[group_id] = E.non_empty_group
            else:
                try:
                    self._delete_group(group)
                    results[group_id] = E.none
                except KafkaError as exc:
                    results[group_id] = append_error(exc, for_commit=False)
        return results

    def _delete_group(self, group: GroupMetadata) -> None:
        entries = [(fmt.encode_key(fmt.OffsetKey(group.group_id, t, p)), None) for t, p in group.offsets]
        entries.append((fmt.encode_key(fmt.GroupMetadataKey(group.group_id)), None))
        entries += self.consumer_group_records(group.group_id)
        self.log.append(self.partition_for(group.group_id), entries)
        group.transition_to(S.DEAD, self.clock())
        group.offsets.clear()
        del self.groups[group.group_id]
        self._join_ops.pop(group.group_id, None)
        self.consumer_rebalances.pop(group.group_id, None)
        self.timers.cancel(("join", group.group_id))

    def remove_offsets_of_topic(self, topic: str) -> None:
        """A deleted topic takes its committed offsets with it (Kafka's handleDeletedPartitions)."""
        for group in list(self.groups.values()):
            gone = [tp for tp in group.offsets if tp[0] == topic]
            try:
                self._remove_offsets(group, gone)
            except KafkaError as exc:
                logger.warning("could not remove offsets of %s for group %s: %s", topic, group.group_id, exc)
            drop_pending_txn_offsets(group, [tp for pending in group.pending_txn_offsets.values()
                                             for tp in pending if tp[0] == topic])

    # -- persistence --------------------------------------------------------------------------------
    def load_partition(self, partition: int) -> int:
        """Replay one `__consumer_offsets` partition (offsets_replay). Groups come back Stable with
        their members (who keep heartbeating) or Empty, with their open transactions' offsets."""
        self.loading.add(partition)
        try:
            replay = OffsetsReplay(partition, self.topics.topic_name)
            for batch in self.log.read_batches(partition):
                replay.apply(batch)
            for group_id in replay.group_ids():
                if self.partition_for(group_id) != partition:
                    continue
                value = replay.metadata.get(group_id)
                offsets, pending = replay.committed_of(group_id), replay.pending_of(group_id)
                consumer = replay.consumer.get(group_id)
                if consumer is not None and consumer.deleted:
                    consumer = None
                if value is None and not offsets and not pending and consumer is None:
                    continue
                group = self.groups[group_id] = self._restore_group(group_id, value if consumer is None else None,
                                                                    offsets)
                group.pending_txn_offsets = pending
                if consumer is not None:
                    self._restore_consumer_group(group, consumer)
            return sum(1 for g in self.groups if self.partition_for(g) == partition)
        finally:
            self.loading.discard(partition)

    def become_leader(self, partition: int) -> int:
        """This broker now leads `__consumer_offsets-<partition>`: its groups come back from the log."""
        if self.owned is None:
            self.owned = set()
        self.unload_partition(partition)
        loaded = self.load_partition(partition)
        self.owned.add(partition)
        return loaded

    def unload_partition(self, partition: int) -> None:
        """Another broker coordinates these groups now: members parked in a join or sync are told
        NOT_COORDINATOR and look the coordinator up again; the groups are dropped here."""
        if self.owned is not None:
            self.owned.discard(partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            self._join_ops.pop(group_id, None)
            self.consumer_rebalances.pop(group_id, None)
            answer_parked_not_coordinator(self.groups.pop(group_id))
        for group_id in [g for g in self.share_groups if self.partition_for(g) == partition]:
            for member_id in self.share_groups.pop(group_id).members:  # in memory only (share.py)
                self.timers.cancel(("shb", group_id, member_id))

    def shutdown(self) -> None:
        """Stop coordinating: parked joins and syncs are answered NOT_COORDINATOR (as when Kafka
        unloads a group), so clients look for the coordinator again instead of holding a
        connection open through the broker's shutdown; the groups reload from the log on start."""
        self.active = False
        for group in self.groups.values():
            answer_parked_not_coordinator(group)
        self._join_ops.clear()
        self.timers = TimerQueue()

