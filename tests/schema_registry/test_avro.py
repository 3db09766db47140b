"""kbroker.schema_registry.avro: parsing, canonical/normalized forms, and compatibility.

The compatibility cases come from the Avro specification's schema resolution rules and Apache
Avro's TestSchemaCompatibility / TestSchemaCompatibilityMissingEnumSymbols / ...UnionMissingField
(reader, writer pairs), and from Confluent's documented meaning of each compatibility level.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.schema_registry.avro import (
    LEVELS,
    MAX_DEPTH,
    AvroSchema,
    Incompatibility,
    check,
    compatibility,
    incompatibilities,
    parse,
)
from kbroker.schema_registry.errors import InvalidSchema


def s(obj) -> AvroSchema:
    return parse(json.dumps(obj))


def rec(fields, name="R", **extra) -> AvroSchema:
    return s({"type": "record", "name": name, "fields": fields, **extra})


def kinds(reader: AvroSchema, writer: AvroSchema) -> list[tuple[str, str]]:
    return [(i.type, i.location) for i in incompatibilities(reader, writer)]


# --------------------------------------------------------------------------------------------------
# parsing

INT, LONG, FLOAT, DOUBLE, STRING, BYTES, NULL, BOOLEAN = (
    s(t) for t in ("int", "long", "float", "double", "string", "bytes", "null", "boolean")
)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "",
        '{"type": "record", "name": "R"',  # truncated
        '"integer"',  # unknown primitive
        '{"type": "nosuchtype"}',
        '{"type": "record", "name": "R", "fields": [{"type": "int"}]}',  # field without name
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Unknown"}]}',
        '{"type": "record", "fields": []}',  # record without name
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
        '{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}',
        '{"type": "fixed", "name": "F"}',  # no size
        '{"type": "array"}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "long"}]}',
        '["int", "int"]',  # duplicate in union
        '["int", ["null", "long"]]',  # nested union
        '{"type": "record", "name": "1R", "fields": []}',  # illegal name
        '{"type": "record", "name": "R", "fields": [{"name": "a-b", "type": "int"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": {"type": "record", "name": "R", "fields": []}}]}',
        "42",
    ],
)
def test_invalid_schemas_are_refused(text):
    with pytest.raises(InvalidSchema):
        parse(text)


def test_too_deeply_nested_schemas_are_refused_and_others_compared():
    def nested(depth):
        text = '"int"'
        for _ in range(depth):
            text = '{"type": "array", "items": ' + text + "}"
        return text

    deep = parse(nested(MAX_DEPTH - 1))
    assert check("FULL", deep, [deep]) == []
    for depth in (MAX_DEPTH + 1, 5000):
        with pytest.raises(InvalidSchema):
            parse(nested(depth))


def test_invalid_schema_is_a_value_error_with_a_message():
    with pytest.raises(ValueError, match="Invalid schema"):
        parse("{not json")


@pytest.mark.parametrize(
    "obj",
    [
        "int",
        {"type": "string"},
        ["null", "string"],
        {"type": "map", "values": {"type": "array", "items": "bytes"}},
        {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"},
        {"type": "fixed", "name": "md5", "size": 16},
        {"type": "long", "logicalType": "timestamp-millis"},
        {"type": "record", "name": "Node", "fields": [
            {"name": "value", "type": "int"},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ]},
    ],
)
def test_valid_schemas_parse(obj):
    schema = s(obj)
    assert parse(schema.canonical()).canonical() == schema.canonical()


def test_differently_formatted_equal_schemas_have_one_canonical_form_and_fingerprint():
    a = '{"type":"record","name":"R","namespace":"com.example","fields":[{"name":"a","type":"int"}]}'
    b = """{
        "fields": [ { "type": {"type": "int"}, "name": "a" } ],
        "name": "com.example.R",
        "type": "record"
    }"""
    x, y = parse(a), parse(b)
    assert x.canonical() == y.canonical() == (
        '{"name":"com.example.R","type":"record","fields":[{"name":"a","type":"int"}]}'
    )
    assert x.normalized() == y.normalized()
    assert x.fingerprint == y.fingerprint and x == y and hash(x) == hash(y)
    assert x.name == "com.example.R"


def test_canonical_form_drops_docs_and_defaults_but_normalized_keeps_them():
    a = rec([{"name": "a", "type": "int", "default": 1, "doc": "the a"}], doc="a record")
    b = rec([{"name": "a", "type": "int"}])
    assert a.canonical() == b.canonical()
    assert a.normalized() != b.normalized()
    assert a.fingerprint != b.fingerprint
    assert a.normalized() == (
        '{"name":"R","type":"record","fields":[{"name":"a","type":"int","doc":"the a","default":1}],'
        '"doc":"a record"}'
    )


def test_normalized_form_orders_keys_sorts_aliases_and_properties():
    x = s({
        "namespace": "ns", "type": "record", "name": "R", "aliases": ["Z", "other.A"], "zprop": 1, "aprop": "x",
        "fields": [
            {"type": {"type": "enum", "symbols": ["B", "A"], "name": "E", "default": "B"}, "name": "e",
             "aliases": ["y", "x"], "custom": True},
            {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "again", "type": "E", "order": "descending"},
        ],
    })
    assert x.normalized() == (
        '{"name":"ns.R","type":"record","fields":['
        '{"name":"e","type":{"name":"ns.E","type":"enum","symbols":["B","A"],"default":"B"},'
        '"aliases":["x","y"],"custom":true},'
        '{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":5,"scale":2}},'
        '{"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},'
        '{"name":"again","type":"ns.E","order":"descending"}],'
        '"aliases":["ns.Z","other.A"],"aprop":"x","zprop":1}'
    )
    # the normalized form is itself a valid schema with the same normalized form
    assert parse(x.normalized()).normalized() == x.normalized()


# --------------------------------------------------------------------------------------------------
# references

ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "com.acme",
                      "fields": [{"name": "street", "type": "string"}]})
COUNTRY = json.dumps({"type": "enum", "name": "Country", "namespace": "com.acme", "symbols": ["NL", "FI"]})
ADDRESS_WITH_COUNTRY = json.dumps({"type": "record", "name": "Address2", "namespace": "com.acme",
                                   "fields": [{"name": "country", "type": "Country"}]})


def test_references_resolve_named_types_of_another_schema():
    person = json.dumps({"type": "record", "name": "Person", "namespace": "com.acme",
                         "fields": [{"name": "home", "type": "Address"},
                                    {"name": "work", "type": ["null", "com.acme.Address"], "default": None}]})
    with pytest.raises(InvalidSchema):
        parse(person)
    schema = parse(person, {"address.avsc": ADDRESS})
    # the canonical form inlines the referenced definition at its first use, as Java's Avro does
    assert schema.canonical() == (
        '{"name":"com.acme.Person","type":"record","fields":['
        '{"name":"home","type":{"name":"com.acme.Address","type":"record",'
        '"fields":[{"name":"street","type":"string"}]}},'
        '{"name":"work","type":["null","com.acme.Address"]}]}'
    )
    # Confluent's normalized form names referenced types without their definition
    assert schema.normalized() == (
        '{"name":"com.acme.Person","type":"record","fields":[{"name":"home","type":"com.acme.Address"},'
        '{"name":"work","type":["null","com.acme.Address"],"default":null}]}'
    )


def test_references_may_depend_on_each_other_in_any_order():
    text = json.dumps({"type": "record", "name": "P", "fields": [{"name": "a", "type": "com.acme.Address2"}]})
    for refs in ({"c": COUNTRY, "a": ADDRESS_WITH_COUNTRY}, {"a": ADDRESS_WITH_COUNTRY, "c": COUNTRY}):
        assert parse(text, refs).name == "P"
    with pytest.raises(InvalidSchema):
        parse(text, {"a": ADDRESS_WITH_COUNTRY})  # Country is missing
    with pytest.raises(InvalidSchema):
        parse(text, {"bad": "{nope"})


def test_compatibility_across_referenced_types():
    v1 = parse(json.dumps({"type": "record", "name": "P", "fields": [{"name": "a", "type": "com.acme.Address"}]}),
               {"a": ADDRESS})
    address2 = json.dumps({"type": "record", "name": "Address", "namespace": "com.acme",
                           "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "string"}]})
    v2 = parse(json.dumps({"type": "record", "name": "P", "fields": [{"name": "a", "type": "com.acme.Address"}]}),
               {"a": address2})
    assert kinds(v2, v1) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0/type/fields/1")]
    assert kinds(v1, v2) == []


# --------------------------------------------------------------------------------------------------
# reader/writer compatibility (Avro's SchemaCompatibility)

PRIMS = {"null": NULL, "boolean": BOOLEAN, "int": INT, "long": LONG, "float": FLOAT, "double": DOUBLE,
         "string": STRING, "bytes": BYTES}
# reader -> the writers it reads (the specification's promotions)
READS = {
    "null": {"null"}, "boolean": {"boolean"}, "int": {"int"}, "long": {"int", "long"},
    "float": {"int", "long", "float"}, "double": {"int", "long", "float", "double"},
    "string": {"string", "bytes"}, "bytes": {"string", "bytes"},
}


@pytest.mark.parametrize("reader", sorted(PRIMS))
@pytest.mark.parametrize("writer", sorted(PRIMS))
def test_primitive_promotions(reader, writer):
    found = incompatibilities(PRIMS[reader], PRIMS[writer])
    if writer in READS[reader]:
        assert found == []
    else:
        assert found == [Incompatibility(
            "TYPE_MISMATCH", "/", f"reader type: {reader.upper()} not compatible with writer type: {writer.upper()}"
        )]


def test_promotions_inside_arrays_and_maps():
    assert kinds(s({"type": "array", "items": "long"}), s({"type": "array", "items": "int"})) == []
    assert kinds(s({"type": "array", "items": "int"}), s({"type": "array", "items": "long"})) == [
        ("TYPE_MISMATCH", "/items")]
    assert kinds(s({"type": "map", "values": "double"}), s({"type": "map", "values": "float"})) == []
    assert kinds(s({"type": "map", "values": "int"}), s({"type": "map", "values": "string"})) == [
        ("TYPE_MISMATCH", "/values")]
    assert kinds(s({"type": "map", "values": "int"}), s({"type": "array", "items": "int"})) == [("TYPE_MISMATCH", "/")]


def test_logical_types_do_not_change_compatibility():
    date = s({"type": "int", "logicalType": "date"})
    ts = s({"type": "long", "logicalType": "timestamp-millis"})
    assert kinds(ts, date) == [] and kinds(INT, date) == [] and kinds(date, ts) == [("TYPE_MISMATCH", "/")]


def test_record_fields_defaults_and_unknown_writer_fields():
    a = rec([{"name": "a", "type": "int"}])
    ab_default = rec([{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""}])
    ab = rec([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
    empty = rec([])
    assert kinds(ab_default, a) == []  # missing in writer, reader default used
    assert kinds(a, ab) == []  # writer's unknown field ignored
    assert kinds(empty, ab) == []
    assert incompatibilities(ab, a) == [Incompatibility("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "b")]
    assert kinds(a, empty) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0")]
    # a null default counts as a default
    assert kinds(rec([{"name": "o", "type": ["null", "int"], "default": None}]), empty) == []


def test_record_field_type_change_reports_the_field_path():
    v1 = rec([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])
    v2 = rec([{"name": "a", "type": "int"}, {"name": "b", "type": "int"}])
    assert compatibility(v2, v1) == [(
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/1/type') of a field in the reader "
        "schema does not match with the writer schema', additionalInfo:'reader type: INT not compatible with "
        "writer type: STRING'}"
    )]


def test_record_names_and_aliases():
    writer = rec([{"name": "a", "type": "int"}], name="Old", namespace="ns")
    renamed = rec([{"name": "a", "type": "int"}], name="New", namespace="ns")
    aliased = rec([{"name": "a", "type": "int"}], name="New", namespace="ns", aliases=["Old"])
    aliased_full = rec([{"name": "a", "type": "int"}], name="New", namespace="other", aliases=["ns.Old"])
    assert incompatibilities(renamed, writer) == [Incompatibility("NAME_MISMATCH", "/name", "expected: ns.Old")]
    assert kinds(aliased, writer) == []
    assert kinds(aliased_full, writer) == []
    # aliases are the reader's: the old name reading the new one is still a rename
    assert kinds(writer, aliased) == [("NAME_MISMATCH", "/name")]


def test_field_aliases():
    writer = rec([{"name": "old_name", "type": "string"}])
    reader = rec([{"name": "new_name", "type": "string", "aliases": ["old_name"]}])
    plain = rec([{"name": "new_name", "type": "string"}])
    assert kinds(reader, writer) == []
    assert kinds(plain, writer) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0")]


def test_a_reader_field_matching_two_writer_fields_is_reported_as_confluent_does():
    writer = rec([{"name": "a", "type": "int"}, {"name": "b", "type": "int"}])
    reader = rec([{"name": "a", "type": "int", "aliases": ["b"]}])
    (message,) = compatibility(reader, writer)
    assert message.startswith("Unexpected exception during compatibility check: Reader record field a matches")


def test_enum_symbols():
    ab = s({"type": "enum", "name": "E", "symbols": ["A", "B"]})
    abc = s({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})
    abcd = s({"type": "enum", "name": "E", "symbols": ["D", "A", "B", "C"]})
    ab_default = s({"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"})
    assert kinds(abc, ab) == []  # reader added a symbol
    assert incompatibilities(ab, abc) == [Incompatibility("MISSING_ENUM_SYMBOLS", "/symbols", "[C]")]
    assert incompatibilities(ab, abcd) == [Incompatibility("MISSING_ENUM_SYMBOLS", "/symbols", "[C, D]")]
    assert kinds(ab_default, abcd) == []  # unknown symbols read as the reader's default
    assert kinds(s({"type": "enum", "name": "F", "symbols": ["A", "B"]}), ab) == [("NAME_MISMATCH", "/name")]


def test_enum_default_in_a_record_field():
    writer = rec([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}}])
    reader = rec([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"}}])
    assert kinds(reader, writer) == []
    assert kinds(writer, reader) == []
    # Java's Avro checks a missing enum field with only an enum default against the writer record
    missing = rec([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}}])
    assert kinds(missing, rec([])) == [("TYPE_MISMATCH", "/fields/0/type")]


def test_fixed_size_and_name():
    f16 = s({"type": "fixed", "name": "F", "size": 16})
    f8 = s({"type": "fixed", "name": "F", "size": 8})
    g16 = s({"type": "fixed", "name": "G", "size": 16})
    assert kinds(f16, f16) == []
    assert incompatibilities(f8, f16) == [Incompatibility("FIXED_SIZE_MISMATCH", "/size", "expected: 16, found: 8")]
    assert kinds(g16, f16) == [("NAME_MISMATCH", "/name")]
    assert kinds(f16, BYTES) == [("TYPE_MISMATCH", "/")]


def test_unions():
    int_or_null = s(["null", "int"])
    long_or_null = s(["null", "long"])
    wide = s(["null", "int", "string"])
    # union writer, union reader: every writer branch must be readable
    assert kinds(wide, int_or_null) == []
    assert incompatibilities(int_or_null, wide) == [
        Incompatibility("MISSING_UNION_BRANCH", "/2", "reader union lacking writer type: STRING")]
    assert kinds(long_or_null, int_or_null) == []  # promotion inside a union
    assert kinds(int_or_null, long_or_null) == [("MISSING_UNION_BRANCH", "/1")]
    # non-union writer: some reader branch must read it
    assert kinds(int_or_null, INT) == []
    assert kinds(long_or_null, INT) == []
    assert incompatibilities(int_or_null, STRING) == [
        Incompatibility("MISSING_UNION_BRANCH", "/", "reader union lacking writer type: STRING")]
    # union writer, non-union reader: every branch must be readable
    assert kinds(LONG, s(["int", "long"])) == []
    assert kinds(INT, int_or_null) == [("TYPE_MISMATCH", "/0")]
    assert kinds(STRING, s(["int", "bytes"])) == [("TYPE_MISMATCH", "/0")]


def test_optional_field_made_required_and_back():
    optional = rec([{"name": "a", "type": ["null", "string"], "default": None}])
    required = rec([{"name": "a", "type": "string"}])
    assert kinds(optional, required) == []
    assert kinds(required, optional) == [("TYPE_MISMATCH", "/fields/0/type/0")]


def test_recursive_types():
    def linked(value_type, name="Node"):
        return rec([{"name": "value", "type": value_type},
                    {"name": "next", "type": ["null", name], "default": None}], name=name)

    assert kinds(linked("long"), linked("int")) == []
    assert kinds(linked("int"), linked("long")) == [("TYPE_MISMATCH", "/fields/0/type")]
    tree_v1 = rec([{"name": "children", "type": {"type": "array", "items": "T"}}], name="T")
    tree_v2 = rec([{"name": "children", "type": {"type": "array", "items": "T"}},
                   {"name": "label", "type": "string", "default": ""}], name="T")
    tree_v3 = rec([{"name": "children", "type": {"type": "array", "items": "T"}},
                   {"name": "label", "type": "string"}], name="T")
    assert kinds(tree_v2, tree_v1) == [] and kinds(tree_v1, tree_v2) == []
    assert kinds(tree_v3, tree_v1) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1")]


def test_a_named_type_used_twice_is_reported_at_each_place():
    inner_v1 = {"type": "record", "name": "I", "fields": [{"name": "x", "type": "int"}]}
    inner_v2 = {"type": "record", "name": "I", "fields": [{"name": "x", "type": "string"}]}
    v1 = rec([{"name": "a", "type": inner_v1}, {"name": "b", "type": "I"}])
    v2 = rec([{"name": "a", "type": inner_v2}, {"name": "b", "type": "I"}])
    assert kinds(v2, v1) == [("TYPE_MISMATCH", "/fields/0/type/fields/0/type"),
                             ("TYPE_MISMATCH", "/fields/1/type/fields/0/type")]


def test_nested_records_report_nested_paths():
    v1 = rec([{"name": "inner", "type": {"type": "record", "name": "I", "fields": [
        {"name": "x", "type": "int"}]}}])
    v2 = rec([{"name": "inner", "type": {"type": "record", "name": "I", "fields": [
        {"name": "x", "type": "int"}, {"name": "y", "type": "int"}]}}])
    assert kinds(v2, v1) == [("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0/type/fields/1")]
    (message,) = compatibility(v2, v1, names=("new", "old"))
    assert message == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'y' at path "
        "'/fields/0/type/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'y'}"
    )


# --------------------------------------------------------------------------------------------------
# compatibility levels

V1 = rec([{"name": "a", "type": "int"}])
ADDED_WITH_DEFAULT = rec([{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"}])
ADDED_WITHOUT_DEFAULT = rec([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])


def ok(level, new, previous):
    return check(level, new, previous) == []


def test_field_added_with_default_passes_every_level():
    for level in LEVELS:
        assert ok(level, ADDED_WITH_DEFAULT, [V1]), level


def test_field_added_without_default_fails_backward_passes_forward():
    assert not ok("BACKWARD", ADDED_WITHOUT_DEFAULT, [V1])
    assert ok("FORWARD", ADDED_WITHOUT_DEFAULT, [V1])
    assert not ok("FULL", ADDED_WITHOUT_DEFAULT, [V1])
    assert ok("NONE", ADDED_WITHOUT_DEFAULT, [V1])
    assert check("BACKWARD", ADDED_WITHOUT_DEFAULT, [V1]) == [(
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path '/fields/1' in "
        "the new schema has no default value and is missing in the old schema', additionalInfo:'b'}"
    )]


def test_field_removed_without_default_fails_forward_passes_backward():
    assert ok("BACKWARD", V1, [ADDED_WITHOUT_DEFAULT])
    assert not ok("FORWARD", V1, [ADDED_WITHOUT_DEFAULT])
    assert not ok("FULL", V1, [ADDED_WITHOUT_DEFAULT])
    assert check("FORWARD", V1, [ADDED_WITHOUT_DEFAULT]) == [(
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path '/fields/1' in "
        "the old schema has no default value and is missing in the new schema', additionalInfo:'b'}"
    )]
    # a removed field that had a default: old readers fill it in
    assert ok("FULL", V1, [ADDED_WITH_DEFAULT])


def test_type_promotion_is_backward_not_forward():
    wider = rec([{"name": "a", "type": "long"}])
    assert ok("BACKWARD", wider, [V1])
    assert not ok("FORWARD", wider, [V1])
    assert not ok("FULL", wider, [V1])


def test_full_reports_forward_messages_first():
    v2 = rec([{"name": "a", "type": "long"}, {"name": "c", "type": "int"}])
    messages = check("FULL", v2, [V1])
    assert [m.split("'")[1] for m in messages] == ["TYPE_MISMATCH", "READER_FIELD_MISSING_DEFAULT_VALUE"]
    assert "in the old schema does not match with the new schema" in messages[0]
    assert "in the new schema has no default value" in messages[1]


def test_enum_symbol_removal_and_addition_by_level():
    e_ab = rec([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}])
    e_abc = rec([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}}])
    e_ab_default = rec([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"],
                                                "default": "A"}}])
    e_abc_default = rec([{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"],
                                                 "default": "A"}}])
    # adding a symbol: new readers read old data, old readers lack the symbol
    assert ok("BACKWARD", e_abc, [e_ab]) and not ok("FORWARD", e_abc, [e_ab])
    # removing one: the reverse
    assert not ok("BACKWARD", e_ab, [e_abc]) and ok("FORWARD", e_ab, [e_abc])
    # with an enum default in the old schema, old readers read a new symbol as the default
    assert ok("FULL", e_abc_default, [e_ab_default])
    assert ok("FORWARD", e_abc, [e_ab_default]) and ok("BACKWARD", e_abc, [e_ab_default])
    # and with one in the new schema, removing a symbol is backward compatible
    assert ok("FULL", e_ab_default, [e_abc_default])
    assert not ok("BACKWARD", e_ab, [e_abc_default])


def test_union_widening_and_narrowing_by_level():
    narrow = rec([{"name": "u", "type": ["null", "int"], "default": None}])
    wide = rec([{"name": "u", "type": ["null", "int", "string"], "default": None}])
    assert ok("BACKWARD", wide, [narrow]) and not ok("FORWARD", wide, [narrow])
    assert ok("FORWARD", narrow, [wide]) and not ok("BACKWARD", narrow, [wide])


def test_transitive_levels_check_every_previous_schema():
    # v1: a; v2: a, b (default); v3: a, b (no default) — v3 reads v2's data but not v1's
    v1 = V1
    v2 = ADDED_WITH_DEFAULT
    v3 = ADDED_WITHOUT_DEFAULT
    assert ok("BACKWARD", v3, [v1, v2])
    assert not ok("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert not ok("FULL_TRANSITIVE", v3, [v1, v2])
    # forward chain: v1 has b without default, v2 gives it a default, v3 drops it
    assert ok("FORWARD", V1, [ADDED_WITHOUT_DEFAULT, ADDED_WITH_DEFAULT])
    assert not ok("FORWARD_TRANSITIVE", V1, [ADDED_WITHOUT_DEFAULT, ADDED_WITH_DEFAULT])
    assert ok("FULL", V1, [ADDED_WITHOUT_DEFAULT, ADDED_WITH_DEFAULT])
    assert not ok("FULL_TRANSITIVE", V1, [ADDED_WITHOUT_DEFAULT, ADDED_WITH_DEFAULT])


def test_transitive_reports_the_newest_failing_schema_only():
    v1 = rec([{"name": "a", "type": "string"}])
    v2 = rec([{"name": "a", "type": "int"}])
    v3 = rec([{"name": "a", "type": "boolean"}])
    messages = check("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert len(messages) == 1 and "writer type: INT" in messages[0]


def test_no_previous_schema_and_unknown_level():
    assert check("FULL_TRANSITIVE", V1, []) == []
    assert check("backward", ADDED_WITH_DEFAULT, [V1]) == []
    with pytest.raises(ValueError):
        check("SIDEWAYS", V1, [V1])


# --------------------------------------------------------------------------------------------------
# properties

_names = st.sampled_from(["a", "b", "c", "d", "e"])
_prims = st.sampled_from(sorted(PRIMS))


def _schemas():
    counter = iter(range(10**9))

    def named(kind):
        return f"{kind}{next(counter)}"

    leaves = st.one_of(
        _prims,
        st.builds(lambda syms: {"type": "enum", "name": named("E"), "symbols": sorted(set(syms))},
                  st.lists(st.sampled_from(["X", "Y", "Z"]), min_size=1)),
        st.builds(lambda n: {"type": "fixed", "name": named("F"), "size": n}, st.integers(0, 32)),
    )

    def extend(children):
        union = st.lists(_prims, min_size=1, max_size=4, unique=True)
        return st.one_of(
            st.builds(lambda t: {"type": "array", "items": t}, children),
            st.builds(lambda t: {"type": "map", "values": t}, children),
            union,
            st.builds(
                lambda fields: {"type": "record", "name": named("R"),
                                "fields": [{"name": n, "type": t} for n, t in fields.items()]},
                st.dictionaries(_names, children, max_size=4),
            ),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas())
def test_every_schema_is_compatible_with_itself_at_every_level(obj):
    schema = s(obj)
    assert incompatibilities(schema, schema) == []
    for level in LEVELS:
        assert check(level, schema, [schema, schema]) == []
    # and with its canonical and normalized forms, which parse to the same schema
    for text in (schema.canonical(), schema.normalized()):
        again = parse(text)
        assert again.canonical() == schema.canonical()
        assert incompatibilities(again, schema) == [] and incompatibilities(schema, again) == []
    assert parse(schema.normalized()).normalized() == schema.normalized()


@settings(max_examples=100, deadline=None)
@given(st.lists(_prims, min_size=1, max_size=3), st.lists(_prims, min_size=1, max_size=3))
def test_union_rule_agrees_with_branchwise_promotions(readers, writers):
    reader = s(list(dict.fromkeys(readers)) if len(set(readers)) > 1 else readers[0])
    writer = s(list(dict.fromkeys(writers)) if len(set(writers)) > 1 else writers[0])
    readable = all(any(w in READS[r] for r in set(readers)) for w in set(writers))
    assert (incompatibilities(reader, writer) == []) == readable


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_names, _prims, max_size=5), st.dictionaries(_names, _prims, max_size=5))
def test_records_of_primitives_follow_the_field_rules(reader_fields, writer_fields):
    reader = rec([{"name": n, "type": t} for n, t in reader_fields.items()])
    writer = rec([{"name": n, "type": t} for n, t in writer_fields.items()])
    expected = []
    for pos, (n, t) in enumerate(reader_fields.items()):
        if n not in writer_fields:
            expected.append(("READER_FIELD_MISSING_DEFAULT_VALUE", f"/fields/{pos}"))
        elif writer_fields[n] not in READS[t]:
            expected.append(("TYPE_MISMATCH", f"/fields/{pos}/type"))
    assert kinds(reader, writer) == expected
