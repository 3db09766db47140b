"""The schema registry built into the broker (`schema.registry.listener`), driven by
confluent-kafka's own SchemaRegistryClient and its Avro and JSON Schema serializers, unchanged:
records produced through kbroker with schemas registered in kbroker, read back and decoded,
evolution under a compatibility level, refusals with Confluent's codes, and the state surviving a
restart (ids stable)."""

from __future__ import annotations

import json
import socket
import struct

import pytest
import registrykit as rk
from conftest import topic_name, wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

REGISTRY_URL = rk.registry_url()
REGISTRY_PORT = int(REGISTRY_URL.rsplit(":", 1)[1])
KBROKER_OVERRIDES = {"schema.registry.listener": REGISTRY_URL}

USER_V1 = {"type": "record", "name": "User", "namespace": "com.example",
           "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "int"}]}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "email", "type": ["null", "string"], "default": None}]}
USER_BAD = {**USER_V1, "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": "string"}]}


@pytest.fixture(scope="module")
def registry(kbroker):
    rk.wait_ready(REGISTRY_URL)
    return SchemaRegistryClient({"url": REGISTRY_URL})












def test_avro_serializers_register_and_read_back_through_kbroker(kbroker, registry):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    topic = topic_name("sr-avro")
    users = [{"name": f"user-{i}", "favorite": i} for i in range(20)]
    rk.produce(kbroker.bootstrap, topic, AvroSerializer(registry, json.dumps(USER_V1)), users)
    latest = registry.get_latest_version(f"{topic}-value")
    assert latest.version == 1
    raw = rk.consume(kbroker.bootstrap, topic, len(users))
    magic, schema_id = struct.unpack(">bI", raw[0][:5])
    assert (magic, schema_id) == (0, latest.schema_id)  # Confluent's wire format, the id kbroker gave
    decode = AvroDeserializer(SchemaRegistryClient({"url": REGISTRY_URL}))  # a fresh client: fetched by id
    assert [decode(v, SerializationContext(topic, MessageField.VALUE)) for v in raw] == users

    # evolution: a compatible second version, then records of both read with the new reader schema
    v2_users = [{"name": "late", "favorite": 7, "email": "late@example.com"}]
    rk.produce(kbroker.bootstrap, topic, AvroSerializer(registry, json.dumps(USER_V2)), v2_users)
    assert registry.get_versions(f"{topic}-value") == [1, 2]
    reader = AvroDeserializer(SchemaRegistryClient({"url": REGISTRY_URL}), json.dumps(USER_V2))
    decoded = [reader(v, SerializationContext(topic, MessageField.VALUE)) for v in rk.consume(kbroker.bootstrap, topic, 21)]
    assert decoded[:20] == [{**u, "email": None} for u in users]
    assert decoded[20] == v2_users[0]

    # an incompatible change is refused (409), and nothing is registered
    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(registry, json.dumps(USER_BAD))(users[0], SerializationContext(topic, MessageField.VALUE))
    assert refused.value.http_status_code == 409
    assert registry.get_versions(f"{topic}-value") == [1, 2]


def test_json_schema_serializers_register_and_read_back(kbroker, registry):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
              "required": ["id", "item"], "additionalProperties": False}
    topic = topic_name("sr-json")
    orders = [{"id": i, "item": f"thing-{i}"} for i in range(10)]
    rk.produce(kbroker.bootstrap, topic, JSONSerializer(json.dumps(schema), registry), orders)
    version = registry.get_latest_version(f"{topic}-value")
    assert version.schema.schema_type == "JSON"
    decode = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": REGISTRY_URL}))
    got = [decode(v, SerializationContext(topic, MessageField.VALUE)) for v in rk.consume(kbroker.bootstrap, topic, 10)]
    assert got == orders
    # a record the schema refuses never leaves the serializer
    from confluent_kafka.serialization import SerializationError
    with pytest.raises(SerializationError):
        JSONSerializer(json.dumps(schema), registry)({"id": "x"}, SerializationContext(topic, MessageField.VALUE))


def test_subjects_versions_ids_and_deletes(registry):
    subject = "sr-admin-value"
    v1 = registry.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    v2 = registry.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert v2 > v1
    # the same schema under another subject keeps its id
    assert registry.register_schema("sr-admin-other", Schema(json.dumps(USER_V1), "AVRO")) == v1
    assert sorted(registry.get_subjects()) == sorted(set(registry.get_subjects()))
    assert {"sr-admin-value", "sr-admin-other"} <= set(registry.get_subjects())
    found = registry.lookup_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert (found.version, found.schema_id) == (2, v2)

    assert registry.delete_version(subject, 1) == 1  # soft
    assert registry.get_versions(subject) == [2]
    with pytest.raises(SchemaRegistryError) as gone:
        registry.get_version(subject, 1)
    assert gone.value.error_code == 40402
    assert registry.delete_subject(subject) == [2]
    with pytest.raises(SchemaRegistryError) as soft:
        registry.delete_subject(subject)
    assert soft.value.error_code == 40404
    assert registry.delete_subject(subject, permanent=True) == [1, 2]
    assert subject not in registry.get_subjects()
    # an id stays readable while another subject uses it
    assert json.loads(registry.get_schema(v1).schema_str) == USER_V1


