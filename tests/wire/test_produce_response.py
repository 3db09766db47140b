import struct

from hypothesis import given, settings, strategies as st
from kip951 import endpoints, leaders

from kbroker.wire.produce_response import encode_produce_response
from kbroker.wire.protocol import RequestHeader, build_response, encode_response

responses = st.fixed_dictionaries({
    "throttle_time": st.integers(0, 10_000),
    "responses": st.lists(st.fixed_dictionaries({
        "name": st.text(max_size=20),
        "partition_responses": st.lists(st.fixed_dictionaries({
            "index": st.integers(0, 2**31 - 1), "error_code": st.sampled_from([0, 2, 3, 10, 45]),
            "base_offset": st.integers(-1, 2**62), "log_append_time": st.integers(-1, 2**42),
            "log_start_offset": st.integers(-1, 2**62),
            "record_errors": st.lists(st.fixed_dictionaries({
                "batch_index": st.integers(0, 100),
                "batch_index_error_message": st.one_of(st.none(), st.text(max_size=10))}), max_size=2),
            "error_message": st.one_of(st.none(), st.text(max_size=30))}), max_size=4)}), max_size=3),
})


@st.composite
def responses_with_leaders(draw):
    """KIP-951: some partitions name their current leader, and the response the leaders' endpoints."""
    data = draw(responses)
    for topic in data["responses"]:
        for p in topic["partition_responses"]:
            if draw(st.booleans()):
                p["current_leader"] = draw(leaders)
    if draw(st.booleans()):
        data["node_endpoints"] = draw(endpoints)
    return data


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 11), st.integers(-(2**31), 2**31 - 1), responses)
def test_matches_kio_byte_for_byte(version, correlation_id, data):
    header = RequestHeader(0, version, correlation_id, None, version >= 9)
    assert encode_produce_response(version, correlation_id, data) == encode_response(header, build_response(header, data))


@settings(max_examples=200, deadline=None)
@given(st.integers(10, 11), st.integers(-(2**31), 2**31 - 1), responses_with_leaders())
def test_current_leader_and_node_endpoints_match_kio(version, correlation_id, data):
    header = RequestHeader(0, version, correlation_id, None, version >= 9)
    assert encode_produce_response(version, correlation_id, data) == encode_response(header, build_response(header, data))


def test_v0_to_v2_layout():
    data = {"responses": [{"name": "t", "partition_responses": [
        {"index": 3, "error_code": 0, "base_offset": 7, "log_append_time": -1, "log_start_offset": 0}]}],
        "throttle_time": 5}
    body = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iihq", 1, 3, 0, 7)
    frames = {v: encode_produce_response(v, 9, data) for v in (0, 1, 2)}
    assert frames[0] == struct.pack(">ii", 4 + len(body), 9) + body
    assert frames[1] == struct.pack(">ii", 8 + len(body), 9) + body + struct.pack(">i", 5)
    assert frames[2] == struct.pack(">ii", 16 + len(body), 9) + body + struct.pack(">qi", -1, 5)
