"""JSON Schema for the schema registry: parsing, the normalized form and compatibility.

Pure: no I/O.  ``parse`` checks a schema against its draft's meta-schema with the ``jsonschema``
library and resolves ``$ref``s (local ones and Confluent's schema references: other registered
schemas, by the reference's name) with a ``referencing`` registry.  ``compatibility`` compares a
reader with a writer the way Confluent's ``SchemaDiff`` does: it walks both schemas, lists every
difference as ``(Difference type, JSON-pointer-like path)`` and keeps those whose type is not in
Confluent's set of compatible changes.  Messages are ``"<TYPE> <path>"``, e.g.
``"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL #/properties/bar"``, the strings of Confluent's own test
data.

Confluent's comparison works on its parser's (Everit's) model of a schema, not on the JSON: a
schema is one of empty (``{}``/``true``), false, object, array, string, number (``integer`` is a
number that requires integers), boolean, null, enum, const, not, combined (``allOf``/``anyOf``/
``oneOf``; several kinds of keywords in one schema are an implicit ``allOf``), conditional, and a
reference.  ``_build`` makes the same model.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import jsonschema
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema

from kbroker.schema_registry.errors import InvalidSchema
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

# --- drafts -----------------------------------------------------------------------------------

_DRAFT4 = "http://json-schema.org/draft-04/schema"
_DRAFT6 = "http://json-schema.org/draft-06/schema"
_DRAFT7 = "http://json-schema.org/draft-07/schema"
_DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"
_DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"

# $schema (without a trailing "#", http or https) -> (validator class, referencing specification)
_DRAFTS: dict[str, tuple[type, Any]] = {
    _DRAFT4: (jsonschema.Draft4Validator, referencing.jsonschema.DRAFT4),
    _DRAFT6: (jsonschema.Draft6Validator, referencing.jsonschema.DRAFT6),
    _DRAFT7: (jsonschema.Draft7Validator, referencing.jsonschema.DRAFT7),
    _DRAFT2019: (jsonschema.Draft201909Validator, referencing.jsonschema.DRAFT201909),
    _DRAFT2020: (jsonschema.Draft202012Validator, referencing.jsonschema.DRAFT202012),
}


def _draft_of(schema: Any) -> str:
    """The draft of a schema: its ``$schema``, draft-07 when absent; InvalidSchema when unknown."""
    if not isinstance(schema, dict) or "$schema" not in schema:
        return _DRAFT7
    uri = schema["$schema"]
    if not isinstance(uri, str):
        raise InvalidSchema("$schema must be a string")
    key = uri.rstrip("#")
    for known in _DRAFTS:
        if key in (known, known.replace("https://", "http://"), known.replace("http://", "https://")):
            return known
    raise InvalidSchema(f"unsupported $schema {uri!r} (drafts 4, 6, 7, 2019-09 and 2020-12 are)")


# --- the parsed schema ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class JsonSchema:
    """A parsed, valid JSON Schema and the schemas it references (name -> parsed JSON)."""

    text: str
    schema: Any
    references: dict[str, Any] = field(default_factory=dict)
    draft: str = _DRAFT7
    _resolver: Any = field(default=None, repr=False)

    schema_type = "JSON"

    def canonical(self) -> str:
        """Confluent's normalized form (``normalize=true``): keys sorted, no whitespace."""
        return json.dumps(self.schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def compact(self) -> str:
        """The schema without whitespace, keys in their written order (Confluent's stored form)."""
        return json.dumps(self.schema, separators=(",", ":"), ensure_ascii=False)

    def __str__(self) -> str:
        return self.compact()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JsonSchema):
            return NotImplemented
        return self.canonical() == other.canonical() and _canon(self.references) == _canon(other.references)

    def __hash__(self) -> int:
        return hash(self.canonical())


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _load(text: str, what: str) -> Any:
    try:
        value = json.loads(text)
    except (TypeError, ValueError) as e:
        raise InvalidSchema(f"{what} is not valid JSON: {e}") from None
    if not isinstance(value, (dict, bool)):
        raise InvalidSchema(f"{what} must be a JSON object or a boolean, not {type(value).__name__}")
    return value


def _check_meta(schema: Any, draft: str, what: str) -> None:
    cls = _DRAFTS[draft][0]
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path)
        raise InvalidSchema(f"{what} is not a valid JSON Schema: {e.message}" + (f" at #/{where}" if where else "")) from None


