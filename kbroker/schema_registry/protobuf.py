"""Protobuf schemas for the registry: parse, normalize, and check compatibility as Confluent does.

Parsing is done by `proto-schema-parser` (a pure-Python ANTLR grammar of the .proto language);
this module resolves the names, validates what protoc would refuse, and writes the
compatibility rules by hand after Confluent's `SchemaDiff` (protobuf-provider, package
`io.confluent.kafka.schemaregistry.protobuf.diff`): the same `Difference.Type` names, the same
set of compatible changes and the same paths (`#/Message/3`, `#/Message/oneof/3`).

Direction: `compatibility(reader, writer)` asks "can `reader` read data written with
`writer`?" -- Confluent's `SchemaDiff.compare(original=writer, update=reader)`.  BACKWARD
compares reader=new, writer=old; FORWARD reader=old, writer=new; FULL both.

Where kbroker differs from Confluent (see `docs/schema-registry.md`):
- a field whose number or name is reserved in the same message is refused (InvalidSchema),
  as protoc refuses it; `check` also reports RESERVED_FIELD_REUSED when the new schema uses a
  number or name that a compared previous schema reserved (Confluent accepts that);
- a field declared without a label (proto3 implicit presence, oneof members) is compared as
  `optional` when its label is compared, so a proto3 `int32 x` made `repeated int32 x` is
  FIELD_NUMERIC_LABEL_CHANGED;
- SYNTAX_VERSION_CHANGED (proto2 <-> proto3) is reported as a compatible difference (Confluent
  reports nothing; Karapace's SYNTAX_ALTER is compatible too);
- imports must be given as references, except the well-known google/protobuf/*.proto files and
  Confluent's own confluent/*.proto and google/type/*.proto files, whose types are known by name
  only (their fields are not compared);
- editions (`edition = "2023"`) are refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from antlr4.error.ErrorListener import ErrorListener
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.levels import LEVELS, against

__all__ = [
    "COMPATIBLE_CHANGES",
    "LEVELS",
    "Difference",
    "ProtobufSchema",
    "check",
    "compatibility",
    "differences",
    "parse",
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
FIRST_RESERVED_BY_PROTOBUF, LAST_RESERVED_BY_PROTOBUF = 19_000, 19_999
MAX_ENUM_NUMBER = 2**31 - 1

# Confluent's wire-compatible groups of scalars (FieldSchemaDiff.scalarKind); enums are numbers.
_SCALAR_KIND = {
    "int32": "GENERAL_NUMBER",
    "int64": "GENERAL_NUMBER",
    "uint32": "GENERAL_NUMBER",
    "uint64": "GENERAL_NUMBER",
    "bool": "GENERAL_NUMBER",
    "sint32": "SIGNED_NUMBER",
    "sint64": "SIGNED_NUMBER",
    "string": "STRING_OR_BYTES",
    "bytes": "STRING_OR_BYTES",
    "fixed32": "FIXED32",
    "sfixed32": "FIXED32",
    "fixed64": "FIXED64",
    "sfixed64": "FIXED64",
    "float": "FLOAT",
    "double": "DOUBLE",
}
_NUMERIC_SCALAR_KINDS = frozenset(
    {"GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"}
)

# Confluent's SchemaDiff.COMPATIBLE_CHANGES, plus kbroker's informational SYNTAX_VERSION_CHANGED.
COMPATIBLE_CHANGES = frozenset(
    {
        "MESSAGE_ADDED",
        "MESSAGE_MOVED",
        "ENUM_ADDED",
        "ENUM_REMOVED",
        "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED",
        "ENUM_CONST_REMOVED",
        "FIELD_ADDED",
        "FIELD_REMOVED",
        "FIELD_NAME_CHANGED",
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
        "ONEOF_ADDED",
        "ONEOF_REMOVED",
        "ONEOF_FIELD_ADDED",
        "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
        "SYNTAX_VERSION_CHANGED",
    }
)

# Confluent's descriptions; the first %s is the reader ("new" under BACKWARD), the second the writer.
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{path}' in the {0} schema does not match the package in the {1} schema",
    "MESSAGE_REMOVED": "The {0} schema is missing a MESSAGE type at path '{path}' in the {1} schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the {0} schema does not match the {1} schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the {0} schema does not match its kind in the {1} schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the {0} schema does not match its type in the {1} schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the {0} schema does not match its label in the {1} schema",
    "REQUIRED_FIELD_ADDED": "A required field at path '{path}' in the {0} schema is missing in the {1} schema",
    "REQUIRED_FIELD_REMOVED": "The {0} schema is missing a required field at path: '{path}' in the {1} schema",
    "ONEOF_FIELD_REMOVED": "The {0} schema is missing a oneof field at path '{path}' in the {1} schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the {0} schema are outside a oneof in the {1} schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the {0} schema is outside an existing oneof in the {1} schema",
    "RESERVED_FIELD_REUSED": "A field at path '{path}' in the {0} schema uses a number or name reserved in the {1} schema",
}

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


@dataclass(frozen=True)
class Difference:
    """One of Confluent's `Difference`s: a type name and a path such as `#/Order/3`."""

    type: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE_CHANGES

    def message(self, reader: str = "reader", writer: str = "writer") -> str:
        """`TYPE #/path: description`, the description worded as Confluent's."""
        text = _DESCRIPTIONS.get(self.type)
        head = f"{self.type} {self.path}"
        return (
            f"{head}: {text.format(reader, writer, path=self.path)}" if text else head
        )

    def __str__(self) -> str:
        return f"{self.type} {self.path}"


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
            lo = _int(parts[0])
            hi = (
                lo
                if len(parts) == 1
                else (maximum if parts[1] == "max" else _int(parts[1]))
            )
        except ValueError:
            raise InvalidSchema(f"{where}: bad range {r!r}") from None
        if hi < lo:
            raise InvalidSchema(f"{where}: range {r!r} ends before it starts")
        out.append((lo, hi))
    return out


