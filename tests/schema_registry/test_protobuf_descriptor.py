"""Protobuf schemas as base64 FileDescriptorProtos (what Confluent's clients register and fetch
with `format=serialized`): .proto text -> descriptor -> .proto text round trips, descriptors
written by google.protobuf itself, message classes built from our descriptors, and garbage."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    message_factory,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)

from kbroker.schema_registry import formats
from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.protobuf import parse
from kbroker.schema_registry.protobuf_descriptor import (
    MAX_SERIALIZED_CHARS,
    file_descriptor,
    from_serialized,
    json_name,
    map_entry_name,
    serialized,
)
from kbroker.schema_registry.records import PROTOBUF

COMMON = """syntax = "proto3";
package com.example.common;

message Money {
  string currency = 1;
  int64 units = 2;
}

enum Currency {
  CURRENCY_UNSPECIFIED = 0;
  EUR = 1;
}
"""

SCHEMAS = {
    "proto3 scalars and nesting": """syntax = "proto3";
package com.example;

option java_package = "com.example.proto";
option java_multiple_files = true;
option optimize_for = SPEED;

message Order {
  string id = 1;
  int64 created_ms = 2;
  repeated int32 quantities = 3 [packed = false];
  double total = 4 [deprecated = true];
  bytes blob = 5;
  sint32 a = 6; sint64 b = 7; fixed32 c = 8; fixed64 d = 9; sfixed32 e = 10; sfixed64 f = 11;
  uint32 g = 12; uint64 h = 13; float i = 14; bool j = 15;
  Line first_line = 16;
  repeated Line lines = 17;
  Status status = 18;
  reserved 20, 25 to 30, 100 to max;
  reserved "legacy", "old_field";

  message Line {
    string sku = 1;
    Detail detail = 2;
    message Detail { string note = 1; }
  }
  enum Status {
    option allow_alias = true;
    UNKNOWN = 0;
    NEW = 1;
    CREATED = 1;
    DONE = 2 [deprecated = true];
    reserved 5 to 9, 100 to max;
    reserved "GONE";
  }
}

message Other {
  Order.Line line = 1;
}
""",
    "proto3 maps, oneofs and optional": """syntax = "proto3";
package p;

message M {
  map<string, int32> counts = 1;
  oneof choice {
    string text = 2;
    Inner inner = 3;
    Kind kind = 4;
  }
  optional int32 maybe = 5;
  optional string _under = 6;
  map<int64, Inner> inner_by_id = 7;
  message Inner { map<string, Kind> kinds = 1; }
  map<string, Kind> string_kind_map = 8;
  oneof other { bool flag = 9; }
  enum Kind { K0 = 0; K1 = 1; }
}
""",
    "proto2 with defaults, groups and extensions": """syntax = "proto2";
package legacy.v1;

message Record {
  required string name = 1;
  optional int32 count = 2 [default = -16];
  optional double ratio = 3 [default = -inf];
  optional float f = 4 [default = 1.5];
  optional bool on = 5 [default = true];
  optional string s = 6 [default = "he said \\"hi\\"\\n"];
  optional bytes raw = 7 [default = "a\\001\\377"];
  optional Color color = 8 [default = BLUE];
  repeated int32 packed_ints = 9 [packed = true];
  optional group Extra = 10 {
    optional int32 level = 1;
  }
  optional string renamed = 11 [json_name = "otherName"];
  extensions 100 to 199, 1000 to max;
  enum Color { RED = 1; BLUE = 2; }
}

extend Record {
  optional int32 ext_count = 100;
  repeated string ext_tags = 101;
}

message Holder {
  extend Record {
    optional Holder holder = 102;
  }
}
""",
    "imports through references": """syntax = "proto3";
package com.example.orders;

import "common.proto";
import "google/protobuf/timestamp.proto";

message Payment {
  com.example.common.Money amount = 1;
  .com.example.common.Currency currency = 2;
  google.protobuf.Timestamp at = 3;
  map<string, com.example.common.Money> by_account = 4;
}
""",
    "no package, services": """syntax = "proto3";

message Req { string q = 1; }
message Resp { repeated string hits = 1; }

service Search {
  option deprecated = true;
  rpc Find (Req) returns (Resp);
  rpc Stream (stream Req) returns (stream Resp) {
    option deprecated = true;
  }
}
""",
    "proto2 without syntax line": """package plain;
