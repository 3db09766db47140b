"""The console's schema-registry decoding: Confluent's wire header and Protobuf message indexes,
keys and values decoded with real schemas (Avro encoded by fastavro, named types from a
reference; JSON; Protobuf from a serialized FileDescriptorProto, a nested type and an import),
what a registry that cannot help leaves (the raw rendering and one line why), the cache of
schemas by id, and the rows of the Schemas pages. The registry is a stand-in answering Confluent's
REST paths from a dict."""

from __future__ import annotations

import base64
import io
import json
import struct

import fastavro
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

from kbroker.admin.schemas_cmd import RegistryErrorResponse, RegistryUnavailable
from kbroker.console import browse, schemas
from kbroker.console.registry import ConsoleRegistry, Decoder
from kbroker.console.schemas import DecodeError, Reference, message_indexes, wire_header
from kbroker.wire.records import Record

ADDRESS = {"type": "record", "name": "Address", "namespace": "shop",
           "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}
ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
                    {"name": "amount", "type": "double"}, {"name": "ship_to", "type": "shop.Address"},
                    {"name": "note", "type": ["null", "string"], "default": None},
                    {"name": "tag", "type": "bytes"}]}
ORDER_VALUE = {"id": 7, "customer": "c-1", "amount": 12.5, "ship_to": {"city": "Oslo", "zip": "0150"},
               "note": "<b>fragile</b>", "tag": b"\x01\xff"}


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def avro_bytes(schema: dict, value: dict, named: dict | None = None) -> bytes:
    named = {} if named is None else named
    parsed = fastavro.parse_schema(schema, named)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, value)
    return out.getvalue()


def order_avro() -> bytes:
    named: dict = {}
    fastavro.parse_schema(ADDRESS, named)
    return avro_bytes(ORDER, ORDER_VALUE, named)


# -- Protobuf: a file importing another, a nested message ------------------------------------------

def money_file() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="default", package="common", syntax="proto3")
    money = fdp.message_type.add(name="Money")
    money.field.add(name="currency", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL, json_name="currency")
    money.field.add(name="cents", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL, json_name="cents")
    return fdp


def shop_file() -> descriptor_pb2.FileDescriptorProto:
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3",
                                             dependency=["common/money.proto", "google/protobuf/timestamp.proto"])
    fdp.message_type.add(name="Ping").field.add(name="n", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL,
                                                json_name="n")
    order = fdp.message_type.add(name="Order")
    order.field.add(name="order_id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, json_name="orderId")
    order.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".common.Money", label=F.LABEL_OPTIONAL,
                    json_name="total")
    order.field.add(name="placed", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                    label=F.LABEL_OPTIONAL, json_name="placed")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="sku")
    line.field.add(name="qty", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, json_name="qty")
    order.field.add(name="lines", number=4, type=F.TYPE_MESSAGE, type_name=".shop.Order.Line",
                    label=F.LABEL_REPEATED, json_name="lines")
    return fdp


def b64(fdp: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.b64encode(fdp.SerializeToString()).decode()


def protobuf_classes():
    """The message classes a producer would have (its own pool, its own file names)."""
    from google.protobuf import timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    pool.Add(ts)
    money = money_file()
    money.name = "common/money.proto"
    pool.Add(money)
    pool.Add(shop_file())
    get = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return get("shop.Order"), get("shop.Order.Line"), get("shop.Ping")


def order_protobuf() -> bytes:
    Order, _Line, _Ping = protobuf_classes()
    msg = Order(order_id=42)
    msg.total.currency, msg.total.cents = "EUR", 1999
    msg.placed.seconds = 1700000000
    msg.lines.add(sku="sku-1", qty=2)
    return msg.SerializeToString()


# -- the wire header and the message indexes -------------------------------------------------------

def test_wire_header():
    assert wire_header(b"\x00\x00\x00\x01\x2cabc") == (300, b"abc")
    assert wire_header(b"\x00\x00\x00\x00\x03") == (3, b"")
    for not_framed in (None, b"", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x03x", b'{"a": 1}'):
        assert wire_header(not_framed) is None


def test_message_indexes_as_confluent_writes_them():
    assert message_indexes(b"\x00rest") == ([0], b"rest")  # "0" alone: the first message
    assert message_indexes(b"\x02\x02rest") == ([1], b"rest")  # count 1 (zigzag 2), index 1 (zigzag 2)
    assert message_indexes(b"\x04\x02\x00x") == ([1, 0], b"x")
    assert message_indexes(b"\x02\xac\x02") == ([150], b"")  # a two-byte varint: zigzag 300
    for bad in (b"", b"\x02", b"\x02\x80", b"\x01\x00", b"\x02\x01", bytes([2 * (schemas.MAX_MESSAGE_INDEXES + 1)])):
        with pytest.raises(DecodeError):
            message_indexes(bad)


@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=8), st.binary(max_size=20))
def test_message_indexes_round_trip(indexes, rest):
    assert message_indexes(schemas.encode_message_indexes(indexes) + rest) == (indexes, rest)


