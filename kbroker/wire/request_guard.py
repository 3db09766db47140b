"""Bounds every length in a request body before kio's native decoder reads it.

kio's native readers reserve memory for an array's declared element count before reading the
elements, so one forged count (2**31 - 1) makes the allocation fail and the process abort. This
walks the same schema in Python without building anything: every array count must fit in the
bytes that remain (each element takes at least one byte), every string/bytes length too, tagged
fields included. Anything else raises DecodeError, which the caller turns into a closed connection.
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_field_tag, get_schema_field_type

from kbroker.wire.primitives import DecodeError, Reader

_FIXED_SIZE = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "timedelta_i32": 4,
    "int64": 8, "timedelta_i64": 8, "float64": 8, "uuid": 16,
    "error_code": 2, "datetime_i64": 8,  # response-only types (the admin client's responses)
}
_LEGACY_PREFIX = {"string": 2, "bytes": 4, "records": 4}  # classic length prefix width

# One step of a plan: (kind, arg, is_array). kind "fixed" (arg = size), "sized" (arg = classic
# prefix width), "struct" (arg = the nested plan).
Step = tuple[str, object, bool]


@lru_cache(maxsize=None)
def _plan(cls: type) -> tuple[tuple[Step, ...], dict[int, Step]]:
    regular: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in fields(cls):
        if not field.init:
            continue
        kind = classify_field(field)
        if isinstance(kind, (EntityField, EntityTupleField)):
            step: Step = ("struct", _plan(kind.type_), kind.is_array)
        else:
            kafka_type = get_schema_field_type(field)
            if kafka_type in _FIXED_SIZE:
                step = ("fixed", _FIXED_SIZE[kafka_type], kind.is_array)
            elif kafka_type in _LEGACY_PREFIX:
                step = ("sized", _LEGACY_PREFIX[kafka_type], kind.is_array)
            else:
                raise TypeError(f"{cls.__name__}.{field.name}: unknown kafka type {kafka_type!r}")
        tag = get_field_tag(field)
        if tag is None:
            regular.append(step)
        else:
            tagged[int(tag)] = step
    return tuple(regular), tagged


def check_request_bounds(cls: type, buf, pos: int) -> None:
    """Walk a `cls` body at buf[pos:]; DecodeError if any length overruns the buffer."""
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
    kind, arg, is_array = step
    if not is_array:
        _walk_one(reader, kind, arg, end)
        return
    count = reader.uvarint() - 1 if reader.flexible else reader.i32()
    if count < -1 or count > end - reader.pos:
        raise DecodeError(f"array of {count} elements cannot fit in the request")
    if kind == "fixed":
        _advance(reader, max(count, 0) * arg, end)
        return
    for _ in range(count):
        _walk_one(reader, kind, arg, end)


def _walk_one(reader: Reader, kind: str, arg, end: int) -> None:
    if kind == "fixed":
        _advance(reader, arg, end)
    elif kind == "sized":
        if reader.flexible:
            n = reader.uvarint() - 1
        else:
            n = reader.i16() if arg == 2 else reader.i32()
        if n < -1:
            raise DecodeError(f"invalid length {n}")
        _advance(reader, max(n, 0), end)
    else:
        _walk_struct(reader, arg, end)


def _advance(reader: Reader, n: int, end: int) -> None:
    if reader.pos + n > end:
        raise DecodeError("field runs past the end of the request")
    reader.pos += n
