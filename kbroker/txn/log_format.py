"""The key and value formats of the `__transaction_state` records, byte for byte as Kafka writes them.

Key: TransactionLogKey v0 — an int16 version (0) and the transactional id. Value: an int16
version, then TransactionLogValue v0 (classic) or v1 (flexible: compact strings and arrays,
tagged fields) — producer id, producer epoch, transaction timeout, status byte, the partitions
(topic + partition ids; null while Empty), last update and start timestamps. A null value is a
tombstone: the transactional id expired. The schema has no previous/next producer id in 3.9.

Kafka 3.9 writes value v0 unless the `transaction.version` feature is finalized at 1 or more;
kbroker advertises no such feature (clients stay on transactions V1), so it writes v0 and reads both.

Also here: packing (key, value) pairs into one v2 record batch and reading them back, through
kbroker.wire.records, as the group coordinator does for `__consumer_offsets`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kbroker.txn.state import TransactionState
from kbroker.wire.primitives import I16, I32, I64, DecodeError, Reader, uvarint
from kbroker.wire.internal_records import (
    build_internal_batch as build_txn_log_batch,
    checked_pack,
    iter_internal_records as iter_txn_log_records,
    required_string,
)

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionLogValue",
    "UnknownRecordTypeError",
    "build_txn_log_batch",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "group_partitions",
    "iter_txn_log_records",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0  # what Kafka 3.9 writes without the transaction.version feature
FLEXIBLE_VALUE_VERSION = 1
I8 = struct.Struct(">b")

# (topic, (partition ids...)) in the order written; a set of (topic, partition) is grouped by topic
PartitionsByTopic = tuple[tuple[str, tuple[int, ...]], ...]


class UnknownRecordTypeError(DecodeError):
    """A key version other than 0: Kafka's loader skips such records (an aborted upgrade's leftovers)."""


@dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: PartitionsByTopic | None  # None (null) while Empty, as Kafka writes it
    last_update_timestamp_ms: int
    start_timestamp_ms: int

    def partition_set(self) -> frozenset[tuple[str, int]]:
        """The partitions as (topic, partition) pairs; Kafka ignores any written for an Empty state."""
        if self.state is TransactionState.EMPTY or not self.partitions:
            return frozenset()
        return frozenset((topic, p) for topic, ids in self.partitions for p in ids)


def group_partitions(partitions: Iterable[tuple[str, int]]) -> PartitionsByTopic:
    """Group (topic, partition) pairs by topic, sorted (Kafka's order is its hash map's; any order reads back)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(sorted(ids))) for topic, ids in sorted(by_topic.items()))


# --- encoding ------------------------------------------------------------------------------------




def _str(value: str, flexible: bool) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit an int16 length")
    return (uvarint(len(raw) + 1) if flexible else I16.pack(len(raw))) + raw


def _len(n: int | None, flexible: bool) -> bytes:
    if flexible:
        return uvarint(0 if n is None else n + 1)
    return I32.pack(-1 if n is None else n)


def encode_key(transactional_id: str) -> bytes:
    return I16.pack(KEY_VERSION) + _str(transactional_id, False)


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise ValueError(f"TransactionLogValue has no version {version}")
    if value.state is TransactionState.EMPTY and value.partitions:
        # Kafka refuses this too (IllegalStateException): an Empty id has no transaction
        raise ValueError("an Empty transactional id has no partitions")
    flexible = version >= FLEXIBLE_VALUE_VERSION
    partitions = None if value.state is TransactionState.EMPTY else (value.partitions or ())
    parts = [
        I16.pack(version),
        checked_pack(I64, value.producer_id, "producer_id"),
        checked_pack(I16, value.producer_epoch, "producer_epoch"),
        checked_pack(I32, value.transaction_timeout_ms, "transaction_timeout_ms"),
        I8.pack(value.state.value),
        _len(None if partitions is None else len(partitions), flexible),
    ]
    for topic, ids in partitions or ():
        parts += (_str(topic, flexible), _len(len(ids), flexible))
        parts += (checked_pack(I32, p, "partition") for p in ids)
        if flexible:
            parts.append(b"\x00")  # the PartitionsSchema entry's tagged fields
    parts += (
        checked_pack(I64, value.last_update_timestamp_ms, "last_update_timestamp_ms"),
        checked_pack(I64, value.start_timestamp_ms, "start_timestamp_ms"),
    )
    if flexible:
        parts.append(b"\x00")
    return b"".join(parts)


# --- decoding ------------------------------------------------------------------------------------








def _count(r: Reader, nullable: bool) -> int | None:
    n = r.uvarint() - 1 if r.flexible else r.i32()
    if n == -1 and nullable:
        return None
    if n < 0:
        raise DecodeError(f"invalid array length {n}")
    if n > len(r.view) - r.pos:  # every element takes at least one byte
        raise DecodeError(f"array of {n} cannot fit in {len(r.view) - r.pos} bytes")
    return n


def decode_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id. Raises UnknownRecordTypeError for a key version other than 0."""
    r = Reader(data, 0, False)
    version = r.i16()
    if version != KEY_VERSION:
        raise UnknownRecordTypeError(f"unknown __transaction_state key version {version}")
    transactional_id = required_string(r)
    if not r.at_end():
        raise DecodeError(f"{len(r.view) - r.pos} trailing bytes after the key")
    return transactional_id


def decode_value(data: bytes | bytearray | memoryview | None) -> TransactionLogValue | None:
    """None for a tombstone. Raises DecodeError for an unknown version or status byte."""
    if data is None:
        return None
    r = Reader(data, 0, False)
    version = r.i16()
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise DecodeError(f"unknown transaction log value version {version}")
    r.flexible = version >= FLEXIBLE_VALUE_VERSION
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout_ms = r.i32()
    status = r.i8()
    try:
        state = TransactionState(status)
    except ValueError:
        raise DecodeError(f"unknown transaction status {status}") from None
    n = _count(r, nullable=True)
    partitions: PartitionsByTopic | None = None
    if n is not None:
        entries = []
        for _ in range(n):
            topic = required_string(r)
            m = _count(r, nullable=False) or 0
            r.need(4 * m)
            ids = struct.unpack_from(f">{m}i", r.view, r.pos)
            r.pos += 4 * m
            r.skip_tags()
            entries.append((topic, tuple(ids)))
        partitions = tuple(entries)
    last_update = r.i64()
    start = r.i64()
    r.skip_tags()
    if not r.at_end():
        # KIP-915: Kafka adds tagged fields, never fields in place, so trailing bytes mean corruption
        raise DecodeError(f"{len(r.view) - r.pos} trailing bytes after the transaction log value")
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, state, partitions, last_update, start)
