"""Avro compatibility as Confluent checks it. Pure: no I/O.

- `compatibility(reader, writer)` is Apache Avro's `SchemaCompatibility` (what Confluent's
  `AvroSchema.isBackwardCompatible` runs), each incompatibility formatted as Confluent's
  `Difference`: `{errorType:'TYPE_MISMATCH', description:'...', additionalInfo:'...'}`;
  `incompatibilities(reader, writer)` gives them as `Incompatibility` values.
- `check(level, new, previous)` applies one of Confluent's compatibility levels, with Confluent's
  "new"/"old" wording.

Known differences from Confluent (Java Avro) (see also avro_parse.py):
- Java reports what is under a writer union read by a non-union reader at the root path ("/"), since
  it checks each branch with a fresh location; here the path goes on from the union, with the
  branch index (`/fields/0/type/1`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kbroker.schema_registry.avro_parse import PRIMITIVES, AvroSchema, full_aliases, kind_of, unwrap
from kbroker.schema_registry.levels import against

__all__ = [
    "Incompatibility",
    "check",
    "compatibility",
    "incompatibilities",
]

NAME_MISMATCH = "NAME_MISMATCH"
FIXED_SIZE_MISMATCH = "FIXED_SIZE_MISMATCH"
MISSING_ENUM_SYMBOLS = "MISSING_ENUM_SYMBOLS"
READER_FIELD_MISSING_DEFAULT_VALUE = "READER_FIELD_MISSING_DEFAULT_VALUE"
TYPE_MISMATCH = "TYPE_MISMATCH"
MISSING_UNION_BRANCH = "MISSING_UNION_BRANCH"

# Confluent's Difference descriptions; "{reader}"/"{writer}" are its two %s ("new"/"old").
_DESCRIPTIONS = {
    FIXED_SIZE_MISMATCH: "The size of FIXED type field at path '{path}' in the {reader} schema does not match with the {writer} schema",
    TYPE_MISMATCH: "The type (path '{path}') of a field in the {reader} schema does not match with the {writer} schema",
    NAME_MISMATCH: "The name of the schema has changed (path '{path}')",
    MISSING_ENUM_SYMBOLS: "The {reader} schema is missing enum symbols '{info}' at path '{path}' in the {writer} schema",
    MISSING_UNION_BRANCH: "The {reader} schema is missing a type inside a union field at path '{path}' in the {writer} schema",
    READER_FIELD_MISSING_DEFAULT_VALUE: "The field '{info}' at path '{path}' in the {reader} schema has no default value and is missing in the {writer} schema",
}

# reader type -> writer types it can read by promotion (the Avro specification's resolution rules)
_PROMOTIONS = {
    "long": ("int",),
    "float": ("int", "long"),
    "double": ("int", "long", "float"),
    "bytes": ("string",),
    "string": ("bytes",),
}


@dataclasses.dataclass(frozen=True)
class Incompatibility:
    """One incompatibility: Avro's SchemaIncompatibilityType name, the JSON pointer of the place in
    the reader schema (Avro's `getLocation()`), and Avro's message (Confluent's additionalInfo)."""

    type: str
    location: str
    message: str

    def describe(self, reader: str = "reader", writer: str = "writer") -> str:
        """Confluent's Difference string, naming the reader and writer schemas as given."""
        description = _DESCRIPTIONS[self.type].format(path=self.location, info=self.message, reader=reader, writer=writer)
        return f"{{errorType:'{self.type}', description:'{description}', additionalInfo:'{self.message}'}}"


class _Unexpected(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class _Found:
    type: str
    path: tuple[str, ...]  # relative to the pair where it was found
    message: str


def _avro_type(kind: str) -> str:
    return kind.upper()


class _Checker:
    """Avro's ReaderWriterCompatibilityChecker: results memoized per (reader, writer) node pair,
    a pair met again while being checked (recursive types) counts as compatible."""

    def __init__(self, reader: AvroSchema, writer: AvroSchema) -> None:
        self.rnames = reader.names
        self.wnames = writer.names
        self.memo: dict[tuple[int, int], list[_Found] | None] = {}

    def get(self, reader: Any, writer: Any) -> list[_Found]:
        reader = unwrap(reader, self.rnames)
        writer = unwrap(writer, self.wnames)
        key = (id(reader), id(writer))
        if key in self.memo:
            cached = self.memo[key]
            return [] if cached is None else cached
        self.memo[key] = None  # in progress
        result = self.calculate(reader, writer)
        self.memo[key] = result
        return result

    def sub(self, token: str, reader: Any, writer: Any) -> list[_Found]:
        return [dataclasses.replace(f, path=(token, *f.path)) for f in self.get(reader, writer)]

    def compatible(self, reader: Any, writer: Any) -> bool:
        return not self.get(reader, writer)

    def calculate(self, reader: Any, writer: Any) -> list[_Found]:
        rkind, wkind = kind_of(reader), kind_of(writer)
        if rkind == wkind:
            if rkind in PRIMITIVES:
                return []
            if rkind == "array":
                return self.sub("items", reader["items"], writer["items"])
            if rkind == "map":
                return self.sub("values", reader["values"], writer["values"])
            if rkind == "fixed":
                return self.names(reader, writer) + self.fixed_size(reader, writer)
            if rkind == "enum":
                return self.names(reader, writer) + self.enum_symbols(reader, writer)
            if rkind == "record":
                return self.names(reader, writer) + self.record_fields(reader, writer)
            # both unions: every writer branch must be readable by the reader union
            found = []
            for i, branch in enumerate(writer):
                if not self.compatible(reader, branch):
                    info = f"reader union lacking writer type: {_avro_type(kind_of(unwrap(branch, self.wnames)))}"
                    found.append(_Found(MISSING_UNION_BRANCH, (str(i),), info))
            return found
        if wkind == "union":
            # a non-union reader must read every branch of the writer's union
            found = []
            for i, branch in enumerate(writer):
                found += self.sub(str(i), reader, branch)
            return found
        if rkind == "union":
            if any(self.compatible(branch, writer) for branch in reader):
                return []
            return [_Found(MISSING_UNION_BRANCH, (), f"reader union lacking writer type: {_avro_type(wkind)}")]
        if wkind in _PROMOTIONS.get(rkind, ()):
            return []
        return [_Found(TYPE_MISMATCH, (), f"reader type: {_avro_type(rkind)} not compatible with writer type: {_avro_type(wkind)}")]

    def names(self, reader: dict, writer: dict) -> list[_Found]:
        if reader["name"] == writer["name"] or writer["name"] in full_aliases(reader):
            return []
        return [_Found(NAME_MISMATCH, ("name",), f"expected: {writer['name']}")]

    def fixed_size(self, reader: dict, writer: dict) -> list[_Found]:
        if reader["size"] == writer["size"]:
            return []
        return [_Found(FIXED_SIZE_MISMATCH, ("size",), f"expected: {writer['size']}, found: {reader['size']}")]

    def enum_symbols(self, reader: dict, writer: dict) -> list[_Found]:
        missing = sorted(set(writer["symbols"]) - set(reader["symbols"]))
        if not missing or reader.get("default") in reader["symbols"]:
            return []
        return [_Found(MISSING_ENUM_SYMBOLS, ("symbols",), "[" + ", ".join(missing) + "]")]

    def record_fields(self, reader: dict, writer: dict) -> list[_Found]:
        by_name = {f["name"]: f for f in writer["fields"]}
        found = []
        for pos, field in enumerate(reader["fields"]):
            matches = [by_name[n] for n in (field["name"], *field.get("aliases", ())) if n in by_name]
            if len(matches) > 1:
                raise _Unexpected(
                    f"Reader record field {field['name']} matches multiple fields in writer record schema {writer['name']}"
                )
            path = ("fields", str(pos))
            if not matches:
                if "default" in field:
                    continue
                ftype = unwrap(field["type"], self.rnames)
                if kind_of(ftype) == "enum" and ftype.get("default") is not None:
                    # as Java's Avro: the reader enum is checked against the writer record itself
                    found += [dataclasses.replace(f, path=(*path, "type", *f.path)) for f in self.get(ftype, writer)]
                else:
                    found.append(_Found(READER_FIELD_MISSING_DEFAULT_VALUE, path, field["name"]))
                continue
            found += [dataclasses.replace(f, path=(*path, "type", *f.path)) for f in self.get(field["type"], matches[0]["type"])]
        return found


def _pointer(path: tuple[str, ...]) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in path)


def incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[Incompatibility]:
    """Why data written with `writer` cannot be read with `reader` (empty: it always can).
    Raises ValueError where Java's Avro throws (a reader field matching two writer fields)."""
    try:
        found = _Checker(reader, writer).get(reader.parsed, writer.parsed)
    except _Unexpected as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("schemas nested too deeply to compare") from None
    return [Incompatibility(f.type, _pointer(f.path), f.message) for f in found]


def compatibility(reader: AvroSchema, writer: AvroSchema, *, names: tuple[str, str] = ("reader", "writer")) -> list[str]:
    """The incompatibilities of reading `writer`'s data with `reader` as Confluent's messages
    (`names` fill the description's two schema names; Confluent uses "new"/"old")."""
    try:
        return [i.describe(*names) for i in incompatibilities(reader, writer)]
    except ValueError as exc:
        return [f"Unexpected exception during compatibility check: {exc}"]


def check(level: str, new: AvroSchema, previous: list[AvroSchema]) -> list[str]:
    """Confluent's check of `new` against the subject's `previous` schemas (oldest first) at
    `level`. The messages of the first (newest) previous schema that fails, as Confluent's
    SchemaValidatorBuilder makes them, without the "{oldSchemaVersion: ..}"/"{oldSchema: ..}"
    lines it appends (the caller knows the versions). Raises ValueError for an unknown level."""
    existing, forward, backward = against(level, previous)
    for old in existing:
        messages: list[str] = []
        if forward:
            messages += compatibility(old, new, names=("old", "new"))
        if backward:
            messages += compatibility(new, old, names=("new", "old"))
        if messages:
            return messages
    return []
