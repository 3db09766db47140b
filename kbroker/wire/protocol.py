"""Request and response codec, sans-I/O: frame bytes ⇄ (header, typed message).

Message bodies are kio's generated entities (Kafka's own JSON schemas, every version); this module
is the only place that knows kio's reader/writer API, so the rest of kbroker deals in entities
built with `build()` from plain dicts. Header versions follow Kafka: request header v2 / response
header v1 for flexible API versions, v1 / v0 otherwise, and ApiVersions responses always v0.

The ZooKeeper-mode inter-broker APIs, which kio lacks (`interbroker.APIS`), go through the same
functions: their bodies are read-only dataclasses from `schema_codec`, at the one version
`interbroker` names. So do the old versions of client APIs that Kafka 3.9 serves and kio lacks
(`interbroker.OLD_VERSIONS`: Fetch v0–3, ListOffsets v0, ...), with kio's field names.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from functools import lru_cache
from typing import Any, Mapping, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional
from kio.schema.errors import ErrorCode

from kbroker.wire.interbroker import OLD_VERSIONS, SCHEMA_APIS, old_version
from kbroker.wire.request_guard import check_request_bounds

API_VERSIONS_KEY = 18
_HEADER = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_UTC = datetime.timezone.utc


class ProtocolError(Exception):
    """The request cannot be decoded; Kafka closes the connection."""


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    flexible: bool


def api_name(api_key: int) -> str | None:
    name = api_key_map.get(api_key)
    if name is None and api_key in SCHEMA_APIS:
        return SCHEMA_APIS[api_key].name
    return name


def known_versions(api_key: int) -> range:
    """The versions kio can encode for an API (empty when the key is unknown); for an inter-broker
    API, the one version kbroker serves and sends."""
    interbroker = SCHEMA_APIS.get(api_key)
    if interbroker is not None:
        return range(interbroker.version, interbroker.version + 1)
    name = api_key_map.get(api_key)
    if name is None:
        return range(0)
    versions = sorted(schema_name_map[name])
    return range(versions[0], versions[-1] + 1)


@lru_cache(maxsize=None)
def _request_codec(api_key: int, version: int):
    cls = load_request_schema(api_key, version)
    return cls, entity_reader(cls)


@lru_cache(maxsize=None)
def _response_codec(api_key: int, version: int):
    cls = load_response_schema(api_key, version)
    return cls, entity_writer(cls)


def _by_schema(api_key: int, version: int) -> bool:
    """Whether this body goes through schema_codec: an inter-broker API, or an old version kio lacks."""
    return api_key in SCHEMA_APIS or old_version(api_key, version) is not None


def _schema_codec(api_key: int, version: int, kind: str):
    """The schema-driven codec of an inter-broker body, or of an old version of a client API (with
    kio's field names); `kind` is "Request" or "Response"."""
    from kbroker.wire.schema_codec import message_codec  # deferred: it imports ProtocolError from here

    if api_key in SCHEMA_APIS:
        return message_codec(SCHEMA_APIS[api_key].message + kind, version)
    return message_codec(old_version(api_key, version) + kind, version, kio_names=True)


def old_versions(api_key: int) -> range:
    """The versions below kio's that kbroker still decodes and encodes (Kafka 3.9's, KIP-896 removed
    them in Kafka 4); empty for most APIs."""
    old = OLD_VERSIONS.get(api_key)
    return old.versions if old is not None else range(0)


def response_class(api_key: int, version: int) -> type:
    if _by_schema(api_key, version):
        return _schema_codec(api_key, version, "Response").cls
    return _response_codec(api_key, version)[0]


def request_class(api_key: int, version: int) -> type:
    if _by_schema(api_key, version):
        return _schema_codec(api_key, version, "Request").cls
    return _request_codec(api_key, version)[0]


def parse_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the request header; returns it and the offset where the body starts.

    `flexible` is only meaningful for versions kio knows; for others the caller answers before
    reading the body (ApiVersions) or closes the connection.
    """
    if len(frame) < 10:
        raise ProtocolError("request shorter than its header")
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    (length,) = _I16.unpack_from(frame, 8)
    pos = 10
    client_id = None
    if length >= 0:
        if pos + length > len(frame):
            raise ProtocolError("client_id runs past the frame")
        try:
            client_id = bytes(frame[pos : pos + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError("client_id is not UTF-8") from exc
        pos += length
    elif length != -1:
        raise ProtocolError(f"invalid client_id length {length}")
    flexible = False
    if api_version in known_versions(api_key) or api_version in old_versions(api_key):
        flexible = bool(request_class(api_key, api_version).__flexible__)
        if flexible:
            pos = _skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, flexible), pos


def _read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 28:
            raise ProtocolError("bad unsigned varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise ProtocolError("tagged field runs past the frame")
    return pos


def decode_request(header: RequestHeader, frame: bytes | memoryview, body_offset: int) -> Any:
    """Decode the body of a request whose version kio (or schema_codec) knows; ProtocolError on garbage."""
    if _by_schema(header.api_key, header.api_version):
        return _schema_codec(header.api_key, header.api_version, "Request").decode(frame, body_offset)[0]
    cls, reader = _request_codec(header.api_key, header.api_version)
    try:
        view = memoryview(frame).toreadonly()
        check_request_bounds(cls, view, body_offset)  # before kio's native reader allocates
        entity, _size = reader(view, body_offset)
    except Exception as exc:  # kio raises a variety of errors on malformed input
        raise ProtocolError(f"malformed {api_name(header.api_key)} v{header.api_version} body: {exc!r}") from exc
    return entity


def encode_response(header: RequestHeader, response: Any) -> bytes:
    """Response frame: size, header (v0, or v1 for flexible versions except ApiVersions), body."""
    if _by_schema(header.api_key, header.api_version):
        codec = _schema_codec(header.api_key, header.api_version, "Response")
        return _schema_frame(_I32.pack(header.correlation_id) + (b"\0" if header.flexible else b""), codec, response)
    _cls, writer = _response_codec(header.api_key, header.api_version)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_I32.pack(header.correlation_id))
    if header.flexible and header.api_key != API_VERSIONS_KEY:
        out.write(b"\0")  # no tagged fields in the response header
    writer(out, response)
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    return out.getvalue()


# -- the client side: requests out, responses in -------------------------------------------------------

@lru_cache(maxsize=None)
def _client_codec(api_key: int, version: int):
    return entity_writer(request_class(api_key, version)), entity_reader(response_class(api_key, version))


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, data: Mapping[str, Any]) -> bytes:
    """A request frame (size, header v1 or v2, body built from `data`), as a client sends it."""
    if _by_schema(api_key, version):
        codec = _schema_codec(api_key, version, "Request")
        raw = None if client_id is None else client_id.encode()
        head = _HEADER.pack(api_key, version, correlation_id)
        head += _I16.pack(-1) if raw is None else _I16.pack(len(raw)) + raw
        return _schema_frame(head + (b"\0" if codec.flexible else b""), codec, data)
    cls = request_class(api_key, version)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_HEADER.pack(api_key, version, correlation_id))
    raw = None if client_id is None else client_id.encode()
    out.write(_I16.pack(-1) if raw is None else _I16.pack(len(raw)) + raw)
    if cls.__flexible__:
        out.write(b"\0")  # no tagged fields in the request header
    _client_codec(api_key, version)[0](out, build(cls, data))
    buf = out.getbuffer()
    _I32.pack_into(buf, 0, len(buf) - 4)
    return out.getvalue()


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix; ProtocolError on garbage.

    Lengths are bounded first (as for requests), so a forged count cannot make kio allocate.
    """
    if len(frame) < 4:
        raise ProtocolError("response shorter than its header")
    (correlation_id,) = _I32.unpack_from(frame, 0)
    if _by_schema(api_key, version):
        codec = _schema_codec(api_key, version, "Response")
        pos = _skip_tagged_fields(frame, 4) if codec.flexible else 4
        return correlation_id, codec.decode(frame, pos)[0]
    cls = response_class(api_key, version)
    try:
        pos = 4
        if cls.__flexible__ and api_key != API_VERSIONS_KEY:
            pos = _skip_tagged_fields(frame, pos)
        view = memoryview(frame).toreadonly()
        check_request_bounds(cls, view, pos)
        entity, _size = _client_codec(api_key, version)[1](view, pos)
    except Exception as exc:  # kio raises a variety of errors on malformed input
        raise ProtocolError(f"malformed {api_name(api_key)} v{version} response: {exc!r}") from exc
    return correlation_id, entity


def _schema_frame(head: bytes, codec, data: Any) -> bytes:
    """size + head + the schema-encoded body of `data` (a dict or a built message)."""
    out = bytearray(4) + head
    codec.encode_into(out, data)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


# -- building entities from plain values -------------------------------------------------------------

class _FieldPlan(NamedTuple):
    name: str
    kind: str  # "entity", "entities", "timedelta", "datetime", "error_code", "plain"
    inner: Any
    default: Any  # dataclasses.MISSING when a value must be computed


@lru_cache(maxsize=None)
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for f in dataclasses.fields(cls):
        field_class = classify_field(f)
        kind, inner = "plain", None
        if isinstance(field_class, EntityTupleField):
            kind, inner = "entities", field_class.type_
        elif isinstance(field_class, EntityField):
            kind, inner = "entity", field_class.type_
        elif not isinstance(field_class, PrimitiveTupleField):
            ftype = field_class.type_
            if isinstance(ftype, type) and issubclass(ftype, datetime.timedelta):
                kind = "timedelta"
            elif isinstance(ftype, type) and issubclass(ftype, datetime.datetime):
                kind = "datetime"
            elif isinstance(ftype, type) and issubclass(ftype, ErrorCode):
                kind = "error_code"
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        elif isinstance(field_class, (EntityTupleField, PrimitiveTupleField)):
            default = ()
        elif is_optional(f):
            default = None
        elif kind == "entity":
            default = dataclasses.MISSING
        else:
            default = _implicit_default(field_class.type_)
        plans.append(_FieldPlan(f.name, kind, inner, default))
    return tuple(plans)


def _implicit_default(ftype: Any) -> Any:
    if isinstance(ftype, type) and issubclass(ftype, ErrorCode):
        return ErrorCode.none
    if isinstance(ftype, type) and issubclass(ftype, bool):
        return False
    try:
        return get_implicit_default(ftype)
    except (KeyError, NotImplementedError, TypeError):
        return None


def _convert(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None
    if plan.kind == "entities":
        return tuple(build(plan.inner, v) if isinstance(v, Mapping) else v for v in value)
    if plan.kind == "entity":
        return build(plan.inner, value) if isinstance(value, Mapping) else value
    if plan.kind == "error_code":
        return ErrorCode(value)
    if plan.kind == "timedelta" and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if plan.kind == "datetime" and isinstance(value, int):
        return None if value < 0 else datetime.datetime.fromtimestamp(value / 1000, tz=_UTC)
    if isinstance(value, list):
        return tuple(value)
    return value


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """An entity of `cls` from a dict: fields this version lacks are dropped, missing ones defaulted.

    Handlers describe a response once, for all versions; this fits it to the version asked for.
    """
    schema = getattr(cls, "__schema_struct__", None)  # an inter-broker message (schema_codec)
    if schema is not None:
        return schema.build(data)
    kwargs = {}
    for plan in _plan(cls):
        if plan.name in data:
            kwargs[plan.name] = _convert(plan, data[plan.name])
        elif plan.default is dataclasses.MISSING:
            kwargs[plan.name] = build(plan.inner, {})
        else:
            kwargs[plan.name] = plan.default
    return cls(**kwargs)


def build_response(header: RequestHeader, data: Mapping[str, Any]) -> Any:
    return build(response_class(header.api_key, header.api_version), data)


def to_ms(value: Any) -> int:
    """Milliseconds of a kio timedelta/datetime field (or an int)."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if value is None:
        return -1
    return int(value)