# -- decoding, one schema type at a time -------------------------------------------------------------

def test_avro_with_a_referenced_named_type():
    parsed = schemas.avro_decoder(json.dumps(ORDER), [Reference("shop.Address", "AVRO", json.dumps(ADDRESS))])
    value = schemas.decode_avro(parsed, order_avro())
    assert value == ORDER_VALUE
    text, cut = schemas.pretty(value)
    assert not cut and json.loads(text)["tag"] == "01 ff" and json.loads(text)["ship_to"]["city"] == "Oslo"
    with pytest.raises(DecodeError, match="does not parse"):
        schemas.avro_decoder(json.dumps(ORDER))  # shop.Address unknown without its reference
    with pytest.raises(DecodeError, match="not Avro"):
        schemas.decode_avro(parsed, order_avro()[:5])
    with pytest.raises(DecodeError, match="bytes left"):
        schemas.decode_avro(parsed, order_avro() + b"\x00\x00")


def test_avro_logical_types_pretty_print():
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}}]}
    import datetime
    import decimal
    value = {"at": datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.timezone.utc), "price": decimal.Decimal("12.34")}
    decoded = schemas.decode_avro(schemas.avro_decoder(json.dumps(schema)), avro_bytes(schema, value))
    assert json.loads(schemas.pretty(decoded)[0]) == {"at": "2024-05-01T12:00:00+00:00", "price": "12.34"}


def test_json():
    assert schemas.decode_json(b'{"a": [1, 2]}') == {"a": [1, 2]}
    for bad, why in ((b"\xff\xfe", "not UTF-8"), (b"{nope", "not UTF-8 JSON")):
        with pytest.raises(DecodeError, match=why):
            schemas.decode_json(bad)


def test_protobuf_nested_type_import_and_well_known_type():
    loaded = schemas.protobuf_decoder(b64(shop_file()), [Reference("common/money.proto", "PROTOBUF",
                                                                   b64(money_file()))])
    name, value = schemas.decode_protobuf(loaded, [1], order_protobuf())
    assert name == "shop.Order"
    assert value == {"order_id": "42", "total": {"currency": "EUR", "cents": "1999"},
                     "placed": "2023-11-14T22:13:20Z", "lines": [{"sku": "sku-1", "qty": 2}]}
    _Order, Line, Ping = protobuf_classes()
    assert schemas.decode_protobuf(loaded, [1, 0], Line(sku="x", qty=3).SerializeToString()) == (
        "shop.Order.Line", {"sku": "x", "qty": 3})
    assert schemas.decode_protobuf(loaded, [0], Ping().SerializeToString()) == ("shop.Ping", {"n": 0})
    with pytest.raises(DecodeError, match="past the 2 message types"):
        schemas.decode_protobuf(loaded, [2], b"")
    with pytest.raises(DecodeError, match="not a Protobuf shop.Order"):
        schemas.decode_protobuf(loaded, [1], b"\x0a\xff")


def test_protobuf_schema_problems():
    with pytest.raises(DecodeError, match="serialized descriptor"):
        schemas.protobuf_decoder('syntax = "proto3"; message M {}')  # .proto text: no ?format=serialized
    with pytest.raises(DecodeError, match="common/money.proto"):
        schemas.protobuf_decoder(b64(shop_file()))  # its import not given as a reference


def test_label_and_subject_choice():
    found = [("audit-value", 1), ("orders-value", 2), ("orders-key", 1)]
    assert schemas.pick_subject(found, "orders", False) == ("orders-value", 2)
    assert schemas.pick_subject(found, "orders", True) == ("orders-key", 1)
    assert schemas.pick_subject(found, "other", False) == ("audit-value", 1)
    assert schemas.pick_subject([], "orders", False) is None
    assert schemas.label("AVRO", 3, ("orders-value", 2)) == "Avro · schema id 3 · subject orders-value v2"
    assert schemas.label("PROTOBUF", 4, None, "shop.Order") == "Protobuf · shop.Order · schema id 4"


def test_pretty_is_cut():
    text, cut = schemas.pretty({"s": "x" * (schemas.MAX_SHOWN_CHARS + 10)})
    assert cut and len(text) == schemas.MAX_SHOWN_CHARS


# -- through a registry --------------------------------------------------------------------------------

