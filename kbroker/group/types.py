"""The group coordinator's vocabulary, shared by its shell (coordinator) and its protocols
(classic, consumer): the configuration, the answers parked JoinGroup/SyncGroup calls receive, what
DescribeGroups reports, where records go (OffsetsLog), and which `__consumer_offsets` partition
coordinates a group (Kafka's hash of the group id)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from kbroker.errors import ErrorCode, KafkaError
from kbroker.wire.internal_records import InternalBatch
from kbroker.wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

E = ErrorCode
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # a new member cannot heartbeat while its join is held
UNKNOWN_MEMBER_ID = ""


def java_string_hash(value: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 overflow)."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions  # Kafka's Utils.abs


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2**31 - 1
    initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096
    offsets_topic_partitions: int = 50
    # the consumer protocol (KIP-848): group.consumer.* and group.coordinator.rebalance.protocols
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    # the bounds of the two above and of each group's own values (group/dynamic_configs.py)
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    # share groups (KIP-932): group.share.*
    share_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000
    share_max_size: int = 200
    dlq_topic_prefix: str = "dlq."  # errors.deadletterqueue.topic.name.prefix


@dataclass
class JoinResult:
    member_id: str
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # leader only


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]
    message: str | None = None  # why it is GROUP_ID_NOT_FOUND


class OffsetsLog(Protocol):
    """Where the coordinator's records go: one partition of `__consumer_offsets` per group."""

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]], *,
               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> int:
        """Returns the batch's base offset; with a producer id, the batch is its transactional one."""
        ...

    def read_batches(self, partition: int) -> Iterable[InternalBatch]: ...


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]



def append_error(exc: KafkaError, *, for_commit: bool) -> ErrorCode:
    """Kafka's mapping of a failed __consumer_offsets append to what the group client sees."""
    code = exc.code
    if code in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append,
                E.request_timed_out):
        return E.coordinator_not_available
    if code in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if code in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size if for_commit else E.unknown_server_error
    return code

