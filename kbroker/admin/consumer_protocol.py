"""The consumer protocol's embedded payloads: ConsumerProtocolSubscription (a member's metadata in
JoinGroup/DescribeGroups) and ConsumerProtocolAssignment (what SyncGroup hands each member).

They are opaque bytes to the broker and written by any client, so decoding is defensive: every
count is checked against the bytes left before anything is built, and malformed input raises
`ConsumerProtocolError`, never anything else. Like Kafka's `ConsumerProtocol`, a version newer
than the newest known (3) is read with the v3 layout and trailing bytes are ignored, so newer
clients still decode. Neither payload has flexible versions.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kbroker.wire.primitives import DecodeError, Reader

NEWEST_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """The bytes are not a consumer-protocol subscription or assignment."""


class Assignment(NamedTuple):
    version: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions), in the order sent
    user_data: bytes | None


class Subscription(NamedTuple):
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...]  # v1+
    generation_id: int  # v2+, -1 otherwise
    rack_id: str | None  # v3+


def decode_assignment(data: bytes | bytearray | memoryview | None) -> Assignment:
    """An assignment; empty bytes (a member not assigned yet) is an empty v0 assignment."""
    if data is None or len(data) == 0:
        return Assignment(0, (), None)
    try:
        r = Reader(data, 0, False)
        version = _version(r)
        partitions = _topic_partitions(r)
        user_data = _nullable_bytes(r)
    except DecodeError as exc:
        raise ConsumerProtocolError(f"malformed consumer assignment: {exc}") from None
    return Assignment(version, partitions, user_data)


def decode_subscription(data: bytes | bytearray | memoryview | None) -> Subscription:
    if data is None or len(data) == 0:
        return Subscription(0, (), None, (), -1, None)
    try:
        r = Reader(data, 0, False)
        version = _version(r)
        topics = tuple(_string(r) for _ in range(_count(r, 2)))
        user_data = _nullable_bytes(r)
        owned = _topic_partitions(r) if version >= 1 else ()
        generation_id = r.i32() if version >= 2 else -1
        rack_id = r.string(nullable=True) if version >= 3 else None
    except DecodeError as exc:
        raise ConsumerProtocolError(f"malformed consumer subscription: {exc}") from None
    return Subscription(version, topics, user_data, owned, generation_id, rack_id)


def _version(r: Reader) -> int:
    version = r.i16()
    if version < 0:
        raise DecodeError(f"negative version {version}")
    return version


def _count(r: Reader, min_element_size: int) -> int:
    """An array count that the remaining bytes can hold; null arrays are refused (none are nullable)."""
    n = r.i32()
    if n < 0 or n * min_element_size > len(r.view) - r.pos:
        raise DecodeError(f"array of {n} elements cannot fit in {len(r.view) - r.pos} bytes")
    return n


def _string(r: Reader) -> str:
    value = r.string()
    assert value is not None  # r.string() refuses null unless asked
    return value


def _topic_partitions(r: Reader) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for _ in range(_count(r, 6)):  # int16 topic length + int32 partition count
        topic = _string(r)
        n = _count(r, 4)
        r.need(4 * n)
        parts = struct.unpack_from(f">{n}i", r.view, r.pos)
        r.pos += 4 * n
        out.append((topic, parts))
    return tuple(out)


def _nullable_bytes(r: Reader) -> bytes | None:
    view = r.bytes_view()
    return None if view is None else bytes(view)


# -- encoders, for tests and tools that need to write these payloads --------------------------------

def _enc_string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def _enc_bytes(value: bytes | None) -> bytes:
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + value


def _enc_topic_partitions(items) -> bytes:
    out = [_I32.pack(len(items))]
    for topic, parts in items:
        out.append(_enc_string(topic) + _I32.pack(len(parts)) + b"".join(_I32.pack(p) for p in parts))
    return b"".join(out)


def encode_assignment(a: Assignment) -> bytes:
    return _I16.pack(a.version) + _enc_topic_partitions(a.partitions) + _enc_bytes(a.user_data)


def encode_subscription(s: Subscription) -> bytes:
    out = _I16.pack(s.version) + _I32.pack(len(s.topics)) + b"".join(_enc_string(t) for t in s.topics)
    out += _enc_bytes(s.user_data)
    if s.version >= 1:
        out += _enc_topic_partitions(s.owned_partitions)
    if s.version >= 2:
        out += _I32.pack(s.generation_id)
    if s.version >= 3:
        out += _I16.pack(-1) if s.rack_id is None else _enc_string(s.rack_id)
    return out