class FakeRegistryClient:
    """Confluent's REST API from a dict of paths; counts the calls."""

    url = "http://registry.test"

    def __init__(self, answers: dict) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def call(self, method, path, query=None, body=None):
        key = path + ("?format=" + query["format"] if query and "format" in query else "")
        self.calls.append(key)
        answer = self.answers.get(key, self.answers.get(path))
        if isinstance(answer, Exception):
            raise answer
        if answer is None:
            raise RegistryErrorResponse(404, 40403, f"Schema not found: {path}")
        return answer


def registry_answers() -> dict:
    return {
        "/schemas/ids/1": {"schema": json.dumps(ADDRESS)},
        "/schemas/ids/3": {"schema": json.dumps(ORDER), "references": [
            {"name": "shop.Address", "subject": "address", "version": 1}]},
        "/subjects/address/versions/1": {"subject": "address", "version": 1, "id": 1, "schema": json.dumps(ADDRESS)},
        "/schemas/ids/3/versions": [{"subject": "orders-value", "version": 2}],
        "/schemas/ids/5": {"schemaType": "JSON", "schema": json.dumps({"type": "object"})},
        "/schemas/ids/5/versions": [{"subject": "orders-key", "version": 1}],
        "/schemas/ids/6": {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3"; ...', "references": [
            {"name": "common/money.proto", "subject": "money", "version": 1}]},
        "/schemas/ids/6?format=serialized": {"schemaType": "PROTOBUF", "schema": b64(shop_file()), "references": [
            {"name": "common/money.proto", "subject": "money", "version": 1}]},
        "/subjects/money/versions/1?format=serialized": {"subject": "money", "version": 1, "id": 2,
                                                         "schemaType": "PROTOBUF", "schema": b64(money_file())},
        "/schemas/ids/6/versions": [{"subject": "orders-pb-value", "version": 1}],
        "/schemas/ids/7": {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3"; message M {}'},
    }


def test_the_browser_decodes_through_the_registry():
    client = FakeRegistryClient(registry_answers())
    registry = ConsoleRegistry("unused", client=client)
    records = [Record(0, 1000, framed(5, b'"k-1"'), framed(3, order_avro()), ()),
               Record(1, 1001, b"plain", framed(6, b"\x02\x02" + order_protobuf()), ()),
               Record(2, 1002, None, framed(3, b"\x02"), ()),  # truncated Avro
               Record(3, 1003, None, framed(99, b"{}"), ()),  # an id the registry does not know
               Record(4, 1004, None, framed(7, b"\x00"), ()),  # Protobuf as .proto text only
               Record(5, 1005, None, b'{"plain": true}', ())]
    query = browse.parse_query("orders", {"mode": "earliest"})
    views = browse.select(query, {0: records}, registry.decoder("orders"))
    key, value = views[0].key, views[0].value
    assert (key.kind, key.label, json.loads(key.text)) == ("json", "JSON Schema · schema id 5 · subject orders-key v1",
                                                           "k-1")
    assert value.label == "Avro · schema id 3 · subject orders-value v2"
    assert json.loads(value.text)["ship_to"] == {"city": "Oslo", "zip": "0150"}
    assert views[1].key == browse.show(b"plain")
    assert views[1].value.label == "Protobuf · shop.Order · schema id 6 · subject orders-pb-value v1"
    assert json.loads(views[1].value.text)["total"] == {"currency": "EUR", "cents": "1999"}
    assert views[2].value.kind == "hex" and views[2].value.note.startswith("Avro schema id 3: not Avro")
    assert views[3].value.note.startswith("schema id 99: error_code 40403")
    assert "serialized descriptor" in views[4].value.note and views[4].value.kind == "hex"
    assert views[5].value.kind == "json" and not views[5].value.label and not views[5].value.note
    # "hex" and "text" show the bytes as they are
    hexed = browse.select(browse.parse_query("orders", {"mode": "earliest", "format": "hex"}), {0: records[:1]},
                          registry.decoder("orders"))
    assert hexed[0].value.kind == "hex" and not hexed[0].value.label
    # each id fetched once (ids are immutable), the next browse too
    before = len(client.calls)
    browse.select(query, {0: records[:2]}, registry.decoder("orders"))
    assert len(client.calls) == before
    assert client.calls.count("/schemas/ids/3") == 1


def test_an_unanswering_registry_is_asked_once_per_browse():
    client = FakeRegistryClient({"/schemas/ids/3": RegistryUnavailable("cannot reach the schema registry")})
    decoder = Decoder(ConsoleRegistry("unused", client=client), "orders")
    for _ in range(3):
        assert decoder(framed(3, b""), False) == "schema id 3: cannot reach the schema registry"
    assert decoder(b"no header", False) is None
    assert client.calls == ["/schemas/ids/3"]


