"""Kafka's primitive encodings for the hand-written hot-path codecs (kio covers everything else).

Classic versions prefix strings with an int16 and arrays/bytes with an int32 (-1 = null);
flexible versions use an unsigned varint of length+1 (0 = null) and end structures with tagged
fields. `Reader` decodes with every length bounded by the frame; the writers return bytes.
"""

from __future__ import annotations

import struct

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
MAX_ARRAY = 1_000_000  # more elements than a request could hold bytes for is garbage


class DecodeError(ValueError):
    """The bytes do not hold what the layout says (the caller turns it into a ProtocolError)."""


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length(n: int | None, flexible: bool) -> bytes:
    """An array (or records) length; None = null."""
    if flexible:
        return uvarint(0 if n is None else n + 1)
    return I32.pack(-1 if n is None else n)


def string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else I16.pack(-1)
    raw = value.encode()
    return (uvarint(len(raw) + 1) if flexible else I16.pack(len(raw))) + raw


def tagged_field(tag: int, value: bytes | bytearray) -> bytes:
    """A tagged-fields section holding one field."""
    return b"\x01" + uvarint(tag) + uvarint(len(value)) + bytes(value)


def leader_id_and_epoch(leader: dict) -> bytes:
    """KIP-951's LeaderIdAndEpoch (Produce and Fetch responses), a flexible struct."""
    return I32.pack(leader["leader_id"]) + I32.pack(leader["leader_epoch"]) + b"\x00"


def node_endpoints(endpoints: list[dict]) -> bytes:
    """KIP-951's NodeEndpoints array (node id, host, port, rack), flexible."""
    out = bytearray(length(len(endpoints), True))
    for e in endpoints:
        out += I32.pack(e["node_id"]) + string(e["host"], True) + I32.pack(e["port"]) + string(e.get("rack"), True)
        out += b"\x00"
    return bytes(out)


class Reader:
    __slots__ = ("view", "pos", "flexible")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int, flexible: bool) -> None:
        self.view = memoryview(buf)
        self.pos = pos
        self.flexible = flexible

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.view):
            raise DecodeError("field runs past the end of the request")

    def i16(self) -> int:
        self.need(2)
        (value,) = I16.unpack_from(self.view, self.pos)
        self.pos += 2
        return value

    def i32(self) -> int:
        self.need(4)
        (value,) = I32.unpack_from(self.view, self.pos)
        self.pos += 4
        return value

    def i8(self) -> int:
        self.need(1)
        (value,) = I8.unpack_from(self.view, self.pos)
        self.pos += 1
        return value

    def i64(self) -> int:
        self.need(8)
        (value,) = I64.unpack_from(self.view, self.pos)
        self.pos += 8
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            self.need(1)
            byte = self.view[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise DecodeError("varint too long")

    def _length(self, classic: int) -> int:
        """A length prefix, -1 for null: int16/int32 classic, varint length+1 flexible."""
        if self.flexible:
            return self.uvarint() - 1
        return self.i16() if classic == 2 else self.i32()

    def string(self, nullable: bool = False) -> str | None:
        n = self._length(2)
        if n < 0:
            if nullable and n == -1:
                return None
            raise DecodeError("invalid string length")
        self.need(n)
        try:
            value = bytes(self.view[self.pos : self.pos + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError("string is not UTF-8") from exc
        self.pos += n
        return value

    def array_length(self, nullable: bool = False) -> int:
        """An array's element count; a null array (-1) reads as empty where the schema allows it."""
        n = self._length(4)
        if n == -1 and not nullable:
            raise DecodeError("null array in a field that is not nullable")
        if n < -1 or n > MAX_ARRAY:
            raise DecodeError(f"invalid array length {n}")
        return max(n, 0)

    def bytes_view(self) -> memoryview | None:
        """Nullable bytes (records) as a view into the buffer, no copy."""
        n = self._length(4)
        if n == -1:
            return None
        if n < 0:
            raise DecodeError("invalid bytes length")
        self.need(n)
        view = self.view[self.pos : self.pos + n]
        self.pos += n
        return view

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self.need(size)
            self.pos += size

    def at_end(self) -> bool:
        return self.pos == len(self.view)