def parse(text: str, references: dict[str, str] | None = None) -> JsonSchema:
    """Parse and check a JSON Schema; ``references`` maps a reference's name (the URL used in
    ``$ref``) to the referenced schema's text, all of them, transitively.  InvalidSchema on bad
    JSON, on a schema its draft's meta-schema refuses, on an unknown ``$schema`` and on a ``$ref``
    that resolves to nothing."""
    schema = _load(text, "schema")
    draft = _draft_of(schema)
    _check_meta(schema, draft, "schema")
    refs: dict[str, Any] = {}
    for name, ref_text in (references or {}).items():
        ref = _load(ref_text, f"reference {name!r}")
        _check_meta(ref, _draft_of(ref), f"reference {name!r}")
        refs[name] = ref
    resolver = _make_resolver(schema, draft, refs)
    parsed = JsonSchema(text=text, schema=schema, references=refs, draft=draft, _resolver=resolver)
    # Every $ref must resolve (Confluent's parser loads them eagerly and refuses the schema).
    _walk(_root(parsed), set())
    return parsed


def _base_uri(schema: Any, draft: str) -> str:
    if isinstance(schema, dict):
        key = "id" if draft == _DRAFT4 else "$id"
        value = schema.get(key)
        if isinstance(value, str):
            return value.split("#")[0]
    return ""


def _make_resolver(schema: Any, draft: str, refs: dict[str, Any]) -> Any:
    spec = _DRAFTS[draft][1]
    base = _base_uri(schema, draft)
    registry: referencing.Registry = referencing.Registry()
    for name, ref in refs.items():
        ref_draft = _draft_of(ref)
        resource = _DRAFTS[ref_draft][1].create_resource(ref)
        uris = {name, urljoin(base, name) if base else name}
        ref_id = _base_uri(ref, ref_draft)
        if ref_id:
            uris.add(ref_id)
        for uri in uris:
            registry = registry.with_resource(uri, resource)
    main = spec.create_resource(schema)
    registry = registry.with_resource(base, main)
    try:
        registry = registry.crawl()
    except Exception as e:  # noqa: BLE001 - a malformed $id or anchor
        raise InvalidSchema(f"schema references cannot be indexed: {e}") from None
    return registry.resolver(base_uri=base)


# --- the model (Everit's kinds of schema) -----------------------------------------------------

_OBJECT_KW = ("properties", "additionalProperties", "required", "minProperties", "maxProperties",
              "dependencies", "dependentRequired", "dependentSchemas", "patternProperties", "propertyNames")
