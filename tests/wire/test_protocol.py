import io
import struct
import uuid

import pytest
from hypothesis import given, strategies as st

from kbroker.wire.protocol import (
    ProtocolError,
    RequestHeader,
    build,
    build_response,
    decode_request,
    encode_response,
    parse_request_header,
    request_class,
)
from kio.serial import entity_writer


def _request_bytes(api_key, version, correlation_id, client_id, body_entity, flexible):
    out = io.BytesIO()
    out.write(struct.pack(">hhi", api_key, version, correlation_id))
    if client_id is None:
        out.write(struct.pack(">h", -1))
    else:
        raw = client_id.encode()
        out.write(struct.pack(">h", len(raw)) + raw)
    if flexible:
        out.write(b"\0")
    entity_writer(type(body_entity))(out, body_entity)
    return out.getvalue()


@given(st.integers(-(2**31), 2**31 - 1), st.one_of(st.none(), st.text(max_size=40)),
       st.sampled_from([0, 4, 9, 12]))
def test_metadata_request_round_trip(correlation_id, client_id, version):
    cls = request_class(3, version)
    body = build(cls, {"topics": [{"name": "a", "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": True})
    frame = _request_bytes(3, version, correlation_id, client_id, body, cls.__flexible__)
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(3, version, correlation_id, client_id, bool(cls.__flexible__))
    decoded = decode_request(header, frame, offset)
    assert [t.name for t in decoded.topics] == ["a"]


def test_client_id_stays_a_classic_string_in_header_v2():
    cls = request_class(18, 3)
    body = build(cls, {"client_software_name": "x", "client_software_version": "1"})
    frame = _request_bytes(18, 3, 9, "my-client", body, True)
    header, offset = parse_request_header(frame)
    assert header.client_id == "my-client" and header.flexible
    assert decode_request(header, frame, offset).client_software_name == "x"


@pytest.mark.parametrize("frame", [b"", b"\x00\x03", b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05ab",
                                   b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xfe"])
def test_truncated_or_bad_headers_are_protocol_errors(frame):
    with pytest.raises(ProtocolError):
        parse_request_header(frame)


def test_garbage_body_is_a_protocol_error():
    frame = struct.pack(">hhih", 3, 12, 1, -1) + b"\x00" + b"\xff" * 7
    header, offset = parse_request_header(frame)
    with pytest.raises(ProtocolError):
        decode_request(header, frame, offset)


def test_api_versions_response_header_is_always_v0():
    header = RequestHeader(18, 3, 77, None, True)
    data = encode_response(header, build_response(header, {"api_keys": [{"api_key": 18, "min_version": 0,
                                                                           "max_version": 4}]}))
    size, correlation_id = struct.unpack_from(">ii", data)
    assert size == len(data) - 4 and correlation_id == 77
    assert data[8:10] == b"\x00\x00"  # error_code straight after the correlation id: no tagged-field byte


def test_flexible_response_header_has_tagged_fields():
    header = RequestHeader(3, 12, 5, None, True)
    data = encode_response(header, build_response(header, {"brokers": [], "topics": []}))
    assert data[8] == 0  # empty tagged fields of response header v1


def test_build_fits_one_description_to_every_version():
    described = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time": -1, "log_start_offset": 0}]}]}
    for version in (3, 7, 9, 11):
        response = build_response(RequestHeader(0, version, 1, None, version >= 9), described)
        partition = response.responses[0].partition_responses[0]
        assert partition.base_offset == 42 and partition.log_append_time is None
