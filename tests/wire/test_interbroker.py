"""The ZooKeeper-mode inter-broker APIs (LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8,
ControlledShutdown v3) through protocol's functions, and the schema-driven codec under them: round
trips, bytes built by hand from the JSON definitions, bytes Kafka 3.9's own message classes write,
flexible headers, and garbage / truncated / forged input."""

import dataclasses
import struct
import time
import tracemalloc
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kbroker.errors import ErrorCode
from kbroker.wire import interbroker
from kbroker.wire.protocol import (
    ProtocolError,
    RequestHeader,
    api_name,
    build,
    build_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    known_versions,
    parse_request_header,
    request_class,
    response_class,
)
from kbroker.wire.schema_codec import load_schema, message_codec, to_snake_case, valid_versions

TOPIC_ID = uuid.UUID("00010203-0405-0607-0809-0a0b0c0d0e0f")
MESSAGES = [api.message + kind for api in interbroker.APIS.values() for kind in ("Request", "Response")]

LEADER_AND_ISR = {
    "controller_id": 1, "is_k_raft_controller": False, "controller_epoch": 5, "broker_epoch": 4242, "type_": 2,
    "topic_states": [
        {"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": [
            {"partition_index": p, "controller_epoch": 5, "leader": 1 + p % 3, "leader_epoch": 3, "isr": [1, 2, 3],
             "partition_epoch": 9, "replicas": [1, 2, 3], "adding_replicas": [], "removing_replicas": [],
             "is_new": p == 0, "leader_recovery_state": 0} for p in range(12)]},
        {"topic_name": "payments", "topic_id": uuid.uuid4(), "partition_states": [
            {"partition_index": 0, "controller_epoch": 4, "leader": 2, "leader_epoch": 0, "isr": [2],
             "partition_epoch": 1, "replicas": [2, 3], "adding_replicas": [3], "removing_replicas": [4]}]},
    ],
    "live_leaders": [{"broker_id": b, "host_name": f"broker-{b}.example", "port": 9092} for b in (1, 2, 3)],
}
LEADER_AND_ISR_RESPONSE = {"error_code": 0, "topics": [
    {"topic_id": TOPIC_ID, "partition_errors": [{"partition_index": p, "error_code": 0} for p in range(12)]}]}
STOP_REPLICA = {
    "controller_id": 1, "controller_epoch": 5, "broker_epoch": 4242, "topic_states": [
        {"topic_name": "orders", "partition_states": [
            {"partition_index": 0, "leader_epoch": 3, "delete_partition": False},
            {"partition_index": 1, "leader_epoch": -2, "delete_partition": True}]}]}
STOP_REPLICA_RESPONSE = {"error_code": 0, "partition_errors": [
    {"topic_name": "orders", "partition_index": 0, "error_code": 0},
    {"topic_name": "orders", "partition_index": 1, "error_code": ErrorCode.kafka_storage_error}]}
UPDATE_METADATA = {
    "controller_id": 1, "controller_epoch": 5, "broker_epoch": 4242, "type_": 1, "topic_states": [
        {"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": [
            {"partition_index": p, "controller_epoch": 5, "leader": -1 if p == 2 else 1, "leader_epoch": 7,
             "isr": [1, 2], "zk_version": 11, "replicas": [1, 2, 3], "offline_replicas": [3] if p == 2 else []}
            for p in range(3)]}],
    "live_brokers": [
        {"id_": 1, "endpoints": [{"port": 9092, "host": "b1", "listener": "PLAINTEXT", "security_protocol": 0}],
         "rack": "rack-a"},
        {"id_": 2, "endpoints": [{"port": 9093, "host": "b2", "listener": "PLAINTEXT", "security_protocol": 0}],
         "rack": None}]}
CONTROLLED_SHUTDOWN = {"broker_id": 2, "broker_epoch": 1234567890123}
CONTROLLED_SHUTDOWN_RESPONSE = {"error_code": 0, "remaining_partitions": [
    {"topic_name": "orders", "partition_index": 0}, {"topic_name": "orders", "partition_index": 1}]}

ROUND_TRIPS = [
    (interbroker.LEADER_AND_ISR, LEADER_AND_ISR, LEADER_AND_ISR_RESPONSE),
    (interbroker.STOP_REPLICA, STOP_REPLICA, STOP_REPLICA_RESPONSE),
    (interbroker.UPDATE_METADATA, UPDATE_METADATA, {"error_code": ErrorCode.stale_controller_epoch}),
    (interbroker.CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_RESPONSE),
]

