"""Protobuf schemas: parsing, normalization and Confluent's compatibility rules.

The compatibility cases follow the scenarios Confluent publishes with its Protobuf diff
(`protobuf-provider` test resource `diff-schema-examples.json`: each names the change, the
expected `Difference`s with their paths, and whether it is compatible) and Karapace's protobuf
compatibility tests; the schemas are re-written here, the expectations are theirs.
Direction: the "old" schema is the writer (Confluent's original), the "new" one the reader.
"""

from __future__ import annotations

import pytest

from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.protobuf import (
    ProtobufSchema,
    check,
    compatibility,
    differences,
    parse,
)

P3 = 'syntax = "proto3";\n'
P2 = 'syntax = "proto2";\n'


def diff(old: str, new: str, old_refs=None, new_refs=None) -> tuple[set[str], bool]:
    reader, writer = parse(new, new_refs), parse(old, old_refs)
    found = {
        str(d)
        for d in differences(reader, writer)
        if d.type != "SYNTAX_VERSION_CHANGED"
    }
    return found, compatibility(reader, writer) == []


# (Confluent's scenario, old, new, expected differences, compatible)
CASES = [
    (
        "Detect package change",
        P3 + "package a.b;\nmessage M { string s = 1; }",
        P3 + "package a.c;\nmessage M { string s = 1; }",
        {"PACKAGE_CHANGED #/"},
        False,
    ),
    (
        "Detect change to name qualification with package",
        P3 + "package shop;\nmessage M { Item i = 1; message Item { int32 q = 1; } }",
        P3
        + "package shop;\nmessage M { .shop.M.Item i = 1; message Item { int32 q = 1; } }",
        set(),
        True,
    ),
    (
        "Detect added field",
        P3 + "message M { string s = 1; }",
        P3 + "message M { string s = 1; int64 n = 2; }",
        {"FIELD_ADDED #/M/2"},
        True,
    ),
    (
        "Detect added required field",
        P2 + "message M { optional string s = 1; }",
        P2 + "message M { optional string s = 1; required int32 n = 2; }",
        {"REQUIRED_FIELD_ADDED #/M/2"},
        False,
    ),
    (
        "Detect added field to nested type",
        P3 + "message Outer { message M { string s = 1; } }",
        P3 + "message Outer { message M { string s = 1; bool b = 2; } }",
        {"FIELD_ADDED #/Outer/M/2"},
        True,
    ),
    (
        "Detect removed field",
        P3 + "message M { string s = 1; int32 n = 2; }",
        P3 + "message M { string s = 1; }",
        {"FIELD_REMOVED #/M/2"},
        True,
    ),
    (
        "Detect removed required field",
        P2 + "message M { optional string s = 1; required int32 n = 2; }",
        P2 + "message M { optional string s = 1; }",
        {"REQUIRED_FIELD_REMOVED #/M/2"},
        False,
    ),
    (
        "Detect changed field number",
        P3 + "message M { string s = 1; }",
        P3 + "message M { string s = 2; }",
        {"FIELD_REMOVED #/M/1", "FIELD_ADDED #/M/2"},
        True,
    ),
    (
        "Detect compatible field number type change (int32 -> int64)",
        P3 + "message M { int32 n = 1; }",
        P3 + "message M { int64 n = 1; }",
        set(),
        True,
    ),
    (
        "uint64 and bool share the varint group",
        P3 + "message M { uint64 n = 1; }",
        P3 + "message M { bool n = 1; }",
        set(),
        True,
    ),
    (
        "Detect compatible field string type change (string -> bytes)",
        P3 + "message M { string s = 1; }",
        P3 + "message M { bytes s = 1; }",
        set(),
        True,
    ),
    (
        "sint32 and sint64 are one group",
        P3 + "message M { sint32 n = 1; }",
        P3 + "message M { sint64 n = 1; }",
        set(),
        True,
    ),
    (
        "fixed32 and sfixed32 are one group",
        P3 + "message M { fixed32 n = 1; }",
        P3 + "message M { sfixed32 n = 1; }",
        set(),
        True,
    ),
    (
        "fixed64 and sfixed64 are one group",
        P3 + "message M { fixed64 n = 1; }",
        P3 + "message M { sfixed64 n = 1; }",
        set(),
        True,
    ),
    (
        "Detect incompatible field type change (string -> int32)",
        P3 + "message M { string s = 1; }",
        P3 + "message M { int32 s = 1; }",
        {"FIELD_SCALAR_KIND_CHANGED #/M/1"},
        False,
    ),
    (
        "int32 -> sint32 changes the encoding",
        P3 + "message M { int32 n = 1; }",
        P3 + "message M { sint32 n = 1; }",
        {"FIELD_SCALAR_KIND_CHANGED #/M/1"},
        False,
    ),
    (
        "fixed32 -> fixed64 changes the wire type",
        P3 + "message M { fixed32 n = 1; }",
        P3 + "message M { fixed64 n = 1; }",
        {"FIELD_SCALAR_KIND_CHANGED #/M/1"},
        False,
    ),
    (
        "Detect field number type to enum change",
        P3 + "message M { int32 status = 1; }",
        P3
        + "message M { Status status = 1; }\nenum Status { ACTIVE = 0; INACTIVE = 1; }",
        {"ENUM_ADDED #/Status"},
        True,
    ),
    (
        "Detect enum type to field number change",
        P3 + "message M { Status status = 1; }\nenum Status { ACTIVE = 0; }",
        P3 + "message M { int32 status = 1; }",
        {"ENUM_REMOVED #/Status"},
        True,
    ),
    (
        "Detect field number type to message (FIELD_KIND_CHANGED)",
        P3 + "message M { int32 status = 1; }",
        P3 + "message M { Status status = 1; message Status { int32 code = 1; } }",
        {"FIELD_KIND_CHANGED #/M/1", "MESSAGE_ADDED #/M/Status"},
        False,
    ),
    (
        "Detect incompatible field type change (message -> other message)",
        P3 + "message M { A a = 1; }\nmessage A { string s = 1; }",
        P3 + "message M { B a = 1; }\nmessage B { string s = 1; }",
        {"MESSAGE_REMOVED #/A", "MESSAGE_ADDED #/B", "FIELD_NAMED_TYPE_CHANGED #/M/1"},
        False,
    ),
    (
        "Detect enum const change",
        P3 + "enum Status { UNKNOWN = 0; ACTIVE = 1; }",
        P3 + "enum Status { UNKNOWN = 0; ENABLED = 1; }",
        {"ENUM_CONST_CHANGED #/Status/1"},
        True,
    ),
    (
        "enum constant added",
        P3 + "message M { E e = 1; enum E { A = 0; } }",
        P3 + "message M { E e = 1; enum E { A = 0; B = 1; } }",
        {"ENUM_CONST_ADDED #/M/E/1"},
        True,
    ),
    (
        "enum constant removed",
        P3 + "message M { E e = 1; enum E { A = 0; B = 1; } }",
        P3 + "message M { E e = 1; enum E { A = 0; } }",
        {"ENUM_CONST_REMOVED #/M/E/1"},
        True,
    ),
    (
        "Detect compatible field to oneof change (new field in a new oneof)",
        P3 + "message M { string a = 1; string b = 2; }",
        P3 + "message M { string a = 1; string b = 2; oneof choice { string c = 3; } }",
        {"ONEOF_ADDED #/M/choice", "ONEOF_FIELD_ADDED #/M/choice/3"},
        True,
    ),
    (
        "Detect incompatible field to oneof change",
        P3 + "message M { string a = 1; string b = 2; }",
        P3 + "message M { oneof choice { string a = 1; string b = 2; string c = 3; } }",
        {
            "MULTIPLE_FIELDS_MOVED_TO_ONEOF #/M/choice",
            "ONEOF_ADDED #/M/choice",
            "ONEOF_FIELD_ADDED #/M/choice/3",
        },
        False,
    ),
    (
        "Detect compatible add field to oneof",
        P3 + "message M { oneof choice { string a = 1; string b = 2; } }",
        P3 + "message M { oneof choice { string a = 1; string b = 2; string c = 3; } }",
        {"ONEOF_FIELD_ADDED #/M/choice/3"},
        True,
    ),
    (
        "Detect incompatible remove field from oneof",
        P3 + "message M { oneof choice { string a = 1; string b = 2; string c = 3; } }",
        P3 + "message M { oneof choice { string a = 1; string b = 2; } }",
        {"ONEOF_FIELD_REMOVED #/M/choice/3"},
        False,
    ),
    (
        "Detect compatible move field to oneof (a single field into a new oneof)",
        P3 + "message M { string a = 1; string b = 2; }",
        P3 + "message M { string a = 1; oneof choice { string b = 2; } }",
        {"ONEOF_ADDED #/M/choice"},
        True,
    ),
    (
        "Detect incompatible move field to (existing) oneof",
        P3 + "message M { string a = 1; oneof choice { string b = 2; string c = 3; } }",
        P3 + "message M { oneof choice { string a = 1; string b = 2; string c = 3; } }",
        {"FIELD_MOVED_TO_EXISTING_ONEOF #/M/choice"},
        False,
    ),
    (
        "Detect compatible move field out of a oneof to top level",
        P3 + "message M { oneof choice { string a = 1; string b = 2; } }",
        P3 + "message M { string b = 2; oneof choice { string a = 1; } }",
        {"ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/M/2"},
        True,
    ),
    (
        "Detect compatible oneof rename with identical fields",
        P3 + "message M { oneof old_name { string a = 1; int32 b = 2; } }",
        P3 + "message M { oneof new_name { string a = 1; int32 b = 2; } }",
        {"ONEOF_REMOVED #/M/old_name", "ONEOF_ADDED #/M/new_name"},
        True,
    ),
    (
        "a whole oneof deleted is compatible",
        P3 + "message M { string s = 1; oneof choice { string a = 2; int32 b = 3; } }",
        P3 + "message M { string s = 1; }",
        {"ONEOF_REMOVED #/M/choice"},
        True,
    ),
    (
        "Detect incompatible field type change when field is moved into a new oneof",
        P3 + "message M { string a = 1; string b = 2; }",
        P3 + "message M { string a = 1; oneof choice { int32 b = 2; } }",
        {"ONEOF_ADDED #/M/choice", "FIELD_SCALAR_KIND_CHANGED #/M/choice/2"},
        False,
    ),
    (
        "Detect compatible field label change for string",
        P2 + "message M { optional string s = 1; }",
        P2 + "message M { repeated string s = 1; }",
        {"FIELD_STRING_OR_BYTES_LABEL_CHANGED #/M/1"},
        True,
    ),
    (
        "Detect incompatible field label change for number",
        P2 + "message M { optional int32 n = 1; }",
        P2 + "message M { repeated int32 n = 1; }",
        {"FIELD_NUMERIC_LABEL_CHANGED #/M/1"},
        False,
    ),
    (
        "Detect compatible field label change for message",
        P2 + "message M { optional A a = 1; }\nmessage A { optional int32 n = 1; }",
        P2 + "message M { repeated A a = 1; }\nmessage A { optional int32 n = 1; }",
        set(),
        True,
    ),
    (
        "Detect compatible message addition",
        P3 + "message A { string s = 1; }",
        P3 + "message A { string s = 1; }\nmessage B { string s = 1; }",
        {"MESSAGE_ADDED #/B"},
        True,
    ),
    (
        "Detect compatible message index change",
        P3 + "message A { string s = 1; }\nmessage B { string s = 1; }",
        P3 + "message B { string s = 1; }\nmessage A { string s = 1; }",
        {"MESSAGE_MOVED #/A", "MESSAGE_MOVED #/B"},
        True,
    ),
    (
        "message removed",
        P3 + "message A { string s = 1; }\nmessage B { string s = 1; }",
        P3 + "message A { string s = 1; }",
        {"MESSAGE_REMOVED #/B"},
        False,
    ),
    (
        "Detect compatible name qualification in map",
        P3
        + "package p;\nmessage M { map<string, V> m = 1; message V { int32 n = 1; } }",
        P3
        + "package p;\nmessage M { map<string, .p.M.V> m = 1; message V { int32 n = 1; } }",
        set(),
        True,
    ),
    (
        "map value scalar kind change",
        P3 + "message M { map<string, int32> m = 1; }",
        P3 + "message M { map<string, string> m = 1; }",
        {"FIELD_SCALAR_KIND_CHANGED #/M/1"},
        False,
    ),
    (
        "map made a plain field",
        P3 + "message M { map<string, int32> m = 1; }",
        P3 + "message M { string m = 1; }",
        {"FIELD_KIND_CHANGED #/M/1"},
        False,
    ),
    (
        "a change inside a referenced message is reported there and on the field",
        P3 + "message M { A a = 1; }\nmessage A { string s = 1; }",
        P3 + "message M { A a = 1; }\nmessage A { int32 s = 1; }",
        {"FIELD_SCALAR_KIND_CHANGED #/A/1", "FIELD_NAMED_TYPE_CHANGED #/M/1"},
        False,
    ),
    (
        "a recursive message compares once",
        P3 + "message Node { string v = 1; repeated Node children = 2; }",
        P3
        + "message Node { string v = 1; repeated Node children = 2; int32 depth = 3; }",
        {"FIELD_ADDED #/Node/3"},
        True,
    ),
]


