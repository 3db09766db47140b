"""Hand-written codecs for API versions kio does not generate (Kafka 4 dropped them from its schemas).

Produce v0–2: librdkafka only compresses with gzip/snappy/lz4 when the broker lists Produce v0
(it checks the codec against the lowest Produce version), so a broker that starts at v3 silently
gets uncompressed data. The v0–2 request layout is v3 without `transactional_id`; record data
inside must still be record batches v2, which the Produce handler enforces for every version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kbroker.wire.protocol import ProtocolError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
MAX_ARRAY = 1_000_000  # more elements than bytes a request may hold is garbage


class _Reader:
    def __init__(self, buf: bytes | memoryview, pos: int) -> None:
        self.buf = memoryview(buf)
        self.pos = pos

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolError("field runs past the end of the request")
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str:
        length = self.i16()
        if length < 0:
            raise ProtocolError("null where a string is required")
        try:
            return bytes(self._take(length)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("string is not UTF-8") from exc

    def nullable_bytes(self) -> bytes | None:
        length = self.i32()
        return None if length == -1 else bytes(self._take(length))

    def array_length(self) -> int:
        count = self.i32()
        if count < -1 or count > MAX_ARRAY:
            raise ProtocolError(f"invalid array length {count}")
        return max(count, 0)


@dataclass(frozen=True, slots=True)
class PartitionProduceData:
    index: int
    records: bytes | None


@dataclass(frozen=True, slots=True)
class TopicProduceData:
    name: str
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(frozen=True, slots=True)
class LegacyProduceRequest:
    acks: int
    timeout: int
    topic_data: tuple[TopicProduceData, ...]
    transactional_id: None = None


def decode_produce_v0_2(buf: bytes | memoryview, pos: int) -> LegacyProduceRequest:
    r = _Reader(buf, pos)
    acks, timeout = r.i16(), r.i32()
    topics = []
    for _ in range(r.array_length()):
        name = r.string()
        partitions = tuple(PartitionProduceData(r.i32(), r.nullable_bytes()) for _ in range(r.array_length()))
        topics.append(TopicProduceData(name, partitions))
    if r.pos != len(r.buf):
        raise ProtocolError("trailing bytes after the Produce request")
    return LegacyProduceRequest(acks, timeout, tuple(topics))


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_produce_response_v0_2(version: int, data: dict[str, Any]) -> bytes:
    out = [_I32.pack(len(data["responses"]))]
    for topic in data["responses"]:
        out.append(_string(topic["name"]))
        out.append(_I32.pack(len(topic["partition_responses"])))
        for p in topic["partition_responses"]:
            out.append(_I32.pack(p["index"]) + _I16.pack(int(p["error_code"])) + _I64.pack(p["base_offset"]))
            if version >= 2:
                out.append(_I64.pack(p["log_append_time"]))
    if version >= 1:
        out.append(_I32.pack(data.get("throttle_time", 0)))
    return b"".join(out)
