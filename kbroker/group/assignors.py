"""Server-side partition assignors of KIP-848 consumer groups: Kafka 4's `uniform` and `range`.

Pure functions, no I/O: a group's members (what each subscribes to, its rack, its current target
assignment) and the metadata of the topics they subscribe to in, the group's new target assignment
out. The coordinator picks the assignor by name (`group.consumer.assignors`, the first is the
default; a member may ask for one in ConsumerGroupHeartbeat's ServerAssignor) and reconciles each
member towards its target; that reconciliation is not here.

Input
    `members`: member id -> `MemberSpec`: the topics it subscribes to (names, a regex already
    resolved by `kbroker.group.subscriptions`), its rack (`rack.id`) or None, its current target
    assignment {topic: partitions}, its `group.instance.id` or None.
    `topics`: topic name -> `TopicSpec`: partition count and, optionally, per partition the racks
    of the brokers holding its replicas.
    A subscribed topic missing from `topics` is ignored (Kafka's GroupSpec only carries topics that
    exist); so are current partitions of topics no longer subscribed, or beyond the partition count.
Output
    member id -> {topic: frozenset(partitions)} for every member (empty dict when it gets nothing);
    topics with no partitions for that member are left out. Every partition of a topic some member
    subscribes to goes to exactly one member subscribed to it; nothing else is assigned. Equal inputs
    give equal outputs (members and topics are handled in sorted order, never in hash order).

`uniform` (UniformAssignor; Kafka's UniformHomogeneous/HeterogeneousAssignmentBuilder)
    Balance > stickiness > rack locality.
    - Homogeneous group (all members subscribe to the same existing topics): every member gets
      floor(P/M) or ceil(P/M) partitions. Stickiness is optimal: the number of partitions that keep
      their current owner is the largest any such balanced assignment can keep (a member keeps as
      many of its partitions as its quota allows; the P % M one-partition extras go first to members
      that already hold more than floor(P/M)). So a member joining moves only as many partitions as it needs,
      and a member leaving (or a topic unsubscribed) moves only the partitions it held.
    - Heterogeneous group: every valid current partition is kept, unowned ones go to the least
      loaded subscriber, then partitions move (directly, else along the shortest chain of members
      each handing one partition to the next) until no member could gain a partition from a member
      holding two or more partitions more than it. That is the optimally balanced assignment for
      these subscriptions (it minimises the largest load, maximises the smallest, minimises the sum
      of squares); in particular members with the same subscriptions differ by at most one
      partition. It is a fixed point: an already optimally balanced current assignment is kept as is.
    - Racks: a partition is "local" on a member whose rack is one of the partition's replica
      racks; members without a rack are local to nothing. Racks are looked at only when they can
      make a difference: some partition is local to some member, and not every partition is local
      to every member (Kafka's KIP-881 test, counting members without a rack).
      Racks never move a partition that stickiness keeps and never cost balance. In a homogeneous
      group, a member that must give partitions up keeps its local ones first, and the partitions
      that move or were unowned are placed so that the number placed locally is the maximum
      possible given the kept partitions and the balanced quotas (a maximum flow over the racks).
      In a heterogeneous group racks only break ties: among equally loaded subscribers a local one
      gets an unowned partition, and a balancing move hands over a partition local to its receiver
      when the giver has one. Kafka 4's own server-side assignors ignore racks (KAFKA-16694).

`range` (RangeAssignor; Kafka 4's server-side one)
    For each topic: its subscribers sorted (static members first by group.instance.id, then the
    others by member id), each gets a contiguous range of floor(n/k) partitions, the first n % k one
    more. Members subscribing to the same topics with equal partition counts thus get the same
    partition numbers of each (co-partitioning, for joins). Like Kafka's, it ignores the current
    assignment: it is sticky only in that the same members with the same instance ids get the same
    ranges. Racks: when they matter (as above, within a group of co-partitioned topics), each member
    keeps its quota but partition numbers are moved between subscribers so that the number of
    partition numbers whose replicas, in every topic of the group, share the receiving member's rack
    is the maximum possible; co-partitioning and the per-member counts are never given up.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TypeVar

from kbroker.errors import ErrorCode, KafkaError

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNORS",
    "KAFKA_ASSIGNOR_CLASSES",
    "RANGE",
    "UNIFORM",
    "Assignor",
    "GroupAssignment",
    "MemberAssignment",
    "MemberSpec",
    "TopicSpec",
    "UnsupportedAssignorError",
    "configured_assignors",
    "preferred_assignor",
    "range_assign",
    "select_assignor",
    "uniform_assign",
]

MemberAssignment = dict[str, frozenset[int]]
"""topic name -> partitions of one member."""
GroupAssignment = dict[str, MemberAssignment]
"""member id -> its assignment."""

_EMPTY: frozenset[str] = frozenset()
_Item = TypeVar("_Item")


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it.

    `topics`: subscribed topic names (explicit names, or a regex's resolution); `rack`: its rack id
    (None or "" for none); `assignment`: its current target assignment {topic: partitions};
    `instance_id`: its group.instance.id (static membership) or None, which only `range` reads.
    """

    topics: Collection[str] = _EMPTY
    rack: str | None = None
    assignment: Mapping[str, Collection[int]] = field(default_factory=dict)
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic's metadata: its partition count and, optionally, `partition_racks[p]`, the racks
    of the brokers holding partition p's replicas (shorter than the count, or empty: unknown)."""

    partitions: int
    partition_racks: Sequence[Collection[str]] = ()

    def racks(self, partition: int) -> Collection[str]:
        if partition < len(self.partition_racks):
            return self.partition_racks[partition]
        return _EMPTY


