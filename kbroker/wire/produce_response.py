"""Produce response encoder, every version 0–11, written directly with struct.

An acknowledgement is the one response every produce request waits for; kio's generic writer
spends tens of microseconds per partition on it, which shows in acks=all latency and when a
request carries many partitions. Tests check the bytes against kio for v3–11 (v0–2 are not in
kio's schemas).
"""

from __future__ import annotations

import struct
from typing import Any

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_BASE = struct.Struct(">ihq")  # index, error_code, base_offset
_I64 = struct.Struct(">q")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_produce_response(version: int, correlation_id: int, data: dict[str, Any]) -> bytes:
    flexible = version >= 9
    tags = b"\x00" if flexible else b""
    out = bytearray(_I32.pack(correlation_id))
    out += tags

    def length(n: int) -> bytes:
        return _uvarint(n + 1) if flexible else _I32.pack(n)

    def string(value: str | None) -> bytes:
        if value is None:
            return b"\x00" if flexible else _I16.pack(-1)
        raw = value.encode()
        return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw

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
            out += tags
        out += tags
    if version >= 1:
        out += _I32.pack(data.get("throttle_time", 0))
    out += tags
    return _I32.pack(len(out)) + bytes(out)
