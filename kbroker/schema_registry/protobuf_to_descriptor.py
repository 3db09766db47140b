"""A parsed Protobuf schema -> its FileDescriptorProto, as protoc writes it (`format=serialized`).

Owns `serialized(schema)` and `file_descriptor(schema)`: the base64 FileDescriptorProto of a
parsed schema, laid out as protoc lays it out (fully-qualified type names with a leading dot,
json_name, map entries as nested `XxxEntry` messages with `map_entry`, proto3 `optional` in
synthetic oneofs, nested types in declaration order, map entries and groups included), so that a
`DescriptorPool` loads it next to its dependencies and the message indexes a client computed from
its own descriptor name the same messages here. Options whose values are messages or lists, and
custom options, are dropped. The way back is protobuf_from_descriptor.py. Pure: no I/O.
"""

from __future__ import annotations

import base64

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from kbroker.schema_registry.protobuf_descriptor_common import (
    FDP,
    SCALAR_TYPES,
    float_text,
    is_repeated,
    json_name,
    map_entry_name,
)
from kbroker.schema_registry.protobuf_literals import escape_bytes, parse_int, unescape
from kbroker.schema_registry.protobuf_model import (
    MAX_ENUM_NUMBER,
    MAX_FIELD_NUMBER,
    Enum,
    Field,
    Message,
    ProtobufSchema,
    lookup,
)

__all__ = ["DEFAULT_FILE_NAME", "file_descriptor", "serialized"]

DEFAULT_FILE_NAME = "default"  # Confluent's name for a schema's own file (clients rename it anyway)

_LABELS = {
    "optional": FDP.LABEL_OPTIONAL,
    "required": FDP.LABEL_REQUIRED,
    "repeated": FDP.LABEL_REPEATED,
}
_PSEUDO_OPTIONS = ("default", "json_name")


def serialized(schema: ProtobufSchema) -> str:
    """The base64 (standard alphabet) FileDescriptorProto of a parsed schema (`format=serialized`)."""
    return base64.standard_b64encode(file_descriptor(schema).SerializeToString()).decode("ascii")


def file_descriptor(schema: ProtobufSchema, name: str = DEFAULT_FILE_NAME) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of a parsed schema's own file, as protoc would write it."""
    return _Describer(schema).file(name)


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
        if is_repeated(fd):
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
        d.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL, type=SCALAR_TYPES[f.key_type],
                    json_name="key")
        value = d.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL, json_name="value")
        self._type(value, f.value_kind, f.value_type)
        d.options.map_entry = True
        return d

    @staticmethod
    def _type(p: descriptor_pb2.FieldDescriptorProto, kind: str, type_name: str) -> None:
        if kind == "scalar":
            p.type = SCALAR_TYPES[type_name]
        else:
            p.type = FDP.TYPE_ENUM if kind == "enum" else FDP.TYPE_MESSAGE
            p.type_name = "." + type_name

    def field(self, f: Field, scope: str, extension: bool = False) -> descriptor_pb2.FieldDescriptorProto:
        p = descriptor_pb2.FieldDescriptorProto(name=f.name, number=f.number)
        if f.kind == "map":
            p.label = FDP.LABEL_REPEATED
            p.type = FDP.TYPE_MESSAGE
            p.type_name = f".{scope}.{map_entry_name(f.name)}"
        else:
            p.label = _LABELS.get(f.label or "optional", FDP.LABEL_OPTIONAL)
            if f.is_group:
                p.type = FDP.TYPE_GROUP
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
                return float_text(_float(value))
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
