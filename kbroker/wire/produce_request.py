"""Produce request decoder for the hot path: record data stays where it arrived.

kio copies each partition's records out of the frame; this decoder hands them over as writable
memoryviews into the frame itself, so the log patches base offsets in place and writes the
client's bytes with no copy at all. Covers Produce v0–11 (flexible from v9; v0–2 are v3 without
`transactional_id`, and kio has no schema for them). Tests check it against kio's reader.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.wire.primitives import DecodeError, Reader
from kbroker.wire.protocol import ProtocolError


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


def decode_produce_request(version: int, frame: bytearray | memoryview, offset: int) -> ProduceRequest:
    """Decode Produce v0–11 from `frame` (kept writable: records are views into it)."""
    r = Reader(frame, offset, flexible=version >= 9)
    try:
        transactional_id = r.string(nullable=True) if version >= 3 else None
        acks, timeout = r.i16(), r.i32()
        topics = []
        for _ in range(r.array_length()):
            name = r.string()
            partitions = []
            for _ in range(r.array_length()):
                partitions.append(PartitionData(r.i32(), r.bytes_view()))
                r.skip_tags()
            topics.append(TopicData(name, tuple(partitions)))
            r.skip_tags()
        r.skip_tags()
    except DecodeError as exc:
        raise ProtocolError(f"malformed Produce v{version}: {exc}") from exc
    if not r.at_end():
        raise ProtocolError("trailing bytes after the Produce request")
    return ProduceRequest(transactional_id, acks, timeout, tuple(topics))
