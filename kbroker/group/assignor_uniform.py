"""The `uniform` assignor (Kafka's UniformAssignor): balance > stickiness > rack locality.

Owns `uniform_assign` and its two builders: the homogeneous one (every member subscribes to the same
topics: balanced quotas, optimal stickiness, rack placement of what moves by `assignor_racks`) and
the heterogeneous one (`_Loads`, the per-member ownership state, with filling of unowned partitions,
per-topic direct balancing and balancing along chains of members). What it guarantees is described
in `kbroker.group.assignors`' docstring.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from fractions import Fraction

from kbroker.group.assignor_model import (
    GroupAssignment,
    MemberSpec,
    TopicSpec,
    _Group,
    _member_racks,
    _racks_matter,
)
from kbroker.group.assignor_racks import _distribute, _rack_place

__all__ = ["uniform_assign"]


def uniform_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> GroupAssignment:
    """Kafka's `uniform` assignor (what it guarantees: `kbroker.group.assignors`' docstring)."""
    if not members:
        return {}
    group = _Group(members, topics)
    if not group.counts:
        return {m: {} for m in group.ids}
    if len(set(group.subs)) == 1:
        return _uniform_homogeneous(group)
    return _uniform_heterogeneous(group)


def _uniform_homogeneous(group: _Group) -> GroupAssignment:
    m_count = len(group.ids)
    topics = group.subs[0]
    total = sum(group.counts[t] for t in topics)
    quota, extras = divmod(total, m_count)
    owners = group.current_owners()
    member_racks = _member_racks(group, range(m_count))
    racks_on = bool(member_racks) and _racks_matter(
        (group.rack_sig(t, p, member_racks) for t in topics for p in range(group.counts[t])),
        member_racks, None not in group.racks)

    # each member's partitions in the order it keeps them when some must go: local ones first (when
    # racks matter), then interleaving the topics, so that what it gives up is spread over them
    ranked: list[list[tuple[int, int, str, int]]] = [[] for _ in range(m_count)]
    for k, t in enumerate(topics):
        rank = [0] * m_count
        for p, i in enumerate(owners[t]):
            if i >= 0:
                ranked[i].append((rank[i], k, t, p))
                rank[i] += 1
    held: list[list[tuple[str, int]]] = []
    for i, parts in enumerate(ranked):
        rack = group.racks[i]
        if racks_on and rack is not None:
            parts.sort(key=lambda e, r=rack: (r not in group.topic_specs[e[2]].racks(e[3]), e[0], e[1]))
        else:
            parts.sort()
        held.append([(t, p) for _, _, t, p in parts])

    # the extras go first to members holding more than the quota: each keeps one more partition
    cap = [quota] * m_count
    extra_ok = [True] * m_count
    for i in range(m_count):
        if extras and len(held[i]) > quota:
            cap[i] += 1
            extra_ok[i] = False
            extras -= 1
    assigned: list[dict[str, list[int]]] = [{} for _ in range(m_count)]
    need = [0] * m_count
    for i in range(m_count):
        keep = held[i][:cap[i]]
        for t, p in keep:
            assigned[i].setdefault(t, []).append(p)
        for t, p in held[i][cap[i]:]:
            owners[t][p] = -1
        need[i] = cap[i] - len(keep)
    pool = [(t, p) for t in topics for p, i in enumerate(owners[t]) if i < 0]

    order = list(range(m_count))
    if racks_on:
        rack_members: dict[str, list[int]] = {}
        for i in order:
            if group.racks[i] is not None:
                rack_members.setdefault(group.racks[i], []).append(i)
        items = [((t, p), group.rack_sig(t, p, member_racks)) for t, p in pool]
        placed, rest, extras = _rack_place(items, rack_members, need, extra_ok, extras, spread=True)
        for (t, p), i in placed:
            assigned[i].setdefault(t, []).append(p)
        pool = rest
    for i in order:
        if extras and extra_ok[i]:
            extra_ok[i] = False
            need[i] += 1
            extras -= 1
    for (t, p), i in _distribute(pool, order, need, spread=True):
        assigned[i].setdefault(t, []).append(p)
    return group.output(assigned)


class _Loads:
    """The heterogeneous builder's state: who owns what, and how many partitions each member has."""

    __slots__ = ("group", "load", "owned", "owners_of", "racks_on", "subscribers")

    def __init__(self, group: _Group) -> None:
        self.group = group
        m_count = len(group.ids)
        self.load = [0] * m_count
        # member -> topic -> partitions in an insertion-ordered dict (an ordered set)
        self.owned: list[dict[str, dict[int, None]]] = [{} for _ in range(m_count)]
        # topic -> member -> number of its partitions that member owns (insertion-ordered)
        self.owners_of: dict[str, dict[int, int]] = {t: {} for t in group.counts}
        self.subscribers: dict[str, list[int]] = {t: [] for t in group.counts}
        for i, subs in enumerate(group.subs):
            for t in subs:
                self.subscribers[t].append(i)
        self.racks_on = False

    def local(self, i: int, topic: str, partition: int) -> bool:
        rack = self.group.racks[i]
        return rack is not None and rack in self.group.topic_specs[topic].racks(partition)

    def add(self, i: int, topic: str, partition: int) -> None:
        self.owned[i].setdefault(topic, {})[partition] = None
        counts = self.owners_of[topic]
        counts[i] = counts.get(i, 0) + 1
        self.load[i] += 1

    def move(self, giver: int, receiver: int, topic: str) -> None:
        """Hand one of `giver`'s partitions of `topic` to `receiver`: one local to the receiver and
        not to the giver if any, else one local to the receiver, else the most recently added."""
        parts = self.owned[giver][topic]
        chosen = next(reversed(parts))
        if self.racks_on and self.group.racks[receiver] is not None:
            fallback = None
            for p in reversed(parts):
                if self.local(receiver, topic, p):
                    if not self.local(giver, topic, p):
                        chosen = p
                        break
                    if fallback is None:
                        fallback = p
            else:
                if fallback is not None:
                    chosen = fallback
        del parts[chosen]
        if not parts:
            del self.owned[giver][topic]
        counts = self.owners_of[topic]
        counts[giver] -= 1
        if not counts[giver]:
            del counts[giver]
        self.load[giver] -= 1
        self.add(receiver, topic, chosen)