class UnsupportedAssignorError(KafkaError):
    """Kafka error UNSUPPORTED_ASSIGNOR (112): a ServerAssignor the broker does not offer."""

    code = ErrorCode.unsupported_assignor


# -------------------------------------------------------------------------------------------------
# common preparation


class _Group:
    """The input numbered: members 0..M-1 in sorted id order, their existing subscribed topics."""

    __slots__ = ("counts", "ids", "racks", "specs", "sub_sets", "subs", "topic_specs")

    def __init__(self, members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec],
                 order: Sequence[str] | None = None) -> None:
        self.ids: list[str] = list(order) if order is not None else sorted(members)
        self.specs = [members[m] for m in self.ids]
        self.topic_specs = topics
        self.subs: list[tuple[str, ...]] = [
            tuple(sorted({t for t in spec.topics if t in topics})) for spec in self.specs
        ]
        self.sub_sets: list[frozenset[str]] = [frozenset(s) for s in self.subs]
        self.racks: list[str | None] = [spec.rack or None for spec in self.specs]
        subscribed = sorted(set().union(*self.sub_sets)) if self.sub_sets else []
        self.counts: dict[str, int] = {t: max(0, topics[t].partitions) for t in subscribed}

    def current_owners(self) -> dict[str, list[int]]:
        """topic -> owner index per partition (-1: none) from the valid current assignments; a
        partition claimed by two members goes to the first in member order."""
        owners = {t: [-1] * n for t, n in self.counts.items()}
        for i, spec in enumerate(self.specs):
            subs = self.sub_sets[i]
            for t in sorted(spec.assignment):
                if t not in subs:
                    continue
                row = owners[t]
                n = len(row)
                for p in sorted(spec.assignment[t]):
                    if 0 <= p < n and row[p] == -1:
                        row[p] = i
        return owners

    def rack_sig(self, topic: str, partition: int, member_racks: frozenset[str]) -> frozenset[str]:
        racks = self.topic_specs[topic].racks(partition)
        if not racks:
            return _EMPTY
        return member_racks.intersection(racks)

    def output(self, per_member: list[dict[str, list[int]]]) -> GroupAssignment:
        return {
            self.ids[i]: {t: frozenset(parts) for t, parts in sorted(assigned.items()) if parts}
            for i, assigned in enumerate(per_member)
        }


def _racks_matter(sigs: Iterable[frozenset[str]], member_racks: frozenset[str], all_racked: bool) -> bool:
    """Whether placement by rack can make a difference (Kafka's test of KIP-881, plus members with no
    rack): some partition is local to some member, and not every partition is local to every member
    (`all_racked`: every member has a rack)."""
    if not member_racks:
        return False
    some_local = False
    some_partial = not all_racked
    for sig in sigs:
        if sig:
            some_local = True
        if sig != member_racks:
            some_partial = True
        if some_local and some_partial:
            return True
    return False


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


# -------------------------------------------------------------------------------------------------
# uniform


def uniform_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> GroupAssignment:
    """Kafka's `uniform` assignor (see the module docstring for what it guarantees)."""
    if not members:
        return {}
    group = _Group(members, topics)
    if not group.counts:
        return {m: {} for m in group.ids}
    if len(set(group.subs)) == 1:
        return _uniform_homogeneous(group)
    return _uniform_heterogeneous(group)


def _member_racks(group: _Group, members: Iterable[int]) -> frozenset[str]:
    return frozenset(r for i in members if (r := group.racks[i]) is not None)


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


# -------------------------------------------------------------------------------------------------
# range


def _range_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Kafka's RangeAssignor.sortMemberIds: static members first, by instance id, then the others
    by member id."""
    def key(m: str) -> tuple[int, str, str]:
        instance = members[m].instance_id
        return (0, instance, m) if instance is not None else (1, m, "")
    return sorted(members, key=key)


def range_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> GroupAssignment:
    """Kafka's server-side `range` assignor (see the module docstring for what it guarantees)."""
    if not members:
        return {}
    group = _Group(members, topics, order=_range_order(members))
    assigned: list[dict[str, list[int]]] = [{} for _ in group.ids]
    subscribers: dict[str, tuple[int, ...]] = {}
    for t in group.counts:
        subscribers[t] = tuple(i for i, s in enumerate(group.sub_sets) if t in s)
    # co-partitioned topics: same partition count, same subscribers
    families: dict[tuple[int, tuple[int, ...]], list[str]] = {}
    for t, subs in subscribers.items():
        if subs:
            families.setdefault((group.counts[t], subs), []).append(t)
    for (n, subs), family in families.items():
        k = len(subs)
        quota, extras = divmod(n, k)
        need = {i: quota + (1 if j < extras else 0) for j, i in enumerate(subs)}
        per_member = _range_racks(group, family, n, subs, need)
        if per_member is None:
            per_member = {}
            start = 0
            for i in subs:
                per_member[i] = list(range(start, start + need[i]))
                start += need[i]
        for i, parts in per_member.items():
            if parts:
                for t in family:
                    assigned[i][t] = parts
    return group.output(assigned)


