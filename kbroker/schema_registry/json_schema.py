"""JSON Schema for the schema registry: parsing, the normalized form and compatibility.

This module is the public surface: `parse` and `JsonSchema` (from `json_schema_model`: the
meta-schema check, ``$ref`` resolution and the Everit-like model of a schema), `diff` and
`Difference` (from `json_schema_diff`: Confluent's ``SchemaDiff`` rules), `compatibility` and
`check` at a level. Pure: no I/O.  ``compatibility`` compares a reader with a writer the way
Confluent's ``SchemaDiff`` does: it walks both schemas, lists every difference as ``(Difference
type, JSON-pointer-like path)`` and keeps those whose type is not in Confluent's set of compatible
changes.  Messages are ``"<TYPE> <path>"``, e.g. ``"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
#/properties/bar"``, the strings of Confluent's own test data.  ``check`` reports as Confluent's
(and this package's avro and protobuf) checkers do: the first earlier schema that fails, forward
before backward.
"""

from __future__ import annotations

from kbroker.schema_registry.json_schema_diff import COMPATIBLE_CHANGES, Difference, diff
from kbroker.schema_registry.json_schema_model import JsonSchema, parse
from kbroker.schema_registry.levels import LEVELS, against

__all__ = [
    "COMPATIBLE_CHANGES",
    "LEVELS",
    "Difference",
    "JsonSchema",
    "check",
    "compatibility",
    "diff",
    "parse",
]


def compatibility(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """The incompatibilities of reading data valid under ``writer`` with ``reader``: [] when none."""
    return [str(d) for d in diff(writer, reader) if not d.compatible]


def check(level: str, new: JsonSchema, previous: list[JsonSchema]) -> list[str]:
    """The incompatibilities of ``new`` with ``previous`` (oldest first) under a compatibility
    level; [] when compatible.  As Confluent's CompatibilityChecker: non-transitive levels look at
    the latest previous schema only, transitive ones go from the newest to the oldest and stop at
    the first that fails; for that schema, forward (the old schema reads new data) comes before
    backward (the new schema reads old data)."""
    olds, forward, backward = against(level, previous)
    for old in olds:
        messages: list[str] = []
        if forward:
            messages += compatibility(old, new)
        if backward:
            messages += compatibility(new, old)
        if messages:
            return messages
    return []