# Bodies as Kafka 3.9's generated message classes (LeaderAndIsrRequestData, ...) write them.
KAFKA_BODIES = {
    ("LeaderAndIsrRequest", 7): "00000001010000000500000000000010920202076f7264657273000102030405060708090a0b0c0d0e0f"
    "02000000020000000500000001000000030300000001000000020000000904000000010000000200000003020000000302000000040101"
    "000002000000010962726f6b65722d31000023840000",
    ("LeaderAndIsrResponse", 7): "000002000102030405060708090a0b0c0d0e0f02000000020006000000",
    ("StopReplicaRequest", 4): "000000030100000008000000000000004d0202740300000004fffffffe010000000005ffffffff00000000",
    ("StopReplicaResponse", 4): "00000202740000000400030000",
    ("UpdateMetadataRequest", 8): "000000010000000005000000000000006302076f7264657273000102030405060708090a0b0c0d0e0f"
    "02000000010000000500000002000000070300000002000000030000000b04000000010000000200000003020000000100000300000002"
    "02000023850368320a504c41494e54455854000000077261636b2d61000000000301000001000102",
    ("UpdateMetadataResponse", 8): "000000",
    ("ControlledShutdownRequest", 3): "000000020000011f71fb04cb00",
    ("ControlledShutdownResponse", 3): "000003076f72646572730000000000076f7264657273000000010000",
    # classic (non-flexible) versions: int16 strings, int32 arrays, no tagged fields
    ("LeaderAndIsrRequest", 1): "00000001000000050000000100066f726465727300000002000000050000000100000003000000020000"
    "0001000000020000000900000003000000010000000200000003010000000100000001000862726f6b65722d3100002384",
    ("StopReplicaRequest", 1): "0000000300000008000000000000004d0100000001000174000000020000000400000005",
}


