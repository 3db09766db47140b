"""Avro schemas parsed (fastavro) and written in their canonical and normalized forms. Pure: no I/O.

- `parse(text, references)` parses a schema; `references` maps a reference name to the schema text
  of the referenced subject version (Confluent's schema references), whose named types the schema
  may use. Bad JSON or an invalid schema raises `InvalidSchema`.
- `AvroSchema.canonical()` is the Avro specification's Parsing Canonical Form (referenced types are
  inlined where first used, as Java's Avro does for a resolved schema). `normalized()` is Confluent's
  `normalize=true` form (its `AvroSchemaUtils.toNormalizedString`): full names, fixed key order,
  sorted aliases and properties, docs, defaults and properties kept, referenced types by name.
  `fingerprint` (SHA-256 of `normalized()`) identifies a schema up to formatting.
- `unwrap`, `kind_of` and `full_aliases` read a parsed schema's nodes; avro_compat.py uses them too.

Known differences from Confluent (Java Avro), on purpose or by fastavro (see also avro_compat.py):
- `normalized()` writes a field's `order` only when it is not "ascending" (Java writes every field's
  order); a logical type's attributes are written once (Java may repeat them as properties).
- Schemas nested more than MAX_DEPTH (200) levels are refused.
- Defaults are validated by fastavro: a union's default may match any branch (Java's Avro 1.9-1.11
  require the first branch).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from typing import Any

from fastavro.schema import UnknownType, parse_schema, to_parsing_canonical_form

from kbroker.schema_registry.errors import InvalidSchema

__all__ = [
    "MAX_DEPTH",
    "NAMED",
    "PRIMITIVES",
    "AvroSchema",
    "full_aliases",
    "kind_of",
    "parse",
    "unwrap",
]

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
NAMED = frozenset(("record", "error", "enum", "fixed"))


# Deeper schemas are refused, so that every operation on a parsed schema (forms, compatibility)
# stays within Python's recursion limit. Real schemas nest a few levels; Confluent has no such limit.
MAX_DEPTH = 200

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Logical types Java's Avro recognises, with the base types each may annotate.
_LOGICAL = {
    "decimal": ("bytes", "fixed"),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}


# --------------------------------------------------------------------------------------------------
# Parsing


@dataclasses.dataclass(frozen=True, eq=False)
class AvroSchema:
    """A parsed Avro schema. `parsed` is fastavro's form (full names, named types defined once);
    `names` maps every full name the schema can use (its own and its references') to its
    definition; `reference_names` are those defined by references."""

    text: str
    parsed: Any
    names: dict[str, dict]
    reference_names: frozenset[str]

    schema_type = "AVRO"

    def canonical(self) -> str:
        """The Parsing Canonical Form (Avro specification), referenced types inlined."""
        return to_parsing_canonical_form(_inline(self.parsed, self.names, set()))

    def normalized(self) -> str:
        """Confluent's normalized form (`normalize=true`), see the module docstring."""
        out: list[str] = []
        _normalize(self.parsed, self.names, set(self.reference_names), out)
        return "".join(out)

    @functools.cached_property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of `normalized()`: equal for schemas that differ only in formatting, key
        order, namespace spelling and alias order. References are not part of it."""
        return hashlib.sha256(self.normalized().encode()).hexdigest()

    @property
    def name(self) -> str | None:
        """The record's full name (Confluent's `ParsedSchema.name()`), None for other types."""
        node = unwrap(self.parsed, self.names)
        if isinstance(node, dict) and node.get("type") in ("record", "error"):
            return node["name"]
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"AvroSchema({self.canonical()})"


def parse(text: str, references: dict[str, str] | None = None) -> AvroSchema:
    """Parse `text` (Avro schema JSON); `references` maps reference names to the referenced
    schemas' texts, in any order (a reference may use types of another). Raises InvalidSchema."""
    names: dict[str, dict] = {}
    pending = [(ref, _load_json(ref_text, f"reference {ref!r}")) for ref, ref_text in (references or {}).items()]
    while pending:
        failed = []
        error: Exception | None = None
        for ref, obj in pending:
            trial = dict(names)
            try:
                _parse_checked(obj, trial)
            except _UnknownName as exc:  # may be defined by a later reference
                failed.append((ref, obj))
                error = exc
                continue
            names = trial
        if len(failed) == len(pending):
            raise InvalidSchema(f"Invalid schema: reference {failed[0][0]!r}: {error}")
        pending = failed
    reference_names = frozenset(names)
    obj = _load_json(text, "schema")
    try:
        parsed = _parse_checked(obj, names)
    except _UnknownName as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    return AvroSchema(text=text, parsed=parsed, names=names, reference_names=reference_names)


class _UnknownName(InvalidSchema):
    pass


