"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups),
mixed into GroupCoordinator, which owns the groups, timers, offsets and the log.

Kafka's rules, learned from its GroupCoordinator: new members are held in PreparingRebalance until
every known member rejoined or the rebalance timeout passed (an Empty group first waits
`group.initial.rebalance.delay.ms`, longer while members keep arriving); the first member to
join leads and computes the assignment that SyncGroup hands out; heartbeats that stop for the
session timeout remove a member; static members (`group.instance.id`) are replaced in place.

Join and sync answers are delivered through callbacks when the group completes; the group's
metadata record (its generation, members and assignment) is appended to `__consumer_offsets`
before the assignment is handed out, and `restore_classic_group` rebuilds a group from it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group import offsets_format as fmt
from kbroker.group.metadata import GroupMetadata, MemberMetadata, OffsetAndMetadata
from kbroker.group.state import GroupState
from kbroker.group.timers import TimerQueue
from kbroker.group.types import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    UNKNOWN_MEMBER_ID,
    GroupConfig,
    GroupSummary,
    JoinCallback,
    JoinResult,
    MemberSummary,
    OffsetsLog,
    SyncCallback,
    SyncResult,
    append_error,
)

logger = logging.getLogger(__name__)

S = GroupState
E = ErrorCode


class ClassicGroupsMixin:
    """Needs from its host: config, log, clock, groups, timers, _join_ops, _validate_status,
    partition_for."""

    config: GroupConfig
    log: OffsetsLog
    clock: Callable[[], int]
    groups: dict[str, GroupMetadata]
    timers: TimerQueue
    _join_ops: dict[str, tuple]

    if TYPE_CHECKING:
        def _validate_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None: ...
        def partition_for(self, group_id: str) -> int: ...
        def consumer_group_records(self, group_id: str) -> list[tuple[bytes, bytes | None]]: ...
        def is_share_group(self, group_id: str) -> bool: ...
        def migration_allows(self, direction: str) -> bool: ...
        def classic_join_to_consumer_group(self, *args) -> None: ...
        def classic_sync_to_consumer_group(self, *args) -> None: ...
        def classic_heartbeat_to_consumer_group(self, *args) -> ErrorCode: ...
        def classic_leave_to_consumer_group(self, *args) -> list: ...

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
        if self.is_share_group(group_id):  # a share group's id is not a classic group's
            respond(JoinResult(member_id, E.inconsistent_group_protocol))
            return
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None:
            if group.consumer.members:
                if not self.migration_allows("upgrade"):  # classic members join only a migrating group
                    respond(JoinResult(member_id, E.inconsistent_group_protocol))
                    return
                self.classic_join_to_consumer_group(group, member_id, group_instance_id, require_known_member_id,
                                                    client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                                                    protocol_type, protocols, respond)
                return
            error = self._classic_from_empty_consumer_group(group)
            if error is not None:
                respond(JoinResult(member_id, error))
                return
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

    def _classic_from_empty_consumer_group(self, group: GroupMetadata) -> ErrorCode | None:
        """A consumer-protocol group without members becomes a classic one (its offsets stay): the
        consumer group's records are deleted first."""
        try:
            self.log.append(self.partition_for(group.group_id), self.consumer_group_records(group.group_id))
        except KafkaError as exc:
            return append_error(exc, for_commit=False)
        group.consumer = None
        group.protocol_type = None
        return None

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
        if group is not None and group.consumer is not None:
            self.classic_sync_to_consumer_group(group, generation_id, member_id, protocol_type, protocol_name,
                                                group_instance_id, respond)
            return
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
        if group is not None and group.consumer is not None:
            return self.classic_heartbeat_to_consumer_group(group, member_id, group_instance_id, generation_id)
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
        if group is not None and group.consumer is not None:
            return E.none, self.classic_leave_to_consumer_group(group, members)
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

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """DescribeGroups of one group. A group this coordinator does not have as a classic group
        (none, or a consumer-protocol group) is GROUP_ID_NOT_FOUND with the state Dead and Kafka's
        message (`summary.message`); DescribeGroups v0-5 answer it without the error."""
        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, GroupSummary(group_id, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None or (group.consumer is not None and group.consumer.deleted):
            return E.group_id_not_found, GroupSummary(group_id, S.DEAD.value, "", "", [], f"Group {group_id} not found.")
        if group.consumer is not None:
            return E.group_id_not_found, GroupSummary(group_id, S.DEAD.value, "", "", [],
                                                      f"Group {group_id} is not a classic group.")
        stable = group.is_(S.STABLE)
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 meta if stable else b"", m.assignment if stable else b"")
                   for m, meta in (self._member_metadata(group) if stable else
                                   [(m, b"") for m in group.members.values()])]
        return E.none, GroupSummary(group_id, group.state.value, group.protocol_type or "",
                                    (group.protocol_name or "") if stable else "", members)


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
            return append_error(exc, for_commit=False)
        return None


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



def answer_parked_not_coordinator(group: GroupMetadata) -> None:
    """Members parked in a join or sync are told NOT_COORDINATOR: they look the coordinator up again."""
    for member in group.members.values():
        join, member.awaiting_join = member.awaiting_join, None
        if join is not None:
            join(JoinResult(member.member_id, E.not_coordinator))
        sync, member.awaiting_sync = member.awaiting_sync, None
        if sync is not None:
            sync(SyncResult(E.not_coordinator))