_ARRAY_KW = ("items", "additionalItems", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains")
_STRING_KW = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COMBINED_KW = ("allOf", "anyOf", "oneOf")


class _Node:
    """One schema of the model: ``kind`` and its keywords; children built on demand."""

    __slots__ = ("_cache", "draft", "extra", "kind", "meta", "raw", "resolver")

    def __init__(self, kind: str, raw: Any, resolver: Any, draft: str, meta: dict[str, Any] | None = None,
                 **extra: Any) -> None:
        self.kind = kind
        self.raw = raw
        self.resolver = resolver
        self.draft = draft
        self.meta = meta or {}
        self.extra = extra
        self._cache: dict[Any, Any] = {}

    def child(self, value: Any) -> _Node:
        key = id(value)
        if key not in self._cache:
            self._cache[key] = (value, _build(value, self.resolver, self.draft))
        return self._cache[key][1]

    def target(self) -> _Node:
        """A reference's target (cached), InvalidSchema when it does not resolve."""
        if "target" not in self._cache:
            try:
                resolved = self.resolver.lookup(self.extra["ref"])
            except (referencing.exceptions.Unresolvable, ValueError) as e:
                raise InvalidSchema(f"$ref {self.extra['ref']!r} does not resolve: {e}") from None
            self._cache["target"] = _build(resolved.contents, resolved.resolver, self.draft)
        return self._cache["target"]

    @property
    def key(self) -> tuple:
        """Identity of the schema this node models (nodes are rebuilt; the JSON they model is not)."""
        return (id(self.raw), self.kind, self.extra.get("criterion"), self.extra.get("integer"),
                self.extra.get("synthetic"))

    def __repr__(self) -> str:
        return f"_Node({self.kind}, {self.raw!r})"


def _root(schema: JsonSchema) -> _Node:
    return _build(schema.schema, schema._resolver, schema.draft)


def _build(raw: Any, resolver: Any, draft: str) -> _Node:
    if raw is True:
        return _Node("empty", raw, resolver, draft)
    if raw is False:
        return _Node("false", raw, resolver, draft)
    if not isinstance(raw, dict):
        return _Node("empty", raw, resolver, draft)
    id_key = "id" if draft == _DRAFT4 else "$id"
    sub_id = raw.get(id_key)
    if isinstance(sub_id, str) and sub_id and not sub_id.startswith("#"):
        resolver = resolver.in_subresource(_DRAFTS[draft][1].create_resource(raw))
    meta = {"id": raw.get(id_key), "title": raw.get("title"), "description": raw.get("description")}
    if "default" in raw:
        meta["default"] = _canon(raw["default"])
    parts: list[_Node] = []
    if "$ref" in raw:
        ref = _Node("ref", raw, resolver, draft, ref=raw["$ref"])
        if draft in (_DRAFT4, _DRAFT6, _DRAFT7):
            ref.meta = meta
            return ref  # siblings of $ref are ignored before 2019-09
        parts.append(ref)
    types = raw.get("type")
    if isinstance(types, str):
        parts.append(_typed(types, raw, resolver, draft))
    elif isinstance(types, list):
        if len(types) == 1:
            parts.append(_typed(types[0], raw, resolver, draft))
        else:
            subs = [_typed(t, raw, resolver, draft) for t in types]
            parts.append(_Node("combined", raw, resolver, draft, criterion="anyOf", subs=subs))
    else:
        for kind, keywords in (("object", _OBJECT_KW), ("array", _ARRAY_KW), ("string", _STRING_KW),
                               ("number", _NUMBER_KW)):
            if any(k in raw for k in keywords):
                parts.append(_typed(kind, raw, resolver, draft))
    if "enum" in raw:
        parts.append(_Node("enum", raw, resolver, draft, values=list(raw["enum"])))
    if "const" in raw:
        parts.append(_Node("const", raw, resolver, draft, value=raw["const"]))
    if "not" in raw:
        parts.append(_Node("not", raw, resolver, draft))
    for criterion in _COMBINED_KW:
        if criterion in raw:
            # Subschemas are a set, as in Confluent's parser: duplicates count once.
            unique = {_canon(s): s for s in reversed(raw[criterion])}
            subs = [_build(s, resolver, draft) for s in raw[criterion] if unique.get(_canon(s)) is s]
            parts.append(_Node("combined", raw, resolver, draft, criterion=criterion, subs=subs))
    if "if" in raw:
        parts.append(_Node("conditional", raw, resolver, draft))
    if not parts:
        return _Node("empty", raw, resolver, draft, meta)
    if len(parts) == 1:
        parts[0].meta = meta
        return parts[0]
    return _Node("combined", raw, resolver, draft, meta, criterion="allOf", subs=parts, synthetic=True)


def _typed(type_name: str, raw: dict, resolver: Any, draft: str) -> _Node:
    if type_name == "integer":
        return _Node("number", raw, resolver, draft, integer=True)
    if type_name in ("object", "array", "string", "number", "boolean", "null"):
        return _Node(type_name, raw, resolver, draft, integer=False)
    return _Node("empty", raw, resolver, draft)


def _walk(node: _Node, seen: set[tuple]) -> None:
    """Build every node once, resolving every reference (InvalidSchema when one does not)."""
    if node.key in seen:
        return
    seen.add(node.key)
    for sub in _children(node):
        _walk(sub, seen)


def _children(node: _Node) -> list[_Node]:
    raw, kind = node.raw, node.kind
    out: list[_Node] = []
    if kind == "ref":
        t = node.target()
        return [t]
    if kind == "combined":
        return list(node.extra["subs"])
    if kind == "not":
        return [node.child(raw["not"])]
    if kind == "conditional":
        return [node.child(raw[k]) for k in ("if", "then", "else") if k in raw]
    if kind == "object":
        for key in ("properties", "patternProperties", "dependentSchemas"):
            for value in (raw.get(key) or {}).values():
                out.append(node.child(value))
        for value in (raw.get("dependencies") or {}).values():
            if not isinstance(value, list):
                out.append(node.child(value))
        for key in ("additionalProperties", "propertyNames"):
            if key in raw:
                out.append(node.child(raw[key]))
    if kind == "array":
        tuple_items, all_items, additional = _array_parts(node)
        out.extend(node.child(v) for v in tuple_items or [])
        out.extend(node.child(v) for v in (all_items, additional, raw.get("contains")) if v is not None)
    return out


# --- differences ------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Difference:
    """One difference between an original (writer) and an update (reader), Confluent's names."""

    type: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE_CHANGES

    def __str__(self) -> str:
        return f"{self.type} {self.path}"


# Confluent's SchemaDiff.COMPATIBLE_CHANGES: every other difference is an incompatibility.
COMPATIBLE_CHANGES = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED",
    "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED",
})


