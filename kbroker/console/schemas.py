"""The console's schema-registry core, pure: Confluent's wire format (magic byte 0, a 4-byte
big-endian schema id, for Protobuf the message indexes), decoding a key or value with the schema
its id names (Avro with fastavro, JSON Schema as UTF-8 JSON, Protobuf with google.protobuf from the
schema's serialized FileDescriptorProto), the label a decoded value carries, and the rows of the
Schemas pages. No I/O: registry.py fetches what these functions are handed.

Message contents are untrusted: a decoded value is shown as JSON text the templates escape.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import importlib
import io
import json
import uuid
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

MAGIC = 0
HEADER_BYTES = 5  # the magic byte and the schema id
MAX_MESSAGE_INDEXES = 64  # nesting deeper than this is not taken for Confluent's header
MAX_SHOWN_CHARS = 64 * 1024  # of a decoded value's JSON; the rest is cut
AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
TYPE_NAMES = {AVRO: "Avro", JSON: "JSON Schema", PROTOBUF: "Protobuf"}


class DecodeError(ValueError):
    """Bytes that do not decode with the schema their header names (shown as a one-line reason)."""


# -- Confluent's wire format -----------------------------------------------------------------------

def wire_header(data: bytes | None) -> tuple[int, bytes] | None:
    """(schema id, the bytes after the header) when `data` starts with Confluent's header: the
    magic byte 0 and a 4-byte big-endian schema id; None otherwise."""
    if data is None or len(data) < HEADER_BYTES or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:HEADER_BYTES], "big"), bytes(data[HEADER_BYTES:])


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at `pos` (at most 10 bytes): (value, position after it)."""
    value = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    raise DecodeError("the message indexes end inside a varint")


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def message_indexes(data: bytes) -> tuple[list[int], bytes]:
    """Confluent's Protobuf message indexes at the start of `data` (the bytes after the schema
    id): a zigzag varint count, then that many zigzag varints, the path to the message type
    (the first a top-level message of the file, each next one a type nested in it). A count of 0
    (the single byte 0) means [0], the file's first message. Returns (indexes, the protobuf bytes)."""
    count, pos = _varint(data, 0)
    count = _zigzag(count)
    if count == 0:
        return [0], bytes(data[pos:])
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise DecodeError(f"message index count {count} is not between 1 and {MAX_MESSAGE_INDEXES}")
    indexes = []
    for _ in range(count):
        value, pos = _varint(data, pos)
        index = _zigzag(value)
        if index < 0:
            raise DecodeError(f"negative message index {index}")
        indexes.append(index)
    return indexes, bytes(data[pos:])


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """The inverse of message_indexes' header part ([0] as the single byte 0, as Confluent writes it)."""
    def varint(n: int) -> bytes:
        n = (n << 1) ^ (n >> 63)  # zigzag
        out = bytearray()
        while True:
            byte = n & 0x7F
            n >>= 7
            if n:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                return bytes(out)
    if list(indexes) == [0]:
        return b"\x00"
    return varint(len(indexes)) + b"".join(varint(i) for i in indexes)


# -- decoders, one per schema type -------------------------------------------------------------------

class Reference(NamedTuple):
    """A schema a schema refers to, as the registry gave it: the name it is imported as (Avro:
    the named type's full name; Protobuf: the import path) and the referenced schema's text."""

    name: str
    schema_type: str
    schema: str


def avro_decoder(schema: str, references: Sequence[Reference] = ()) -> Any:
    """fastavro's parsed schema, its named types from `references` (dependencies first) known."""
    import fastavro

    named: dict[str, Any] = {}
    try:
        for ref in references:
            fastavro.parse_schema(json.loads(ref.schema), named)
        return fastavro.parse_schema(json.loads(schema), named)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # fastavro's SchemaParseException is a ValueError
        raise DecodeError(f"the Avro schema does not parse: {one_line(exc)}") from None


def decode_avro(parsed: Any, payload: bytes) -> Any:
    import fastavro

    stream = io.BytesIO(payload)
    try:
        value = fastavro.schemaless_reader(stream, parsed, None)
    except (EOFError, ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError, OverflowError) as exc:
        raise DecodeError(f"not Avro of this schema: {one_line(exc) or type(exc).__name__}") from None
    left = len(payload) - stream.tell()
    if left:
        raise DecodeError(f"not Avro of this schema: {left} bytes left after the record")
    return value


