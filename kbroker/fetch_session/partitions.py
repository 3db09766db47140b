"""What a fetch session knows per partition: the handler's inputs and outputs as plain values, and
Kafka's `CachedPartition` with the rule deciding which partitions an incremental response carries.

- `TopicIdPartition`: a partition as a request names it — topic id (the zero UUID before Fetch v13),
  topic name (None for an id the broker could not name) and index. Inside a session a partition is
  known by (topic id, index) when its id is non-zero, else by (name, index): `partition_key`, as
  Kafka's CachedPartition equality.
- `PartitionRequest`: one partition's fetch parameters (Kafka's FetchRequest.PartitionData).
- `PartitionResult`: what the handler read for one partition — the fields the session compares,
  plus an opaque `payload` (records, aborted transactions, current leader, ...) passed through.
- `CachedPartition`: the request parameters last sent and the response fields last answered.

The incremental rule (`CachedPartition.maybe_update_response_data`, Kafka's rule): a partition goes
into the response when it has records, an error, a preferred read replica or a diverging epoch, or
its high watermark, log start offset or last stable offset differ from what the session last sent.
The cache then remembers the sent values; after an error it remembers the high watermark as -1, so
the partition is sent again once the error clears. The last stable offset is kbroker's addition:
Kafka's CachedPartition does not hold it (there it only moves with the high watermark); sending a
partition more often than Kafka would is always safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kbroker.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)  # Uuid.ZERO_UUID: no topic id (Fetch v7-12 name topics)
INVALID_PREFERRED_REPLICA_ID = -1


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    topic_id: uuid.UUID
    topic: str | None  # None: the broker knows no topic with this id (yet)
    partition: int
    key: Hashable = field(init=False, repr=False, compare=False)  # partition_key(), computed once

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", partition_key(self.topic_id, self.topic, self.partition))

    def __str__(self) -> str:
        name = self.topic if self.topic is not None else "<unknown>"
        tid = "" if self.topic_id == ZERO_UUID else f"({self.topic_id})"
        return f"{name}{tid}-{self.partition}"


def partition_key(topic_id: uuid.UUID, topic: str | None, partition: int) -> Hashable:
    """A partition's identity in a session: by topic id when it has one, else by name."""
    if topic_id != ZERO_UUID:
        return (topic_id, partition)
    return (topic, partition)


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    """One partition of a Fetch request (FetchRequest.PartitionData); -1 stands for 'absent'."""

    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1  # the fetcher's own log start (a follower's); -1 from consumers
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """What the handler computed for one partition, as it would answer a sessionless fetch."""

    error_code: int = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records_size: int = 0  # bytes of records in the answer (Kafka's FetchResponse.recordsSize)
    preferred_read_replica: int = INVALID_PREFERRED_REPLICA_ID
    diverging_epoch: int = -1  # DivergingEpoch.epoch; >= 0 tells a follower to truncate
    payload: Any = None  # whatever else the handler sends (records, aborted transactions, leader)


class CachedPartition:
    """One partition of a session (Kafka's CachedPartition, plus the last stable offset).

    It keeps the request's own `tip` and `req` values (read back as they were sent, nothing
    rebuilt per fetch) and a `memo` slot the handler owns: whatever lets it tell that nothing
    changed since it last read the partition (kbroker's api/fetch_reads.py skips such a read)."""

    __slots__ = ("tip", "req", "high_watermark", "local_log_start_offset", "last_stable_offset", "memo")

    def __init__(self, tp: TopicIdPartition, req: PartitionRequest) -> None:
        self.tip = tp
        self.req = req  # what an incremental request that does not list the partition reuses
        # what the session last answered; -1 until then, so a new partition is always sent
        self.high_watermark = -1
        self.local_log_start_offset = -1
        self.last_stable_offset = -1
        self.memo: Any = None

    @property
    def topic(self) -> str | None:
        return self.tip.topic

    @property
    def topic_id(self) -> uuid.UUID:
        return self.tip.topic_id

    @property
    def partition(self) -> int:
        return self.tip.partition

    @property
    def fetch_offset(self) -> int:
        return self.req.fetch_offset

    @property
    def key(self) -> Hashable:
        return self.tip.key

    def update_request_params(self, req: PartitionRequest) -> None:
        if req != self.req:
            self.req = req
            self.memo = None

    def maybe_resolve_unknown_name(self, topic_names: Mapping[uuid.UUID, str]) -> bool:
        """Name a partition whose topic id the broker did not know when the session learnt it;
        whether it got a name now."""
        if self.tip.topic is None:
            name = topic_names.get(self.tip.topic_id)
            if name is not None:
                self.tip = TopicIdPartition(self.tip.topic_id, name, self.tip.partition)
                self.memo = None
                return True
        return False

    def maybe_update_response_data(self, result: PartitionResult, update: bool) -> bool:
        """Whether `result` must go into an incremental response; with `update`, remember it."""
        must_respond = result.records_size > 0  # new data is always sent
        if self.high_watermark != result.high_watermark:
            must_respond = True
            if update:
                self.high_watermark = result.high_watermark
        if self.local_log_start_offset != result.log_start_offset:
            must_respond = True
            if update:
                self.local_log_start_offset = result.log_start_offset
        if self.last_stable_offset != result.last_stable_offset:  # kbroker's addition (see above)
            must_respond = True
            if update:
                self.last_stable_offset = result.last_stable_offset
        if result.preferred_read_replica != INVALID_PREFERRED_REPLICA_ID:
            must_respond = True
        if result.error_code != ErrorCode.none:
            # errors are always sent; forget the high watermark so the partition is sent again
            # once the error goes away
            if update:
                self.high_watermark = -1
            must_respond = True
        if result.diverging_epoch >= 0:  # the follower must truncate
            must_respond = True
        return must_respond

    def __repr__(self) -> str:
        return (f"CachedPartition({self.tip}, {self.req}, high_watermark={self.high_watermark}, "
                f"last_stable_offset={self.last_stable_offset}, local_log_start_offset={self.local_log_start_offset})")
