"""`kbroker schemas`: a command-line client of a Confluent-compatible Schema Registry's REST API —
kbroker's own (`schema.registry.listener`), Confluent's or Karapace's. Standard library only
(http.client): no Kafka connection, nothing of the broker is imported.

    kbroker schemas list [--prefix P] [--deleted]
    kbroker schemas get SUBJECT [--version V|latest] [--deleted] [--schema-only]
    kbroker schemas get --id ID [--schema-only]
    kbroker schemas register SUBJECT (--schema-file F | --schema TEXT) [--type AVRO|JSON|PROTOBUF]
                             [--reference NAME=SUBJECT:VERSION ...] [--normalize]
    kbroker schemas check SUBJECT (--schema-file F | --schema TEXT) [--type ...] [--version V]
                          [--reference ...] [--normalize]
    kbroker schemas delete SUBJECT [--version V] [--permanent]
    kbroker schemas config [SUBJECT] [--set LEVEL | --delete]
    kbroker schemas mode [SUBJECT] [--set MODE [--force] | --delete]

Every sub-command takes --registry-url (default $KBROKER_SCHEMA_REGISTRY_URL, else
http://127.0.0.1:8081; a path prefix is kept), --basic-auth USER:PASSWORD (default
$KBROKER_SCHEMA_REGISTRY_BASIC_AUTH, or the URL's user info), --ca-file (https), --timeout and
--output text|json. Exit status: 0 success (`check`: compatible), 1 a failure with one line on
stderr — the registry's error_code and message, or why it could not be reached — (`check`:
incompatible, the reasons on stdout), 2 a usage error. Answers over MAX_RESPONSE_BYTES are refused.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import ssl
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

DEFAULT_URL = "http://127.0.0.1:8081"
URL_ENV = "KBROKER_SCHEMA_REGISTRY_URL"
AUTH_ENV = "KBROKER_SCHEMA_REGISTRY_BASIC_AUTH"
DEFAULT_TIMEOUT_S = 30.0
MAX_RESPONSE_BYTES = 64 << 20  # an answer larger than this is refused, not buffered
MAX_SCHEMA_FILE_BYTES = 64 << 20
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; q=0.9, application/json; q=0.5"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE", "NONE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
SUBJECT_COMPATIBILITY_NOT_CONFIGURED, SUBJECT_MODE_NOT_CONFIGURED = 40408, 40409
LATEST = "latest"


class UsageError(Exception):
    """Arguments that do not fit together: exit status 2."""


class RegistryUnavailable(Exception):
    """No usable HTTP answer: the registry cannot be reached, timed out, or answered too much."""


class RegistryErrorResponse(Exception):
    """An HTTP error answer; `error_code` and `message` from Confluent's error body when it has one."""

    def __init__(self, status: int, error_code: int | None, message: str) -> None:
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message

    def __str__(self) -> str:
        text = _one_line(self.message)
        if self.error_code is None:
            return f"HTTP {self.status}: {text}" if text else f"HTTP {self.status}"
        return f"error_code {self.error_code}: {text}"


def _one_line(text: str, limit: int = 2000) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "..."


# -- the HTTP client ---------------------------------------------------------------------------------