def decode_json(payload: bytes) -> Any:
    try:
        return json.loads(payload.decode("utf-8"))
    except UnicodeDecodeError:
        raise DecodeError("not UTF-8 JSON: not UTF-8") from None
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"not UTF-8 JSON: {one_line(exc)}") from None


def _descriptor_proto(text: str, name: str) -> Any:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError as ProtoDecodeError

    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DecodeError(f"Protobuf schema {name!r} is not a serialized descriptor (base64): is the "
                          f"registry's ?format=serialized supported?") from None
    fdp = descriptor_pb2.FileDescriptorProto()
    try:
        fdp.ParseFromString(raw)
    except ProtoDecodeError as exc:
        raise DecodeError(f"Protobuf schema {name!r} is not a FileDescriptorProto: {one_line(exc)}") from None
    return fdp


def _well_known(name: str) -> Any | None:
    """The FileDescriptorProto of a file google.protobuf ships (google/protobuf/timestamp.proto
    ...), imported by schemas without a reference; None for any other."""
    from google.protobuf import descriptor_pb2

    if not name.startswith("google/protobuf/") or not name.endswith(".proto"):
        return None
    stem = name[len("google/protobuf/"):-len(".proto")]
    if not stem.replace("_", "").isalnum():
        return None
    try:
        module = importlib.import_module(f"google.protobuf.{stem}_pb2")
    except ImportError:
        return None
    fdp = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fdp)
    return fdp


class ProtobufFile(NamedTuple):
    """A Protobuf schema loaded in a descriptor pool of its own (its references first)."""

    pool: Any
    file: Any  # its FileDescriptorProto


def protobuf_decoder(schema: str, references: Sequence[Reference] = ()) -> ProtobufFile:
    """A descriptor pool holding the schema (a base64 FileDescriptorProto, `?format=serialized`)
    after its references (dependencies first, each named by its import path) and any well-known
    file (google/protobuf/...) it imports."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(fdp: Any) -> None:
        for dep in fdp.dependency:
            if dep not in added:
                known = _well_known(dep)
                if known is None:
                    raise DecodeError(f"Protobuf schema imports {dep!r}, which is neither a reference nor "
                                      f"a google/protobuf file")
                add(known)
        try:
            pool.Add(fdp)
        except (TypeError, ValueError, KeyError) as exc:
            raise DecodeError(f"Protobuf schema {fdp.name!r} does not load: {one_line(exc)}") from None
        added.add(fdp.name)

    for ref in references:
        if ref.name in added:
            continue
        fdp = _descriptor_proto(ref.schema, ref.name)
        fdp.name = ref.name
        add(fdp)
    main = _descriptor_proto(schema, "the schema")
    if not main.name or main.name in added:
        main.name = "kbroker-console-schema.proto"
    add(main)
    return ProtobufFile(pool, main)


def protobuf_message_name(fdp: Any, indexes: Sequence[int]) -> str:
    """The full name of the message type the indexes name in the file."""
    types, path = fdp.message_type, []
    for depth, index in enumerate(indexes):
        if index >= len(types):
            where = "the file" if depth == 0 else ".".join(path)
            raise DecodeError(f"message index {index} is past the {len(types)} message types of {where}")
        path.append(types[index].name)
        types = types[index].nested_type
    return ".".join(([fdp.package] if fdp.package else []) + path)


def decode_protobuf(loaded: ProtobufFile, indexes: Sequence[int], payload: bytes) -> tuple[str, Any]:
    """(the message type's full name, the message as json_format gives it, field names as in the schema)."""
    from google.protobuf import json_format, message_factory
    from google.protobuf.message import DecodeError as ProtoDecodeError

    name = protobuf_message_name(loaded.file, indexes)
    try:
        cls = message_factory.GetMessageClass(loaded.pool.FindMessageTypeByName(name))
    except KeyError as exc:
        raise DecodeError(f"message type {name} is not in the schema: {one_line(exc)}") from None
    message = cls()
    try:
        message.ParseFromString(payload)
    except (ProtoDecodeError, ValueError) as exc:
        raise DecodeError(f"not a Protobuf {name}: {one_line(exc) or 'malformed'}") from None
    try:
        return name, json_format.MessageToDict(message, preserving_proto_field_name=True,
                                               always_print_fields_with_no_presence=True)
    except TypeError:  # an older google.protobuf without the option
        return name, json_format.MessageToDict(message, preserving_proto_field_name=True)


# -- what the browser shows -------------------------------------------------------------------------

class Decoded(NamedTuple):
    text: str  # pretty-printed JSON
    label: str  # "Avro · schema id 3 · subject orders-value v2"
    truncated: bool


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.hex(" ")
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return repr(value)


def pretty(value: Any) -> tuple[str, bool]:
    """A decoded value as indented JSON (bytes as hex, dates ISO 8601, decimals as text), cut at
    MAX_SHOWN_CHARS: (text, whether cut)."""
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)
    except (ValueError, RecursionError):
        text = repr(value)
    if len(text) > MAX_SHOWN_CHARS:
        return text[:MAX_SHOWN_CHARS], True
    return text, False


