"""The Confluent Schema Registry REST API as a pure function: (registry state, HTTP request) → an
HTTP response, or a `Write` — a state decision whose records the I/O shell appends to `_schemas`
before it renders the answer. No sockets, no clock: server/schema_registry_http.py feeds it.

Routes (Confluent's API reference; the resource classes of Confluent's `rest/resources` and
Karapace's `schema_registry_apis.py`):

    GET    /                                       {}
    GET    /schemas/types                          ["JSON", "PROTOBUF", "AVRO"]
    GET    /schemas?subjectPrefix=&deleted=&latestOnly=
    GET    /schemas/ids/{id}[?fetchMaxId=]         {"schema", "schemaType"?, "references"?, "maxId"?}
    GET    /schemas/ids/{id}/schema                the schema text itself
    GET    /schemas/ids/{id}/subjects[?deleted=]   ["subject", ...]
    GET    /schemas/ids/{id}/versions[?deleted=]   [{"subject", "version"}, ...]
    GET    /subjects[?deleted=&subjectPrefix=]     ["subject", ...]
    GET    /subjects/{s}/versions[?deleted=]       [1, 2, ...]
    POST   /subjects/{s}/versions[?normalize=]     {"id"}
    GET    /subjects/{s}/versions/{v}[?deleted=]   {"subject", "version", "id", "schemaType"?, "references"?, "schema"}
    GET    /subjects/{s}/versions/{v}/schema       the schema text itself
    GET    /subjects/{s}/versions/{v}/referencedby [ids]
    DELETE /subjects/{s}/versions/{v}[?permanent=] the version
    POST   /subjects/{s}[?normalize=&deleted=]     lookup: as GET of the version
    DELETE /subjects/{s}[?permanent=]              [versions]
    POST   /compatibility/subjects/{s}/versions[/{v}][?verbose=&normalize=]  {"is_compatible", "messages"?}
    GET|PUT|DELETE /config[/{s}]                   {"compatibilityLevel"} / {"compatibility"}
    GET|PUT|DELETE /mode[/{s}]                     {"mode"}

Errors are Confluent's bodies, ``{"error_code": N, "message": "..."}`` with the HTTP status of the
code's first three digits; a path that names nothing is 404/404, a wrong method 405/405, a body
that is not JSON 400/400 (Jackson's parse error in Confluent; 42201-style field errors are 422),
an unsupported request content type 415/415, an Accept no type of the registry satisfies 406/406.
Answers carry ``application/vnd.schemaregistry.v1+json`` unless Accept asks for one of the other
types the registry speaks.

Path segments are percent-decoded one by one, so a subject may hold ``/`` as ``%2F``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from kbroker.schema_registry import access, formats
from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.records import AVRO, SCHEMA_TYPES, SchemaReference
from kbroker.schema_registry.state import (
    INVALID_SCHEMA,
    LATEST,
    Decision,
    Registered,
    RegistryError,
    RegistryState,
    SchemaVersion,
    SUBJECT_NOT_FOUND,
    VERSION_NOT_FOUND,
    parse_version,
)

__all__ = ["CONTENT_TYPES", "DEFAULT_CONTENT_TYPE", "HttpRequest", "HttpResponse", "Write", "error", "handle",
           "may_write"]

DEFAULT_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
#: what a request body may be sent as, and what an answer may be asked for (Confluent's and Karapace's)
CONTENT_TYPES = (DEFAULT_CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json",
                 "application/octet-stream")
_ACCEPTABLE = CONTENT_TYPES[:3]
MAX_JSON_DEPTH = 64  # a request body's nesting (a schema is a string in it: its own depth is the parser's)
MAX_SCHEMA_TYPE_IN_MESSAGE = 100


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str  # raw, percent-encoded, without the query
    query: str = ""
    body: bytes = b""
    content_type: str | None = None
    accept: str | None = None
    authorization: str | None = None
    forwarded: bool = False  # sent on by another broker's registry (never forwarded again)
    vouch: str | None = None  # the principal a forwarding broker authenticated by certificate


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes
    content_type: str = DEFAULT_CONTENT_TYPE


@dataclass(frozen=True, slots=True)
class Write:
    """A change: append `decision.records` to `_schemas`, apply them, then answer `render(decision.answer)`."""

    decision: Decision
    render: Callable[[Any], HttpResponse]


def _json(obj: Any, status: int = 200, content_type: str = DEFAULT_CONTENT_TYPE) -> HttpResponse:
    return HttpResponse(status, json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode(), content_type)


def error(status: int, code: int, message: str, content_type: str = DEFAULT_CONTENT_TYPE) -> HttpResponse:
    return _json({"error_code": code, "message": message}, status, content_type)


def _http_error(status: int, content_type: str = DEFAULT_CONTENT_TYPE) -> HttpResponse:
    from http import HTTPStatus
    return error(status, status, f"HTTP {status} {HTTPStatus(status).phrase}", content_type)


class _Refused(Exception):
    def __init__(self, response: HttpResponse) -> None:
        self.response = response


def _media(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


def negotiate(accept: str | None) -> str | None:
    """The answer's content type for an Accept header; None: none the registry speaks (406)."""
    if not accept:
        return DEFAULT_CONTENT_TYPE
    best: tuple[float, int, str] | None = None
    for position, item in enumerate(accept.split(",")):
        media, *params = [p.strip() for p in item.split(";")]
        media = media.lower()
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q <= 0:
            continue
        if media in ("*/*", "application/*"):
            chosen = DEFAULT_CONTENT_TYPE
        elif media in _ACCEPTABLE:
            chosen = media
        else:
            continue
        if best is None or q > best[0]:
            best = (q, position, chosen)
    return best[2] if best else None


