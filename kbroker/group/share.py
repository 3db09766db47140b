"""Share groups' membership shell (KIP-932), mixed into GroupCoordinator: a ShareGroupHeartbeat's
decision (share_protocol, pure) applied to the group's state, the member's session timer in the
coordinator's TimerQueue, and the listeners told when a member is gone (the share-partitions on the
leaders give its acquired records back, its share sessions end).

A group id is one type at a time: a share heartbeat for a classic or consumer group with members
(or offsets) is GROUP_ID_NOT_FOUND ("not a share group"), as Kafka answers; the reverse is refused
where those protocols look up their groups.

Share-group membership is kept in memory (not yet written to `__consumer_offsets` with Kafka's
record types 9-14): after a coordinator restart or failover its members are UNKNOWN_MEMBER_ID and
join again, which the stock clients do by themselves. The records the decisions carry are the ones
to write when that lands.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from kbroker.errors import ErrorCode
from kbroker.group import share_protocol as sp
from kbroker.group.metadata import GroupMetadata
from kbroker.group.state import GroupState
from kbroker.group.timers import TimerQueue
from kbroker.group.types import GroupConfig

logger = logging.getLogger(__name__)

E = ErrorCode


class ShareGroupsMixin:
    config: GroupConfig
    clock: Callable[[], int]
    groups: dict[str, GroupMetadata]
    timers: TimerQueue
    share_groups: dict[str, sp.ShareGroupState]
    # called with (group id, member id) when a share-group member leaves or is fenced
    share_member_gone: list[Callable[[str, str], None]]

    if TYPE_CHECKING:
        from kbroker.group.consumer import TopicSource

        topics: TopicSource

        def _validate_status(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode | None: ...

    def share_env(self) -> sp.ShareGroupEnv:
        c = self.config
        return sp.ShareGroupEnv(self.clock(), self.topics.partition_counts(), c.share_heartbeat_interval_ms,
                                c.share_session_timeout_ms, c.share_max_size, self.topics.internal_topics())

    def share_group_heartbeat(self, group_id: str, request: sp.ShareHeartbeatRequest
                              ) -> tuple[ErrorCode, str | None, sp.ShareHeartbeatResponse | None]:
        error = self._validate_status(group_id)
        if error is not None:
            return error, None, None
        if "share" not in self.config.rebalance_protocols:
            return E.unsupported_version, "Share groups are not enabled (group.coordinator.rebalance.protocols).", None
        other = self.groups.get(group_id)
        if other is not None and (other.consumer is not None or other.members or other.offsets
                                  or not other.is_(GroupState.EMPTY)):
            return E.group_id_not_found, f"Group {group_id} is not a share group.", None
        state = self.share_groups.get(group_id) or sp.ShareGroupState(group_id)
        try:
            decision = sp.heartbeat(state, request, self.share_env())
        except sp.GroupError as exc:
            return exc.code, exc.message, None
        self._apply_share(group_id, state, decision)
        member_id = decision.response.member_id if decision.response is not None else request.member_id
        if request.member_epoch != sp.LEAVE_EPOCH and member_id in state.members:
            self.timers.schedule(("shb", group_id, member_id), self.clock() + self.config.share_session_timeout_ms,
                                 lambda: self._share_session_expired(group_id, member_id))
        return E.none, None, decision.response

    def _apply_share(self, group_id: str, state: sp.ShareGroupState, decision: sp.Decision) -> None:
        for record in decision.records:
            sp.apply(state, record)
        if state.exists:
            self.share_groups[group_id] = state
        else:
            self.share_groups.pop(group_id, None)
        gone = set(decision.removed)
        for record in decision.records:
            if isinstance(record, sp.ShareGroupMemberMetadataTombstone):
                gone.add(record.member_id)
        for member_id in gone:
            self.timers.cancel(("shb", group_id, member_id))
            for listener in self.share_member_gone:
                listener(group_id, member_id)

    def _share_session_expired(self, group_id: str, member_id: str) -> None:
        state = self.share_groups.get(group_id)
        if state is None or member_id not in state.members:
            return
        logger.info("member %s of share group %s missed its session timeout; fencing it", member_id, group_id)
        self._apply_share(group_id, state, sp.expire(state, member_id))

    def describe_share_group(self, group_id: str) -> tuple[ErrorCode, str | None, sp.ShareGroupState | None]:
        """(error, message, the group) for ShareGroupDescribe, as Kafka answers it."""
        error = self._validate_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, None, None
        state = self.share_groups.get(group_id)
        if state is None or not state.exists:
            other = self.groups.get(group_id)
            if other is not None and (other.consumer is not None or other.members or other.offsets):
                return E.group_id_not_found, f"Group {group_id} is not a share group.", None
            return E.group_id_not_found, f"Group {group_id} not found.", None
        return E.none, None, state

    def share_group_for_offsets(self, group_id: str, known: bool) -> tuple[ErrorCode, str | None, sp.ShareGroupState | None]:
        """For the share-group offset APIs and DeleteGroups: (error, message, the group's members'
        state or None when it has no live members). `known`: the share-partitions have state for the
        group (a share group whose members are gone, e.g. after a restart, is still one)."""
        error = self._validate_status(group_id)
        if error is not None:
            return error, None, None
        state = self.share_groups.get(group_id)
        if state is not None and state.exists:
            return E.none, None, state
        other = self.groups.get(group_id)
        if other is not None and (other.consumer is not None or other.members or other.offsets):
            return E.group_id_not_found, f"Group {group_id} is not a share group.", None
        if known:
            return E.none, None, None
        return E.group_id_not_found, f"Group {group_id} not found.", None

    def drop_share_group(self, group_id: str) -> None:
        """DeleteGroups of an empty share group."""
        state = self.share_groups.pop(group_id, None)
        for member_id in (state.members if state is not None else ()):
            self.timers.cancel(("shb", group_id, member_id))

    def is_share_group(self, group_id: str) -> bool:
        state = self.share_groups.get(group_id)
        return state is not None and state.exists