def test_compatibility_levels_and_modes(registry):
    subject = "sr-levels-value"
    registry.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert registry.test_compatibility(subject, Schema(json.dumps(USER_BAD), "AVRO")) is False
    assert registry.set_compatibility(subject, "NONE") == {"compatibility": "NONE"}
    assert registry.get_compatibility(subject) == "NONE"
    registry.register_schema(subject, Schema(json.dumps(USER_BAD), "AVRO"))  # allowed under NONE
    assert registry.get_versions(subject) == [1, 2]

    assert registry.update_mode(subject, "READONLY") == "READONLY"
    with pytest.raises(SchemaRegistryError) as readonly:
        registry.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert readonly.value.error_code == 42205
    assert registry.delete_mode(subject) == "READONLY"
    # the subject's own mode is gone; the global one applies again
    status, _, body = rk.http(REGISTRY_URL, "GET", f"/mode/{subject}")
    assert (status, json.loads(body)["error_code"]) == (404, 40409)


def test_errors_content_types_and_bad_input(registry):
    status, ctype, body = rk.http(REGISTRY_URL, "GET", "/subjects/nope/versions")
    assert (status, ctype) == (404, "application/vnd.schemaregistry.v1+json")
    assert json.loads(body) == {"error_code": 40401, "message": "Subject 'nope' not found."}
    status, _, body = rk.http(REGISTRY_URL, "POST", "/subjects/bad-value/versions", b'{"schema": "{\\"type\\": \\"nope\\"}"}')
    assert (status, json.loads(body)["error_code"]) == (422, 42201)
    status, _, body = rk.http(REGISTRY_URL, "POST", "/subjects/bad-value/versions", b"{not json")
    assert status == 400
    status, _, _ = rk.http(REGISTRY_URL, "POST", "/subjects/bad-value/versions", b"{}", content_type="text/plain")
    assert status == 415
    status, _, _ = rk.http(REGISTRY_URL, "GET", "/subjects", accept="text/html")
    assert status == 406
    status, ctype, _ = rk.http(REGISTRY_URL, "GET", "/subjects", accept="application/json")
    assert (status, ctype) == (200, "application/json")
    status, _, body = rk.http(REGISTRY_URL, "GET", "/schemas/ids/999999")
    assert (status, json.loads(body)["error_code"]) == (404, 40403)
    status, _, body = rk.http(REGISTRY_URL, "GET", "/subjects/x/versions/0")
    assert (status, json.loads(body)["error_code"]) == (422, 42202)
    status, _, _ = rk.http(REGISTRY_URL, "PATCH", "/subjects")
    assert status == 405
    # a body over schema.registry.max.request.bytes (8 MiB) is refused before it is read
    with socket.create_connection(("127.0.0.1", REGISTRY_PORT), timeout=10) as sock:
        sock.sendall(b"POST /subjects/big-value/versions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 9437184\r\n\r\n")
        assert sock.recv(64).startswith(b"HTTP/1.1 413 ")  # answered before a byte of the body was sent
    assert json.loads(rk.http(REGISTRY_URL, "GET", "/schemas/types")[2]) == ["JSON", "PROTOBUF", "AVRO"]


def test_ids_survive_a_restart(kbroker, registry):
    subject = "sr-restart-value"
    schema_id = registry.register_schema(subject, Schema(json.dumps({**USER_V1, "name": "Restarted"}), "AVRO"))
    kbroker.restart()
    wait_until(lambda: rk.get(REGISTRY_URL, f"/schemas/ids/{schema_id}") is not None, 60, "the registry after a restart")
    fresh = SchemaRegistryClient({"url": REGISTRY_URL})
    assert json.loads(fresh.get_schema(schema_id).schema_str)["name"] == "Restarted"
    # a new schema gets a new id, never one handed out before the restart
    other = fresh.register_schema("sr-restart-2", Schema(json.dumps({**USER_V1, "name": "After"}), "AVRO"))
    assert other > schema_id


# Confluent's documented rules (Schema Evolution and Compatibility, the summary table): which
# change each level allows, checked on a subject whose version 1 is V1.
V1 = {"type": "record", "name": "Evolving", "fields": [{"name": "a", "type": "int"},
                                                       {"name": "b", "type": "string", "default": "x"}]}
CHANGES = {
    "add optional field": {**V1, "fields": V1["fields"] + [{"name": "c", "type": "int", "default": 0}]},
    "add required field": {**V1, "fields": V1["fields"] + [{"name": "c", "type": "int"}]},
    "delete optional field": {**V1, "fields": V1["fields"][:1]},
    "delete required field": {**V1, "fields": V1["fields"][1:]},
    "promote int to long": {**V1, "fields": [{"name": "a", "type": "long"}, V1["fields"][1]]},
}
ALLOWED = {  # change -> the levels that accept it
    "add optional field": {"BACKWARD", "FORWARD", "FULL", "NONE"},
    "add required field": {"FORWARD", "NONE"},
    "delete optional field": {"BACKWARD", "FORWARD", "FULL", "NONE"},
    "delete required field": {"BACKWARD", "NONE"},
    "promote int to long": {"BACKWARD", "NONE"},
}


