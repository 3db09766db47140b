import io

import pytest
from hypothesis import given, settings, strategies as st
from kio.serial import entity_writer

from kbroker.wire.produce_request import decode_produce_request
from kbroker.wire.protocol import ProtocolError, build, decode_request, parse_request_header, request_class

requests = st.fixed_dictionaries({
    "transactional_id": st.one_of(st.none(), st.text(max_size=10)),
    "acks": st.sampled_from([-1, 0, 1]),
    "timeout": st.integers(0, 2**31 - 1),
    "topic_data": st.lists(st.fixed_dictionaries({
        "name": st.text(min_size=1, max_size=15),
        "partition_data": st.lists(st.fixed_dictionaries({
            "index": st.integers(0, 2**31 - 1),
            "records": st.one_of(st.none(), st.binary(max_size=200))}), max_size=3)}), max_size=3),
})


def _frame(version, data):
    cls = request_class(0, version)
    out = io.BytesIO()
    out.write(b"\x00\x00" + version.to_bytes(2, "big") + b"\x00\x00\x00\x07\xff\xff")
    if cls.__flexible__:
        out.write(b"\0")
    entity_writer(cls)(out, build(cls, data))
    return bytearray(out.getvalue())


@settings(max_examples=150, deadline=None)
@given(st.integers(3, 11), requests)
def test_agrees_with_kio(version, data):
    frame = _frame(version, data)
    header, offset = parse_request_header(frame)
    ours = decode_produce_request(version, frame, offset)
    theirs = decode_request(header, bytes(frame), offset)
    assert (ours.transactional_id, ours.acks) == (theirs.transactional_id, theirs.acks)
    assert [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in ours.topic_data] == [
        (t.name, [(p.index, p.records) for p in t.partition_data]) for t in theirs.topic_data]


def test_records_are_writable_views_into_the_frame():
    frame = _frame(9, {"acks": 1, "timeout": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"abcdef"}]}]})
    _, offset = parse_request_header(frame)
    view = decode_produce_request(9, frame, offset).topic_data[0].partition_data[0].records
    view[0:1] = b"X"
    assert b"Xbcdef" in frame


@pytest.mark.parametrize("cut", [1, 5, 12])
def test_truncated_requests_are_protocol_errors(cut):
    frame = _frame(7, {"acks": 1, "timeout": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b"abcdef"}]}]})
    _, offset = parse_request_header(frame)
    with pytest.raises(ProtocolError):
        decode_produce_request(7, frame[:-cut], offset)


@pytest.mark.parametrize("version", [2, 3, 9])
@pytest.mark.parametrize("where", ["topic_data", "partition_data"])
def test_a_null_array_is_a_malformed_request(version, where):
    """topic_data and partition_data are never nullable; records are (a null record set)."""
    import struct

    flexible = version >= 9
    null = b"\0" if flexible else struct.pack(">i", -1)
    one = b"\x02" if flexible else struct.pack(">i", 1)
    name = b"\x02t" if flexible else b"\0\x01t"
    tags = b"\0" if flexible else b""
    body = (b"\xff\xff" if version < 9 and version >= 3 else b"\0" if flexible else b"") + struct.pack(">hi", 1, 5)
    head = b"\x00\x00" + version.to_bytes(2, "big") + b"\x00\x00\x00\x07\xff\xff" + tags
    partition = struct.pack(">i", 0) + null + tags  # null records: allowed
    valid = head + body + one + name + one + partition + tags + tags
    assert decode_produce_request(version, bytearray(valid), len(head)).topic_data[0].partition_data[0].records is None
    nulled = head + body + (null if where == "topic_data" else one + name + null + tags) + tags
    with pytest.raises(ProtocolError, match="not nullable"):
        decode_produce_request(version, bytearray(nulled), len(head))
