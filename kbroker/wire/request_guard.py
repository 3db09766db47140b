"""Bounds every length in a request body before kio's native decoder reads it.

kio's native readers reserve memory for an array's declared element count before reading the
elements, so one forged count (2**31 - 1) makes the allocation fail and the process abort. This
walks the same schema in Python without building anything: every array count must fit in the
bytes that remain (each element takes at least one byte), every string/bytes length too, tagged
fields included. The same walk enforces nullability as Kafka's parser does: a null (length -1)
is accepted only where the version's schema allows one (kio spells that `X | None` in each
version's class; array elements are never null), and a nullable struct carries KIP-893's int8
marker. Anything else raises DecodeError, which the caller turns into a closed connection.
"""

from __future__ import annotations

from dataclasses import Field, fields
from functools import lru_cache
from types import NoneType, UnionType
from typing import get_args, get_origin

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, get_schema_field_type

from kbroker.wire.primitives import DecodeError, Reader

_FIXED_SIZE = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "timedelta_i32": 4,
    "int64": 8, "timedelta_i64": 8, "float64": 8, "uuid": 16,
    "error_code": 2, "datetime_i64": 8,  # response-only types (the admin client's responses)
}
_LEGACY_PREFIX = {"string": 2, "bytes": 4, "records": 4}  # classic length prefix width

# One step of a plan: (kind, arg, is_array, nullable, name). kind "fixed" (arg = size), "sized"
# (arg = classic prefix width), "struct" (arg = the nested plan); nullable: the field itself (the
# array, not its elements) may be null; name: the field's, for the error.
Step = tuple[str, object, bool, bool, str]


def _nullable(field: Field) -> bool:
    """kio marks a field nullable in a version by `X | None` around the whole type."""
    return get_origin(field.type) is UnionType and NoneType in get_args(field.type)


@lru_cache(maxsize=None)
def _plan(cls: type) -> tuple[tuple[Step, ...], dict[int, Step]]:
    regular: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in fields(cls):
        if not field.init:
            continue
        kind = classify_field(field)
        nullable = _nullable(field)
        if isinstance(kind, (EntityField, EntityTupleField)):
            step: Step = ("struct", _plan(kind.type_), kind.is_array, nullable, field.name)
        else:
            kafka_type = get_schema_field_type(field)
            if kafka_type in _FIXED_SIZE:
                step = ("fixed", _FIXED_SIZE[kafka_type], kind.is_array, nullable, field.name)
            elif kafka_type in _LEGACY_PREFIX:
                step = ("sized", _LEGACY_PREFIX[kafka_type], kind.is_array, nullable, field.name)
            else:
                raise TypeError(f"{cls.__name__}.{field.name}: unknown kafka type {kafka_type!r}")
        tag = get_field_tag(field)
        if tag is None:
            regular.append(step)
        else:
            tagged[int(tag)] = step
    return tuple(regular), tagged


def check_request_bounds(cls: type, buf, pos: int) -> None:
    """Walk a `cls` body at buf[pos:]; DecodeError if any length overruns the buffer or a null
    stands where the version allows none."""
    reader = Reader(buf, pos, bool(getattr(cls, "__flexible__", False)))
    _walk_struct(reader, _plan(cls), len(reader.view))


def _walk_struct(reader: Reader, plan, end: int) -> None:
    regular, tagged = plan
    for step in regular:
        _walk_step(reader, step, end)
    if not reader.flexible:
        return
    count = reader.uvarint()
    if count > end - reader.pos:
        raise DecodeError(f"{count} tagged fields cannot fit")
    for _ in range(count):
        tag = reader.uvarint()
        size = reader.uvarint()
        field_end = reader.pos + size
        if field_end > end:
            raise DecodeError("tagged field runs past the end of the request")
        step = tagged.get(tag)
        if step is not None:
            _walk_step(reader, step, field_end)
        reader.pos = field_end


def _walk_step(reader: Reader, step: Step, end: int) -> None:
    kind, arg, is_array, nullable, name = step
    if not is_array:
        _walk_one(reader, kind, arg, end, nullable, name)
        return
    count = reader.uvarint() - 1 if reader.flexible else reader.i32()
    if count < 0:
        if count == -1 and nullable:
            return
        raise DecodeError(_null_refused(name) if count == -1 else f"invalid array length {count}")
    if count > end - reader.pos:
        raise DecodeError(f"array of {count} elements cannot fit in the request")
    if kind == "fixed":
        _advance(reader, count * arg, end)
        return
    for _ in range(count):
        _walk_one(reader, kind, arg, end, False, name)


def _walk_one(reader: Reader, kind: str, arg, end: int, nullable: bool, name: str) -> None:
    if kind == "fixed":
        _advance(reader, arg, end)
    elif kind == "sized":
        if reader.flexible:
            n = reader.uvarint() - 1
        else:
            n = reader.i16() if arg == 2 else reader.i32()
        if n < 0:
            if n == -1 and nullable:
                return
            raise DecodeError(_null_refused(name) if n == -1 else f"invalid length {n}")
        _advance(reader, n, end)
    else:
        if nullable:  # KIP-893: an int8 marker, -1 null, 1 present
            marker = reader.i8()
            if marker == -1:
                return
            if marker != 1:
                raise DecodeError(f"invalid nullable struct marker {marker}")
        _walk_struct(reader, arg, end)


def _null_refused(name: str) -> str:
    return f"null in {name}, which this version does not allow to be null"


def _advance(reader: Reader, n: int, end: int) -> None:
    if reader.pos + n > end:
        raise DecodeError("field runs past the end of the request")
    reader.pos += n
