"""The consumer group protocol's shell (KIP-848), mixed into GroupCoordinator: a heartbeat's
decision (consumer_protocol, pure) is appended to `__consumer_offsets` as Kafka's records
(consumer_records), then applied to the group's state; a member's session and rebalance timeouts
live in the coordinator's TimerQueue.

A group is one type at a time: a consumer heartbeat turns an empty classic group into a consumer
group (its committed offsets stay), and a classic group with members answers GROUP_ID_NOT_FOUND
("not a consumer group"), as Kafka does without a migration.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group import assignors
from kbroker.group import consumer_protocol as cp
from kbroker.group import consumer_records
from kbroker.group import dynamic_configs
from kbroker.group.consumer_state import (LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerGroupState, GroupEpoch, MemberState,
                                          Record, apply)
from kbroker.group.metadata import GroupMetadata
from kbroker.group.state import GroupState
from kbroker.group.timers import TimerQueue
from kbroker.group.types import GroupConfig, OffsetsLog, append_error

logger = logging.getLogger(__name__)

E = ErrorCode


class TopicSource(Protocol):
    """What the coordinator asks of the cluster's metadata about topics."""

    def partition_counts(self) -> Mapping[str, int]: ...
    def topic_id(self, name: str) -> uuid.UUID | None: ...
    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...
    def internal_topics(self) -> frozenset[str]: ...
    def partition_racks(self, topic: str, partition: int) -> frozenset[str]: ...


class NoTopics:
    def partition_counts(self) -> Mapping[str, int]:
        return {}

    def topic_id(self, name: str) -> uuid.UUID | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None

    def internal_topics(self) -> frozenset[str]:
        return frozenset()

    def partition_racks(self, topic: str, partition: int) -> frozenset[str]:
        return frozenset()


@dataclass
class HeartbeatResult:
    response: cp.HeartbeatResponse
    wrote: bool  # records were appended (a cluster waits for their replication before answering)