class RegistryClient:
    """Confluent's REST API over one short HTTP/1.1 connection per call (http.client: no proxies, no
    redirects followed), JSON in and out, the whole call bounded by `timeout` seconds and every
    answer by `max_response_bytes` (`reader` names who refuses a larger one)."""

    max_response_bytes = MAX_RESPONSE_BYTES
    reader = "this command"

    def __init__(self, url: str, basic_auth: str | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                 ca_file: str | None = None) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--registry-url must be http://HOST[:PORT][/PATH] or https://..., got {url!r}")
        try:
            port = parts.port
        except ValueError:
            raise UsageError(f"--registry-url {url!r}: bad port") from None
        if parts.query or parts.fragment:
            raise UsageError(f"--registry-url {url!r}: a query or fragment is not allowed")
        if timeout <= 0:
            raise UsageError("--timeout must be positive")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{parts.scheme}://{host}:{self.port}{self.prefix}"  # without credentials: safe to show
        self.timeout = timeout
        if basic_auth is None and parts.username is not None:
            basic_auth = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        self.headers = {"Accept": ACCEPT, "User-Agent": "kbroker-schemas"}
        if basic_auth is not None:
            if ":" not in basic_auth:
                raise UsageError("--basic-auth takes USER:PASSWORD")
            token = base64.b64encode(basic_auth.encode("utf-8")).decode("ascii")
            self.headers["Authorization"] = f"Basic {token}"
        self.context: ssl.SSLContext | None = None
        if self.https:
            try:
                self.context = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise UsageError(f"--ca-file {ca_file}: {getattr(exc, 'strerror', None) or exc}") from None

    def call(self, method: str, path: str, query: dict[str, Any] | None = None, body: Any = None) -> Any:
        """The decoded JSON answer of a 2xx; RegistryErrorResponse for an error answer,
        RegistryUnavailable when there is no usable answer."""
        target = self.prefix + path
        flags = {k: ("true" if v is True else v) for k, v in (query or {}).items() if v not in (None, False, "")}
        if flags:
            target += "?" + urlencode(flags)
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = CONTENT_TYPE
        deadline = time.monotonic() + self.timeout
        if self.https:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=self.context)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, target, body=data, headers=headers)
            response = conn.getresponse()
            raw = self._read(response, deadline)
        except TimeoutError:  # socket.timeout too
            raise RegistryUnavailable(f"no answer from the schema registry at {self.url} within "
                                      f"{self.timeout:g}s") from None
        except ssl.SSLError as exc:
            raise RegistryUnavailable(f"TLS with the schema registry at {self.url} failed: "
                                      f"{_one_line(exc.reason or exc)}") from None
        except OSError as exc:
            raise RegistryUnavailable(f"cannot reach the schema registry at {self.url}: "
                                      f"{_one_line(exc.strerror or exc)}") from None
        except http.client.HTTPException as exc:
            raise RegistryUnavailable(f"the schema registry at {self.url} gave a broken HTTP answer: "
                                      f"{_one_line(repr(exc))}") from None
        finally:
            conn.close()
        status = response.status
        if not 200 <= status < 300:
            raise _error_response(status, response.reason, raw)
        try:
            return json.loads(raw.decode("utf-8")) if raw.strip() else None
        except (UnicodeDecodeError, ValueError):
            raise RegistryUnavailable(f"the schema registry at {self.url} answered {method} {path} with "
                                      f"something other than JSON: {_one_line(raw[:200].decode('utf-8', 'replace'))}") from None

    def _read(self, response: http.client.HTTPResponse, deadline: float) -> bytes:
        length = response.getheader("Content-Length")
        limit = self.max_response_bytes
        if length is not None and length.strip().isdigit() and int(length) > limit:
            raise RegistryUnavailable(f"the schema registry at {self.url} answered {int(length)} bytes, over the "
                                      f"{_size(limit)} {self.reader} accepts")
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError
            chunk = response.read(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise RegistryUnavailable(f"the schema registry at {self.url} answered over the "
                                          f"{_size(limit)} {self.reader} accepts")
            chunks.append(chunk)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def _error_response(status: int, reason: str, raw: bytes) -> RegistryErrorResponse:
    text = raw.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and ("error_code" in obj or "message" in obj):
        code = obj.get("error_code")
        return RegistryErrorResponse(status, code if isinstance(code, int) and not isinstance(code, bool) else None,
                                     str(obj.get("message") or reason))
    detail = _one_line(text, 200)
    return RegistryErrorResponse(status, None, f"{reason} {detail}".strip() if detail else reason)


def subject_path(subject: str) -> str:
    return "/subjects/" + quote(subject, safe="")


# -- arguments ---------------------------------------------------------------------------------------

def _version(text: str) -> str:
    if text.lower() == LATEST or text == "-1":
        return LATEST
    if text.isdigit() and int(text) >= 1:
        return str(int(text))
    raise argparse.ArgumentTypeError(f"a version is a number from 1, or 'latest', not {text!r}")


def _positive_int(text: str) -> int:
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected a number from 1, not {text!r}")


def _choice(choices: tuple[str, ...]):
    def parse(text: str) -> str:
        value = text.strip().upper()
        if value not in choices:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(choices)}")
        return value
    return parse


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: str  # a number, or "latest" (resolved before sending)


def parse_reference(text: str) -> Reference:
    """NAME=SUBJECT:VERSION; the subject may hold ':' (the version is after the last one)."""
    name, sep, rest = text.partition("=")
    subject, colon, version = rest.rpartition(":")
    if not sep or not colon or not name.strip() or not subject:
        raise argparse.ArgumentTypeError(f"a reference is NAME=SUBJECT:VERSION, not {text!r}")
    return Reference(name.strip(), subject, _version(version.strip()))


