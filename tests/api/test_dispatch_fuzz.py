"""Garbage after a valid request header, for every served API and version: the broker answers
or asks for the connection to be closed (ProtocolError), and never fails otherwise."""

import functools
import struct

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st

from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.wire.protocol import ProtocolError

PARKING_APIS = {11, 14}  # JoinGroup/SyncGroup are answered when the group completes a rebalance


async def answer_or_park(broker, key: int, frame: bytearray) -> None:
    """The request is answered (or refused with ProtocolError) at once — or, for a join/sync,
    possibly parked waiting for other members, which is not an answer we can wait for here."""
    if key in PARKING_APIS:
        with trio.move_on_after(0.3):
            try:
                response = await handle_frame(broker, frame)
            except ProtocolError:
                return
            assert response is None or isinstance(response, (bytes, list))
        return
    with trio.fail_after(10):
        try:
            response = await handle_frame(broker, frame)
        except ProtocolError:
            return
        assert response is None or isinstance(response, (bytes, list))


# the single node's APIs (the inter-broker ones are refused outside a cluster, tested below)
SERVED = [(key, version) for key, spec in DISPATCH.items() if not spec.cluster_only
          for version in range(spec.min_version, spec.max_version + 1)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz")
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(path),  # every group protocol: share groups too
                                       "group.coordinator.rebalance.protocols": "classic,consumer,share"}),
               ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "t", num_partitions=2))
    yield b
    b.shutdown()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SERVED), st.binary(max_size=200), st.booleans())
def test_garbage_bodies_never_escape_as_crashes(broker, api, body, flexible_header):
    key, version = api
    header = struct.pack(">hhih", key, version, 1, 3) + b"abc" + (b"\x00" if flexible_header else b"")
    frame = bytearray(header + body)

    async def call():
        await answer_or_park(broker, key, frame)

    trio.run(call)


def _kio_served():
    from kbroker.wire.protocol import known_versions

    return [(k, v) for k, v in SERVED if v in known_versions(k)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(_kio_served()), st.data())
def test_well_formed_random_requests_are_answered(broker, api, data):
    """Valid encodings with arbitrary field values (negative ids, unknown topics, huge numbers):
    every one gets a response (or none for acks=0) and no handler raises."""
    import io

    from kio.serial import entity_writer

    from kbroker.wire.protocol import request_class

    key, version = api
    cls = request_class(key, version)
    try:
        request = data.draw(st.from_type(cls))
    except Exception:  # a kio type hypothesis cannot generate: nothing to test for this one
        return
    out = io.BytesIO()
    out.write(struct.pack(">hhih", key, version, 7, -1) + (b"\x00" if cls.__flexible__ else b""))
    entity_writer(cls)(out, request)
    frame = bytearray(out.getvalue())
    logged = []

    async def call():
        import logging

        class Catch(logging.Handler):
            def emit(self, record):
                if record.levelno >= logging.ERROR:
                    logged.append(record.getMessage())

        handler = Catch()
        logging.getLogger("kbroker").addHandler(handler)
        try:
            await answer_or_park(broker, key, frame)
        finally:
            logging.getLogger("kbroker").removeHandler(handler)

    trio.run(call)
    assert not logged, f"{cls.__name__}: {logged}"


# -- a null in every field the version does not allow to be null ------------------------------------