@pytest.mark.parametrize(
    ("scenario", "old", "new", "expected", "compatible"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_confluent_differences(scenario, old, new, expected, compatible):
    found, ok = diff(old, new)
    assert found == expected
    assert ok is compatible


def test_incompatibility_messages_name_the_type_and_path():
    reader = parse(P3 + "message Order { string id = 1; int32 qty = 3; }")
    writer = parse(P3 + "message Order { string id = 1; string qty = 3; }")
    [message] = compatibility(reader, writer)
    assert message.startswith("FIELD_SCALAR_KIND_CHANGED #/Order/3: ")
    assert "reader" in message and "writer" in message


IMPORTED = (
    P3 + "package geo;\nmessage Address { string street = 1; string city = 2; }\n"
)


def test_import_reference_resolves_a_message_type():
    schema = parse(
        P3
        + 'package shop;\nimport "geo/address.proto";\nmessage Customer { geo.Address home = 1; }',
        {"geo/address.proto": IMPORTED},
    )
    field = schema.types["shop.Customer"].fields[1]
    assert (field.kind, field.type_name) == ("message", "geo.Address")
    assert schema.message_names() == [
        "shop.Customer"
    ]  # the imported message is not an own message


def test_imported_type_changes_are_compared():
    """Confluent's 'Detect incompatible import change': the imported message's field changed kind."""
    main = P3 + 'import "dep.proto";\nmessage M { .geo.Home h = 1; }'
    old_dep = P3 + "package geo;\nmessage Home { int32 id = 1; bool on = 2; }"
    new_dep = P3 + "package geo;\nmessage Home { string id = 1; bool on = 2; }"
    found, ok = diff(main, main, {"dep.proto": old_dep}, {"dep.proto": new_dep})
    assert found == {
        "FIELD_SCALAR_KIND_CHANGED #/Home/1",
        "FIELD_NAMED_TYPE_CHANGED #/M/1",
    }
    assert not ok


def test_moving_a_message_to_an_import():
    """Confluent's 'Detect moving to import': the message leaves the file, so MESSAGE_REMOVED."""
    old = P3 + "package geo;\nmessage M { Home h = 1; }\nmessage Home { int32 id = 1; }"
    new = P3 + 'package geo;\nimport "home.proto";\nmessage M { Home h = 1; }'
    found, ok = diff(
        old,
        new,
        None,
        {"home.proto": P3 + "package geo;\nmessage Home { int32 id = 1; }"},
    )
    assert found == {"MESSAGE_REMOVED #/Home"} and not ok
    found, ok = diff(
        new,
        old,
        {"home.proto": P3 + "package geo;\nmessage Home { int32 id = 1; }"},
        None,
    )
    assert found == {"MESSAGE_ADDED #/Home"} and ok


def test_well_known_imports_need_no_reference():
    schema = parse(
        P3
        + 'import "google/protobuf/timestamp.proto";\nmessage E { google.protobuf.Timestamp at = 1; }'
    )
    assert schema.types["E"].fields[1].type_name == "google.protobuf.Timestamp"


SELF_SCHEMAS = [c[1] for c in CASES] + [c[2] for c in CASES]


@pytest.mark.parametrize("text", SELF_SCHEMAS)
def test_every_schema_is_compatible_with_itself(text):
    schema = parse(text)
    assert [d for d in differences(schema, schema) if not d.compatible] == []
    for level in ("BACKWARD", "FORWARD", "FULL", "FULL_TRANSITIVE"):
        assert check(level, schema, [schema]) == []


V1 = P3 + "message M { string id = 1; int32 code = 2; }"
V2 = P3 + "message M { string id = 1; }"  # field 2 removed: compatible
V3 = (
    P3 + "message M { string id = 1; string code = 2; }"
)  # field 2 back with another kind


def test_transitive_only_failure():
    """The scenario documented for transitive levels: remove a field, re-add it with a new type."""
    v1, v2, v3 = parse(V1), parse(V2), parse(V3)
    assert check("BACKWARD", v2, [v1]) == []
    assert check("BACKWARD", v3, [v1, v2]) == []  # only the latest (v2) is compared
    errors = check("BACKWARD_TRANSITIVE", v3, [v1, v2])
    assert errors and errors[0].startswith("FIELD_SCALAR_KIND_CHANGED #/M/2")
    assert check("FULL", v3, [v1, v2]) == []
    assert check("FULL_TRANSITIVE", v3, [v1, v2])
    assert check("NONE", v3, [v1, v2]) == []


def test_levels_pick_the_reader_and_writer():
    """A member added to a oneof: new readers read old data (ONEOF_FIELD_ADDED, compatible), but
    old readers of new data miss a oneof member (ONEOF_FIELD_REMOVED, incompatible)."""
    old = parse(P3 + "message M { oneof o { string a = 1; } }")
    new = parse(P3 + "message M { oneof o { string a = 1; int32 b = 2; } }")
    assert check("BACKWARD", new, [old]) == []
    forward = check("FORWARD", new, [old])
    assert [m.split(":")[0] for m in forward] == ["ONEOF_FIELD_REMOVED #/M/o/2"]
    assert "old schema" in forward[0] and "new schema" in forward[0]
    assert check("FULL", new, [old]) == forward
    removing = check("BACKWARD", old, [new])  # removing the member: the same rule
    assert [m.split(":")[0] for m in removing] == ["ONEOF_FIELD_REMOVED #/M/o/2"]
    assert check("FORWARD", old, [new]) == []


def test_required_fields_break_both_ways():
    old = parse(P2 + "message M { optional string s = 1; }")
    new = parse(P2 + "message M { optional string s = 1; required int32 n = 2; }")
    assert [m.split(":")[0] for m in check("BACKWARD", new, [old])] == [
        "REQUIRED_FIELD_ADDED #/M/2"
    ]
    assert [m.split(":")[0] for m in check("FORWARD", new, [old])] == [
        "REQUIRED_FIELD_REMOVED #/M/2"
    ]
    assert check("BACKWARD", new, []) == []
    with pytest.raises(ValueError):
        check("SIDEWAYS", new, [old])


def test_reusing_a_reserved_number_across_versions_is_incompatible():
    old = parse(P3 + 'message M { reserved 2; reserved "code"; string id = 1; }')
    by_number = parse(P3 + "message M { string id = 1; int32 count = 2; }")
    by_name = parse(P3 + "message M { string id = 1; int32 code = 3; }")
    assert check("BACKWARD", by_number, [old])[0].startswith(
        "RESERVED_FIELD_REUSED #/M/2"
    )
    assert check("BACKWARD", by_name, [old])[0].startswith(
        "RESERVED_FIELD_REUSED #/M/3"
    )
    # retiring a field by reserving its number is fine
    assert (
        check(
            "BACKWARD",
            old,
            [parse(P3 + "message M { string id = 1; int32 code = 2; }")],
        )
        == []
    )


INVALID = [
    ("bad syntax", P3 + "message M { int32 a = 1 }"),
    ("unterminated", P3 + "message M {"),
    ("unknown syntax", 'syntax = "proto4";\nmessage M { int32 a = 1; }'),
    ("duplicate field numbers", P3 + "message M { int32 a = 1; string b = 1; }"),
    (
        "duplicate number with a oneof member",
        P3 + "message M { int32 a = 1; oneof o { string b = 1; } }",
    ),
    ("duplicate field names", P3 + "message M { int32 a = 1; string a = 2; }"),
    ("unknown type", P3 + "message M { Missing m = 1; }"),
    ("unknown map value type", P3 + "message M { map<string, Missing> m = 1; }"),
    ("bad map key", P3 + "message M { map<double, string> m = 1; }"),
    ("reserved number used", P3 + "message M { reserved 2 to 4; int32 a = 3; }"),
    ("reserved name used", P3 + 'message M { reserved "a"; int32 a = 1; }'),
    ("field number zero", P3 + "message M { int32 a = 0; }"),
    ("field number reserved by protobuf", P3 + "message M { int32 a = 19000; }"),
    ("required in proto3", P3 + "message M { required int32 a = 1; }"),
    ("proto3 enum not starting at zero", P3 + "enum E { A = 1; }"),
    ("enum alias without allow_alias", P3 + "enum E { A = 0; B = 0; }"),
    ("duplicate type", P3 + "message M { int32 a = 1; }\nmessage M { int32 b = 1; }"),
    (
        "import without reference",
        P3 + 'import "other.proto";\nmessage M { int32 a = 1; }',
    ),
    (
        "rpc on an unknown type",
        P3 + "message M { int32 a = 1; }\nservice S { rpc Get (M) returns (Nope); }",
    ),
]


@pytest.mark.parametrize(("why", "text"), INVALID, ids=[i[0] for i in INVALID])
def test_invalid_protos_are_refused(why, text):
    with pytest.raises(InvalidSchema):
        parse(text)


def test_invalid_reference_is_refused():
    with pytest.raises(InvalidSchema):
        parse(
            P3 + 'import "bad.proto";\nmessage M { int32 a = 1; }',
            {"bad.proto": "message {"},
        )


def test_parses_proto2_and_proto3_features():
    schema = parse(
        P2
        + """
package acme.v1;
import "google/protobuf/descriptor.proto";
option java_package = "com.acme";
extend google.protobuf.FieldOptions { optional string label = 50000; }
message Order {
  option deprecated = true;
  reserved 10, 12 to 15, 100 to max;
  reserved "legacy";
  required string id = 1 [(label) = "key"];
  optional int32 qty = 2 [default = 1];
  repeated Line lines = 3;
  map<string, Line> by_sku = 4;
  oneof payment { string card = 5; Money cash = 6; }
  optional group Note = 7 { optional string text = 1; }
  extensions 1000 to 1999;
  message Line { optional int64 qty = 1; }
  message Money { optional int64 units = 1; }
  enum State { option allow_alias = true; NEW = 0; OPEN = 1; STARTED = 1; reserved 5; }
}
service Orders { rpc Get (Order) returns (Order); }
"""
    )
    order = schema.types["acme.v1.Order"]
    assert schema.syntax == "proto2" and schema.package == "acme.v1"
    assert schema.message_names() == ["acme.v1.Order"]
    assert sorted(order.fields) == [1, 2, 3, 4, 5, 6, 7]
    assert order.oneofs == {"payment": [5, 6]}
    assert (
        order.fields[4].kind == "map"
        and order.fields[4].value_type == "acme.v1.Order.Line"
    )
    assert order.reserved_names == ["legacy"]
    assert (
        order.is_reserved(13)
        and order.is_reserved(1_000_000)
        and not order.is_reserved(11)
    )


def test_message_indexes():
    schema = parse(
        P3
        + "package p;\nmessage A { message X { int32 n = 1; } }\nmessage B { message Y { int32 n = 1; } }"
    )
    assert schema.message_names() == ["p.A", "p.B"]
    assert schema.message_indexes("p.A") == [0]
    assert schema.message_indexes("p.B.Y") == [1, 0]
    assert schema.message_for_indexes([1, 0]) == "p.B.Y"
    assert schema.message_for_indexes([]) == "p.A"


def test_canonical_form_is_equal_for_differently_written_equal_protos():
    a = parse(
        P3
        + """package shop;
// a comment
option java_package = "x"; option java_multiple_files = true;
message Order {
  Line line = 2;   string id = 1;
  oneof pay { string card = 7; int32 points = 6; }
  reserved 9, 3;
  message Line { int32 qty = 1; }
  enum E { Z = 0; B = 2; A = 1; }
}
"""
    )
    b = parse(
        P3
        + """package shop;

option java_multiple_files = true;
option java_package = "x";

message Order {
    reserved 3;
    reserved 9;
    string id = 1;
    .shop.Order.Line line = 2;
    oneof pay {
        int32 points = 6;
        string card = 7;
    }
    message Line {
        int32 qty = 1;
    }
    enum E { Z = 0; A = 1; B = 2; }
}
"""
    )
    assert a.canonical() == b.canonical()
    assert "  .shop.Order.Line line = 2;" in a.canonical()
    assert parse(a.canonical()).canonical() == a.canonical()  # a fixed point


def test_canonical_form_keeps_message_order():
    """Message indexes are taken from the order of messages, so normalizing must not sort them."""
    text = P3 + "message B { int32 n = 1; }\nmessage A { int32 n = 1; }"
    assert parse(parse(text).canonical()).message_names() == ["B", "A"]


def test_the_schema_keeps_its_text():
    text = P3 + "message M { int32 n = 1; }"
    schema = parse(text)
    assert isinstance(schema, ProtobufSchema) and str(schema) == text


def test_proto3_implicit_label_compares_as_optional():
    """kbroker's reading of labels: proto3 `int32 n` is `optional int32 n` on the wire, so making
    it `optional` is no change and making it `repeated` (packed) is a numeric label change."""
    implicit = P3 + "message M { int32 n = 1; }"
    found, ok = diff(implicit, P3 + "message M { optional int32 n = 1; }")
    assert (found, ok) == (set(), True)
    found, ok = diff(implicit, P3 + "message M { repeated int32 n = 1; }")
    assert (found, ok) == ({"FIELD_NUMERIC_LABEL_CHANGED #/M/1"}, False)


def test_literals_are_normalized_once_whatever_their_quotes_and_base():
    """The parser keeps a string's escapes as written and hex integers as text: the normalized form
    writes each literal once, canonically, and normalizing it again changes nothing."""
    text = r'''syntax = "proto2";
message M {
  optional string a = 1 [default = "a\001\"q"];
  optional string b = 2 [default = 'it\'s "x"'];
  optional int32 c = 3 [default = -0x10];
  optional bytes d = 4 [default = "\xff\n"];
}'''
    normalized = parse(text).canonical()
    assert r'[default = "a\001\"q"]' in normalized
    assert r'''[default = "it\'s \"x\""]''' in normalized
    assert "[default = -16]" in normalized
    assert r'[default = "\377\n"]' in normalized
    assert parse(normalized).canonical() == normalized