def add_schemas_command(sub: Any) -> None:
    """Add `schemas` to the `kbroker` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--registry-url", metavar="URL",
                        help=f"the schema registry (default ${URL_ENV}, else {DEFAULT_URL})")
    common.add_argument("--basic-auth", metavar="USER:PASSWORD",
                        help=f"HTTP basic authentication (default ${AUTH_ENV})")
    common.add_argument("--ca-file", metavar="PEM", help="CA certificates to trust for an https:// registry")
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"for each HTTP call (default {DEFAULT_TIMEOUT_S:g})")
    common.add_argument("--output", choices=("text", "json"), default="text")

    schema_input = argparse.ArgumentParser(add_help=False)
    source = schema_input.add_mutually_exclusive_group(required=True)
    source.add_argument("--schema-file", metavar="FILE", help="the schema's text from a file ('-': stdin)")
    source.add_argument("--schema", metavar="TEXT", help="the schema's text")
    schema_input.add_argument("--type", type=_choice(SCHEMA_TYPES), metavar="AVRO|JSON|PROTOBUF",
                              help="the schema type (default AVRO; PROTOBUF for a --schema-file ending in .proto)")
    schema_input.add_argument("--reference", type=parse_reference, action="append", default=[],
                              metavar="NAME=SUBJECT:VERSION",
                              help="a schema it references (repeatable; VERSION may be 'latest')")
    schema_input.add_argument("--normalize", action="store_true", help="ask the registry to normalize the schema")

    schemas = sub.add_parser("schemas", help="a Confluent-compatible schema registry: subjects, schemas, "
                                             "compatibility, config and mode")
    ssub = schemas.add_subparsers(dest="schemas_command", required=True)

    lst = ssub.add_parser("list", parents=[common], help="list subjects")
    lst.add_argument("--prefix", default="", metavar="PREFIX", help="only subjects starting with PREFIX")
    lst.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")

    get = ssub.add_parser("get", parents=[common], help="a subject's version, or a schema by id")
    get.add_argument("subject", nargs="?", metavar="SUBJECT")
    get.add_argument("--version", type=_version, metavar="V|latest", help="the version (default latest)")
    get.add_argument("--id", type=_positive_int, metavar="ID", help="the schema with this id (no SUBJECT)")
    get.add_argument("--deleted", action="store_true", help="a soft-deleted version too")
    get.add_argument("--schema-only", action="store_true", help="print only the schema's text")

    register = ssub.add_parser("register", parents=[common, schema_input],
                               help="register a schema under a subject; prints its id")
    register.add_argument("subject", metavar="SUBJECT")

    check = ssub.add_parser("check", parents=[common, schema_input],
                            help="test a schema's compatibility with a subject (exit 1: incompatible)")
    check.add_argument("subject", metavar="SUBJECT")
    check.add_argument("--version", type=_version, metavar="V|latest",
                       help="against this version only (default: the versions the subject's level names)")

    delete = ssub.add_parser("delete", parents=[common], help="delete a subject or one of its versions")
    delete.add_argument("subject", metavar="SUBJECT")
    delete.add_argument("--version", type=_version, metavar="V|latest", help="only this version")
    delete.add_argument("--permanent", action="store_true",
                        help="hard delete (of what is already soft-deleted)")

    for name, values, helptext in (("config", COMPATIBILITY_LEVELS, "compatibility level"),
                                   ("mode", MODES, "mode")):
        p = ssub.add_parser(name, parents=[common],
                            help=f"show, set or delete the {helptext} (the global one without SUBJECT)")
        p.add_argument("subject", nargs="?", metavar="SUBJECT")
        action = p.add_mutually_exclusive_group()
        action.add_argument("--set", type=_choice(values), metavar="|".join(values), dest="set_value",
                            help=f"set the {helptext}")
        action.add_argument("--delete", action="store_true",
                            help=f"delete the {helptext} (the subject then follows the global one)")
        if name == "mode":
            p.add_argument("--force", action="store_true", help="IMPORT even when schemas exist")


# -- the sub-commands --------------------------------------------------------------------------------

def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.output == "json":
        print(json.dumps(data, indent=2))
    elif text:  # nothing found: no line at all
        print(text)


def _read_schema(args: argparse.Namespace) -> str:
    if args.schema is not None:
        return args.schema
    path = args.schema_file
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_SCHEMA_FILE_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_SCHEMA_FILE_BYTES + 1)
    except OSError as exc:
        raise RegistryUnavailable(f"cannot read --schema-file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SCHEMA_FILE_BYTES:
        raise UsageError(f"--schema-file {path} is over {_size(MAX_SCHEMA_FILE_BYTES)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--schema-file {path} is not UTF-8 text") from None


def _schema_body(client: RegistryClient, args: argparse.Namespace) -> dict[str, Any]:
    schema_type = args.type
    if schema_type is None:
        schema_type = "PROTOBUF" if (args.schema_file or "").endswith(".proto") else "AVRO"
    body: dict[str, Any] = {"schema": _read_schema(args)}
    if schema_type != "AVRO":  # the default: left out, as registries before schemaType expect
        body["schemaType"] = schema_type
    if args.reference:
        body["references"] = [{"name": r.name, "subject": r.subject, "version": _resolve(client, r)}
                              for r in args.reference]
    return body


def _resolve(client: RegistryClient, ref: Reference) -> int:
    if ref.version != LATEST:
        return int(ref.version)
    found = client.call("GET", f"{subject_path(ref.subject)}/versions/latest")
    return int(found["version"])


def _references_text(refs: list[dict[str, Any]] | None) -> str:
    if not refs:
        return "-"
    return ", ".join(f"{r.get('name')}={r.get('subject')}:{r.get('version')}" for r in refs)


def _pretty_schema(schema: str, schema_type: str) -> str:
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema), indent=2)
        except ValueError:
            pass
    return schema


def _list(client: RegistryClient, args: argparse.Namespace) -> int:
    found = client.call("GET", "/subjects", {"subjectPrefix": args.prefix, "deleted": args.deleted})
    if not isinstance(found, list) or not all(isinstance(s, str) for s in found):
        raise ValueError("a list of subjects expected")
    subjects = sorted(s for s in found if s.startswith(args.prefix))  # a registry may not know subjectPrefix
    _emit(args, subjects, "\n".join(subjects))
    return 0


def _get(client: RegistryClient, args: argparse.Namespace) -> int:
    if args.id is not None:
        if args.subject is not None or args.version is not None:
            raise UsageError("get takes SUBJECT [--version V] or --id ID, not both")
        found = client.call("GET", f"/schemas/ids/{args.id}")
        data = {"id": args.id, "schemaType": found.get("schemaType") or "AVRO",
                "references": found.get("references") or [], "schema": found["schema"]}
        head = [f"id: {args.id}"]
    else:
        if args.subject is None:
            raise UsageError("get takes SUBJECT [--version V] or --id ID")
        version = args.version or LATEST
        found = client.call("GET", f"{subject_path(args.subject)}/versions/{version}", {"deleted": args.deleted})
        data = {"subject": found.get("subject", args.subject), "version": found.get("version"), "id": found.get("id"),
                "schemaType": found.get("schemaType") or "AVRO", "references": found.get("references") or [],
                "schema": found["schema"]}
        head = [f"subject: {data['subject']}", f"version: {data['version']}", f"id: {data['id']}"]
    if args.schema_only:
        print(data["schema"])
        return 0
    text = "\n".join([*head, f"type: {data['schemaType']}", f"references: {_references_text(data['references'])}",
                      "schema:", _pretty_schema(data["schema"], data["schemaType"])])
    _emit(args, data, text)
    return 0


def _register(client: RegistryClient, args: argparse.Namespace) -> int:
    body = _schema_body(client, args)
    found = client.call("POST", f"{subject_path(args.subject)}/versions", {"normalize": args.normalize}, body)
    _emit(args, {"id": found["id"]}, str(found["id"]))
    return 0


def _check(client: RegistryClient, args: argparse.Namespace) -> int:
    body = _schema_body(client, args)
    query = {"verbose": True, "normalize": args.normalize}
    base = f"/compatibility{subject_path(args.subject)}/versions"
    if args.version is not None:
        found = client.call("POST", f"{base}/{args.version}", query, body)
        against = f"version {args.version} of subject {args.subject!r}"
    else:
        against = f"subject {args.subject!r}"
        try:
            found = client.call("POST", base, query, body)
        except RegistryErrorResponse as exc:
            # a registry without the versionless route (Confluent before 7, some Karapace): its path
            # error, not a subject's (404xx); ask about the latest version instead
            if exc.status not in (404, 405) or (exc.error_code is not None and exc.error_code > 999):
                raise
            found = client.call("POST", f"{base}/{LATEST}", query, body)
            against = f"the latest version of subject {args.subject!r}"
    compatible = bool(found.get("is_compatible"))
    messages = [m if isinstance(m, str) else json.dumps(m) for m in found.get("messages") or []]
    if compatible:
        text = f"Compatible with {against}."
    else:
        text = "\n".join([f"Incompatible with {against}:", *(f"  {_one_line(m)}" for m in messages)])
    _emit(args, {"is_compatible": compatible, "messages": messages}, text)
    return 0 if compatible else 1


def _delete(client: RegistryClient, args: argparse.Namespace) -> int:
    how = "Permanently deleted" if args.permanent else "Deleted"
    query = {"permanent": args.permanent}
    if args.version is not None:
        found = client.call("DELETE", f"{subject_path(args.subject)}/versions/{args.version}", query)
        _emit(args, {"subject": args.subject, "version": found}, f"{how} version {found} of subject {args.subject!r}.")
        return 0
    found = client.call("DELETE", subject_path(args.subject), query) or []
    versions = ", ".join(str(v) for v in found) or "none"
    _emit(args, {"subject": args.subject, "versions": found}, f"{how} subject {args.subject!r} (versions {versions}).")
    return 0


def _setting(client: RegistryClient, args: argparse.Namespace, resource: str, field: str, put_field: str,
             not_configured: int, what: str) -> int:
    """`config` and `mode`: show (a subject without its own falls back to the global one), set, delete."""
    subject = args.subject
    path = f"/{resource}" + ("" if subject is None else "/" + quote(subject, safe=""))
    whose = "global" if subject is None else f"subject {subject!r}"
    if args.set_value is not None:
        query = {"force": getattr(args, "force", False)}
        found = client.call("PUT", path, query, {put_field: args.set_value})
        value = (found or {}).get(put_field) or (found or {}).get(field) or args.set_value
        _emit(args, {"subject": subject, field: value}, f"Set the {whose} {what} to {value}.")
        return 0
    if args.delete:
        found = client.call("DELETE", path) or {}
        previous = found.get(field) or found.get(put_field)
        was = f" (was {previous})" if previous else ""
        _emit(args, {"subject": subject, "deleted": previous}, f"Deleted the {whose} {what}{was}.")
        return 0
    inherited = False
    try:
        found = client.call("GET", path)
    except RegistryErrorResponse as exc:
        if subject is None or exc.error_code != not_configured:
            raise
        found, inherited = client.call("GET", f"/{resource}"), True
    value = (found or {}).get(field) or (found or {}).get(put_field)
    text = f"{value} (the global {what}: subject {subject!r} has none of its own)" if inherited else str(value)
    _emit(args, {"subject": subject, field: value, "inherited": inherited}, text)
    return 0


def _config(client: RegistryClient, args: argparse.Namespace) -> int:
    return _setting(client, args, "config", "compatibilityLevel", "compatibility",
                    SUBJECT_COMPATIBILITY_NOT_CONFIGURED, "compatibility level")


def _mode(client: RegistryClient, args: argparse.Namespace) -> int:
    return _setting(client, args, "mode", "mode", "mode", SUBJECT_MODE_NOT_CONFIGURED, "mode")


_RUN = {"list": _list, "get": _get, "register": _register, "check": _check, "delete": _delete,
        "config": _config, "mode": _mode}


def run_schemas(args: argparse.Namespace) -> int:
    """Run a parsed `kbroker schemas ...`: 0 on success, 1 with one line on stderr on failure
    (`check`: 1 when incompatible), 2 for arguments that do not fit together."""
    name = f"kbroker schemas {args.schemas_command}"
    try:
        url = args.registry_url or os.environ.get(URL_ENV) or DEFAULT_URL
        auth = args.basic_auth if args.basic_auth is not None else os.environ.get(AUTH_ENV) or None
        client = RegistryClient(url, auth, args.timeout, args.ca_file)
        return _RUN[args.schemas_command](client, args)
    except UsageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head`: the reader left; no traceback (Python's documented recipe)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (RegistryUnavailable, RegistryErrorResponse) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a 2xx answer not shaped as Confluent's
        print(f"{name}: unexpected answer from the schema registry ({type(exc).__name__}: {_one_line(exc)})",
              file=sys.stderr)
        return 1