def _load_json(text: str, what: str) -> Any:
    if not isinstance(text, str):
        raise InvalidSchema(f"Invalid schema: {what} is not a string")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid schema: {what} is not valid JSON: {exc}") from None


def _parse_checked(obj: Any, names: dict[str, dict]) -> Any:
    """fastavro's parse, then the checks Java's parser makes and fastavro does not. `names` gains
    the definitions of the schema's named types."""
    before = set(names)
    try:
        parsed = parse_schema(obj, named_schemas=names, _write_hint=False)
    except UnknownType as exc:
        raise _UnknownName(f"unknown type {exc}") from None
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - fastavro's errors on odd input include KeyError, TypeError, ...
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InvalidSchema(f"Invalid schema: {detail}") from None
    try:
        _validate(parsed, names, set(before))
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None
    return parsed


def _validate(node: Any, names: dict[str, dict], seen: set[str], depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise InvalidSchema(f"Invalid schema: nested more than {MAX_DEPTH} levels deep")
    depth += 1
    if isinstance(node, str):
        return
    if isinstance(node, list):
        kinds = set()
        for branch in node:
            resolved = unwrap(branch, names)
            if isinstance(resolved, list):
                raise InvalidSchema("Invalid schema: Nested union")
            kind = kind_of(resolved)
            key = resolved["name"] if kind in NAMED else kind
            if key in kinds:
                raise InvalidSchema(f"Invalid schema: Duplicate in union: {key}")
            kinds.add(key)
            _validate(branch, names, seen, depth)
        return
    if not isinstance(node, dict):
        raise InvalidSchema(f"Invalid schema: not a schema: {node!r}")
    kind = node.get("type")
    if isinstance(kind, (dict, list)):
        _validate(kind, names, seen, depth)
        return
    if kind in NAMED:
        full = node["name"]
        if full in seen:
            return
        seen.add(full)
        for part in full.split("."):
            if not _NAME.match(part):
                raise InvalidSchema(f"Invalid schema: Illegal name: {full}")
        if kind == "enum":
            for symbol in node.get("symbols", ()):
                if not isinstance(symbol, str) or not _NAME.match(symbol):
                    raise InvalidSchema(f"Invalid schema: Illegal enum symbol: {symbol}")
        elif kind == "fixed":
            size = node.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidSchema(f"Invalid schema: Invalid fixed size: {size!r}")
        else:
            field_names = set()
            for field in node.get("fields", ()):
                fname = field.get("name")
                if not isinstance(fname, str) or not _NAME.match(fname):
                    raise InvalidSchema(f"Invalid schema: Illegal field name: {fname!r}")
                if fname in field_names:
                    raise InvalidSchema(f"Invalid schema: Duplicate field {fname} in record {full}")
                field_names.add(fname)
                _validate(field["type"], names, seen, depth)
    elif kind == "array":
        _validate(node["items"], names, seen, depth)
    elif kind == "map":
        _validate(node["values"], names, seen, depth)


def unwrap(node: Any, names: dict[str, dict]) -> Any:
    """The definition behind a name or a `{"type": <schema>}` wrapper."""
    for _ in range(100):
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            return names[node]
        if isinstance(node, dict) and not isinstance(node.get("type"), str):
            node = node["type"]
            continue
        if isinstance(node, dict) and node["type"] not in PRIMITIVES and node["type"] not in NAMED \
                and node["type"] not in ("array", "map"):
            node = node["type"]
            continue
        return node
    raise InvalidSchema("Invalid schema: unresolvable type")


def kind_of(node: Any) -> str:
    """The Avro type of an unwrapped node: a primitive, record, enum, fixed, array, map, union."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    kind = node["type"]
    return "record" if kind == "error" else kind


def _inline(node: Any, names: dict[str, dict], defined: set[str]) -> Any:
    """`node` with each named type's definition at its first use (for the canonical form)."""
    if isinstance(node, str):
        if node in PRIMITIVES or node in defined:
            return node
        return _inline(names[node], names, defined)
    if isinstance(node, list):
        return [_inline(branch, names, defined) for branch in node]
    kind = node.get("type")
    if not isinstance(kind, str):
        return _inline(kind, names, defined)
    if kind in NAMED:
        if node["name"] in defined:
            return node["name"]
        defined.add(node["name"])
        out = dict(node)
        if kind in ("record", "error"):
            out["fields"] = [{**f, "type": _inline(f["type"], names, defined)} for f in node["fields"]]
        return out
    if kind == "array":
        return {**node, "items": _inline(node["items"], names, defined)}
    if kind == "map":
        return {**node, "values": _inline(node["values"], names, defined)}
    if kind not in PRIMITIVES:
        return _inline(kind, names, defined)
    return node


# --------------------------------------------------------------------------------------------------
# Confluent's normalized form (AvroSchemaUtils.toNormalizedString, adapted from Avro's
# SchemaNormalization)

_RESERVED = frozenset(("type", "name", "namespace", "doc", "aliases", "fields", "symbols", "size", "items", "values"))
_FIELD_RESERVED = frozenset(("name", "type", "default", "doc", "aliases", "order"))


def _js(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _namespace(full: str) -> str | None:
    return full.rpartition(".")[0] or None


def full_aliases(node: dict) -> list[str]:
    space = _namespace(node["name"])
    return [a if "." in a or space is None else f"{space}.{a}" for a in node.get("aliases", ())]


def _logical(node: dict, base: str) -> str | None:
    """The valid logical type of `node` (as Java's Avro would accept it), or None."""
    lt = node.get("logicalType")
    if not isinstance(lt, str) or base not in _LOGICAL.get(lt, ()):
        return None
    if lt == "decimal":
        precision, scale = node.get("precision"), node.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or precision <= 0 or not 0 <= scale <= precision:
            return None
    if lt == "duration" and node.get("size") != 12:
        return None
    return lt


def _logical_props(node: dict, lt: str, out: list[str]) -> None:
    out.append(f',"logicalType":{_js(lt)}')
    if lt == "decimal":
        out.append(f',"precision":{node["precision"]}')
        if node.get("scale", 0):
            out.append(f',"scale":{node["scale"]}')


def _simple_props(node: dict, reserved: frozenset[str], out: list[str]) -> None:
    for key in sorted(k for k in node if k not in reserved):
        out.append(f",{_js(key)}:{_js(node[key])}")


def _normalize(node: Any, names: dict[str, dict], env: set[str], out: list[str]) -> None:
    if isinstance(node, str):
        if node in PRIMITIVES:
            out.append(_js(node))
            return
        if node in env:
            out.append(_js(node))
            return
        _normalize(names[node], names, env, out)
        return
    if isinstance(node, list):
        out.append("[")
        for i, branch in enumerate(node):
            if i:
                out.append(",")
            _normalize(branch, names, env, out)
        out.append("]")
        return
    kind = node["type"]
    if not isinstance(kind, str) or (kind not in PRIMITIVES and kind not in NAMED and kind not in ("array", "map")):
        _normalize(kind, names, env, out)
        return
    if kind in ("array", "map"):
        child = "items" if kind == "array" else "values"
        out.append(f'{{"type":"{kind}","{child}":')
        _normalize(node[child], names, env, out)
        _simple_props(node, _RESERVED, out)
        out.append("}")
        return
    if kind in NAMED:
        full = node["name"]
        if full in env:
            out.append(_js(full))
            return
        env.add(full)
        out.append(f'{{"name":{_js(full)},"type":{_js(kind)}')
        reserved = _RESERVED
        if kind == "enum":
            out.append(',"symbols":' + _js(node["symbols"]))
            reserved = reserved | {"default"}
        elif kind == "fixed":
            out.append(f',"size":{node["size"]}')
            lt = _logical(node, "fixed")
            if lt is not None:
                _logical_props(node, lt, out)
                reserved = reserved | {"logicalType", "precision", "scale"}
        else:
            out.append(',"fields":[')
            for i, field in enumerate(node["fields"]):
                if i:
                    out.append(",")
                out.append(f'{{"name":{_js(field["name"])},"type":')
                _normalize(field["type"], names, env, out)
                order = field.get("order", "ascending")
                if isinstance(order, str) and order.lower() != "ascending":
                    out.append(f',"order":{_js(order.lower())}')
                if field.get("doc") is not None:
                    out.append(f',"doc":{_js(field["doc"])}')
                if field.get("aliases"):
                    out.append(f',"aliases":{_js(sorted(set(field["aliases"])))}')
                if "default" in field:
                    out.append(f',"default":{_js(field["default"])}')
                _simple_props(field, _FIELD_RESERVED, out)
                out.append("}")
            out.append("]")
        if node.get("doc"):
            out.append(f',"doc":{_js(node["doc"])}')
        if node.get("aliases"):
            out.append(f',"aliases":{_js(sorted(set(full_aliases(node))))}')
        if kind == "enum" and node.get("default") is not None:
            out.append(f',"default":{_js(node["default"])}')
        _simple_props(node, reserved, out)
        out.append("}")
        return
    # a primitive with attributes
    lt = _logical(node, kind)
    extra = [k for k in node if k != "type"]
    if lt is None and not extra:
        out.append(_js(kind))
        return
    out.append(f'{{"type":{_js(kind)}')
    reserved = frozenset(("type",))
    if lt is not None:
        _logical_props(node, lt, out)
        reserved = reserved | {"logicalType", "precision", "scale"}
    _simple_props(node, reserved, out)
    out.append("}")
