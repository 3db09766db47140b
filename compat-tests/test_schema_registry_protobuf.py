"""Protobuf through the registry built into the broker, driven by confluent-kafka's own
ProtobufSerializer and ProtobufDeserializer, unchanged: the serializer registers the schema (and
its import, as a reference) as base64 FileDescriptorProtos, kbroker stores them as .proto text,
records go through kbroker, and a deserializer with a fresh client fetches the writer's schema by
id with `format=serialized`, loads it into a descriptor pool and decodes equal messages.

No protoc here: the message classes are built from a FileDescriptorProto written in Python."""

from __future__ import annotations

import struct
import urllib.error
import urllib.parse
import urllib.request

import pytest

import registrykit as rk
from conftest import topic_name

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("google.protobuf")
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import (
    ProtobufDeserializer,
    ProtobufSerializer,
)
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    timestamp_pb2,
)

REGISTRY_URL = rk.registry_url()
REGISTRY_PORT = int(REGISTRY_URL.rsplit(":", 1)[1])
KBROKER_OVERRIDES = {"schema.registry.listener": REGISTRY_URL}

COMMON_FILE = "kbroker/compat/common.proto"
ORDER_FILE = "kbroker/compat/order.proto"

F = descriptor_pb2.FieldDescriptorProto


def _field(message, name: str, number: int, typ: int, type_name: str = "", label: int = F.LABEL_OPTIONAL,
           json_name: str | None = None, **extra):
    f = message.field.add(name=name, number=number, type=typ, label=label, **extra)
    if type_name:
        f.type_name = type_name
    f.json_name = json_name or name
    return f


