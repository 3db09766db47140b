"""The old versions of client APIs (Kafka 3.9's, removed in Kafka 4 and so absent from kio) go through
schema_codec with kio's field names: handlers read them as they read kio's entities."""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import given, settings, strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from kbroker.wire.fetch_response import RecordBytes, encode_fetch_response
from kbroker.wire.interbroker import OLD_VERSIONS
from kbroker.wire.protocol import (
    ProtocolError,
    RequestHeader,
    decode_request,
    encode_request,
    known_versions,
    old_versions,
    parse_request_header,
    request_class,
    response_class,
)
from kbroker.wire.schema_codec import _version_range, load_schema, message_codec, to_snake_case

CASES = [(key, old.message + kind, kind) for key, old in OLD_VERSIONS.items() for kind in ("Request", "Response")]


def _kio_names(cls, path="") -> set[str]:
    names = set()
    for f in dataclasses.fields(cls):
        names.add(path + f.name)
        kind = classify_field(f)
        if isinstance(kind, (EntityField, EntityTupleField)):
            names |= _kio_names(kind.type_, path + f.name + ".")
    return names


def _schema_names(name: str, version: int) -> set[str]:
    schema = load_schema(name)
    common = {s["name"]: s["fields"] for s in schema.get("commonStructs", ())}

    def walk(fields, path):
        out = set()
        for f in fields:
            if version not in _version_range(f["versions"]):
                continue
            snake = to_snake_case(f["name"], kio_names=True)
            out.add(path + snake)
            inner = f.get("fields") or common.get(f["type"].removeprefix("[]"))
            if inner:
                out |= walk(inner, path + snake + ".")
        return out

    return walk(schema["fields"], "")


@pytest.mark.parametrize("key,name,kind", CASES)
def test_kio_names_at_the_first_version_kio_has(key, name, kind):
    """Compiled at kio's first version, the 3.9 definition names every field (nested too) as kio does."""
    version = known_versions(key).start
    kio_cls = (load_request_schema if kind == "Request" else load_response_schema)(key, version)
    assert _schema_names(name, version) == _kio_names(kio_cls)
    codec = message_codec(name, version, kio_names=True)
    assert {f.name for f in dataclasses.fields(codec.cls)} == {f.name for f in dataclasses.fields(kio_cls)}


@pytest.mark.parametrize("key", sorted(OLD_VERSIONS))
def test_the_old_versions_are_those_below_kio_down_to_kafka_39s(key):
    old = OLD_VERSIONS[key]
    first_39 = _version_range(load_schema(old.message + "Request")["validVersions"]).start
    assert old.versions == range(first_39, known_versions(key).start) == old_versions(key)
    assert first_39 == 0
    for version in old.versions:  # all classic (non-flexible), routed to the schema codec
        for cls in (request_class(key, version), response_class(key, version)):
            assert cls.__schema_struct__ is not None and not cls.__flexible__


def test_headers_of_old_versions_parse_as_non_flexible():
    frame = encode_request(1, 2, 9, "c", {"replica_id": -1, "max_wait": 5, "min_bytes": 1, "topics": []})[4:]
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(1, 2, 9, "c", False)
    request = decode_request(header, frame, offset)
    assert (request.max_wait, request.min_bytes, request.topics) == (5, 1, ())
    assert not hasattr(request, "isolation_level")  # the version's fields only, as kio's classes
    with pytest.raises(ProtocolError):
        decode_request(header, frame[:-2], offset)


_partition = st.fixed_dictionaries({
    "partition_index": st.integers(0, 2**31 - 1), "error_code": st.sampled_from([0, 1, 3, 35, 76]),
    "high_watermark": st.integers(-1, 2**63 - 1), "last_stable_offset": st.integers(-1, 2**40),
    "log_start_offset": st.integers(-1, 2**40), "aborted_transactions": st.none(),
    "records": st.one_of(st.none(), st.binary(max_size=50))})
_response = st.fixed_dictionaries({
    "throttle_time": st.integers(0, 2**31 - 1),
    "responses": st.lists(st.fixed_dictionaries({"topic": st.text(max_size=10),
                                                 "partitions": st.lists(_partition, max_size=3)}), max_size=3)})


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([0, 1, 2, 3]), _response)
def test_fetch_response_v0_to_v3_is_kafka_39s_layout(version, data):
    """The hand-written encoder (the one the hot path uses) against the codec compiled from 3.9's JSON."""
    chunks = encode_fetch_response(version, 77, data)
    frame = b"".join(chunks)
    codec = message_codec("FetchResponse", version, kio_names=True)
    expected = struct.pack(">i", 77) + codec.encode({
        "throttle_time": data["throttle_time"],
        "responses": [{"topic": t["topic"], "partitions": [
            {k: p[k] for k in ("partition_index", "error_code", "high_watermark", "records")}
            for p in t["partitions"]]} for t in data["responses"]]})
    assert frame == struct.pack(">i", len(expected)) + expected


def test_fetch_response_v2_with_in_memory_records():
    data = {"throttle_time": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5,
         "log_start_offset": 0, "aborted_transactions": None, "records": [RecordBytes(b"abc")]}]}]}
    frame = b"".join(encode_fetch_response(2, 1, data))
    decoded, _ = message_codec("FetchResponse", 2, kio_names=True).decode(frame[8:])
    assert decoded.responses[0].partitions[0].records == b"abc"


def test_bytes_fields_round_trip_and_are_bounded():
    codec = message_codec("FetchResponse", 0, kio_names=True)
    body = codec.encode({"responses": [{"topic": "t", "partitions": [
        {"partition_index": 1, "error_code": 0, "high_watermark": 3, "records": None}]}]})
    assert codec.decode(body)[0].responses[0].partitions[0].records is None
    forged = body[:-4] + struct.pack(">i", 1000)  # records claiming more bytes than follow
    with pytest.raises(ProtocolError):
        codec.decode(forged)