def _frame_body(frame: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    return frame[4:]


def _plain(value):
    """A decoded message as nested dicts and lists."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def test_the_table_is_what_protocol_reports():
    assert {k: api.version for k, api in interbroker.APIS.items()} == {4: 7, 5: 4, 6: 8, 7: 3}
    assert [api_name(k) for k in (4, 5, 6, 7)] == ["leader_and_isr", "stop_replica", "update_metadata",
                                                 "controlled_shutdown"]
    for key, api in interbroker.APIS.items():
        assert known_versions(key) == range(api.version, api.version + 1) == range(interbroker.version(key),
                                                                                   interbroker.version(key) + 1)
        assert api.version == valid_versions(api.message + "Request")[-1]  # Kafka 3.9's newest
        assert request_class(key, api.version).__flexible__ and response_class(key, api.version).__flexible__
        # a failed request is answered with its code in the top-level error field (api/dispatch.py)
        assert "error_code" in response_class(key, api.version).__dataclass_fields__
    assert api_name(3) == "metadata" and known_versions(3).start == 0  # kio's APIs, as before


@pytest.mark.parametrize("name, snake", [("isKRaftController", "is_k_raft_controller"), ("ZkVersion", "zk_version"),
                                         ("ISRReplicas", "isr_replicas"), ("V3AndBelow", "v3_and_below"),
                                         ("WhatIsQ", "what_is_q"), ("Type", "type_"), ("Id", "id_"),
                                         ("V0Host", "v0_host"), ("OfflineReplicas", "offline_replicas")])
def test_field_names_are_spelt_as_kio_spells_them(name, snake):
    assert to_snake_case(name) == snake


@pytest.mark.parametrize("api_key, request_data, response_data", ROUND_TRIPS)
def test_request_and_response_round_trips(api_key, request_data, response_data):
    version = interbroker.version(api_key)
    frame = _frame_body(encode_request(api_key, version, 77, "controller-1", request_data))
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(api_key, version, 77, "controller-1", True)
    request = decode_request(header, frame, offset)
    assert type(request) is request_class(api_key, version)
    assert _plain(request) == _plain(build(request_class(api_key, version), request_data))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.broker_epoch = 9  # type: ignore[misc]

    response = build_response(header, response_data)
    out = _frame_body(encode_response(header, response))
    assert out[4] == 0  # response header v1: an empty tagged fields section after the correlation id
    correlation_id, decoded = decode_response(api_key, version, out)
    assert correlation_id == 77 and decoded == response
    assert decoded.error_code == response_data["error_code"]


def test_a_handler_reads_leader_and_isr_by_attribute():
    frame = _frame_body(encode_request(4, 7, 1, "c", LEADER_AND_ISR))
    header, offset = parse_request_header(frame)
    request = decode_request(header, frame, offset)
    assert (request.controller_id, request.controller_epoch, request.broker_epoch, request.type_) == (1, 5, 4242, 2)
    orders, payments = request.topic_states
    assert orders.topic_name == "orders" and orders.topic_id == TOPIC_ID
    first = orders.partition_states[0]
    assert (first.partition_index, first.leader, first.leader_epoch, first.isr, first.partition_epoch,
            first.replicas, first.is_new) == (0, 1, 3, (1, 2, 3), 9, (1, 2, 3), True)
    assert payments.partition_states[0].adding_replicas == (3,)
    assert payments.partition_states[0].leader_recovery_state == 0  # absent from the dict: the default
    assert [b.host_name for b in request.live_leaders] == ["broker-1.example", "broker-2.example", "broker-3.example"]


def _cstr(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def _i32s(*values: int) -> bytes:
    return bytes([len(values) + 1]) + struct.pack(f">{len(values)}i", *values)


def test_leader_and_isr_v7_bytes_built_by_hand():
    data = {"controller_id": 1, "controller_epoch": 5, "broker_epoch": 4242, "type_": 2, "topic_states": [
        {"topic_name": "t", "topic_id": TOPIC_ID, "partition_states": [
            {"partition_index": 0, "controller_epoch": 5, "leader": 2, "leader_epoch": 3, "isr": [2, 1],
             "partition_epoch": 9, "replicas": [2, 1], "adding_replicas": [1], "is_new": True,
             "leader_recovery_state": 1}]}],
        "live_leaders": [{"broker_id": 2, "host_name": "h2", "port": 9093}]}
    partition = (struct.pack(">iiii", 0, 5, 2, 3) + _i32s(2, 1) + struct.pack(">i", 9) + _i32s(2, 1) + _i32s(1)
                 + _i32s() + b"\x01" + b"\x01" + b"\x00")
    body = (struct.pack(">i?iqb", 1, False, 5, 4242, 2)
            + b"\x02" + _cstr("t") + TOPIC_ID.bytes + b"\x02" + partition + b"\x00"
            + b"\x02" + struct.pack(">i", 2) + _cstr("h2") + struct.pack(">i", 9093) + b"\x00"
            + b"\x00")
    head = struct.pack(">hhih", 4, 7, 42, 10) + b"controller" + b"\x00"  # request header v2
    frame = encode_request(4, 7, 42, "controller", data)
    assert frame == struct.pack(">i", len(head) + len(body)) + head + body
    assert message_codec("LeaderAndIsrRequest", 7).decode(body) == (build(request_class(4, 7), data), len(body))


def test_long_strings_and_arrays_take_multi_byte_varints():
    name = "é" * 100  # 200 bytes of UTF-8: compact length 201 = varint c9 01
    data = {"error_code": 0, "remaining_partitions": [{"topic_name": name, "partition_index": p} for p in range(130)]}
    element = b"\xc9\x01" + name.encode() + b"%s\x00"
    expected = (b"\x00\x00" + b"\x83\x01"  # 131 = 130 elements + 1
                + b"".join(element % struct.pack(">i", p) for p in range(130)) + b"\x00")
    codec = message_codec("ControlledShutdownResponse", 3)
    assert codec.encode(data) == expected
    last = codec.decode(expected)[0].remaining_partitions[129]
    assert (last.topic_name, last.partition_index) == (name, 129)


def test_update_metadata_v8_type_travels_as_a_tagged_field():
    codec = message_codec("UpdateMetadataRequest", 8)
    fixed = struct.pack(">i?iq", 1, False, 5, -1) + b"\x01" + b"\x01"  # no topics, no brokers
    assert codec.encode({"controller_id": 1, "controller_epoch": 5}) == fixed + b"\x00"  # type_ 0 is not written
    tagged = fixed + b"\x01" + b"\x00\x01\x02"  # one tagged field: tag 0, 1 byte, Full (2)
    assert codec.encode({"controller_id": 1, "controller_epoch": 5, "type_": 2}) == tagged
    assert codec.decode(tagged)[0].type_ == 2
    unknown = fixed + b"\x02" + b"\x00\x01\x01" + b"\x07\x03abc"  # plus a tag this version does not know
    assert codec.decode(unknown) == (codec.build({"controller_id": 1, "controller_epoch": 5, "type_": 1}), len(unknown))
    with pytest.raises(ProtocolError):
        codec.decode(fixed + b"\x01" + b"\x00\x02\x02\x00")  # tag 0 says 2 bytes, an int8 fills 1


@pytest.mark.parametrize("name, version", sorted(KAFKA_BODIES))
def test_kafka_written_bodies_decode_and_encode_back_byte_for_byte(name, version):
    body = bytes.fromhex(KAFKA_BODIES[name, version])
    codec = message_codec(name, version)
    message, end = codec.decode(body)
    assert end == len(body)
    assert codec.encode(_plain(message)) == body
    assert codec.encode(message) == body


def _kafka(name: str, version: int):
    return message_codec(name, version).decode(bytes.fromhex(KAFKA_BODIES[name, version]))[0]


def test_kafka_written_values():
    request = _kafka("UpdateMetadataRequest", 8)
    state = request.topic_states[0].partition_states[0]
    assert (request.type_, request.broker_epoch, state.zk_version, state.offline_replicas) == (2, 99, 11, (1,))
    first, second = request.live_brokers
    endpoint = first.endpoints[0]
    assert (first.id_, first.rack, endpoint.listener, endpoint.port) == (2, "rack-a", "PLAINTEXT", 9093)
    assert (second.id_, second.rack, second.endpoints) == (3, None, ())
    stop = _kafka("StopReplicaRequest", 4)
    assert [(p.partition_index, p.leader_epoch, p.delete_partition) for p in stop.topic_states[0].partition_states] == [
        (4, -2, True), (5, -1, False)]
    classic = _kafka("LeaderAndIsrRequest", 1)
    assert classic.ungrouped_partition_states[0].topic_name == "orders"


def test_flexible_headers_with_tagged_fields_are_skipped():
    body = message_codec("ControlledShutdownRequest", 3).encode(CONTROLLED_SHUTDOWN)
    assert body == struct.pack(">iq", 2, 1234567890123) + b"\x00"
    header_tags = b"\x02" + b"\x00\x02zz" + b"\x05\x00"  # two tagged fields in request header v2
    frame = struct.pack(">hhih", 7, 3, 5, -1) + header_tags + body
    header, offset = parse_request_header(frame)
    assert header == RequestHeader(7, 3, 5, None, True) and offset == len(frame) - len(body)
    assert decode_request(header, frame, offset).broker_epoch == 1234567890123
    response = message_codec("ControlledShutdownResponse", 3).encode(CONTROLLED_SHUTDOWN_RESPONSE)
    corr, decoded = decode_response(7, 3, struct.pack(">i", 5) + b"\x01\x03\x01x" + response)
    assert corr == 5 and [p.partition_index for p in decoded.remaining_partitions] == [0, 1]


def test_failed_request_gets_its_error_code():
    for key, api in interbroker.APIS.items():
        header = RequestHeader(key, api.version, 3, "c", True)
        out = encode_response(header, build_response(header, {"error_code": ErrorCode.not_controller}))
        assert decode_response(key, api.version, _frame_body(out))[1].error_code == ErrorCode.not_controller


def test_keys_no_version_has_are_refused_and_other_versions_keys_ignored():
    with pytest.raises(ValueError, match=r"no field \['id'\]"):
        encode_request(6, 8, 1, "c", {"live_brokers": [{"id": 1}]})  # kio's spelling is id_
    body = message_codec("UpdateMetadataRequest", 8).encode({"ungrouped_partition_states": [{}], "live_brokers": [
        {"id_": 1, "v0_host": "old"}]})
    assert message_codec("UpdateMetadataRequest", 8).decode(body)[0].live_brokers[0].id_ == 1


def test_every_version_of_every_message_compiles_and_round_trips_its_defaults():
    for name in MESSAGES:
        assert load_schema(name)["name"] == name
        for version in valid_versions(name):
            codec = message_codec(name, version)
            assert codec.decode(codec.encode({})) == (codec.build({}), len(codec.encode({})))


# -- random well-formed messages, any version ------------------------------------------------------

_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _in(version: int, spec: str | None) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    low, _, high = spec.partition("-")
    return int(low) <= version <= int(high or low)


def _values(schema: dict, kind: str, spec: dict, version: int):
    if kind.startswith("[]"):
        return st.lists(_values(schema, kind[2:], spec, version), max_size=4)
    if kind in _RANGES:
        bits = _RANGES[kind]
        return st.integers(-(1 << bits), (1 << bits) - 1)
    if kind == "bool":
        return st.booleans()
    if kind == "string":
        text = st.text(max_size=150)  # past 127 bytes, compact lengths take two varint bytes
        return st.one_of(st.none(), text) if _in(version, spec.get("nullableVersions")) else text
    if kind == "uuid":
        return st.one_of(st.none(), st.uuids().filter(lambda u: u.int != 0))
    common = {s["name"]: s for s in schema.get("commonStructs", ())}
    return _struct(schema, common[kind]["fields"] if kind in common else spec["fields"], version)


def _struct(schema: dict, fields: list, version: int):
    return st.fixed_dictionaries({to_snake_case(f["name"]): _values(schema, f["type"], f, version)
                                  for f in fields if _in(version, f["versions"])})


@st.composite
def _messages(draw):
    name = draw(st.sampled_from(MESSAGES))
    version = draw(st.sampled_from(valid_versions(name)))
    schema = load_schema(name)
    return name, version, draw(_struct(schema, schema["fields"], version))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_messages())
def test_random_messages_of_every_version_round_trip(message):
    name, version, data = message
    codec = message_codec(name, version)
    body = codec.encode(data)
    assert codec.decode(body) == (codec.build(data), len(body))
    assert codec.encode(codec.decode(body)[0]) == body


# -- malformed input: ProtocolError and nothing else, and no allocation by count --------------------

def _served_bodies():
    for key, request_data, response_data in ROUND_TRIPS:
        api = interbroker.APIS[key]
        for kind, data in (("Request", request_data), ("Response", response_data)):
            codec = message_codec(api.message + kind, api.version)
            yield codec, codec.encode(data)


SERVED_BODIES = list(_served_bodies())
KAFKA_WRITTEN = [(message_codec(name, version), bytes.fromhex(body)) for (name, version), body in KAFKA_BODIES.items()]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(sorted(interbroker.APIS)), st.binary(max_size=300))
def test_random_bytes_raise_only_protocol_error(key, body):
    version = interbroker.version(key)
    frame = struct.pack(">hhih", key, version, 1, 1) + b"c" + body
    try:
        header, offset = parse_request_header(frame)
        decode_request(header, frame, offset)
    except ProtocolError:
        pass
    try:
        decode_response(key, version, struct.pack(">i", 1) + body)
    except ProtocolError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(SERVED_BODIES))), st.data())
def test_truncated_and_mutated_messages_raise_only_protocol_error(index, data):
    codec, body = SERVED_BODIES[index]
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(ProtocolError):
        codec.decode(body[:cut])  # every field is needed up to the last byte
    mutated = bytearray(body)
    for position in data.draw(st.lists(st.integers(0, len(body) - 1), min_size=1, max_size=4)):
        mutated[position] = data.draw(st.integers(0, 255))
    try:
        codec.decode(bytes(mutated))
    except ProtocolError:
        pass


@pytest.mark.parametrize("huge", [b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x07", struct.pack(">i", 0x7FFFFFFF)])
def test_forged_counts_at_every_position_fail_without_allocating(huge):
    tracemalloc.start()
    try:
        for codec, body in SERVED_BODIES + KAFKA_WRITTEN:
            for position in range(len(body)):
                forged = body[:position] + huge + body[position + len(huge):]
                tracemalloc.reset_peak()
                try:
                    codec.decode(forged)
                except ProtocolError:
                    pass
                assert tracemalloc.get_traced_memory()[1] < 1 << 20, (codec.name, position)
    finally:
        tracemalloc.stop()


def test_a_forged_topic_count_is_refused():
    body = bytearray(message_codec("LeaderAndIsrRequest", 7).encode(LEADER_AND_ISR))
    assert body[18] == 3  # topic_states: 2 elements (after int32, bool, int32, int64, int8)
    forged = body[:18] + b"\xff\xff\xff\xff\x0f" + body[19:]  # now 2**32 - 2
    with pytest.raises(ProtocolError, match="cannot fit"):
        message_codec("LeaderAndIsrRequest", 7).decode(forged)


def test_a_few_thousand_partitions_decode_quickly():
    data = {"controller_id": 1, "topic_states": [
        {"topic_name": f"topic-{t}", "topic_id": uuid.uuid4(), "partition_states": [
            {"partition_index": p, "leader": 1, "isr": [1, 2, 3], "replicas": [1, 2, 3]} for p in range(50)]}
        for t in range(100)]}
    frame = _frame_body(encode_request(4, 7, 1, "c", data))
    started = time.perf_counter()
    header, offset = parse_request_header(frame)
    request = decode_request(header, frame, offset)
    assert sum(len(t.partition_states) for t in request.topic_states) == 5000
    assert time.perf_counter() - started < 2.0  # about 30 ms; generous for a loaded machine