def _int(text: str) -> int:
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body.lower().startswith("0x"):
        return sign * int(body, 16)
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body, 8)
    return sign * int(body)


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
        """Protobuf's scoping: `.a.B` is absolute, else search from the innermost scope outwards."""
        if name.startswith("."):
            found = self.types.get(name[1:])
        else:
            found = None
            parts = scope.split(".") if scope else []
            first = name.split(".", 1)[0]
            while True:
                prefix = ".".join(parts)
                candidate = f"{prefix}.{name}" if prefix else name
                if candidate in self.types:
                    found = self.types[candidate]
                    break
                head = f"{prefix}.{first}" if prefix else first
                if head != candidate and head in self.types:
                    # protoc: the first component binds here, so the rest must resolve inside it
                    break
                if not parts:
                    break
                parts.pop()
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


# ---------------------------------------------------------------------------------------------
# Compatibility (Confluent's SchemaDiff)


class _Diff:
    """Confluent's diff Context: the path, the messages being compared, and the differences."""

    def __init__(self, original: ProtobufSchema, update: ProtobufSchema) -> None:
        self.original = original
        self.update = update
        self.path: list[str] = []
        self.in_progress: set[str] = set()
        self.diffs: list[Difference] = []

    def add(self, kind: str, *extra: str) -> None:
        self.diffs.append(Difference(kind, "#/" + "/".join([*self.path, *extra])))

    def schema(self) -> None:
        if self.original.package != self.update.package:
            self.add("PACKAGE_CHANGED")
        if self.original.syntax != self.update.syntax:
            self.add("SYNTAX_VERSION_CHANGED")
        self.types(
            self.original.messages,
            self.original.enums,
            self.update.messages,
            self.update.enums,
        )

    def types(
        self,
        o_msgs: list[Message],
        o_enums: list[Enum],
        u_msgs: list[Message],
        u_enums: list[Enum],
    ) -> None:
        o_by_name = {m.name: (i, m) for i, m in enumerate(o_msgs)}
        u_by_name = {m.name: (i, m) for i, m in enumerate(u_msgs)}
        for name in _union(o_by_name, u_by_name):
            self.path.append(name)
            if name not in u_by_name:
                self.add("MESSAGE_REMOVED")
            elif name not in o_by_name:
                self.add("MESSAGE_ADDED")
            else:
                (oi, om), (ui, um) = o_by_name[name], u_by_name[name]
                self.message(om, um)
                if oi != ui:
                    # message indexes are relative to the writer's own schema id: compatible
                    self.add("MESSAGE_MOVED")
            self.path.pop()
        oe = {e.name: e for e in o_enums}
        ue = {e.name: e for e in u_enums}
        for name in _union(oe, ue):
            self.path.append(name)
            if name not in ue:
                self.add("ENUM_REMOVED")
            elif name not in oe:
                self.add("ENUM_ADDED")
            else:
                self.enum(oe[name], ue[name])
            self.path.pop()

    def enum(self, original: Enum, update: Enum) -> None:
        o = {}
        for name, number, _ in original.values:
            o.setdefault(number, name)
        u = {}
        for name, number, _ in update.values:
            u.setdefault(number, name)
        for number in sorted(set(o) | set(u)):
            if number not in u:
                self.add("ENUM_CONST_REMOVED", str(number))
            elif number not in o:
                self.add("ENUM_CONST_ADDED", str(number))
            elif o[number] != u[number]:
                self.add("ENUM_CONST_CHANGED", str(number))

    def message(self, original: Message, update: Message) -> None:
        if original.full_name not in self.in_progress:
            self.in_progress.add(original.full_name)
            try:
                self._message_fields(original, update)
            finally:
                self.in_progress.discard(original.full_name)
        self.types(original.messages, original.enums, update.messages, update.enums)

    def _message_fields(self, original: Message, update: Message) -> None:
        o_fields, u_fields = original.fields, update.fields
        # A oneof removed by name none of whose members survive is a complete (compatible) deletion.
        deleted_oneofs = {
            name
            for name, numbers in original.oneofs.items()
            if name not in update.oneofs and not any(n in u_fields for n in numbers)
        }
        # Newly mutually exclusive fields: an update oneof whose pre-existing members came from
        # more than one original group (an original oneof, or a top-level field each).
        for name, numbers in update.oneofs.items():
            groups: set[str] = set()
            moved_in = 0
            for n in numbers:
                if n in o_fields:
                    if o_fields[n].oneof is not None:
                        groups.add("oneof:" + o_fields[n].oneof)
                    else:
                        groups.add(f"field:{n}")
                        moved_in += 1
            if len(groups) > 1:
                self.add(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
                    if moved_in > 1
                    else "FIELD_MOVED_TO_EXISTING_ONEOF",
                    name,
                )
        for name in sorted(set(original.oneofs) | set(update.oneofs)):
            if name not in update.oneofs:
                self.add("ONEOF_REMOVED", name)
            elif name not in original.oneofs:
                self.add("ONEOF_ADDED", name)
        for n in sorted(set(o_fields) | set(u_fields)):
            of, uf = o_fields.get(n), u_fields.get(n)
            if uf is None:
                assert of is not None
                if of.oneof is not None:
                    if of.oneof not in deleted_oneofs:
                        self.add("ONEOF_FIELD_REMOVED", of.oneof, str(n))
                else:
                    self.add(
                        "REQUIRED_FIELD_REMOVED"
                        if of.label == "required"
                        else "FIELD_REMOVED",
                        str(n),
                    )
            elif of is None:
                if uf.oneof is not None:
                    self.add("ONEOF_FIELD_ADDED", uf.oneof, str(n))
                else:
                    self.add(
                        "REQUIRED_FIELD_ADDED"
                        if uf.label == "required"
                        else "FIELD_ADDED",
                        str(n),
                    )
            else:
                if of.oneof is not None and uf.oneof is None:
                    self.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", str(n))
                where = [uf.oneof, str(n)] if uf.oneof is not None else [str(n)]
                self.path.extend(where)
                self.field(of, uf)
                del self.path[-len(where) :]

    def field(self, original: Field, update: Field) -> None:
        if original.name != update.name:
            self.add("FIELD_NAME_CHANGED")
        self.kinds(
            original.label,
            update.label,
            original.kind,
            original.type_name,
            update.kind,
            update.type_name,
            (original, update),
        )

    def kinds(
        self,
        o_label: str | None,
        u_label: str | None,
        o_kind: str,
        o_type: str,
        u_kind: str,
        u_type: str,
        maps: tuple[Field, Field] | None = None,
    ) -> None:
        o_group = "scalar" if o_kind in ("scalar", "enum") else o_kind
        u_group = "scalar" if u_kind in ("scalar", "enum") else u_kind
        if o_group != u_group:
            self.add("FIELD_KIND_CHANGED")
        elif o_group == "scalar":
            ok = "GENERAL_NUMBER" if o_kind == "enum" else _SCALAR_KIND[o_type]
            uk = "GENERAL_NUMBER" if u_kind == "enum" else _SCALAR_KIND[u_type]
            if ok != uk:
                self.add("FIELD_SCALAR_KIND_CHANGED")
            # kbroker: an absent label is "optional" (Confluent compares only explicit labels)
            elif (o_label or "optional") != (u_label or "optional"):
                if ok in _NUMERIC_SCALAR_KINDS:
                    self.add("FIELD_NUMERIC_LABEL_CHANGED")
                elif ok == "STRING_OR_BYTES":
                    self.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")
        elif o_group == "message":
            self.message_types(o_type, u_type)
        elif o_group == "map":
            assert maps is not None
            of, uf = maps
            self.kinds(
                None, None, "scalar", of.key_type or "", "scalar", uf.key_type or ""
            )
            self.kinds(
                None,
                None,
                of.value_kind or "",
                of.value_type or "",
                uf.value_kind or "",
                uf.value_type or "",
            )

    def message_types(self, o_type: str, u_type: str) -> None:
        ot = self.original.types[o_type]
        ut = self.update.types[u_type]
        o_local = _local_name(ot)
        u_local = _local_name(ut)
        if o_local != u_local:
            self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        assert isinstance(ot, Message) and isinstance(ut, Message)
        if ot.opaque or ut.opaque:
            if o_type != u_type:
                self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        if (
            ot.origin
            and ot.origin == ut.origin
            and self.original.references.get(ot.origin)
            == self.update.references.get(ut.origin)
        ):
            return  # the same reference on both sides: nothing to compare
        sub = _Diff(self.original, self.update)
        sub.in_progress = set(self.in_progress)
        sub.path = o_local.split(".")
        sub.message(ot, ut)
        self.diffs.extend(sub.diffs)
        if any(not d.compatible for d in sub.diffs):
            self.add("FIELD_NAMED_TYPE_CHANGED")


