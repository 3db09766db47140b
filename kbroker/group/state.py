"""The classic group protocol's states and the one table of legal transitions (Kafka's GroupState).

Empty: no members (offsets may remain). PreparingRebalance: members are (re)joining.
CompletingRebalance: generation chosen, waiting for the leader's assignment (SyncGroup).
Stable: assignment delivered, members heartbeat. Dead: removed (deleted, expired, unloaded).
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState

# target state -> the states it may be entered from
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
}

# ListGroups v4+ filters by these names (case-insensitively, as Kafka does)
STATE_NAMES = {state.value.lower(): state for state in GroupState}


class IllegalStateTransition(RuntimeError):
    pass


def check_transition(current: GroupState, target: GroupState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(f"group cannot go from {current.value} to {target.value}")
