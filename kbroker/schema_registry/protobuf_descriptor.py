"""Protobuf schemas as serialized descriptors: the form Confluent's clients send and ask for.

Confluent's Python (and Go, .NET) clients register a Protobuf schema not as .proto text but as the
base64 (standard alphabet) of a serialized `google.protobuf.FileDescriptorProto`, and their
deserializers fetch schemas with `?format=serialized`, expecting that form back. Confluent's
registry accepts both (text first, else a base64 descriptor) and stores .proto text; so does
kbroker:

- `from_serialized(text)`: the .proto source of a base64 FileDescriptorProto (None when `text` is
  not one), which `protobuf_parse.parse` then parses as any other schema text; imports keep their
  paths so that the references resolve;
- `serialized(schema)`: the base64 FileDescriptorProto of a parsed schema, laid out as protoc
  lays it out (fully-qualified type names with a leading dot, json_name, map entries as nested
  `XxxEntry` messages with `map_entry`, proto3 `optional` in synthetic oneofs, nested types in
  declaration order, map entries and groups included), so that a `DescriptorPool` loads it next
  to its dependencies and the message indexes a client computed from its own descriptor name the
  same messages here.

Options whose values are messages or lists, and custom options (extensions of the *Options
messages), are not carried across. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import math
import re

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from kbroker.schema_registry.protobuf_literals import escape_bytes, escape_text, parse_int, unescape
from kbroker.schema_registry.protobuf_model import (
    MAX_ENUM_NUMBER,
    MAX_FIELD_NUMBER,
    Enum,
    Field,
    Message,
    ProtobufSchema,
    lookup,
)

__all__ = ["MAX_SERIALIZED_CHARS", "file_descriptor", "from_serialized", "serialized"]

MAX_SERIALIZED_CHARS = 8 * 1024 * 1024  # a longer text is not taken for a descriptor
DEFAULT_FILE_NAME = "default"  # Confluent's name for a schema's own file (clients rename it anyway)

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALAR_TYPES: dict[str, int] = {
    "double": _FDP.TYPE_DOUBLE,
    "float": _FDP.TYPE_FLOAT,
    "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32,
    "fixed64": _FDP.TYPE_FIXED64,
    "fixed32": _FDP.TYPE_FIXED32,
    "bool": _FDP.TYPE_BOOL,
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
    "uint32": _FDP.TYPE_UINT32,
    "sfixed32": _FDP.TYPE_SFIXED32,
    "sfixed64": _FDP.TYPE_SFIXED64,
    "sint32": _FDP.TYPE_SINT32,
    "sint64": _FDP.TYPE_SINT64,
}
_SCALAR_NAMES = {number: name for name, number in _SCALAR_TYPES.items()}
_FLOATS = (_FDP.TYPE_DOUBLE, _FDP.TYPE_FLOAT)
_LABELS = {
    "optional": _FDP.LABEL_OPTIONAL,
    "required": _FDP.LABEL_REQUIRED,
    "repeated": _FDP.LABEL_REPEATED,
}
_PSEUDO_OPTIONS = ("default", "json_name")
_EXCLUSIVE_MAX = MAX_FIELD_NUMBER + 1  # protoc's end of a `to max` range of field numbers

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOTTED = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_B64 = re.compile(r"[A-Za-z0-9+/]+={0,2}\Z")


# ---------------------------------------------------------------------------------------------
# Shared helpers


def json_name(name: str) -> str:
    """protoc's default json_name: underscores dropped, the letter after one upper-cased."""
    out: list[str] = []
    upper = False
    for c in name:
        if c == "_":
            upper = True
        elif upper:
            out.append(c.upper() if "a" <= c <= "z" else c)
            upper = False
        else:
            out.append(c)
    return "".join(out)


def map_entry_name(field_name: str) -> str:
    """protoc's name of a map field's entry message: `string_map` -> `StringMapEntry`."""
    out: list[str] = []
    upper = True
    for c in field_name:
        if c == "_":
            upper = True
        elif upper:
            out.append(c.upper() if "a" <= c <= "z" else c)
            upper = False
        else:
            out.append(c)
    return "".join(out) + "Entry"


