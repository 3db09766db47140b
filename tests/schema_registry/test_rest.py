"""The REST API as a pure function (schema_registry/rest.py) over a real state with the real
parsers: routing, content negotiation, which requests are writes, the records a write appends,
and Kafka ACLs mapped onto subjects (access.py) — refusals and filtered listings."""

from __future__ import annotations

import json

import pytest

from kbroker.schema_registry import access, formats
from kbroker.schema_registry.rest import HttpRequest, HttpResponse, Write, handle, may_write, negotiate
from kbroker.schema_registry.state import RegistryState

AVRO = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
CT = "application/vnd.schemaregistry.v1+json"


def _state() -> RegistryState:
    return RegistryState(formats.parse, formats.check)


def _do(state, method, path, body=None, query="", may=None, accept=None) -> HttpResponse:
    request = HttpRequest(method, path, query, json.dumps(body).encode() if body is not None else b"",
                          CT if body is not None else None, accept)
    answer = handle(state, request, may, "User:alice")
    if isinstance(answer, Write):
        for key, value in answer.decision.records:
            state.apply(key, value)
        answer = answer.render(answer.decision.answer)
    return answer


def _json(response: HttpResponse):
    return response.status, json.loads(response.body)


def test_register_then_read_every_way():
    state = _state()
    assert _json(_do(state, "POST", "/subjects/orders-value/versions", {"schema": AVRO})) == (200, {"id": 1})
    assert _json(_do(state, "GET", "/subjects")) == (200, ["orders-value"])
    assert _json(_do(state, "GET", "/subjects/orders-value/versions")) == (200, [1])
    status, body = _json(_do(state, "GET", "/subjects/orders-value/versions/latest"))
    assert (status, body["id"], body["version"], "schemaType" in body) == (200, 1, 1, False)
    assert _do(state, "GET", "/schemas/ids/1/schema").body == json.dumps(json.loads(AVRO), separators=(",", ":")).encode()
    assert _json(_do(state, "GET", "/schemas/ids/1/versions")) == (200, [{"subject": "orders-value", "version": 1}])
    assert _json(_do(state, "POST", "/subjects/orders-value", {"schema": AVRO}))[1]["version"] == 1
    assert _json(_do(state, "GET", "/schemas/ids/1", query="fetchMaxId=true"))[1]["maxId"] == 1
    # a subject with a slash, percent-encoded in the path
    assert _json(_do(state, "POST", "/subjects/a%2Fb/versions", {"schema": AVRO})) == (200, {"id": 1})
    assert "a/b" in _json(_do(state, "GET", "/subjects"))[1]


@pytest.mark.parametrize("method, path, body, status, code", [
    ("GET", "/subjects/nope/versions", None, 404, 40401),
    ("GET", "/schemas/ids/7", None, 404, 40403),
    ("GET", "/schemas/ids/x", None, 404, 40403),
    ("GET", "/subjects/s/versions/0", None, 422, 42202),
    ("POST", "/subjects/s/versions", {"schema": "{"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": AVRO, "schemaType": "XML"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": AVRO, "ruleSet": {"domainRules": []}}, 200, None),
    ("POST", "/subjects/s/versions", {"schema": AVRO, "metadata": {"properties": {"a": "b"}}}, 422, 42201),
    ("POST", "/subjects/s/versions", {}, 422, 42201),
    ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("PUT", "/mode", {"mode": "WRITEONLY"}, 422, 42204),
    ("PATCH", "/subjects", None, 405, 405),
    ("GET", "/nowhere", None, 404, 404),
    ("DELETE", "/schemas/types", None, 405, 405),
])
def test_confluent_error_bodies(method, path, body, status, code):
    answer = _do(_state(), method, path, body)
    assert answer.status == status
    if code is not None:
        assert json.loads(answer.body)["error_code"] == code


def test_content_types():
    state = _state()
    assert negotiate(None) == CT
    assert negotiate("application/json") == "application/json"
    assert negotiate("text/html, application/vnd.schemaregistry+json;q=0.5") == "application/vnd.schemaregistry+json"
    assert negotiate("text/html") is None
    assert negotiate("*/*") == CT
    assert _do(state, "GET", "/subjects", accept="text/html").status == 406
    bad = handle(state, HttpRequest("POST", "/subjects/s/versions", "", b"{}", "text/plain"))
    assert bad.status == 415
    not_json = handle(state, HttpRequest("POST", "/subjects/s/versions", "", b"{nope", "application/json"))
    assert not_json.status == 400
    deep = handle(state, HttpRequest("POST", "/subjects/s/versions", "", b'{"a":' * 100 + b"1" + b"}" * 100,
                                     "application/json"))
    assert deep.status in (400, 422)


@pytest.mark.parametrize("method, path, write", [
    ("POST", "/subjects/s/versions", True), ("POST", "/subjects/s", False),
    ("POST", "/compatibility/subjects/s/versions", False), ("POST", "/compatibility/subjects/s/versions/1", False),
    ("PUT", "/config", True), ("DELETE", "/subjects/s", True), ("GET", "/subjects/s/versions", False),
])
def test_which_requests_may_write(method, path, write):
    assert may_write(HttpRequest(method, path)) is write


def test_a_read_never_answers_with_a_write():
    state = _state()
    _do(state, "POST", "/subjects/s-value/versions", {"schema": AVRO})
    for method, path, body in (("GET", "/subjects", None), ("POST", "/subjects/s-value", {"schema": AVRO}),
                               ("POST", "/compatibility/subjects/s-value/versions/latest", {"schema": AVRO})):
        assert not isinstance(handle(state, HttpRequest(method, path, "", json.dumps(body or {}).encode(), CT)),
                              Write)


def test_acls_map_subjects_to_topics():
    assert access.topic_of("orders-value") == "orders" and access.topic_of("orders-key") == "orders"
    assert access.topic_of("com.acme.Order") == "com.acme.Order" and access.topic_of("-value") == "-value"
    state = _state()
    _do(state, "POST", "/subjects/team-a.orders-value/versions", {"schema": AVRO})
    _do(state, "POST", "/subjects/team-b.pay-value/versions", {"schema": AVRO.replace('"R"', '"P"')})
    granted = {("WRITE", "TOPIC", "team-a.orders"), ("DESCRIBE", "TOPIC", "team-a.orders")}
    asked: list[tuple[str, str, str]] = []

    def may(operation, resource_type, name):
        asked.append((operation, resource_type, name))
        return (operation, resource_type, name) in granted

    assert _json(_do(state, "GET", "/subjects", may=may)) == (200, ["team-a.orders-value"])
    status, body = _json(_do(state, "POST", "/subjects/team-b.pay-value/versions", {"schema": AVRO}, may=may))
    assert (status, body["error_code"]) == (403, 40301)
    assert body["message"] == "User User:alice is denied operation WRITE on Subject: team-b.pay-value"
    assert _do(state, "GET", "/schemas/ids/2", may=may).status == 403  # used by team-b's subject only
    assert _do(state, "GET", "/schemas/ids/1", may=may).status == 200
    assert _json(_do(state, "DELETE", "/subjects/team-a.orders-value", may=may))[0] == 403
    assert _json(_do(state, "PUT", "/config", {"compatibility": "NONE"}, may=may))[0] == 403
    assert ("ALTER_CONFIGS", "CLUSTER", "kafka-cluster") in asked
    assert _do(state, "GET", "/config", may=may).status == 200  # the global level needs nothing