def _flag(query: dict[str, list[str]], name: str) -> bool:
    values = query.get(name)
    return bool(values) and values[-1].strip().lower() == "true"


def _one(query: dict[str, list[str]], name: str, default: str = "") -> str:
    values = query.get(name)
    return values[-1] if values else default


def _body(request: HttpRequest, ct: str) -> dict[str, Any]:
    try:
        obj = json.loads(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _Refused(error(400, 400, f"Unrecognized request body: {str(exc)[:200]}", ct)) from None
    if not isinstance(obj, dict):
        raise _Refused(error(422, 422, "Unrecognized field: the request body must be a JSON object", ct))
    if _depth(obj) > MAX_JSON_DEPTH:
        raise _Refused(error(422, 422, "The request body nests too deeply", ct))
    return obj


def _depth(obj: Any) -> int:
    depth, level = 0, [obj]
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return depth
        nxt: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                nxt.extend(item.values())
            elif isinstance(item, list):
                nxt.extend(item)
        level = nxt
    return depth


def _schema_request(obj: dict[str, Any], ct: str) -> tuple[str, str, tuple[SchemaReference, ...]]:
    """(schema text, schema type, references) of a register/lookup/compatibility body."""
    schema = obj.get("schema")
    if not isinstance(schema, str):
        raise _Refused(error(422, INVALID_SCHEMA, "Empty schema" if schema is None else
                             "Invalid schema: the field 'schema' must be a string", ct))
    schema_type = obj.get("schemaType", AVRO)
    if schema_type is None:
        schema_type = AVRO
    if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
        raise _Refused(error(422, INVALID_SCHEMA,
                             f"Invalid schemaType {str(schema_type)[:MAX_SCHEMA_TYPE_IN_MESSAGE]}", ct))
    for unsupported in ("ruleSet", "metadata"):
        if _has_content(obj.get(unsupported)):  # an empty one ({"domainRules": []}) says nothing
            raise _Refused(error(422, INVALID_SCHEMA, f"Invalid schema: {unsupported} (data contracts) is not "
                                 "supported by this registry", ct))
    raw_refs = obj.get("references") or []
    if not isinstance(raw_refs, list):
        raise _Refused(error(422, INVALID_SCHEMA, "Invalid schema: 'references' must be a list", ct))
    refs = []
    for ref in raw_refs:
        if not (isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(ref.get("subject"), str)
                and isinstance(ref.get("version"), int) and not isinstance(ref.get("version"), bool)):
            raise _Refused(error(422, INVALID_SCHEMA, "Invalid schema: a reference needs a name, a subject and "
                                 "an integer version", ct))
        try:
            version = parse_version(ref["version"])
        except RegistryError as exc:
            raise _Refused(error(422, exc.error_code, exc.message, ct)) from None
        refs.append(SchemaReference(ref["name"], ref["subject"], version))
    return schema, schema_type.upper(), tuple(refs)


def _has_content(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_content(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_content(v) for v in value)
    return value not in (None, "", False)


def _schema_fields(sv: SchemaVersion, state: RegistryState | None = None, fmt: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if sv.schema_type != AVRO:
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in sv.references]
    out["schema"] = _text(sv, state, fmt)
    return out


def _text(sv: SchemaVersion, state: RegistryState | None, fmt: str) -> str:
    if not fmt or state is None:
        return sv.schema
    try:
        return formats.render(sv.schema_type, sv.schema, state.dependencies(sv.references), fmt)
    except InvalidSchema as exc:  # stored by another registry in a form this one cannot convert
        raise RegistryError(INVALID_SCHEMA, f"Invalid schema: {exc}") from None


def version_body(sv: SchemaVersion, state: RegistryState | None = None, fmt: str = "") -> dict[str, Any]:
    return {"subject": sv.subject, "version": sv.version, "id": sv.id, **_schema_fields(sv, state, fmt)}


def _schema_id(segment: str, ct: str) -> int:
    text = segment.strip()
    if not text.isdigit() or len(text) > 10:
        raise _Refused(error(404, 40403, f"Schema {segment[:20]} not found", ct))
    return int(text)


def may_write(request: HttpRequest) -> bool:
    """Whether `handle` may answer the request with a `Write`: PUT, DELETE, and POST but for lookups
    (``POST /subjects/{s}``) and compatibility checks."""
    if request.method in ("PUT", "DELETE"):
        return True
    if request.method != "POST":
        return False
    path = request.path.rstrip("/")
    return not path.startswith("/compatibility/") and path.endswith("/versions") and path.startswith("/subjects/")


def handle(state: RegistryState, request: HttpRequest, may: access.May | None = None,
           principal: str = "User:ANONYMOUS") -> HttpResponse | Write:
    """One request. Writes come back as `Write`; the caller serialises them (one writer). With
    `may` (an authorizer's decision), access.py's mapping of ACLs applies."""
    ct = negotiate(request.accept)
    if ct is None:
        return _http_error(406)
    if request.method in ("POST", "PUT") and _media(request.content_type) not in CONTENT_TYPES:
        return _http_error(415, ct)
    segments = [unquote(s) for s in request.path.split("/")[1:]]
    if segments and segments[-1] == "" and len(segments) > 1:
        segments.pop()  # a trailing slash
    query = parse_qs(request.query, keep_blank_values=True, max_num_fields=32)
    visible = _everything
    if may is not None:
        need = access.required(request.method, segments)
        if need is not None and not may(need.operation, need.resource_type, need.name):
            return error(403, access.FORBIDDEN, access.refusal(principal, need), ct)

        def visible(subject: str) -> bool:
            return may("DESCRIBE", access.TOPIC, access.topic_of(subject))
    try:
        return _route(state, request, segments, query, ct, visible)
    except _Refused as refused:
        return refused.response
    except RegistryError as exc:
        return error(exc.http_status, exc.error_code, exc.message, ct)


def _everything(_subject: str) -> bool:
    return True


def _route(state: RegistryState, req: HttpRequest, seg: list[str], q: dict[str, list[str]],
           ct: str, visible: Callable[[str], bool]) -> HttpResponse | Write:
    m = req.method
    head = seg[0] if seg else ""
    n = len(seg)
    allowed: tuple[str, ...] = ()
    if head == "" and n <= 1:
        allowed = ("GET",)
        if m == "GET":
            return _json({}, content_type=ct)
    elif head == "schemas":
        allowed = ("GET",)
        if m == "GET":
            found = _schemas(state, seg, q, ct, visible)
            if found is not None:
                return found
        elif not _schemas_path(seg):
            allowed = ()
    elif head == "subjects":
        found, allowed = _subjects(state, req, seg, q, ct, visible)
        if found is not None:
            return found
    elif head == "compatibility" and n in (4, 5) and seg[1] == "subjects" and seg[3] == "versions":
        allowed = ("POST",)
        if m == "POST":
            return _compatibility(state, req, seg[2], seg[4] if n == 5 else None, q, ct)
    elif head in ("config", "mode") and n in (1, 2):
        allowed = ("GET", "PUT", "DELETE")
        subject = seg[1] if n == 2 else None
        if head == "config":
            return _config(state, req, subject, q, ct)
        return _mode(state, req, subject, q, ct)
    return _http_error(405 if allowed and m not in allowed else 404, ct)


def _schemas_path(seg: list[str]) -> bool:
    n = len(seg)
    return n == 1 or (n == 2 and seg[1] == "types") or (n in (3, 4) and seg[1] == "ids")


def _schemas(state: RegistryState, seg: list[str], q: dict[str, list[str]], ct: str,
             visible: Callable[[str], bool]) -> HttpResponse | None:
    n = len(seg)
    if n == 1:
        prefix, deleted, latest_only = _one(q, "subjectPrefix"), _flag(q, "deleted"), _flag(q, "latestOnly")
        out = []
        for subject in filter(visible, state.subjects(deleted=deleted, prefix=prefix)):
            versions = state.versions(subject, deleted=deleted)
            for v in versions[-1:] if latest_only else versions:
                out.append(version_body(state.get_version(subject, v, deleted=deleted)))
        return _json(out, content_type=ct)
    if n == 2 and seg[1] == "types":
        return _json(["JSON", "PROTOBUF", "AVRO"], content_type=ct)
    if n not in (3, 4) or seg[1] != "ids":
        return None
    schema_id = _schema_id(seg[2], ct)
    if visible is not _everything and not any(visible(s) for s, _v in state.subject_versions_for_id(
            schema_id, deleted=True)):
        raise _Refused(error(403, access.FORBIDDEN, f"The principal may not read schema {schema_id} (DESCRIBE on the "
                             "topic of a subject using it)", ct))
    if n == 3:
        sv = state.schema_by_id(schema_id)
        body = _schema_fields(sv, state, _one(q, "format"))
        if _flag(q, "fetchMaxId"):
            body["maxId"] = state.max_id
        return _json(body, content_type=ct)
    what = seg[3]
    if what == "schema":
        return HttpResponse(200, _text(state.schema_by_id(schema_id), state, _one(q, "format")).encode(), ct)
    pairs = [(s, v) for s, v in state.subject_versions_for_id(schema_id, deleted=_flag(q, "deleted")) if visible(s)]
    if what == "subjects":
        return _json(sorted({s for s, _v in pairs}), content_type=ct)
    if what == "versions":
        return _json([{"subject": s, "version": v} for s, v in pairs], content_type=ct)
    return None


def _subjects(state: RegistryState, req: HttpRequest, seg: list[str], q: dict[str, list[str]],
              ct: str, visible: Callable[[str], bool]) -> tuple[HttpResponse | Write | None, tuple[str, ...]]:
    m, n = req.method, len(seg)
    if n == 1:
        if m != "GET":
            return None, ("GET",)
        subjects = state.subjects(deleted=_flag(q, "deleted"), prefix=_one(q, "subjectPrefix"))
        return _json(list(filter(visible, subjects)), content_type=ct), ("GET",)
    subject = seg[1]
    if n == 2:
        if m == "POST":
            return _lookup(state, req, subject, q, ct), ("POST", "DELETE")
        if m == "DELETE":
            decision = state.delete_subject(subject, permanent=_flag(q, "permanent"))
            return Write(decision, lambda answer: _json(list(answer), content_type=ct)), ("POST", "DELETE")
        return None, ("POST", "DELETE")
    if seg[2] != "versions" or n > 5:
        return None, ()
    if n == 3:
        if m == "GET":
            return _json(state.versions(subject, deleted=_flag(q, "deleted")), content_type=ct), ("GET", "POST")
        if m == "POST":
            return _register(state, req, subject, q, ct), ("GET", "POST")
        return None, ("GET", "POST")
    version = seg[3]
    if n == 4:
        if m == "GET":
            sv = state.get_version(subject, version, deleted=_flag(q, "deleted"))
            return _json(version_body(sv, state, _one(q, "format")), content_type=ct), ("GET", "DELETE")
        if m == "DELETE":
            decision = state.delete_version(subject, version, permanent=_flag(q, "permanent"))
            return Write(decision, lambda answer: _json(answer, content_type=ct)), ("GET", "DELETE")
        return None, ("GET", "DELETE")
    if seg[4] == "schema":
        if m != "GET":
            return None, ("GET",)
        sv = state.get_version(subject, version, deleted=_flag(q, "deleted"))
        return HttpResponse(200, _text(sv, state, _one(q, "format")).encode(), ct), ("GET",)
    if seg[4] == "referencedby":
        if m != "GET":
            return None, ("GET",)
        return _json(state.referenced_by(subject, version), content_type=ct), ("GET",)
    return None, ()


def _register(state: RegistryState, req: HttpRequest, subject: str, q: dict[str, list[str]], ct: str) -> Write:
    obj = _body(req, ct)
    schema, schema_type, refs = _schema_request(obj, ct)
    schema_id, version = obj.get("id"), obj.get("version")
    for name, value in (("id", schema_id), ("version", version)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _Refused(error(422, INVALID_SCHEMA, f"Invalid schema: '{name}' must be an integer", ct))
    decision = state.register(subject, schema, schema_type=schema_type, references=refs,
                              normalize=_flag(q, "normalize"), schema_id=schema_id, version=version)

    def render(answer: Registered) -> HttpResponse:
        return _json({"id": answer.id}, content_type=ct)

    return Write(decision, render)


def _lookup(state: RegistryState, req: HttpRequest, subject: str, q: dict[str, list[str]], ct: str) -> HttpResponse:
    schema, schema_type, refs = _schema_request(_body(req, ct), ct)
    sv = state.lookup(subject, schema, schema_type=schema_type, references=refs, normalize=_flag(q, "normalize"),
                      deleted=_flag(q, "deleted"))
    return _json(version_body(sv), content_type=ct)


def _compatibility(state: RegistryState, req: HttpRequest, subject: str, version: str | None,
                   q: dict[str, list[str]], ct: str) -> HttpResponse:
    """Without a version: against the subject's versions as its level says; with one, against it.
    ``latest`` of a subject with no live version is compatible (Confluent)."""
    schema, schema_type, refs = _schema_request(_body(req, ct), ct)
    target: int | None = None
    check = True
    if version is not None:
        target = parse_version(version)
        if target == LATEST:
            try:
                target = state.get_version(subject, LATEST).version
            except RegistryError as exc:
                if exc.error_code not in (SUBJECT_NOT_FOUND, VERSION_NOT_FOUND):
                    raise
                check = False
    messages = state.test_compatibility(subject, target, schema, schema_type=schema_type, references=refs,
                                        normalize=_flag(q, "normalize")) if check else []
    body: dict[str, Any] = {"is_compatible": not messages}
    if _flag(q, "verbose"):
        body["messages"] = list(messages)
    return _json(body, content_type=ct)


def _setting(req: HttpRequest, field: str, ct: str) -> Any:
    obj = _body(req, ct)
    if field not in obj:
        raise _Refused(error(422, 422, f"Unrecognized request body: '{field}' is missing", ct))
    return obj[field]


def _config(state: RegistryState, req: HttpRequest, subject: str | None, q: dict[str, list[str]],
            ct: str) -> HttpResponse | Write:
    m = req.method
    if m == "GET":
        level = state.get_config(subject, default_to_global=_flag(q, "defaultToGlobal"))
        return _json({"compatibilityLevel": level}, content_type=ct)
    if m == "PUT":
        decision = state.set_config(subject, _setting(req, "compatibility", ct))
        return Write(decision, lambda answer: _json({"compatibility": answer}, content_type=ct))
    if m == "DELETE":
        decision = state.delete_config(subject)
        return Write(decision, lambda answer: _json({"compatibilityLevel": answer}, content_type=ct))
    return _http_error(405, ct)


def _mode(state: RegistryState, req: HttpRequest, subject: str | None, q: dict[str, list[str]],
          ct: str) -> HttpResponse | Write:
    m = req.method
    if m == "GET":
        return _json({"mode": state.get_mode(subject, default_to_global=_flag(q, "defaultToGlobal"))},
                     content_type=ct)
    if m == "PUT":
        decision = state.set_mode(subject, _setting(req, "mode", ct), force=_flag(q, "force"))
        return Write(decision, lambda answer: _json({"mode": answer}, content_type=ct))
    if m == "DELETE":
        decision = state.delete_mode(subject)
        return Write(decision, lambda answer: _json({"mode": answer}, content_type=ct))
    return _http_error(405, ct)
