"""The consumer group protocol (KIP-848) as pure decisions: ConsumerGroupHeartbeat, a member's
session or rebalance timeout, each turned into the records that change the group
(consumer_state) and the answer, after Kafka's GroupMetadataManager.consumerGroupHeartbeat.

A heartbeat (1) creates or updates the member; a changed subscription, or a change in the
partitions of the subscribed topics, bumps the group epoch; (2) a group epoch past the target
assignment's epoch computes a new target with the group's server-side assignor; (3) the member
is reconciled towards its target (consumer_reconcile): revoke first, then receive. Nothing here
mutates the group: the coordinator appends the records, then applies them.

Epochs: 0 joins (a known member id rejoining starts over with nothing), -1 leaves, -2 is a static
member leaving for now (it keeps its assignment for the session timeout, and the next member with
its instance id takes it over). Regular-expression subscriptions are RE2 (group/subscriptions).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from kbroker.errors import ErrorCode
from kbroker.group import assignors as assignor_lib
from kbroker.group import subscriptions
from kbroker.group.consumer_reconcile import reconcile
from kbroker.group.consumer_state import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
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

E = ErrorCode


def new_member_id() -> str:
    """A member id as Kafka's Uuid.randomUuid().toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class GroupError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class GroupEnv:
    """What the coordinator knows besides the group: the time, the cluster's topics, its configs."""
    now_ms: int
    topics: Mapping[str, int]  # topic -> partition count (topics that exist now)
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    partition_racks: Callable[[str, int], frozenset[str]] | None = None
    internal_topics: frozenset[str] = frozenset()


