"""Protobuf compatibility after Confluent's `SchemaDiff` (protobuf-provider, package
`io.confluent.kafka.schemaregistry.protobuf.diff`): `differences(reader, writer)` walks two parsed
schemas (`protobuf_model`) and lists every `Difference` with Confluent's `Difference.Type` names and
paths (`#/Message/3`, `#/Message/oneof/3`); `COMPATIBLE_CHANGES` are those that do not break
readers, and `reserved_reuse` is kbroker's extra rule (see `protobuf`). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.schema_registry.protobuf_model import Enum, Field, Message, ProtobufSchema

__all__ = ["COMPATIBLE_CHANGES", "Difference", "differences", "reserved_reuse"]


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


def reserved_reuse(new: ProtobufSchema, old: ProtobufSchema) -> list[str]:
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
