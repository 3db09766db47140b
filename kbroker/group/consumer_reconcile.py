"""Moving one member of a consumer-protocol group towards its target assignment (Kafka's
CurrentAssignmentBuilder), as a pure function.

The rule that keeps a partition from having two owners: a member is first told to revoke the
partitions it holds that its target no longer has (UNREVOKED_PARTITIONS, its epoch unchanged);
only once its heartbeat no longer lists them does it move to the target epoch and receive its new
partitions — and of those only the ones no other member still holds (the others follow when
released: UNRELEASED_PARTITIONS).
"""

from __future__ import annotations

from typing import Callable, Mapping

from kbroker.group.consumer_state import Assignment, CurrentAssignment, MemberState, assignment_of

OwnerEpoch = Callable[[str, int], int]  # (topic, partition) -> the holding member's epoch, -1 if free


def owns_any(owned: Mapping[str, frozenset[int]] | None, partitions: Assignment) -> bool:
    """Whether the member's reported partitions include any of `partitions`; unreported counts as yes."""
    if owned is None:
        return True
    return any(partitions.get(topic, frozenset()) & ps for topic, ps in owned.items())


def reconcile(current: CurrentAssignment, member_id: str, target_epoch: int, target: Assignment,
              owner_epoch: OwnerEpoch, owners: Mapping[tuple[str, int], str],
              owned: Mapping[str, frozenset[int]] | None) -> CurrentAssignment:
    """The member's next current assignment. `owned`: what its heartbeat reported (None: not sent)."""
    state = current.state
    if state == MemberState.STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(current, member_id, current.member_epoch, target_epoch, target, owner_epoch, owners, owned)
    if state == MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, current.pending_revocation):
            return current
        return _next(current, member_id, current.member_epoch + 1, target_epoch, target, owner_epoch, owners, owned)
    if state == MemberState.UNRELEASED_PARTITIONS:
        return _next(current, member_id, current.member_epoch, target_epoch, target, owner_epoch, owners, owned)
    # UNKNOWN: start over from nothing (the caller fences a member that still owns partitions)
    return _next(current, member_id, target_epoch, target_epoch, target, owner_epoch, owners, owned)


def _next(current: CurrentAssignment, member_id: str, member_epoch: int, target_epoch: int, target: Assignment,
          owner_epoch: OwnerEpoch, owners: Mapping[tuple[str, int], str],
          owned: Mapping[str, frozenset[int]] | None) -> CurrentAssignment:
    kept: dict[str, set[int]] = {}
    revoke: dict[str, set[int]] = {}
    new: dict[str, set[int]] = {}
    unreleased = False
    for topic in set(target) | set(current.assigned):
        wanted = target.get(topic, frozenset())
        have = current.assigned.get(topic, frozenset())
        kept[topic] = set(have & wanted)
        revoke[topic] = set(have - wanted)
        free = set()
        for p in wanted - have:
            holder = owners.get((topic, p))
            if holder is not None and holder != member_id and owner_epoch(topic, p) != -1:
                unreleased = True
            else:
                free.add(p)
        new[topic] = free
    kept_a, revoke_a, new_a = assignment_of(kept), assignment_of(revoke), assignment_of(new)
    if revoke_a and owns_any(owned, revoke_a):
        return CurrentAssignment(member_epoch, _previous(current, member_epoch), MemberState.UNREVOKED_PARTITIONS,
                                 kept_a, revoke_a)
    assigned = {t: kept_a.get(t, frozenset()) | new_a.get(t, frozenset()) for t in set(kept_a) | set(new_a)}
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return CurrentAssignment(target_epoch, _previous(current, target_epoch), state, assignment_of(assigned), {})


def _previous(current: CurrentAssignment, new_epoch: int) -> int:
    """Kafka's updateMemberEpoch: the epoch the member had before this step becomes the previous one
    (a member whose answer was lost may come back with it)."""
    return current.member_epoch
