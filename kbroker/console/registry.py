"""The console's schema registry client (`kbroker console --schema-registry-url URL`): Confluent's
REST API over the standard library's http.client (kbroker.admin.schemas_cmd's RegistryClient:
one short connection per call, a timeout on the whole call), answers bounded at
MAX_RESPONSE_BYTES. Blocking: the web layer calls it from worker threads.

- The message browser's decoder: a key or value with Confluent's header is decoded with the
  schema its id names (schemas.py decides; this fetches). A schema id never changes what it
  names, so each id's parsed schema (Avro: fastavro's, with its references' named types;
  Protobuf: a descriptor pool built from `?format=serialized`, references first) is kept in a
  small LRU cache, with the subjects and versions it is registered under (looked up once).
  Failures are remembered only for the browse that met them.
- The Schemas pages: the subjects with their latest version and compatibility level; a
  subject's versions, one version's schema, its compatibility level and mode (its own or the
  global one, inherited).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from kbroker.admin.schemas_cmd import RegistryClient, RegistryErrorResponse, RegistryUnavailable, subject_path
from kbroker.console import schemas
from kbroker.console.schemas import (AVRO, JSON, PROTOBUF, Decoded, DecodeError, Reference, Setting, SubjectDetail,
                                     SubjectRow, SubjectsPage, VersionRow)

MAX_RESPONSE_BYTES = 16 << 20
CACHE_SIZE = 256  # schema ids kept parsed
MAX_REFERENCES = 256  # schemas one schema may pull in (transitively)
MAX_REFERENCE_DEPTH = 32
MAX_DESCRIBED_SUBJECTS = 200  # the subjects list asks each one's latest version and level, up to this many
MAX_LISTED_VERSIONS = 100  # a subject page lists its newest versions, up to this many
SUBJECT_NOT_FOUND = 40401
NOT_CONFIGURED = {"config": (40408, SUBJECT_NOT_FOUND), "mode": (40409, SUBJECT_NOT_FOUND)}
REGISTRY_ERRORS = (RegistryUnavailable, RegistryErrorResponse)


class BoundedRegistryClient(RegistryClient):
    """RegistryClient with the console's bound on an answer's size."""

    max_response_bytes = MAX_RESPONSE_BYTES
    reader = "the console"


class Prepared(NamedTuple):
    """A schema id ready to decode with."""

    schema_type: str
    decoder: Any  # AVRO: fastavro's parsed schema; PROTOBUF: schemas.ProtobufFile; JSON: None
    subjects: tuple[tuple[str, int], ...]  # (subject, version) it is registered as


class ConsoleRegistry:
    def __init__(self, url: str, basic_auth: str | None = None, timeout: float = 10.0,
                 cache_size: int = CACHE_SIZE, client: Any = None) -> None:
        """UsageError (kbroker.admin.schemas_cmd) for a URL or credentials that cannot work."""
        self.client = client or BoundedRegistryClient(url, basic_auth, timeout)
        self.url = self.client.url  # without credentials
        self.cache_size = cache_size
        self._cache: OrderedDict[int, Prepared] = OrderedDict()
        self._lock = threading.Lock()

    def _get(self, path: str, **query: Any) -> Any:
        return self.client.call("GET", path, query or None)

    # -- decoding --------------------------------------------------------------------------------

    def prepared(self, schema_id: int) -> Prepared:
        """The schema `schema_id` names, parsed (cached). RegistryErrorResponse or
        RegistryUnavailable when it cannot be fetched; DecodeError when it does not parse."""
        with self._lock:
            hit = self._cache.get(schema_id)
            if hit is not None:
                self._cache.move_to_end(schema_id)
                return hit
        body = self._get(f"/schemas/ids/{schema_id}")
        schema_type = schemas.schema_type_of(body)
        if schema_type == PROTOBUF:
            body = self._get(f"/schemas/ids/{schema_id}", format="serialized")
        references = [] if schema_type == JSON else self._references(  # JSON needs none to read the JSON
            body.get("references"), "serialized" if schema_type == PROTOBUF else None, set(), 0)
        text = str(body.get("schema") or "")
        if schema_type == AVRO:
            decoder = schemas.avro_decoder(text, references)
        elif schema_type == PROTOBUF:
            decoder = schemas.protobuf_decoder(text, references)
        elif schema_type == JSON:
            decoder = None
        else:
            raise DecodeError(f"unknown schema type {schema_type[:40]!r}")
        try:
            found = self._get(f"/schemas/ids/{schema_id}/versions")
            subjects = tuple((str(sv["subject"]), int(sv["version"])) for sv in found or ()
                             if isinstance(sv, dict) and "subject" in sv and "version" in sv)
        except RegistryErrorResponse:
            subjects = ()  # a registry without that endpoint: the label names no subject
        prepared = Prepared(schema_type, decoder, subjects)
        with self._lock:
            self._cache[schema_id] = prepared
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return prepared

    def _references(self, refs: Any, fmt: str | None, seen: set[tuple[str, str]], depth: int) -> list[Reference]:
        """The schemas `refs` name, each after the ones it refers to (dependencies first)."""
        out: list[Reference] = []
        if depth > MAX_REFERENCE_DEPTH:
            raise DecodeError(f"references nested deeper than {MAX_REFERENCE_DEPTH}")
        for ref in refs or ():
            if not isinstance(ref, dict) or "subject" not in ref or "version" not in ref:
                raise DecodeError(f"a malformed reference {str(ref)[:80]!r}")
            key = (str(ref["subject"]), str(ref["version"]))
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > MAX_REFERENCES:
                raise DecodeError(f"more than {MAX_REFERENCES} referenced schemas")
            body = self._get(f"{subject_path(key[0])}/versions/{key[1]}", **({"format": fmt} if fmt else {}))
            out += self._references(body.get("references"), fmt, seen, depth + 1)
            out.append(Reference(str(ref.get("name") or ""), schemas.schema_type_of(body), str(body.get("schema") or "")))
        return out

    def decoder(self, topic: str) -> "Decoder":
        return Decoder(self, topic)

    # -- the Schemas pages -----------------------------------------------------------------------

    def _global(self, resource: str, field: str) -> Setting:
        try:
            return Setting(str(self._get(f"/{resource}")[field]), False)
        except RegistryErrorResponse as exc:
            return Setting(None, False, str(exc))
        except (KeyError, TypeError):
            return Setting(None, False, f"GET /{resource} answered without {field}")

    def _own(self, subject: str, resource: str, field: str) -> str | None:
        """The subject's own compatibility level or mode; None when it has none."""
        try:
            answer = self._get(f"/{resource}{subject_path(subject)[len('/subjects'):]}")
        except RegistryErrorResponse as exc:
            if exc.error_code in NOT_CONFIGURED[resource]:
                return None
            raise
        value = answer.get(field) if isinstance(answer, dict) else None
        return None if value is None else str(value)

    def subjects(self) -> SubjectsPage:
        names = sorted(str(s) for s in self._get("/subjects") or ())
        compatibility = self._global("config", "compatibilityLevel")
        mode = self._global("mode", "mode")
        rows = []
        for subject in names[:MAX_DESCRIBED_SUBJECTS]:
            try:
                latest = self._get(f"{subject_path(subject)}/versions/latest")
                own = self._own(subject, "config", "compatibilityLevel")
                rows.append(SubjectRow(subject, int(latest["version"]), int(latest["id"]),
                                       schemas.schema_type_of(latest), schemas.setting(own, compatibility)))
            except RegistryErrorResponse as exc:  # deleted since it was listed, say
                rows.append(SubjectRow(subject, None, None, "", Setting(None, True), str(exc)))
        return SubjectsPage(rows, compatibility, mode, max(0, len(names) - MAX_DESCRIBED_SUBJECTS))

    def subject(self, subject: str, version: int | None) -> SubjectDetail:
        """A subject's newest versions (id, type), `version`'s schema (None: the latest), and its
        compatibility level and mode. RegistryErrorResponse when the subject or version is not there."""
        base = subject_path(subject)
        versions = sorted(int(v) for v in self._get(f"{base}/versions") or ())
        listed = versions[-MAX_LISTED_VERSIONS:]
        rows, bodies = [], {}
        for v in reversed(listed):
            try:
                body = bodies[v] = self._get(f"{base}/versions/{v}")
                rows.append(VersionRow(v, int(body["id"]), schemas.schema_type_of(body)))
            except RegistryErrorResponse as exc:
                rows.append(VersionRow(v, None, "", str(exc)))
        chosen = version if version is not None else (versions[-1] if versions else None)
        selected = None
        if chosen is not None:
            body = bodies.get(chosen) or self._get(f"{base}/versions/{chosen}")
            selected = schemas.schema_version(body)
        compatibility = schemas.setting(self._own(subject, "config", "compatibilityLevel"),
                                        self._global("config", "compatibilityLevel"))
        mode = schemas.setting(self._own(subject, "mode", "mode"), self._global("mode", "mode"))
        return SubjectDetail(subject, rows, selected, compatibility, mode, len(versions) - len(listed))


