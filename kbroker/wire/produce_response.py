"""Produce response encoder, every version 0–11, written directly with struct.

An acknowledgement is the one response every produce request waits for; kio's generic writer
spends tens of microseconds per partition on it, which shows in acks=all latency and when a
request carries many partitions. Tests check the bytes against kio for v3–11 (v0–2 are not in
kio's schemas).
"""

from __future__ import annotations

import struct
from typing import Any

from kbroker.wire.primitives import (
    I32 as _I32,
    I64 as _I64,
    leader_id_and_epoch,
    length as _length,
    node_endpoints,
    string as _string,
    tagged_field,
)

_BASE = struct.Struct(">ihq")  # index, error_code, base_offset


def encode_produce_response(version: int, correlation_id: int, data: dict[str, Any]) -> bytes:
    flexible = version >= 9
    tags = b"\x00" if flexible else b""
    out = bytearray(_I32.pack(correlation_id))
    out += tags

    def length(n: int) -> bytes:
        return _length(n, flexible)

    def string(value: str | None) -> bytes:
        return _string(value, flexible)

    topics = data["responses"]
    out += length(len(topics))
    for topic in topics:
        out += string(topic["name"])
        partitions = topic["partition_responses"]
        out += length(len(partitions))
        for p in partitions:
            out += _BASE.pack(p["index"], p["error_code"], p["base_offset"])
            if version >= 2:
                out += _I64.pack(p["log_append_time"])
            if version >= 5:
                out += _I64.pack(p["log_start_offset"])
            if version >= 8:
                errors = p.get("record_errors") or ()
                out += length(len(errors))
                for e in errors:
                    out += _I32.pack(e["batch_index"]) + string(e.get("batch_index_error_message")) + tags
                out += string(p.get("error_message"))
            leader = p.get("current_leader") if version >= 10 else None
            if leader:
                out += tagged_field(0, leader_id_and_epoch(leader))
            else:
                out += tags
        out += tags
    if version >= 1:
        out += _I32.pack(data.get("throttle_time", 0))
    endpoints = data.get("node_endpoints") if version >= 10 else None
    if endpoints:
        out += tagged_field(0, node_endpoints(endpoints))
    else:
        out += tags
    return _I32.pack(len(out)) + bytes(out)

