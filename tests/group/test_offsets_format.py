"""Tests for kbroker.group.offsets_format: the `__consumer_offsets` key/value formats against
hand-built bytes of every version of Kafka's schemas, round trips, garbage, and the batch helpers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.errors import CorruptRecordError
from kbroker.group.offsets_format import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    UnknownRecordTypeError,
    build_offsets_batch,
    decode_group_metadata_value,
    decode_key,
    decode_offset_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_value,
    iter_offsets_records,
)
from kbroker.wire.primitives import DecodeError
from kbroker.wire.records import (
    COMPRESSION_GZIP,
    COMPRESSION_ZSTD,
    Record,
    build_batch,
    parse_batch_header,
)

settings.register_profile(
    "kbroker-offsets-format", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("kbroker-offsets-format")


# --- the schemas' primitives, written independently of the module under test -------------------


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s(v: str | None) -> bytes:
    """Classic string: int16 length, -1 = null."""
    if v is None:
        return i16(-1)
    raw = v.encode()
    return i16(len(raw)) + raw


def b(v: bytes) -> bytes:
    """Classic bytes: int32 length."""
    return i32(len(v)) + v


def uv(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cs(v: str | None) -> bytes:
    """Compact string: unsigned varint length + 1, 0 = null."""
    if v is None:
        return b"\x00"
    raw = v.encode()
    return uv(len(raw) + 1) + raw


def cb(v: bytes) -> bytes:
    return uv(len(v) + 1) + v


NO_TAGS = b"\x00"
# A tagged field (tag 7, 3 bytes) that a later Kafka might add: a v4 reader must skip it.
SOME_TAGS = b"\x01" + uv(7) + uv(3) + b"xyz"


# --- known vectors ---------------------------------------------------------------------------------


def test_offset_key_v1_known_bytes():
    encoded = encode_key(OffsetKey("g", "t", 3))
    assert encoded == bytes.fromhex("0001 0001 67 0001 74 00000003")
    assert decode_key(encoded) == OffsetKey("g", "t", 3)


def test_group_metadata_key_v2_known_bytes():
    encoded = encode_key(GroupMetadataKey("grp"))
    assert encoded == bytes.fromhex("0002 0003 677270")
    assert decode_key(encoded) == GroupMetadataKey("grp")


def test_offset_value_v3_known_bytes():
    encoded = encode_offset_value(OffsetValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000))
    assert encoded == bytes.fromhex(
        "0003"  # version
        "000000000000002a"  # offset
        "00000005"  # leader epoch
        "0001 6d"  # metadata
        "00000000000003e8"  # commit timestamp
    )


def test_offset_value_with_expire_is_v1_and_drops_leader_epoch():
    value = OffsetValue(offset=7, leader_epoch=9, metadata="", commit_timestamp=10, expire_timestamp=20)
    encoded = encode_offset_value(value)
    assert encoded == i16(1) + i64(7) + s("") + i64(10) + i64(20)
    assert decode_offset_value(encoded) == OffsetValue(7, -1, "", 10, 20)


def test_group_metadata_value_v3_known_bytes():
    member = MemberRecord(
        member_id="m1", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
        rebalance_timeout_ms=300000, session_timeout_ms=45000, subscription=b"\x00\x01", assignment=b"",
    )
    value = GroupMetadataValue("consumer", 4, "range", "m1", 1234, (member,))
    expected = bytes.fromhex(
        "0003"  # version
        "0008 636f6e73756d6572"  # protocol_type "consumer"
        "00000004"  # generation
        "0005 72616e6765"  # protocol "range"
        "0002 6d31"  # leader "m1"
        "00000000000004d2"  # current_state_timestamp
        "00000001"  # one member
        "0002 6d31"  # member_id
        "ffff"  # group_instance_id null
        "0001 63"  # client_id
        "000a 2f3132372e302e302e31"  # client_host
        "000493e0"  # rebalance timeout 300000
        "0000afc8"  # session timeout 45000
        "00000002 0001"  # subscription
        "00000000"  # assignment
    )
    assert encode_group_metadata_value(value) == expected
    assert decode_group_metadata_value(expected) == value


def test_empty_group_known_bytes():
    # What Kafka writes for a group that has emptied: no protocol, no leader, no members.
    value = GroupMetadataValue("consumer", 5, None, None, 99, ())
    encoded = encode_group_metadata_value(value)
    assert encoded == bytes.fromhex("0003 0008 636f6e73756d6572 00000005 ffff ffff 0000000000000063 00000000")
    assert decode_group_metadata_value(encoded) == value


# --- every version Kafka defines, built from the schema ------------------------------------------


def test_offset_key_v0_reads_as_offset_key():
    assert decode_key(i16(0) + s("grp") + s("topic") + i32(17)) == OffsetKey("grp", "topic", 17)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (i16(0) + i64(5) + s("meta") + i64(100), OffsetValue(5, -1, "meta", 100, -1)),
        (i16(1) + i64(5) + s("meta") + i64(100) + i64(200), OffsetValue(5, -1, "meta", 100, 200)),
        (i16(2) + i64(5) + s("meta") + i64(100), OffsetValue(5, -1, "meta", 100, -1)),
        (i16(3) + i64(5) + i32(8) + s("meta") + i64(100), OffsetValue(5, 8, "meta", 100, -1)),
        (i16(4) + i64(5) + i32(8) + cs("meta") + i64(100) + NO_TAGS, OffsetValue(5, 8, "meta", 100, -1)),
        (i16(4) + i64(5) + i32(8) + cs("") + i64(100) + SOME_TAGS, OffsetValue(5, 8, "", 100, -1)),
    ],
    ids=["v0", "v1", "v2", "v3", "v4", "v4-tagged"],
)
def test_offset_value_versions(raw, expected):
    assert decode_offset_value(raw) == expected
    assert decode_offset_value(memoryview(raw)) == expected


def _member_fields(version: int, m: MemberRecord, flexible: bool) -> bytes:
    st_ = cs if flexible else s
    by = cb if flexible else b
    out = st_(m.member_id)
    if version >= 3:
        out += st_(m.group_instance_id)
    out += st_(m.client_id) + st_(m.client_host)
    if version >= 1:
        out += i32(m.rebalance_timeout_ms)
    out += i32(m.session_timeout_ms) + by(m.subscription) + by(m.assignment)
    if flexible:
        out += NO_TAGS
    return out


def _group_value_bytes(version: int, v: GroupMetadataValue) -> bytes:
    flexible = version >= 4
    st_ = cs if flexible else s
    out = i16(version) + st_(v.protocol_type) + i32(v.generation) + st_(v.protocol) + st_(v.leader)
    if version >= 2:
        out += i64(v.current_state_timestamp)
    out += uv(len(v.members) + 1) if flexible else i32(len(v.members))
    for m in v.members:
        out += _member_fields(version, m, flexible)
    if flexible:
        out += NO_TAGS
    return out


MEMBERS = (
    MemberRecord("a-1", "static-a", "client-a", "/10.0.0.1", 60000, 10000, b"sub-a", b"assign-a"),
    MemberRecord("b-2", None, "client-b", "/10.0.0.2", 70000, 20000, b"", b"\x00\x01\x02"),
)
GROUP = GroupMetadataValue("consumer", 12, "cooperative-sticky", "a-1", 555, MEMBERS)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_versions(version):
    decoded = decode_group_metadata_value(_group_value_bytes(version, GROUP))
    expected_members = tuple(
        MemberRecord(
            m.member_id,
            m.group_instance_id if version >= 3 else None,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms if version >= 1 else m.session_timeout_ms,  # v0: Kafka's fallback
            m.session_timeout_ms,
            m.subscription,
            m.assignment,
        )
        for m in MEMBERS
    )
    assert decoded == GroupMetadataValue(
        "consumer", 12, "cooperative-sticky", "a-1", 555 if version >= 2 else -1, expected_members
    )


def test_group_metadata_value_v3_bytes_equal_encoder():
    assert encode_group_metadata_value(GROUP) == _group_value_bytes(3, GROUP)


def test_group_metadata_value_v4_skips_tagged_fields():
    raw = _group_value_bytes(4, GROUP)
    tagged = raw[:-1] + SOME_TAGS
    assert decode_group_metadata_value(tagged) == decode_group_metadata_value(raw)


def test_tombstones():
    assert decode_offset_value(None) is None
    assert decode_group_metadata_value(None) is None


# --- rejections ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 4, 5, 100, -1])
def test_unknown_key_versions(version):
    with pytest.raises(UnknownRecordTypeError):
        decode_key(i16(version) + s("g"))
    assert issubclass(UnknownRecordTypeError, DecodeError)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00",
        i16(1) + s("g"),  # topic and partition missing
        i16(1) + s("g") + s("t") + i32(0) + b"\x00",  # trailing byte
        i16(1) + i16(-1) + s("t") + i32(0),  # null group
        i16(2) + i16(100) + b"g",  # length past the end
        i16(2) + i16(2) + b"\xff\xfe",  # not UTF-8
    ],
)
def test_bad_keys(raw):
    with pytest.raises(DecodeError):
        decode_key(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        i16(5) + i64(1) + i32(1) + cs("") + i64(1) + NO_TAGS,  # no version after 4
        i16(-1) + i64(1) + s("") + i64(1),
        i16(3) + i64(1) + i32(1) + s(""),  # commit timestamp missing
        i16(3) + i64(1) + i32(1) + s("") + i64(1) + b"\x00",  # trailing byte
        i16(3) + i64(1) + i32(1) + i16(-1) + i64(1),  # null metadata
        i16(4) + i64(1) + i32(1) + cs("") + i64(1),  # tagged fields missing
        i16(4) + i64(1) + i32(1) + cs("") + i64(1) + b"\x01\x00\x7f",  # tag runs past the end
    ],
)
def test_bad_offset_values(raw):
    with pytest.raises(DecodeError):
        decode_offset_value(raw)


@pytest.mark.parametrize(
    "raw",
    [
        i16(5) + cs("consumer"),
        i16(3) + s("consumer") + i32(1) + s(None) + s(None) + i64(0) + i32(2_000_000_000),  # huge count
        i16(3) + s("consumer") + i32(1) + s(None) + s(None) + i64(0) + i32(-1),  # null members
        i16(4) + cs("consumer") + i32(1) + cs(None) + cs(None) + i64(0) + uv(2**34) + NO_TAGS,
        i16(0) + s("c") + i32(1) + s(None) + s(None) + i32(1) + s("m") + s("c") + s("h") + i32(1) + i32(-1) + b(b""),
        _group_value_bytes(3, GROUP)[:-1],
        _group_value_bytes(3, GROUP) + b"\x00",
    ],
    ids=["v5", "huge-count", "null-array", "huge-compact-count", "null-bytes", "truncated", "trailing"],
)
def test_bad_group_values(raw):
    with pytest.raises(DecodeError):
        decode_group_metadata_value(raw)


def test_encode_refuses_values_that_do_not_fit():
    with pytest.raises(ValueError):
        encode_key(OffsetKey("g", "t", 2**31))
    with pytest.raises(ValueError):
        encode_key(GroupMetadataKey("x" * 40000))
    with pytest.raises(TypeError):
        encode_key("g")  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------------------

text = st.text(max_size=40)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
small_bytes = st.binary(max_size=64)
members = st.builds(
    MemberRecord, text, st.none() | text, text, text, int32, int32, small_bytes, small_bytes
)
group_values = st.builds(
    GroupMetadataValue, text, int32, st.none() | text, st.none() | text, int64,
    st.lists(members, max_size=5).map(tuple),
)
keys = st.builds(OffsetKey, text, text, int32) | st.builds(GroupMetadataKey, text)


@given(keys)
def test_key_round_trip(key):
    assert decode_key(encode_key(key)) == key


@given(int64, int32, text, int64)
def test_offset_value_round_trip(offset, leader_epoch, metadata, commit_ts):
    value = OffsetValue(offset, leader_epoch, metadata, commit_ts)
    assert decode_offset_value(encode_offset_value(value)) == value


@given(int64, text, int64, int64.filter(lambda v: v != -1))
def test_offset_value_with_expire_round_trip(offset, metadata, commit_ts, expire_ts):
    value = OffsetValue(offset, -1, metadata, commit_ts, expire_ts)
    assert decode_offset_value(encode_offset_value(value)) == value


@given(group_values)
def test_group_metadata_value_round_trip(value):
    encoded = encode_group_metadata_value(value)
    assert encoded == _group_value_bytes(3, value)
    assert decode_group_metadata_value(encoded) == value
    assert decode_group_metadata_value(_group_value_bytes(4, value)) == value


@given(st.binary(max_size=300))
def test_garbage_key(data):
    try:
        key = decode_key(data)
    except DecodeError:
        return
    assert encode_key(key) == data or data[:2] == b"\x00\x00"


@given(st.binary(max_size=300))
def test_garbage_offset_value(data):
    try:
        value = decode_offset_value(data)
    except DecodeError:
        return
    assert isinstance(value, OffsetValue)


@given(st.binary(max_size=300))
def test_garbage_group_value(data):
    try:
        value = decode_group_metadata_value(data)
    except DecodeError:
        return
    assert isinstance(value, GroupMetadataValue)


@given(group_values, st.data())
def test_mutated_group_value(value, data):
    """Valid bytes with one byte changed, or cut short: the value or DecodeError, nothing else."""
    raw = bytearray(_group_value_bytes(data.draw(st.sampled_from([0, 1, 2, 3, 4])), value))
    i = data.draw(st.integers(0, len(raw) - 1))
    if data.draw(st.booleans()):
        raw[i] = data.draw(st.integers(0, 255))
    else:
        del raw[i:]
    try:
        decode_group_metadata_value(bytes(raw))
    except DecodeError:
        pass


# --- batches ---------------------------------------------------------------------------------------


def test_batch_round_trip_with_tombstone():
    key1 = encode_key(OffsetKey("g", "t", 0))
    key2 = encode_key(OffsetKey("g", "t", 1))
    gkey = encode_key(GroupMetadataKey("g"))
    v1 = encode_offset_value(OffsetValue(10, 1, "", 1000))
    gval = encode_group_metadata_value(GROUP)
    entries = [(key1, v1), (key2, None), (gkey, gval)]
    batch = build_offsets_batch(entries, 1_700_000_000_000)

    header = parse_batch_header(batch)
    assert header.producer_id == -1 and header.compression == 0 and header.records_count == 3
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_000

    got = list(iter_offsets_records(batch))
    assert got == [(0, key1, v1), (1, key2, None), (2, gkey, gval)]
    assert decode_offset_value(got[1][2]) is None
    assert decode_group_metadata_value(got[2][2]) == GROUP


def test_iter_several_batches_compressed_and_partial_tail():
    first = build_offsets_batch([(b"k0", b"v0")], 1)
    second = build_batch(
        [Record(5, 2, b"k5", None), Record(6, 2, b"k6", b"v6")], base_offset=5, compression=COMPRESSION_ZSTD
    )
    third = build_batch([Record(7, 3, b"k7", b"v7")], base_offset=7, compression=COMPRESSION_GZIP)
    control = build_batch([Record(8, 4, b"\x00\x00\x00\x01", b"")], base_offset=8, is_control=True)
    log = first + second + third + control + third[:20]
    assert list(iter_offsets_records(log)) == [
        (0, b"k0", b"v0"), (5, b"k5", None), (6, b"k6", b"v6"), (7, b"k7", b"v7"),
    ]
    assert list(iter_offsets_records(memoryview(log))) == list(iter_offsets_records(log))


def test_iter_corrupt_batch():
    batch = bytearray(build_offsets_batch([(b"k", b"v")], 1))
    batch[16] = 7  # magic
    with pytest.raises(CorruptRecordError):
        list(iter_offsets_records(bytes(batch)))
