"""Share-group membership (KIP-932) as pure decisions: ShareGroupHeartbeat (API 76, v1) and a
member's session timeout, each turned into the records that change the group and the answer,
after Kafka's GroupMetadataManager.shareGroupHeartbeat, ShareGroup, ShareGroupMember,
ShareGroupAssignmentBuilder and the SimpleAssignor's assignment builders.

A share group is a consumer group without ownership: several members may consume one partition
(the share-partition leader hands out records, not partitions), so there is no revocation step. A
heartbeat (1) creates or updates the member; a changed subscription, a member joining or leaving,
or a change in the subscribed topics' partition counts bumps the group epoch; (2) a group epoch past
the target assignment's epoch computes a new target (`simple_assign`); (3) the member takes its
target at once, at the target's epoch. Time is passed in; nothing here does I/O or mutates a group:
the coordinator appends the records, then replays them with `apply` (the same function the loader
runs over __consumer_offsets after a failover).

Epochs: 0 joins (v1: the client chose the member id, a UUID string), -1 leaves. The member id must
always be set; the coordinator never makes one up. Assignments are by topic name here; the log and
the wire carry topic ids, translated at the edge.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kbroker.errors import ErrorCode
from kbroker.group.consumer_protocol import GroupError
from kbroker.group.consumer_state import Assignment, MemberState

E = ErrorCode

LEAVE_EPOCH = -1

# -- the group ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShareMember:
    """Kafka's ShareGroupMember: its metadata (ShareGroupMemberMetadataValue) and where it is
    (ShareGroupCurrentMemberAssignmentValue). `topic_names` is sorted and without duplicates."""
    member_id: str
    epoch: int = 0
    previous_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)


@dataclass
class ShareGroupState:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    subscription_metadata: dict[str, int] = field(default_factory=dict)  # topic -> partitions at the last bump
    target: dict[str, Assignment] = field(default_factory=dict)  # member -> its target assignment
    deleted: bool = False
    topic_refs: dict[str, int] = field(default_factory=dict)  # subscribed topic -> members naming it

    @property
    def exists(self) -> bool:
        """Created by a first join (whose epoch bump is its first record) and not deleted since."""
        return self.epoch > 0 and not self.deleted

    def state_name(self) -> str:
        """Kafka's ShareGroup.ShareGroupState as ListGroups and describe show it."""
        if self.deleted:
            return "Dead"
        return "Stable" if self.members else "Empty"


# -- records (Kafka's share-group records in __consumer_offsets; key types 9..14) ------------------

@dataclass(frozen=True)
class ShareGroupPartitionMetadata:          # key type 9: subscribed topics' partition counts at the bump
    topics: Mapping[str, int]


@dataclass(frozen=True)
class ShareGroupMemberMetadata:             # key type 10
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]


@dataclass(frozen=True)
class ShareGroupMemberMetadataTombstone:    # key type 10, null value: the member is gone
    member_id: str


@dataclass(frozen=True)
class ShareGroupMetadata:                   # key type 11: the group epoch
    epoch: int


@dataclass(frozen=True)
class ShareGroupMetadataTombstone:          # key type 11, null value: the group is deleted
    pass


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMetadata:   # key type 12
    assignment_epoch: int


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMetadataTombstone:  # key type 12, null value: epoch back to -1
    pass


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMember:     # key type 13
    member_id: str
    partitions: Assignment


@dataclass(frozen=True)
class ShareGroupTargetAssignmentMemberTombstone:  # key type 13, null value
    member_id: str


@dataclass(frozen=True)
class ShareGroupCurrentMemberAssignment:    # key type 14 (State is always STABLE for a share member)
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment
    state: MemberState = MemberState.STABLE


@dataclass(frozen=True)
class ShareGroupCurrentMemberAssignmentTombstone:  # key type 14, null value: epochs -1, nothing assigned
    member_id: str


Record = (ShareGroupPartitionMetadata | ShareGroupMemberMetadata | ShareGroupMemberMetadataTombstone
          | ShareGroupMetadata | ShareGroupMetadataTombstone | ShareGroupTargetAssignmentMetadata
          | ShareGroupTargetAssignmentMetadataTombstone | ShareGroupTargetAssignmentMember
          | ShareGroupTargetAssignmentMemberTombstone | ShareGroupCurrentMemberAssignment
          | ShareGroupCurrentMemberAssignmentTombstone)


