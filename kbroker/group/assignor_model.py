"""The assignors' shared model: the input and output types and the numbered view of a group.

Owns `MemberSpec` and `TopicSpec` (one member and one topic as an assignor sees them), the
`MemberAssignment`/`GroupAssignment` output types, `_Group` (the input numbered: members 0..M-1,
their existing subscribed topics, their current owners, per-partition rack signatures, the output
built back from per-member lists) and the rack tests every assignor shares (`_racks_matter`,
`_member_racks`). Imported by `assignor_uniform`, `assignor_range` and `assignors` (which
re-exports the public names); it imports none of them. What the assignors guarantee is described
in `kbroker.group.assignors`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

MemberAssignment = dict[str, frozenset[int]]
"""topic name -> partitions of one member."""
GroupAssignment = dict[str, MemberAssignment]
"""member id -> its assignment."""

_EMPTY: frozenset[str] = frozenset()


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


def _member_racks(group: _Group, members: Iterable[int]) -> frozenset[str]:
    return frozenset(r for i in members if (r := group.racks[i]) is not None)

