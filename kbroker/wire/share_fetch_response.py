"""ShareFetch response encoder (v1–2, KIP-932) that leaves record data out of Python, as the Fetch
encoder does (wire/fetch_response.py): a partition's `records` may be bytes or a sequence of file
ranges and in-memory batches, and the frame comes back as chunks so the server can `sendfile` the
ranges straight from the segment files. The layout is Kafka's ShareFetchResponse (flexible from v1;
v2 adds nothing to the response); tests check it byte for byte against kio.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kbroker.wire.fetch_response import Chunk, _Writer
from kbroker.wire.primitives import I32 as _I32, leader_id_and_epoch, node_endpoints

API_KEY = 78
_TOP = struct.Struct(">ih")  # throttle_time, error_code
_PARTITION_HEAD = struct.Struct(">ih")  # partition_index, error_code
_I16 = struct.Struct(">h")
_ACQUIRED = struct.Struct(">qqhx")  # first_offset, last_offset, delivery_count, no tagged fields
_NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def encode_response(version: int, correlation_id: int, data: dict[str, Any]) -> list[Chunk]:
    """The whole response frame (size prefix included) as chunks."""
    w = _Writer(True)
    w.raw(_I32.pack(correlation_id))
    w.no_tags()  # response header v1
    w.raw(_TOP.pack(data.get("throttle_time", 0), int(data.get("error_code", 0))))
    w.string(data.get("error_message"))
    w.raw(_I32.pack(data.get("acquisition_lock_timeout", 0)))
    topics = data["responses"]
    w.array_length(len(topics))
    for topic in topics:
        w.raw((topic.get("topic_id") or uuid.UUID(int=0)).bytes)
        w.array_length(len(topic["partitions"]))
        for p in topic["partitions"]:
            w.raw(_PARTITION_HEAD.pack(p["partition_index"], int(p["error_code"])))
            w.string(p.get("error_message"))
            w.raw(_I16.pack(int(p.get("acknowledge_error_code", 0))))
            w.string(p.get("acknowledge_error_message"))
            w.raw(leader_id_and_epoch(p.get("current_leader") or _NO_LEADER))
            w.records(p.get("records"))
            acquired = p.get("acquired_records") or ()
            w.array_length(len(acquired))
            for a in acquired:
                w.raw(_ACQUIRED.pack(a["first_offset"], a["last_offset"], a["delivery_count"]))
            w.no_tags()
        w.no_tags()
    w.raw(node_endpoints(data.get("node_endpoints") or []))
    w.no_tags()
    chunks = w.finish()
    return [_I32.pack(w.size)] + chunks