class _Ctx:
    """Differences found under one path; a sub-context tries a comparison without committing it."""

    def __init__(self, path: tuple[str, ...] = (), seen: frozenset | None = None) -> None:
        self.path = path
        self.diffs: list[Difference] = []
        self.seen = seen if seen is not None else frozenset()

    def add(self, kind: str, *segments: str | int) -> None:
        path = self.path + tuple(str(s) for s in segments)
        self.diffs.append(Difference(kind, "#/" + "/".join(path)))

    def sub(self, *segments: str | int) -> _Ctx:
        """A trial context: its differences count only once merged."""
        return _Ctx(self.path + tuple(str(s) for s in segments), self.seen)

    def at(self, *segments: str | int) -> _Ctx:
        """The same differences, under a longer path."""
        ctx = _Ctx(self.path + tuple(str(s) for s in segments), self.seen)
        ctx.diffs = self.diffs
        return ctx

    def merge(self, other: _Ctx) -> None:
        self.diffs.extend(other.diffs)

    @property
    def compatible(self) -> bool:
        return all(d.compatible for d in self.diffs)


def diff(original: JsonSchema, update: JsonSchema) -> list[Difference]:
    """Every difference from ``original`` (the writer's schema) to ``update`` (the reader's)."""
    ctx = _Ctx()
    _compare(ctx, _root(original), _root(update))
    out: list[Difference] = []
    for d in ctx.diffs:
        if d not in out:
            out.append(d)
    return out


