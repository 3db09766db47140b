"""Partition reassignment as pure functions: the add-then-drop move of KIP-455.

A move from the original replicas (ORS) to the target replicas (TRS) runs in two steps:

1. begin: the partition's replica set becomes ORS + TRS (target first, so the preferred leader is
   the target's first replica), with `adding` = TRS - ORS and `removing` = ORS - TRS recorded in
   the topic znode; the leader epoch goes up so every replica learns the set, and the added
   replicas start fetching. The replication factor is briefly higher.
2. complete: once every target replica is in the ISR, the replica set becomes TRS, the ISR keeps
   only target replicas, the leader moves if it was leaving (to the first target replica in the
   ISR that may lead), and the removed replicas are stopped and deleted.

A cancellation is a move back to ORS, which is usually complete at once (the original replicas
never left the ISR): the added replicas are dropped. Nothing here does I/O; the controller writes
ZooKeeper and tells the brokers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kbroker.errors import ErrorCode
from kbroker.zookeeper.znodes import NO_LEADER, LeaderAndIsr


@dataclass(frozen=True)
class ReplicaSets:
    """A partition's replicas during a move, as the topic znode holds them."""

    replicas: tuple[int, ...]   # everything hosting the partition now (ORS + TRS while moving)
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


def begin(current: ReplicaSets, target: list[int]) -> ReplicaSets:
    """The replica sets of a move from where the partition stands to `target` (Kafka's
    ReplicaAssignment.reassignTo). A move that replaces one in progress starts from that move's
    original replicas; replicas the earlier move was adding that the new one does not want leave
    the set at once (see `unneeded`)."""
    original = current.original
    full = tuple(dict.fromkeys([*target, *original]))
    return ReplicaSets(full, tuple(r for r in full if r not in original), tuple(r for r in full if r not in target))


def cancel(current: ReplicaSets) -> ReplicaSets:
    """Back to the original replicas: what was being added is now being removed."""
    if not current.moving:
        return current
    return ReplicaSets(current.replicas, (), tuple(r for r in current.replicas if r not in current.original))


def unneeded(before: ReplicaSets, after: ReplicaSets) -> list[int]:
    """Replicas that host the partition before a change of move and no longer after it."""
    return [r for r in before.replicas if r not in after.replicas]


def validate_target(target: list[int], live_brokers: set[int]) -> tuple[ErrorCode, str] | None:
    """Kafka's checks of a requested replica list (INVALID_REPLICA_ASSIGNMENT otherwise)."""
    if not target:
        return ErrorCode.invalid_replica_assignment, "the replica list is empty"
    if len(set(target)) != len(target):
        return ErrorCode.invalid_replica_assignment, f"duplicate brokers in {target}"
    if any(r < 0 for r in target):
        return ErrorCode.invalid_replica_assignment, f"negative broker id in {target}"
    missing = sorted(set(target) - live_brokers)
    if missing:
        return ErrorCode.invalid_replica_assignment, f"brokers {missing} are not alive"
    return None


def started_state(state: LeaderAndIsr, controller_epoch: int) -> LeaderAndIsr:
    """The partition state at the start of a move: a new leader epoch, so the leader learns the
    new replica set from LeaderAndIsr (and the new replicas learn whom to follow)."""
    return state.with_(leader_epoch=state.leader_epoch + 1, controller_epoch=controller_epoch)


def completed_state(state: LeaderAndIsr, sets: ReplicaSets, electable: set[int],
                    controller_epoch: int) -> LeaderAndIsr | None:
    """The state once the move is done, or None while a target replica is still out of the ISR
    (or no target replica in the ISR may lead)."""
    target = sets.target
    if not set(target) <= set(state.isr):
        return None
    isr = tuple(r for r in state.isr if r in target)
    if state.leader in target and state.leader in electable:
        leader = state.leader
    else:
        leader = next((r for r in target if r in isr and r in electable), NO_LEADER)
        if leader == NO_LEADER:
            return None
    return state.with_(leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr, controller_epoch=controller_epoch)


def restore_targets(assignments: dict[tuple[str, int], tuple[int, ...]], gone: set[int],
                    live_racks: dict[int, str | None]) -> dict[tuple[str, int], list[int]]:
    """Automatic re-replication: for each partition with a replica on a `gone` broker, its replica
    list with that broker replaced, in the same place (so the preferred leader order holds), by a
    live broker not hosting it yet: one on a rack the partition's other replicas do not use first,
    then the least loaded (counting the replacements already chosen), then the lowest id. A
    partition with no candidate keeps the gone replica (there is nowhere to put another copy)."""
    load = Counter(r for replicas in assignments.values() for r in replicas if r in live_racks)
    out: dict[tuple[str, int], list[int]] = {}
    for tp, replicas in sorted(assignments.items()):
        if not gone.intersection(replicas):
            continue
        target = list(replicas)
        for i, replica in enumerate(replicas):
            if replica not in gone:
                continue
            racks = {live_racks[r] for r in target if r in live_racks and live_racks[r] is not None}
            candidates = [b for b in live_racks if b not in target]
            if not candidates:
                continue
            best = min(candidates, key=lambda b: (live_racks[b] is not None and live_racks[b] in racks, load[b], b))
            target[i] = best
            load[best] += 1
        if target != list(replicas):
            out[tp] = target
    return out