def _float(value: object) -> float:
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, ast.Identifier):
        value = value.name
    if isinstance(value, str):
        return float(value)  # also "inf", "-inf", "nan"
    raise ValueError(value)


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


# ---------------------------------------------------------------------------------------------
# A parsed schema -> FileDescriptorProto


def serialized(schema: ProtobufSchema) -> str:
    """The base64 (standard alphabet) FileDescriptorProto of a parsed schema (`format=serialized`)."""
    return base64.standard_b64encode(file_descriptor(schema).SerializeToString()).decode("ascii")


def file_descriptor(schema: ProtobufSchema, name: str = DEFAULT_FILE_NAME) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of a parsed schema's own file, as protoc would write it."""
    return _Describer(schema).file(name)


def _set_options(target, options: list[ast.Option], skip: tuple[str, ...] = ()) -> None:
    """Sets the options of descriptor.proto's *Options message `target` that it knows and whose
    values are scalars or enum names; others (custom options, message values) are dropped."""
    fields = target.DESCRIPTOR.fields_by_name
    for o in options:
        if o.name in skip:
            continue
        fd = fields.get(o.name)
        if fd is None or fd.type == fd.TYPE_MESSAGE or fd.type == fd.TYPE_GROUP:
            continue
        if _repeated(fd):
            continue
        value = o.value
        try:
            if fd.type == fd.TYPE_BOOL:
                if isinstance(value, ast.Identifier):
                    value = {"true": True, "false": False}[value.name]
                if not isinstance(value, bool):
                    continue
            elif fd.type == fd.TYPE_ENUM:
                name = value.name if isinstance(value, ast.Identifier) else value
                if isinstance(name, str):
                    value = fd.enum_type.values_by_name[name].number
                else:
                    value = parse_int(name)
            elif fd.type == fd.TYPE_STRING:
                if not isinstance(value, str):
                    continue
                value = unescape(value).decode("utf-8", "replace")
            elif fd.type == fd.TYPE_BYTES:
                if not isinstance(value, str):
                    continue
                value = unescape(value)
            elif fd.type in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
                value = _float(value)
            else:
                value = parse_int(value)
            setattr(target, o.name, value)
        except (KeyError, ValueError, TypeError, OverflowError):
            continue


def _repeated(fd) -> bool:
    """protobuf 7 dropped FieldDescriptor.label for is_repeated."""
    flag = getattr(fd, "is_repeated", None)
    return bool(flag) if flag is not None else fd.label == fd.LABEL_REPEATED


def _option(options: list[ast.Option], name: str) -> object | None:
    for o in options:
        if o.name == name:
            return o.value
    return None


