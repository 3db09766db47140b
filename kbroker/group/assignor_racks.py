"""Rack placement for the assignors: place the most partitions possible on members local to them.

Owns `_rack_place` (a maximum flow from partitions grouped by the set of racks they are local to,
through the racks, to the members' remaining quotas and the one-partition extras), the small
max-flow solver it runs (`_FlowNetwork`, Edmonds-Karp) and `_distribute`, which hands items out to
members up to their quotas (round robin or in contiguous runs). Knows nothing of groups or topics:
items are opaque, members are indices. Used by `assignor_uniform` and `assignor_range`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

_Item = TypeVar("_Item")


# -------------------------------------------------------------------------------------------------
# a small maximum flow (Edmonds-Karp over adjacency lists): the rack placement's graph has one node
# per distinct set of local racks and one per rack, so it stays tiny whatever the partition count


class _FlowNetwork:
    __slots__ = ("adj", "cap", "head", "initial")

    def __init__(self, nodes: int) -> None:
        self.adj: list[list[int]] = [[] for _ in range(nodes)]
        self.head: list[int] = []
        self.cap: list[int] = []
        self.initial: list[int] = []

    def add_edge(self, u: int, v: int, capacity: int) -> int:
        edge = len(self.head)
        self.head += [v, u]
        self.cap += [capacity, 0]
        self.initial += [capacity, 0]
        self.adj[u].append(edge)
        self.adj[v].append(edge + 1)
        return edge

    def flow(self, edge: int) -> int:
        return self.initial[edge] - self.cap[edge]

    def max_flow(self, source: int, sink: int) -> int:
        total = 0
        while True:
            via = [-1] * len(self.adj)
            via[source] = -2
            queue = [source]
            for u in queue:
                if via[sink] != -1:
                    break
                for edge in self.adj[u]:
                    v = self.head[edge]
                    if via[v] == -1 and self.cap[edge] > 0:
                        via[v] = edge
                        queue.append(v)
            if via[sink] == -1:
                return total
            push = None
            v = sink
            while v != source:
                edge = via[v]
                push = self.cap[edge] if push is None else min(push, self.cap[edge])
                v = self.head[edge ^ 1]
            assert push is not None
            v = sink
            while v != source:
                edge = via[v]
                self.cap[edge] -= push
                self.cap[edge ^ 1] += push
                v = self.head[edge ^ 1]
            total += push


def _rack_place(
    items: Sequence[tuple[_Item, frozenset[str]]],
    rack_members: Mapping[str, Sequence[int]],
    need: list[int],
    extra_ok: list[bool],
    extras: int,
    spread: bool,
) -> tuple[list[tuple[_Item, int]], list[_Item], int]:
    """Place the most items possible on members local to them.

    `items`: (item, racks it is local to) in placement order. Member i must still take `need[i]`
    items and may take one more if `extra_ok[i]`, at most `extras` such extras in all. Returns the
    placed (item, member) pairs, the items left unplaced (in order) and the extras left; `need` and
    `extra_ok` are updated (a member given an extra has it added to its need, then consumed).
    """
    racks = sorted(r for r, ms in rack_members.items() if ms)
    sigs = sorted({sig for _, sig in items if sig}, key=sorted)
    if not racks or not sigs:
        return [], [item for item, _ in items], extras
    sig_node = {sig: 3 + k for k, sig in enumerate(sigs)}
    rack_node = {r: 3 + len(sigs) + k for k, r in enumerate(racks)}
    source, sink, extra_node = 0, 1, 2
    net = _FlowNetwork(3 + len(sigs) + len(racks))
    sig_count: dict[frozenset[str], int] = {}
    for _, sig in items:
        if sig:
            sig_count[sig] = sig_count.get(sig, 0) + 1
    for sig in sigs:
        net.add_edge(source, sig_node[sig], sig_count[sig])
    edges: dict[tuple[frozenset[str], str], int] = {}
    for sig in sigs:
        for r in sorted(sig):
            if r in rack_node:
                edges[sig, r] = net.add_edge(sig_node[sig], rack_node[r], len(items))
    mandatory = {r: sum(need[i] for i in rack_members[r]) for r in racks}
    optional = {r: sum(1 for i in rack_members[r] if extra_ok[i]) for r in racks}
    for r in racks:
        net.add_edge(rack_node[r], sink, mandatory[r])
        if optional[r] and extras:
            net.add_edge(rack_node[r], extra_node, optional[r])
    net.add_edge(extra_node, sink, extras)
    net.max_flow(source, sink)

    # items of each signature, in order, to racks per the flow
    to_rack: dict[str, list[_Item]] = {r: [] for r in racks}
    unplaced: list[_Item] = []
    quota: dict[frozenset[str], list[list]] = {
        sig: [[r, net.flow(edges[sig, r])] for r in sorted(sig) if (sig, r) in edges] for sig in sigs
    }
    for item, sig in items:
        slots = quota.get(sig) if sig else None
        while slots and slots[0][1] == 0:
            slots.pop(0)
        if not slots:
            unplaced.append(item)
            continue
        slots[0][1] -= 1
        to_rack[slots[0][0]].append(item)

    placed: list[tuple[_Item, int]] = []
    for r in racks:
        got = to_rack[r]
        members = rack_members[r]
        over = len(got) - mandatory[r]
        for i in members:
            if over <= 0:
                break
            if extra_ok[i]:
                extra_ok[i] = False
                need[i] += 1
                extras -= 1
                over -= 1
        placed += _distribute(got, members, need, spread)
    return placed, unplaced, extras


def _distribute(items: Sequence[_Item], members: Sequence[int], need: list[int],
                spread: bool) -> list[tuple[_Item, int]]:
    """Hand `items` out to `members` up to their `need` (decremented): round robin when `spread`,
    else each member's share in one contiguous run, in member order. Items beyond the total need are
    not handed out."""
    out: list[tuple[_Item, int]] = []
    if spread:
        order: list[int] = []
        level = 0
        active = [i for i in members if need[i] > 0]
        while active and len(order) < len(items):
            order += active
            level += 1
            active = [i for i in active if need[i] > level]
        for item, i in zip(items, order):
            out.append((item, i))
            need[i] -= 1
        return out
    pos = 0
    for i in members:
        take = min(need[i], len(items) - pos)
        if take <= 0:
            continue
        for item in items[pos:pos + take]:
            out.append((item, i))
        need[i] -= take
        pos += take
    return out
