"""`__share_group_state`: where share-partition state is kept (KIP-932's share coordinator), in
Kafka's record format — a snapshot record per share-partition: key ShareSnapshotKey (version 0:
GroupId, TopicId, Partition), value ShareSnapshotValue (version 0, flexible: SnapshotEpoch,
StateEpoch, LeaderEpoch, StartOffset, StateBatches of FirstOffset, LastOffset, DeliveryState,
DeliveryCount). Which partition of the topic holds a share-partition's records is Kafka's hash of
"group:topicId:partition". Pure: bytes in, bytes out; every size read is bounded by the input.
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple

from kbroker.share.partition_types import PersisterStateBatch, ShareSnapshot
from kbroker.wire.primitives import Reader, uvarint

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_VERSION = 0
UPDATE_KEY_VERSION = 1  # ShareUpdateKey: not written by kbroker (each write is a whole snapshot)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">Hiiq")  # SnapshotEpoch (uint16), StateEpoch, LeaderEpoch, StartOffset
_BATCH = struct.Struct(">qqbh")


class ShareStateKey(NamedTuple):
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's SharePartitionKey.asCoordinatorKey(): what picks the state topic's partition."""
        return f"{self.group_id}:{_kafka_uuid(self.topic_id)}:{self.partition}"


class ShareStateValue(NamedTuple):
    snapshot: ShareSnapshot
    state_epoch: int = 0
    leader_epoch: int = -1
    snapshot_epoch: int = 0


def _kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding."""
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode("utf-8")
    return _I16.pack(SNAPSHOT_KEY_VERSION) + _I16.pack(len(group)) + group + key.topic_id.bytes + _I32.pack(key.partition)


def decode_key(data: bytes) -> ShareStateKey | None:
    """A snapshot key; None for another record type (an update key, or garbage)."""
    if len(data) < 4:
        return None
    (version,) = _I16.unpack_from(data, 0)
    (n,) = _I16.unpack_from(data, 2)
    if version != SNAPSHOT_KEY_VERSION or n < 0 or len(data) != 4 + n + 16 + 4:
        return None
    try:
        group = data[4:4 + n].decode("utf-8")
    except UnicodeDecodeError:
        return None
    topic_id = uuid.UUID(bytes=bytes(data[4 + n:20 + n]))
    (partition,) = _I32.unpack_from(data, 20 + n)
    return ShareStateKey(group, topic_id, partition)


def encode_value(value: ShareStateValue) -> bytes:
    snap = value.snapshot
    out = bytearray(_I16.pack(0))
    out += _HEAD.pack(value.snapshot_epoch & 0xFFFF, value.state_epoch, value.leader_epoch, snap.start_offset)
    out += uvarint(len(snap.state_batches) + 1)
    for b in snap.state_batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) + b"\0"
    out += b"\0"  # no tagged fields
    return bytes(out)


def decode_value(data: bytes) -> ShareStateValue:
    """ValueError on anything but a well-formed version-0 snapshot value."""
    r = Reader(data, 0, flexible=True)
    version = r.i16()
    if version != 0:
        raise ValueError(f"unknown share snapshot value version {version}")
    r.need(_HEAD.size)
    snapshot_epoch, state_epoch, leader_epoch, start = _HEAD.unpack_from(data, r.pos)
    r.pos += _HEAD.size
    n = r.uvarint() - 1
    if n < 0 or n * (_BATCH.size + 1) > len(data) - r.pos:
        raise ValueError(f"invalid state batch count {n}")
    batches = []
    for _ in range(n):
        r.need(_BATCH.size)
        first, last, state, count = _BATCH.unpack_from(data, r.pos)
        r.pos += _BATCH.size
        r.skip_tags()
        batches.append(PersisterStateBatch(first, last, state, count))
    r.skip_tags()
    if not r.at_end():
        raise ValueError("trailing bytes after the share snapshot value")
    return ShareStateValue(ShareSnapshot(start, tuple(batches)), state_epoch, leader_epoch, snapshot_epoch)