message A {
  optional A next = 1;
  repeated B bs = 2;
}
message B {
  optional int32 x = 1;
}
""",
}
REFERENCES = {"imports through references": {"common.proto": COMMON}}


def _b64(data: bytes) -> str:
    return base64.standard_b64encode(data).decode("ascii")


def _round_trip(text: str, refs: dict[str, str] | None = None) -> str:
    schema = parse(text, refs)
    encoded = serialized(schema)
    source = from_serialized(encoded)
    assert source is not None, encoded
    again = parse(source, refs)
    assert again.canonical() == schema.canonical(), source
    return source


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_round_trip_keeps_the_normalized_form(name: str) -> None:
    source = _round_trip(SCHEMAS[name], REFERENCES.get(name))
    # and once more: the text we write converts to the same descriptor
    assert from_serialized(serialized(parse(source, REFERENCES.get(name)))) == source


def test_descriptor_is_laid_out_as_protoc_lays_it_out() -> None:
    fd = file_descriptor(parse(SCHEMAS["proto3 maps, oneofs and optional"]))
    assert fd.name == "default" and fd.package == "p" and fd.syntax == "proto3"
    (m,) = fd.message_type
    # map entries and nested messages in declaration order
    assert [n.name for n in m.nested_type] == ["CountsEntry", "InnerByIdEntry", "Inner", "StringKindMapEntry"]
    counts = m.nested_type[0]
    assert counts.options.map_entry
    assert [(f.name, f.number, f.type) for f in counts.field] == [
        ("key", 1, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
        ("value", 2, descriptor_pb2.FieldDescriptorProto.TYPE_INT32),
    ]
    fields = {f.name: f for f in m.field}
    assert fields["counts"].type_name == ".p.M.CountsEntry"
    assert fields["counts"].label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    assert fields["kind"].type_name == ".p.M.Kind" and fields["kind"].oneof_index == 0
    assert fields["inner_by_id"].json_name == "innerById"
    # real oneofs first, then proto3 optional's synthetic ones
    assert [o.name for o in m.oneof_decl] == ["choice", "other", "_maybe", "X_under"]
    assert fields["maybe"].proto3_optional and fields["maybe"].oneof_index == 2
    assert fields["_under"].oneof_index == 3
    assert [f.name for f in m.field] == [
        "counts", "text", "inner", "kind", "maybe", "_under", "inner_by_id", "string_kind_map", "flag"
    ]


def test_proto2_defaults_and_options_in_the_descriptor() -> None:
    fd = file_descriptor(parse(SCHEMAS["proto2 with defaults, groups and extensions"]))
    assert fd.syntax == ""  # protoc leaves proto2 unsaid
    record = fd.message_type[0]
    fields = {f.name: f for f in record.field}
    assert fields["count"].default_value == "-16"
    assert fields["ratio"].default_value == "-inf"
    assert fields["f"].default_value == "1.5"
    assert fields["on"].default_value == "true"
    assert fields["s"].default_value == 'he said "hi"\n'
    assert fields["raw"].default_value == "a\\001\\377"
    assert fields["color"].default_value == "BLUE"
    assert fields["packed_ints"].options.packed
    assert fields["renamed"].json_name == "otherName"
    assert fields["extra"].type == descriptor_pb2.FieldDescriptorProto.TYPE_GROUP
    assert [(r.start, r.end) for r in record.extension_range] == [(100, 200), (1000, 536_870_912)]
    assert [(e.name, e.extendee) for e in fd.extension] == [
        ("ext_count", ".legacy.v1.Record"), ("ext_tags", ".legacy.v1.Record")]
    assert [(e.name, e.type_name) for e in fd.message_type[1].extension] == [("holder", ".legacy.v1.Holder")]
    first = file_descriptor(parse(SCHEMAS["proto3 scalars and nesting"]))
    assert first.options.java_package == "com.example.proto" and first.options.java_multiple_files
    assert first.options.optimize_for == descriptor_pb2.FileOptions.SPEED
    order = first.message_type[0]
    assert [(r.start, r.end) for r in order.reserved_range] == [(20, 21), (25, 31), (100, 536_870_912)]
    status = order.enum_type[0]
    assert status.options.allow_alias
    assert [(r.start, r.end) for r in status.reserved_range] == [(5, 9), (100, 2**31 - 1)]


WELL_KNOWN = [any_pb2, api_pb2, descriptor_pb2, duration_pb2, source_context_pb2, struct_pb2, timestamp_pb2,
              type_pb2, wrappers_pb2]


def _strip_options(m):
    for fd, value in list(m.ListFields()):
        if fd.name == "options":
            m.ClearField("options")
        elif fd.message_type is not None:
            repeated = getattr(fd, "is_repeated", None)
            if repeated is None:  # protobuf < 7
                repeated = fd.label == fd.LABEL_REPEATED
            for item in (value if repeated else [value]):
                _strip_options(item)
    return m


@pytest.mark.parametrize("module", WELL_KNOWN, ids=lambda m: m.DESCRIPTOR.name)
def test_descriptors_written_by_protoc_convert_back_exactly(module) -> None:
    """google.protobuf's own generated files: to text, parsed, and to a descriptor again equal to
    protoc's (options that are messages or lists, as in descriptor.proto, aside)."""
    source = from_serialized(_b64(module.DESCRIPTOR.serialized_pb))
    assert source is not None
    refs = {m.DESCRIPTOR.name: from_serialized(_b64(m.DESCRIPTOR.serialized_pb))
            for m in (source_context_pb2, type_pb2)}
    again = file_descriptor(parse(source, refs), module.DESCRIPTOR.name)
    original = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    if module is descriptor_pb2:
        assert _strip_options(again) == _strip_options(original)
    else:
        assert again == original