def pick_subject(subject_versions: Iterable[tuple[str, int]], topic: str, is_key: bool) -> tuple[str, int] | None:
    """The subject and version to name for a schema registered under several: the topic's own
    (TopicNameStrategy: TOPIC-key or TOPIC-value), else one starting with the topic, else the first."""
    found = sorted(subject_versions)
    if not found:
        return None
    own = f"{topic}-{'key' if is_key else 'value'}"
    for chosen in ([sv for sv in found if sv[0] == own], [sv for sv in found if sv[0].startswith(topic)], found):
        if chosen:
            return chosen[0]
    return None


def label(schema_type: str, schema_id: int, subject: tuple[str, int] | None, message_type: str | None = None) -> str:
    parts = [TYPE_NAMES.get(schema_type, schema_type)]
    if message_type:
        parts.append(message_type)
    parts.append(f"schema id {schema_id}")
    if subject is not None:
        parts.append(f"subject {subject[0]} v{subject[1]}")
    return " · ".join(parts)


def one_line(exc: BaseException | str, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "..."


# -- the Schemas pages ---------------------------------------------------------------------------

class Setting(NamedTuple):
    """A subject's compatibility level or mode: its own, or the global one (inherited)."""

    value: str | None  # None: not known
    inherited: bool
    error: str | None = None


class SubjectRow(NamedTuple):
    subject: str
    version: int | None  # the latest
    schema_id: int | None
    schema_type: str
    compatibility: Setting
    error: str | None = None


class VersionRow(NamedTuple):
    version: int
    schema_id: int | None
    schema_type: str
    error: str | None = None


class SchemaVersion(NamedTuple):
    version: int
    schema_id: int
    schema_type: str
    text: str  # pretty-printed
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)


class SubjectsPage(NamedTuple):
    rows: list[SubjectRow]
    compatibility: Setting  # global
    mode: Setting  # global
    not_described: int  # subjects past the described ones


class SubjectDetail(NamedTuple):
    subject: str
    versions: list[VersionRow]
    selected: SchemaVersion | None
    compatibility: Setting
    mode: Setting
    older_not_listed: int  # versions before the listed ones


def schema_type_of(body: Mapping[str, Any]) -> str:
    """A version's or schema's type (the registry leaves out "schemaType" for Avro)."""
    return str(body.get("schemaType") or AVRO)


def pretty_schema(schema_type: str, text: str) -> str:
    """Avro and JSON Schema indented; Protobuf (.proto text) as it is."""
    if schema_type in (AVRO, JSON):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            return text
    return text


def schema_version(body: Mapping[str, Any]) -> SchemaVersion:
    schema_type = schema_type_of(body)
    refs = tuple((str(r.get("name")), str(r.get("subject")), int(r.get("version") or 0))
                 for r in body.get("references") or () if isinstance(r, Mapping))
    return SchemaVersion(int(body["version"]), int(body["id"]), schema_type,
                         pretty_schema(schema_type, str(body.get("schema") or "")), refs)


def setting(own: str | None, global_value: Setting) -> Setting:
    """A subject's own level or mode if it has one, else the global one, marked inherited."""
    if own is not None:
        return Setting(own, False)
    return Setting(global_value.value, True, global_value.error)
