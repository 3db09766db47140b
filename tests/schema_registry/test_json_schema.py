"""JSON Schema parsing and compatibility (kbroker.schema_registry.json_schema).

The expected outcomes are those of Confluent's documented compatibility rules for JSON Schema
(difference types, open/closed/partially open content models, combined schemas, levels), written
as our own small cases; none is derived from this implementation.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.json_schema import (
    LEVELS,
    JsonSchema,
    check,
    compatibility,
    diff,
    parse,
)

# Combined schemas (allOf/anyOf/oneOf) under a property; (writer, reader, compatible): the
# outcomes of Confluent's rules for changing the combination.
COMBINED = [
    ('{"allOf":[{"enum":["one","two","three"]},{"type":"string"},{"maxLength":5}]}',
     '{"allOf":[{"maxLength":5},{"enum":["one","two","three"]},{"type":"string"}]}', True),
    ('{"allOf":[{"enum":["one","two","three"]},{"type":"string"},{"maxLength":5}]}',
     '{"allOf":[{"maxLength":5},{"enum":["one","two","three"]},{"type":"number"}]}', False),
    ('{"allOf":[{"type":"string"},{"type":"string"}]}', '{"allOf":[{"type":"string"}]}', True),
    ('{"allOf":[{"type":"string"}]}', '{"allOf":[{"type":"string"},{"type":"string"}]}', True),
    ('{"oneOf":[{"type":"string","maxLength":5}]}',
     '{"oneOf":[{"type":"boolean"},{"type":"number"},{"title":"my string","type":"string","maxLength":8}]}', True),
    ('{"oneOf":[{"type":"number"},{"type":"string"}]}', '{"oneOf":[{"type":"string"}]}', False),
    ('{"allOf":[{"enum":["one","two","three"]},{"type":"string"}]}', '{"allOf":[{"type":"string"}]}', True),
    ('{"allOf":[{"type":"string"}]}', '{"allOf":[{"enum":["one","two","three"]},{"type":"string"}]}', False),
    ('{"oneOf":[{"type":"string"}]}', '{"anyOf":[{"type":"number"},{"type":"string"}]}', True),
    ('{"oneOf":[{"type":"number"},{"type":"string"}]}', '{"anyOf":[{"type":"string"}]}', False),
    ('{"allOf":[{"type":"number"},{"type":"string"}]}', '{"anyOf":[{"type":"string"}]}', True),
    ('{"anyOf":[{"type":"string"}]}', '{"oneOf":[{"type":"number"},{"type":"string"}]}', True),
    ('{"anyOf":[{"type":"number"},{"type":"string"}]}', '{"oneOf":[{"type":"string"}]}', False),
    ('{"allOf":[{"type":"number"},{"type":"string"}]}', '{"oneOf":[{"type":"string"}]}', True),
    ('{"anyOf":[{"type":"string"}]}', '{"allOf":[{"type":"number"},{"type":"string"}]}', False),
    ('{"type":"string"}', '{"anyOf":[{"type":"number"},{"type":"string"}]}', True),
    ('{"type":"string"}', '{"allOf":[{"type":"string"}]}', True),
    ('{"type":"string"}', '{"allOf":[{"type":"number"},{"type":"string"}]}', False),
]


@pytest.mark.parametrize(("writer", "reader", "compatible"), COMBINED)
def test_combined_schemas(writer: str, reader: str, compatible: bool) -> None:
    def wrap(prop: str) -> JsonSchema:
        return parse('{"type":"object","properties":{"prop1":' + prop + "}}")

    assert (compatibility(wrap(reader), wrap(writer)) == []) is compatible


# --- the rules one by one, in Confluent's documented terms ------------------------------------

PERSON = '{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}'
PERSON_CLOSED = '{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}'


def test_integer_to_number_widens_for_a_reader_only() -> None:
    integer, number = parse('{"type":"integer"}'), parse('{"type":"number"}')
    assert compatibility(reader=number, writer=integer) == []
    assert compatibility(reader=integer, writer=number) == ["TYPE_NARROWED #/"]


def test_required_added_is_incompatible_for_the_reader() -> None:
    old = parse('{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}}')
    new = parse('{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["age"]}')
    assert compatibility(reader=new, writer=old) == ["REQUIRED_ATTRIBUTE_ADDED #/required/age"]
    assert compatibility(reader=old, writer=new) == []


def test_open_content_model_property_added_and_removed() -> None:
    with_email = parse('{"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string"}},"required":["name"]}')
    person = parse(PERSON)
    # a property added to an open model: old data may hold anything under that name
    assert compatibility(reader=with_email, writer=person) == ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL #/properties/email"]
    # a property removed from an open model: the reader accepts it as an additional property
    assert compatibility(reader=person, writer=with_email) == []


def test_closed_content_model_property_added_and_removed() -> None:
    with_email = parse('{"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string"}},'
                       '"required":["name"],"additionalProperties":false}')
    person = parse(PERSON_CLOSED)
    assert compatibility(reader=with_email, writer=person) == []
    assert compatibility(reader=person, writer=with_email) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/email"]


def test_closing_and_opening_the_model() -> None:
    assert compatibility(reader=parse(PERSON_CLOSED), writer=parse(PERSON)) == [
        "ADDITIONAL_PROPERTIES_REMOVED #/additionalProperties"]
    assert compatibility(reader=parse(PERSON), writer=parse(PERSON_CLOSED)) == []


@pytest.mark.parametrize(("keyword", "looser", "tighter"), [
    ("maxLength", 10, 5), ("minLength", 1, 3), ("maximum", 100, 50), ("minimum", 0, 10),
    ("exclusiveMaximum", 100, 50), ("exclusiveMinimum", 0, 10), ("multipleOf", 2, 4),
    ("maxItems", 10, 5), ("minItems", 0, 2), ("maxProperties", 10, 5), ("minProperties", 0, 2),
])
def test_tightening_a_limit_is_incompatible_loosening_is_not(keyword: str, looser: int, tighter: int) -> None:
    kind = {"Length": "string", "imum": "number", "ltipl": "number", "Items": "array", "erties": "object"}
    type_ = next(v for k, v in kind.items() if k in keyword)
    loose = parse(json.dumps({"type": type_, keyword: looser}))
    tight = parse(json.dumps({"type": type_, keyword: tighter}))
    assert compatibility(reader=loose, writer=tight) == []
    problems = compatibility(reader=tight, writer=loose)
    assert len(problems) == 1 and problems[0].endswith(f"#/{keyword}")
    # adding the keyword is a tightening too, removing it a loosening
    free = parse(json.dumps({"type": type_}))
    assert compatibility(reader=free, writer=tight) == []
    assert compatibility(reader=tight, writer=free) != []


def test_unique_items_and_pattern() -> None:
    plain, unique = parse('{"type":"array"}'), parse('{"type":"array","uniqueItems":true}')
    assert compatibility(reader=unique, writer=plain) == ["UNIQUE_ITEMS_ADDED #/uniqueItems"]
    assert compatibility(reader=plain, writer=unique) == []
    free, patterned = parse('{"type":"string"}'), parse('{"type":"string","pattern":"^a"}')
    assert compatibility(reader=patterned, writer=free) == ["PATTERN_ADDED #/pattern"]
    assert compatibility(reader=free, writer=patterned) == []


def test_enum_extended_and_narrowed() -> None:
    rg, rgb = parse('{"enum":["red","green"]}'), parse('{"enum":["red","green","blue"]}')
    assert compatibility(reader=rgb, writer=rg) == []
    assert compatibility(reader=rg, writer=rgb) == ["ENUM_ARRAY_NARROWED #/enum"]


def test_items_of_nested_objects() -> None:
    old = parse('{"type":"array","items":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}')
    new = parse('{"type":"array","items":{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}}')
    assert compatibility(reader=new, writer=old) == ["TYPE_CHANGED #/items/properties/a"]


def test_nullable_union() -> None:
    string, nullable = parse('{"type":"string"}'), parse('{"type":["string","null"]}')
    assert compatibility(reader=nullable, writer=string) == []
    assert compatibility(reader=string, writer=nullable) != []


def test_draft4_exclusive_maximum_boolean() -> None:
    d4 = '{"$schema":"http://json-schema.org/draft-04/schema#","type":"number","maximum":10%s}'
    inclusive, exclusive = parse(d4 % ""), parse(d4 % ',"exclusiveMaximum":true')
    assert compatibility(reader=inclusive, writer=exclusive) == []
    assert compatibility(reader=exclusive, writer=inclusive) == ["EXCLUSIVE_MAXIMUM_ADDED #/exclusiveMaximum"]


# --- levels -----------------------------------------------------------------------------------

V1 = '{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}'
V2 = '{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}'
V3 = '{"type":"object","properties":{"b":{"type":"string"}},"additionalProperties":false}'


def test_backward_forward_full_directions() -> None:
    v1, v2 = parse(V1), parse(V2)
    # v2 adds an optional property to a closed model: v2 reads v1's data, v1 cannot read v2's
    assert check("BACKWARD", v2, [v1]) == []
    assert check("FORWARD", v2, [v1]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]
    assert check("FULL", v2, [v1]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]
    # and the other way round
    assert check("BACKWARD", v1, [v2]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]
    assert check("FORWARD", v1, [v2]) == []
    assert check("NONE", v1, [v2]) == []


def test_transitive_levels_check_every_previous_schema() -> None:
    v1, v2, v3 = parse(V1), parse(V2), parse(V3)
    # v3 keeps only "b": v2 (closed, knows "b") reads v3's data; v1 (closed, knows only "a") does not
    assert check("FORWARD", v3, [v1, v2]) == []
    assert check("FORWARD_TRANSITIVE", v3, [v1, v2]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]


def test_backward_transitive_only_failure() -> None:
    # v1 open; v2 closes the model and adds "b"; v3 = v2.  v3 reads v2's data, but not v1's:
    # v1's open model may have written anything under "b" or any other name.
    v1 = parse('{"type":"object","properties":{"a":{"type":"string"}}}')
    v2 = parse('{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}')
    v3 = parse('{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}')
    assert check("BACKWARD", v3, [v1, v2]) == []
    assert sorted(check("BACKWARD_TRANSITIVE", v3, [v1, v2])) == [
        "ADDITIONAL_PROPERTIES_REMOVED #/additionalProperties", "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL #/properties/b"]
    assert check("FULL", v3, [v1, v2]) == []
    assert check("FULL_TRANSITIVE", v3, [v1, v2]) != []


def test_full_reports_forward_before_backward() -> None:
    # v1 knows only "a", v3 only "b", both closed: each direction fails on the other's property
    v1, v3 = parse(V1), parse(V3)
    assert check("FORWARD", v3, [v1]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]
    assert check("BACKWARD", v3, [v1]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/a"]
    assert check("FULL", v3, [v1]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b",
                                       "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/a"]
    assert check("FULL_TRANSITIVE", v3, [v1]) == check("FULL", v3, [v1])


def test_transitive_levels_stop_at_the_first_failing_schema_newest_first() -> None:
    # closed models knowing only "a", only "b", only "c": the new one fails against both earlier
    # ones, and only the newest (the one knowing "b") is reported, as Confluent's checker does
    only_a, only_b = parse(V1), parse(V3)
    only_c = parse('{"type":"object","properties":{"c":{"type":"string"}},"additionalProperties":false}')
    assert check("BACKWARD", only_c, [only_b]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]
    assert check("BACKWARD", only_c, [only_a]) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/a"]
    assert check("BACKWARD_TRANSITIVE", only_c, [only_a, only_b]) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]
    assert check("BACKWARD_TRANSITIVE", only_c, [only_b, only_a]) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/a"]
    assert check("FORWARD_TRANSITIVE", only_c, [only_a, only_b]) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/c"]
    assert check("FULL_TRANSITIVE", only_c, [only_a, only_b]) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/c",
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/b"]


def test_levels() -> None:
    assert set(LEVELS) == {"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                           "FULL_TRANSITIVE", "NONE"}
    v1 = parse(V1)
    for level in LEVELS:
        assert check(level, v1, []) == []
    with pytest.raises(ValueError):
        check("SIDEWAYS", v1, [v1])


# --- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "{",                                                  # not JSON
    "[1, 2]",                                             # not a schema
    '"string"',
    '{"type":"strin"}',                                   # unknown type
    '{"type":"object","properties":{"a":{"type":5}}}',
    '{"minLength":-1}',
    '{"required":"a"}',                                   # draft-07: required is an array
    '{"$schema":"http://json-schema.org/draft-04/schema#","required":[]}',  # draft 4: non-empty
    '{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":{}}',
    '{"$schema":"http://example.com/my-draft"}',          # unknown draft
    '{"$ref":"#/definitions/missing"}',                   # a $ref to nothing
    '{"properties":{"a":{"$ref":"other.json"}}}',         # a reference not given
])
def test_invalid_schemas_are_refused(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse(text)


@pytest.mark.parametrize("draft", [
    "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
])
def test_each_draft_parses(draft: str) -> None:
    s = parse(json.dumps({"$schema": draft, "type": "object", "properties": {"a": {"type": "string"}}}))
    assert compatibility(s, s) == []


def test_canonical_form_sorts_keys_and_drops_whitespace() -> None:
    a = parse('{ "type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}} }')
    b = parse('{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}')
    assert a.canonical() == b.canonical() == (
        '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}')
    assert a.compact() == '{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}'
    assert a == b


# --- references -------------------------------------------------------------------------------

CUSTOMER = '{"$id":"customer.json","type":"object","properties":{"name":{"type":"string"}},"additionalProperties":false}'
CUSTOMER2 = '{"$id":"customer.json","type":"object","properties":{"name":{"type":"integer"}},"additionalProperties":false}'
ORDER = '{"type":"object","properties":{"customer":{"$ref":"customer.json"}},"additionalProperties":false}'


def test_references_resolve_by_name() -> None:
    order = parse(ORDER, {"customer.json": CUSTOMER})
    assert compatibility(order, order) == []
    # the referenced schema changed incompatibly: the referencing schema is incompatible too
    order2 = parse(ORDER, {"customer.json": CUSTOMER2})
    assert compatibility(reader=order2, writer=order) == ["TYPE_CHANGED #/properties/customer/properties/name"]


def test_reference_by_url_relative_to_the_schema_id() -> None:
    main = ('{"$id":"https://example.com/schemas/order.json","type":"object",'
            '"properties":{"c":{"$ref":"customer.json"}}}')
    customer = '{"type":"object","properties":{"name":{"type":"string"}}}'
    parsed = parse(main, {"customer.json": customer})
    assert compatibility(parsed, parsed) == []
    inline = parse('{"type":"object","properties":{"c":' + customer + '}}')
    assert compatibility(reader=parsed, writer=inline) == []  # $id changes are compatible


def test_invalid_reference_is_refused() -> None:
    with pytest.raises(InvalidSchema):
        parse(ORDER, {"customer.json": '{"type": 12}'})
    with pytest.raises(InvalidSchema):
        parse(ORDER, {"customer.json": "not json"})


def test_recursive_schema() -> None:
    tree = parse('{"type":"object","properties":{"value":{"type":"integer"},'
                 '"children":{"type":"array","items":{"$ref":"#"}}}}')
    wider = parse('{"type":"object","properties":{"value":{"type":"number"},'
                  '"children":{"type":"array","items":{"$ref":"#"}}}}')
    assert compatibility(tree, tree) == []
    assert compatibility(reader=wider, writer=tree) == []
    assert compatibility(reader=tree, writer=wider) != []


# --- every schema is compatible with itself ---------------------------------------------------

_leaf = st.one_of(
    st.just({}),
    st.builds(lambda t: {"type": t}, st.sampled_from(["string", "integer", "number", "boolean", "null"])),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 50)),
    st.builds(lambda n: {"type": "integer", "minimum": n}, st.integers(-5, 5)),
    st.builds(lambda vs: {"enum": vs}, st.lists(st.sampled_from(["a", "b", 1, None]), min_size=1, unique=True)),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(["^a", "b$"])),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    names = st.sampled_from(["a", "b", "c", "d"])
    return st.one_of(
        st.builds(lambda props, closed, req: {
            "type": "object", "properties": props,
            **({"additionalProperties": False} if closed else {}),
            **({"required": sorted(set(req) & set(props))} if set(req) & set(props) else {}),
        }, st.dictionaries(names, children, max_size=3), st.booleans(), st.lists(names, max_size=2)),
        st.builds(lambda items, unique: {"type": "array", "items": items, **({"uniqueItems": True} if unique else {})},
                  children, st.booleans()),
        st.builds(lambda subs, kw: {kw: subs}, st.lists(children, min_size=1, max_size=3),
                  st.sampled_from(["allOf", "anyOf", "oneOf"])),
        st.builds(lambda sub: {"not": sub}, children),
    )


schemas = st.recursive(_leaf, _extend, max_leaves=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas)
def test_every_schema_is_compatible_with_itself(schema: dict) -> None:
    text = json.dumps(schema)
    a, b = parse(text), parse(text)
    assert diff(a, b) == []
    for level in LEVELS:
        assert check(level, a, [b]) == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas, schemas)
def test_full_is_backward_and_forward(old: dict, new: dict) -> None:
    o, n = parse(json.dumps(old)), parse(json.dumps(new))
    # forward (the old schema reads new data) first, then backward, as Confluent reports
    assert check("FULL", n, [o]) == check("FORWARD", n, [o]) + check("BACKWARD", n, [o])
