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

Layout: this module is the public face (the assignor registry and selection; every public name,
re-exported). The machinery lives next to it: `assignor_model` (MemberSpec, TopicSpec, the
numbered group), `assignor_uniform`, `assignor_range`, and `assignor_racks` (rack placement by
maximum flow), none of which imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group.assignor_model import (
    GroupAssignment,
    MemberAssignment,
    MemberSpec,
    TopicSpec,
)
from kbroker.group.assignor_range import range_assign
from kbroker.group.assignor_uniform import uniform_assign

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


class UnsupportedAssignorError(KafkaError):
    """Kafka error UNSUPPORTED_ASSIGNOR (112): a ServerAssignor the broker does not offer."""

    code = ErrorCode.unsupported_assignor


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