class _Describer:
    def __init__(self, schema: ProtobufSchema) -> None:
        self.s = schema
        self.proto3 = schema.syntax == "proto3"
        self._orders: dict[str, list[tuple[str, str]]] | None = None

    def file(self, name: str) -> descriptor_pb2.FileDescriptorProto:
        s = self.s
        fd = descriptor_pb2.FileDescriptorProto(name=name)
        if s.package:
            fd.package = s.package
        deps = list(dict.fromkeys(s.imports + s.public_imports + s.weak_imports))
        fd.dependency.extend(deps)
        fd.public_dependency.extend(sorted({deps.index(p) for p in s.public_imports}))
        fd.weak_dependency.extend(sorted({deps.index(w) for w in s.weak_imports if w not in s.public_imports}))
        for m in s.messages:
            fd.message_type.append(self.message(m))
        for e in s.enums:
            fd.enum_type.append(self.enum(e))
        for scope, extendee, fields in s.extends:
            if scope == s.package:
                fd.extension.extend(self.extension(f, extendee) for f in fields if not f.is_group)
        for svc in s.services:
            fd.service.append(self.service(svc))
        _set_options(fd.options, s.options)
        if not fd.options.ListFields():
            fd.ClearField("options")
        if self.proto3:
            fd.syntax = "proto3"
        return fd

    # -- messages --------------------------------------------------------------------------

    def message(self, m: Message) -> descriptor_pb2.DescriptorProto:
        d = descriptor_pb2.DescriptorProto(name=m.name)
        oneof_index = {}
        for name in m.oneofs:
            oneof_index[name] = len(d.oneof_decl)
            o = d.oneof_decl.add(name=name)
            _set_options(o.options, m.oneof_options.get(name, []))
            if not o.options.ListFields():
                o.ClearField("options")
        synthetic: list[descriptor_pb2.FieldDescriptorProto] = []
        for f in m.fields.values():
            d.field.append(self.field(f, m.full_name))
            p = d.field[-1]  # (append copies)
            if f.oneof is not None:
                p.oneof_index = oneof_index[f.oneof]
            elif self.proto3 and f.label == "optional":
                p.proto3_optional = True
                synthetic.append(p)
        taken = {f.name for f in m.fields.values()} | set(m.oneofs)
        taken |= {x.name for x in m.messages} | {e.name for e in m.enums}
        for p in synthetic:  # protoc: after the real oneofs, named "_" + the field's name
            name = p.name if p.name.startswith("_") else "_" + p.name
            while name in taken:
                name = "X" + name
            taken.add(name)
            p.oneof_index = len(d.oneof_decl)
            d.oneof_decl.add(name=name)
        by_name = {x.name: x for x in m.messages}
        maps = {f.name: f for f in m.fields.values() if f.kind == "map"}
        for kind, name in self.nested_order(m):
            if kind == "type" and name in by_name:
                d.nested_type.append(self.message(by_name.pop(name)))
            elif kind == "map" and name in maps:
                d.nested_type.append(self.map_entry(maps.pop(name)))
        for x in by_name.values():  # not seen in the text's order (cannot happen; be safe)
            d.nested_type.append(self.message(x))
        for f in maps.values():
            d.nested_type.append(self.map_entry(f))
        for e in m.enums:
            d.enum_type.append(self.enum(e))
        for lo, hi in m.extension_ranges:
            d.extension_range.add(start=lo, end=min(hi, MAX_FIELD_NUMBER) + 1)
        for scope, extendee, fields in self.s.extends:
            if scope == m.full_name:
                d.extension.extend(self.extension(f, extendee) for f in fields if not f.is_group)
        for lo, hi in m.reserved_numbers:
            d.reserved_range.add(start=lo, end=min(hi, MAX_FIELD_NUMBER) + 1)
        d.reserved_name.extend(m.reserved_names)
        _set_options(d.options, m.options, skip=("map_entry",))
        if not d.options.ListFields():
            d.ClearField("options")
        return d

    def nested_order(self, m: Message) -> list[tuple[str, str]]:
        """The order of `m`'s nested messages, groups and map entries as declared (protoc's
        nested_type order): the model keeps messages and groups in order but not where the map
        fields stand among them, so the text is read again when it matters."""
        maps = [("map", f.name) for f in m.fields.values() if f.kind == "map"]
        types = [("type", x.name) for x in m.messages]
        if not maps or not types:
            return types + maps
        if self._orders is None:
            self._orders = _declaration_orders(self.s.text)
        return self._orders.get(m.full_name, types + maps)

    def map_entry(self, f: Field) -> descriptor_pb2.DescriptorProto:
        d = descriptor_pb2.DescriptorProto(name=map_entry_name(f.name))
        assert f.key_type is not None and f.value_kind is not None and f.value_type is not None
        d.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL, type=_SCALAR_TYPES[f.key_type],
                    json_name="key")
        value = d.field.add(name="value", number=2, label=_FDP.LABEL_OPTIONAL, json_name="value")
        self._type(value, f.value_kind, f.value_type)
        d.options.map_entry = True
        return d

    @staticmethod
    def _type(p: descriptor_pb2.FieldDescriptorProto, kind: str, type_name: str) -> None:
        if kind == "scalar":
            p.type = _SCALAR_TYPES[type_name]
        else:
            p.type = _FDP.TYPE_ENUM if kind == "enum" else _FDP.TYPE_MESSAGE
            p.type_name = "." + type_name

    def field(self, f: Field, scope: str, extension: bool = False) -> descriptor_pb2.FieldDescriptorProto:
        p = descriptor_pb2.FieldDescriptorProto(name=f.name, number=f.number)
        if f.kind == "map":
            p.label = _FDP.LABEL_REPEATED
            p.type = _FDP.TYPE_MESSAGE
            p.type_name = f".{scope}.{map_entry_name(f.name)}"
        else:
            p.label = _LABELS.get(f.label or "optional", _FDP.LABEL_OPTIONAL)
            if f.is_group:
                p.type = _FDP.TYPE_GROUP
                p.type_name = "." + f.type_name
            else:
                self._type(p, f.kind, f.type_name)
        written = _option(f.options, "json_name")
        if isinstance(written, str):
            p.json_name = unescape(written).decode("utf-8", "replace")
        elif not extension:
            p.json_name = json_name(f.name)
        default = _option(f.options, "default")
        if default is not None and f.kind in ("scalar", "enum"):
            text = self._default(f, default)
            if text is not None:
                p.default_value = text
        _set_options(p.options, f.options, skip=_PSEUDO_OPTIONS)
        if not p.options.ListFields():
            p.ClearField("options")
        return p

    @staticmethod
    def _default(f: Field, value: object) -> str | None:
        """protoc's default_value text: strings as is, bytes C-escaped, enums by value name."""
        try:
            if f.kind == "enum":
                return value.name if isinstance(value, ast.Identifier) else None
            t = f.type_name
            if t == "string":
                return unescape(value).decode("utf-8", "replace") if isinstance(value, str) else None
            if t == "bytes":
                return escape_bytes(unescape(value)) if isinstance(value, str) else None
            if t == "bool":
                if isinstance(value, ast.Identifier):
                    value = value.name == "true"
                return ("true" if value else "false") if isinstance(value, bool) else None
            if t in ("double", "float"):
                return _float_text(_float(value))
            return str(parse_int(value))
        except (ValueError, TypeError, OverflowError):
            return None

    def extension(self, f: Field, extendee: str) -> descriptor_pb2.FieldDescriptorProto:
        p = self.field(f, "", extension=True)
        p.extendee = "." + extendee
        if self.proto3 and f.label == "optional":
            p.proto3_optional = True
        return p

    # -- enums and services ----------------------------------------------------------------

    def enum(self, e: Enum) -> descriptor_pb2.EnumDescriptorProto:
        d = descriptor_pb2.EnumDescriptorProto(name=e.name)
        for name, number, options in e.values:
            v = d.value.add(name=name, number=number)
            _set_options(v.options, options)
            if not v.options.ListFields():
                v.ClearField("options")
        for lo, hi in e.reserved_numbers:
            d.reserved_range.add(start=lo, end=min(hi, MAX_ENUM_NUMBER))  # inclusive
        d.reserved_name.extend(e.reserved_names)
        _set_options(d.options, e.options)
        if not d.options.ListFields():
            d.ClearField("options")
        return d

    def service(self, svc: ast.Service) -> descriptor_pb2.ServiceDescriptorProto:
        d = descriptor_pb2.ServiceDescriptorProto(name=svc.name)
        for el in svc.elements:
            if isinstance(el, ast.Option):
                _set_options(d.options, [el])
            elif isinstance(el, ast.Method):
                m = d.method.add(name=el.name)
                m.input_type = self._qualify(el.input_type.type)
                m.output_type = self._qualify(el.output_type.type)
                if el.input_type.stream:
                    m.client_streaming = True
                if el.output_type.stream:
                    m.server_streaming = True
                _set_options(m.options, [o for o in el.elements if isinstance(o, ast.Option)])
                if not m.options.ListFields():
                    m.ClearField("options")
        if not d.options.ListFields():
            d.ClearField("options")
        return d

    def _qualify(self, name: str) -> str:
        found = lookup(self.s.types, name, self.s.package)
        return "." + found.full_name if found is not None else name


