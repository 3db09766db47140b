"""One group's in-memory state: members, generation, chosen protocol, leader, committed offsets
and the offsets of open transactions.

Bookkeeping only (Kafka's GroupMetadata/MemberMetadata); the decisions — when to rebalance, what
to answer — are the coordinator's. Join and sync responses are held as callbacks on the member
until the coordinator completes them.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from kbroker.group.consumer_state import ConsumerGroupState
from kbroker.group.state import GroupState, check_transition

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
    # the offset of the __consumer_offsets batch that wrote it (Kafka's appendedBatchOffset): a
    # transaction's offset replaces a committed one only if written after it; not part of equality
    record_offset: int = field(default=-1, compare=False)


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Callable[[Any], None] | None = None
    awaiting_sync: Callable[[Any], None] | None = None
    is_new: bool = False
    heartbeat_satisfied: bool = False

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")

    def has_satisfied_heartbeat(self) -> bool:
        # members blocked in a JoinGroup/SyncGroup cannot heartbeat; only new members time out there
        if self.is_new:
            return self.heartbeat_satisfied
        if self.awaiting_join is not None or self.awaiting_sync is not None:
            return True
        return self.heartbeat_satisfied


@dataclass
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: set[str] = field(default_factory=set)  # got MEMBER_ID_REQUIRED, not joined yet
    pending_sync_members: set[str] = field(default_factory=set)
    new_member_added: bool = False
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # producer id -> the offsets its open transaction wrote, committed or dropped by its marker
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    subscribed_topics: set[str] | None = None  # None: unknown (not the consumer protocol)
    consumer: ConsumerGroupState | None = None  # a consumer-protocol (KIP-848) group: its state

    # -- state ------------------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        check_transition(self.state, state)
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # -- members ----------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id or client_id}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, on_join: Callable[[Any], None] | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.awaiting_join = on_join
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync_members.discard(old_id)
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols --------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocol_names)
        if protocol_type != self.protocol_type:
            return False
        return any(all(name in m.protocol_names for m in self.members.values()) for name in protocol_names)

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])  # ties: the first voted for

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self._compute_subscribed_topics()
        self.pending_sync_members.clear()

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return set() if not self.members and self.protocol_type == CONSUMER_PROTOCOL_TYPE else None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscription_topics(member.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        if self.consumer is not None:
            return topic in self.consumer.subscribed_topics() or bool(self.consumer.regex_refs)
        return self.subscribed_topics is None or topic in self.subscribed_topics

    @property
    def group_type(self) -> str:
        """Kafka 4's group type: "consumer" for the KIP-848 protocol, else "classic"."""
        return "consumer" if self.consumer is not None else "classic"

    def current_member_metadata(self) -> list[tuple[MemberMetadata, bytes]]:
        assert self.protocol_name is not None
        return [(m, m.metadata_for(self.protocol_name)) for m in self.members.values()]


def subscription_topics(data: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version); None if it does not parse."""
    try:
        (_version, count), pos = struct.unpack_from(">hi", data, 0), 6
        if count < 0 or count > len(data):
            return None
        topics = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topics.add(bytes(data[pos : pos + n]).decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