def _range_racks(group: _Group, family: Sequence[str], n: int, subs: Sequence[int],
                 quota: Mapping[int, int]) -> dict[int, list[int]] | None:
    """The rack-aware variant for one family of co-partitioned topics, or None when racks do not
    matter (then the plain ranges are the answer)."""
    member_racks = _member_racks(group, subs)
    if not member_racks:
        return None
    sigs = []
    for p in range(n):
        sig = member_racks
        for t in family:
            sig = group.rack_sig(t, p, sig)
            if not sig:
                break
        sigs.append(sig)
    if not _racks_matter(sigs, member_racks, all(group.racks[i] is not None for i in subs)):
        return None
    need = [0] * len(group.ids)
    for i, q in quota.items():
        need[i] = q
    rack_members: dict[str, list[int]] = {}
    for i in subs:
        rack = group.racks[i]
        if rack is not None:
            rack_members.setdefault(rack, []).append(i)
    placed, rest, _ = _rack_place(list(zip(range(n), sigs)), rack_members, need,
                                  [False] * len(group.ids), 0, spread=False)
    per_member: dict[int, list[int]] = {i: [] for i in subs}
    for p, i in placed:
        per_member[i].append(p)
    for p, i in _distribute(rest, subs, need, spread=False):
        per_member[i].append(p)
    for parts in per_member.values():
        parts.sort()
    return per_member


# -------------------------------------------------------------------------------------------------
# the assignors by name


Assign = Callable[[Mapping[str, MemberSpec], Mapping[str, TopicSpec]], GroupAssignment]


@dataclass(frozen=True, slots=True)
class Assignor:
    """A server-side assignor: the name clients send in ServerAssignor, and its function."""

    name: str
    assign: Assign


UNIFORM = Assignor("uniform", uniform_assign)
RANGE = Assignor("range", range_assign)
ASSIGNORS: Mapping[str, Assignor] = {UNIFORM.name: UNIFORM, RANGE.name: RANGE}
# group.consumer.assignors may also name Kafka's classes
KAFKA_ASSIGNOR_CLASSES: Mapping[str, str] = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM.name,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE.name,
}
DEFAULT_ASSIGNORS: tuple[str, ...] = (UNIFORM.name, RANGE.name)
"""group.consumer.assignors' default, as Kafka's: uniform, then range."""


def configured_assignors(names: Iterable[str]) -> tuple[Assignor, ...]:
    """`group.consumer.assignors` (names or Kafka's class names, in order; the first is the
    default) as assignors. ValueError for an unknown name or an empty list."""
    out: list[Assignor] = []
    for raw in names:
        name = raw.strip()
        name = KAFKA_ASSIGNOR_CLASSES.get(name, name)
        assignor = ASSIGNORS.get(name)
        if assignor is None:
            raise ValueError(f"unknown consumer group assignor {raw!r}: expected one of "
                             f"{', '.join(ASSIGNORS)} (or Kafka's class names)")
        if assignor not in out:
            out.append(assignor)
    if not out:
        raise ValueError("group.consumer.assignors must name at least one assignor")
    return tuple(out)


def select_assignor(requested: str | None, configured: Sequence[Assignor]) -> Assignor:
    """The assignor a member asks for in ConsumerGroupHeartbeat's ServerAssignor: None or "" is the
    default (the first configured); a name not configured is UNSUPPORTED_ASSIGNOR, as in Kafka."""
    if not requested:
        return configured[0]
    for assignor in configured:
        if assignor.name == requested:
            return assignor
    raise UnsupportedAssignorError(
        f"ServerAssignor {requested} is not supported. Supported assignors: "
        f"{', '.join(a.name for a in configured)}."
    )


def preferred_assignor(requested: Iterable[str | None], configured: Sequence[Assignor]) -> Assignor:
    """The group's assignor (Kafka's ConsumerGroup.computePreferredServerAssignor): the one most of
    its members asked for (names not configured are skipped; ties go to the earlier configured),
    else the default."""
    counts: dict[str, int] = {}
    for name in requested:
        if name:
            counts[name] = counts.get(name, 0) + 1
    best: Assignor | None = None
    for assignor in configured:
        count = counts.get(assignor.name, 0)
        if count and (best is None or count > counts[best.name]):
            best = assignor
    return best if best is not None else configured[0]
