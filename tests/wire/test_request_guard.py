"""A forged array count must not reach kio's native reader, which reserves memory for the count
up front and aborts the process when that fails. The decoding runs in a child process whose
address space is capped, so without the guard the child dies (SIGABRT) and the test fails."""

import struct
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


# -- nullability: a null (-1) only where the version's schema allows one -----------------------------

def _decode(key: int, version: int, body: bytes):
    from kbroker.wire.protocol import decode_request, parse_request_header

    flexible = request_class(key, version).__flexible__
    frame = struct.pack(">hhih", key, version, 7, -1) + (b"\0" if flexible else b"") + body
    header, offset = parse_request_header(frame)
    return decode_request(header, frame, offset)


NULL_ARRAY = struct.pack(">i", -1)


@pytest.mark.parametrize("key, version, body", [
    (19, 4, NULL_ARRAY + struct.pack(">i?", 30000, False)),  # CreateTopics v4 topics
    (15, 1, NULL_ARRAY),  # DescribeGroups v1 groups
    (15, 4, NULL_ARRAY + b"\0"),  # DescribeGroups v4 groups (+ include_authorized_operations)
    (42, 1, NULL_ARRAY),  # DeleteGroups v1 groups_names
    (42, 2, b"\0\0"),  # DeleteGroups v2 (flexible: length+1 = 0) groups_names, then no tags
    (3, 0, NULL_ARRAY),  # Metadata v0 topics: nullable only from v1
], ids=["CreateTopics-v4", "DescribeGroups-v1", "DescribeGroups-v4", "DeleteGroups-v1", "DeleteGroups-v2",
        "Metadata-v0"])
def test_a_null_array_the_version_does_not_allow_is_a_malformed_request(key, version, body):
    from kbroker.wire.protocol import ProtocolError

    with pytest.raises(ProtocolError, match="does not allow to be null"):
        _decode(key, version, body)
    # the same request with an empty array instead decodes: only the null is refused
    empty = body.replace(NULL_ARRAY, struct.pack(">i", 0), 1) if body != b"\0\0" else b"\x01\0"
    assert _decode(key, version, empty) is not None


def test_a_null_where_the_version_allows_it_still_decodes():
    assert _decode(3, 1, NULL_ARRAY).topics is None  # Metadata v1+: null topics = all topics
    # DescribeConfigs v1: resources[].configuration_keys is a nullable array of strings
    resource = struct.pack(">bh", 2, 1) + b"t" + NULL_ARRAY
    request = _decode(32, 1, struct.pack(">i", 1) + resource + b"\0")
    assert request.resources[0].configuration_keys is None


def test_null_elements_and_null_strings_are_refused():
    from kbroker.wire.protocol import ProtocolError

    # DescribeConfigs v1: configuration_keys may be null, but not one of its strings
    resource = struct.pack(">bh", 2, 1) + b"t" + struct.pack(">ih", 1, -1)
    with pytest.raises(ProtocolError, match="does not allow to be null"):
        _decode(32, 1, struct.pack(">i", 1) + resource + b"\0")
    # DescribeGroups v1: a null group id inside the array
    with pytest.raises(ProtocolError, match="does not allow to be null"):
        _decode(15, 1, struct.pack(">ih", 1, -1))
    # SaslAuthenticate v0: auth_bytes (bytes) is not nullable
    with pytest.raises(ProtocolError, match="does not allow to be null"):
        _decode(36, 0, NULL_ARRAY)


@pytest.mark.parametrize("body", [b"\x00\x00", b"\x02\x00\x00"], ids=["null-array", "null-element"])
def test_the_schema_driven_codec_refuses_nulls_too(body):
    """DescribeTransactions v0 (flexible; `schema_codec`, from Kafka's nullableVersions)."""
    from kbroker.wire.protocol import ProtocolError

    with pytest.raises(ProtocolError, match="invalid length -1"):
        _decode(65, 0, body)
    assert _decode(65, 0, b"\x02\x02x\x00").transactional_ids == ("x",)
