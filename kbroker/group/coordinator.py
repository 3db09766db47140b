"""GroupCoordinator: the classic group protocol (join, sync, heartbeat, leave) and committed offsets.

Kafka's rules, learned from its GroupCoordinator: new members are held in PreparingRebalance until
every known member rejoined or the rebalance timeout passed (an Empty group first waits
`group.initial.rebalance.delay.ms`, longer while members keep arriving); the first member to
join leads and computes the assignment that SyncGroup hands out; heartbeats that stop for the
session timeout remove a member; static members (`group.instance.id`) are replaced in place.

Everything here is synchronous and driven by an injected clock: join and sync answers are
delivered through callbacks when the group completes, and timeouts live in a TimerQueue that
the server polls. Group changes and commits are written as records to `__consumer_offsets`
through an OffsetsLog before they take effect, and replayed from it by `load_partition`
(offsets_replay). Transactional offset commits are the TxnOffsetsMixin's (txn_offsets).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Protocol

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group import offsets_format as fmt
from kbroker.group.metadata import GroupMetadata, MemberMetadata, OffsetAndMetadata
from kbroker.group.offsets_replay import OffsetsReplay
from kbroker.group.state import GroupState
from kbroker.group.timers import TimerQueue
from kbroker.group.txn_offsets import TxnOffsetsMixin, drop_pending_txn_offsets
from kbroker.wire.internal_records import InternalBatch
from kbroker.wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

logger = logging.getLogger(__name__)

S = GroupState
E = ErrorCode
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # a new member cannot heartbeat while its join is held
UNKNOWN_MEMBER_ID = ""


def java_string_hash(value: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 overflow)."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions  # Kafka's Utils.abs


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_partitions: int = 50


@dataclass
class JoinResult:
    member_id: str
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # leader only


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


class OffsetsLog(Protocol):
    """Where the coordinator's records go: one partition of `__consumer_offsets` per group."""

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]], *,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> int:
        """Returns the batch's base offset; with a producer id, the batch is its transactional one."""
        ...

    def read_batches(self, partition: int) -> Iterable[InternalBatch]: ...


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


def _append_error(exc: KafkaError, *, for_commit: bool) -> ErrorCode:
    """Kafka's mapping of a failed __consumer_offsets append to what the group client sees."""
    code = exc.code
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append,
                E.request_timed_out):
        return E.coordinator_not_available
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size if for_commit else E.unknown_server_error
    return code


