"""The hand-written ConsumerGroupHeartbeat codec against kio's: the same requests decoded to the same
fields, the same bytes for every response, and malformed bodies refused with ProtocolError."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.errors import ErrorCode
from kbroker.wire import consumer_group_heartbeat as cgh
from kbroker.wire.protocol import (
    ProtocolError,
    build_response,
    encode_request,
    encode_response,
    parse_request_header,
    request_class,
    to_ms,
)
from kbroker.wire.protocol import decode_request as kio_decode

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
maybe = st.none() | names
uuids = st.builds(lambda i: uuid.UUID(int=i), st.integers(1, 2**128 - 1))
int32 = st.integers(-2**31, 2**31 - 1)
topic_partitions = st.lists(st.fixed_dictionaries({"topic_id": uuids, "partitions": st.lists(int32, max_size=6)}),
                            max_size=4)

requests = st.fixed_dictionaries({
    "group_id": names, "member_id": names, "member_epoch": int32, "instance_id": maybe, "rack_id": maybe,
    "rebalance_timeout": int32, "subscribed_topic_names": st.none() | st.lists(names, max_size=4),
    "subscribed_topic_regex": maybe, "server_assignor": maybe, "topic_partitions": st.none() | topic_partitions})


def _frame(version: int, body: dict) -> bytes:
    return encode_request(cgh.API_KEY, version, 7, "test", body)[4:]


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(cgh.VERSIONS), body=requests)
def test_requests_decode_as_kio_decodes_them(version, body):
    frame = _frame(version, body)
    header, offset = parse_request_header(frame)
    ours = cgh.decode_request(version, frame, offset)
    theirs = kio_decode(header, frame, offset)
    for field in ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "server_assignor"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.rebalance_timeout == to_ms(theirs.rebalance_timeout)
    assert ours.subscribed_topic_regex == getattr(theirs, "subscribed_topic_regex", None)
    assert ours.subscribed_topic_names == (None if theirs.subscribed_topic_names is None
                                           else tuple(theirs.subscribed_topic_names))
    if theirs.topic_partitions is None:
        assert ours.topic_partitions is None
    else:
        assert [(tp.topic_id, tuple(tp.partitions)) for tp in ours.topic_partitions] == \
            [(tp.topic_id, tuple(tp.partitions)) for tp in theirs.topic_partitions]


responses = st.fixed_dictionaries({
    "throttle_time": st.integers(0, 2**31 - 1), "error_code": st.sampled_from(list(ErrorCode)),
    "error_message": maybe, "member_id": maybe, "member_epoch": int32, "heartbeat_interval": int32,
    "assignment": st.none() | st.builds(lambda tps: {"topic_partitions": tps}, topic_partitions)})


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(cgh.VERSIONS), data=responses, correlation_id=int32)
def test_responses_encode_to_kio_bytes(version, data, correlation_id):
    header, _ = parse_request_header(encode_request(cgh.API_KEY, version, correlation_id, None, {
        "group_id": "g", "member_id": "m", "member_epoch": 0})[4:])
    assert cgh.encode_response(version, correlation_id, data) == encode_response(header, build_response(header, data))


def test_a_null_assignment_and_an_empty_one_differ_on_the_wire():
    empty = cgh.encode_response(1, 1, {"member_id": "m", "assignment": {"topic_partitions": []}})
    null = cgh.encode_response(1, 1, {"member_id": "m", "assignment": None})
    assert empty != null


@settings(max_examples=200, deadline=None)
@given(body=requests, cut=st.integers(1, 400))
def test_every_truncation_is_refused(body, cut):
    frame = _frame(1, body)
    _header, offset = parse_request_header(frame)
    cut = min(cut, len(frame) - offset)
    with pytest.raises(ProtocolError):
        cgh.decode_request(1, frame[:len(frame) - cut], offset)


def test_forged_counts_and_nulls_are_refused():
    base = {"group_id": "g", "member_id": "m", "member_epoch": 1}
    frame = bytearray(_frame(1, base))
    _header, offset = parse_request_header(frame)
    with pytest.raises(ProtocolError, match="GroupId"):  # null where the schema has no null
        cgh.decode_request(1, frame[:offset] + b"\x00" + frame[offset + 2:], offset)
    # the topic-names array claims 2**28 elements in a handful of bytes
    head = frame[:offset] + b"\x02g\x02m" + b"\x00\x00\x00\x01" + b"\x00\x00" + b"\xff\xff\xff\xff"
    with pytest.raises(ProtocolError, match="cannot fit"):
        cgh.decode_request(1, head + b"\x80\x80\x80\x80\x01" + b"\x00" * 8, offset)
    with pytest.raises(ProtocolError, match="trailing"):
        cgh.decode_request(1, bytes(frame) + b"\x00", offset)


def test_kio_still_knows_the_versions_served():
    for version in cgh.VERSIONS:
        assert request_class(cgh.API_KEY, version).__flexible__