class Decoder:
    """Decodes keys and values for one browse of one topic: `decoder(data, is_key)` is None for
    bytes without Confluent's header, a Decoded, or why they could not be decoded (one line).
    Failures are remembered for this browse only: one unanswered registry is not asked again
    for each record, and a schema registered later is found by the next browse."""

    def __init__(self, registry: ConsoleRegistry, topic: str) -> None:
        self.registry, self.topic = registry, topic
        self.failed: dict[int, str] = {}
        self.unavailable: str | None = None

    def __call__(self, data: bytes, is_key: bool) -> Decoded | str | None:
        header = schemas.wire_header(data)
        if header is None:
            return None
        schema_id, rest = header
        if self.unavailable is not None:
            return f"schema id {schema_id}: {self.unavailable}"
        if schema_id in self.failed:
            return self.failed[schema_id]
        try:
            prepared = self.registry.prepared(schema_id)
        except RegistryUnavailable as exc:
            self.unavailable = str(exc)
            return f"schema id {schema_id}: {exc}"
        except (RegistryErrorResponse, DecodeError) as exc:
            self.failed[schema_id] = f"schema id {schema_id}: {schemas.one_line(exc)}"
            return self.failed[schema_id]
        return decode_with(prepared, schema_id, rest, self.topic, is_key)


def decode_with(prepared: Prepared, schema_id: int, payload: bytes, topic: str, is_key: bool) -> Decoded | str:
    """The bytes after the header decoded with a prepared schema, or why not."""
    type_name = schemas.TYPE_NAMES.get(prepared.schema_type, prepared.schema_type)
    message_type = None
    try:
        if prepared.schema_type == AVRO:
            value = schemas.decode_avro(prepared.decoder, payload)
        elif prepared.schema_type == PROTOBUF:
            indexes, body = schemas.message_indexes(payload)
            message_type, value = schemas.decode_protobuf(prepared.decoder, indexes, body)
        else:
            value = schemas.decode_json(payload)
    except DecodeError as exc:
        return f"{type_name} schema id {schema_id}: {schemas.one_line(exc)}"
    text, cut = schemas.pretty(value)
    return Decoded(text, schemas.label(prepared.schema_type, schema_id,
                                       schemas.pick_subject(prepared.subjects, topic, is_key), message_type), cut)

