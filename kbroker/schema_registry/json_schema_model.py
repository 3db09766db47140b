"""JSON Schema parsing for the registry, and the model of a schema the comparison walks.

`parse` checks a schema against its draft's meta-schema with the ``jsonschema`` library and
resolves ``$ref``s (local ones and Confluent's schema references: other registered schemas, by the
reference's name) with a ``referencing`` registry; `JsonSchema` is the parsed schema and its
normalized form. `Node` is Confluent's parser's (Everit's) model of a schema, not the JSON: one of
empty (``{}``/``true``), false, object, array, string, number (``integer`` is a number that requires
integers), boolean, null, enum, const, not, combined (``allOf``/``anyOf``/``oneOf``; several kinds
of keywords in one schema are an implicit ``allOf``), conditional, and a reference; `build` makes
it, and the functions at the end read what a node's keywords say (for `json_schema_diff`). Pure:
no I/O.
"""

from __future__ import annotations

import json
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

__all__ = [
    "DRAFT4",
    "DRAFT2020",
    "JsonSchema",
    "Node",
    "additional_model",
    "array_parts",
    "build",
    "canon",
    "dependencies",
    "has_default",
    "open_model",
    "parse",
    "pattern_schema",
    "resolve",
    "root",
]

# --- drafts -----------------------------------------------------------------------------------

DRAFT4 = "http://json-schema.org/draft-04/schema"
DRAFT6 = "http://json-schema.org/draft-06/schema"
DRAFT7 = "http://json-schema.org/draft-07/schema"
DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"

# $schema (without a trailing "#", http or https) -> (validator class, referencing specification)
DRAFTS: dict[str, tuple[type, Any]] = {
    DRAFT4: (jsonschema.Draft4Validator, referencing.jsonschema.DRAFT4),
    DRAFT6: (jsonschema.Draft6Validator, referencing.jsonschema.DRAFT6),
    DRAFT7: (jsonschema.Draft7Validator, referencing.jsonschema.DRAFT7),
    DRAFT2019: (jsonschema.Draft201909Validator, referencing.jsonschema.DRAFT201909),
    DRAFT2020: (jsonschema.Draft202012Validator, referencing.jsonschema.DRAFT202012),
}


def _draft_of(schema: Any) -> str:
    """The draft of a schema: its ``$schema``, draft-07 when absent; InvalidSchema when unknown."""
    if not isinstance(schema, dict) or "$schema" not in schema:
        return DRAFT7
    uri = schema["$schema"]
    if not isinstance(uri, str):
        raise InvalidSchema("$schema must be a string")
    key = uri.rstrip("#")
    for known in DRAFTS:
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
    draft: str = DRAFT7
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
        return self.canonical() == other.canonical() and canon(self.references) == canon(other.references)

    def __hash__(self) -> int:
        return hash(self.canonical())


def canon(value: Any) -> str:
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
    cls = DRAFTS[draft][0]
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
    _walk(root(parsed), set())
    return parsed


def _base_uri(schema: Any, draft: str) -> str:
    if isinstance(schema, dict):
        key = "id" if draft == DRAFT4 else "$id"
        value = schema.get(key)
        if isinstance(value, str):
            return value.split("#")[0]
    return ""


def _make_resolver(schema: Any, draft: str, refs: dict[str, Any]) -> Any:
    spec = DRAFTS[draft][1]
    base = _base_uri(schema, draft)
    registry: referencing.Registry = referencing.Registry()
    for name, ref in refs.items():
        ref_draft = _draft_of(ref)
        resource = DRAFTS[ref_draft][1].create_resource(ref)
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


class Node:
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

    def child(self, value: Any) -> Node:
        key = id(value)
        if key not in self._cache:
            self._cache[key] = (value, build(value, self.resolver, self.draft))
        return self._cache[key][1]

    def target(self) -> Node:
        """A reference's target (cached), InvalidSchema when it does not resolve."""
        if "target" not in self._cache:
            try:
                resolved = self.resolver.lookup(self.extra["ref"])
            except (referencing.exceptions.Unresolvable, ValueError) as e:
                raise InvalidSchema(f"$ref {self.extra['ref']!r} does not resolve: {e}") from None
            self._cache["target"] = build(resolved.contents, resolved.resolver, self.draft)
        return self._cache["target"]

    @property
    def key(self) -> tuple:
        """Identity of the schema this node models (nodes are rebuilt; the JSON they model is not)."""
        return (id(self.raw), self.kind, self.extra.get("criterion"), self.extra.get("integer"),
                self.extra.get("synthetic"))

    def __repr__(self) -> str:
        return f"Node({self.kind}, {self.raw!r})"


def root(schema: JsonSchema) -> Node:
    return build(schema.schema, schema._resolver, schema.draft)


