"""Parsing a .proto file for the registry: syntax, imports, name resolution and validation.

`parse(text, references)` runs `proto-schema-parser` (a pure-Python ANTLR grammar of the .proto
language), loads the imports from the references (or, for the well-known google/protobuf, google/type
and confluent files, knows their types by name only), then `_Builder` declares every type, resolves
field types by protobuf's scoping and refuses what protoc would refuse. The result is the model of
`protobuf_model`. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from antlr4.error.ErrorListener import ErrorListener
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.protobuf_literals import parse_int
from kbroker.schema_registry.protobuf_model import (
    MAP_KEY_TYPES,
    MAX_ENUM_NUMBER,
    MAX_FIELD_NUMBER,
    SCALARS,
    Enum,
    Field,
    Message,
    ProtobufSchema,
    lookup,
)

__all__ = ["parse"]

FIRST_RESERVED_BY_PROTOBUF, LAST_RESERVED_BY_PROTOBUF = 19_000, 19_999


# Imports that need no reference: the files protoc and Confluent ship.  Their types are known by
# name (and kind) only.  "E:" marks an enum.
_WELL_KNOWN_FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "google/protobuf/any.proto": ("google.protobuf", ("Any",)),
    "google/protobuf/api.proto": ("google.protobuf", ("Api", "Method", "Mixin")),
    "google/protobuf/duration.proto": ("google.protobuf", ("Duration",)),
    "google/protobuf/empty.proto": ("google.protobuf", ("Empty",)),
    "google/protobuf/field_mask.proto": ("google.protobuf", ("FieldMask",)),
    "google/protobuf/source_context.proto": ("google.protobuf", ("SourceContext",)),
    "google/protobuf/struct.proto": (
        "google.protobuf",
        ("Struct", "Value", "ListValue", "E:NullValue"),
    ),
    "google/protobuf/timestamp.proto": ("google.protobuf", ("Timestamp",)),
    "google/protobuf/type.proto": (
        "google.protobuf",
        (
            "Type",
            "Field",
            "E:Field.Kind",
            "E:Field.Cardinality",
            "Enum",
            "EnumValue",
            "Option",
            "E:Syntax",
        ),
    ),
    "google/protobuf/wrappers.proto": (
        "google.protobuf",
        (
            "DoubleValue",
            "FloatValue",
            "Int64Value",
            "UInt64Value",
            "Int32Value",
            "UInt32Value",
            "BoolValue",
            "StringValue",
            "BytesValue",
        ),
    ),
    "google/protobuf/descriptor.proto": (
        "google.protobuf",
        (
            "FileDescriptorSet",
            "FileDescriptorProto",
            "DescriptorProto",
            "ExtensionRangeOptions",
            "FieldDescriptorProto",
            "OneofDescriptorProto",
            "EnumDescriptorProto",
            "EnumValueDescriptorProto",
            "ServiceDescriptorProto",
            "MethodDescriptorProto",
            "FileOptions",
            "MessageOptions",
            "FieldOptions",
            "OneofOptions",
            "EnumOptions",
            "EnumValueOptions",
            "ServiceOptions",
            "MethodOptions",
            "UninterpretedOption",
            "FeatureSet",
            "FeatureSetDefaults",
            "SourceCodeInfo",
            "GeneratedCodeInfo",
            "E:Edition",
        ),
    ),
    "confluent/meta.proto": ("confluent", ("Meta",)),
    "confluent/type/decimal.proto": ("confluent.type", ("Decimal",)),
    "google/type/calendar_period.proto": ("google.type", ("E:CalendarPeriod",)),
    "google/type/color.proto": ("google.type", ("Color",)),
    "google/type/date.proto": ("google.type", ("Date",)),
    "google/type/datetime.proto": ("google.type", ("DateTime", "TimeZone")),
    "google/type/dayofweek.proto": ("google.type", ("E:DayOfWeek",)),
    "google/type/expr.proto": ("google.type", ("Expr",)),
    "google/type/fraction.proto": ("google.type", ("Fraction",)),
    "google/type/interval.proto": ("google.type", ("Interval",)),
    "google/type/latlng.proto": ("google.type", ("LatLng",)),
    "google/type/money.proto": ("google.type", ("Money",)),
    "google/type/month.proto": ("google.type", ("E:Month",)),
    "google/type/phone_number.proto": (
        "google.type",
        ("PhoneNumber", "PhoneNumber.ShortCode"),
    ),
    "google/type/postal_address.proto": ("google.type", ("PostalAddress",)),
    "google/type/quaternion.proto": ("google.type", ("Quaternion",)),
    "google/type/timeofday.proto": ("google.type", ("TimeOfDay",)),
}


# ---------------------------------------------------------------------------------------------
# Parsing


class _RaiseOnError(ErrorListener):
    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):
        raise InvalidSchema(f"line {line}:{column}: {msg}")


def _quiet(recognizer) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_RaiseOnError())


_PARSER = Parser(setup_lexer=_quiet, setup_parser=_quiet)


def _parse_file(text: str, where: str) -> ast.File:
    if not isinstance(text, str):
        raise InvalidSchema(f"{where}: the schema must be a string")
    try:
        parsed = _PARSER.parse(text)
    except InvalidSchema as e:
        raise InvalidSchema(f"{where}: {e}") from None
    except (
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
    ) as e:  # the parser's own visitor
        raise InvalidSchema(f"{where}: cannot parse: {e}") from None
    if parsed.edition is not None:
        raise InvalidSchema(
            f"{where}: editions are not supported (edition {parsed.edition!r})"
        )
    if parsed.syntax not in (None, "proto2", "proto3"):
        raise InvalidSchema(f"{where}: unknown syntax {parsed.syntax!r}")
    return parsed


def parse(text: str, references: dict[str, str] | None = None) -> ProtobufSchema:
    """Parse and validate a .proto file; `references` maps import paths to their .proto text.

    Raises InvalidSchema for bad syntax, unresolved imports or types, duplicate or reserved field
    numbers and names, and what else protoc would refuse among the checks listed in `_Builder`.
    """
    references = dict(references or {})
    root = _parse_file(text, "schema")
    types: dict[str, Message | Enum] = {}
    files: dict[str, ast.File] = {}
    # Load the imports (transitively) first so their types are known.
    pending = [i.name for i in root.file_elements if isinstance(i, ast.Import)]
    builders: list[_Builder] = []
    loaded: set[str] = set()
    while pending:
        path = pending.pop(0)
        if path in loaded:
            continue
        loaded.add(path)
        if path in references:
            dep = _parse_file(references[path], f"reference {path!r}")
            files[path] = dep
            pending.extend(
                i.name for i in dep.file_elements if isinstance(i, ast.Import)
            )
            builders.append(_Builder(dep, path, types))
        elif path in _WELL_KNOWN_FILES:
            package, names = _WELL_KNOWN_FILES[path]
            for entry in names:
                is_enum = entry.startswith("E:")
                local = entry[2:] if is_enum else entry
                full = f"{package}.{local}"
                if full not in types:
                    cls = Enum if is_enum else Message
                    types[full] = cls(local.rsplit(".", 1)[-1], full, package, path)
                    if not is_enum:
                        types[full].opaque = True  # type: ignore[union-attr]
        else:
            raise InvalidSchema(f"import {path!r} is not among the schema's references")
    own = _Builder(root, "", types)
    for b in builders:
        b.declare()
    own.declare()
    for b in builders:
        b.resolve()
    own.resolve()
    imports = [i for i in root.file_elements if isinstance(i, ast.Import)]
    return ProtobufSchema(
        text=text,
        syntax=root.syntax or "proto2",
        package=own.package,
        imports=[i.name for i in imports if not i.public and not i.weak],
        public_imports=[i.name for i in imports if i.public],
        weak_imports=[i.name for i in imports if i.weak],
        options=[o for o in root.file_elements if isinstance(o, ast.Option)],
        messages=own.top_messages,
        enums=own.top_enums,
        types=types,
        references=references,
        services=[s for s in root.file_elements if isinstance(s, ast.Service)],
        extends=own.extends,
    )


def _parse_ranges(
    ranges: Iterable[str], where: str, maximum: int
) -> list[tuple[int, int]]:
    out = []
    for r in ranges:
        parts = [p.strip() for p in re.split(r"\s+to\s+", r.strip())]
        try:
            lo = parse_int(parts[0])
            hi = (
                lo
                if len(parts) == 1
                else (maximum if parts[1] == "max" else parse_int(parts[1]))
            )
        except ValueError:
            raise InvalidSchema(f"{where}: bad range {r!r}") from None
        if hi < lo:
            raise InvalidSchema(f"{where}: range {r!r} ends before it starts")
        out.append((lo, hi))
    return out


class _Builder:
    """Turns one file's AST into Message/Enum records, then resolves and validates them."""

    def __init__(
        self, file: ast.File, origin: str, types: dict[str, Message | Enum]
    ) -> None:
        self.file = file
        self.origin = origin
        self.where = f"reference {origin!r}" if origin else "schema"
        self.types = types
        self.syntax = file.syntax or "proto2"
        packages = [p.name for p in file.file_elements if isinstance(p, ast.Package)]
        if len(packages) > 1:
            raise InvalidSchema(f"{self.where}: more than one package statement")
        self.package = packages[0] if packages else ""
        self.top_messages: list[Message] = []
        self.top_enums: list[Enum] = []
        self.extends: list[tuple[str, str, list[Field]]] = []
        self._raw_extends: list[tuple[str, ast.Extension]] = []
        self._messages_in_order: list[tuple[Message, list]] = []

    def _err(self, text: str) -> InvalidSchema:
        return InvalidSchema(f"{self.where}: {text}")

    # -- first pass: declare every type so that names resolve in any order --------------------

    def declare(self) -> None:
        scope = self.package
        for el in self.file.file_elements:
            if isinstance(el, ast.Message):
                self.top_messages.append(self._declare_message(el, scope))
            elif isinstance(el, ast.Enum):
                self.top_enums.append(self._declare_enum(el, scope))
            elif isinstance(el, ast.Extension):
                self._raw_extends.append((scope, el))
        seen: set[str] = set()
        for s in self.file.file_elements:
            if isinstance(s, ast.Service):
                if s.name in seen:
                    raise self._err(f"service {s.name!r} is declared twice")
                seen.add(s.name)

    def _add_type(self, t: Message | Enum) -> None:
        existing = self.types.get(t.full_name)
        if existing is not None:
            if existing.origin == t.origin:
                raise self._err(f"{t.full_name!r} is already defined")
            raise self._err(
                f"{t.full_name!r} is already defined in {existing.origin or 'the schema'!r}"
            )
        self.types[t.full_name] = t

    def _declare_message(self, el: ast.Message | ast.Group, scope: str) -> Message:
        full = f"{scope}.{el.name}" if scope else el.name
        m = Message(el.name, full, self.package, self.origin)
        self._add_type(m)
        self._messages_in_order.append((m, el.elements))
        for sub in el.elements:
            if isinstance(sub, ast.Message):
                m.messages.append(self._declare_message(sub, full))
            elif isinstance(sub, ast.Enum):
                m.enums.append(self._declare_enum(sub, full))
            elif isinstance(sub, ast.Group):
                m.messages.append(self._declare_message(sub, full))
            elif isinstance(sub, ast.OneOf):
                for g in sub.elements:
                    if isinstance(g, ast.Group):
                        m.messages.append(self._declare_message(g, full))
            elif isinstance(sub, ast.Extension):
                self._raw_extends.append((full, sub))
        return m

    def _declare_enum(self, el: ast.Enum, scope: str) -> Enum:
        full = f"{scope}.{el.name}" if scope else el.name
        e = Enum(el.name, full, self.package, self.origin)
        self._add_type(e)
        names: set[str] = set()
        numbers: dict[int, str] = {}
        for sub in el.elements:
            if isinstance(sub, ast.Option):
                e.options.append(sub)
            elif isinstance(sub, ast.EnumValue):
                if sub.name in names:
                    raise self._err(
                        f"enum {full!r}: value {sub.name!r} is declared twice"
                    )
                if not -(2**31) <= sub.number <= MAX_ENUM_NUMBER:
                    raise self._err(
                        f"enum {full!r}: value {sub.name!r} = {sub.number} is out of range"
                    )
                names.add(sub.name)
                e.values.append((sub.name, sub.number, list(sub.options)))
            elif isinstance(sub, ast.EnumReserved):
                e.reserved_numbers += _parse_ranges(
                    sub.ranges, f"{self.where}: enum {full!r}", MAX_ENUM_NUMBER
                )
                e.reserved_names += list(sub.names)
        if not e.values:
            raise self._err(f"enum {full!r} has no values")
        if self.syntax == "proto3" and e.values[0][1] != 0:
            raise self._err(f"enum {full!r}: the first value must be zero in proto3")
        allow_alias = any(
            o.name == "allow_alias" and o.value is True for o in e.options
        )
        for name, number, _ in e.values:
            if number in numbers and not allow_alias:
                raise self._err(
                    f"enum {full!r}: {name!r} uses number {number} of {numbers[number]!r} (set allow_alias)"
                )
            numbers.setdefault(number, name)
            if any(lo <= number <= hi for lo, hi in e.reserved_numbers):
                raise self._err(
                    f"enum {full!r}: {name!r} uses reserved number {number}"
                )
            if name in e.reserved_names:
                raise self._err(f"enum {full!r}: {name!r} is a reserved name")
        return e

    # -- second pass: fields, with their types resolved ----------------------------------------

    def resolve(self) -> None:
        for m, elements in self._messages_in_order:
            self._fill_message(m, elements)
        for scope, ext in self._raw_extends:
            extendee = self._lookup(ext.typeName, scope)
            if not isinstance(extendee, Message):
                raise self._err(f"extend {ext.typeName!r}: not a message type")
            fields = [
                self._field(f, scope, None, f"extend {ext.typeName}")
                for f in ext.elements
                if isinstance(f, ast.Field)
            ]
            self.extends.append((scope, extendee.full_name, fields))
        for el in self.file.file_elements:
            if isinstance(el, ast.Service):
                for method in el.elements:
                    if isinstance(method, ast.Method):
                        for t in (method.input_type.type, method.output_type.type):
                            if not isinstance(self._lookup(t, self.package), Message):
                                raise self._err(
                                    f"rpc {el.name}.{method.name}: {t!r} is not a message type"
                                )

    def _lookup(self, name: str, scope: str) -> Message | Enum:
        """Protobuf's scoping (`lookup`); InvalidSchema when the name resolves to nothing."""
        found = lookup(self.types, name, scope)
        if found is None:
            raise self._err(f"unknown type {name!r} (in {scope or 'the file'!r})")
        return found

    def _field(
        self,
        f: ast.Field | ast.MapField | ast.Group,
        scope: str,
        oneof: str | None,
        where: str,
    ) -> Field:
        if isinstance(f, ast.MapField):
            if f.key_type not in MAP_KEY_TYPES:
                raise self._err(
                    f"{where}: map key type {f.key_type!r} is not an integral or string type"
                )
            out = Field(
                f.name,
                f.number,
                None,
                f"map<{f.key_type}, {f.value_type}>",
                "map",
                "",
                oneof,
            )
            out.key_type = f.key_type
            out.value_kind, out.value_type = self._kind_of(f.value_type, scope)
            if out.value_kind == "map":
                raise self._err(f"{where}: a map value cannot be a map")
            out.options = list(f.options)
            return out
        if isinstance(f, ast.Group):
            label = f.cardinality.value.lower() if f.cardinality else None
            full = f"{scope}.{f.name}" if scope else f.name
            out = Field(
                f.name.lower(),
                f.number,
                label,
                f.name,
                "message",
                full,
                oneof,
                is_group=True,
            )
            return out
        label = f.cardinality.value.lower() if f.cardinality else None
        kind, type_name = self._kind_of(f.type, scope)
        out = Field(
            f.name,
            f.number,
            label,
            f.type,
            kind,
            type_name,
            oneof,
            options=list(f.options),
        )
        return out

    def _kind_of(self, written: str, scope: str) -> tuple[str, str]:
        if written in SCALARS:
            return "scalar", written
        t = self._lookup(written, scope)
        return ("enum" if isinstance(t, Enum) else "message"), t.full_name

    def _fill_message(self, m: Message, elements: list) -> None:
        scope = m.full_name
        where = f"message {m.full_name!r}"
        declared: list[Field] = []
        for el in elements:
            if isinstance(el, (ast.Field, ast.MapField, ast.Group)):
                declared.append(self._field(el, scope, None, where))
            elif isinstance(el, ast.OneOf):
                if el.name in m.oneofs:
                    raise self._err(f"{where}: oneof {el.name!r} is declared twice")
                m.oneofs[el.name] = []
                m.oneof_options[el.name] = [
                    o for o in el.elements if isinstance(o, ast.Option)
                ]
                members = [
                    x for x in el.elements if isinstance(x, (ast.Field, ast.Group))
                ]
                if not members:
                    raise self._err(f"{where}: oneof {el.name!r} has no fields")
                for x in members:
                    if isinstance(x, ast.Field) and x.cardinality is not None:
                        raise self._err(
                            f"{where}: oneof field {x.name!r} cannot have a label"
                        )
                    fl = self._field(x, scope, el.name, where)
                    declared.append(fl)
                    m.oneofs[el.name].append(fl.number)
            elif isinstance(el, ast.Reserved):
                m.reserved_numbers += _parse_ranges(
                    el.ranges, f"{self.where}: {where}", MAX_FIELD_NUMBER
                )
                m.reserved_names += list(el.names)
            elif isinstance(el, ast.ExtensionRange):
                m.extension_ranges += _parse_ranges(
                    el.ranges, f"{self.where}: {where}", MAX_FIELD_NUMBER
                )
            elif isinstance(el, ast.Option):
                m.options.append(el)
        names: set[str] = set()
        for fl in declared:
            n = fl.number
            if not 1 <= n <= MAX_FIELD_NUMBER:
                raise self._err(
                    f"{where}: field {fl.name!r} number {n} is out of range 1..{MAX_FIELD_NUMBER}"
                )
            if FIRST_RESERVED_BY_PROTOBUF <= n <= LAST_RESERVED_BY_PROTOBUF:
                raise self._err(
                    f"{where}: field {fl.name!r} number {n} is reserved by Protocol Buffers"
                )
            if n in m.fields:
                raise self._err(
                    f"{where}: field number {n} is used by {m.fields[n].name!r} and {fl.name!r}"
                )
            if fl.name in names:
                raise self._err(f"{where}: field name {fl.name!r} is declared twice")
            if m.is_reserved(n):
                raise self._err(f"{where}: field {fl.name!r} uses reserved number {n}")
            if fl.name in m.reserved_names:
                raise self._err(f"{where}: field name {fl.name!r} is reserved")
            if any(lo <= n <= hi for lo, hi in m.extension_ranges):
                raise self._err(
                    f"{where}: field {fl.name!r} number {n} is in an extension range"
                )
            if self.syntax == "proto3":
                if fl.label == "required":
                    raise self._err(
                        f"{where}: required fields are not allowed in proto3 ({fl.name!r})"
                    )
                if fl.is_group:
                    raise self._err(
                        f"{where}: groups are not allowed in proto3 ({fl.name!r})"
                    )
                if any(o.name == "default" for o in fl.options):
                    raise self._err(
                        f"{where}: default values are not allowed in proto3 ({fl.name!r})"
                    )
            names.add(fl.name)
            m.fields[n] = fl
        if self.syntax == "proto3" and m.extension_ranges:
            raise self._err(f"{where}: extension ranges are not allowed in proto3")