_FIXED_SIZE = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "float64": 8, "uuid": 16,
               "timedelta_i32": 4, "timedelta_i64": 8}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _sample_body(cls, null_at: tuple | None, targets: list | None, path: tuple = ()) -> bytes:
    """A body of kio class `cls`, written field by field from kio's metadata (independently of the
    broker's decoder): every array holds one element, every string is "x", every tagged field is
    present; the field at path `null_at` is null instead. With `targets`, the paths of the fields
    that are not nullable but have a null encoding (arrays, their string elements, strings, bytes)
    are appended to it."""
    import dataclasses
    from types import NoneType, UnionType
    from typing import get_args, get_origin

    from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, get_schema_field_type

    flexible = cls.__flexible__

    def length(n: int, classic: str) -> bytes:
        return _uvarint(n + 1) if flexible else struct.pack(classic, n)

    def one(kind, kafka_type, here: tuple) -> bytes:
        if here == null_at:
            return length(-1, ">h" if kafka_type == "string" else ">i")
        if isinstance(kind, (EntityField, EntityTupleField)):
            return _sample_body(kind.type_, null_at, targets, here)
        if kafka_type == "string":
            return length(1, ">h") + b"x"
        if kafka_type in ("bytes", "records"):
            return length(0, ">i")
        return bytes(_FIXED_SIZE[kafka_type])

    regular, tagged = b"", []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        kind = classify_field(field)
        nullable = get_origin(field.type) is UnionType and NoneType in get_args(field.type)
        kafka_type = None if isinstance(kind, (EntityField, EntityTupleField)) else get_schema_field_type(field)
        here = path + (field.name,)
        if kind.is_array:
            if targets is not None and not nullable:
                targets.append(here)
            if here == null_at:
                value = length(-1, ">i")
            else:
                element = here + ("[]",) if kafka_type else here
                if targets is not None and kafka_type in ("string", "bytes"):
                    targets.append(element)
                value = length(1, ">i") + one(kind, kafka_type, element)
        else:
            if targets is not None and not nullable and kafka_type in ("string", "bytes", "records"):
                targets.append(here)
            value = one(kind, kafka_type, here)
            if nullable and isinstance(kind, EntityField):
                value = b"\x01" + value  # KIP-893's marker: present
        tag = get_field_tag(field)
        if tag is None:
            regular += value
        else:
            tagged.append(_uvarint(tag) + _uvarint(len(value)) + value)
    if flexible:
        regular += _uvarint(len(tagged)) + b"".join(tagged)
    return regular


def _kio_apis(include_cluster_only: bool):
    from kbroker.wire.interbroker import SCHEMA_APIS
    from kbroker.wire.protocol import known_versions

    return [(key, version) for key, spec in DISPATCH.items() if key not in SCHEMA_APIS
            if include_cluster_only or not spec.cluster_only
            for version in range(spec.min_version, spec.max_version + 1) if version in known_versions(key)]


def test_a_null_in_any_field_the_version_does_not_allow_is_a_malformed_request(broker, caplog):
    """Every served API and version (kio's; the schema-driven inter-broker codec refuses such nulls
    itself): a valid request with one array, array element, string or bytes field that the version
    does not allow to be null sent as null. The codec refuses each (ProtocolError, the connection
    is closed) before any handler runs, so nothing is logged at ERROR; the same request without
    the null decodes. Structs that are not nullable have no null encoding, so they are covered
    through the arrays and strings inside them."""
    import logging

    from kbroker.wire.protocol import decode_request, parse_request_header, request_class

    served = set(_kio_apis(include_cluster_only=False))
    checked = 0

    async def check_all():
        nonlocal checked
        for key, version in _kio_apis(include_cluster_only=True):
            cls = request_class(key, version)
            head = struct.pack(">hhih", key, version, 7, -1) + (b"\x00" if cls.__flexible__ else b"")
            targets: list = []
            control = head + _sample_body(cls, None, targets)
            header, offset = parse_request_header(control)
            decode_request(header, control, offset)
            for target in targets:
                frame = head + _sample_body(cls, target, None)
                with pytest.raises(ProtocolError, match="does not allow to be null"):
                    decode_request(header, frame, offset)
                if (key, version) in served:
                    with trio.fail_after(10), pytest.raises(ProtocolError):
                        await handle_frame(broker, bytearray(frame))
                checked += 1

    with caplog.at_level(logging.ERROR, logger="kbroker"):
        trio.run(check_all)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert checked > 500