def build(raw: Any, resolver: Any, draft: str) -> Node:
    if raw is True:
        return Node("empty", raw, resolver, draft)
    if raw is False:
        return Node("false", raw, resolver, draft)
    if not isinstance(raw, dict):
        return Node("empty", raw, resolver, draft)
    id_key = "id" if draft == DRAFT4 else "$id"
    sub_id = raw.get(id_key)
    if isinstance(sub_id, str) and sub_id and not sub_id.startswith("#"):
        resolver = resolver.in_subresource(DRAFTS[draft][1].create_resource(raw))
    meta = {"id": raw.get(id_key), "title": raw.get("title"), "description": raw.get("description")}
    if "default" in raw:
        meta["default"] = canon(raw["default"])
    parts: list[Node] = []
    if "$ref" in raw:
        ref = Node("ref", raw, resolver, draft, ref=raw["$ref"])
        if draft in (DRAFT4, DRAFT6, DRAFT7):
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
            parts.append(Node("combined", raw, resolver, draft, criterion="anyOf", subs=subs))
    else:
        for kind, keywords in (("object", _OBJECT_KW), ("array", _ARRAY_KW), ("string", _STRING_KW),
                               ("number", _NUMBER_KW)):
            if any(k in raw for k in keywords):
                parts.append(_typed(kind, raw, resolver, draft))
    if "enum" in raw:
        parts.append(Node("enum", raw, resolver, draft, values=list(raw["enum"])))
    if "const" in raw:
        parts.append(Node("const", raw, resolver, draft, value=raw["const"]))
    if "not" in raw:
        parts.append(Node("not", raw, resolver, draft))
    for criterion in _COMBINED_KW:
        if criterion in raw:
            # Subschemas are a set, as in Confluent's parser: duplicates count once.
            unique = {canon(s): s for s in reversed(raw[criterion])}
            subs = [build(s, resolver, draft) for s in raw[criterion] if unique.get(canon(s)) is s]
            parts.append(Node("combined", raw, resolver, draft, criterion=criterion, subs=subs))
    if "if" in raw:
        parts.append(Node("conditional", raw, resolver, draft))
    if not parts:
        return Node("empty", raw, resolver, draft, meta)
    if len(parts) == 1:
        parts[0].meta = meta
        return parts[0]
    return Node("combined", raw, resolver, draft, meta, criterion="allOf", subs=parts, synthetic=True)


def _typed(type_name: str, raw: dict, resolver: Any, draft: str) -> Node:
    if type_name == "integer":
        return Node("number", raw, resolver, draft, integer=True)
    if type_name in ("object", "array", "string", "number", "boolean", "null"):
        return Node(type_name, raw, resolver, draft, integer=False)
    return Node("empty", raw, resolver, draft)


def _walk(node: Node, seen: set[tuple]) -> None:
    """Build every node once, resolving every reference (InvalidSchema when one does not)."""
    if node.key in seen:
        return
    seen.add(node.key)
    for sub in _children(node):
        _walk(sub, seen)


def _children(node: Node) -> list[Node]:
    raw, kind = node.raw, node.kind
    out: list[Node] = []
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
        tuple_items, all_items, additional = array_parts(node)
        out.extend(node.child(v) for v in tuple_items or [])
        out.extend(node.child(v) for v in (all_items, additional, raw.get("contains")) if v is not None)
    return out


# --- what a node's keywords say ---------------------------------------------------------

def resolve(node: Node) -> Node:
    hops = 0
    while node.kind == "ref":
        node = node.target()
        hops += 1
        if hops > 100:
            raise InvalidSchema("$ref chain too long or circular")
    return node


def open_model(node: Node) -> tuple[bool, Any]:
    """(additional properties permitted, their schema or None when unconstrained)."""
    value = node.raw.get("additionalProperties", True)
    if value is False:
        return False, None
    if value is True or value == {}:
        return True, None
    return True, value


def pattern_schema(node: Node, key: str) -> Any:
    for pattern, schema in (node.raw.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, key):
                return schema
        except re.error:
            continue
    return None


def has_default(node: Node) -> bool:
    node = resolve(node)
    return isinstance(node.raw, dict) and "default" in node.raw


def dependencies(node: Node) -> tuple[dict[str, list], dict[str, Any]]:
    arrays: dict[str, list] = {}
    schemas: dict[str, Any] = {}
    for key, value in (node.raw.get("dependencies") or {}).items():
        (arrays if isinstance(value, list) else schemas)[key] = value
    arrays.update(node.raw.get("dependentRequired") or {})
    schemas.update(node.raw.get("dependentSchemas") or {})
    return arrays, schemas


def array_parts(node: Node) -> tuple[list | None, Any, Any]:
    """(tuple item schemas or None, the schema of all items or None, additional items: schema/bool/None)."""
    raw = node.raw
    if node.draft == DRAFT2020:
        tuple_items = raw.get("prefixItems")
        if tuple_items is not None:
            return list(tuple_items), None, raw.get("items")
        return None, raw.get("items"), None
    items = raw.get("items")
    if isinstance(items, list):
        return list(items), None, raw.get("additionalItems")
    return None, items, raw.get("additionalItems")


def additional_model(node: Node) -> tuple[bool, Any]:
    tuple_items, all_items, additional = array_parts(node)
    if tuple_items is None and node.draft == DRAFT2020 and all_items is not None:
        additional = all_items  # 2020-12: items alone is also what additionalItems was
    if additional is False:
        return False, None
    if additional is None or additional is True or additional == {}:
        return True, None
    return True, additional