def test_a_message_class_descriptor_converts_to_text() -> None:
    source = from_serialized(_b64(struct_pb2.Struct.DESCRIPTOR.file.serialized_pb))
    assert source is not None
    schema = parse(source)
    assert schema.package == "google.protobuf"
    assert schema.message_names() == ["google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]
    assert "map<string, .google.protobuf.Value> fields = 1;" in source
    assert "oneof kind {" in source


def _pool_with(schema_text: str, refs: dict[str, str] | None = None, name: str = "test/schema.proto"):
    """A pool as Confluent's deserializer builds it: the well-known files, the references under
    their import names, then our descriptor."""
    pool = descriptor_pool.DescriptorPool()
    for module in (any_pb2, timestamp_pb2, duration_pb2, wrappers_pb2, struct_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    for ref_name, ref_text in (refs or {}).items():
        fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized(parse(ref_text))))
        fd.name = ref_name
        pool.Add(fd)
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized(parse(schema_text, refs))))
    fd.name = name
    pool.Add(fd)
    return pool


def _cls(pool, full_name: str):
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def test_message_classes_built_from_our_descriptor_encode_and_decode() -> None:
    pool = _pool_with(SCHEMAS["proto3 maps, oneofs and optional"])
    M = _cls(pool, "p.M")
    m = M()
    m.counts["a"] = 1
    m.inner.kinds["x"] = M.Kind.K1
    m.maybe = 0
    m.inner_by_id[7].kinds["y"] = 1
    data = m.SerializeToString()
    back = M.FromString(data)
    assert back == m
    assert back.HasField("maybe") and back.WhichOneof("choice") == "inner"
    assert dict(back.counts) == {"a": 1}

    pool = _pool_with(SCHEMAS["imports through references"], REFERENCES["imports through references"])
    Payment = _cls(pool, "com.example.orders.Payment")
    p = Payment()
    p.amount.currency = "EUR"
    p.amount.units = 12
    p.currency = 1
    p.at.seconds = 1_700_000_000
    p.by_account["acc"].units = 3
    assert Payment.FromString(p.SerializeToString()) == p

    pool = _pool_with(SCHEMAS["proto2 with defaults, groups and extensions"])
    Record = _cls(pool, "legacy.v1.Record")
    r = Record(name="n")
    assert r.count == -16 and r.ratio == float("-inf") and r.s == 'he said "hi"\n'
    assert r.raw == b"a\x01\xff" and r.color == 2 and r.on is True
    r.extra.level = 3
    r.packed_ints.extend([1, 2, 3])
    assert Record.FromString(r.SerializeToString()) == r


def test_our_classes_read_what_protoc_classes_wrote() -> None:
    """Wire compatibility: well-known types converted to text and back decode protoc's bytes."""
    for module, message, fill in [
        (timestamp_pb2, "google.protobuf.Timestamp", lambda t: (setattr(t, "seconds", 5), setattr(t, "nanos", 7))),
        (struct_pb2, "google.protobuf.Struct", lambda s: s.update({"a": [1, "x", None, {"b": True}]})),
    ]:
        source = from_serialized(_b64(module.DESCRIPTOR.serialized_pb))
        fd = file_descriptor(parse(source), module.DESCRIPTOR.name)
        pool = descriptor_pool.DescriptorPool()
        pool.Add(fd)
        ours = _cls(pool, message)
        original = getattr(module, message.rsplit(".", 1)[1])()
        fill(original)
        data = original.SerializeToString()
        decoded = ours.FromString(data)
        assert decoded.SerializeToString(deterministic=True) == original.SerializeToString(deterministic=True)


