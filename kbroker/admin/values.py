"""The plain values the admin client answers with: brokers, the cluster, groups and their members,
topics and their partitions, configs. Named tuples only, built from the protocol's answers by
the client's modules (`routing.py`, `topic_calls.py`, `group_calls.py`, `share_calls.py`) and
read by the commands and the console; nothing here talks to a broker.
"""

from __future__ import annotations

from typing import NamedTuple

TopicPartition = tuple[str, int]
TopicAssignment = tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions), by topic name

DEFAULT_CONFIG_SOURCE = 5  # DescribeConfigs config_source: nobody set it


class Broker(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int  # -1: none known
    brokers: dict[int, Broker]  # live brokers by id, with their racks


class GroupListing(NamedTuple):
    group_id: str
    state: str | None  # None: ListGroups older than v4 and not described
    protocol_type: str
    group_type: str = "classic"  # ListGroups v5: "consumer" (KIP-848), "share" (KIP-932); before v5 only classic


class Member(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignment strategy for consumer groups
    members: tuple[Member, ...]
    coordinator: Broker


class PartitionState(NamedTuple):
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


class TopicState(NamedTuple):
    name: str
    topic_id: str | None  # Kafka's text form; None: not given (Metadata before v10, or the zero id)
    internal: bool
    partitions: tuple[PartitionState, ...]  # by partition number


class ConfigValue(NamedTuple):
    name: str
    value: str | None
    source: int  # DescribeConfigs config_source; DEFAULT_CONFIG_SOURCE when nobody set it
    read_only: bool
    sensitive: bool


class CreatedTopic(NamedTuple):
    name: str
    topic_id: str | None
    partitions: int | None  # None: the broker does not say (CreateTopics before v5)
    replication_factor: int | None


class ShareMember(NamedTuple):
    """A member of a share group (KIP-932) as ShareGroupDescribe gives it."""

    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: TopicAssignment


class ShareGroupDescription(NamedTuple):
    group_id: str
    state: str  # Empty, Stable (Dead: deleted)
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...]  # by member id
    coordinator: Broker


class ShareOffset(NamedTuple):
    """One partition of a share group as DescribeShareGroupOffsets gives it."""

    topic: str
    partition: int
    leader_epoch: int | None
    start_offset: int | None  # None: the group has no state for the partition
    lag: int | None  # None: DescribeShareGroupOffsets v0, or the broker does not know it
