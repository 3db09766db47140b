"""Classic members in a consumer-protocol group, and the online migration between the two
protocols (Kafka's `group.consumer.migration.policy`), mixed into GroupCoordinator.

Upgrade: a consumer-protocol member joining a classic group of the embedded consumer protocol turns
it into a consumer group at once; each classic member becomes a member of it with its classic
assignment as its current and target assignment at the classic generation, and keeps speaking
JoinGroup/SyncGroup/Heartbeat: the coordinator answers its JoinGroup at once (it assigns, so every
classic member is a follower), hands its assignment out in SyncGroup, and answers its Heartbeat
REBALANCE_IN_PROGRESS when it must rejoin to give partitions up or to take new ones.
Downgrade: when the last consumer-protocol member leaves a group whose other members all speak
the classic protocol, it becomes a classic group again and rebalances.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group import consumer_protocol as cp
from kbroker.group import consumer_records
from kbroker.group import offsets_format as fmt
from kbroker.group.consumer_embedded import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    subscription_version,
)
from kbroker.group.consumer_state import (
    ClassicMeta,
    ConsumerGroupState,
    CurrentAssignment,
    GroupEpoch,
    Member,
    MemberAssignment,
    MemberState,
    MemberSubscription,
    Record,
    Subscription,
    SubscriptionMetadata,
    TargetEpoch,
    TargetMember,
    apply,
)
from kbroker.group.metadata import GroupMetadata, MemberMetadata
from kbroker.group.state import GroupState
from kbroker.group.types import (
    JoinCallback,
    JoinResult,
    SyncCallback,
    SyncResult,
    append_error,
)
from kbroker.wire.primitives import DecodeError

logger = logging.getLogger(__name__)

E = ErrorCode
S = GroupState
CONSUMER = "consumer"


class ClassicMembersMixin:
    if TYPE_CHECKING:
        from kbroker.group.timers import TimerQueue
        from kbroker.group.types import GroupConfig, OffsetsLog

        config: GroupConfig
        log: OffsetsLog
        clock: Callable[[], int]
        groups: dict[str, GroupMetadata]
        timers: TimerQueue

        def partition_for(self, group_id: str) -> int: ...
        def consumer_env(self, group_id: str | None = None) -> cp.GroupEnv: ...
        def _commit_consumer_records(self, group_id: str, records: list[Record]) -> None: ...
        def _consumer_timers(self, group_id: str, decision: cp.Decision, request: cp.HeartbeatRequest) -> None: ...
        def consumer_group_records(self, group_id: str) -> list[tuple[bytes, bytes | None]]: ...
        def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None: ...
        def _prepare_rebalance(self, group: GroupMetadata) -> None: ...
        def _store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode | None: ...

    def migration_allows(self, direction: str) -> bool:
        policy = self.config.consumer_migration_policy
        return policy == "bidirectional" or policy == direction

    # -- upgrade ---------------------------------------------------------------------------------------
    def can_upgrade(self, group: GroupMetadata) -> bool:
        return (self.migration_allows("upgrade") and group.protocol_type == CONSUMER
                and len(group.members) <= self.config.consumer_max_size)

    def upgrade_to_consumer_group(self, group: GroupMetadata) -> None:
        """A classic group becomes a consumer group (Kafka's convertToConsumerGroup); raises
        KafkaError if its records cannot be written (the group stays classic)."""
        gid = group.group_id
        state = ConsumerGroupState(gid)
        generation = group.generation_id
        records: list[Record] = []
        topics = self.consumer_env(gid).topics
        subscribed: set[str] = set()
        for member in group.members.values():
            try:
                sub = decode_subscription(member.metadata_for(group.protocol_name or "")) if group.protocol_name \
                    else decode_subscription(member.protocols[0][1])
                assigned = {t: ps for t, ps in decode_assignment(member.assignment).items() if t in topics}
            except (DecodeError, KeyError, IndexError):
                raise KafkaError(f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                                 "consumer protocol is malformed.", E.group_id_not_found) from None
            subscribed |= {t for t in sub.topics if t in topics}
            records += [
                MemberSubscription(member.member_id, Subscription(
                    instance_id=member.group_instance_id, rack_id=sub.rack, client_id=member.client_id,
                    client_host=member.client_host, topic_names=tuple(sorted(set(sub.topics))),
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    classic=ClassicMeta(member.session_timeout_ms, tuple(member.protocols)))),
                TargetMember(member.member_id, assigned),
                MemberAssignment(member.member_id, CurrentAssignment(generation, generation, MemberState.STABLE,
                                                                     assigned, {})),
            ]
        records += [GroupEpoch(generation), TargetEpoch(generation),
                    SubscriptionMetadata({t: topics[t] for t in sorted(subscribed)})]
        entries = [(fmt.encode_key(fmt.GroupMetadataKey(gid)), None)]
        entries += consumer_records.encode_all(gid, records, self.topics.topic_id)  # type: ignore[attr-defined]
        self.log.append(self.partition_for(gid), entries)
        for member in list(group.members.values()):
            join, member.awaiting_join = member.awaiting_join, None
            if join is not None:
                join(JoinResult(member.member_id, E.rebalance_in_progress))
            sync, member.awaiting_sync = member.awaiting_sync, None
            if sync is not None:
                sync(SyncResult(E.rebalance_in_progress))
            self.timers.cancel(("hb", gid, member.member_id))
            self.timers.cancel(("pending", gid, member.member_id))
        self.timers.cancel(("join", gid))
        self.timers.cancel(("sync", gid))
        getattr(self, "_join_ops").pop(gid, None)
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.pending_sync_members.clear()
        group.leader_id = None
        group.protocol_name = None
        group.state = S.EMPTY
        for record in records:
            apply(state, record)
        group.consumer = state
        now = self.clock()
        for member_id, member in state.members.items():
            timeout = member.subscription.classic.session_timeout_ms if member.subscription.classic else \
                self.config.consumer_session_timeout_ms
            self.timers.schedule(("chb", gid, member_id), now + timeout,
                                 lambda mid=member_id: self._consumer_session_expired(gid, mid))  # type: ignore[attr-defined]
        logger.info("classic group %s upgraded to a consumer group at epoch %d with %d members", gid, generation,
                    len(state.members))

    # -- downgrade -------------------------------------------------------------------------------------
    def should_downgrade(self, state: ConsumerGroupState, leaving: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember: the member leaving is the last one not
        speaking the classic protocol."""
        others = [m for mid, m in state.members.items() if mid != leaving]
        return (self.migration_allows("downgrade") and bool(others)
                and all(m.subscription.classic is not None for m in others)
                and len(others) <= self.config.max_size)

    def downgrade_to_classic_group(self, group: GroupMetadata, leaving: str) -> None:
        """The consumer group becomes a classic group without `leaving` and rebalances (Kafka's
        convertToClassicGroup)."""
        state = group.consumer
        assert state is not None
        gid = group.group_id
        members = [m for mid, m in state.members.items() if mid != leaving]
        entries = self.consumer_group_records(gid)
        self.log.append(self.partition_for(gid), entries)
        for m in list(state.members):
            self.timers.cancel(("chb", gid, m))
            self.timers.cancel(("crb", gid, m))
        group.consumer = None
        group.protocol_type = CONSUMER
        group.generation_id = state.epoch
        group.state = S.EMPTY
        for m in members:
            meta = m.subscription.classic
            assert meta is not None
            version = subscription_version(meta.protocols[0][1]) if meta.protocols else 0
            classic = MemberMetadata(m.member_id, m.subscription.instance_id, m.subscription.client_id,
                                     m.subscription.client_host, max(m.subscription.rebalance_timeout_ms, 0),
                                     meta.session_timeout_ms, CONSUMER, list(meta.protocols),
                                     assignment=encode_assignment(m.current.assigned, version))
            group.add(classic)
        group.protocol_name = group.select_protocol()
        group.state = S.STABLE
        group.subscribed_topics = group._compute_subscribed_topics()
        error = self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        if error is not None:
            logger.warning("could not write the downgraded classic group %s: %s", gid, error.name)
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        logger.info("consumer group %s downgraded to a classic group with %d members", gid, len(group.members))
        self._prepare_rebalance(group)

    # -- classic requests to a consumer group ----------------------------------------------------------
    def classic_join_to_consumer_group(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                       require_known_member_id: bool, client_id: str, client_host: str,
                                       rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                                       protocols: list[tuple[str, bytes]], respond: JoinCallback) -> None:
        state = group.consumer
        assert state is not None
        gid = group.group_id
        if protocol_type != CONSUMER or not protocols:
            respond(JoinResult(member_id, E.inconsistent_group_protocol))
            return
        unknown = member_id == ""
        if unknown:
            member_id = cp.new_member_id()
            if require_known_member_id and instance_id is None:
                respond(JoinResult(member_id, E.member_id_required))
                return
        try:
            sub = decode_subscription(protocols[0][1])
        except DecodeError:
            respond(JoinResult(member_id, E.inconsistent_group_protocol))
            return
        existing = state.members.get(member_id)
        if existing is not None and existing.subscription.classic is None:
            respond(JoinResult(member_id, E.unknown_member_id))  # a consumer-protocol member's id
            return
        request = cp.HeartbeatRequest(
            member_id, existing.epoch if existing is not None else 0, instance_id=instance_id, rack_id=sub.rack,
            rebalance_timeout_ms=rebalance_timeout_ms, topic_names=sub.topics,
            owned={t: ps for t, ps in sub.owned.items() if ps}, client_id=client_id, client_host=client_host,
            classic=ClassicMeta(session_timeout_ms, tuple((n, bytes(m)) for n, m in protocols)),
            unknown_member=unknown)
        try:
            decision = cp.heartbeat(state, request, self.consumer_env(gid))
            self._commit_consumer_records(gid, decision.records)
        except cp.GroupError as exc:
            respond(JoinResult(member_id, exc.code))
            return
        except KafkaError as exc:
            respond(JoinResult(member_id, append_error(exc, for_commit=False)))
            return
        self._consumer_timers(gid, decision, request, session_timeout_ms)
        member = state.members[member_id]
        respond(JoinResult(member_id, E.none, member.epoch, CONSUMER, protocols[0][0], "", []))

    def _classic_member(self, state: ConsumerGroupState, member_id: str, instance_id: str | None
                        ) -> tuple[Member | None, ErrorCode | None]:
        """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = state.members.get(member_id)
        else:
            mid = state.static_members.get(instance_id)
            member = state.members.get(mid) if mid is not None else None
            if member is not None and member.member_id != member_id:
                return None, E.fenced_instance_id
        if member is None or member.subscription.classic is None:
            return None, E.unknown_member_id
        return member, None

    def classic_sync_to_consumer_group(self, group: GroupMetadata, generation_id: int, member_id: str,
                                       protocol_type: str | None, protocol_name: str | None,
                                       instance_id: str | None, respond: SyncCallback) -> None:
        state = group.consumer
        assert state is not None
        member, error = self._classic_member(state, member_id, instance_id)
        if member is None:
            respond(SyncResult(error or E.unknown_member_id))
            return
        meta = member.subscription.classic
        assert meta is not None
        if generation_id != member.epoch:
            respond(SyncResult(E.illegal_generation))
            return
        names = [n for n, _ in meta.protocols]
        if (protocol_type is not None and protocol_type != CONSUMER) or \
                (protocol_name is not None and protocol_name not in names):
            respond(SyncResult(E.inconsistent_group_protocol))
            return
        if state.epoch > member.epoch and member.current.state != MemberState.UNREVOKED_PARTITIONS:
            respond(SyncResult(E.rebalance_in_progress))
            return
        self._renew_classic_session(group.group_id, member)
        version = subscription_version(meta.protocols[0][1]) if meta.protocols else 0
        respond(SyncResult(E.none, CONSUMER, protocol_name or (names[0] if names else None),
                           encode_assignment(member.current.assigned, version)))

    def classic_heartbeat_to_consumer_group(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                            generation_id: int) -> ErrorCode:
        state = group.consumer
        assert state is not None
        member, error = self._classic_member(state, member_id, instance_id)
        if member is None:
            return error or E.unknown_member_id
        if generation_id != member.epoch:
            return E.illegal_generation
        self._renew_classic_session(group.group_id, member)
        current = member.current
        if member.epoch < state.epoch or current.state == MemberState.UNREVOKED_PARTITIONS or \
                (current.state == MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(state, member)):
            return E.rebalance_in_progress
        return E.none

    def classic_leave_to_consumer_group(self, group: GroupMetadata, members: list[tuple[str, str | None]]
                                        ) -> list[tuple[str, str | None, ErrorCode]]:
        state = group.consumer
        assert state is not None
        results = []
        for member_id, instance_id in members:
            if instance_id is not None:
                mid = state.static_members.get(instance_id)
                member = state.members.get(mid) if mid is not None else None
                if member is None:
                    results.append((member_id, instance_id, E.unknown_member_id))
                    continue
                if member_id and member.member_id != member_id:
                    results.append((member_id, instance_id, E.fenced_instance_id))
                    continue
            else:
                member = state.members.get(member_id)
                if member is None:
                    results.append((member_id, instance_id, E.unknown_member_id))
                    continue
            try:
                self.remove_consumer_member(group.group_id, member.member_id)
            except KafkaError as exc:
                results.append((member_id, instance_id, append_error(exc, for_commit=False)))
                continue
            results.append((member_id, instance_id, E.none))
            if group.consumer is None:  # downgraded: the others are classic members now
                state = None  # type: ignore[assignment]
                break
        return results

    def remove_consumer_member(self, group_id: str, member_id: str) -> None:
        """Fence one member (it left, or its session or rebalance timeout ran out); the group becomes
        classic again when only classic members remain and the policy allows it."""
        group = self.groups.get(group_id)
        if group is None or group.consumer is None or member_id not in group.consumer.members:
            return
        if self.should_downgrade(group.consumer, member_id):
            self.downgrade_to_classic_group(group, member_id)
            return
        decision = cp.fence(group.consumer, member_id)
        self._commit_consumer_records(group_id, decision.records)
        for mid in decision.removed:
            self.timers.cancel(("chb", group_id, mid))
            self.timers.cancel(("crb", group_id, mid))

    def _renew_classic_session(self, group_id: str, member: Member) -> None:
        meta = member.subscription.classic
        assert meta is not None
        mid = member.member_id
        self.timers.schedule(("chb", group_id, mid), self.clock() + meta.session_timeout_ms,
                             lambda: self._consumer_session_expired(group_id, mid))  # type: ignore[attr-defined]


def _waiting_on_unreleased(state: ConsumerGroupState, member: Member) -> bool:
    """Whether a partition of the member's target is still held by another member."""
    for topic, partitions in state.target.get(member.member_id, {}).items():
        for p in partitions - member.current.assigned.get(topic, frozenset()):
            owner = state.owners.get((topic, p))
            if owner is not None and owner != member.member_id:
                return True
    return False
