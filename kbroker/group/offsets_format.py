"""The key and value formats of the `__consumer_offsets` records, byte for byte as Kafka writes them.

Every key and value starts with an int16 version. Keys: version 0/1 is an offset commit
(group, topic, partition), version 2 group metadata (group). Values: OffsetCommitValue and
GroupMetadataValue versions 0-4, where 4 is flexible (compact strings, tagged fields). A null
value is a tombstone: the key is deleted. Writes use the versions Kafka 3.x writes (key 1,
offset value 3 or 1, group value 3), so Kafka's own tools read our log and we read theirs.

Also here: packing (key, value) pairs into one v2 record batch for the log and reading them back,
both through kbroker.wire.records.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.wire.internal_records import (
    build_internal_batch as build_offsets_batch,
)
from kbroker.wire.internal_records import (
    checked_pack,
    required_string,
    short_string,
)
from kbroker.wire.internal_records import (
    iter_internal_records as iter_offsets_records,
)
from kbroker.wire.primitives import I16, I32, I64, DecodeError, Reader

__all__ = [
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberRecord",
    "OffsetKey",
    "OffsetValue",
    "UnknownRecordTypeError",
    "build_offsets_batch",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_value",
    "iter_offsets_records",
]

OFFSET_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1  # the only version carrying expire_timestamp
GROUP_METADATA_VALUE_VERSION = 3
MAX_VALUE_VERSION = 4  # KIP-915: Kafka adds tagged fields from here on, never a new version


class UnknownRecordTypeError(DecodeError):
    """A key version this module does not know, e.g. Kafka 4's consumer-protocol records, which
    share the topic; a loader may skip them where it must reject other garbage."""


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


# --- encoding ------------------------------------------------------------------------------------






def _nullable_str(value: str | None) -> bytes:
    return I16.pack(-1) if value is None else short_string(value)


def _bytes(value: bytes) -> bytes:
    return I32.pack(len(value)) + bytes(value)


def encode_key(key: OffsetKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetKey):
        return b"".join((
            I16.pack(OFFSET_KEY_VERSION), short_string(key.group), short_string(key.topic), checked_pack(I32, key.partition, "partition"),
        ))
    if isinstance(key, GroupMetadataKey):
        return I16.pack(GROUP_METADATA_KEY_VERSION) + short_string(key.group)
    raise TypeError(f"not a __consumer_offsets key: {key!r}")


def encode_offset_value(value: OffsetValue) -> bytes:
    """Version 3; version 1 when an explicit expire timestamp is set, which drops the leader epoch
    (v1 has no such field) exactly as Kafka's coordinator does."""
    if value.expire_timestamp != -1:
        return b"".join((
            I16.pack(OFFSET_VALUE_VERSION_WITH_EXPIRE),
            checked_pack(I64, value.offset, "offset"),
            short_string(value.metadata),
            checked_pack(I64, value.commit_timestamp, "commit_timestamp"),
            checked_pack(I64, value.expire_timestamp, "expire_timestamp"),
        ))
    return b"".join((
        I16.pack(OFFSET_VALUE_VERSION),
        checked_pack(I64, value.offset, "offset"),
        checked_pack(I32, value.leader_epoch, "leader_epoch"),
        short_string(value.metadata),
        checked_pack(I64, value.commit_timestamp, "commit_timestamp"),
    ))


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """Version 3, the version Kafka 3.x writes (static membership: group_instance_id)."""
    parts = [
        I16.pack(GROUP_METADATA_VALUE_VERSION),
        short_string(value.protocol_type),
        checked_pack(I32, value.generation, "generation"),
        _nullable_str(value.protocol),
        _nullable_str(value.leader),
        checked_pack(I64, value.current_state_timestamp, "current_state_timestamp"),
        I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += (
            short_string(m.member_id),
            _nullable_str(m.group_instance_id),
            short_string(m.client_id),
            short_string(m.client_host),
            checked_pack(I32, m.rebalance_timeout_ms, "rebalance_timeout_ms"),
            checked_pack(I32, m.session_timeout_ms, "session_timeout_ms"),
            _bytes(m.subscription),
            _bytes(m.assignment),
        )
    return b"".join(parts)


# --- decoding ------------------------------------------------------------------------------------


def _reader(data: bytes | bytearray | memoryview) -> tuple[Reader, int]:
    """A Reader past the int16 version; the version decides whether it reads flexible fields."""
    r = Reader(data, 0, False)
    version = r.i16()
    r.flexible = version >= 4
    return r, version






def _required_bytes(r: Reader) -> bytes:
    view = r.bytes_view()
    if view is None:
        raise DecodeError("null bytes in a non-nullable field")
    return bytes(view)


def _finish(r: Reader, what: str) -> None:
    r.skip_tags()
    if not r.at_end():
        # Kafka never appends to a version in place (KIP-915), so trailing bytes mean corruption.
        raise DecodeError(f"{len(r.view) - r.pos} trailing bytes after {what}")


def decode_key(data: bytes | bytearray | memoryview) -> OffsetKey | GroupMetadataKey:
    """Raises UnknownRecordTypeError (a DecodeError) for a key version other than 0-2."""
    r = Reader(data, 0, False)
    version = r.i16()
    if version in (0, 1):
        key: OffsetKey | GroupMetadataKey = OffsetKey(required_string(r), required_string(r), r.i32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(required_string(r))
    else:
        raise UnknownRecordTypeError(f"unknown __consumer_offsets key version {version}")
    if not r.at_end():
        raise DecodeError(f"{len(r.view) - r.pos} trailing bytes after the key")
    return key


def decode_offset_value(data: bytes | bytearray | memoryview | None) -> OffsetValue | None:
    """None for a tombstone. Fields absent from the version read as Kafka's defaults (-1)."""
    if data is None:
        return None
    r, version = _reader(data)
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise DecodeError(f"unknown offset commit value version {version}")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = required_string(r)
    commit_timestamp = r.i64()
    expire_timestamp = r.i64() if version == 1 else -1
    _finish(r, "the offset commit value")
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_metadata_value(data: bytes | bytearray | memoryview | None) -> GroupMetadataValue | None:
    """None for a tombstone. A v0 member's rebalance timeout is its session timeout, as Kafka
    reads it (v0 predates the separate field)."""
    if data is None:
        return None
    r, version = _reader(data)
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise DecodeError(f"unknown group metadata value version {version}")
    protocol_type = required_string(r)
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    current_state_timestamp = r.i64() if version >= 2 else -1
    n = r.uvarint() - 1 if r.flexible else r.i32()
    if n < 0:
        raise DecodeError("null or negative members array")
    # A member takes at least 15 bytes in any version, so a count the rest of the buffer cannot
    # hold is refused up front instead of after decoding part of it.
    if n * 15 > len(r.view) - r.pos:
        raise DecodeError(f"members array of {n} cannot fit in {len(r.view) - r.pos} bytes")
    members = []
    for _ in range(n):
        member_id = required_string(r)
        group_instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = required_string(r)
        client_host = required_string(r)
        rebalance_timeout = r.i32() if version >= 1 else None
        session_timeout = r.i32()
        subscription = _required_bytes(r)
        assignment = _required_bytes(r)
        r.skip_tags()
        members.append(MemberRecord(
            member_id, group_instance_id, client_id, client_host,
            session_timeout if rebalance_timeout is None else rebalance_timeout,
            session_timeout, subscription, assignment,
        ))
    _finish(r, "the group metadata value")
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members))
