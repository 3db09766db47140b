"""The values the share-partition state machine takes and gives (KIP-932): record states and
acknowledge types with Kafka's codes, the share configuration, an in-flight batch, the results of
an event, and the snapshot Kafka's share coordinator persists.

Everything here is an immutable value; `kbroker.share.partition` holds the rules.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kbroker.errors import ErrorCode

__all__ = [
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "ArchiveReason",
    "ArchivedRecords",
    "InFlightBatch",
    "InFlightCounts",
    "LockRelease",
    "Outcome",
    "PersisterStateBatch",
    "RecordState",
    "ShareConfig",
    "ShareSnapshot",
]


class RecordState(enum.IntEnum):
    """A record's state; the values are Kafka's persisted DeliveryState codes."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def is_terminal(self) -> bool:
        """ACKNOWLEDGED and ARCHIVED records are delivery-complete: nothing moves them again."""
        return self is RecordState.ACKNOWLEDGED or self is RecordState.ARCHIVED


class AcknowledgeType(enum.IntEnum):
    """ShareAcknowledge / ShareFetch acknowledge types (GAP: an offset with no record)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222 (ShareAcknowledge v2): keep the record, extend its lock


class ArchiveReason(enum.StrEnum):
    """Why a record was archived; the dead-letter writer copies both kinds."""

    REJECTED = "rejected"
    DELIVERY_LIMIT = "delivery count limit"


# config keys (Kafka's group.share.* broker configs, kbroker's own share.* ones)
RECORD_LOCK_DURATION_MS = "group.share.record.lock.duration.ms"
MAX_RECORD_LOCKS = "group.share.partition.max.record.locks"
DELIVERY_COUNT_LIMIT = "group.share.delivery.count.limit"
REDELIVERY_BACKOFF_MS = "share.redelivery.backoff.ms"
REDELIVERY_BACKOFF_MAX_MS = "share.redelivery.backoff.max.ms"


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """The limits of one share-partition (Kafka's defaults; backoff off by default)."""

    record_lock_duration_ms: int = 30_000
    max_record_locks: int = 2000  # the in-flight window never grows past this many offsets
    delivery_count_limit: int = 5
    redelivery_backoff_ms: int = 0  # 0: a released record is available again at once
    redelivery_backoff_max_ms: int = 60_000

    def __post_init__(self) -> None:
        if self.record_lock_duration_ms <= 0 or self.max_record_locks <= 0 or self.delivery_count_limit <= 0:
            raise ValueError(f"share config limits must be positive: {self}")
        if self.redelivery_backoff_ms < 0 or self.redelivery_backoff_max_ms < 0:
            raise ValueError(f"share redelivery backoffs must not be negative: {self}")

    @classmethod
    def from_configs(cls, configs: Mapping[str, object]) -> ShareConfig:
        """From broker/group configs by Kafka's key names; missing keys keep the defaults."""
        keys = {
            RECORD_LOCK_DURATION_MS: "record_lock_duration_ms",
            MAX_RECORD_LOCKS: "max_record_locks",
            DELIVERY_COUNT_LIMIT: "delivery_count_limit",
            REDELIVERY_BACKOFF_MS: "redelivery_backoff_ms",
            REDELIVERY_BACKOFF_MAX_MS: "redelivery_backoff_max_ms",
        }
        return cls(**{attr: int(str(configs[key])) for key, attr in keys.items() if key in configs})

    def backoff_ms(self, delivery_count: int) -> int:
        """How long a record delivered `delivery_count` times waits before it is available again:
        the backoff, doubled per delivery after the first, at most the maximum."""
        if self.redelivery_backoff_ms == 0:
            return 0
        doublings = min(max(delivery_count - 1, 0), 62)
        return min(self.redelivery_backoff_ms << doublings, self.redelivery_backoff_max_ms)


@dataclass(frozen=True, slots=True)
class InFlightBatch:
    """Consecutive offsets [first_offset, last_offset] in one state (Kafka's InFlightBatch and
    InFlightState in one): `member_id` and `lock_deadline_ms` only while ACQUIRED,
    `available_at_ms` (end of the redelivery backoff; 0 = now) only while AVAILABLE."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int = 0
    available_at_ms: int = 0

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1


class AcknowledgementBatch(NamedTuple):
    """One acknowledgement batch of a request: one type for the range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...] | list[int]


class AcquiredRecords(NamedTuple):
    """ShareFetch's AcquiredRecords: these offsets are now locked for the fetching member."""

    first_offset: int
    last_offset: int
    delivery_count: int


class ArchivedRecords(NamedTuple):
    """Records an event archived for good, for the dead-letter topic (gaps are not reported)."""

    first_offset: int
    last_offset: int
    delivery_count: int
    reason: ArchiveReason


class LockRelease(NamedTuple):
    """Locks an event took back: timed out (`Outcome.expired`) or their member left
    (`Outcome.released`). The records are AVAILABLE again, or archived (then also in `archived`)."""

    first_offset: int
    last_offset: int
    member_id: str
    delivery_count: int


class InFlightCounts(NamedTuple):
    """Offsets of the in-flight window per state."""

    available: int
    acquired: int
    acknowledged: int
    archived: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one event did. A failed event (error set) changed nothing: every list is empty."""

    error: ErrorCode = ErrorCode.none
    acquired: tuple[AcquiredRecords, ...] = ()
    archived: tuple[ArchivedRecords, ...] = ()
    expired: tuple[LockRelease, ...] = ()
    released: tuple[LockRelease, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.none


class PersisterStateBatch(NamedTuple):
    """Kafka's PersisterStateBatch: delivery_state 0 available, 2 acknowledged, 4 archived."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """What the share coordinator keeps for a share-partition (WriteShareGroupState's
    start offset and state batches): enough for a new leader to carry on."""

    start_offset: int
    state_batches: tuple[PersisterStateBatch, ...] = ()