def _files() -> tuple[descriptor_pb2.FileDescriptorProto, descriptor_pb2.FileDescriptorProto]:
    common = descriptor_pb2.FileDescriptorProto(name=COMMON_FILE, package="kbroker.compat.common", syntax="proto3")
    money = common.message_type.add(name="Money")
    _field(money, "currency", 1, F.TYPE_STRING)
    _field(money, "units", 2, F.TYPE_INT64)
    status = common.enum_type.add(name="Status")
    for i, name in enumerate(["STATUS_UNSPECIFIED", "NEW", "SHIPPED"]):
        status.value.add(name=name, number=i)

    order_file = descriptor_pb2.FileDescriptorProto(
        name=ORDER_FILE, package="kbroker.compat.orders", syntax="proto3",
        dependency=[COMMON_FILE, "google/protobuf/timestamp.proto"])
    order_file.options.java_package = "com.example.orders"
    order = order_file.message_type.add(name="Order")
    _field(order, "id", 1, F.TYPE_STRING)
    _field(order, "amount", 2, F.TYPE_MESSAGE, ".kbroker.compat.common.Money")
    _field(order, "at", 3, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    _field(order, "lines", 4, F.TYPE_MESSAGE, ".kbroker.compat.orders.Order.Line", F.LABEL_REPEATED)
    _field(order, "tags", 5, F.TYPE_MESSAGE, ".kbroker.compat.orders.Order.TagsEntry", F.LABEL_REPEATED)
    _field(order, "status", 6, F.TYPE_ENUM, ".kbroker.compat.common.Status")
    _field(order, "card", 7, F.TYPE_STRING, oneof_index=0)
    _field(order, "cash", 8, F.TYPE_BOOL, oneof_index=0)
    _field(order, "note", 9, F.TYPE_STRING, oneof_index=1, proto3_optional=True)
    _field(order, "quantities", 10, F.TYPE_SINT32, label=F.LABEL_REPEATED)
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_note")
    line = order.nested_type.add(name="Line")
    _field(line, "sku", 1, F.TYPE_STRING)
    _field(line, "count", 2, F.TYPE_UINT32)
    entry = order.nested_type.add(name="TagsEntry")
    _field(entry, "key", 1, F.TYPE_STRING)
    _field(entry, "value", 2, F.TYPE_INT32)
    entry.options.map_entry = True
    kind = order.enum_type.add(name="Kind")
    kind.value.add(name="KIND_UNSPECIFIED", number=0)
    # a second top-level message: records of it carry message index [1]
    refund = order_file.message_type.add(name="Refund")
    _field(refund, "order_id", 1, F.TYPE_STRING, json_name="orderId")
    _field(refund, "amount", 2, F.TYPE_MESSAGE, ".kbroker.compat.common.Money")
    return common, order_file


def _classes():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    common, order_file = _files()
    pool.Add(common)
    pool.Add(order_file)
    get = message_factory.GetMessageClass
    return (get(pool.FindMessageTypeByName("kbroker.compat.orders.Order")),
            get(pool.FindMessageTypeByName("kbroker.compat.orders.Refund")))


Order, Refund = _classes()


@pytest.fixture(scope="module")
def registry(kbroker):
    rk.wait_ready(REGISTRY_URL)
    return SchemaRegistryClient({"url": REGISTRY_URL})








def _orders(n: int) -> list:
    out = []
    for i in range(n):
        o = Order(id=f"order-{i}", status=1 + i % 2, quantities=[i, -i, 3])
        o.amount.currency = "EUR"
        o.amount.units = 100 * i
        o.at.seconds = 1_700_000_000 + i
        o.at.nanos = i
        o.lines.add(sku=f"sku-{i}", count=i)
        o.tags["n"] = i
        if i % 2:
            o.card = f"card-{i}"
        else:
            o.cash = True
        if i % 3 == 0:
            o.note = ""  # present though empty: proto3 optional
        out.append(o)
    return out


def test_protobuf_serializers_register_and_read_back_through_kbroker(kbroker, registry):
    topic = topic_name("sr-protobuf")
    orders = _orders(12)
    serializer = ProtobufSerializer(Order, registry, {"use.deprecated.format": False})
    rk.produce(kbroker.bootstrap, topic, serializer, orders)

    # the schema and its import (by the default reference subject strategy: the import's path)
    latest = registry.get_latest_version(f"{topic}-value")
    assert latest.version == 1
    assert latest.schema.schema_type == "PROTOBUF"
    text = latest.schema.schema_str
    assert text.startswith('syntax = "proto3";') and "message Order {" in text  # .proto text, not base64
    assert f'import "{COMMON_FILE}";' in text and 'import "google/protobuf/timestamp.proto";' in text
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [(COMMON_FILE, COMMON_FILE, 1)]
    common = registry.get_latest_version(COMMON_FILE)
    assert common.schema.schema_type == "PROTOBUF" and "message Money {" in common.schema.schema_str
    assert registry.get_subjects() and "google/protobuf/timestamp.proto" not in registry.get_subjects()

    raw = rk.consume(kbroker.bootstrap, topic, len(orders))
    magic, schema_id = struct.unpack(">bI", raw[0][:5])
    assert (magic, schema_id) == (0, latest.schema_id)
    assert raw[0][5] == 0  # message indexes [0], written as the single byte 0

    # a fresh client: the deserializer fetches the writer's schema by id with format=serialized
    decode = ProtobufDeserializer(Order, {"use.deprecated.format": False},
                                  SchemaRegistryClient({"url": REGISTRY_URL}))
    decoded = [decode(v, SerializationContext(topic, MessageField.VALUE)) for v in raw]
    assert decoded == orders
    assert decoded[0].HasField("note") and not decoded[1].HasField("note")
    assert decoded[1].WhichOneof("payment") == "card"

    # the same schema sent again is the same id; the second message has message index [1]
    refunds = [Refund(order_id=f"order-{i}") for i in range(3)]
    for r in refunds:
        r.amount.units = -5
    refund_topic = topic_name("sr-protobuf-refund")
    rk.produce(kbroker.bootstrap, refund_topic, ProtobufSerializer(Refund, registry, {"use.deprecated.format": False}), refunds)
    raw_refunds = rk.consume(kbroker.bootstrap, refund_topic, len(refunds))
    assert struct.unpack(">bI", raw_refunds[0][:5])[1] == schema_id
    assert raw_refunds[0][5:7] == b"\x02\x02"  # one index, 1 (zigzag varints)
    decode_refund = ProtobufDeserializer(Refund, {"use.deprecated.format": False},
                                         SchemaRegistryClient({"url": REGISTRY_URL}))
    assert [decode_refund(v, SerializationContext(refund_topic, MessageField.VALUE)) for v in raw_refunds] == refunds


def test_serialized_format_over_http(kbroker, registry):
    """GET .../schemas/ids/{id}?format=serialized answers the base64 FileDescriptorProto; without the
    parameter the stored .proto text."""
    import base64

    topic = topic_name("sr-protobuf-http")
    rk.produce(kbroker.bootstrap, topic, ProtobufSerializer(Order, registry, {"use.deprecated.format": False}), _orders(1))
    latest = registry.get_latest_version(f"{topic}-value")
    plain = rk.get(REGISTRY_URL, f"/schemas/ids/{latest.schema_id}")
    assert plain["schemaType"] == "PROTOBUF" and plain["schema"].startswith('syntax = "proto3";')
    encoded = rk.get(REGISTRY_URL, f"/schemas/ids/{latest.schema_id}?format=serialized")
    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(encoded["schema"], validate=True))
    assert [m.name for m in fd.message_type] == ["Order", "Refund"]
    assert list(fd.dependency) == [COMMON_FILE, "google/protobuf/timestamp.proto"]
    order = fd.message_type[0]
    assert [n.name for n in order.nested_type] == ["Line", "TagsEntry"] and order.nested_type[1].options.map_entry
    subject = urllib.parse.quote(f"{topic}-value", safe="")
    by_version = rk.get(REGISTRY_URL, f"/subjects/{subject}/versions/1?format=serialized")
    assert by_version["schema"] == encoded["schema"]
