"""`kbroker schemas`: argument parsing; the sub-commands against a real `kbroker serve` process with
its schema registry listener (register, an incompatible schema refused with the registry's
error_code and message, verbose compatibility checks, list / get / --id, config and mode, soft then
permanent deletes); and the HTTP client's edges against small fake servers (a registry that is down
or silent, an answer too large, an error body that is not Confluent's, basic auth)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

import pytest

from kbroker.admin import schemas_cmd
from kbroker.admin.schemas_cmd import Reference, add_schemas_command
from kbroker.cli import main

REPO = Path(__file__).resolve().parents[2]


def compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))  # as the registry keeps an Avro schema's text


V1 = compact({"type": "record", "name": "Order", "namespace": "com.acme",
                 "fields": [{"name": "id", "type": "long"}]})
V2 = compact({"type": "record", "name": "Order", "namespace": "com.acme",
                 "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}]})
BAD = compact({"type": "record", "name": "Order", "namespace": "com.acme",
                  "fields": [{"name": "id", "type": "string"}, {"name": "note", "type": "string", "default": ""}]})

BAD_NEXT = compact({"type": "record", "name": "Order", "namespace": "com.acme",
                    "fields": [{"name": "id", "type": "string"}, {"name": "note", "type": "string", "default": ""},
                               {"name": "tag", "type": "string", "default": "x"}]})


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kbroker")
    add_schemas_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["schemas", *argv])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- parsing -----------------------------------------------------------------------------------------

def test_parsing():
    args = parse("register", "orders-value", "--schema", "{}", "--type", "protobuf",
                 "--reference", "other.proto=other-value:3", "--reference", "x=ctx:with:colons:latest", "--normalize")
    assert (args.schemas_command, args.subject, args.schema, args.type, args.normalize) == (
        "register", "orders-value", "{}", "PROTOBUF", True)
    assert args.reference == [Reference("other.proto", "other-value", "3"), Reference("x", "ctx:with:colons", "latest")]
    args = parse("get", "s", "--version", "LATEST", "--deleted", "--output", "json")
    assert (args.subject, args.version, args.deleted, args.output, args.id) == ("s", "latest", True, "json", None)
    assert parse("get", "--id", "7").id == 7
    assert parse("config", "--set", "full_transitive").set_value == "FULL_TRANSITIVE"
    args = parse("mode", "s", "--set", "import", "--force")
    assert (args.subject, args.set_value, args.force) == ("s", "IMPORT", True)
    assert parse("delete", "s", "--version", "2", "--permanent").version == "2"
    assert parse("list").registry_url is None  # the environment, then the default, at run time


@pytest.mark.parametrize("argv", [
    ["register", "s"],                                         # no schema
    ["register", "s", "--schema", "{}", "--schema-file", "f"],  # both
    ["register", "s", "--schema", "{}", "--type", "xml"],
    ["register", "s", "--schema", "{}", "--reference", "no-version=subj"],
    ["get", "s", "--version", "0"],
    ["get", "--id", "x"],
    ["config", "--set", "SOMETIMES"],
    ["config", "s", "--set", "FULL", "--delete"],
    ["mode", "--set", "WRITEONLY"],
    ["list", "--output", "yaml"],
    ["drop", "s"],
])
def test_bad_arguments_are_refused(argv):
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["schemas", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, message", [
    (["get"], "kbroker schemas get: get takes SUBJECT [--version V] or --id ID\n"),
    (["get", "s", "--id", "3"], "kbroker schemas get: get takes SUBJECT [--version V] or --id ID, not both\n"),
    (["list", "--registry-url", "ftp://host"],
     "kbroker schemas list: --registry-url must be http://HOST[:PORT][/PATH] or https://..., got 'ftp://host'\n"),
    (["list", "--basic-auth", "nocolon"], "kbroker schemas list: --basic-auth takes USER:PASSWORD\n"),
])
def test_usage_errors_exit_2(capsys, argv, message):
    assert run(capsys, *argv) == (2, "", message)


# -- against kbroker's registry ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A `kbroker serve` process with `schema.registry.listener`; yields the registry's URL."""
    work = tmp_path_factory.mktemp("schemas-broker")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop(schemas_cmd.URL_ENV, None)
    with open(work / "stderr.log", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "kbroker", "serve",
                                 "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                                 "--override", f"log.dirs={work / 'data'}",
                                 "--override", f"schema.registry.listener={url}"],
                                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                cwd=str(REPO), env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"kbroker exited with {proc.returncode}:\n{(work / 'stderr.log').read_text()[-3000:]}")
            try:  # the listener answers, and the registry has caught up with _schemas
                with urllib.request.urlopen(f"{url}/subjects", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"no schema registry at {url}:\n{(work / 'stderr.log').read_text()[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()  # only the process started here
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_register_check_get_list(registry, capsys, tmp_path):
    r = ("--registry-url", registry)
    v1_file = tmp_path / "order.avsc"
    v1_file.write_text(V1)
    assert run(capsys, "register", "orders-value", "--schema-file", str(v1_file), *r) == (0, "1\n", "")
    assert run(capsys, "register", "orders-value", "--schema", V1, *r) == (0, "1\n", "")  # the same: its id
    code, out, err = run(capsys, "check", "orders-value", "--schema", V2, *r)
    assert (code, out, err) == (0, "Compatible with subject 'orders-value'.\n", "")
    code, out, _ = run(capsys, "register", "orders-value", "--schema", V2, "--output", "json", *r)
    assert (code, json.loads(out)) == (0, {"id": 2})

    # an incompatible schema: refused, the registry's error_code and message on one line
    code, out, err = run(capsys, "register", "orders-value", "--schema", BAD, *r)
    assert (code, out) == (1, "")
    assert err.startswith("kbroker schemas register: error_code 409: Schema being registered is incompatible")
    assert "TYPE_MISMATCH" in err and err.count("\n") == 1

    code, out, err = run(capsys, "check", "orders-value", "--schema", BAD, *r)
    lines = out.splitlines()
    assert (code, err, lines[0]) == (1, "", "Incompatible with subject 'orders-value':")
    assert len(lines) >= 2 and "TYPE_MISMATCH" in lines[1] and "/fields/0/type" in lines[1]
    code, out, _ = run(capsys, "check", "orders-value", "--schema", BAD, "--version", "1", "--output", "json", *r)
    found = json.loads(out)
    assert code == 1 and found["is_compatible"] is False and any("TYPE_MISMATCH" in m for m in found["messages"])
    assert run(capsys, "check", "orders-value", "--schema", V1, "--version", "latest", *r) == (
        0, "Compatible with version latest of subject 'orders-value'.\n", "")

    assert run(capsys, "register", "customers-value", "--schema", '"string"', *r) == (0, "3\n", "")
    assert run(capsys, "list", *r) == (0, "customers-value\norders-value\n", "")
    assert run(capsys, "list", "--prefix", "ord", *r) == (0, "orders-value\n", "")
    assert run(capsys, "list", "--prefix", "nothing", *r) == (0, "", "")
    assert json.loads(run(capsys, "list", "--output", "json", *r)[1]) == ["customers-value", "orders-value"]

    code, out, _ = run(capsys, "get", "orders-value", *r)
    assert code == 0
    assert out.splitlines()[:6] == ["subject: orders-value", "version: 2", "id: 2", "type: AVRO", "references: -",
                                    "schema:"]
    assert json.loads("\n".join(out.splitlines()[6:])) == json.loads(V2)
    code, out, _ = run(capsys, "get", "orders-value", "--version", "1", "--output", "json", *r)
    assert (code, json.loads(out)) == (0, {"subject": "orders-value", "version": 1, "id": 1, "schemaType": "AVRO",
                                           "references": [], "schema": V1})
    code, out, _ = run(capsys, "get", "orders-value", "--version", "1", "--schema-only", *r)
    assert (code, json.loads(out)) == (0, json.loads(V1))
    code, out, _ = run(capsys, "get", "--id", "2", "--output", "json", *r)
    assert (code, json.loads(out)) == (0, {"id": 2, "schemaType": "AVRO", "references": [], "schema": V2})
    code, out, _ = run(capsys, "get", "--id", "3", *r)
    assert (code, out) == (0, 'id: 3\ntype: AVRO\nreferences: -\nschema:\n"string"\n')
    assert run(capsys, "get", "--id", "99", *r) == (1, "", "kbroker schemas get: error_code 40403: Schema 99 not found\n")
    code, out, err = run(capsys, "get", "orders-value", "--version", "7", *r)
    assert (code, out) == (1, "") and err.startswith("kbroker schemas get: error_code 40402: ")
    code, out, err = run(capsys, "get", "nobody", *r)
    assert (code, out) == (1, "") and err.startswith("kbroker schemas get: error_code 40401: ")


def test_references_and_other_types(registry, capsys):
    r = ("--registry-url", registry)
    money = compact({"type": "record", "name": "Money", "namespace": "com.acme",
                        "fields": [{"name": "cents", "type": "long"}]})
    invoice = compact({"type": "record", "name": "Invoice", "namespace": "com.acme",
                          "fields": [{"name": "total", "type": "com.acme.Money"}]})
    code, out, _ = run(capsys, "register", "money", "--schema", money, *r)
    assert code == 0
    money_id = int(out)
    code, out, err = run(capsys, "register", "invoices-value", "--schema", invoice,
                         "--reference", "com.acme.Money=money:latest", *r)
    assert (code, err) == (0, "")
    code, out, _ = run(capsys, "get", "invoices-value", "--output", "json", *r)
    assert json.loads(out)["references"] == [{"name": "com.acme.Money", "subject": "money", "version": 1}]
    code, out, _ = run(capsys, "get", "invoices-value", *r)
    assert "references: com.acme.Money=money:1" in out.splitlines()
    # without the reference the registry cannot resolve the name
    code, out, err = run(capsys, "register", "invoices2-value", "--schema", invoice, *r)
    assert (code, out) == (1, "") and err.startswith("kbroker schemas register: error_code 42201: ")
    assert run(capsys, "get", "--id", str(money_id), "--schema-only", *r)[1] == money + "\n"

    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    code, out, _ = run(capsys, "register", "json-value", "--schema", schema, "--type", "JSON", *r)
    assert code == 0
    code, out, _ = run(capsys, "get", "json-value", "--output", "json", *r)
    assert json.loads(out)["schemaType"] == "JSON"


def test_config_and_mode(registry, capsys):
    r = ("--registry-url", registry)
    assert run(capsys, "register", "cfg-value", "--schema", V1, *r)[0] == 0
    assert run(capsys, "config", *r) == (0, "BACKWARD\n", "")
    assert run(capsys, "config", "cfg-value", *r) == (
        0, "BACKWARD (the global compatibility level: subject 'cfg-value' has none of its own)\n", "")
    assert run(capsys, "config", "cfg-value", "--set", "none", *r) == (
        0, "Set the subject 'cfg-value' compatibility level to NONE.\n", "")
    assert json.loads(run(capsys, "config", "cfg-value", "--output", "json", *r)[1]) == {
        "subject": "cfg-value", "compatibilityLevel": "NONE", "inherited": False}
    # NONE: what BACKWARD refused is accepted
    assert run(capsys, "check", "cfg-value", "--schema", BAD, *r)[0] == 0
    assert run(capsys, "register", "cfg-value", "--schema", BAD, *r)[0] == 0
    assert run(capsys, "config", "cfg-value", "--delete", *r) == (
        0, "Deleted the subject 'cfg-value' compatibility level (was NONE).\n", "")
    assert json.loads(run(capsys, "config", "cfg-value", "--output", "json", *r)[1]) == {
        "subject": "cfg-value", "compatibilityLevel": "BACKWARD", "inherited": True}
    assert run(capsys, "config", "--set", "FULL", *r) == (0, "Set the global compatibility level to FULL.\n", "")
    assert run(capsys, "config", *r) == (0, "FULL\n", "")
    assert run(capsys, "config", "--set", "BACKWARD", *r)[0] == 0

    assert run(capsys, "mode", *r) == (0, "READWRITE\n", "")
    assert run(capsys, "mode", "cfg-value", "--set", "readonly", *r) == (
        0, "Set the subject 'cfg-value' mode to READONLY.\n", "")
    assert run(capsys, "mode", "cfg-value", *r) == (0, "READONLY\n", "")
    code, out, err = run(capsys, "register", "cfg-value", "--schema", V2, *r)
    assert (code, out) == (1, "")
    assert err.startswith("kbroker schemas register: error_code 42205: ") and "read-only" in err
    assert run(capsys, "register", "other-value", "--schema", V2, *r)[0] == 0  # only that subject
    assert run(capsys, "mode", "cfg-value", "--delete", *r) == (
        0, "Deleted the subject 'cfg-value' mode (was READONLY).\n", "")
    assert json.loads(run(capsys, "mode", "cfg-value", "--output", "json", *r)[1]) == {
        "subject": "cfg-value", "mode": "READWRITE", "inherited": True}
    code, out, _ = run(capsys, "register", "cfg-value", "--schema", BAD_NEXT, "--output", "json", *r)
    assert code == 0 and json.loads(out)["id"] > 0


def test_delete_soft_then_permanent(registry, capsys, monkeypatch):
    monkeypatch.setenv(schemas_cmd.URL_ENV, registry)  # no --registry-url: the environment's
    assert run(capsys, "register", "gone-value", "--schema", V1)[0] == 0
    assert run(capsys, "register", "gone-value", "--schema", V2)[0] == 0
    code, out, err = run(capsys, "delete", "gone-value", "--permanent")
    assert (code, out) == (1, "")
    assert err.startswith("kbroker schemas delete: error_code 40405: ")

    assert run(capsys, "delete", "gone-value", "--version", "1") == (0, "Deleted version 1 of subject 'gone-value'.\n", "")
    assert run(capsys, "get", "gone-value", "--version", "1")[0] == 1
    assert json.loads(run(capsys, "get", "gone-value", "--version", "1", "--deleted", "--output", "json")[1])[
        "version"] == 1
    assert run(capsys, "delete", "gone-value", "--version", "1", "--permanent") == (
        0, "Permanently deleted version 1 of subject 'gone-value'.\n", "")
    assert run(capsys, "get", "gone-value", "--version", "1", "--deleted")[0] == 1

    assert run(capsys, "delete", "gone-value") == (0, "Deleted subject 'gone-value' (versions 2).\n", "")
    assert "gone-value" not in run(capsys, "list")[1].splitlines()
    assert "gone-value" in run(capsys, "list", "--deleted")[1].splitlines()
    code, out, _ = run(capsys, "delete", "gone-value", "--permanent", "--output", "json")
    assert (code, json.loads(out)) == (0, {"subject": "gone-value", "versions": [2]})
    assert "gone-value" not in run(capsys, "list", "--deleted")[1].splitlines()
    code, _, err = run(capsys, "delete", "gone-value")
    assert code == 1 and err.startswith("kbroker schemas delete: error_code 40401: ")


def test_as_a_process(registry, tmp_path):
    """The real entry point: `python -m kbroker schemas`, the schema from stdin."""
    env = dict(os.environ, PYTHONPATH=str(REPO), KBROKER_SCHEMA_REGISTRY_URL=registry)
    done = subprocess.run([sys.executable, "-m", "kbroker", "schemas", "register", "stdin-value", "--schema-file", "-"],
                          input=V1, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60,
                          check=False)
    assert (done.returncode, done.stderr) == (0, "")
    schema_id = int(done.stdout)
    done = subprocess.run([sys.executable, "-m", "kbroker", "schemas", "get", "stdin-value", "--schema-only"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60,
                          check=False)
    assert (done.returncode, json.loads(done.stdout)) == (0, json.loads(V1))
    done = subprocess.run([sys.executable, "-m", "kbroker", "schemas", "get", "--id", str(schema_id), "--version", "x"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60,
                          check=False)
    assert done.returncode == 2 and "argument --version" in done.stderr


# -- the HTTP client's edges -------------------------------------------------------------------------

def test_registry_down(capsys):
    port = free_port()  # nothing listens there
    assert run(capsys, "list", "--registry-url", f"http://127.0.0.1:{port}") == (
        1, "", f"kbroker schemas list: cannot reach the schema registry at http://127.0.0.1:{port}: Connection refused\n")


def test_registry_silent(capsys):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        started = time.monotonic()
        code, out, err = run(capsys, "get", "s", "--registry-url", f"http://127.0.0.1:{port}", "--timeout", "0.5")
        assert time.monotonic() - started < 10
    assert (code, out, err) == (
        1, "", f"kbroker schemas get: no answer from the schema registry at http://127.0.0.1:{port} within 0.5s\n")


class FakeRegistry:
    """An HTTP server answering every request with (status, headers, body) and remembering requests."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fake.requests.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
                self.send_response(status)
                for k, v in (headers or {"Content-Length": str(len(body))}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_basic_auth_path_prefix_and_request(capsys, monkeypatch):
    with FakeRegistry(200, b'{"id": 42}') as fake:
        monkeypatch.setenv(schemas_cmd.AUTH_ENV, "env:secret")
        code, out, err = run(capsys, "register", "a/b", "--schema", "syntax = \"proto3\";", "--type", "PROTOBUF",
                             "--reference", "x.proto=x-value:2", "--normalize", "--basic-auth", "alice:s3:cret",
                             "--registry-url", fake.url + "/registry/")
        assert (code, out, err) == (0, "42\n", "")
        method, path, headers, body = fake.requests[0]
        assert (method, path) == ("POST", "/registry/subjects/a%2Fb/versions?normalize=true")
        assert headers["Authorization"] == "Basic " + base64.b64encode(b"alice:s3:cret").decode()
        assert headers["Content-Type"] == "application/vnd.schemaregistry.v1+json"
        assert json.loads(body) == {"schema": 'syntax = "proto3";', "schemaType": "PROTOBUF",
                                    "references": [{"name": "x.proto", "subject": "x-value", "version": 2}]}
        assert run(capsys, "list", "--registry-url", fake.url) == (  # {"id": 42} is no subject list
            1, "", ("kbroker schemas list: unexpected answer from the schema registry (ValueError: a list of "
                    "subjects expected)\n"))
        assert fake.requests[1][2]["Authorization"] == "Basic " + base64.b64encode(b"env:secret").decode()
        monkeypatch.delenv(schemas_cmd.AUTH_ENV)
        run(capsys, "list", "--registry-url", fake.url.replace("http://", "http://bob:pw@"))
        assert fake.requests[2][2]["Authorization"] == "Basic " + base64.b64encode(b"bob:pw").decode()
        run(capsys, "list", "--registry-url", fake.url)
        assert "Authorization" not in fake.requests[3][2]


def test_error_bodies(capsys):
    with FakeRegistry(401, b'{"error_code": 40101, "message": "Unauthorized:\\n bad  credentials"}') as fake:
        assert run(capsys, "list", "--registry-url", fake.url) == (
            1, "", "kbroker schemas list: error_code 40101: Unauthorized: bad credentials\n")
    with FakeRegistry(502, b"<html><body>\n<h1>Bad gateway</h1>\n</body></html>",
                      {"Content-Type": "text/html"}) as fake:
        assert run(capsys, "list", "--registry-url", fake.url) == (
            1, "", "kbroker schemas list: HTTP 502: Bad Gateway <html><body> <h1>Bad gateway</h1> </body></html>\n")
    with FakeRegistry(200, b"not json") as fake:
        code, out, err = run(capsys, "list", "--registry-url", fake.url)
        assert (code, out) == (1, "") and "something other than JSON: not json" in err


def test_answers_too_large_are_refused(capsys, monkeypatch):
    with FakeRegistry(200, b"[]", {"Content-Length": str(100 << 20)}) as fake:  # announced: refused unread
        assert run(capsys, "list", "--registry-url", fake.url) == (
            1, "", (f"kbroker schemas list: the schema registry at {fake.url} answered {100 << 20} bytes, "
                    "over the 64 MiB this command accepts\n"))
    monkeypatch.setattr(schemas_cmd.RegistryClient, "max_response_bytes", 1000)
    big = json.dumps([f"subject-{i}" for i in range(200)]).encode()
    with FakeRegistry(200, big, {"Connection": "close"}) as fake:  # no length: counted while read
        code, out, err = run(capsys, "list", "--registry-url", fake.url)
        assert (code, out) == (1, "") and err.endswith("answered over the 1000 bytes this command accepts\n")
    with FakeRegistry(200, big[:900]) as fake:
        assert run(capsys, "list", "--registry-url", fake.url)[0] == 1  # cut short: not JSON, still one line


def test_check_falls_back_to_latest_on_an_older_registry(capsys):
    """A registry without POST /compatibility/subjects/{s}/versions (404 error_code 404)."""
    answers = iter([(404, b'{"error_code": 404, "message": "HTTP 404 Not Found"}'),
                    (200, b'{"is_compatible": true}')])
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.path)
            status, body = next(answers)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert run(capsys, "check", "s", "--schema", "{}", "--registry-url", f"http://127.0.0.1:{server.server_address[1]}") == (
            0, "Compatible with the latest version of subject 's'.\n", "")
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["/compatibility/subjects/s/versions?verbose=true",
                    "/compatibility/subjects/s/versions/latest?verbose=true"]
