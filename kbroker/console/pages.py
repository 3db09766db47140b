"""The rows of the console's tables, assembled from what the admin client fetched (pure functions,
tested without a broker): brokers with their replica and leader counts and bytes on disk, topics
with partition counts, replication, under-replicated partitions, messages and size, partitions
with leader, replicas, ISR and each replica's size, groups with members, topics and lag, the
members of a consumer-protocol group (KIP-848) with their current and target assignments, and a
share group (KIP-932) with its members' assignments and each partition's start offset and lag.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from kbroker.admin.client import ClusterDescription, GroupDescription, ShareGroupDescription, ShareOffset, TopicState
from kbroker.admin.consumer_groups import (ConsumerGroupDescription, ConsumerMember, pending_revocation,
                                           subscription_text)
from kbroker.admin.groups import MemberView, OffsetRow

TopicPartition = tuple[str, int]
# broker id -> sizes of its partitions, or why they are unknown (log_dirs.partition_sizes)
Sizes = Mapping[int, Mapping[TopicPartition, int] | str]


class BrokerRow(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None
    controller: bool
    replicas: int
    leaders: int
    size: int | None  # bytes in its log dirs; None: unknown
    size_error: str | None


class TopicRow(NamedTuple):
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    messages: int | None  # log end - log start, summed; None when an offset is unknown
    size: int | None  # bytes of every replica; None when a hosting broker did not say


class PartitionRow(NamedTuple):
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    log_start: int | None
    log_end: int | None
    messages: int | None
    sizes: dict[int, int | None]  # replica broker id -> bytes (None: unknown)

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"  # ListGroups' group types (KIP-848, KIP-932)
Assignment = tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions), by topic


class GroupRow(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    members: int | None  # None: not known (a consumer-protocol group without ConsumerGroupDescribe)
    topics: tuple[str, ...]
    lag: int | None  # summed over partitions with a committed offset; None: none known
    error: str | None = None
    group_type: str = CLASSIC


class ConsumerMemberRow(NamedTuple):
    """A member of a consumer-protocol group as ConsumerGroupDescribe gives it, with what its
    reconciliation still has to do: partitions it holds that its target no longer has (pending
    revocation) and partitions of its target it does not hold yet (waiting for another member to
    release them)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    host: str
    subscribed: str  # topic names, and the regular expression between slashes
    current: Assignment
    target: Assignment
    pending_revocation: Assignment
    awaiting: Assignment

    @property
    def reconciled(self) -> bool:
        return not self.pending_revocation and not self.awaiting


class ConsumerGroupInfo(NamedTuple):
    """What ConsumerGroupDescribe says of a group beyond DescribeGroups."""

    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberRow, ...]


class ShareMemberRow(NamedTuple):
    """A member of a share group as ShareGroupDescribe gives it (`kbroker share-groups
    --describe --members --verbose` shows the same)."""

    member_id: str
    client_id: str
    host: str
    member_epoch: int
    partitions: int  # how many it is assigned
    assignment: Assignment


