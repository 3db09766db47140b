"""The classic consumer protocol's embedded messages (ConsumerProtocolSubscription v0-3 and
ConsumerProtocolAssignment v0-3, the bytes a JoinGroup's protocol metadata and a SyncGroup's
assignment carry), read and written for classic members of a consumer-protocol group (the online
migration between the protocols). Non-flexible: int16 version, int16-length strings, int32 arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from kbroker.wire.primitives import I16, I32, DecodeError, Reader

MAX_ITEMS = 1 << 20


@dataclass(frozen=True)
class EmbeddedSubscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]  # v1+
    generation: int = -1  # v2+
    rack: str | None = None  # v3+


def _count(r: Reader) -> int:
    n = r.i32()
    if n < -1 or n > MAX_ITEMS:
        raise DecodeError(f"array of {n}")
    return max(n, 0)


def _partitions(r: Reader) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for _ in range(_count(r)):
        topic = r.string() or ""
        parts = frozenset(r.i32() for _ in range(_count(r)))
        out[topic] = out.get(topic, frozenset()) | parts
    return out


def decode_subscription(data: bytes) -> EmbeddedSubscription:
    """Raises DecodeError for bytes that are not a ConsumerProtocolSubscription."""
    r = Reader(data, 0, False)
    version = r.i16()
    if version < 0:
        raise DecodeError(f"subscription version {version}")
    topics = tuple(r.string() or "" for _ in range(_count(r)))
    r.bytes_view()  # user data
    owned = _partitions(r) if version >= 1 and not r.at_end() else {}
    generation = r.i32() if version >= 2 and not r.at_end() else -1
    rack = r.string(nullable=True) if version >= 3 and not r.at_end() else None
    return EmbeddedSubscription(version, topics, owned, generation, rack)


def subscription_version(data: bytes) -> int:
    try:
        return max(0, min(3, I16.unpack_from(data, 0)[0]))
    except Exception:  # noqa: BLE001 - too short: the oldest version
        return 0


def encode_assignment(assigned: Mapping[str, frozenset[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment (v0-3 share this layout: version, [topic, [partition]], user data)."""
    out = bytearray(I16.pack(max(0, min(3, version))))
    out += I32.pack(len(assigned))
    for topic in sorted(assigned):
        raw = topic.encode("utf-8")
        out += I16.pack(len(raw)) + raw
        parts = sorted(assigned[topic])
        out += I32.pack(len(parts)) + b"".join(I32.pack(p) for p in parts)
    out += I32.pack(-1)  # no user data
    return bytes(out)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    if not data:
        return {}
    r = Reader(data, 0, False)
    r.i16()
    return _partitions(r)
