"""ConsumerGroupHeartbeat (68) v0-1 by hand, sans-I/O: the request decoded and the response encoded
without kio, as Produce, Fetch and Metadata are. Every member of a KIP-848 group sends one each
heartbeat interval, so this is the coordinator's hottest API; kio's generic reader (with the bounds
walk before it) and writer were about half of its cost.

The request decodes into an object with kio's field names (`rebalance_timeout` as int ms), so the
handler reads either alike; tests/wire/test_consumer_group_heartbeat_codec.py holds both codecs to
the same bytes. Every length is bounded by the bytes that remain before anything is allocated.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NamedTuple

from kbroker.errors import ErrorCode
from kbroker.wire.primitives import DecodeError, Reader, string, uvarint
from kbroker.wire.protocol import ProtocolError

API_KEY = 68
VERSIONS = range(0, 2)

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_EPOCH_INTERVAL = struct.Struct(">ii")
_ZERO_UUID = uuid.UUID(int=0)


class TopicPartitions(NamedTuple):
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


class ConsumerGroupHeartbeatRequest(NamedTuple):
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout: int  # ms; -1: unchanged
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None  # v1+
    server_assignor: str | None
    topic_partitions: tuple[TopicPartitions, ...] | None


def _count(r: Reader, least_bytes: int) -> int:
    """A compact array's element count, -1 for null; no more elements than the bytes left can hold."""
    n = r.uvarint() - 1
    if n < -1:
        raise DecodeError(f"invalid array length {n}")
    if n > 0 and n * least_bytes > len(r.view) - r.pos:
        raise DecodeError(f"array of {n} elements cannot fit in the request")
    return n


def _required(r: Reader, what: str) -> str:
    value = r.string(nullable=True)
    if value is None:
        raise DecodeError(f"null {what}, which is not nullable")
    return value


def decode_request(version: int, frame: bytes | bytearray | memoryview, offset: int) -> ConsumerGroupHeartbeatRequest:
    r = Reader(frame, offset, flexible=True)
    try:
        group_id = _required(r, "GroupId")
        member_id = _required(r, "MemberId")
        member_epoch = r.i32()
        instance_id = r.string(nullable=True)
        rack_id = r.string(nullable=True)
        rebalance_timeout = r.i32()
        n = _count(r, 1)
        names = None if n < 0 else tuple(_required(r, "topic name") for _ in range(n))
        regex = r.string(nullable=True) if version >= 1 else None
        assignor = r.string(nullable=True)
        n = _count(r, 18)  # a uuid, an empty array, no tags
        owned = None
        if n >= 0:
            parts = []
            for _ in range(n):
                r.need(16)
                topic_id = uuid.UUID(bytes=bytes(r.view[r.pos:r.pos + 16]))
                r.pos += 16
                m = _count(r, 4)
                if m < 0:
                    raise DecodeError("null Partitions, which is not nullable")
                r.need(4 * m)
                partitions = struct.unpack_from(f">{m}i", r.view, r.pos)
                r.pos += 4 * m
                r.skip_tags()
                parts.append(TopicPartitions(topic_id, partitions))
            owned = tuple(parts)
        r.skip_tags()
    except DecodeError as exc:
        raise ProtocolError(f"malformed ConsumerGroupHeartbeat v{version} body: {exc}") from exc
    if not r.at_end():
        raise ProtocolError(f"trailing bytes after the ConsumerGroupHeartbeat v{version} body")
    return ConsumerGroupHeartbeatRequest(group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout,
                                         names, regex, assignor, owned)


def encode_response(version: int, correlation_id: int, data: dict[str, Any]) -> bytes:
    """The response frame (size prefix, header v1, body) of a handler's answer dict."""
    out = bytearray(b"\0\0\0\0")
    out += _I32.pack(correlation_id) + b"\0"
    out += _I32.pack(data.get("throttle_time", 0))
    out += _I16.pack(int(data.get("error_code", ErrorCode.none)))
    out += string(data.get("error_message"), True)
    out += string(data.get("member_id"), True)
    out += _EPOCH_INTERVAL.pack(data.get("member_epoch", 0), data.get("heartbeat_interval", 0))
    assignment = data.get("assignment")
    if assignment is None:
        out += b"\xff"  # a nullable struct (KIP-893): an int8 marker, -1 null, 1 present
    else:
        topics = assignment["topic_partitions"]
        out += b"\x01" + uvarint(len(topics) + 1)
        for tp in topics:
            topic_id = tp["topic_id"]
            out += (topic_id or _ZERO_UUID).bytes
            partitions = tp["partitions"]
            out += uvarint(len(partitions) + 1)
            out += struct.pack(f">{len(partitions)}i", *partitions)
            out += b"\0"
        out += b"\0"
    out += b"\0"
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
