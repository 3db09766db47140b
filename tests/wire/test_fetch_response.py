import uuid
from dataclasses import dataclass

from hypothesis import given, settings, strategies as st
from kip951 import endpoints, leaders

from kbroker.wire.fetch_response import RecordBytes, encode_fetch_response
from kbroker.wire.protocol import RequestHeader, build_response, encode_response


@dataclass(frozen=True)
class Range:
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


partitions = st.lists(st.fixed_dictionaries({
    "partition_index": st.integers(0, 2**31 - 1),
    "error_code": st.sampled_from([0, 1, 3, 6]),
    "high_watermark": st.integers(-1, 2**62),
    "last_stable_offset": st.integers(-1, 2**62),
    "log_start_offset": st.integers(-1, 2**62),
    "aborted_transactions": st.one_of(st.none(), st.lists(st.fixed_dictionaries(
        {"producer_id": st.integers(0, 2**62), "first_offset": st.integers(0, 2**62)}), max_size=3)),
    "preferred_read_replica": st.just(-1),
    "records": st.one_of(st.none(), st.binary(max_size=300)),
}), max_size=3)
topics = st.lists(st.fixed_dictionaries({
    "topic": st.text(min_size=1, max_size=20), "topic_id": st.uuids(), "partitions": partitions}), max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.integers(4, 17), st.integers(-(2**31), 2**31 - 1), topics,
       st.integers(0, 1000), st.sampled_from([0, 70]), st.integers(0, 2**31 - 1))
def test_matches_kio_byte_for_byte(version, correlation_id, responses, throttle, error, session):
    data = {"throttle_time": throttle, "error_code": error, "session_id": session, "responses": responses}
    header = RequestHeader(1, version, correlation_id, None, version >= 12)
    expected = encode_response(header, build_response(header, data))
    assert b"".join(encode_fetch_response(version, correlation_id, data)) == expected


def test_file_ranges_stay_out_of_the_bytes():
    ranges = [Range(b"a" * 10), Range(b""), Range(b"b" * 5)]
    data = {"responses": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [{
        "partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1,
        "log_start_offset": 0, "aborted_transactions": None, "records": ranges}]}]}
    for version in (4, 11, 12, 17):
        chunks = encode_fetch_response(version, 9, data)
        assert [c for c in chunks if isinstance(c, Range)] == [ranges[0], ranges[2]]
        flat = b"".join(c.data if isinstance(c, Range) else c for c in chunks)
        with_bytes = dict(data, responses=[dict(data["responses"][0], partitions=[dict(
            data["responses"][0]["partitions"][0], records=b"a" * 10 + b"b" * 5)])])
        assert flat == b"".join(encode_fetch_response(version, 9, with_bytes))


def test_record_bytes_among_file_ranges_are_written_in_place():
    """A filtered view's rebuilt batches (RecordBytes) sit between ranges: inlined, in order."""
    ranges = [Range(b"a" * 10), RecordBytes(b"xyz"), Range(b"b" * 5)]
    data = {"responses": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [{
        "partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1,
        "log_start_offset": 0, "aborted_transactions": None, "records": ranges}]}]}
    chunks = encode_fetch_response(12, 9, data)
    assert [c for c in chunks if isinstance(c, Range)] == [ranges[0], ranges[2]]
    flat = b"".join(c.data if isinstance(c, Range) else c for c in chunks)
    with_bytes = dict(data, responses=[dict(data["responses"][0], partitions=[dict(
        data["responses"][0]["partitions"][0], records=b"a" * 10 + b"xyz" + b"b" * 5)])])
    assert flat == b"".join(encode_fetch_response(12, 9, with_bytes))




@st.composite
def responses_with_leaders(draw):
    """KIP-951: some partitions name their current leader, and the response the leaders' endpoints."""
    responses = draw(topics)
    for topic in responses:
        for p in topic["partitions"]:
            if draw(st.booleans()):
                p["current_leader"] = draw(leaders)
    data = {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}
    if draw(st.booleans()):
        data["node_endpoints"] = draw(endpoints)
    return data


@settings(max_examples=150, deadline=None)
@given(st.integers(12, 17), st.integers(-(2**31), 2**31 - 1), responses_with_leaders())
def test_current_leader_and_node_endpoints_match_kio(version, correlation_id, data):
    header = RequestHeader(1, version, correlation_id, None, True)
    expected = encode_response(header, build_response(header, data))
    assert b"".join(encode_fetch_response(version, correlation_id, data)) == expected