def _uniform_heterogeneous(group: _Group) -> GroupAssignment:
    state = _Loads(group)
    owners = group.current_owners()
    all_racks = _member_racks(group, range(len(group.ids)))
    state.racks_on = bool(all_racks) and _racks_matter(
        (group.rack_sig(t, p, all_racks) for t, n in group.counts.items() for p in range(n)),
        all_racks, None not in group.racks)
    for t, row in owners.items():
        for p, i in enumerate(row):
            if i >= 0:
                state.add(i, t, p)

    def topic_key(t: str) -> tuple[Fraction, int, str]:
        # Kafka's order: most partitions per subscriber first, then fewest subscribers, then name
        k = len(state.subscribers[t])
        return (-Fraction(group.counts[t], k), k, t)

    topic_order = sorted((t for t in group.counts if state.subscribers[t]), key=topic_key)
    _fill_unowned(state, owners, topic_order)
    _balance_direct(state, [t for t in topic_order if len(state.subscribers[t]) > 1])
    _balance_chains(state)
    assigned = [{t: list(parts) for t, parts in owned.items()} for owned in state.owned]
    return group.output(assigned)


def _fill_unowned(state: _Loads, owners: Mapping[str, list[int]], topic_order: Sequence[str]) -> None:
    """Each unowned partition to the least loaded subscriber (a local one among equals)."""
    load = state.load
    group = state.group
    for t in topic_order:
        unowned = [p for p, i in enumerate(owners[t]) if i < 0]
        if not unowned:
            continue
        subs = state.subscribers[t]
        heap = [(load[i], i) for i in subs]
        heapq.heapify(heap)
        by_rack: dict[str, list[tuple[int, int]]] = {}
        if state.racks_on:
            for i in subs:
                rack = group.racks[i]
                if rack is not None:
                    by_rack.setdefault(rack, []).append((load[i], i))
            for h in by_rack.values():
                heapq.heapify(h)
        spec = group.topic_specs[t]
        for p in unowned:
            while heap[0][0] != load[heap[0][1]]:
                heapq.heappop(heap)
            best_load, best = heap[0]
            if by_rack:
                local = None
                for r in spec.racks(p):
                    h = by_rack.get(r)
                    if not h:
                        continue
                    while h and h[0][0] != load[h[0][1]]:
                        heapq.heappop(h)
                    if h and h[0][0] == best_load and (local is None or h[0][1] < local):
                        local = h[0][1]
                if local is not None:
                    best = local
            state.add(best, t, p)
            heapq.heappush(heap, (load[best], best))
            rack = group.racks[best]
            if rack is not None and rack in by_rack:
                heapq.heappush(by_rack[rack], (load[best], best))


