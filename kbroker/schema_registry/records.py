"""The records of the `_schemas` topic: Confluent Schema Registry's key and value JSON.

Pure: bytes in, typed records out and back, no I/O. What Confluent's registry (and Karapace)
write and read:

==================  ===============================================================  ==========================================
key type            key (exact bytes, this field order)                              value (``None`` = tombstone)
==================  ===============================================================  ==========================================
``SCHEMA``          ``{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}``       ``{"subject","version","id","schemaType"?,
                                                                                     "references"?,"schema","deleted"}``;
                                                                                     tombstone = hard delete of that version
``CONFIG``          ``{"keytype":"CONFIG","subject":s|null,"magic":0}``              ``{"subject"?,"compatibilityLevel"}``;
                                                                                     tombstone = config deleted
``MODE``            ``{"keytype":"MODE","subject":s|null,"magic":0}``                ``{"subject"?,"mode"}``; tombstone = deleted
``DELETE_SUBJECT``  ``{"keytype":"DELETE_SUBJECT","subject":s,"magic":0}``           ``{"subject","version"}``: soft delete of
                                                                                     every version <= ``version``
``NOOP``            ``{"keytype":"NOOP","magic":0}``                                 none (Confluent's offset marker)
==================  ===============================================================  ==========================================

The key's field order is Confluent's (``@JsonPropertyOrder`` on its key classes, the "canonical"
order of Karapace's ``key_format.py``): the topic is compacted and Kafka compares keys as bytes, so
a key written in another order would not replace Confluent's record for the same subject/version.
Keys are decoded in any field order (Karapace's deprecated format) and re-encoded canonically.

The value of a SCHEMA record follows Jackson's order for Confluent's ``SchemaValue`` (creator
properties: subject, version, id, schemaType, references, schema, deleted); ``schemaType`` is left
out for AVRO and ``references`` when empty, as Karapace and Confluent's ``NON_EMPTY`` do.

Strings are written as Jackson writes them: UTF-8, no escaping beyond ``"``, ``\\``, the short
escapes ``\\b \\t \\n \\f \\r`` and ``\\u00XX`` (upper-case hex) for other control characters.

Key types this module does not model (Confluent's ``CLEAR_SUBJECT``, ``CONTEXT``, ``ASSOC``, …)
decode to `OtherKey` so a replay can skip them; garbage raises `RecordError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AVRO",
    "JSON",
    "MAX_INT32",
    "PROTOBUF",
    "SCHEMA_TYPES",
    "ConfigKey",
    "ConfigValue",
    "DeleteSubjectKey",
    "DeleteSubjectValue",
    "Key",
    "ModeKey",
    "ModeValue",
    "NoopKey",
    "OtherKey",
    "RecordError",
    "SchemaKey",
    "SchemaReference",
    "SchemaValue",
    "Value",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_record",
    "encode_value",
]

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)

#: versions and ids are Java ints in Confluent's registry
MAX_INT32 = 2**31 - 1

SCHEMA_MAGIC = 1
OTHER_MAGIC = 0


class RecordError(ValueError):
    """A `_schemas` key or value that is not Confluent's JSON (garbage from the topic)."""


# --------------------------------------------------------------------------- the records


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A reference from one schema to a version of another subject (``import``, named type, ``$ref``)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class SchemaKey:
    subject: str
    version: int
    magic: int = SCHEMA_MAGIC


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """``subject`` None is the global config."""

    subject: str | None
    magic: int = OTHER_MAGIC


@dataclass(frozen=True, slots=True)
class ModeKey:
    """``subject`` None is the global mode."""

    subject: str | None
    magic: int = OTHER_MAGIC


@dataclass(frozen=True, slots=True)
class DeleteSubjectKey:
    subject: str
    magic: int = OTHER_MAGIC


@dataclass(frozen=True, slots=True)
class NoopKey:
    magic: int = OTHER_MAGIC


@dataclass(frozen=True, slots=True)
class OtherKey:
    """A key type kbroker does not model (skipped on replay), kept as read."""

    keytype: str
    raw: bytes


Key = SchemaKey | ConfigKey | ModeKey | DeleteSubjectKey | NoopKey | OtherKey


