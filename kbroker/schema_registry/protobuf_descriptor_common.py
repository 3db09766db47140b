"""What both directions of protobuf_descriptor share: the descriptor.proto field types of the
.proto scalar types and back, protoc's naming rules (`json_name`, map entry message names), how a
float is written in .proto text, and whether a descriptor field is repeated across protobuf
versions. Pure: no I/O.
"""

from __future__ import annotations

import math

from google.protobuf import descriptor_pb2

__all__ = ["FDP", "SCALAR_NAMES", "SCALAR_TYPES", "float_text", "is_repeated", "json_name", "map_entry_name"]

FDP = descriptor_pb2.FieldDescriptorProto
SCALAR_TYPES: dict[str, int] = {
    "double": FDP.TYPE_DOUBLE,
    "float": FDP.TYPE_FLOAT,
    "int64": FDP.TYPE_INT64,
    "uint64": FDP.TYPE_UINT64,
    "int32": FDP.TYPE_INT32,
    "fixed64": FDP.TYPE_FIXED64,
    "fixed32": FDP.TYPE_FIXED32,
    "bool": FDP.TYPE_BOOL,
    "string": FDP.TYPE_STRING,
    "bytes": FDP.TYPE_BYTES,
    "uint32": FDP.TYPE_UINT32,
    "sfixed32": FDP.TYPE_SFIXED32,
    "sfixed64": FDP.TYPE_SFIXED64,
    "sint32": FDP.TYPE_SINT32,
    "sint64": FDP.TYPE_SINT64,
}
SCALAR_NAMES = {number: name for name, number in SCALAR_TYPES.items()}


def json_name(name: str) -> str:
    """protoc's default json_name: underscores dropped, the letter after one upper-cased."""
    return _camel(name, upper_first=False)


def map_entry_name(field_name: str) -> str:
    """protoc's name of a map field's entry message: `string_map` -> `StringMapEntry`."""
    return _camel(field_name, upper_first=True) + "Entry"


def _camel(name: str, upper_first: bool) -> str:
    out: list[str] = []
    upper = upper_first
    for c in name:
        if c == "_":
            upper = True
        elif upper:
            out.append(c.upper() if "a" <= c <= "z" else c)
            upper = False
        else:
            out.append(c)
    return "".join(out)


def float_text(v: float) -> str:
    """A float as .proto text: `inf`, `-inf`, `nan`; whole numbers without a fraction."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


def is_repeated(fd) -> bool:
    """protobuf 7 dropped FieldDescriptor.label for is_repeated."""
    flag = getattr(fd, "is_repeated", None)
    return bool(flag) if flag is not None else fd.label == fd.LABEL_REPEATED
