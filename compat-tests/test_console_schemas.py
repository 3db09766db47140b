"""`kbroker console --schema-registry-url` against a real broker serving the schema registry
(`schema.registry.listener`): records written by confluent-kafka's own AvroSerializer (a decimal,
an enum, a named type from a referenced subject; Avro string keys), JSONSerializer and
ProtobufSerializer (a nested type, an import as a reference, the message indexes) are shown
decoded in the message browser with their schema id, subject and version; a record whose schema
id the registry does not know is shown as bytes with the reason; the Schemas pages list the
subjects with their latest version, type and compatibility level (the subject's own, or the
global one marked as such), and a subject's versions, schema and mode. Without the option the
console is as before. One check in headless Chromium, with a screenshot."""

from __future__ import annotations

import html
import json
import re
import struct
import urllib.error
import urllib.request

import pytest

import consolekit
from conftest import free_port

pytest.importorskip("confluent_kafka.schema_registry.avro")
pytestmark = pytest.mark.timeout(180)

REGISTRY_URL = f"http://127.0.0.1:{free_port()}"
KBROKER_OVERRIDES = {"schema.registry.listener": REGISTRY_URL}
PARCELS = "parcels"
PROTO_FILE = "kbroker/console/parcel.proto"
COMMON_FILE = "kbroker/console/common.proto"