def _local_name(t: Message | Enum) -> str:
    if t.package and t.full_name.startswith(t.package + "."):
        return t.full_name[len(t.package) + 1 :]
    return t.full_name


def _union(a: dict, b: dict) -> list:
    return list(a) + [k for k in b if k not in a]


def _dedupe(diffs: list[Difference]) -> list[Difference]:
    seen: set[Difference] = set()
    out = []
    for d in diffs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def differences(reader: ProtobufSchema, writer: ProtobufSchema) -> list[Difference]:
    """Every difference, compatible or not, found reading data of `writer` with `reader`."""
    d = _Diff(writer, reader)
    d.schema()
    return _dedupe(d.diffs)


def compatibility(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    """The incompatibilities reading `writer`'s data with `reader`: [] when compatible.

    Each message starts with Confluent's Difference.Type name and its path, e.g.
    `FIELD_KIND_CHANGED #/Order/3: ...`.
    """
    return _messages(reader, writer, "reader", "writer")


def _messages(
    reader: ProtobufSchema, writer: ProtobufSchema, reader_word: str, writer_word: str
) -> list[str]:
    return [
        d.message(reader_word, writer_word)
        for d in differences(reader, writer)
        if not d.compatible
    ]


def _reserved_reuse(new: ProtobufSchema, old: ProtobufSchema) -> list[str]:
    """kbroker's extra rule: a field of `new` on a number or name that `old` reserved."""
    out = []
    old_messages = {
        n: t for n, t in old.types.items() if isinstance(t, Message) and not t.origin
    }
    for name, t in new.types.items():
        if not isinstance(t, Message) or t.origin or name not in old_messages:
            continue
        before = old_messages[name]
        for n, f in t.fields.items():
            if n in before.fields:
                continue
            if before.is_reserved(n) or f.name in before.reserved_names:
                path = "#/" + "/".join([*_local_name(t).split("."), str(n)])
                out.append(
                    Difference("RESERVED_FIELD_REUSED", path).message("new", "old")
                )
    return out




def check(level: str, new: ProtobufSchema, previous: list[ProtobufSchema]) -> list[str]:
    """Check `new` against `previous` (oldest first) at a compatibility level: [] when allowed.

    Like Confluent's CompatibilityChecker: non-transitive levels look at the latest previous
    schema only; transitive ones go from the newest to the oldest and stop at the first that
    fails.  Messages word the schemas "new" and "old" as Confluent's do.
    """
    olds, forward, backward = against(level, previous)
    for old in olds:
        errors: list[str] = []
        if forward:
            errors += _messages(old, new, "old", "new")
        if backward:
            errors += _messages(new, old, "new", "old")
        errors += _reserved_reuse(new, old)
        if errors:
            return errors
    return []


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
        b = _Builder(ast.File(), "", self.s.types)
        return "." + b._lookup(name, self.s.package).full_name


def _max(hi: int, maximum: int = MAX_FIELD_NUMBER) -> str:
    return "max" if hi >= maximum else str(hi)


def _indent(lines: list[str]) -> list[str]:
    return ["  " + line for line in lines]


def _sorted_options(options: list[ast.Option]) -> list[ast.Option]:
    return sorted(
        options, key=lambda o: o.name
    )  # stable: repeated options keep their order


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
        return (
            '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
        )
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
