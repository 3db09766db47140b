"""The resolved model of a .proto file and its normalized text (Confluent's `normalize=true`).

Owns the records the parser (`protobuf_parse`) builds and the differ (`protobuf_diff`) compares:
`Field`, `Message`, `Enum` and `ProtobufSchema` (with Confluent's message indexes), the language's
limits (scalar types, field and enum number ranges), protobuf's name lookup (`lookup`), and the
printer of the normalized form (`ProtobufSchema.canonical()`). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from proto_schema_parser import ast

from kbroker.schema_registry.protobuf_literals import parse_int, quoted

__all__ = [
    "MAP_KEY_TYPES",
    "MAX_ENUM_NUMBER",
    "MAX_FIELD_NUMBER",
    "SCALARS",
    "Enum",
    "Field",
    "Message",
    "ProtobufSchema",
    "lookup",
]

SCALARS = frozenset(
    [
        "double",
        "float",
        "int32",
        "int64",
        "uint32",
        "uint64",
        "sint32",
        "sint64",
        "fixed32",
        "fixed64",
        "sfixed32",
        "sfixed64",
        "bool",
        "string",
        "bytes",
    ]
)
MAP_KEY_TYPES = SCALARS - {"double", "float", "bytes"}  # protoc: integral types and string
MAX_FIELD_NUMBER = 536_870_911  # 2**29 - 1
MAX_ENUM_NUMBER = 2**31 - 1


# ---------------------------------------------------------------------------------------------
# The resolved model


@dataclass
class Field:
    """A message field (including oneof members and map fields) with its type resolved.

    `kind` is "scalar", "enum", "message" or "map"; `type_name` the scalar's name or the
    fully-qualified name (no leading dot) of the enum or message; for a map, `key_type` is a scalar
    and `value_kind`/`value_type` describe the value as kind/type_name do.
    """

    name: str
    number: int
    label: (
        str | None
    )  # "optional", "required", "repeated" or None (proto3 implicit, oneof member)
    written_type: str
    kind: str = ""
    type_name: str = ""
    oneof: str | None = None
    key_type: str | None = None
    value_kind: str | None = None
    value_type: str | None = None
    options: list[ast.Option] = field(default_factory=list)
    is_group: bool = False


@dataclass
class Message:
    name: str
    full_name: str
    package: str
    origin: str  # "" for the schema's own file, else the import path it came from
    fields: dict[int, Field] = field(
        default_factory=dict
    )  # by number, in declaration order
    oneofs: dict[str, list[int]] = field(default_factory=dict)
    oneof_options: dict[str, list[ast.Option]] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)  # nested, in order
    enums: list[Enum] = field(default_factory=list)
    reserved_numbers: list[tuple[int, int]] = field(
        default_factory=list
    )  # inclusive ranges
    reserved_names: list[str] = field(default_factory=list)
    extension_ranges: list[tuple[int, int]] = field(default_factory=list)
    options: list[ast.Option] = field(default_factory=list)
    opaque: bool = False  # a well-known type known by name only

    def is_reserved(self, number: int) -> bool:
        return any(lo <= number <= hi for lo, hi in self.reserved_numbers)


@dataclass
class Enum:
    name: str
    full_name: str
    package: str
    origin: str
    values: list[tuple[str, int, list[ast.Option]]] = field(default_factory=list)
    reserved_numbers: list[tuple[int, int]] = field(default_factory=list)
    reserved_names: list[str] = field(default_factory=list)
    options: list[ast.Option] = field(default_factory=list)


@dataclass
class ProtobufSchema:
    """A parsed, resolved and validated .proto file (and the files it imports)."""

    text: str
    syntax: str  # "proto2" or "proto3"
    package: str
    imports: list[str]
    public_imports: list[str]
    weak_imports: list[str]
    options: list[ast.Option]
    messages: list[
        Message
    ]  # top level, in file order: message index [i] is messages[i]
    enums: list[Enum]
    types: dict[
        str, Message | Enum
    ]  # every type visible, by full name (imports included)
    references: dict[str, str]
    services: list[ast.Service]
    extends: list[tuple[str, str, list[Field]]]  # (scope, resolved extendee, fields)

    def message_names(self) -> list[str]:
        """Full names of the top-level messages in file order (Confluent's message index [i])."""
        return [m.full_name for m in self.messages]

    def all_message_names(self) -> list[str]:
        """Full names of every message of this file, nested ones after their parent (depth first)."""
        out: list[str] = []

        def walk(ms: list[Message]) -> None:
            for m in ms:
                out.append(m.full_name)
                walk(m.messages)

        walk(self.messages)
        return out

    def message_indexes(self, full_name: str) -> list[int]:
        """Confluent's message indexes of a message of this file: [0] for the first top-level one."""
        name = full_name.lstrip(".")

        def walk(ms: list[Message], path: list[int]) -> list[int] | None:
            for i, m in enumerate(ms):
                if m.full_name == name:
                    return path + [i]
                found = walk(m.messages, path + [i])
                if found is not None:
                    return found
            return None

        found = walk(self.messages, [])
        if found is None:
            raise KeyError(full_name)
        return found

    def message_for_indexes(self, indexes: list[int]) -> str:
        """The full name of the message at Confluent's message indexes (the inverse of message_indexes)."""
        ms, m = self.messages, None
        for i in indexes or [0]:
            if not 0 <= i < len(ms):
                raise KeyError(indexes)
            m = ms[i]
            ms = m.messages
        assert m is not None
        return m.full_name

    def canonical(self) -> str:
        """The normalized text (Confluent's `normalize=true`): see `_Printer`."""
        return _Printer(self).file()

    def __str__(self) -> str:
        return self.text


def lookup(types: dict[str, Message | Enum], name: str, scope: str) -> Message | Enum | None:
    """Protobuf's scoping: `.a.B` is absolute, else search from the innermost scope outwards; None
    when `name` names no type of `types` from `scope`."""
    if name.startswith("."):
        return types.get(name[1:])
    parts = scope.split(".") if scope else []
    first = name.split(".", 1)[0]
    while True:
        prefix = ".".join(parts)
        candidate = f"{prefix}.{name}" if prefix else name
        if candidate in types:
            return types[candidate]
        head = f"{prefix}.{first}" if prefix else first
        if head != candidate and head in types:
            # protoc: the first component binds here, so the rest must resolve inside it
            return None
        if not parts:
            return None
        parts.pop()


# ---------------------------------------------------------------------------------------------
# The normalized form


class _Printer:
    """Confluent's normalized text (ProtobufSchemaUtils with normalize=true), re-implemented:

    - `syntax` is written for proto3 only; then `package`; imports sorted and deduplicated;
    - options sorted by name, their values in one format (numbers as decimals, strings quoted);
    - top-level and nested messages keep their order (it gives the message indexes), then enums;
    - in a message: reserved entries one per line sorted by number (names last), options, fields
      (outside oneofs) by number, oneofs by their first field's number with members by number,
      extension ranges, extends, nested messages then nested enums;
    - message and enum field types fully qualified with a leading dot, map values too;
    - enum values sorted by number then name; comments and blank lines dropped; 2-space indent.
    """

    def __init__(self, schema: ProtobufSchema) -> None:
        self.s = schema

    def file(self) -> str:
        s = self.s
        out: list[str] = []
        if s.syntax == "proto3":
            out.append('syntax = "proto3";')
        if s.package:
            out.append(f"package {s.package};")
        imports = sorted(set(s.imports + s.weak_imports))
        public = sorted(set(s.public_imports))
        if imports or public:
            out.append("")
            out += [f'import "{i}";' for i in imports]
            out += [f'import public "{i}";' for i in public]
        if s.options:
            out.append("")
            out += [f"option {self.option(o)};" for o in _sorted_options(s.options)]
        if s.messages or s.enums:
            out.append("")
            for m in s.messages:
                out += self.message(m)
            for e in s.enums:
                out += self.enum(e)
        top_extends = [x for x in s.extends if x[0] == s.package]
        if top_extends:
            out.append("")
            out += self.extends(top_extends)
        if s.services:
            out.append("")
            for svc in s.services:
                out += self.service(svc)
        return "\n".join(out) + "\n"

    def option(self, o: ast.Option) -> str:
        return f"{o.name} = {_value(o.value)}"

    def compact(self, options: list[ast.Option]) -> str:
        if not options:
            return ""
        return " [" + ", ".join(self.option(o) for o in _sorted_options(options)) + "]"

    def field(self, f: Field) -> str:
        if f.kind == "scalar" and f.type_name in INTEGER_SCALARS:  # a hex or octal default: its number
            f = dataclasses.replace(f, options=[_numeric_default(o) for o in f.options])
        if f.kind == "map":
            value = f.value_type if f.value_kind == "scalar" else f".{f.value_type}"
            return f"map<{f.key_type}, {value}> {f.name} = {f.number}{self.compact(f.options)};"
        typ = f.type_name if f.kind == "scalar" else f".{f.type_name}"
        label = f"{f.label} " if f.label else ""
        return f"{label}{typ} {f.name} = {f.number}{self.compact(f.options)};"

    def message(self, m: Message) -> list[str]:
        body: list[str] = []
        numbers = sorted(m.reserved_numbers)
        body += [
            f"reserved {lo};" if lo == hi else f"reserved {lo} to {_max(hi)};"
            for lo, hi in numbers
        ]
        body += [f'reserved "{n}";' for n in sorted(m.reserved_names)]
        body += [f"option {self.option(o)};" for o in _sorted_options(m.options)]
        groups = {f.type_name for f in m.fields.values() if f.is_group}
        for n in sorted(m.fields):
            f = m.fields[n]
            if f.oneof is None:
                body += self.group(m, f) if f.is_group else [self.field(f)]
        for name, members in sorted(m.oneofs.items(), key=lambda kv: min(kv[1])):
            body.append(f"oneof {name} {{")
            inner = [
                f"option {self.option(o)};"
                for o in _sorted_options(m.oneof_options.get(name, []))
            ]
            for n in sorted(members):
                f = m.fields[n]
                inner += self.group(m, f) if f.is_group else [self.field(f)]
            body += _indent(inner) + ["}"]
        body += [
            f"extensions {lo};" if lo == hi else f"extensions {lo} to {_max(hi)};"
            for lo, hi in sorted(m.extension_ranges)
        ]
        body += self.extends([x for x in self.s.extends if x[0] == m.full_name])
        for sub in m.messages:
            if sub.full_name not in groups:
                body += self.message(sub)
        for e in m.enums:
            body += self.enum(e)
        return [f"message {m.name} {{", *_indent(body), "}"]

    def group(self, m: Message, f: Field) -> list[str]:
        g = self.s.types[f.type_name]
        assert isinstance(g, Message)
        label = f"{f.label} " if f.label else ""
        inner = self.message(g)[1:-1]
        return [f"{label}group {g.name} = {f.number} {{", *inner, "}"]

    def enum(self, e: Enum) -> list[str]:
        body: list[str] = []
        body += [
            f"reserved {lo};"
            if lo == hi
            else f"reserved {lo} to {_max(hi, MAX_ENUM_NUMBER)};"
            for lo, hi in sorted(e.reserved_numbers)
        ]
        body += [f'reserved "{n}";' for n in sorted(e.reserved_names)]
        body += [f"option {self.option(o)};" for o in _sorted_options(e.options)]
        for name, number, options in sorted(e.values, key=lambda v: (v[1], v[0])):
            body.append(f"{name} = {number}{self.compact(options)};")
        return [f"enum {e.name} {{", *_indent(body), "}"]

    def extends(self, extends: list[tuple[str, str, list[Field]]]) -> list[str]:
        merged: dict[str, list[Field]] = {}
        for _, extendee, fields in extends:
            merged.setdefault(extendee, []).extend(fields)
        out: list[str] = []
        for extendee, fields in merged.items():
            out.append(f"extend .{extendee} {{")
            out += _indent(
                [self.field(f) for f in sorted(fields, key=lambda f: f.number)]
            )
            out.append("}")
        return out

    def service(self, svc: ast.Service) -> list[str]:
        body: list[str] = []
        body += [
            f"option {self.option(o)};"
            for o in _sorted_options(
                [o for o in svc.elements if isinstance(o, ast.Option)]
            )
        ]
        for m in svc.elements:
            if not isinstance(m, ast.Method):
                continue
            inp = self._qualify(m.input_type.type)
            outp = self._qualify(m.output_type.type)
            head = (
                f"rpc {m.name} ({'stream ' if m.input_type.stream else ''}{inp}) "
                f"returns ({'stream ' if m.output_type.stream else ''}{outp})"
            )
            opts = [o for o in m.elements if isinstance(o, ast.Option)]
            if opts:
                body += [
                    head + " {",
                    *_indent(
                        [f"option {self.option(o)};" for o in _sorted_options(opts)]
                    ),
                    "};",
                ]
            else:
                body.append(head + ";")
        return [f"service {svc.name} {{", *_indent(body), "}"]

    def _qualify(self, name: str) -> str:
        found = lookup(self.s.types, name, self.s.package)
        assert found is not None  # the parser resolved every rpc's types
        return "." + found.full_name


def _max(hi: int, maximum: int = MAX_FIELD_NUMBER) -> str:
    return "max" if hi >= maximum else str(hi)


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def _sorted_options(options: list[ast.Option]) -> list[ast.Option]:
    return sorted(
        options, key=lambda o: o.name
    )  # stable: repeated options keep their order


INTEGER_SCALARS = frozenset({"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
                             "sfixed32", "sfixed64"})


def _numeric_default(o: ast.Option) -> ast.Option:
    if o.name == "default" and isinstance(o.value, str):
        try:
            return dataclasses.replace(o, value=parse_int(o.value))
        except ValueError:
            return o
    return o


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return quoted(v)
    if isinstance(v, ast.Identifier):
        return v.name
    if isinstance(v, ast.MessageLiteral):
        parts = [
            f"{e.name}: {_value(e.value)}"
            for e in v.elements
            if isinstance(e, ast.MessageLiteralField)
        ]
        return "{ " + ", ".join(parts) + " }" if parts else "{}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return str(v)
