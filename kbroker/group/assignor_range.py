"""The `range` assignor (Kafka 4's server-side RangeAssignor): co-partitioned contiguous ranges.

Owns `range_assign`: Kafka's member order (static members first), the families of co-partitioned
topics (same partition count, same subscribers) that get the same partition numbers, and their
rack-aware variant (`_range_racks`, which keeps every member's count and moves partition numbers
between subscribers through `assignor_racks`). What it guarantees is described in
`kbroker.group.assignors`' docstring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kbroker.group.assignor_model import (
    GroupAssignment,
    MemberSpec,
    TopicSpec,
    _Group,
    _member_racks,
    _racks_matter,
)
from kbroker.group.assignor_racks import _distribute, _rack_place

__all__ = ["range_assign"]


def _range_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Kafka's RangeAssignor.sortMemberIds: static members first, by instance id, then the others
    by member id."""
    def key(m: str) -> tuple[int, str, str]:
        instance = members[m].instance_id
        return (0, instance, m) if instance is not None else (1, m, "")
    return sorted(members, key=key)


def range_assign(members: Mapping[str, MemberSpec], topics: Mapping[str, TopicSpec]) -> GroupAssignment:
    """Kafka's server-side `range` assignor (what it guarantees: `kbroker.group.assignors`' docstring)."""
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