def test_formats_store_the_text_and_render_the_descriptor() -> None:
    text = SCHEMAS["proto3 scalars and nesting"]
    encoded = serialized(parse(text))
    stored = formats.parse(PROTOBUF, encoded, [], False)
    assert stored == from_serialized(encoded) and stored.startswith('syntax = "proto3";')
    assert formats.parse(PROTOBUF, encoded, [], True) == parse(text).canonical()
    assert formats.parsed(PROTOBUF, encoded).canonical() == parse(text).canonical()
    rendered = formats.render(PROTOBUF, stored, [], "serialized")
    assert from_serialized(rendered) == stored
    assert formats.render(PROTOBUF, stored, [], "") == stored


def test_editions_are_refused_as_the_parser_refuses_them() -> None:
    fd = descriptor_pb2.FileDescriptorProto(name="e.proto", syntax="editions", edition=descriptor_pb2.EDITION_2023)
    fd.message_type.add(name="M")
    source = from_serialized(_b64(fd.SerializeToString()))
    assert source is not None and source.startswith('edition = "2023";')
    with pytest.raises(InvalidSchema, match="editions"):
        formats.parse(PROTOBUF, _b64(fd.SerializeToString()), [], False)


@pytest.mark.parametrize("garbage", [
    "", "AAAA", "Zm9v", "not base64 at all", "Zm9v\n", "Zm9", "@@@@", "=AAA", " " * 8,
    _b64(b"\xff" * 40), _b64(b"\n\x05ab"),  # truncated
    _b64(b"\x08\x01"),  # a varint where name is a string
    _b64(descriptor_pb2.FileDescriptorProto(name="x").SerializeToString() + b"\xa0\x06\x01"),  # unknown field 100
    SCHEMAS["proto3 scalars and nesting"],
])
def test_garbage_is_not_a_descriptor(garbage: str) -> None:
    assert from_serialized(garbage) is None


def test_descriptors_that_cannot_be_written_as_text_are_refused() -> None:
    for fd in [
        descriptor_pb2.FileDescriptorProto(name="x", syntax="proto5"),
        descriptor_pb2.FileDescriptorProto(name="x", package="a b; message X {}"),
    ]:
        assert from_serialized(_b64(fd.SerializeToString())) is None
    fd = descriptor_pb2.FileDescriptorProto(name="x")
    fd.message_type.add(name="M {} message N")
    assert from_serialized(_b64(fd.SerializeToString())) is None
    fd = descriptor_pb2.FileDescriptorProto(name="x")
    fd.message_type.add(name="M").field.add(name="f", number=1, type_name="A; }")
    assert from_serialized(_b64(fd.SerializeToString())) is None
    fd = descriptor_pb2.FileDescriptorProto(name="x", dependency=['a"; import "b'])
    source = from_serialized(_b64(fd.SerializeToString()))
    assert source is not None and 'import "a\\"; import \\"b";' in source


def test_huge_input_is_not_a_descriptor() -> None:
    fd = descriptor_pb2.FileDescriptorProto(name="x")
    fd.message_type.add(name="M")
    small = _b64(fd.SerializeToString())
    assert from_serialized(small) is not None
    huge = "A" * (MAX_SERIALIZED_CHARS + 4)
    assert from_serialized(huge) is None
    assert from_serialized(None) is None  # type: ignore[arg-type]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


@pytest.mark.parametrize("depth", [50, 3000])
def test_deep_nesting_does_not_raise(depth: int) -> None:
    inner = b"\n\x01M"
    for _ in range(depth):  # nested_type (3) inside nested_type ...
        inner = b"\n\x01M\x1a" + _varint(len(inner)) + inner
    source = from_serialized(_b64(b"\x22" + _varint(len(inner)) + inner))  # message_type (4)
    assert source is None or source.count("message M {") == depth + 1


def test_names_follow_protoc() -> None:
    assert json_name("inner_by_id") == "innerById"
    assert json_name("_under") == "Under"
    assert json_name("a__b1_c") == "aB1C"
    assert map_entry_name("string_kind_map") == "StringKindMapEntry"
    assert map_entry_name("_x") == "XEntry"
