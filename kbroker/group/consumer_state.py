"""A consumer-protocol group (KIP-848) as data, and the one function that changes it: `apply`.

Every change to a consumer group is a record (Kafka's coordinator records in `__consumer_offsets`:
the group epoch, a member's subscription, the target assignment and its epoch, a member's current
assignment), so the group's state is the records replayed in order: the coordinator decides the
records of a heartbeat from the state (consumer_protocol, pure), appends them to the log, then
applies them here — the same function the loader runs over the log after a failover.

Assignments are by topic name here; the log and the wire carry topic ids, translated at the edge
(consumer_records, api/consumer_groups).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Mapping, Union

Assignment = Mapping[str, frozenset[int]]  # topic -> partitions
EMPTY: Assignment = {}

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState (the int8 in the current-assignment record)."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must give up partitions before it moves to the next epoch
    UNRELEASED_PARTITIONS = 2  # at the target epoch, waiting for others to release partitions
    UNKNOWN = 127


@dataclass(frozen=True)
class ClassicMeta:
    """A classic-protocol member of a consumer group (the online migration): its JoinGroup's session
    timeout and protocols (Kafka's ClassicMemberMetadata)."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Subscription:
    """What a member told the coordinator about itself (Kafka's ConsumerGroupMemberMetadataValue)."""
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMeta | None = None  # set for a member that speaks the classic protocol


@dataclass(frozen=True)
class CurrentAssignment:
    """Where a member is in its reconciliation (Kafka's ConsumerGroupCurrentMemberAssignmentValue)."""
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class Member:
    member_id: str
    subscription: Subscription = Subscription()
    current: CurrentAssignment = CurrentAssignment()

    @property
    def epoch(self) -> int:
        return self.current.member_epoch


# -- records ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GroupEpoch:                     # key type 3; epoch None: the group is deleted
    epoch: int | None


@dataclass(frozen=True)
class SubscriptionMetadata:           # key type 4: the subscribed topics' partition counts at the epoch bump
    topics: Mapping[str, int]


@dataclass(frozen=True)
class MemberSubscription:             # key type 5; subscription None: the member is gone
    member_id: str
    subscription: Subscription | None


@dataclass(frozen=True)
class TargetEpoch:                    # key type 6
    epoch: int


@dataclass(frozen=True)
class TargetMember:                   # key type 7; assignment None: tombstone
    member_id: str
    assignment: Assignment | None


@dataclass(frozen=True)
class MemberAssignment:               # key type 8; current None: tombstone
    member_id: str
    current: CurrentAssignment | None


Record = Union[GroupEpoch, SubscriptionMetadata, MemberSubscription, TargetEpoch, TargetMember, MemberAssignment]


# -- the group ----------------------------------------------------------------------------------------

@dataclass
class ConsumerGroupState:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # assigned or pending revocation
    subscription_metadata: dict[str, int] | None = None  # topic -> partitions at the last epoch bump
    deleted: bool = False
    topic_refs: dict[str, int] = field(default_factory=dict)  # subscribed topic name -> members naming it
    regex_refs: dict[str, int] = field(default_factory=dict)  # subscribed regex -> members using it

    def owner_epoch(self, topic: str, partition: int) -> int:
        """The epoch of the member holding the partition (assigned or still to revoke), -1 if free."""
        owner = self.owners.get((topic, partition))
        return -1 if owner is None else self.members[owner].epoch

    def state_name(self) -> str:
        """Kafka's ConsumerGroup.ConsumerGroupState as ListGroups and describe show it."""
        if self.deleted:
            return "Dead"
        if not self.members:
            return "Empty"
        if self.epoch != self.assignment_epoch:
            return "Assigning"
        for member in self.members.values():
            if member.current.state != MemberState.STABLE or member.epoch != self.assignment_epoch:
                return "Reconciling"
        return "Stable"

    def subscribed_topics(self) -> set[str]:
        """The topic names members subscribe to by name (regular expressions resolve elsewhere)."""
        return set(self.topic_refs)


def _count(refs: dict[str, int], keys, delta: int) -> None:
    for key in keys:
        n = refs.get(key, 0) + delta
        if n > 0:
            refs[key] = n
        else:
            refs.pop(key, None)


def _subscribe(group: ConsumerGroupState, sub: Subscription, delta: int) -> None:
    _count(group.topic_refs, sub.topic_names, delta)
    _count(group.regex_refs, [sub.topic_regex] if sub.topic_regex else [], delta)


def _set_owners(group: ConsumerGroupState, member_id: str, current: CurrentAssignment | None, owned: bool) -> None:
    if current is None:
        return
    for assignment in (current.assigned, current.pending_revocation):
        for topic, partitions in assignment.items():
            for p in partitions:
                if owned:
                    group.owners[(topic, p)] = member_id
                elif group.owners.get((topic, p)) == member_id:
                    del group.owners[(topic, p)]


def apply(group: ConsumerGroupState, record: Record) -> None:
    """Replay one record into the group (live, after its append; or loading the log)."""
    if isinstance(record, GroupEpoch):
        if record.epoch is None:
            group.deleted = True
            group.members.clear()
            group.target.clear()
            group.static_members.clear()
            group.owners.clear()
            group.topic_refs.clear()
            group.regex_refs.clear()
        else:
            group.deleted = False
            group.epoch = record.epoch
    elif isinstance(record, SubscriptionMetadata):
        group.subscription_metadata = dict(record.topics)
    elif isinstance(record, MemberSubscription):
        member = group.members.get(record.member_id)
        if record.subscription is None:
            if member is not None:
                _set_owners(group, member.member_id, member.current, owned=False)
                _subscribe(group, member.subscription, -1)
                del group.members[record.member_id]
                iid = member.subscription.instance_id
                if iid is not None and group.static_members.get(iid) == record.member_id:
                    del group.static_members[iid]
            return
        if member is None:
            member = Member(record.member_id)
        else:
            _subscribe(group, member.subscription, -1)
        _subscribe(group, record.subscription, +1)
        old_iid = member.subscription.instance_id
        if old_iid is not None and old_iid != record.subscription.instance_id \
                and group.static_members.get(old_iid) == record.member_id:
            del group.static_members[old_iid]
        group.members[record.member_id] = replace(member, subscription=record.subscription)
        if record.subscription.instance_id is not None:
            group.static_members[record.subscription.instance_id] = record.member_id
    elif isinstance(record, TargetEpoch):
        group.assignment_epoch = record.epoch
    elif isinstance(record, TargetMember):
        if record.assignment is None:
            group.target.pop(record.member_id, None)
        else:
            group.target[record.member_id] = record.assignment
    elif isinstance(record, MemberAssignment):
        member = group.members.get(record.member_id)
        if member is None:
            if record.current is None:
                return
            member = group.members[record.member_id] = Member(record.member_id)
        _set_owners(group, member.member_id, member.current, owned=False)
        group.members[record.member_id] = replace(member, current=record.current or CurrentAssignment())
        _set_owners(group, member.member_id, record.current, owned=True)
    else:  # pragma: no cover - the Record union is closed
        raise TypeError(f"not a consumer group record: {record!r}")


def assignment_of(pairs: Mapping[str, set[int] | frozenset[int]]) -> Assignment:
    """An assignment without empty topics, with frozen partition sets."""
    return {topic: frozenset(ps) for topic, ps in pairs.items() if ps}
