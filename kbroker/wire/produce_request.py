"""Produce request decoder for the hot path: record data stays where it arrived.

kio copies each partition's records out of the frame; this decoder hands them over as writable
memoryviews into the frame itself, so the log patches base offsets in place and writes the
client's bytes with no copy at all. Covers Produce v3–11 (flexible from v9); v0–2 live in
`legacy.py`. Tests check it against kio's reader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kbroker.wire.protocol import ProtocolError

_HEAD = struct.Struct(">hi")  # acks, timeout
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
MAX_ARRAY = 1_000_000


@dataclass(frozen=True, slots=True)
class PartitionData:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class TopicData:
    name: str
    partition_data: tuple[PartitionData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout: int
    topic_data: tuple[TopicData, ...]


class _Reader:
    __slots__ = ("view", "pos", "flexible")

    def __init__(self, view: memoryview, pos: int, flexible: bool) -> None:
        self.view = view
        self.pos = pos
        self.flexible = flexible

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.view):
            raise ProtocolError("Produce request field runs past the frame")

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            self._need(1)
            byte = self.view[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ProtocolError("varint too long")

    def length(self, nullable_width: int) -> int:
        """A length prefix: -1 for null. Compact lengths are stored +1."""
        if self.flexible:
            return self.uvarint() - 1
        self._need(nullable_width)
        fmt = _I16 if nullable_width == 2 else _I32
        (n,) = fmt.unpack_from(self.view, self.pos)
        self.pos += nullable_width
        return n

    def string(self, nullable: bool = False) -> str | None:
        n = self.length(2)
        if n < 0:
            if nullable and n == -1:
                return None
            raise ProtocolError("invalid string length")
        self._need(n)
        try:
            value = bytes(self.view[self.pos : self.pos + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("string is not UTF-8") from exc
        self.pos += n
        return value

    def array_length(self) -> int:
        n = self.length(4)
        if n < -1 or n > MAX_ARRAY:
            raise ProtocolError(f"invalid array length {n}")
        return max(n, 0)

    def records(self) -> memoryview | None:
        n = self.length(4)
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError("invalid records length")
        self._need(n)
        view = self.view[self.pos : self.pos + n]
        self.pos += n
        return view

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self._need(size)
            self.pos += size


def decode_produce_request(version: int, frame: bytearray | memoryview, offset: int) -> ProduceRequest:
    """Decode Produce v3–11 from `frame` (kept writable: records are views into it)."""
    r = _Reader(memoryview(frame), offset, flexible=version >= 9)
    transactional_id = r.string(nullable=True)
    r._need(6)
    acks, timeout = _HEAD.unpack_from(r.view, r.pos)
    r.pos += 6
    topics = []
    for _ in range(r.array_length()):
        name = r.string()
        partitions = []
        for _ in range(r.array_length()):
            r._need(4)
            (index,) = _I32.unpack_from(r.view, r.pos)
            r.pos += 4
            partitions.append(PartitionData(index, r.records()))
            r.skip_tags()
        topics.append(TopicData(name, tuple(partitions)))
        r.skip_tags()
    r.skip_tags()
    if r.pos != len(r.view):
        raise ProtocolError("trailing bytes after the Produce request")
    return ProduceRequest(transactional_id, acks, timeout, tuple(topics))