def compatibility(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """The incompatibilities of reading data valid under ``writer`` with ``reader``: [] when none."""
    return [str(d) for d in diff(writer, reader) if not d.compatible]


def _resolve(node: _Node) -> _Node:
    hops = 0
    while node.kind == "ref":
        node = node.target()
        hops += 1
        if hops > 100:
            raise InvalidSchema("$ref chain too long or circular")
    return node


def _compare(ctx: _Ctx, original: _Node | None, update: _Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    original, update = _resolve(original), _resolve(update)
    pair = (original.key, update.key)
    if pair in ctx.seen:  # a recursive schema compared with itself further down: done
        return
    ctx.seen = ctx.seen | {pair}

    if original.kind != "combined" and update.kind == "combined":
        subs = update.extra["subs"]
        if len(subs) == 1:
            sub = ctx.sub()
            _compare(sub, original, subs[0])
            if sub.compatible:
                ctx.merge(sub)
                return
        elif update.extra["criterion"] in ("anyOf", "oneOf"):
            for s in subs:
                sub = ctx.sub()
                _compare(sub, original, s)
                if sub.compatible:
                    ctx.merge(sub)
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif original.kind == "combined" and update.kind != "combined":
        subs = original.extra["subs"]
        if len(subs) == 1:
            sub = ctx.sub()
            _compare(sub, subs[0], update)
            if sub.compatible:
                ctx.merge(sub)
                return
        elif original.extra["criterion"] == "allOf":
            for s in subs:
                sub = ctx.sub()
                _compare(sub, s, update)
                if sub.compatible:
                    ctx.merge(sub)
                    ctx.add("PRODUCT_TYPE_NARROWED")
                    return

    if original.kind != update.kind:
        if original.kind == "false" or update.kind == "empty":
            return  # nothing is valid under false; anything is valid under {}
        ctx.add("TYPE_CHANGED")
        return

    for key, kind in (("id", "ID_CHANGED"), ("title", "TITLE_CHANGED"), ("description", "DESCRIPTION_CHANGED"),
                      ("default", "DEFAULT_CHANGED")):
        if original.meta.get(key) != update.meta.get(key):
            ctx.add(kind)

    compare = _COMPARE.get(original.kind)
    if compare is not None:
        compare(ctx, original, update)


# - numbers and strings -


def _limit(ctx: _Ctx, keyword: str, old: Any, new: Any) -> None:
    """A numeric limit: added/removed/increased/decreased (names from the keyword)."""
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", keyword).upper()
    if old is None and new is None or old == new:
        return
    if old is None:
        ctx.add(f"{name}_ADDED", keyword)
    elif new is None:
        ctx.add(f"{name}_REMOVED", keyword)
    elif new > old:
        ctx.add(f"{name}_INCREASED", keyword)
    else:
        ctx.add(f"{name}_DECREASED", keyword)


def _num(raw: dict, key: str) -> Any:
    value = raw.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _compare_string(ctx: _Ctx, o: _Node, u: _Node) -> None:
    _limit(ctx, "maxLength", _num(o.raw, "maxLength"), _num(u.raw, "maxLength"))
    _limit(ctx, "minLength", _num(o.raw, "minLength"), _num(u.raw, "minLength"))
    op, up = o.raw.get("pattern"), u.raw.get("pattern")
    if op != up:
        if op is None:
            ctx.add("PATTERN_ADDED", "pattern")
        elif up is None:
            ctx.add("PATTERN_REMOVED", "pattern")
        else:
            ctx.add("PATTERN_CHANGED", "pattern")


def _exclusive(raw: dict, draft: str, which: str) -> Any:
    """exclusiveMaximum/Minimum as a number; draft 4's boolean form makes the plain limit exclusive."""
    if draft == _DRAFT4:
        plain = "maximum" if which == "exclusiveMaximum" else "minimum"
        return _num(raw, plain) if raw.get(which) is True else None
    return _num(raw, which)


def _plain(raw: dict, draft: str, which: str) -> Any:
    return _num(raw, which)


def _compare_number(ctx: _Ctx, o: _Node, u: _Node) -> None:
    if o.extra.get("integer") != u.extra.get("integer"):
        ctx.add("TYPE_EXTENDED" if o.extra.get("integer") else "TYPE_NARROWED")
    _limit(ctx, "maximum", _plain(o.raw, o.draft, "maximum"), _plain(u.raw, u.draft, "maximum"))
    _limit(ctx, "minimum", _plain(o.raw, o.draft, "minimum"), _plain(u.raw, u.draft, "minimum"))
    _limit(ctx, "exclusiveMaximum", _exclusive(o.raw, o.draft, "exclusiveMaximum"),
           _exclusive(u.raw, u.draft, "exclusiveMaximum"))
    _limit(ctx, "exclusiveMinimum", _exclusive(o.raw, o.draft, "exclusiveMinimum"),
           _exclusive(u.raw, u.draft, "exclusiveMinimum"))
    om, um = _num(o.raw, "multipleOf"), _num(u.raw, "multipleOf")
    if om != um:
        if om is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif um is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif _divides(um, om):
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        elif _divides(om, um):
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")


def _divides(d: float, n: float) -> bool:
    """``n`` is a multiple of ``d``."""
    if d == 0:
        return False
    q = n / d
    return math.isclose(q, round(q), rel_tol=0, abs_tol=1e-9)


# - enum, const, not, combined, conditional -


def _value_key(value: Any) -> str:
    """JSON equality of two values (1 == 1.0, True != 1)."""
    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v
    return _canon(norm(value))


def _compare_enum(ctx: _Ctx, o: _Node, u: _Node) -> None:
    ov = {_value_key(v) for v in o.extra["values"]}
    uv = {_value_key(v) for v in u.extra["values"]}
    if ov == uv:
        return
    if uv >= ov:
        ctx.add("ENUM_ARRAY_EXTENDED", "enum")
    elif uv <= ov:
        ctx.add("ENUM_ARRAY_NARROWED", "enum")
    else:
        ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _compare_const(ctx: _Ctx, o: _Node, u: _Node) -> None:
    if _value_key(o.extra["value"]) != _value_key(u.extra["value"]):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _compare_not(ctx: _Ctx, o: _Node, u: _Node) -> None:
    # not A -> not B is compatible when B's values are within A's: compare the other way round.
    sub = ctx.sub("not")
    _compare(sub, u.child(u.raw["not"]), o.child(o.raw["not"]))
    if not sub.diffs:
        return
    ctx.add("NOT_TYPE_NARROWED" if sub.compatible else "NOT_TYPE_EXTENDED", "not")


def _compare_combined(ctx: _Ctx, o: _Node, u: _Node) -> None:
    oc, uc = o.extra["criterion"], u.extra["criterion"]
    osubs, usubs = o.extra["subs"], u.extra["subs"]
    # A singleton combination is its one subschema whatever its criterion.
    effective = uc if len(osubs) == 1 else oc
    if oc != uc:
        if len(osubs) == 1 or oc == "allOf" or uc == "anyOf":
            ctx.add("COMBINED_TYPE_EXTENDED")  # the reader accepts at least what the writer did
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            return
    if len(usubs) > len(osubs):
        ctx.add("PRODUCT_TYPE_EXTENDED" if effective == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(usubs) < len(osubs):
        ctx.add("PRODUCT_TYPE_NARROWED" if effective == "allOf" else "SUM_TYPE_NARROWED")
    edges: dict[tuple[int, int], _Ctx] = {}
    for i, os_ in enumerate(osubs):
        for j, us in enumerate(usubs):
            sub = ctx.sub(oc, i)
            _compare(sub, os_, us)
            if sub.compatible:
                edges[(i, j)] = sub
    matching = _max_matching(len(osubs), len(usubs), edges)
    if len(matching) < min(len(osubs), len(usubs)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")
        return
    for i, j in sorted(matching):
        ctx.merge(edges[(i, j)])


def _max_matching(n: int, m: int, edges: dict[tuple[int, int], Any]) -> list[tuple[int, int]]:
    """A maximum bipartite matching (Kuhn's augmenting paths); prefers the diagonal and fewer diffs."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for (i, j), sub in sorted(edges.items(), key=lambda e: (e[0][0], len(e[1].diffs), e[0][1] != e[0][0])):
        adj[i].append(j)
    match_of: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in adj[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in match_of or augment(match_of[j], seen):
                match_of[j] = i
                return True
        return False

    for i in range(n):
        augment(i, set())
    return [(i, j) for j, i in match_of.items()]


def _compare_conditional(ctx: _Ctx, o: _Node, u: _Node) -> None:
    # Confluent documents no rule for if/then/else: any change is reported as changed subschemas.
    if any(_canon(o.raw.get(k)) != _canon(u.raw.get(k)) for k in ("if", "then", "else")):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


# - objects -


def _open_model(node: _Node) -> tuple[bool, Any]:
    """(additional properties permitted, their schema or None when unconstrained)."""
    value = node.raw.get("additionalProperties", True)
    if value is False:
        return False, None
    if value is True or value == {}:
        return True, None
    return True, value


def _pattern_schema(node: _Node, key: str) -> Any:
    for pattern, schema in (node.raw.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, key):
                return schema
        except re.error:
            continue
    return None


def _has_default(node: _Node) -> bool:
    node = _resolve(node)
    return isinstance(node.raw, dict) and "default" in node.raw


def _compare_object(ctx: _Ctx, o: _Node, u: _Node) -> None:
    oprops: dict[str, Any] = o.raw.get("properties") or {}
    uprops: dict[str, Any] = u.raw.get("properties") or {}
    oreq = set(o.raw.get("required") or [])
    ureq = set(u.raw.get("required") or [])

    for key, oprop in oprops.items():
        if key in uprops:
            continue
        # removed: does the reader's content model still accept what the writer wrote there?
        cover = _pattern_schema(u, key)
        permits, additional = _open_model(u)
        if cover is None and permits:
            cover = additional
        if cover is not None:
            sub = ctx.sub("properties", key)
            _compare(sub, o.child(oprop), u.child(cover))
            ctx.merge(sub)
            ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                    else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "properties", key)
        elif permits:
            ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", "properties", key)
        elif _resolve(o.child(oprop)).kind == "false":
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "properties", key)
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "properties", key)

    for key, uprop in uprops.items():
        if key in oprops:
            continue
        # added: what could the writer have written under this name?
        cover = _pattern_schema(o, key)
        permits, additional = _open_model(o)
        if cover is None and permits:
            cover = additional
        if cover is None and permits:  # fully open
            if _resolve(u.child(uprop)).kind == "empty":
                ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "properties", key)
            else:
                ctx.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "properties", key)
            if key in ureq and key not in oreq:
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if _has_default(u.child(uprop))
                        else "REQUIRED_ATTRIBUTE_ADDED", "required", key)
            continue
        if cover is not None:
            sub = ctx.sub("properties", key)
            _compare(sub, o.child(cover), u.child(uprop))
            ctx.merge(sub)
            ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                    else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "properties", key)
        if key in ureq:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if _has_default(u.child(uprop))
                    else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "properties", key)
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "properties", key)

    for key, oprop in oprops.items():
        if key in uprops:
            _compare(ctx.at("properties", key), o.child(oprop), u.child(uprops[key]))

    for key in sorted(oreq - ureq):
        ctx.add("REQUIRED_ATTRIBUTE_REMOVED", "required", key)
    for key in sorted(ureq - oreq):
        if key in oprops:  # a newly added property is judged above, with its content model
            ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if key in uprops and _has_default(u.child(uprops[key]))
                    else "REQUIRED_ATTRIBUTE_ADDED", "required", key)

    _compare_dependencies(ctx, o, u)

    _compare_additional(ctx, o, u, _open_model(o), _open_model(u), "PROPERTIES", "additionalProperties")

    _limit(ctx, "maxProperties", _num(o.raw, "maxProperties"), _num(u.raw, "maxProperties"))
    _limit(ctx, "minProperties", _num(o.raw, "minProperties"), _num(u.raw, "minProperties"))


def _dependencies(node: _Node) -> tuple[dict[str, list], dict[str, Any]]:
    arrays: dict[str, list] = {}
    schemas: dict[str, Any] = {}
    for key, value in (node.raw.get("dependencies") or {}).items():
        (arrays if isinstance(value, list) else schemas)[key] = value
    arrays.update(node.raw.get("dependentRequired") or {})
    schemas.update(node.raw.get("dependentSchemas") or {})
    return arrays, schemas


def _compare_dependencies(ctx: _Ctx, o: _Node, u: _Node) -> None:
    oarr, osch = _dependencies(o)
    uarr, usch = _dependencies(u)
    for key in sorted(set(oarr) | set(uarr)):
        if key not in uarr:
            ctx.add("DEPENDENCY_ARRAY_REMOVED", "dependencies", key)
        elif key not in oarr:
            ctx.add("DEPENDENCY_ARRAY_ADDED", "dependencies", key)
        else:
            old, new = set(oarr[key]), set(uarr[key])
            if old == new:
                continue
            if new < old:
                ctx.add("DEPENDENCY_ARRAY_NARROWED", "dependencies", key)
            elif new > old:
                ctx.add("DEPENDENCY_ARRAY_EXTENDED", "dependencies", key)
            else:
                ctx.add("DEPENDENCY_ARRAY_CHANGED", "dependencies", key)
    for key in sorted(set(osch) | set(usch)):
        if key not in usch:
            ctx.add("DEPENDENCY_SCHEMA_REMOVED", "dependencies", key)
        elif key not in osch:
            ctx.add("DEPENDENCY_SCHEMA_ADDED", "dependencies", key)
        else:
            _compare(ctx.at("dependencies", key), o.child(osch[key]), u.child(usch[key]))


# - arrays -


def _array_parts(node: _Node) -> tuple[list | None, Any, Any]:
    """(tuple item schemas or None, the schema of all items or None, additional items: schema/bool/None)."""
    raw = node.raw
    if node.draft == _DRAFT2020:
        tuple_items = raw.get("prefixItems")
        if tuple_items is not None:
            return list(tuple_items), None, raw.get("items")
        return None, raw.get("items"), None
    items = raw.get("items")
    if isinstance(items, list):
        return list(items), None, raw.get("additionalItems")
    return None, items, raw.get("additionalItems")


def _additional_model(node: _Node) -> tuple[bool, Any]:
    tuple_items, all_items, additional = _array_parts(node)
    if tuple_items is None and node.draft == _DRAFT2020 and all_items is not None:
        additional = all_items  # 2020-12: items alone is also what additionalItems was
    if additional is False:
        return False, None
    if additional is None or additional is True or additional == {}:
        return True, None
    return True, additional


def _compare_array(ctx: _Ctx, o: _Node, u: _Node) -> None:
    _limit(ctx, "maxItems", _num(o.raw, "maxItems"), _num(u.raw, "maxItems"))
    _limit(ctx, "minItems", _num(o.raw, "minItems"), _num(u.raw, "minItems"))
    ou, uu = o.raw.get("uniqueItems") is True, u.raw.get("uniqueItems") is True
    if ou != uu:
        ctx.add("UNIQUE_ITEMS_ADDED" if uu else "UNIQUE_ITEMS_REMOVED", "uniqueItems")

    otuple, oall, _ = _array_parts(o)
    utuple, uall, _ = _array_parts(u)
    opermits, oadd = _additional_model(o)
    upermits, uadd = _additional_model(u)
    both_2020_single = (o.draft == _DRAFT2020 and otuple is None) and (u.draft == _DRAFT2020 and utuple is None)
    if not both_2020_single:
        _compare_additional(ctx, o, u, (opermits, oadd), (upermits, uadd), "ITEMS", "additionalItems")
    elif oall is False or uall is False:
        # 2020-12 "items": false/true without prefixItems: the additional-items rules.
        if oall is not False and uall is False:
            ctx.add("ADDITIONAL_ITEMS_REMOVED", "additionalItems")
        elif oall is False and uall is not False:
            ctx.add("ADDITIONAL_ITEMS_ADDED", "additionalItems")
        oall = uall = None

    if oall is not None or uall is not None:
        _compare(ctx.at("items"), o.child(oall) if oall is not None else None,
                 u.child(uall) if uall is not None else None)

    otuple, utuple = otuple or [], utuple or []
    for i in range(min(len(otuple), len(utuple))):
        _compare(ctx.at("items", i), o.child(otuple[i]), u.child(utuple[i]))
    for i in range(len(otuple), len(utuple)):  # added item positions
        if not opermits:
            ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", "items", i)
        elif oadd is not None:
            sub = ctx.sub("items", i)
            _compare(sub, o.child(oadd), u.child(utuple[i]))
            ctx.merge(sub)
            ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                    else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "items", i)
        elif _resolve(u.child(utuple[i])).kind == "empty":
            ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "items", i)
        else:
            ctx.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", "items", i)
    for i in range(len(utuple), len(otuple)):  # removed item positions
        if not upermits:
            if _resolve(o.child(otuple[i])).kind == "false":
                ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "items", i)
            else:
                ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", "items", i)
        elif uadd is not None:
            sub = ctx.sub("items", i)
            _compare(sub, o.child(otuple[i]), u.child(uadd))
            ctx.merge(sub)
            ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                    else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "items", i)
        else:
            ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "items", i)


_COMPARE = {
    "string": _compare_string,
    "number": _compare_number,
    "enum": _compare_enum,
    "const": _compare_const,
    "not": _compare_not,
    "combined": _compare_combined,
    "conditional": _compare_conditional,
    "object": _compare_object,
    "array": _compare_array,
}


# --- compatibility levels ---------------------------------------------------------------------



def check(level: str, new: JsonSchema, previous: list[JsonSchema]) -> list[str]:
    """The incompatibilities of ``new`` with ``previous`` (oldest first) under a compatibility
    level; [] when compatible.  Non-transitive levels look at the latest previous schema only."""
    olds, forward, backward = against(level, previous)
    out: list[str] = []
    for old in olds:  # newest first, as Confluent reports
        if backward:
            out.extend(compatibility(new, old))  # the new schema reads old data
        if forward:
            out.extend(compatibility(old, new))  # old schemas read new data
    return out


def _compare_additional(ctx, o, u, old: tuple, new: tuple, kind: str, keyword: str) -> None:
    """additionalProperties / additionalItems: (whether more are permitted, the schema they must
    match or None for any) of the original and the update, as Confluent's ADDITIONAL_<kind>_* changes."""
    (opermits, oadd), (upermits, uadd) = old, new
    if not opermits and upermits:
        ctx.add(f"ADDITIONAL_{kind}_ADDED", keyword)
    elif opermits and not upermits:
        ctx.add(f"ADDITIONAL_{kind}_REMOVED", keyword)
    elif opermits:
        if oadd is None and uadd is not None:
            ctx.add(f"ADDITIONAL_{kind}_NARROWED", keyword)
        elif oadd is not None and uadd is None:
            ctx.add(f"ADDITIONAL_{kind}_EXTENDED", keyword)
        elif oadd is not None:
            _compare(ctx.at(keyword), o.child(oadd), u.child(uadd))
