"""A FileDescriptorProto -> its .proto text: the form Confluent's clients register a schema in.

Owns `from_serialized(text)`: the .proto source of a base64 (standard alphabet) FileDescriptorProto,
or None when `text` is not one, which `protobuf_parse.parse` then parses as any other schema text;
imports keep their paths so that the references resolve. Options whose values are messages or
lists, and custom options, are not written. The way there is protobuf_to_descriptor.py. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re

from google.protobuf import descriptor_pb2

from kbroker.schema_registry.protobuf_descriptor_common import (
    FDP,
    SCALAR_NAMES,
    float_text,
    is_repeated,
    json_name,
)
from kbroker.schema_registry.protobuf_literals import (
    escape_bytes,
    escape_text,
    parse_int,
    unescape,
)
from kbroker.schema_registry.protobuf_model import MAX_ENUM_NUMBER, MAX_FIELD_NUMBER

__all__ = ["MAX_SERIALIZED_CHARS", "from_serialized"]

MAX_SERIALIZED_CHARS = 8 * 1024 * 1024  # a longer text is not taken for a descriptor

_FLOATS = (FDP.TYPE_DOUBLE, FDP.TYPE_FLOAT)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOTTED = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}\Z")


class _Refused(Exception):
    """The descriptor cannot be written as .proto text (names that are not identifiers, ...)."""


def from_serialized(text: object) -> str | None:
    """The .proto source of `text` when it is the base64 of a FileDescriptorProto, else None.

    Strict: the standard base64 alphabet with its padding, no whitespace, at most
    MAX_SERIALIZED_CHARS characters; the bytes must parse as a FileDescriptorProto with no unknown
    fields and names that are identifiers. Never raises.
    """
    if not isinstance(text, str) or not text or len(text) > MAX_SERIALIZED_CHARS:
        return None
    if len(text) % 4 or not _B64.match(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    fd = descriptor_pb2.FileDescriptorProto()
    try:
        fd.ParseFromString(raw)
        if _has_unknown_fields(fd):
            return None
        return _Writer(fd).file()
    except Exception:  # noqa: BLE001 - garbage of any kind is "not a descriptor"
        return None


def _has_unknown_fields(fd: descriptor_pb2.FileDescriptorProto) -> bool:
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
    except ImportError:  # an older protobuf: the top level only
        return bool(fd.UnknownFields())  # type: ignore[attr-defined]
    return len(UnknownFieldSet(fd)) > 0


def _ident(name: str) -> str:
    if not _IDENT.match(name):
        raise _Refused(f"not an identifier: {name[:100]!r}")
    return name


def _dotted(name: str) -> str:
    if not _DOTTED.match(name):
        raise _Refused(f"not a type name: {name[:100]!r}")
    return name


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def _options_text(options) -> list[str]:
    """`name = value` of the options set on a *Options message that .proto text can carry."""
    out: list[str] = []
    for fd, value in options.ListFields():
        if fd.is_extension or fd.name in ("map_entry", "uninterpreted_option", "features"):
            continue
        if fd.type in (fd.TYPE_MESSAGE, fd.TYPE_GROUP) or is_repeated(fd):
            continue
        if fd.type == fd.TYPE_BOOL:
            shown = "true" if value else "false"
        elif fd.type == fd.TYPE_ENUM:
            v = fd.enum_type.values_by_number.get(value)
            shown = v.name if v is not None else str(value)
        elif fd.type == fd.TYPE_STRING:
            shown = '"' + escape_text(value) + '"'
        elif fd.type == fd.TYPE_BYTES:
            shown = '"' + escape_bytes(value) + '"'
        elif fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
            shown = float_text(value)
        else:
            shown = str(value)
        out.append(f"{fd.name} = {shown}")
    return out


class _Writer:
    def __init__(self, fd: descriptor_pb2.FileDescriptorProto) -> None:
        self.fd = fd
        self.proto3 = fd.syntax == "proto3"

    def file(self) -> str:
        fd = self.fd
        out: list[str] = []
        if fd.syntax == "editions":
            # written as is so that the parser refuses it with its own words
            edition = descriptor_pb2.Edition.Name(fd.edition) if fd.edition else "EDITION_UNKNOWN"
            out.append(f'edition = "{edition.removeprefix("EDITION_")}";')
        elif fd.syntax in ("", "proto2", "proto3"):
            out.append(f'syntax = "{fd.syntax or "proto2"}";')
        else:
            raise _Refused(f"unknown syntax {fd.syntax[:100]!r}")
        if fd.package:
            out.append(f"package {_dotted(fd.package.lstrip('.'))};")
        public, weak = set(fd.public_dependency), set(fd.weak_dependency)
        if fd.dependency:
            out.append("")
        for i, dep in enumerate(fd.dependency):
            kind = "public " if i in public else "weak " if i in weak else ""
            out.append(f'import {kind}"{escape_text(dep)}";')
        file_options = _options_text(fd.options)
        if file_options:
            out.append("")
            out += [f"option {o};" for o in file_options]
        for m in fd.message_type:
            out.append("")
            out += self.message(m)
        for e in fd.enum_type:
            out.append("")
            out += self.enum(e)
        extends = self.extends(fd.extension)
        if extends:
            out.append("")
            out += extends
        for svc in fd.service:
            out.append("")
            out += self.service(svc)
        return "\n".join(out) + "\n"

    # -- messages --------------------------------------------------------------------------

    def message(self, d: descriptor_pb2.DescriptorProto) -> list[str]:
        return [f"message {_ident(d.name)} {{", *_indent(self.message_body(d)), "}"]

    def message_body(self, d: descriptor_pb2.DescriptorProto) -> list[str]:
        body: list[str] = []
        for r in d.reserved_range:
            body.append(self._range("reserved", r.start, r.end - 1))
        body += [f'reserved "{_ident(n)}";' for n in d.reserved_name]
        body += [f"option {o};" for o in _options_text(d.options)]
        nested_index = {n.name: i for i, n in enumerate(d.nested_type)}
        owned: dict[int, int] = {}  # a field's index -> the nested type it owns (group, map entry)
        for i, f in enumerate(d.field):
            target = nested_index.get(f.type_name.rsplit(".", 1)[-1]) if f.type_name else None
            if target is None:
                continue
            nested = d.nested_type[target]
            if f.type == FDP.TYPE_GROUP or (
                f.label == FDP.LABEL_REPEATED and nested.options.map_entry
                and f.type_name.endswith(f"{d.name}.{nested.name}")
            ):
                owned[i] = target
        consumed = set(owned.values())
        emitted_nested: set[int] = set()

        def flush(up_to: int) -> None:
            for k, n in enumerate(d.nested_type):
                if k < up_to and k not in consumed and k not in emitted_nested:
                    emitted_nested.add(k)
                    body.extend(self.message(n))

        real_oneofs: dict[int, list[int]] = {}
        for i, f in enumerate(d.field):
            if f.HasField("oneof_index") and not f.proto3_optional:
                real_oneofs.setdefault(f.oneof_index, []).append(i)
        done: set[int] = set()
        for i, f in enumerate(d.field):
            if i in done:
                continue
            if f.HasField("oneof_index") and not f.proto3_optional:
                members = real_oneofs[f.oneof_index]
                if not 0 <= f.oneof_index < len(d.oneof_decl):
                    raise _Refused("oneof_index out of range")
                decl = d.oneof_decl[f.oneof_index]
                flush(max((owned.get(k, -1) for k in members), default=-1))
                inner = [f"option {o};" for o in _options_text(decl.options)]
                for k in members:
                    inner += self.field(d, k, owned.get(k), in_oneof=True)
                    done.add(k)
                body += [f"oneof {_ident(decl.name)} {{", *_indent(inner), "}"]
                continue
            flush(owned.get(i, -1))
            body += self.field(d, i, owned.get(i), in_oneof=False)
            done.add(i)
        for r in d.extension_range:
            body.append(self._range("extensions", r.start, r.end - 1))
        body += self.extends(d.extension)
        flush(len(d.nested_type))
        for e in d.enum_type:
            body += self.enum(e)
        return body

    @staticmethod
    def _range(keyword: str, lo: int, hi: int, maximum: int = MAX_FIELD_NUMBER) -> str:
        if hi == lo:
            return f"{keyword} {lo};"
        return f"{keyword} {lo} to {'max' if hi >= maximum else hi};"

    def _label(self, f: descriptor_pb2.FieldDescriptorProto, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if f.label == FDP.LABEL_REPEATED:
            return "repeated "
        if f.label == FDP.LABEL_REQUIRED:
            return "required "
        if self.proto3:
            return "optional " if f.proto3_optional else ""
        return "optional "

    def _type_name(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        if f.HasField("type") and f.type in SCALAR_NAMES:  # (an unset type reads as TYPE_DOUBLE)
            return SCALAR_NAMES[f.type]
        if not f.type_name:
            raise _Refused(f"field {f.name[:100]!r} has no type")
        return _dotted(f.type_name)

    def field(self, d: descriptor_pb2.DescriptorProto, i: int, owned: int | None, in_oneof: bool) -> list[str]:
        f = d.field[i]
        name = _ident(f.name)
        options = self._field_options(f)
        if owned is not None and f.type == FDP.TYPE_GROUP:
            group = d.nested_type[owned]
            return [
                f"{self._label(f, in_oneof)}group {_ident(group.name)} = {f.number} {{",
                *_indent(self.message_body(group)),
                "}",
            ]
        if owned is not None:  # a map field
            entry = d.nested_type[owned]
            by_number = {x.number: x for x in entry.field}
            if set(by_number) != {1, 2} or by_number[1].type not in SCALAR_NAMES:
                raise _Refused(f"map entry {entry.name[:100]!r} is not a key and a value")
            key, value = self._type_name(by_number[1]), self._type_name(by_number[2])
            return [f"map<{key}, {value}> {name} = {f.number}{options};"]
        return [f"{self._label(f, in_oneof)}{self._type_name(f)} {name} = {f.number}{options};"]

    def _field_options(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        opts: list[str] = []
        if f.HasField("default_value"):
            opts.append(f"default = {self._default(f)}")
        if f.HasField("json_name") and f.json_name != json_name(f.name) and not f.extendee:
            opts.append(f'json_name = "{escape_text(f.json_name)}"')
        opts += _options_text(f.options)
        return f" [{', '.join(opts)}]" if opts else ""

    def _default(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        v = f.default_value
        if f.type == FDP.TYPE_STRING:
            return '"' + escape_text(v) + '"'
        if f.type == FDP.TYPE_BYTES:
            return '"' + escape_bytes(unescape(v)) + '"'
        if f.type == FDP.TYPE_BOOL:
            if v not in ("true", "false"):
                raise _Refused(f"bad bool default {v[:100]!r}")
            return v
        if f.type in _FLOATS:
            return float_text(float(v))
        if f.type in SCALAR_NAMES:
            return str(parse_int(v))
        return _ident(v)  # an enum value's name

    def extends(self, fields) -> list[str]:
        merged: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
        for f in fields:
            merged.setdefault(_dotted(f.extendee), []).append(f)
        out: list[str] = []
        for extendee, members in merged.items():
            inner: list[str] = []
            for f in members:
                if f.type == FDP.TYPE_GROUP:
                    raise _Refused("groups in extensions are not supported")
                inner.append(
                    f"{self._label(f, False)}{self._type_name(f)} {_ident(f.name)} = {f.number}"
                    f"{self._field_options(f)};"
                )
            out += [f"extend {extendee} {{", *_indent(inner), "}"]
        return out

    # -- enums and services ----------------------------------------------------------------

    def enum(self, e: descriptor_pb2.EnumDescriptorProto) -> list[str]:
        body: list[str] = []
        for r in e.reserved_range:  # inclusive
            body.append(self._range("reserved", r.start, r.end, MAX_ENUM_NUMBER))
        body += [f'reserved "{_ident(n)}";' for n in e.reserved_name]
        body += [f"option {o};" for o in _options_text(e.options)]
        for v in e.value:
            opts = _options_text(v.options)
            shown = f" [{', '.join(opts)}]" if opts else ""
            body.append(f"{_ident(v.name)} = {v.number}{shown};")
        return [f"enum {_ident(e.name)} {{", *_indent(body), "}"]

    def service(self, s: descriptor_pb2.ServiceDescriptorProto) -> list[str]:
        body = [f"option {o};" for o in _options_text(s.options)]
        for m in s.method:
            head = (
                f"rpc {_ident(m.name)} ({'stream ' if m.client_streaming else ''}{_dotted(m.input_type)}) "
                f"returns ({'stream ' if m.server_streaming else ''}{_dotted(m.output_type)})"
            )
            opts = _options_text(m.options)
            if opts:
                body += [head + " {", *_indent([f"option {o};" for o in opts]), "}"]
            else:
                body.append(head + ";")
        return [f"service {_ident(s.name)} {{", *_indent(body), "}"]
