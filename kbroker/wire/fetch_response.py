"""Fetch response encoder that leaves record data out of Python: zero-copy on the hot path.

A partition's `records` may be bytes or a sequence of file ranges (objects with a `size`) and
`RecordBytes` built in memory; the encoder returns the response frame as chunks — bytes for
everything it writes itself, the ranges as they are — so the server can `sendfile` the ranges
straight from the segment files. The layout is Kafka's FetchResponse v0–17 (throttle time from v1,
the last stable offset and aborted transactions from v4, flexible from v12; KIP-951's current
leader from v12, its node endpoints from v16); tests check it byte for byte against kio (v4+) and
the schema codec (v0–3, Kafka 3.9's definitions).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Iterable

from kbroker.wire.primitives import (
    I16 as _I16,
    I32 as _I32,
    I64 as _I64,
    leader_id_and_epoch,
    length as _length,
    node_endpoints,
    string as _string,
    tagged_field,
)

CURRENT_LEADER_TAG = 1  # PartitionData's tagged fields: 0 DivergingEpoch, 1 CurrentLeader, 2 SnapshotId
NODE_ENDPOINTS_TAG = 0  # the response's (v16+)

_PARTITION_FIXED = struct.Struct(">ihqqq")  # partition_index, error_code, high_watermark, lso, log_start
_NO_LOG_START = struct.Struct(">ihqq")
_V0_PARTITION = struct.Struct(">ihq")  # v0-3: partition_index, error_code, high_watermark

Chunk = Any  # bytes, or a file range with `.size`


class RecordBytes(bytes):
    """Record batches in memory (a filtered view's rebuilt batches, an archive read from an object
    store) among a partition's file ranges: written into the frame where they stand, while the
    ranges around them stay ranges. `size` and `read()` as a file range has them."""

    __slots__ = ()

    @property
    def size(self) -> int:
        return len(self)

    def read(self) -> bytes:
        return bytes(self)


class _Writer:
    """Collects bytes, cutting a new chunk wherever a file range goes in."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.chunks: list[Chunk] = []
        self.buf = bytearray()
        self.size = 0

    def raw(self, data: bytes) -> None:
        self.buf += data

    def array_length(self, n: int | None) -> None:
        self.buf += _length(n, self.flexible)

    def string(self, value: str) -> None:
        self.buf += _string(value, self.flexible)

    def no_tags(self) -> None:
        if self.flexible:
            self.buf.append(0)

    def records(self, records: bytes | Iterable[Chunk] | None) -> None:
        if records is None or isinstance(records, (bytes, bytearray, memoryview)):
            self.buf += _length(None if records is None else len(records), self.flexible)
            self.buf += records or b""
            return
        ranges = [r for r in records if r.size]
        self.buf += _length(sum(r.size for r in ranges), self.flexible)
        for r in ranges:
            if isinstance(r, bytes):
                self.buf += r
                continue
            self._cut()
            self.chunks.append(r)
            self.size += r.size

    def _cut(self) -> None:
        if self.buf:
            self.chunks.append(bytes(self.buf))
            self.size += len(self.buf)
            self.buf = bytearray()

    def finish(self) -> list[Chunk]:
        self._cut()
        return self.chunks


def encode_fetch_response(version: int, correlation_id: int, data: dict[str, Any]) -> list[Chunk]:
    """The whole response frame (size prefix included) as chunks."""
    flexible = version >= 12
    w = _Writer(flexible)
    w.raw(_I32.pack(correlation_id))
    w.no_tags()  # response header v1
    if version >= 1:
        w.raw(_I32.pack(data.get("throttle_time", 0)))
    if version >= 7:
        w.raw(_I16.pack(int(data.get("error_code", 0))) + _I32.pack(data.get("session_id", 0)))
    topics = data["responses"]
    w.array_length(len(topics))
    for topic in topics:
        if version >= 13:
            w.raw((topic.get("topic_id") or uuid.UUID(int=0)).bytes)
        else:
            w.string(topic["topic"] or "")
        w.array_length(len(topic["partitions"]))
        for p in topic["partitions"]:
            if version >= 5:
                w.raw(_PARTITION_FIXED.pack(p["partition_index"], int(p["error_code"]), p["high_watermark"],
                                            p["last_stable_offset"], p["log_start_offset"]))
            elif version >= 4:
                w.raw(_NO_LOG_START.pack(p["partition_index"], int(p["error_code"]), p["high_watermark"],
                                         p["last_stable_offset"]))
            else:
                w.raw(_V0_PARTITION.pack(p["partition_index"], int(p["error_code"]), p["high_watermark"]))
            if version >= 4:
                aborted = p.get("aborted_transactions")
                w.array_length(None if aborted is None else len(aborted))
                for txn in aborted or ():
                    w.raw(_I64.pack(txn["producer_id"]) + _I64.pack(txn["first_offset"]))
                    w.no_tags()
            if version >= 11:
                w.raw(_I32.pack(p.get("preferred_read_replica", -1)))
            w.records(p.get("records"))
            leader = p.get("current_leader") if version >= 12 else None
            if leader:  # KIP-951
                w.raw(tagged_field(CURRENT_LEADER_TAG, leader_id_and_epoch(leader)))
            else:
                w.no_tags()
        w.no_tags()
    endpoints = data.get("node_endpoints") if version >= 16 else None
    if endpoints:
        w.raw(tagged_field(NODE_ENDPOINTS_TAG, node_endpoints(endpoints)))
    else:
        w.no_tags()
    chunks = w.finish()
    return [_I32.pack(w.size)] + chunks


def frame_bytes(response: bytes | list[Chunk]) -> bytes:
    """A response as one bytes object, its file ranges read (tests and tools that decode it)."""
    if isinstance(response, (bytes, bytearray)):
        return bytes(response)
    return b"".join(c if isinstance(c, (bytes, bytearray)) else c.read() for c in response)