class GroupCoordinator(TxnOffsetsMixin):
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

    # -- routing and status -------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_partitions)

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

    # -- JoinGroup ----------------------------------------------------------------------------------
    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
                   session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                   respond: JoinCallback) -> None:
        error = self._validate_status(group_id)
        if error is not None:
            respond(JoinResult(member_id, error))
            return
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            respond(JoinResult(member_id, E.invalid_session_timeout))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                respond(JoinResult(member_id, E.unknown_member_id))
                return
            group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp=self.clock())
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            respond(JoinResult(UNKNOWN_MEMBER_ID, E.group_max_size_reached))
        elif is_unknown:
            self._new_member_join(group, group_instance_id, require_known_member_id, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond)
        else:
            self._current_member_join(group, member_id, group_instance_id, client_id, client_host,
                                      rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or \
                group.awaiting_join_count() < self.config.max_size
        return group.has(member_id) or len(group.members) < self.config.max_size

    def _new_member_join(self, group, instance_id, require_known_member_id, client_id, client_host,
                         rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, respond) -> None:
        if group.is_(S.DEAD):
            respond(JoinResult(UNKNOWN_MEMBER_ID, E.coordinator_not_available))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            respond(JoinResult(UNKNOWN_MEMBER_ID, E.inconsistent_group_protocol))
            return
        new_id = group.generate_member_id(client_id, instance_id)
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                self._update_static_member_and_rebalance(group, old_id, new_id, instance_id, protocols, respond)
                return
        elif require_known_member_id:
            group.pending_members.add(new_id)
            self.timers.schedule(("pending", group.group_id, new_id), self.clock() + session_timeout_ms,
                                 lambda: self._on_pending_member_expired(group.group_id, new_id))
            respond(JoinResult(new_id, E.member_id_required))
            return
        self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                       session_timeout_ms, protocol_type, protocols, respond)

    def _validate_current_member(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode | None:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return E.unknown_member_id
            if current != member_id:
                return E.fenced_instance_id
            return None
        return None if group.has(member_id) else E.unknown_member_id

    def _current_member_join(self, group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                             session_timeout_ms, protocol_type, protocols, respond) -> None:
        if group.is_(S.DEAD):
            respond(JoinResult(member_id, E.coordinator_not_available))
            return
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            respond(JoinResult(member_id, E.inconsistent_group_protocol))
            return
        if member_id in group.pending_members:
            self.timers.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, respond)
            return
        error = self._validate_current_member(group, member_id, instance_id)
        if error is not None:
            respond(JoinResult(member_id, error))
            return
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # a lost JoinGroup response: answer again with the current generation
                respond(self._join_result(group, member, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, respond)
        elif group.is_(S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoins to reassign (e.g. the topic grew): always a rebalance
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, respond)
            else:
                respond(self._join_result(group, member, include_members=False))
        else:
            respond(JoinResult(member_id, E.unknown_member_id))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata, include_members: bool) -> JoinResult:
        members = []
        if include_members:
            members = [(m.member_id, m.group_instance_id, meta) for m, meta in self._member_metadata(group)]
        return JoinResult(member.member_id, E.none, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", members)

    @staticmethod
    def _member_metadata(group: GroupMetadata) -> list[tuple[MemberMetadata, bytes]]:
        out = []
        for member in group.members.values():
            try:
                out.append((member, member.metadata_for(group.protocol_name)))
            except KeyError:  # a static member that did not rejoin with the chosen protocol
                out.append((member, b""))
        return out

    def _add_member_and_rebalance(self, group, member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                  session_timeout_ms, protocol_type, protocols, respond) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, list(protocols), is_new=True)
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True  # lets the initial delay extend
        group.add(member, respond)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group)

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                     respond) -> None:
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = respond
        self._maybe_prepare_rebalance(group)

    def _update_static_member_and_rebalance(self, group, old_id, new_id, instance_id, protocols, respond) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_id, new_id)
        old_protocols = member.protocols
        old_join, member.awaiting_join = member.awaiting_join, None
        if old_join is not None:  # the replaced instance was still waiting: fence it
            old_join(JoinResult(old_id, E.fenced_instance_id))
        old_sync, member.awaiting_sync = member.awaiting_sync, None
        if old_sync is not None:
            old_sync(SyncResult(E.fenced_instance_id))
        self._schedule_heartbeat(group, member)
        member.protocols = list(protocols)
        if group.is_(S.STABLE):
            if group.protocol_name == group.select_protocol():
                # same protocol next generation: no rebalance, the new id takes over the assignment
                error = self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                if error is not None:
                    member.protocols = old_protocols
                    group.replace_static_member(instance_id, new_id, old_id)
                    self._schedule_heartbeat(group, group.members[old_id])
                    respond(JoinResult(UNKNOWN_MEMBER_ID, error, group.generation_id, group.protocol_type,
                                       group.protocol_name, current_leader))
                else:
                    # the old leader id is returned so this member does not compute an assignment
                    # that a Stable group would never distribute
                    respond(JoinResult(new_id, E.none, group.generation_id, group.protocol_type,
                                       group.protocol_name, current_leader))
            else:
                member.awaiting_join = respond
                self._maybe_prepare_rebalance(group)
        elif group.is_(S.COMPLETING_REBALANCE):
            member.awaiting_join = respond
            self._prepare_rebalance(group)
        else:  # PreparingRebalance: it will be answered when the join completes
            member.awaiting_join = respond

    # -- rebalance ----------------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: GroupMetadata) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.rebalance_in_progress)
        self._remove_sync_expiration(group)
        now = self.clock()
        gid = group.group_id
        if group.is_(S.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_join(group, ("initial", delay, remaining), now + delay)
        else:
            self._schedule_join(group, ("delayed",), now + group.rebalance_timeout_ms())
        group.transition_to(S.PREPARING_REBALANCE, now)
        logger.info("preparing to rebalance group %s (generation %d)", gid, group.generation_id)
        self._try_complete_join(group)

    def _schedule_join(self, group: GroupMetadata, op: tuple, deadline: int) -> None:
        gid = group.group_id
        self._join_ops[gid] = op
        self.timers.schedule(("join", gid), deadline, lambda: self._on_join_expired(gid))

    def _try_complete_join(self, group: GroupMetadata) -> None:
        op = self._join_ops.get(group.group_id)
        if op is None or op[0] == "initial":
            return  # the initial delay always runs out (it collects members that join meanwhile)
        if group.has_all_members_joined():
            self.timers.cancel(("join", group.group_id))
            del self._join_ops[group.group_id]
            self._on_complete_join(group)

    def _on_join_expired(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        op = self._join_ops.pop(group_id, None)
        if group is None or op is None:
            return
        if op[0] == "initial":
            _kind, delay, remaining = op
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self._schedule_join(group, ("initial", next_delay, max(remaining - delay, 0)),
                                    self.clock() + next_delay)
                return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                group.remove(member.member_id)
                self.timers.cancel(("hb", group.group_id, member.member_id))
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined; wait another round for the session timeouts to clear them out
            self._schedule_join(group, ("delayed",), self.clock() + group.rebalance_timeout_ms())
            return
        group.init_next_generation(self.clock())
        if group.is_(S.EMPTY):
            error = self._store_group(group, {})
            if error is not None:
                logger.warning("could not write empty metadata of group %s: %s", group.group_id, error.name)
            return
        logger.info("group %s stabilized at generation %d with %d members", group.group_id,
                    group.generation_id, len(group.members))
        for member in list(group.members.values()):
            callback, member.awaiting_join = member.awaiting_join, None
            if callback is not None:
                callback(self._join_result(group, member, include_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        gid = group.group_id
        self.timers.schedule(("sync", gid), self.clock() + group.rebalance_timeout_ms(),
                             lambda: self._on_sync_expired(gid, generation))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel(("sync", group.group_id))

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.timers.cancel(("sync", group.group_id))

    def _on_sync_expired(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation_id:
            return
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            for member_id in list(group.pending_sync_members):
                group.remove(member_id)
                self.timers.cancel(("hb", group_id, member_id))
            self._prepare_rebalance(group)

    # -- SyncGroup ----------------------------------------------------------------------------------
    def sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                   protocol_name: str | None, group_instance_id: str | None, assignments: dict[str, bytes],
                   respond: SyncCallback) -> None:
        error = self._validate_status(group_id)
        if error is not None:
            # a loading coordinator lost the rebalance: rejoining is what the member must do
            respond(SyncResult(E.rebalance_in_progress if error == E.coordinator_load_in_progress else error))
            return
        group = self.groups.get(group_id)
        if group is None:
            respond(SyncResult(E.unknown_member_id))
            return
        if group.is_(S.DEAD):
            respond(SyncResult(E.coordinator_not_available))
            return
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.illegal_generation
        if error is None and ((protocol_type is not None and protocol_type != group.protocol_type) or
                              (protocol_name is not None and protocol_name != group.protocol_name)):
            error = E.inconsistent_group_protocol
        if error is not None:
            respond(SyncResult(error))
        elif group.is_(S.EMPTY):
            respond(SyncResult(E.unknown_member_id))
        elif group.is_(S.PREPARING_REBALANCE):
            respond(SyncResult(E.rebalance_in_progress))
        elif group.is_(S.COMPLETING_REBALANCE):
            group.members[member_id].awaiting_sync = respond
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
                store_error = self._store_group(group, assignment)
                if group.is_(S.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                    if store_error is not None:
                        self._reset_and_propagate_assignment_error(group, store_error)
                        self._maybe_prepare_rebalance(group)
                    else:
                        for member in group.members.values():
                            member.assignment = assignment[member.member_id]
                        self._propagate_assignment(group, E.none)
                        group.transition_to(S.STABLE, self.clock())
        else:  # Stable: the assignment is already known
            self._remove_pending_sync_member(group, member_id)
            member = group.members[member_id]
            respond(SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == E.none
        for member in list(group.members.values()):
            callback, member.awaiting_sync = member.awaiting_sync, None
            if callback is not None:
                callback(SyncResult(error, group.protocol_type if ok else None, group.protocol_name if ok else None,
                                    member.assignment))
                # its session restarts now: it could not heartbeat while waiting for this answer
                self._schedule_heartbeat(group, member)

    # -- Heartbeat and session expiry ---------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self._validate_status(group_id)
        if error is not None:
            return E.none if error == E.coordinator_load_in_progress else error
        group = self.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
        if group.is_(S.EMPTY):
            return E.unknown_member_id
        self._schedule_heartbeat(group, group.members[member_id])
        return E.rebalance_in_progress if group.is_(S.PREPARING_REBALANCE) else E.none

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        member.heartbeat_satisfied = False
        gid, mid = group.group_id, member.member_id
        deadline = self.clock() + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
        self.timers.schedule(("hb", gid, mid), deadline, lambda: self._on_heartbeat_expired(gid, mid))

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return  # satisfied members blocked in a join/sync are rescheduled when answered
        logger.info("member %s of group %s failed its session timeout; removing it", member_id, group_id)
        self._remove_member_and_update_group(group, member)

    def _on_pending_member_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.pending_members:
            return
        group.remove(member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        callback, member.awaiting_join = member.awaiting_join, None
        if callback is not None:
            callback(JoinResult(UNKNOWN_MEMBER_ID, E.unknown_member_id))
        callback, member.awaiting_sync = member.awaiting_sync, None
        if callback is not None:
            callback(SyncResult(E.unknown_member_id))
        group.remove(member.member_id)
        self.timers.cancel(("hb", group.group_id, member.member_id))
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- LeaveGroup ---------------------------------------------------------------------------------
    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        error = self._validate_status(group_id)
        if error is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return E.none, [(mid, iid, E.unknown_member_id) for mid, iid in members]
        if group.is_(S.DEAD):
            return E.coordinator_not_available, []
        results = []
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    results.append((member_id, instance_id, E.unknown_member_id))
                else:
                    self._remove_member_and_update_group(group, group.members[current])
                    results.append((member_id, instance_id, E.none))
            elif member_id in group.pending_members:
                self.timers.cancel(("pending", group_id, member_id))
                group.remove(member_id)
                if group.is_(S.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                results.append((member_id, instance_id, E.none))
            else:
                error = self._validate_current_member(group, member_id, instance_id)
                if error is None:
                    logger.info("member %s left group %s", member_id, group_id)
                    self._remove_member_and_update_group(group, group.members[member_id])
                    error = E.none
                results.append((member_id, instance_id, error))
        return E.none, results

    # -- offsets ------------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], ErrorCode]:
        def all_(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {tp: code for tp in offsets}

        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(E.illegal_generation)  # a commit from a generation this group never had
            group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp=self.clock())
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
                code = _append_error(exc, for_commit=True)
                results.update({tp: code for tp in valid})
            else:
                written = {tp: replace(om, record_offset=record_offset) for tp, om in valid.items()}
                if producer_id == NO_PRODUCER_ID:
                    group.offsets.update(written)  # appended last, so newer than any other
                else:
                    group.pending_txn_offsets.setdefault(producer_id, {}).update(written)
                results.update({tp: E.none for tp in valid})
        return results

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetAndMetadata | None]]:
        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
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
        if group.is_(S.EMPTY):
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
            if group.is_(S.EMPTY) and not group.offsets and not group.members and not group.pending_txn_offsets:
                self._delete_group(group)
        return removed

    # -- list / describe / delete -------------------------------------------------------------------
    def list_groups(self, states: set[str] | None = None) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        if not self.active:
            return E.coordinator_not_available, []
        error = E.coordinator_load_in_progress if self.loading else E.none
        wanted = {s.lower() for s in states} if states else None
        return error, [(g.group_id, g.protocol_type or "", g.state.value) for g in self.groups.values()
                       if wanted is None or g.state.value.lower() in wanted]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, GroupSummary(group_id, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None:
            return E.none, GroupSummary(group_id, S.DEAD.value, "", "", [])
        stable = group.is_(S.STABLE)
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 meta if stable else b"", m.assignment if stable else b"")
                   for m, meta in (self._member_metadata(group) if stable else
                                   [(m, b"") for m in group.members.values()])]
        return E.none, GroupSummary(group_id, group.state.value, group.protocol_type or "",
                                    (group.protocol_name or "") if stable else "", members)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results = {}
        for group_id in group_ids:
            error = self._validate_status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(S.DEAD):
                results[group_id] = E.group_id_not_found
            elif not group.is_(S.EMPTY):
                results[group_id] = E.non_empty_group
            else:
                try:
                    self._delete_group(group)
                    results[group_id] = E.none
                except KafkaError as exc:
                    results[group_id] = _append_error(exc, for_commit=False)
        return results

    def _delete_group(self, group: GroupMetadata) -> None:
        entries = [(fmt.encode_key(fmt.OffsetKey(group.group_id, t, p)), None) for t, p in group.offsets]
        entries.append((fmt.encode_key(fmt.GroupMetadataKey(group.group_id)), None))
        self.log.append(self.partition_for(group.group_id), entries)
        group.transition_to(S.DEAD, self.clock())
        group.offsets.clear()
        del self.groups[group.group_id]
        self._join_ops.pop(group.group_id, None)
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
    def _store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> ErrorCode | None:
        members = tuple(
            fmt.MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                             m.session_timeout_ms, meta, assignment.get(m.member_id, b""))
            for m, meta in (self._member_metadata(group) if group.protocol_name else [])
        )
        value = fmt.GroupMetadataValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                                       group.leader_id if members else None, group.state_timestamp, members)
        try:
            self.log.append(self.partition_for(group.group_id),
                            [(fmt.encode_key(fmt.GroupMetadataKey(group.group_id)),
                              fmt.encode_group_metadata_value(value))])
        except KafkaError as exc:
            return _append_error(exc, for_commit=False)
        return None

    def load_partition(self, partition: int) -> int:
        """Replay one `__consumer_offsets` partition (offsets_replay). Groups come back Stable with
        their members (who keep heartbeating) or Empty, with their open transactions' offsets."""
        self.loading.add(partition)
        try:
            replay = OffsetsReplay(partition)
            for batch in self.log.read_batches(partition):
                replay.apply(batch)
            for group_id in replay.group_ids():
                if self.partition_for(group_id) != partition:
                    continue
                value = replay.metadata.get(group_id)
                offsets, pending = replay.committed_of(group_id), replay.pending_of(group_id)
                if value is None and not offsets and not pending:
                    continue
                group = self.groups[group_id] = self._restore_group(group_id, value, offsets)
                group.pending_txn_offsets = pending
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
            _answer_parked_not_coordinator(self.groups.pop(group_id))

    def _restore_group(self, group_id: str, value: fmt.GroupMetadataValue | None,
                       offsets: dict[tuple[str, int], OffsetAndMetadata]) -> GroupMetadata:
        group = GroupMetadata(group_id, state_timestamp=self.clock())
        group.offsets = dict(offsets)
        if value is None:
            return group
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        if value.current_state_timestamp >= 0:
            group.state_timestamp = value.current_state_timestamp
        for rec in value.members:
            member = MemberMetadata(rec.member_id, rec.group_instance_id, rec.client_id, rec.client_host,
                                    rec.rebalance_timeout_ms, rec.session_timeout_ms, value.protocol_type,
                                    [(value.protocol or "", rec.subscription)], assignment=rec.assignment)
            group.add(member)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        if group.members:
            group.state = S.STABLE
            group.subscribed_topics = group._compute_subscribed_topics()
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        elif group.protocol_type == "consumer":
            group.subscribed_topics = set()
        return group

    def shutdown(self) -> None:
        """Stop coordinating: parked joins and syncs are answered NOT_COORDINATOR (as when Kafka
        unloads a group), so clients look for the coordinator again instead of holding a
        connection open through the broker's shutdown; the groups reload from the log on start."""
        self.active = False
        for group in self.groups.values():
            _answer_parked_not_coordinator(group)
        self._join_ops.clear()
        self.timers = TimerQueue()


def _answer_parked_not_coordinator(group: GroupMetadata) -> None:
    """Members parked in a join or sync are told NOT_COORDINATOR: they look the coordinator up again."""
    for member in group.members.values():
        join, member.awaiting_join = member.awaiting_join, None
        if join is not None:
            join(JoinResult(member.member_id, E.not_coordinator))
        sync, member.awaiting_sync = member.awaiting_sync, None
        if sync is not None:
            sync(SyncResult(E.not_coordinator))