def _count(refs: dict[str, int], keys: tuple[str, ...], delta: int) -> None:
    for key in keys:
        n = refs.get(key, 0) + delta
        if n > 0:
            refs[key] = n
        else:
            refs.pop(key, None)


def apply(state: ShareGroupState, record: Record) -> None:
    """Replay one record into the group (live, after its append; or loading the log), as Kafka's
    GroupMetadataManager.replay for the share-group records."""
    if isinstance(record, ShareGroupMetadata):
        state.deleted = False
        state.epoch = record.epoch
    elif isinstance(record, ShareGroupMetadataTombstone):
        state.deleted = True
        state.members.clear()
        state.target.clear()
        state.topic_refs.clear()
        state.subscription_metadata.clear()
    elif isinstance(record, ShareGroupPartitionMetadata):
        state.subscription_metadata = dict(record.topics)
    elif isinstance(record, ShareGroupMemberMetadata):
        member = state.members.get(record.member_id) or ShareMember(record.member_id)
        _count(state.topic_refs, member.topic_names, -1)
        _count(state.topic_refs, record.topic_names, +1)
        state.members[record.member_id] = replace(
            member, rack_id=record.rack_id, client_id=record.client_id, client_host=record.client_host,
            topic_names=record.topic_names)
    elif isinstance(record, ShareGroupMemberMetadataTombstone):
        member = state.members.pop(record.member_id, None)
        if member is not None:
            _count(state.topic_refs, member.topic_names, -1)
    elif isinstance(record, ShareGroupTargetAssignmentMetadata):
        state.assignment_epoch = record.assignment_epoch
    elif isinstance(record, ShareGroupTargetAssignmentMetadataTombstone):
        state.assignment_epoch = -1
    elif isinstance(record, ShareGroupTargetAssignmentMember):
        state.target[record.member_id] = record.partitions
    elif isinstance(record, ShareGroupTargetAssignmentMemberTombstone):
        state.target.pop(record.member_id, None)
    elif isinstance(record, ShareGroupCurrentMemberAssignment):
        member = state.members.get(record.member_id) or ShareMember(record.member_id)
        state.members[record.member_id] = replace(member, epoch=record.member_epoch,
                                                  previous_epoch=record.previous_member_epoch,
                                                  assigned=record.assigned)
    elif isinstance(record, ShareGroupCurrentMemberAssignmentTombstone):
        member = state.members.get(record.member_id)
        if member is not None:
            state.members[record.member_id] = replace(member, epoch=LEAVE_EPOCH, previous_epoch=LEAVE_EPOCH,
                                                      assigned={})
    else:  # pragma: no cover - the Record union is closed
        raise TypeError(f"not a share group record: {record!r}")


def copy_state(state: ShareGroupState) -> ShareGroupState:
    return replace(state, members=dict(state.members), target=dict(state.target),
                   subscription_metadata=dict(state.subscription_metadata), topic_refs=dict(state.topic_refs))


def subscribed_topics(state: ShareGroupState) -> set[str]:
    """The topic names the group's members subscribe to (whether they exist or not)."""
    return set(state.topic_refs)


# -- requests, answers, the environment -----------------------------------------------------------

@dataclass(frozen=True)
class ShareHeartbeatRequest:
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    topic_names: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass
class ShareHeartbeatResponse:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the last answer


@dataclass(frozen=True)
class ShareGroupEnv:
    """What the coordinator knows besides the group: the time, the cluster's topics, its configs."""
    now_ms: int
    topics: Mapping[str, int]  # topic -> partition count (topics that exist now)
    heartbeat_interval_ms: int = 5000   # group.share.heartbeat.interval.ms
    session_timeout_ms: int = 45000     # group.share.session.timeout.ms
    max_size: int = 200                 # group.share.max.size
    internal_topics: frozenset[str] = frozenset()


@dataclass
class Decision:
    records: list[Record]
    response: ShareHeartbeatResponse | None = None
    removed: list[str] = field(default_factory=list)  # members gone: their session timers go too


