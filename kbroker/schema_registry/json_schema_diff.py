"""JSON Schema compatibility after Confluent's ``SchemaDiff``: `diff(original, update)` walks the
two schemas' models (`json_schema_model.Node`) and lists every `Difference` as ``(Difference type,
JSON-pointer-like path)``; `COMPATIBLE_CHANGES` are Confluent's compatible ones. The rules per kind
of schema (numbers and strings; enum, const, not, combined and conditional; objects; arrays) are
here, each a ``_compare_<kind>``. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kbroker.schema_registry.json_schema_model import (
    DRAFT4,
    DRAFT2020,
    JsonSchema,
    Node,
    additional_model,
    array_parts,
    canon,
    dependencies,
    has_default,
    open_model,
    pattern_schema,
    resolve,
    root,
)

__all__ = ["COMPATIBLE_CHANGES", "Difference", "diff"]

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
    _compare(ctx, root(original), root(update))
    out: list[Difference] = []
    for d in ctx.diffs:
        if d not in out:
            out.append(d)
    return out


def _compare(ctx: _Ctx, original: Node | None, update: Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    original, update = resolve(original), resolve(update)
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


def _compare_string(ctx: _Ctx, o: Node, u: Node) -> None:
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
    if draft == DRAFT4:
        plain = "maximum" if which == "exclusiveMaximum" else "minimum"
        return _num(raw, plain) if raw.get(which) is True else None
    return _num(raw, which)


def _plain(raw: dict, draft: str, which: str) -> Any:
    return _num(raw, which)


def _compare_number(ctx: _Ctx, o: Node, u: Node) -> None:
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
    return canon(norm(value))


def _compare_enum(ctx: _Ctx, o: Node, u: Node) -> None:
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


def _compare_const(ctx: _Ctx, o: Node, u: Node) -> None:
    if _value_key(o.extra["value"]) != _value_key(u.extra["value"]):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _compare_not(ctx: _Ctx, o: Node, u: Node) -> None:
    # not A -> not B is compatible when B's values are within A's: compare the other way round.
    sub = ctx.sub("not")
    _compare(sub, u.child(u.raw["not"]), o.child(o.raw["not"]))
    if not sub.diffs:
        return
    ctx.add("NOT_TYPE_NARROWED" if sub.compatible else "NOT_TYPE_EXTENDED", "not")


def _compare_combined(ctx: _Ctx, o: Node, u: Node) -> None:
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


def _compare_conditional(ctx: _Ctx, o: Node, u: Node) -> None:
    # Confluent documents no rule for if/then/else: any change is reported as changed subschemas.
    if any(canon(o.raw.get(k)) != canon(u.raw.get(k)) for k in ("if", "then", "else")):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


# - objects -


def _compare_object(ctx: _Ctx, o: Node, u: Node) -> None:
    oprops: dict[str, Any] = o.raw.get("properties") or {}
    uprops: dict[str, Any] = u.raw.get("properties") or {}
    oreq = set(o.raw.get("required") or [])
    ureq = set(u.raw.get("required") or [])

    for key, oprop in oprops.items():
        if key in uprops:
            continue
        # removed: does the reader's content model still accept what the writer wrote there?
        cover = pattern_schema(u, key)
        permits, additional = open_model(u)
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
        elif resolve(o.child(oprop)).kind == "false":
            ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "properties", key)
        else:
            ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", "properties", key)

    for key, uprop in uprops.items():
        if key in oprops:
            continue
        # added: what could the writer have written under this name?
        cover = pattern_schema(o, key)
        permits, additional = open_model(o)
        if cover is None and permits:
            cover = additional
        if cover is None and permits:  # fully open
            if resolve(u.child(uprop)).kind == "empty":
                ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "properties", key)
            else:
                ctx.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "properties", key)
            if key in ureq and key not in oreq:
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if has_default(u.child(uprop))
                        else "REQUIRED_ATTRIBUTE_ADDED", "required", key)
            continue
        if cover is not None:
            sub = ctx.sub("properties", key)
            _compare(sub, o.child(cover), u.child(uprop))
            ctx.merge(sub)
            ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible
                    else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "properties", key)
        if key in ureq:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if has_default(u.child(uprop))
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
            ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if key in uprops and has_default(u.child(uprops[key]))
                    else "REQUIRED_ATTRIBUTE_ADDED", "required", key)

    _compare_dependencies(ctx, o, u)

    _compare_additional(ctx, o, u, open_model(o), open_model(u), "PROPERTIES", "additionalProperties")

    _limit(ctx, "maxProperties", _num(o.raw, "maxProperties"), _num(u.raw, "maxProperties"))
    _limit(ctx, "minProperties", _num(o.raw, "minProperties"), _num(u.raw, "minProperties"))


def _compare_dependencies(ctx: _Ctx, o: Node, u: Node) -> None:
    oarr, osch = dependencies(o)
    uarr, usch = dependencies(u)
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


def _compare_array(ctx: _Ctx, o: Node, u: Node) -> None:
    _limit(ctx, "maxItems", _num(o.raw, "maxItems"), _num(u.raw, "maxItems"))
    _limit(ctx, "minItems", _num(o.raw, "minItems"), _num(u.raw, "minItems"))
    ou, uu = o.raw.get("uniqueItems") is True, u.raw.get("uniqueItems") is True
    if ou != uu:
        ctx.add("UNIQUE_ITEMS_ADDED" if uu else "UNIQUE_ITEMS_REMOVED", "uniqueItems")

    otuple, oall, _ = array_parts(o)
    utuple, uall, _ = array_parts(u)
    opermits, oadd = additional_model(o)
    upermits, uadd = additional_model(u)
    both_2020_single = (o.draft == DRAFT2020 and otuple is None) and (u.draft == DRAFT2020 and utuple is None)
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
        elif resolve(u.child(utuple[i])).kind == "empty":
            ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "items", i)
        else:
            ctx.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", "items", i)
    for i in range(len(utuple), len(otuple)):  # removed item positions
        if not upermits:
            if resolve(o.child(otuple[i])).kind == "false":
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