@dataclass(frozen=True, slots=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ConfigValue:
    compatibility_level: str
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class ModeValue:
    mode: str
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteSubjectValue:
    subject: str
    version: int


Value = SchemaValue | ConfigValue | ModeValue | DeleteSubjectValue


# --------------------------------------------------------------------------- JSON as Jackson writes it

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _jstr(s: str) -> str:
    out = ['"']
    for ch in s:
        esc = _SHORT_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _jdump(obj: Any) -> str:
    """Compact JSON of dicts (in insertion order), lists, str, int, bool and None."""
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, str):
        return _jstr(obj)
    if isinstance(obj, dict):
        return "{" + ",".join(_jstr(k) + ":" + _jdump(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_jdump(v) for v in obj) + "]"
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _to_bytes(obj: Any) -> bytes:
    try:
        return _jdump(obj).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a subject or schema
        raise RecordError(f"not encodable as UTF-8: {exc}") from None


def _parse_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        text = bytes(data).decode("utf-8")
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RecordError(f"{what} is not JSON: {exc}"[:300]) from None
    if not isinstance(obj, dict):
        raise RecordError(f"{what} is not a JSON object")
    return obj


def _str(obj: dict[str, Any], field: str, what: str) -> str:
    v = obj.get(field)
    if not isinstance(v, str):
        raise RecordError(f"{what}: {field!r} must be a string")
    return v


def _opt_str(obj: dict[str, Any], field: str, what: str) -> str | None:
    v = obj.get(field)
    if v is not None and not isinstance(v, str):
        raise RecordError(f"{what}: {field!r} must be a string or null")
    return v


def _int(obj: dict[str, Any], field: str, what: str, lo: int, hi: int = MAX_INT32) -> int:
    v = obj.get(field)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise RecordError(f"{what}: {field!r} must be an integer in [{lo}, {hi}]")
    return v


# --------------------------------------------------------------------------- keys


def encode_key(key: Key) -> bytes:
    """Confluent's exact key bytes."""
    if isinstance(key, SchemaKey):
        obj: dict[str, Any] = {"keytype": "SCHEMA", "subject": key.subject, "version": key.version, "magic": key.magic}
    elif isinstance(key, ConfigKey):
        obj = {"keytype": "CONFIG", "subject": key.subject, "magic": key.magic}
    elif isinstance(key, ModeKey):
        obj = {"keytype": "MODE", "subject": key.subject, "magic": key.magic}
    elif isinstance(key, DeleteSubjectKey):
        obj = {"keytype": "DELETE_SUBJECT", "subject": key.subject, "magic": key.magic}
    elif isinstance(key, NoopKey):
        obj = {"keytype": "NOOP", "magic": key.magic}
    elif isinstance(key, OtherKey):
        return key.raw
    else:
        raise TypeError(f"not a _schemas key: {key!r}")
    return _to_bytes(obj)


def decode_key(data: bytes) -> Key:
    """A key in any field order (Confluent's canonical one or Karapace's deprecated one)."""
    obj = _parse_object(data, "key")
    keytype = obj.get("keytype")
    if not isinstance(keytype, str):
        raise RecordError("key: 'keytype' must be a string")
    what = f"{keytype} key"
    magic = _int(obj, "magic", what, 0)
    if keytype == "SCHEMA":
        return SchemaKey(_str(obj, "subject", what), _int(obj, "version", what, 1), magic)
    if keytype == "CONFIG":
        return ConfigKey(_opt_str(obj, "subject", what), magic)
    if keytype == "MODE":
        return ModeKey(_opt_str(obj, "subject", what), magic)
    if keytype == "DELETE_SUBJECT":
        return DeleteSubjectKey(_str(obj, "subject", what), magic)
    if keytype == "NOOP":
        return NoopKey(magic)
    return OtherKey(keytype, bytes(data))


# --------------------------------------------------------------------------- values


def encode_value(value: Value | None) -> bytes | None:
    """The value's bytes; None (a tombstone) stays None."""
    if value is None:
        return None
    if isinstance(value, SchemaValue):
        obj: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
        if value.schema_type != AVRO:
            obj["schemaType"] = value.schema_type
        if value.references:
            obj["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in value.references]
        obj["schema"] = value.schema
        obj["deleted"] = value.deleted
    elif isinstance(value, ConfigValue):
        obj = {} if value.subject is None else {"subject": value.subject}
        obj["compatibilityLevel"] = value.compatibility_level
    elif isinstance(value, ModeValue):
        obj = {} if value.subject is None else {"subject": value.subject}
        obj["mode"] = value.mode
    elif isinstance(value, DeleteSubjectValue):
        obj = {"subject": value.subject, "version": value.version}
    else:
        raise TypeError(f"not a _schemas value: {value!r}")
    return _to_bytes(obj)


def _decode_references(obj: dict[str, Any], what: str) -> tuple[SchemaReference, ...]:
    refs = obj.get("references")
    if refs is None:
        return ()
    if not isinstance(refs, list):
        raise RecordError(f"{what}: 'references' must be a list")
    out = []
    for ref in refs:
        if not isinstance(ref, dict):
            raise RecordError(f"{what}: a reference must be an object")
        out.append(SchemaReference(_str(ref, "name", what), _str(ref, "subject", what), _int(ref, "version", what, 1)))
    return tuple(out)


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value of a record with this (decoded) key; None for a tombstone or a NOOP/unknown key."""
    if data is None or isinstance(key, (NoopKey, OtherKey)):
        return None
    if isinstance(key, SchemaKey):
        what = "SCHEMA value"
        obj = _parse_object(data, what)
        schema_type = obj.get("schemaType")
        if schema_type is None:
            schema_type = AVRO
        if schema_type not in SCHEMA_TYPES:
            raise RecordError(f"{what}: unknown schemaType {schema_type!r}"[:300])
        deleted = obj.get("deleted", False)
        if not isinstance(deleted, bool):
            raise RecordError(f"{what}: 'deleted' must be a boolean")
        return SchemaValue(
            subject=_str(obj, "subject", what),
            version=_int(obj, "version", what, 1),
            id=_int(obj, "id", what, 0),
            schema=_str(obj, "schema", what),
            schema_type=schema_type,
            references=_decode_references(obj, what),
            deleted=deleted,
        )
    if isinstance(key, ConfigKey):
        what = "CONFIG value"
        obj = _parse_object(data, what)
        return ConfigValue(_str(obj, "compatibilityLevel", what), _opt_str(obj, "subject", what))
    if isinstance(key, ModeKey):
        what = "MODE value"
        obj = _parse_object(data, what)
        return ModeValue(_str(obj, "mode", what), _opt_str(obj, "subject", what))
    if isinstance(key, DeleteSubjectKey):
        what = "DELETE_SUBJECT value"
        obj = _parse_object(data, what)
        # Confluent writes 0 (and Karapace -1) as the watermark of a subject with no live version
        return DeleteSubjectValue(_str(obj, "subject", what), _int(obj, "version", what, -MAX_INT32 - 1))
    raise TypeError(f"not a _schemas key: {key!r}")


def encode_record(key: Key, value: Value | None) -> tuple[bytes, bytes | None]:
    return encode_key(key), encode_value(value)


def decode_record(key: bytes, value: bytes | None) -> tuple[Key, Value | None]:
    k = decode_key(key)
    return k, decode_value(k, value)