@dataclass(frozen=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topic_names: tuple[str, ...] | None = None
    topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    classic: ClassicMeta | None = None  # a classic member's JoinGroup (the online migration)
    unknown_member: bool = False  # a classic JoinGroup without a member id (a static member's new incarnation)


@dataclass
class HeartbeatResponse:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    error: ErrorCode = E.none
    message: str | None = None


@dataclass
class Decision:
    records: list[Record]
    response: HeartbeatResponse | None = None
    removed: list[str] = field(default_factory=list)  # members gone: their timers go too


# -- validation --------------------------------------------------------------------------------------

def validate(req: HeartbeatRequest, group_id: str, version: int, assignors: tuple[str, ...]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    def invalid(message: str) -> GroupError:
        return GroupError(E.invalid_request, message)
    if not group_id:
        raise invalid("GroupId can't be empty.")
    if req.instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if req.rack_id == "":
        raise invalid("RackId can't be empty.")
    if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
    elif req.member_epoch == 0:
        if version >= 1 and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if not req.topic_names and not req.topic_regex:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid("MemberEpoch is invalid.")
    if req.topic_regex:
        error = subscriptions.validate_regex(req.topic_regex)
        if error is not None:
            raise GroupError(E.invalid_regular_expression, str(error))
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise GroupError(E.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported. "
                         f"Supported assignors: {', '.join(assignors)}.")


# -- heartbeat ---------------------------------------------------------------------------------------

def heartbeat(group: ConsumerGroupState, req: HeartbeatRequest, env: GroupEnv) -> Decision:
    """The records and answer of one (validated) heartbeat; raises GroupError for Kafka's errors.
    `group` is the group's current state (a new, empty one when it does not exist yet)."""
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _leave(group, req)
    joining = req.member_epoch == 0
    if len(group.members) >= env.max_size and req.member_id not in group.members \
            and not (req.instance_id is not None and req.instance_id in group.static_members):
        raise GroupError(E.group_max_size_reached,
                         f"The consumer group has reached its maximum capacity of {env.max_size} members.")
    work = _Scratch(group)
    member = _member_for(work, req)
    known = member.member_id in work.group.members

    # 1. the member's subscription; the group epoch moves with what the group subscribes to
    sub = member.subscription
    updated = Subscription(
        instance_id=req.instance_id if req.instance_id is not None else sub.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else sub.rack_id,
        client_id=req.client_id, client_host=req.client_host,
        topic_names=tuple(sorted(set(req.topic_names))) if req.topic_names is not None else sub.topic_names,
        topic_regex=(req.topic_regex or None) if req.topic_regex is not None else sub.topic_regex,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else sub.rebalance_timeout_ms,
        server_assignor=req.server_assignor if req.server_assignor is not None else sub.server_assignor,
        classic=req.classic)
    bump = not known
    if updated != sub or not known:
        work.add(MemberSubscription(member.member_id, updated))
        bump = bump or (updated.topic_names, updated.topic_regex, updated.rack_id) != \
            (sub.topic_names, sub.topic_regex, sub.rack_id)
    metadata = subscription_metadata(work.group, env)
    if metadata != work.group.subscription_metadata:
        work.add(SubscriptionMetadata(metadata))
        bump = True
    if bump:
        work.add(GroupEpoch(work.group.epoch + 1))

    # 2. a new target assignment when the group epoch moved past it
    if work.group.epoch > work.group.assignment_epoch:
        compute_target(work, env, metadata)

    # 3. reconcile the member towards its target
    g = work.group
    member = g.members[member.member_id]
    before = member.current
    after = reconcile(before, member.member_id, g.assignment_epoch, g.target.get(member.member_id, {}),
                      g.owner_epoch, g.owners, req.owned)
    if after != before:
        work.add(MemberAssignment(member.member_id, after))
    full = joining or req.classic is not None or (req.rebalance_timeout_ms != -1 and req.topic_names is not None and req.owned is not None)
    changed = after.assigned != before.assigned or after.member_epoch != before.member_epoch
    response = HeartbeatResponse(member.member_id, after.member_epoch, env.heartbeat_interval_ms,
                                 after.assigned if full or changed else None)
    return work.done(response)


def _check_epoch(member: Member, req: HeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member ahead of or behind the coordinator
    is fenced, except one a step behind whose answer was lost (it owns only what it was given)."""
    epoch = member.epoch
    if req.member_epoch > epoch:
        raise GroupError(E.fenced_member_epoch, f"The consumer group member has a greater member epoch "
                         f"({req.member_epoch}) than the one known by the group coordinator ({epoch}). "
                         "The member must abandon all its partitions and rejoin.")
    if req.member_epoch < epoch:
        owned = req.owned
        subset = owned is not None and all(ps <= member.current.assigned.get(t, frozenset())
                                           for t, ps in owned.items())
        if req.member_epoch != member.current.previous_member_epoch or not subset:
            raise GroupError(E.fenced_member_epoch, f"The consumer group member has a smaller member epoch "
                             f"({req.member_epoch}) than the one known by the group coordinator ({epoch}). "
                             "The member must abandon all its partitions and rejoin.")


def _member_for(work: "_Scratch", req: HeartbeatRequest) -> Member:
    """The member the heartbeat is from: existing, new, restarted (epoch 0 with a known id), or a
    static member's new incarnation taking over its instance's assignment."""
    group = work.group
    if req.classic is not None:
        return _classic_member_for(work, req)
    if req.instance_id is not None:
        existing_id = group.static_members.get(req.instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if req.member_epoch == 0:
            if existing is None:
                return _restart(work, group.members[req.member_id]) if req.member_id in group.members \
                    else Member(req.member_id)
            if existing.member_id == req.member_id:
                return _restart(work, existing)
            if existing.epoch != STATIC_LEAVE_EPOCH:
                raise GroupError(E.unreleased_instance_id, f"Static member {existing.member_id} with instance id "
                                 f"{req.instance_id} is present in the consumer group.")
            return _replace_static(work, existing, req.member_id)
        if existing is None:
            raise GroupError(E.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != req.member_id:
            raise GroupError(E.fenced_instance_id, f"Static member {req.member_id} with instance id "
                             f"{req.instance_id} was fenced by member {existing.member_id}.")
        _check_epoch(existing, req)
        return existing
    member = group.members.get(req.member_id)
    if member is None:
        if req.member_epoch != 0:
            raise GroupError(E.unknown_member_id,
                             f"Member {req.member_id} is not a member of group {group.group_id}.")
        return Member(req.member_id)
    if req.member_epoch == 0:
        return _restart(work, member)
    _check_epoch(member, req)
    return member


def _classic_member_for(work: "_Scratch", req: HeartbeatRequest) -> Member:
    """A classic member's JoinGroup to a consumer group (Kafka's getOrMaybeSubscribe*Member with
    useClassicProtocol): no member epochs to check; a static member joining without a member id
    takes over its instance's assignment."""
    group = work.group
    if req.instance_id is not None:
        existing_id = group.static_members.get(req.instance_id)
        if existing_id is not None and existing_id != req.member_id:
            if not req.unknown_member:
                raise GroupError(E.fenced_instance_id, f"Static member {req.member_id} with instance id "
                                 f"{req.instance_id} was fenced by member {existing_id}.")
            return _replace_static(work, group.members[existing_id], req.member_id)
    member = group.members.get(req.member_id)
    return member if member is not None else Member(req.member_id)


def _restart(work: "_Scratch", member: Member) -> Member:
    """A known member id joining again (it abandoned its partitions, the join says it owns none):
    it starts over at epoch 0 with nothing; its target stays, so it gets back what is still its."""
    if member.current != CurrentAssignment():
        work.add(MemberAssignment(member.member_id, CurrentAssignment()))
    return work.group.members[member.member_id]


def _replace_static(work: "_Scratch", old: Member, new_id: str) -> Member:
    """Kafka's replaceMember: the new incarnation takes the old one's subscription, target and
    partitions, at epoch 0; the old member id is gone."""
    target = work.group.target.get(old.member_id, {})
    for record in removal_records(old.member_id):
        work.add(record)
    work.add(MemberSubscription(new_id, old.subscription))
    work.add(TargetMember(new_id, target))
    work.add(MemberAssignment(new_id, replace(old.current, member_epoch=0, previous_member_epoch=0,
                                              state=MemberState.STABLE, pending_revocation={})))
    return work.group.members[new_id]


def removal_records(member_id: str) -> list[Record]:
    return [MemberAssignment(member_id, None), TargetMember(member_id, None), MemberSubscription(member_id, None)]


# -- leaving and fencing -----------------------------------------------------------------------------

def _leave(group: ConsumerGroupState, req: HeartbeatRequest) -> Decision:
    if req.instance_id is None:
        if req.member_id not in group.members:
            raise GroupError(E.unknown_member_id,
                             f"Member {req.member_id} is not a member of group {group.group_id}.")
        decision = fence(group, req.member_id)
    else:
        existing_id = group.static_members.get(req.instance_id)
        if existing_id is None:
            raise GroupError(E.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if existing_id != req.member_id:
            raise GroupError(E.fenced_instance_id, f"Static member {req.member_id} with instance id "
                             f"{req.instance_id} was fenced by member {existing_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            member = group.members[existing_id]
            current = replace(member.current, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
            decision = Decision([MemberAssignment(existing_id, current)])
        else:
            decision = fence(group, existing_id)
    decision.response = HeartbeatResponse(req.member_id, req.member_epoch)
    return decision


def fence(group: ConsumerGroupState, member_id: str) -> Decision:
    """Remove a member (it left, or missed its session or rebalance timeout): its partitions are
    free at once and the group epoch moves so the others are given a new target."""
    if member_id not in group.members:
        return Decision([])
    work = _Scratch(group)
    for record in removal_records(member_id):
        work.add(record)
    work.add(GroupEpoch(group.epoch + 1))
    return work.done(None, [member_id])


def rebalance_expired(group: ConsumerGroupState, member_id: str, epoch: int) -> Decision:
    """A member told at `epoch` to revoke partitions did not within its rebalance timeout."""
    member = group.members.get(member_id)
    if member is None or member.epoch != epoch or member.current.state != MemberState.UNREVOKED_PARTITIONS:
        return Decision([])
    return fence(group, member_id)


# -- subscriptions and the target assignment ---------------------------------------------------------

def subscription_metadata(group: ConsumerGroupState, env: GroupEnv) -> dict[str, int]:
    """Partition counts of every topic the group subscribes to: a change moves the group epoch."""
    names = {t for t in group.topic_refs if t in env.topics}
    if group.regex_refs:
        for matched in subscriptions.resolve_regexes(group.regex_refs, env.topics,
                                                     exclude=env.internal_topics).values():
            names |= matched
    return {t: env.topics[t] for t in sorted(names)}


def compute_target(work: "_Scratch", env: GroupEnv, metadata: Mapping[str, int]) -> None:
    """A new target assignment for every member, by the assignor most members ask for."""
    group = work.group
    regexes = subscriptions.resolve_regexes({m.subscription.topic_regex for m in group.members.values()
                                             if m.subscription.topic_regex}, env.topics, exclude=env.internal_topics)
    members = {}
    for mid, m in group.members.items():
        sub = m.subscription
        topics = {t for t in sub.topic_names if t in metadata}
        if sub.topic_regex:
            topics |= regexes.get(sub.topic_regex, frozenset())
        members[mid] = assignor_lib.MemberSpec(topics=frozenset(topics), rack=sub.rack_id,
                                               assignment=group.target.get(mid, {}), instance_id=sub.instance_id)
    racked = env.partition_racks is not None and any(m.subscription.rack_id for m in group.members.values())
    topics = {t: assignor_lib.TopicSpec(n, tuple(env.partition_racks(t, p) for p in range(n))
                                        if racked and env.partition_racks is not None else ())
              for t, n in metadata.items()}
    assignor = assignor_lib.preferred_assignor([m.subscription.server_assignor for m in group.members.values()],
                                               assignor_lib.configured_assignors(env.assignors))
    target = assignor.assign(members, topics)
    for mid in group.members:
        new = {t: frozenset(ps) for t, ps in target.get(mid, {}).items() if ps}
        if group.target.get(mid) != new:
            work.add(TargetMember(mid, new))
    work.add(TargetEpoch(group.epoch))


class _Scratch:
    """Records decided so far, applied to a copy-on-write view of the group: a decision reads its own
    writes without touching the coordinator's state (the caller applies the records it appended)."""

    def __init__(self, group: ConsumerGroupState) -> None:
        self.original = group
        self.records: list[Record] = []
        self.view: ConsumerGroupState | None = None

    @property
    def group(self) -> ConsumerGroupState:
        return self.original if self.view is None else self.view

    def add(self, record: Record) -> None:
        self.records.append(record)
        apply(self._view(), record)

    def _view(self) -> ConsumerGroupState:
        if self.view is None:
            self.view = copy_group(self.original)
            for record in self.records[:-1]:
                apply(self.view, record)
        return self.view

    def done(self, response: HeartbeatResponse | None, removed: list[str] | None = None) -> Decision:
        return Decision(self.records, response, removed or [])


def copy_group(group: ConsumerGroupState) -> ConsumerGroupState:
    return replace(group, members=dict(group.members), target=dict(group.target),
                   static_members=dict(group.static_members), owners=dict(group.owners),
                   topic_refs=dict(group.topic_refs), regex_refs=dict(group.regex_refs),
                   subscription_metadata=None if group.subscription_metadata is None
                   else dict(group.subscription_metadata))