def test_the_cache_is_bounded():
    answers = {f"/schemas/ids/{i}": {"schemaType": "JSON", "schema": "{}"} for i in range(10)}
    client = FakeRegistryClient(answers)
    registry = ConsoleRegistry("unused", client=client, cache_size=3)
    for i in range(10):
        registry.prepared(i)
    assert len(registry._cache) == 3 and list(registry._cache) == [7, 8, 9]


def test_schemas_pages():
    answers = {
        "/subjects": ["orders-value", "gone"],
        "/config": {"compatibilityLevel": "BACKWARD"},
        "/mode": {"mode": "READWRITE"},
        "/subjects/orders-value/versions/latest": {"subject": "orders-value", "version": 2, "id": 3,
                                                   "schema": json.dumps(ORDER)},
        "/config/orders-value": {"compatibilityLevel": "FULL"},
        "/subjects/gone/versions/latest": RegistryErrorResponse(404, 40401, "Subject 'gone' not found."),
        "/subjects/orders-value/versions": [1, 2],
        "/subjects/orders-value/versions/1": {"subject": "orders-value", "version": 1, "id": 1,
                                              "schemaType": "JSON", "schema": '{"type":"object"}'},
        "/subjects/orders-value/versions/2": {"subject": "orders-value", "version": 2, "id": 3,
                                              "schema": json.dumps(ORDER), "references": [
                                                  {"name": "shop.Address", "subject": "address", "version": 1}]},
        "/mode/orders-value": RegistryErrorResponse(404, 40409, "Subject mode not configured"),
    }
    registry = ConsoleRegistry("unused", client=FakeRegistryClient(answers))
    page = registry.subjects()
    assert page.compatibility == schemas.Setting("BACKWARD", False) and page.mode.value == "READWRITE"
    gone, orders = page.rows
    assert gone.error and "not found" in gone.error
    assert (orders.version, orders.schema_id, orders.schema_type, orders.compatibility) == (
        2, 3, "AVRO", schemas.Setting("FULL", False))
    detail = registry.subject("orders-value", None)
    assert [(v.version, v.schema_id, v.schema_type) for v in detail.versions] == [(2, 3, "AVRO"), (1, 1, "JSON")]
    assert detail.selected.version == 2 and detail.selected.references == (("shop.Address", "address", 1),)
    assert json.loads(detail.selected.text) == ORDER and "\n  " in detail.selected.text
    assert detail.compatibility == schemas.Setting("FULL", False)
    assert detail.mode == schemas.Setting("READWRITE", True)
    assert registry.subject("orders-value", 1).selected.schema_type == "JSON"


def test_the_command_options(monkeypatch, capsys):
    """--schema-registry-url (else $KBROKER_SCHEMA_REGISTRY_URL) and its basic auth reach the app
    as a ConsoleRegistry; a URL or credentials that cannot work are usage errors (exit 2)."""
    import uvicorn

    from kbroker import cli
    from kbroker.console import app

    made = []
    monkeypatch.setattr(app, "create_app", lambda *a, **kw: made.append(kw["registry"]) or "app")
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: None)
    monkeypatch.delenv("KBROKER_SCHEMA_REGISTRY_URL", raising=False)
    monkeypatch.delenv("KBROKER_SCHEMA_REGISTRY_BASIC_AUTH", raising=False)
    assert cli.main(["console", "--port", "0"]) == 0 and made == [None]
    assert cli.main(["console", "--schema-registry-url", "http://reg.test:8081/prefix",
                     "--schema-registry-basic-auth", "u:p"]) == 0
    assert made[-1].url == "http://reg.test:8081/prefix" and made[-1].client.headers["Authorization"] == "Basic dTpw"
    monkeypatch.setenv("KBROKER_SCHEMA_REGISTRY_URL", "http://env.test:1")
    assert cli.main(["console"]) == 0 and made[-1].url == "http://env.test:1"
    monkeypatch.delenv("KBROKER_SCHEMA_REGISTRY_URL")
    capsys.readouterr()
    for argv, why in ((["--schema-registry-url", "ftp://x"], "--schema-registry-url must be http"),
                      (["--schema-registry-basic-auth", "u:p"], "needs --schema-registry-url"),
                      (["--schema-registry-url", "http://h:1", "--schema-registry-basic-auth", "nocolon"],
                       "--schema-registry-basic-auth takes USER:PASSWORD")):
        assert cli.main(["console", *argv]) == 2, argv
        assert why in capsys.readouterr().err
    assert len(made) == 3