def _balance_direct(state: _Loads, topics: Sequence[str]) -> None:
    """Kafka's per-topic balancing: within each topic's subscribers, move that topic's partitions
    from the most to the least loaded while their loads differ by two or more; repeat over the
    topics until a whole pass moves nothing."""
    load = state.load
    moved = True
    while moved:
        moved = False
        for t in topics:
            subs = state.subscribers[t]
            low = [(load[i], i) for i in subs]
            heapq.heapify(low)
            high = [(-load[i], i) for i in subs if t in state.owned[i]]
            heapq.heapify(high)
            while low and high:
                while low and low[0][0] != load[low[0][1]]:
                    heapq.heappop(low)
                while high and (-high[0][0] != load[high[0][1]] or t not in state.owned[high[0][1]]):
                    heapq.heappop(high)
                if not low or not high:
                    break
                receiver, giver = low[0][1], high[0][1]
                if load[giver] - load[receiver] <= 1:
                    break
                state.move(giver, receiver, t)
                moved = True
                heapq.heappush(low, (load[receiver], receiver))
                heapq.heappush(low, (load[giver], giver))
                heapq.heappush(high, (-load[receiver], receiver))
                if t in state.owned[giver]:
                    heapq.heappush(high, (-load[giver], giver))


def _balance_chains(state: _Loads) -> None:
    """Until none is left, find a member that can get a partition from one holding at least two
    more, through the shortest chain of members each handing the next a partition of a topic the
    next subscribes to, and shift one partition along it."""
    load = state.load
    subs = state.group.subs
    receivers = [i for i in range(len(load)) if subs[i]]
    while True:
        if not receivers:
            return
        top = max(load)
        levels = sorted({load[i] for i in receivers})
        for level in levels:
            if level + 2 > top:
                return
            path = _find_chain(state, [i for i in receivers if load[i] == level], level + 2)
            if path is not None:
                for giver, receiver, topic in path:
                    state.move(giver, receiver, topic)
                break
        else:
            return


def _find_chain(state: _Loads, targets: list[int], min_giver_load: int) -> list[tuple[int, int, str]] | None:
    """Breadth-first from the `targets` backwards along "can hand a partition to" edges; the first
    layer holding a member with at least `min_giver_load` partitions gives the chain (the most
    loaded such member, then the lowest index)."""
    load = state.load
    subs = state.group.subs
    parent: dict[int, tuple[int, str]] = {}
    seen = set(targets)
    topic_seen: set[str] = set()
    frontier = targets
    while frontier:
        layer: list[int] = []
        for x in frontier:
            for t in subs[x]:
                if t in topic_seen:
                    continue
                topic_seen.add(t)
                for a in state.owners_of[t]:
                    if a not in seen:
                        seen.add(a)
                        parent[a] = (x, t)
                        layer.append(a)
        givers = [a for a in layer if load[a] >= min_giver_load]
        if givers:
            giver = min(givers, key=lambda a: (-load[a], a))
            path = []
            node = giver
            while node in parent:
                receiver, topic = parent[node]
                path.append((node, receiver, topic))
                node = receiver
            return path
        frontier = layer
    return None
