"""Rebalance planning as a pure function: replica lists that spread replicas, then preferred
leaders, evenly over the brokers (a newly added, empty one included).

1. Replicas: while the most loaded broker holds two or more replicas than the least loaded, one
   replica moves from the former to the latter (a partition not hosted there yet, without putting
   two replicas on one rack where the partition had them apart; a partition whose preferred
   leader is not the moving replica first, so fewer leaderships change), keeping its place in
   the list.
2. Preferred leaders (a list's first replica, the one leadership returns to): while a broker is
   preferred two or more times more than another, one preferred leadership passes from it along
   the shortest chain of partitions (each swaps the first replica with another it hosts) to the
   other. Reordering moves no data.

Every step lowers the sum of squared counts, so the plan ends; it is greedy, not optimal, and only
touches what it must. Partitions with a replica on a broker not in `brokers` (gone, not yet
replaced) are left as they are. The moves run as ordinary add-then-drop reassignments.
"""

from __future__ import annotations

from collections import Counter

TopicPartition = tuple[str, int]


def _rack_spread(replicas: list[int], racks: dict[int, str | None]) -> int:
    return len({racks[r] for r in replicas if racks.get(r) is not None})


def balanced_assignment(assignments: dict[TopicPartition, tuple[int, ...]], racks: dict[int, str | None]
                        ) -> dict[TopicPartition, list[int]]:
    """The new replica list of every partition the plan changes (rules above)."""
    movable = {tp: list(r) for tp, r in sorted(assignments.items()) if r and set(r) <= set(racks)}
    _spread_replicas(movable, racks)
    _spread_leaders(movable, racks)
    return {tp: r for tp, r in movable.items() if tuple(r) != tuple(assignments[tp])}


def counts(assignments, brokers) -> tuple[Counter, Counter]:
    """Replicas and preferred leaderships per broker (every broker of `brokers` present)."""
    replicas = Counter({b: 0 for b in brokers})
    leaders = Counter({b: 0 for b in brokers})
    for r in assignments.values():
        if r:
            replicas.update(b for b in r if b in replicas)
            if r[0] in leaders:
                leaders[r[0]] += 1
    return replicas, leaders


def _pairs(load: Counter):
    """(heavier, lighter) broker pairs two or more apart, the heaviest first."""
    by_load = sorted(load, key=lambda b: (load[b], b))
    for heavy in reversed(by_load):
        for light in by_load:
            if load[heavy] - load[light] < 2:
                break
            yield heavy, light


def _spread_replicas(plan: dict[TopicPartition, list[int]], racks: dict[int, str | None]) -> None:
    load, _ = counts(plan, racks)
    while True:
        for heavy, light in _pairs(load):
            choice = None
            for tp, replicas in plan.items():
                if heavy not in replicas or light in replicas:
                    continue
                after = [light if r == heavy else r for r in replicas]
                if _rack_spread(after, racks) < _rack_spread(replicas, racks):
                    continue
                if replicas[0] != heavy:
                    choice = (tp, after)
                    break
                choice = choice or (tp, after)
            if choice is not None:
                plan[choice[0]] = choice[1]
                load[heavy] -= 1
                load[light] += 1
                break
        else:
            return


def _spread_leaders(plan: dict[TopicPartition, list[int]], racks: dict[int, str | None]) -> None:
    _, lead = counts(plan, racks)
    while True:
        for heavy in sorted(lead, key=lambda b: (-lead[b], b)):
            path = _handover_path(plan, lead, heavy)
            if path:
                for tp, giver, taker in path:
                    replicas = plan[tp]
                    i = replicas.index(taker)
                    replicas[0], replicas[i] = taker, giver
                lead[heavy] -= 1
                lead[path[-1][2]] += 1
                break
        else:
            return


def _handover_path(plan: dict[TopicPartition, list[int]], lead: Counter, heavy: int
                   ) -> list[tuple[TopicPartition, int, int]]:
    """The shortest chain of swaps passing one preferred leadership from `heavy` to a broker two
    or more below it (each step: a partition its giver prefers and its taker hosts; brokers in
    between keep their count), or [] when there is none."""
    step: dict[int, tuple[TopicPartition, int]] = {}  # taker -> (partition, giver)
    frontier, seen = [heavy], {heavy}
    while frontier:
        nxt = []
        for giver in frontier:
            for tp, replicas in plan.items():
                if replicas[0] != giver:
                    continue
                for taker in replicas[1:]:
                    if taker in seen:
                        continue
                    seen.add(taker)
                    step[taker] = (tp, giver)
                    if lead[heavy] - lead[taker] >= 2:
                        path = []
                        while taker != heavy:
                            tp_, giver_ = step[taker]
                            path.append((tp_, giver_, taker))
                            taker = giver_
                        return path[::-1]
                    nxt.append(taker)
        frontier = nxt
    return []
