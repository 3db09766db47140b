"""A forged array count must not reach kio's native reader, which reserves memory for the count
up front and aborts the process when that fails. The decoding runs in a child process whose
address space is capped, so without the guard the child dies (SIGABRT) and the test fails."""

import subprocess
import sys
import textwrap

import pytest

from kbroker.wire.primitives import DecodeError
from kbroker.wire.request_guard import check_request_bounds
from kbroker.wire.protocol import request_class

CHILD = textwrap.dedent(
    """
    import resource, struct
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from kbroker.api.dispatch import DISPATCH
    from kbroker.wire.protocol import ProtocolError, RequestHeader, decode_request, known_versions
    huge_classic = struct.pack(">i", 0x7FFFFFFF)
    huge_flexible = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07])
    checked = 0
    for key, spec in DISPATCH.items():
        if key == 0:
            continue  # Produce has its own bounded decoder
        for version in range(spec.min_version, spec.max_version + 1):
            if version not in known_versions(key):
                continue
            for flexible in (False, True):
                huge = huge_flexible if flexible else huge_classic
                # the forged count at every field position the first 64 bytes can reach
                for prefix_len in range(0, 64):
                    body = b"\\x01" * prefix_len + huge * 4
                    header = RequestHeader(key, version, 1, "c", flexible)
                    try:
                        decode_request(header, body, 0)
                    except ProtocolError:
                        pass
                    checked += 1
    print("checked", checked)
    """
)


def test_forged_array_counts_are_refused_before_allocation():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 1000


def test_guard_accepts_a_valid_body_and_refuses_an_overrun():
    import io

    from kio.serial import entity_writer

    cls = request_class(1, 12)  # Fetch v12: flexible, nested arrays, tagged fields
    topic = cls.__dataclass_fields__["topics"].type.__args__[0]
    partition = topic.__dataclass_fields__["partitions"].type.__args__[0]
    from kbroker.wire.protocol import build

    request = build(cls, {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                          "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5,
                                                                    "partition_max_bytes": 1 << 20}]}]})
    out = io.BytesIO()
    entity_writer(cls)(out, request)
    body = out.getvalue()
    check_request_bounds(cls, body, 0)
    with pytest.raises(DecodeError):
        check_request_bounds(cls, body[:-3], 0)
    assert topic and partition
