"""The consumer protocol payloads: known bytes, round trips, newer versions, and garbage (which must
end in ConsumerProtocolError, quickly, whatever the bytes claim)."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.admin.consumer_protocol import (Assignment, ConsumerProtocolError, Subscription, decode_assignment,
                                             decode_subscription, encode_assignment, encode_subscription)


def _s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_assignment_known_bytes():
    # version 0, [("orders", [0, 2]), ("audit", [])], user_data = b"\x01"
    raw = (struct.pack(">hi", 0, 2) + _s("orders") + struct.pack(">iii", 2, 0, 2) + _s("audit")
           + struct.pack(">i", 0) + struct.pack(">i", 1) + b"\x01")
    assert decode_assignment(raw) == Assignment(0, (("orders", (0, 2)), ("audit", ())), b"\x01")


def test_subscription_known_bytes_v3():
    raw = (struct.pack(">hi", 3, 1) + _s("orders") + struct.pack(">i", -1)  # user_data null
           + struct.pack(">i", 1) + _s("orders") + struct.pack(">ii", 1, 4)  # owned partitions
           + struct.pack(">i", 7) + _s("rack-a"))
    assert decode_subscription(raw) == Subscription(3, ("orders",), None, (("orders", (4,)),), 7, "rack-a")


def test_empty_payload_is_an_empty_assignment():
    # a member that joined but has not been synced yet has empty assignment bytes
    assert decode_assignment(b"") == Assignment(0, (), None)
    assert decode_subscription(b"").topics == ()


def test_newer_version_is_read_with_the_newest_layout_and_trailing_bytes_ignored():
    v9 = encode_assignment(Assignment(3, (("t", (1,)),), None))
    v9 = struct.pack(">h", 9) + v9[2:] + b"future fields"
    assert decode_assignment(v9).partitions == (("t", (1,)),)
    sub = encode_subscription(Subscription(3, ("t",), b"u", (), 2, None))
    sub = struct.pack(">h", 42) + sub[2:] + b"\x00" * 10
    assert decode_subscription(sub).topics == ("t",)


def test_kafka_python_v0_assignment_decodes():
    old = pytest.importorskip("kafka.protocol.old.consumer_protocol")
    raw = old.ConsumerProtocolMemberAssignment_v0(0, [("t", [0, 1, 2])], b"").encode()
    assert decode_assignment(raw).partitions == (("t", (0, 1, 2)),)
    meta = old.ConsumerProtocolMemberMetadata_v0(0, ["t", "u"], b"").encode()
    assert decode_subscription(meta).topics == ("t", "u")


@pytest.mark.parametrize("raw", [
    b"\x00",  # half a version
    struct.pack(">h", -1),  # negative version
    struct.pack(">hi", 0, 0x7FFFFFFF),  # forged topic count: must not allocate or loop
    struct.pack(">hi", 0, 1) + _s("t") + struct.pack(">i", 0x7FFFFFFF),  # forged partition count
    struct.pack(">hi", 0, -1),  # null array where none is nullable
    struct.pack(">hi", 0, 1) + struct.pack(">h", 5) + b"ab",  # topic runs past the end
    struct.pack(">hi", 0, 1) + struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">i", 0),  # not UTF-8
    struct.pack(">hi", 0, 0),  # user_data missing
])
def test_malformed_assignment_is_a_clean_error(raw):
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(raw)


topic_partitions = st.lists(st.tuples(st.text(max_size=20), st.lists(st.integers(-2**31, 2**31 - 1), max_size=8)
                                      .map(tuple)), max_size=5).map(tuple)
user_data = st.none() | st.binary(max_size=50)


@given(st.integers(0, 3), topic_partitions, user_data)
def test_assignment_round_trip(version, partitions, data):
    a = Assignment(version, partitions, data)
    assert decode_assignment(encode_assignment(a)) == a


@given(st.integers(0, 3), st.lists(st.text(max_size=20), max_size=5).map(tuple), user_data, topic_partitions,
       st.integers(-2**31, 2**31 - 1), st.none() | st.text(max_size=10))
def test_subscription_round_trip(version, topics, data, owned, generation, rack):
    s = Subscription(version, topics, data, owned if version >= 1 else (), generation if version >= 2 else -1,
                     rack if version >= 3 else None)
    assert decode_subscription(encode_subscription(s)) == s


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_garbage_is_decoded_or_refused_cleanly(raw):
    for decode in (decode_assignment, decode_subscription):
        try:
            decode(raw)
        except ConsumerProtocolError:
            pass


@settings(max_examples=300)
@given(st.integers(0, 3), topic_partitions, user_data, st.data())
def test_truncated_or_corrupted_valid_payloads_fail_cleanly(version, partitions, data, draw):
    raw = bytearray(encode_assignment(Assignment(version, partitions, data)))
    if raw and draw.draw(st.booleans()):
        i = draw.draw(st.integers(0, len(raw) - 1))
        raw[i] = draw.draw(st.integers(0, 255))
    cut = draw.draw(st.integers(0, len(raw)))
    try:
        decode_assignment(bytes(raw[:cut]))
    except ConsumerProtocolError:
        pass