_ORDER_PARSER: Parser | None = None


def _declaration_orders(text: str) -> dict[str, list[tuple[str, str]]]:
    """For each message of the file (by full name), its nested messages and groups ("type", name)
    and map fields ("map", field name) in declaration order."""
    global _ORDER_PARSER
    if _ORDER_PARSER is None:
        _ORDER_PARSER = Parser()
    try:
        root = _ORDER_PARSER.parse(text)
    except Exception:  # noqa: BLE001 - the text was parsed before; fall back to the model's order
        return {}
    package = next((p.name for p in root.file_elements if isinstance(p, ast.Package)), "")
    out: dict[str, list[tuple[str, str]]] = {}

    def walk(el: ast.Message | ast.Group, scope: str) -> None:
        full = f"{scope}.{el.name}" if scope else el.name
        order: list[tuple[str, str]] = []
        out[full] = order
        for sub in el.elements:
            if isinstance(sub, (ast.Message, ast.Group)):
                order.append(("type", sub.name))
                walk(sub, full)
            elif isinstance(sub, ast.MapField):
                order.append(("map", sub.name))
            elif isinstance(sub, ast.OneOf):
                for g in sub.elements:
                    if isinstance(g, ast.Group):
                        order.append(("type", g.name))
                        walk(g, full)

    for el in root.file_elements:
        if isinstance(el, ast.Message):
            walk(el, package)
    return out