class ConsumerGroupsMixin:
    config: GroupConfig
    log: OffsetsLog
    clock: Callable[[], int]
    groups: dict[str, GroupMetadata]
    timers: TimerQueue
    topics: TopicSource
    _revoking: dict[tuple, int]  # ("crb", group, member) -> the epoch its rebalance timer is for
    # Group epoch bumps this coordinator made (Kafka's consumer-group-rebalance-count), per group while
    # it coordinates the group, and in all since start; replaying the log on load does not count.
    consumer_rebalances: dict[str, int]
    consumer_rebalances_total: int
    # a group's own configs (KIP-848's GROUP resource, as stored: key -> value), set by the broker;
    # None: every group has the broker's group.consumer.* values
    group_configs: Callable[[str], Mapping[str, str]] | None = None

    if TYPE_CHECKING:
        def _validate_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None: ...
        def partition_for(self, group_id: str) -> int: ...
        def can_upgrade(self, group: GroupMetadata) -> bool: ...
        def upgrade_to_consumer_group(self, group: GroupMetadata) -> None: ...
        def should_downgrade(self, state: ConsumerGroupState, leaving: str) -> bool: ...
        def downgrade_to_classic_group(self, group: GroupMetadata, leaving: str) -> None: ...
        def remove_consumer_member(self, group_id: str, member_id: str) -> None: ...
        def is_share_group(self, group_id: str) -> bool: ...

    def consumer_timeouts(self, group_id: str) -> dynamic_configs.GroupTimeouts:
        """The group's heartbeat interval and session timeout: its own configs', else the broker's."""
        stored = self.group_configs(group_id) if self.group_configs is not None else None
        return dynamic_configs.timeouts(self.config, stored)

    def consumer_env(self, group_id: str | None = None,
                     timeouts: dynamic_configs.GroupTimeouts | None = None) -> cp.GroupEnv:
        c = self.config
        t = timeouts or (self.consumer_timeouts(group_id) if group_id is not None else
                         dynamic_configs.GroupTimeouts(c.consumer_heartbeat_interval_ms, c.consumer_session_timeout_ms))
        return cp.GroupEnv(self.clock(), self.topics.partition_counts(), t.heartbeat_interval_ms,
                           t.session_timeout_ms, c.consumer_max_size, c.consumer_assignors,
                           self.topics.partition_racks, self.topics.internal_topics())

    def consumer_group_heartbeat(self, group_id: str, request: cp.HeartbeatRequest, version: int) -> HeartbeatResult:
        def failed(code: ErrorCode, message: str | None = None) -> HeartbeatResult:
            return HeartbeatResult(cp.HeartbeatResponse(request.member_id, request.member_epoch, 0, None, code,
                                                        message), False)

        error = self._validate_status(group_id)
        if error is not None:
            return failed(error)
        if "consumer" not in self.config.rebalance_protocols:
            return failed(E.unsupported_version, "The consumer group protocol is not enabled "
                          "(group.coordinator.rebalance.protocols).")
        try:
            cp.validate(request, group_id, version, self.config.consumer_assignors)
            if self.is_share_group(group_id):
                raise cp.GroupError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
            group = self.groups.get(group_id)
            if group is not None and group.consumer is None and (group.members or not group.is_(GroupState.EMPTY)):
                if request.member_epoch != 0 or not self.can_upgrade(group):
                    raise cp.GroupError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
                self.upgrade_to_consumer_group(group)
            state = group.consumer if group is not None and group.consumer is not None else ConsumerGroupState(group_id)
            leaving = self._leaving_member(state, request)
            if leaving is not None and self.should_downgrade(state, leaving):
                assert group is not None
                self.downgrade_to_classic_group(group, leaving)
                return HeartbeatResult(cp.HeartbeatResponse(request.member_id, request.member_epoch), True)
            timeouts = self.consumer_timeouts(group_id)
            decision = cp.heartbeat(state, request, self.consumer_env(group_id, timeouts))
        except cp.GroupError as exc:
            return failed(exc.code, exc.message)
        except KafkaError as exc:  # an upgrade or downgrade could not be written
            return failed(exc.code if exc.code == E.group_id_not_found else append_error(exc, for_commit=False),
                          str(exc))
        try:
            self._commit_consumer_records(group_id, decision.records)
        except KafkaError as exc:
            return failed(append_error(exc, for_commit=False))
        self._consumer_timers(group_id, decision, request, timeouts.session_timeout_ms)
        assert decision.response is not None
        return HeartbeatResult(decision.response, bool(decision.records))

    @staticmethod
    def _leaving_member(state: ConsumerGroupState, request: cp.HeartbeatRequest) -> str | None:
        """The member a leave heartbeat (epoch -1) removes for good, if it is one of the group's."""
        if request.member_epoch != LEAVE_EPOCH:
            return None
        if request.instance_id is not None:
            mid = state.static_members.get(request.instance_id)
            return mid if mid == request.member_id else None
        return request.member_id if request.member_id in state.members else None

    def describe_consumer_group(self, group_id: str) -> tuple[ErrorCode, str | None, ConsumerGroupState | None]:
        """(error, message, the group's state) for ConsumerGroupDescribe."""
        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, None, None
        group = self.groups.get(group_id)
        code, message = describe_error(group, group_id)
        if code != E.none or group is None:
            return code, message, None
        return E.none, None, group.consumer

    def preferred_assignor_name(self, state: ConsumerGroupState) -> str:
        chosen = assignors.preferred_assignor([m.subscription.server_assignor for m in state.members.values()],
                                              assignors.configured_assignors(self.config.consumer_assignors))
        return chosen.name

    # -- records --------------------------------------------------------------------------------------
    def _commit_consumer_records(self, group_id: str, records: list[Record]) -> None:
        """Append, then apply: the group changes only once its records are in the log."""
        if not records:
            return
        entries = consumer_records.encode_all(group_id, records, self.topics.topic_id)
        self.log.append(self.partition_for(group_id), entries)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp=self.clock())
        if group.consumer is None:
            group.consumer = ConsumerGroupState(group_id)
            group.protocol_type = "consumer"
        for record in records:
            if isinstance(record, GroupEpoch) and record.epoch is not None and record.epoch > group.consumer.epoch:
                self.consumer_rebalances[group_id] = self.consumer_rebalances.get(group_id, 0) + 1
                self.consumer_rebalances_total += 1
            apply(group.consumer, record)

    # -- timers ---------------------------------------------------------------------------------------
    def _consumer_timers(self, group_id: str, decision: cp.Decision, request: cp.HeartbeatRequest,
                         session_timeout_ms: int) -> None:
        for member_id in decision.removed:
            self.timers.cancel(("chb", group_id, member_id))
            self.timers.cancel(("crb", group_id, member_id))
        group = self.groups.get(group_id)
        if group is None or group.consumer is None:
            return
        response = decision.response
        member_id = response.member_id if response is not None else request.member_id
        member = group.consumer.members.get(member_id)
        if member is None or member.epoch == STATIC_LEAVE_EPOCH:
            return  # gone, or a static member away: its session timer (not renewed) ends it
        now = self.clock()
        classic = member.subscription.classic
        session_ms = classic.session_timeout_ms if classic is not None else session_timeout_ms
        self.timers.schedule(("chb", group_id, member_id), now + session_ms,
                             lambda: self._consumer_session_expired(group_id, member_id))
        if member.current.state == MemberState.UNREVOKED_PARTITIONS:
            key = ("crb", group_id, member_id)
            epoch = member.epoch
            if self._revoking.get(key) != epoch:
                self._revoking[key] = epoch
                timeout = max(member.subscription.rebalance_timeout_ms, 0)
                self.timers.schedule(key, now + timeout, lambda: self._consumer_rebalance_expired(
                    group_id, member_id, epoch))
        else:
            self._revoking.pop(("crb", group_id, member_id), None)
            self.timers.cancel(("crb", group_id, member_id))

    def _consumer_session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.consumer is None:
            return
        logger.info("member %s of consumer group %s missed its session timeout; fencing it", member_id, group_id)
        self._remove_logged(group_id, member_id)

    def _consumer_rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        self._revoking.pop(("crb", group_id, member_id), None)
        group = self.groups.get(group_id)
        if group is None or group.consumer is None:
            return
        if cp.rebalance_expired(group.consumer, member_id, epoch).records:
            logger.info("member %s of consumer group %s did not revoke its partitions in time; fencing it",
                        member_id, group_id)
            self._remove_logged(group_id, member_id)

    def _remove_logged(self, group_id: str, member_id: str) -> None:
        try:
            self.remove_consumer_member(group_id, member_id)
        except KafkaError as exc:
            logger.warning("could not fence a member of consumer group %s: %s", group_id, exc)
            return
        self._revoking.pop(("crb", group_id, member_id), None)

    # -- loading --------------------------------------------------------------------------------------
    def _restore_consumer_group(self, group: GroupMetadata, state: ConsumerGroupState) -> None:
        """A consumer group back from the log: its members keep heartbeating (their sessions start now)."""
        group.consumer = state
        group.protocol_type = "consumer"
        now = self.clock()
        gid = group.group_id
        timeout = self.consumer_timeouts(gid).session_timeout_ms
        for member_id, member in state.members.items():
            classic = member.subscription.classic
            self.timers.schedule(("chb", gid, member_id), now + (classic.session_timeout_ms if classic else timeout),
                                 lambda mid=member_id: self._consumer_session_expired(gid, mid))
            if member.current.state == MemberState.UNREVOKED_PARTITIONS:
                key = ("crb", gid, member_id)
                self._revoking[key] = member.epoch
                self.timers.schedule(key, now + max(member.subscription.rebalance_timeout_ms, 0),
                                     lambda mid=member_id, ep=member.epoch: self._consumer_rebalance_expired(
                                         gid, mid, ep))

    def consumer_group_records(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """Tombstones for everything a consumer group wrote (DeleteGroups)."""
        group = self.groups.get(group_id)
        if group is None or group.consumer is None:
            return []
        state = group.consumer
        entries = []
        for member_id in state.members:
            for record in cp.removal_records(member_id):
                entries.append(consumer_records.encode(group_id, record, self.topics.topic_id))
        entries.append((consumer_records.key(6, group_id), None))
        entries.append((consumer_records.key(4, group_id), None))
        entries.append((consumer_records.key(3, group_id), None))
        return entries


def consumer_commit_error(group: GroupMetadata, member_id: str, member_epoch: int, api_version: int,
                          transactional: bool) -> ErrorCode | None:
    """Kafka's ConsumerGroup.validateOffsetCommit: with no member epoch (an admin tool, a consumer
    without group management) only an empty group takes commits; a member commits at its epoch
    (STALE_MEMBER_EPOCH otherwise), through OffsetCommit v9+ unless transactional."""
    state = group.consumer
    assert state is not None
    if member_epoch < 0 and not state.members:
        return None
    member = state.members.get(member_id)
    if member is None:
        return E.unknown_member_id
    if member.subscription.classic is not None:  # a classic member: its generation is its epoch
        return E.illegal_generation if member_epoch != member.epoch else None
    if not transactional and api_version < 9:
        return E.unsupported_version
    if member_epoch != member.epoch:
        return E.stale_member_epoch
    return None


def describe_error(group: GroupMetadata | None, group_id: str) -> tuple[ErrorCode, str | None]:
    """Kafka's ConsumerGroupDescribe answer for a group that is not a consumer-protocol group."""
    if group is None or (group.consumer is None and not group.members and group.is_(GroupState.EMPTY)) \
            or (group.consumer is not None and group.consumer.deleted):
        return E.group_id_not_found, f"Group {group_id} not found."
    if group.consumer is None:
        return E.group_id_not_found, f"Group {group_id} is not a consumer group."
    return E.none, None
