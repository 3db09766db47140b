"""Protobuf schemas for the registry: parse, normalize, and check compatibility as Confluent does.

This module is the public surface: `parse`, `ProtobufSchema`, `differences`, `compatibility` and
`check` at a level (Confluent's "new"/"old" wording). The work is in three modules:
`protobuf_parse` (`proto-schema-parser`, a pure-Python ANTLR grammar of the .proto language, then
name resolution and what protoc would refuse), `protobuf_model` (the resolved model and its
normalized text) and `protobuf_diff` (the compatibility rules, written by hand after Confluent's
`SchemaDiff`, protobuf-provider, package `io.confluent.kafka.schemaregistry.protobuf.diff`: the
same `Difference.Type` names, the same set of compatible changes and the same paths
(`#/Message/3`, `#/Message/oneof/3`)).

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

from kbroker.schema_registry.levels import LEVELS, against
from kbroker.schema_registry.protobuf_diff import (
    COMPATIBLE_CHANGES,
    Difference,
    differences,
    reserved_reuse,
)
from kbroker.schema_registry.protobuf_model import ProtobufSchema
from kbroker.schema_registry.protobuf_parse import parse

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
        errors += reserved_reuse(new, old)
        if errors:
            return errors
    return []
