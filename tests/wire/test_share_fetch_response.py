"""The hand-written ShareFetch response encoder (v1-2) against kio byte for byte, and file ranges
kept as chunks (sent with sendfile) with the same bytes as records given inline."""

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kip951 import endpoints, leaders
from test_fetch_response import (
    Range,  # a file range stand-in, as the Fetch encoder's tests use
)

from kbroker.wire.fetch_response import RecordBytes
from kbroker.wire.protocol import RequestHeader, build_response, encode_response
from kbroker.wire.share_fetch_response import encode_response as encode_share_fetch

texts = st.one_of(st.none(), st.text(max_size=20))
acquired = st.lists(st.fixed_dictionaries({"first_offset": st.integers(0, 2**62), "last_offset": st.integers(0, 2**62),
                                           "delivery_count": st.integers(0, 2**15 - 1)}), max_size=3)
partitions = st.lists(st.fixed_dictionaries({
    "partition_index": st.integers(0, 2**31 - 1), "error_code": st.sampled_from([0, 6, 121]),
    "error_message": texts, "acknowledge_error_code": st.sampled_from([0, 121]), "acknowledge_error_message": texts,
    "current_leader": leaders, "records": st.binary(max_size=300), "acquired_records": acquired}), max_size=3)
topics = st.lists(st.fixed_dictionaries({"topic_id": st.uuids(), "partitions": partitions}), max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([1, 2]), st.integers(-(2**31), 2**31 - 1), topics, st.integers(0, 1000),
       st.sampled_from([0, 125]), texts, st.integers(0, 2**31 - 1), st.one_of(st.just([]), endpoints))
def test_matches_kio_byte_for_byte(version, correlation_id, responses, throttle, error, message, lock, nodes):
    data = {"throttle_time": throttle, "error_code": error, "error_message": message,
            "acquisition_lock_timeout": lock, "responses": responses, "node_endpoints": nodes}
    header = RequestHeader(78, version, correlation_id, None, True)
    expected = encode_response(header, build_response(header, data))
    assert b"".join(encode_share_fetch(version, correlation_id, data)) == expected


def test_file_ranges_stay_chunks_with_record_bytes_in_place():
    pieces = [Range(b"a" * 10), RecordBytes(b"v" * 3), Range(b"b" * 5)]
    part = {"partition_index": 0, "error_code": 0, "acknowledge_error_code": 0,
            "current_leader": {"leader_id": 1, "leader_epoch": 2},
            "acquired_records": [{"first_offset": 0, "last_offset": 4, "delivery_count": 1}]}
    data = {"acquisition_lock_timeout": 30000, "node_endpoints": [],
            "responses": [{"topic_id": uuid.uuid4(), "partitions": [dict(part, records=pieces)]}]}
    chunks = encode_share_fetch(2, 9, data)
    assert [c for c in chunks if isinstance(c, Range)] == [pieces[0], pieces[2]]
    flat = b"".join(c.data if isinstance(c, Range) else c for c in chunks)
    inline = dict(data, responses=[dict(data["responses"][0], partitions=[dict(part, records=b"a" * 10 + b"vvv" + b"b" * 5)])])
    assert flat == b"".join(encode_share_fetch(2, 9, inline))