# ---------------------------------------------------------------------------------------------
# FileDescriptorProto -> .proto text


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
        if fd.type in (fd.TYPE_MESSAGE, fd.TYPE_GROUP) or _repeated(fd):
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
            shown = _float_text(value)
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
            if f.type == _FDP.TYPE_GROUP or (
                f.label == _FDP.LABEL_REPEATED and nested.options.map_entry
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
        if f.label == _FDP.LABEL_REPEATED:
            return "repeated "
        if f.label == _FDP.LABEL_REQUIRED:
            return "required "
        if self.proto3:
            return "optional " if f.proto3_optional else ""
        return "optional "

    def _type_name(self, f: descriptor_pb2.FieldDescriptorProto) -> str:
        if f.HasField("type") and f.type in _SCALAR_NAMES:  # (an unset type reads as TYPE_DOUBLE)
            return _SCALAR_NAMES[f.type]
        if not f.type_name:
            raise _Refused(f"field {f.name[:100]!r} has no type")
        return _dotted(f.type_name)

    def field(self, d: descriptor_pb2.DescriptorProto, i: int, owned: int | None, in_oneof: bool) -> list[str]:
        f = d.field[i]
        name = _ident(f.name)
        options = self._field_options(f)
        if owned is not None and f.type == _FDP.TYPE_GROUP:
            group = d.nested_type[owned]
            return [
                f"{self._label(f, in_oneof)}group {_ident(group.name)} = {f.number} {{",
                *_indent(self.message_body(group)),
                "}",
            ]
        if owned is not None:  # a map field
            entry = d.nested_type[owned]
            by_number = {x.number: x for x in entry.field}
            if set(by_number) != {1, 2} or by_number[1].type not in _SCALAR_NAMES:
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
        if f.type == _FDP.TYPE_STRING:
            return '"' + escape_text(v) + '"'
        if f.type == _FDP.TYPE_BYTES:
            return '"' + escape_bytes(unescape(v)) + '"'
        if f.type == _FDP.TYPE_BOOL:
            if v not in ("true", "false"):
                raise _Refused(f"bad bool default {v[:100]!r}")
            return v
        if f.type in _FLOATS:
            return _float_text(float(v))
        if f.type in _SCALAR_NAMES:
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
                if f.type == _FDP.TYPE_GROUP:
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
