"""Metadata response encoder for versions 0–12: fast enough for clusters of 10,000+ partitions.

Going through kio's generic writer costs ~15 µs per partition, which makes a full Metadata
request of a large cluster take a noticeable fraction of a second; this writes Kafka's layout
directly with struct. Tests check it byte for byte against kio for every version.
"""

from __future__ import annotations

import struct
import uuid
from functools import lru_cache
from typing import Any

from kbroker.wire.primitives import I16 as _I16, I32 as _I32, length as _length, string as _string, uvarint as _uvarint

_PARTITION_HEAD = struct.Struct(">hii")  # error_code, partition_index, leader_id
_PARTITION_HEAD_EPOCH = struct.Struct(">hiii")  # ... and leader_epoch (v7+)
_UUID_ZERO = uuid.UUID(int=0)


@lru_cache(maxsize=4096)
def _int_array(flexible: bool, values: tuple[int, ...]) -> bytes:
    """Replica lists repeat across thousands of partitions: encode each distinct one once."""
    head = _uvarint(len(values) + 1) if flexible else _I32.pack(len(values))
    return head + struct.pack(f">{len(values)}i", *values)


def encode_metadata_response(version: int, correlation_id: int, data: dict[str, Any]) -> bytes:
    flexible = version >= 9
    out = bytearray(_I32.pack(correlation_id))
    tags = b"\x00" if flexible else b""
    out += tags  # response header v1

    def array_len(n: int) -> bytes:
        return _length(n, flexible)

    def string(value: str | None) -> bytes:
        return _string(value, flexible)


    if version >= 3:
        out += _I32.pack(data.get("throttle_time", 0))
    brokers = data["brokers"]
    out += array_len(len(brokers))
    for b in brokers:
        out += _I32.pack(b["node_id"]) + string(b["host"]) + _I32.pack(b["port"])
        if version >= 1:
            out += string(b.get("rack"))
        out += tags
    if version >= 2:
        out += string(data.get("cluster_id"))
    if version >= 1:
        out += _I32.pack(data.get("controller_id", -1))
    topics = data["topics"]
    out += array_len(len(topics))
    for t in topics:
        out += _I16.pack(int(t["error_code"])) + string(t["name"])
        if version >= 10:
            out += (t.get("topic_id") or _UUID_ZERO).bytes
        if version >= 1:
            out += b"\x01" if t.get("is_internal") else b"\x00"
        partitions = t["partitions"]
        out += array_len(len(partitions))
        for p in partitions:
            if version >= 7:
                out += _PARTITION_HEAD_EPOCH.pack(p["error_code"], p["partition_index"], p["leader_id"],
                                                  p.get("leader_epoch", -1))
            else:
                out += _PARTITION_HEAD.pack(p["error_code"], p["partition_index"], p["leader_id"])
            out += _int_array(flexible, tuple(p["replica_nodes"]))
            out += _int_array(flexible, tuple(p["isr_nodes"]))
            if version >= 5:
                out += _int_array(flexible, tuple(p.get("offline_replicas", ())))
            out += tags
        if version >= 8:
            out += _I32.pack(t.get("topic_authorized_operations", -2147483648))
        out += tags
    if 8 <= version <= 10:
        out += _I32.pack(data.get("cluster_authorized_operations", -2147483648))
    out += tags
    return _I32.pack(len(out)) + bytes(out)