# -- validation ---------------------------------------------------------------------------------------

def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString test: set, but empty or only whitespace."""
    return value is not None and not value.strip()


def validate(req: ShareHeartbeatRequest, group_id: str) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (4.1+, v1: the client sends its member id)."""
    def invalid(message: str) -> GroupError:
        return GroupError(E.invalid_request, message)
    if req.member_id is None or _blank(req.member_id):
        raise invalid("MemberId can't be empty.")
    if _blank(group_id):
        raise invalid("GroupId can't be empty.")
    if _blank(req.rack_id):
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if not req.topic_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        raise invalid("MemberEpoch is invalid.")


def _check_epoch(member: ShareMember, received: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: ahead of the coordinator, or behind it other than
    by the one epoch whose answer may have been lost, is fenced."""
    if received > member.epoch:
        raise GroupError(E.fenced_member_epoch, f"The share group member has a greater member epoch "
                         f"({received}) than the one known by the group coordinator ({member.epoch}). "
                         "The member must abandon all its partitions and rejoin.")
    if received < member.epoch and received != member.previous_epoch:
        raise GroupError(E.fenced_member_epoch, f"The share group member has a smaller member epoch "
                         f"({received}) than the one known by the group coordinator ({member.epoch}), "
                         f"and it does not match the previous member epoch ({member.previous_epoch}). "
                         "The member must abandon all its partitions and rejoin.")


def _not_found(state: ShareGroupState) -> GroupError:
    return GroupError(E.group_id_not_found, f"Share group {state.group_id} not found.")


def _unknown(state: ShareGroupState, member_id: str) -> GroupError:
    return GroupError(E.unknown_member_id, f"Member {member_id} is not a member of group {state.group_id}.")


# -- heartbeat ----------------------------------------------------------------------------------------

def heartbeat(state: ShareGroupState, req: ShareHeartbeatRequest, env: ShareGroupEnv) -> Decision:
    """The records and answer of one heartbeat; raises GroupError for Kafka's errors. `state` is the
    group's current state (a new ShareGroupState(group_id) when it does not exist yet). On success
    the caller (re)starts the member's session timer; on a leave it cancels it (`removed`)."""
    validate(req, state.group_id)
    if req.member_epoch == LEAVE_EPOCH:
        return _leave(state, req)
    joining = req.member_epoch == 0
    if not joining and not state.exists:
        # Kafka: GROUP_ID_NOT_FOUND (fatal to the clients). kbroker keeps share-group membership in
        # memory, so after a coordinator failover the group is unknown here: its members are told
        # UNKNOWN_MEMBER_ID and join again (epoch 0), keeping their member ids and share sessions.
        raise GroupError(E.unknown_member_id, f"Member {req.member_id} is not a member of share group "
                         f"{state.group_id} (unknown to this coordinator: join again).")
    if len(state.members) >= env.max_size and req.member_id not in state.members:
        raise GroupError(E.group_max_size_reached,
                         f"The share group has reached its maximum capacity of {env.max_size} members.")
    member = state.members.get(req.member_id)
    if member is None:
        if not joining:
            raise _unknown(state, req.member_id)
        member = ShareMember(req.member_id)
    _check_epoch(member, req.member_epoch)
    work = _Scratch(state)

    # 1. the member's metadata; the group epoch moves with the group's membership and subscriptions
    updated = replace(member,
                      rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
                      topic_names=tuple(sorted(set(req.topic_names))) if req.topic_names is not None
                      else member.topic_names,
                      client_id=req.client_id, client_host=req.client_host)
    bump = False
    if updated != member:
        work.add(ShareGroupMemberMetadata(updated.member_id, updated.rack_id, updated.client_id,
                                          updated.client_host, updated.topic_names))
        bump = updated.topic_names != member.topic_names
    metadata = subscription_metadata(work.state, env)
    if metadata != work.state.subscription_metadata:
        work.add(ShareGroupPartitionMetadata(metadata))
        bump = True
    if bump:
        work.add(ShareGroupMetadata(work.state.epoch + 1))

    # 2. a new target assignment when the group epoch moved past it
    if work.state.epoch > work.state.assignment_epoch:
        _compute_target(work, metadata)

    # 3. the member takes its target at once (ShareGroupAssignmentBuilder: nothing to revoke)
    g = work.state
    current = g.members[member.member_id]
    target = g.target.get(member.member_id, {})
    if bump or current.epoch != g.assignment_epoch:
        assigned = {t: ps for t, ps in target.items() if t in current.topic_names}
        if current.epoch != g.assignment_epoch:
            epoch, previous = g.assignment_epoch, current.epoch
        else:
            epoch, previous = current.epoch, current.previous_epoch
        if (epoch, previous, assigned) != (current.epoch, current.previous_epoch, current.assigned):
            work.add(ShareGroupCurrentMemberAssignment(member.member_id, epoch, previous, assigned))
    after = work.state.members[member.member_id]
    full = joining or req.topic_names is not None
    response = ShareHeartbeatResponse(after.member_id, after.epoch, env.heartbeat_interval_ms,
                                      after.assigned if full or after.assigned != member.assigned else None)
    return Decision(work.records, response)


def _leave(state: ShareGroupState, req: ShareHeartbeatRequest) -> Decision:
    """Kafka's shareGroupLeave: no epoch check; an unknown group or member is an error."""
    if not state.exists:
        raise _not_found(state)
    if req.member_id not in state.members:
        raise _unknown(state, req.member_id)
    decision = fence(state, req.member_id)
    decision.response = ShareHeartbeatResponse(req.member_id, LEAVE_EPOCH)
    return decision


def fence(state: ShareGroupState, member_id: str) -> Decision:
    """Kafka's shareGroupFenceMember: remove a member (it left, or its session expired) and bump the
    group epoch so the others are given a new target. The subscription metadata loses the topics only
    it subscribed to (partition-count changes are noticed at the next heartbeat). An unknown member
    gives no records."""
    member = state.members.get(member_id)
    if member is None:
        return Decision([])
    work = _Scratch(state)
    work.add(ShareGroupCurrentMemberAssignmentTombstone(member_id))
    work.add(ShareGroupTargetAssignmentMemberTombstone(member_id))
    work.add(ShareGroupMemberMetadataTombstone(member_id))
    metadata = {t: n for t, n in state.subscription_metadata.items() if t in work.state.topic_refs}
    if metadata != state.subscription_metadata:
        work.add(ShareGroupPartitionMetadata(metadata))
    work.add(ShareGroupMetadata(state.epoch + 1))
    return Decision(work.records, None, [member_id])


def expire(state: ShareGroupState, member_id: str) -> Decision:
    """The member's session timer fired (the shell schedules it, group.share.session.timeout.ms after
    each successful heartbeat): it is fenced. Nothing when it is gone already."""
    return fence(state, member_id)


# -- subscriptions and the target assignment ---------------------------------------------------------

def subscription_metadata(state: ShareGroupState, env: ShareGroupEnv) -> dict[str, int]:
    """Partition counts of every existing, non-internal topic the group subscribes to: a change moves
    the group epoch."""
    return {t: env.topics[t] for t in sorted(state.topic_refs)
            if t in env.topics and t not in env.internal_topics}


def _compute_target(work: _Scratch, metadata: Mapping[str, int]) -> None:
    g = work.state
    members = {mid: frozenset(m.topic_names) for mid, m in g.members.items()}
    target = simple_assign(members, metadata, g.target)
    for mid in sorted(g.members):
        new = target.get(mid, {})
        if g.target.get(mid) != new:
            work.add(ShareGroupTargetAssignmentMember(mid, new))
    work.add(ShareGroupTargetAssignmentMetadata(g.epoch))


def simple_assign(members: Mapping[str, frozenset[str] | set[str] | tuple[str, ...]],
                  topics: Mapping[str, int],
                  current: Mapping[str, Assignment] | None = None) -> dict[str, dict[str, frozenset[int]]]:
    """The target assignment of a share group, topic by topic (Kafka's SimpleHeterogeneousAssignmentBuilder):
    `members` member id -> subscribed topic names, `topics` topic -> partition count (the topics that
    may be assigned), `current` the previous target (kept where balance allows).

    For a topic with P partitions and M subscribers each partition is shared by s = ceil(M / P)
    members (1 when there are at least as many partitions as members) and each subscriber gets
    floor or ceil of s*P/M of its partitions: every partition is assigned, every subscriber gets at
    least one when M > P, loads within a topic differ by at most one. Members are taken in sorted
    order, so the answer is deterministic; an unchanged group keeps its assignment."""
    current = current or {}
    out: dict[str, dict[str, frozenset[int]]] = {mid: {} for mid in sorted(members)}
    load = {mid: 0 for mid in out}
    for topic in sorted(topics):
        n = max(0, topics[topic])
        subs = [mid for mid in out if topic in members[mid]]
        if n == 0 or not subs:
            continue
        for mid, parts in _assign_topic(topic, n, subs, current, load).items():
            if parts:
                out[mid][topic] = frozenset(parts)
                load[mid] += len(parts)
    return out


def _assign_topic(topic: str, n: int, subs: list[str], current: Mapping[str, Assignment],
                  load: Mapping[str, int]) -> dict[str, set[int]]:
    m = len(subs)
    sharing = -(-m // n)
    total = sharing * n
    base, extra = divmod(total, m)
    kept = {mid: sorted(p for p in current.get(mid, {}).get(topic, ()) if 0 <= p < n) for mid in subs}
    # who takes one more: those keeping the most (stickiness), then the least loaded so far, then by id
    ranked = sorted(subs, key=lambda mid: (-min(len(kept[mid]), base + 1), load[mid], mid))
    quota = {mid: base for mid in subs}
    for mid in ranked[:extra]:
        quota[mid] = base + 1
    got: dict[str, set[int]] = {mid: set() for mid in subs}
    holders: list[set[str]] = [set() for _ in range(n)]
    for mid in subs:  # keep what balance allows
        for p in kept[mid]:
            if len(got[mid]) < quota[mid] and len(holders[p]) < sharing:
                got[mid].add(p)
                holders[p].add(mid)

    # then fill: members with the most room first (then the least loaded, then by id), from a heap
    # whose entries go stale when a member's count changes
    def key(mid: str) -> tuple[int, int, str]:
        return (len(got[mid]) - quota[mid], load[mid] + len(got[mid]), mid)

    def give(mid: str, p: int) -> None:
        got[mid].add(p)
        holders[p].add(mid)
        if len(got[mid]) < quota[mid]:
            heapq.heappush(room, key(mid))

    room = [key(mid) for mid in subs if len(got[mid]) < quota[mid]]
    heapq.heapify(room)
    for p in sorted(range(n), key=lambda p: (len(holders[p]), p)):
        aside: list[tuple[int, int, str]] = []
        while len(holders[p]) < sharing:
            while room:
                entry = heapq.heappop(room)
                mid = entry[2]
                if entry != key(mid) or len(got[mid]) >= quota[mid]:
                    continue
                if mid in holders[p]:
                    aside.append(entry)
                    continue
                give(mid, p)
                break
            else:
                # Every member with room already holds p. Such a member x holds fewer than
                # quota <= n partitions, so some q escapes it: if q still needs holders x takes it;
                # otherwise one of q's `sharing` holders lacks p (else p would have more than
                # `sharing`) and hands q to x, taking p instead. Either way one more slot is filled.
                x = min(mid for mid in subs if len(got[mid]) < quota[mid])
                q = next(q for q in range(n) if x not in holders[q])
                if len(holders[q]) == sharing:
                    y = min(mid for mid in holders[q] if p not in got[mid])
                    got[y].discard(q)
                    holders[q].discard(y)
                    got[y].add(p)  # its count, so its heap entry, is unchanged
                    holders[p].add(y)
                give(x, q)
        for entry in aside:
            heapq.heappush(room, entry)
    return got


class _Scratch:
    """Records decided so far, applied to a copy of the group: a decision reads its own writes
    without touching the coordinator's state (the caller applies the records it appends)."""

    def __init__(self, state: ShareGroupState) -> None:
        self.original = state
        self.records: list[Record] = []
        self.view: ShareGroupState | None = None

    @property
    def state(self) -> ShareGroupState:
        return self.original if self.view is None else self.view

    def add(self, record: Record) -> None:
        self.records.append(record)
        if self.view is None:
            self.view = copy_state(self.original)
        apply(self.view, record)