class ShareGroupDetail(NamedTuple):
    """A share group's page: ShareGroupDescribe and DescribeShareGroupOffsets (the figures of
    `kbroker share-groups --describe`)."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    coordinator_id: int
    members: tuple[ShareMemberRow, ...]
    offsets: tuple[ShareOffset, ...]  # by topic and partition: start offset, lag
    total_lag: int | None  # None: the broker gave no lag (DescribeShareGroupOffsets v0)


def _size_of(sizes: Sizes, broker: int, tp: TopicPartition) -> int | None:
    known = sizes.get(broker)
    return None if known is None or isinstance(known, str) else known.get(tp)


def broker_rows(cluster: ClusterDescription, topics: Sequence[TopicState], sizes: Sizes) -> list[BrokerRow]:
    rows = []
    for node_id, b in sorted(cluster.brokers.items()):
        parts = [p for t in topics for p in t.partitions]
        known = sizes.get(node_id)
        rows.append(BrokerRow(node_id, b.host, b.port, b.rack, node_id == cluster.controller_id,
                              sum(node_id in p.replicas for p in parts), sum(p.leader == node_id for p in parts),
                              None if known is None or isinstance(known, str) else sum(known.values()),
                              known if isinstance(known, str) else None))
    return rows


def _messages(start: int | None, end: int | None) -> int | None:
    return None if start is None or end is None else max(0, end - start)


def partition_rows(topic: TopicState, log_start: Mapping[TopicPartition, int | None],
                   log_end: Mapping[TopicPartition, int | None], sizes: Sizes) -> list[PartitionRow]:
    rows = []
    for p in topic.partitions:
        tp = (topic.name, p.partition)
        start, end = log_start.get(tp), log_end.get(tp)
        rows.append(PartitionRow(p.partition, p.leader, p.replicas, p.isr, p.offline, start, end,
                                 _messages(start, end), {r: _size_of(sizes, r, tp) for r in p.replicas}))
    return rows


def topic_rows(topics: Sequence[TopicState], log_start: Mapping[TopicPartition, int | None],
               log_end: Mapping[TopicPartition, int | None], sizes: Sizes) -> list[TopicRow]:
    rows = []
    for t in topics:
        parts = partition_rows(t, log_start, log_end, sizes)
        counts = [p.messages for p in parts]
        replica_sizes = [s for p in parts for s in p.sizes.values()]
        rows.append(TopicRow(t.name, t.internal, len(parts), max((len(p.replicas) for p in parts), default=0),
                             sum(p.under_replicated for p in parts), sum(p.leader < 0 for p in parts),
                             None if None in counts else sum(counts),
                             None if None in replica_sizes else sum(replica_sizes)))
    return rows


def consumer_member_row(m: ConsumerMember) -> ConsumerMemberRow:
    return ConsumerMemberRow(m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                             subscription_text(m).replace(",", ", "), m.assignment, m.target_assignment,
                             pending_revocation(m.assignment, m.target_assignment),
                             pending_revocation(m.target_assignment, m.assignment))


def consumer_group_info(desc: ConsumerGroupDescription) -> ConsumerGroupInfo:
    return ConsumerGroupInfo(desc.group_epoch, desc.assignment_epoch, desc.assignor,
                             tuple(consumer_member_row(m) for m in desc.members))


def member_view(m: ConsumerMember) -> MemberView:
    """A consumer-protocol member as the offsets table names partition owners (what it holds now)."""
    return MemberView(m.member_id, m.instance_id, m.client_id, m.client_host, m.assignment,
                      m.subscribed_topic_names, None)


def consumer_group_row(group_id: str, state: str, protocol_type: str, members: Sequence[MemberView] | None,
                       offsets: Sequence[OffsetRow]) -> GroupRow:
    """A consumer-protocol group in the list: ListGroups' state, its members when
    ConsumerGroupDescribe gave them (None: not known), the lag of its committed offsets."""
    lags = [r.lag for r in offsets if r.lag is not None]
    topics = {r.topic for r in offsets if r.topic is not None} | {t for m in members or () for t, _ps in m.assignment}
    return GroupRow(group_id, state, protocol_type, None if members is None else len(members), tuple(sorted(topics)),
                    sum(lags) if lags else None, None, CONSUMER)


def group_row(desc: GroupDescription, members: Sequence[MemberView], offsets: Sequence[OffsetRow]) -> GroupRow:
    lags = [r.lag for r in offsets if r.lag is not None]
    topics = sorted({r.topic for r in offsets if r.topic is not None}
                    | {t for m in members for t, _ps in m.assignment})
    return GroupRow(desc.group_id, desc.state, desc.protocol_type, len(members), tuple(topics),
                    sum(lags) if lags else None)


def _share_lag(offsets: Sequence[ShareOffset]) -> int | None:
    lags = [o.lag for o in offsets if o.lag is not None]
    return sum(lags) if lags else None


def share_group_detail(desc: ShareGroupDescription, offsets: Sequence[ShareOffset]) -> ShareGroupDetail:
    members = tuple(ShareMemberRow(m.member_id, m.client_id, m.client_host, m.member_epoch,
                                   sum(len(ps) for _t, ps in m.assignment), m.assignment) for m in desc.members)
    return ShareGroupDetail(desc.group_id, desc.state, desc.group_epoch, desc.assignment_epoch,
                            desc.coordinator.node_id, members, tuple(offsets), _share_lag(offsets))


def share_group_row(group_id: str, listed_state: str, protocol_type: str, desc: ShareGroupDescription | None,
                    offsets: Sequence[ShareOffset] | None) -> GroupRow:
    """A share group in the list: its members and state from ShareGroupDescribe (None: gone since
    it was listed), topics and lag (summed share-partition lag) from DescribeShareGroupOffsets."""
    offsets = offsets or ()
    topics = {o.topic for o in offsets} | {t for m in (desc.members if desc else ()) for t, _ps in m.assignment}
    return GroupRow(group_id, desc.state if desc is not None else listed_state, protocol_type,
                    None if desc is None else len(desc.members), tuple(sorted(topics)), _share_lag(offsets),
                    None, SHARE)