def registry_call(method: str, path: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(REGISTRY_URL + path, data=data, method=method,
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def parcel_classes():
    """Message classes built from FileDescriptorProtos (no protoc): Parcel (with a nested Item)
    after a Label message, importing Weight from another file."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    common = descriptor_pb2.FileDescriptorProto(name=COMMON_FILE, package="kbroker.console.common", syntax="proto3")
    weight = common.message_type.add(name="Weight")
    weight.field.add(name="grams", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, json_name="grams")
    parcel_file = descriptor_pb2.FileDescriptorProto(name=PROTO_FILE, package="kbroker.console.parcels",
                                                     syntax="proto3", dependency=[COMMON_FILE])
    parcel_file.message_type.add(name="Label").field.add(name="text", number=1, type=F.TYPE_STRING,
                                                         label=F.LABEL_OPTIONAL, json_name="text")
    parcel = parcel_file.message_type.add(name="Parcel")
    parcel.field.add(name="parcel_id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="parcelId")
    parcel.field.add(name="weight", number=2, type=F.TYPE_MESSAGE, type_name=".kbroker.console.common.Weight",
                     label=F.LABEL_OPTIONAL, json_name="weight")
    item = parcel.nested_type.add(name="Item")
    item.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, json_name="sku")
    parcel.field.add(name="items", number=3, type=F.TYPE_MESSAGE, type_name=".kbroker.console.parcels.Parcel.Item",
                     label=F.LABEL_REPEATED, json_name="items")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(parcel_file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kbroker.console.parcels.Parcel"))


def produce_parcels(bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    Parcel = parcel_classes()
    serializer = ProtobufSerializer(Parcel, SchemaRegistryClient({"url": REGISTRY_URL}),
                                    {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(2):
        msg = Parcel(parcel_id=f"pcl-{i}")
        msg.weight.grams = 250 * (i + 1)
        msg.items.add(sku=f"sku-{i}")
        producer.produce(PARCELS, value=serializer(msg, SerializationContext(PARCELS, MessageField.VALUE)))
    # a record in the wire format whose schema id the registry does not know
    producer.produce(PARCELS, key=b"stray", value=b"\x00" + struct.pack(">I", 987654) + b"\x00\x01")
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def console(kbroker, tmp_path_factory):
    consolekit.produce_schema_records(kbroker.bootstrap, REGISTRY_URL)
    produce_parcels(kbroker.bootstrap)
    registry_call("PUT", "/config/payments-value", {"compatibility": "FULL"})
    c = consolekit.Console(kbroker.bootstrap, tmp_path_factory.mktemp("console-schemas"),
                           extra_args=("--schema-registry-url", REGISTRY_URL))
    yield c
    c.stop()


get = consolekit.get


def schema_id(subject: str, version: int = 1) -> int:
    return registry_call("GET", f"/subjects/{subject}/versions/{version}")["id"]


def cells(body: str) -> list[str]:
    """The text of each decoded key or value (label, then JSON) of a messages page, unescaped."""
    return [html.unescape(re.sub(r"<[^>]+>", "", m)) for m in
            re.findall(r'<td class="(?:key|value)">(.*?)</td>', body, re.S)]


def test_avro_values_and_keys_decoded(console):
    status, body = get(console, "/topics/payments/messages?mode=earliest")
    assert status == 200, body[:500]
    value_label = f"Avro · schema id {schema_id('payments-value')} · subject payments-value v1"
    key_label = f"Avro · schema id {schema_id('payments-key')} · subject payments-key v1"
    shown = cells(body)
    keys, values = shown[0::2], shown[1::2]
    assert len(values) == len(consolekit.payments())
    for i, (key, value) in enumerate(zip(keys, values)):
        assert key.strip().startswith(key_label) and f'"order-{i}"' in key
        assert value.strip().startswith(value_label), value[:300]
        decoded = json.loads(value[value.index("{"):])
        expected = consolekit.payments()[i]
        assert decoded == {**expected, "amount": str(expected["amount"])}
    assert "<script>alert(1)</script>" not in body  # decoded contents are escaped like any other
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_json_schema_values_decoded(console):
    _status, body = get(console, "/topics/shipments/messages?mode=earliest")
    shown = cells(body)
    label = f"JSON Schema · schema id {schema_id('shipments-value')} · subject shipments-value v1"
    values = shown[1::2]
    assert [json.loads(v[v.index("{"):]) for v in values] == consolekit.shipments()
    assert all(v.strip().startswith(label) for v in values)
    assert "order-0" in shown[0] and "schema id" not in shown[0]  # plain-text keys as before


def test_protobuf_values_decoded_and_an_unknown_id_explained(console):
    _status, body = get(console, f"/topics/{PARCELS}/messages?mode=earliest")
    values = cells(body)[1::2]
    label = f"Protobuf · kbroker.console.parcels.Parcel · schema id {schema_id('parcels-value')} · " \
            "subject parcels-value v1"
    for i, value in enumerate(values[:2]):
        assert value.strip().startswith(label), value[:300]
        assert json.loads(value[value.index("{"):]) == {"parcel_id": f"pcl-{i}", "weight": {"grams": 250 * (i + 1)},
                                                         "items": [{"sku": f"sku-{i}"}]}
    stray = values[2]
    assert "not decoded: schema id 987654: error_code 40403" in stray and "00000000  00 00 0f 12 06" in stray


def test_schemas_page_lists_subjects(console):
    status, body = get(console, "/schemas")
    assert status == 200 and 'href="/schemas"' in body
    rows = {m.group(1): html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", m.group(2)))).strip()
            for m in re.finditer(r'<tr data-subject="([^"]+)">(.*?)</tr>', body, re.S)}
    assert set(rows) == {"payments-value", "payments-key", "shipments-value", "shop.Address", "parcels-value",
                         "kbroker/console/common.proto"}
    assert rows["payments-value"] == f"payments-value 1 {schema_id('payments-value')} Avro FULL"
    assert rows["shipments-value"] == f"shipments-value 1 {schema_id('shipments-value')} JSON Schema BACKWARD global"
    assert rows["parcels-value"].endswith("Protobuf BACKWARD global")
    assert 'id="global-compatibility">BACKWARD' in body
    status, fragment = get(console, "/_live/schemas")
    assert status == 200 and "payments-value" in fragment and "<html" not in fragment


def test_subject_page(console):
    status, body = get(console, "/schemas/payments-value")
    assert status == 200, body[:500]
    text = html.unescape(body)
    assert re.search(r'<tr data-version="1" class="selected">', body)
    assert f"Version 1 · schema id {schema_id('payments-value')} · Avro" in text
    assert 'References: shop.Address → ' in text and 'href="/schemas/shop.Address?version=1"' in body
    schema_text = text[text.index('<pre class="schema-text">') + 25:text.index("</pre>", text.index("schema-text"))]
    assert json.loads(schema_text) == consolekit.PAYMENT_SCHEMA and '\n  "fields"' in schema_text
    assert re.search(r'id="compatibility">FULL\s*</dd>', body)  # its own: not marked global
    assert re.search(r'id="mode">READWRITE <span class="badge"[^>]*>global</span>', body)
    status, body = get(console, "/schemas/kbroker/console/common.proto")  # a subject with slashes
    assert status == 200 and "PROTOBUF" not in body and "Protobuf" in body and "message Weight" in body
    assert get(console, "/schemas/payments-value?version=x")[0] == 400
    status, body = get(console, "/schemas/no-such-subject")
    assert status == 502 and "error_code 40401" in body


def test_without_a_registry_the_console_is_as_before(kbroker, console, tmp_path):
    plain = consolekit.Console(kbroker.bootstrap, tmp_path)
    try:
        status, body = get(plain, "/topics/payments/messages?mode=earliest")
        assert status == 200 and "schema id" not in body and "not decoded" not in body
        assert '<pre class="hex">' in body and 'href="/schemas"' not in body
        assert get(plain, "/schemas")[0] == 404
    finally:
        plain.stop()


def test_in_a_browser(console, tmp_path_factory):
    artifacts = consolekit.artifacts_dir(tmp_path_factory)
    driver = consolekit.chrome(tmp_path_factory.mktemp("chromium-profile"))
    try:
        driver.get(console.url + "/topics/payments/messages?mode=earliest&limit=3")
        labels = driver.find_elements("css selector", "td.value .kind.decoded")
        assert len(labels) == 3 and labels[0].text.startswith("AVRO · SCHEMA ID") is False
        assert labels[0].text.startswith("Avro · schema id")
        first = driver.find_element("css selector", "td.value pre.decoded").text
        assert json.loads(first)["bill_to"] == {"city": "Oslo", "zip": "00150"}
        consolekit.screenshot(driver, artifacts, "schemas-messages")
        driver.find_element("link text", "Schemas").click()
        row = driver.find_element("css selector", 'tr[data-subject="payments-value"]')
        row.find_element("link text", "payments-value").click()
        assert "Version 1" in driver.find_element("css selector", "#schema h2").text
        consolekit.screenshot(driver, artifacts, "schemas-subject")
    finally:
        driver.quit()