@pytest.mark.parametrize("level", ["BACKWARD", "FORWARD", "FULL", "NONE"])
def test_each_level_accepts_and_refuses_what_confluent_documents(registry, level):
    for n, (change, schema) in enumerate(CHANGES.items()):
        subject = f"levels-{level.lower()}-{n}"
        registry.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
        registry.set_compatibility(subject, level)
        expected = level in ALLOWED[change]
        assert registry.test_compatibility(subject, Schema(json.dumps(schema), "AVRO")) is expected, (level, change)
        if expected:
            assert registry.register_schema(subject, Schema(json.dumps(schema), "AVRO")) >= 1
            assert registry.get_versions(subject) == [1, 2]
        else:
            with pytest.raises(SchemaRegistryError) as refused:
                registry.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
            assert refused.value.http_status_code == 409
            assert registry.get_versions(subject) == [1]


def _record(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "T", "fields": list(fields)})


@pytest.mark.parametrize("level, history, candidate", [
    # the new reader has b without a default: reads version 2's data (which has b), not version 1's
    ("BACKWARD", [_record({"name": "a", "type": "int"}),
                  _record({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1})],
     _record({"name": "a", "type": "int"}, {"name": "b", "type": "int"})),
    # version 2's reader has a default for b, version 1's has none: only version 2 reads data without b
    ("FORWARD", [_record({"name": "a", "type": "int"}, {"name": "b", "type": "int"}),
                 _record({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 1})],
     _record({"name": "a", "type": "int"})),
])
def test_transitive_levels_check_every_earlier_version(registry, level, history, candidate):
    for transitive in (False, True):
        subject = f"transitive-{level.lower()}-{transitive}"
        registry.set_compatibility(subject, "NONE")
        for text in history:
            registry.register_schema(subject, Schema(text, "AVRO"))
        registry.set_compatibility(subject, level + ("_TRANSITIVE" if transitive else ""))
        # (POST /compatibility/.../versions/latest checks against the latest version only, as Confluent's)
        assert registry.test_compatibility(subject, Schema(candidate, "AVRO")) is True
        if transitive:
            with pytest.raises(SchemaRegistryError) as refused:
                registry.register_schema(subject, Schema(candidate, "AVRO"))
            assert refused.value.http_status_code == 409
        else:
            assert registry.register_schema(subject, Schema(candidate, "AVRO")) >= 1


def test_references_and_soft_deleted_schemas_coming_back(kbroker, registry):
    from confluent_kafka.schema_registry import SchemaReference
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    address = {"type": "record", "name": "Address", "namespace": "com.example",
               "fields": [{"name": "city", "type": "string"}]}
    person = {"type": "record", "name": "Person", "namespace": "com.example",
              "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "com.example.Address"}]}
    registry.register_schema("address", Schema(json.dumps(address), "AVRO"))
    ref = SchemaReference("com.example.Address", "address", 1)
    topic = topic_name("sr-refs")
    person_id = registry.register_schema(f"{topic}-value", Schema(json.dumps(person), "AVRO", [ref]))
    status, _, body = rk.http(REGISTRY_URL, "GET", "/subjects/address/versions/1/referencedby")
    assert (status, json.loads(body)) == (200, [person_id])
    status, _, body = rk.http(REGISTRY_URL, "DELETE", "/subjects/address/versions/1")
    assert (status, json.loads(body)["error_code"]) == (422, 42206)  # still referenced

    # the serializers resolve the reference through the registry
    serializer = AvroSerializer(registry, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    people = [{"name": "ann", "home": {"city": "Oslo"}}, {"name": "bo", "home": {"city": "Rome"}}]
    rk.produce(kbroker.bootstrap, topic, serializer, people)
    decode = AvroDeserializer(SchemaRegistryClient({"url": REGISTRY_URL}))
    assert [decode(v, SerializationContext(topic, MessageField.VALUE)) for v in rk.consume(kbroker.bootstrap, topic, 2)] == people

    # a soft-deleted schema registered again comes back with its id, under a new version
    subject = "comeback-value"
    first = registry.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    registry.delete_version(subject, 1)
    fresh = SchemaRegistryClient({"url": REGISTRY_URL})  # the first client's cache would not ask again
    assert fresh.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO")) == first
    assert registry.get_versions(subject) == [2]
    # hard-deleted and registered again: an id is never handed to another schema
    registry.delete_subject(subject)
    registry.delete_subject(subject, permanent=True)
    again = fresh.register_schema(subject, Schema(json.dumps({**USER_V1, "name": "Other"}), "AVRO"))
    assert again != first
