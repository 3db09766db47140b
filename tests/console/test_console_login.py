"""`kbroker console --login`'s web side, driven as an ASGI application with the broker faked at
the backend (no sockets): the gate, the login check, the cookie, the session's credentials in
place of the command config's, logout, and the Access page of brokers without an authorizer.
compat-tests/test_console_acl.py runs the same against a real broker with ACLs."""

from __future__ import annotations

from http.cookies import SimpleCookie
from urllib.parse import urlencode, urlsplit

import anyio
import pytest
from kio.schema.errors import ErrorCode

from kbroker.admin.client import KafkaErrorResponse
from kbroker.admin.security import ClientSecurity
from kbroker.console import access
from kbroker.console.app import create_app
from kbroker.console.backend import ConsoleBackend
from kbroker.console.login import COOKIE, safe_next

HOST = "console.test"


def request(app, method: str, target: str, fields: dict | None = None, cookie: str | None = None,
            headers: dict | None = None) -> tuple[int, dict[str, list[str]], str]:
    """One HTTP exchange with the ASGI app: (status, headers by lower-case name, body)."""
    url = urlsplit(target)
    body = urlencode(fields or {}).encode()
    raw = [(b"host", HOST.encode())] + [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if cookie is not None:
        raw.append((b"cookie", f"{COOKIE}={cookie}".encode()))
    if fields is not None:
        raw.append((b"content-type", b"application/x-www-form-urlencoded"))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": url.path, "raw_path": url.path.encode(), "query_string": url.query.encode(), "root_path": "",
             "headers": raw, "client": ("127.0.0.1", 50000), "server": (HOST, 80)}
    inbox = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict] = []

    async def receive():
        return inbox.pop(0) if inbox else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    anyio.run(app, scope, receive, send)
    out: dict[str, list[str]] = {}
    for k, v in sent[0]["headers"]:
        out.setdefault(k.decode().lower(), []).append(v.decode())
    return sent[0]["status"], out, b"".join(m.get("body", b"") for m in sent[1:]).decode()


@pytest.fixture
def logins(monkeypatch):
    """The credentials each login authenticated with; alice's password is `right`."""
    seen: list[ClientSecurity] = []

    def authenticate(self):
        seen.append(self.pool.security)
        if self.pool.security.options["password"] != "right":
            raise KafkaErrorResponse(ErrorCode.sasl_authentication_failed, "SASL PLAIN authentication")

    def no_authorizer(client, principal, resource_type=None):
        raise KafkaErrorResponse(ErrorCode.security_disabled, "DescribeAcls", "No Authorizer is configured.")

    monkeypatch.setattr(ConsoleBackend, "authenticate", authenticate)
    monkeypatch.setattr(access, "principal_acls", no_authorizer)
    return seen


@pytest.fixture
def app():
    security = ClientSecurity("SASL_SSL", None, "SCRAM-SHA-512", {"username": "svc", "password": "svc-secret"})
    return create_app("127.0.0.1:1", 5.0, 1.0, security, login=True, idle_timeout_s=60, max_sessions=4)


def login(app, password="right", **extra) -> tuple[int, dict, str]:
    return request(app, "POST", "/login", {"username": "alice", "password": password, **extra})


def test_without_a_session(app):
    status, headers, _ = request(app, "GET", "/acls?principal=User:bob")
    assert status == 303 and headers["location"] == ["/login?next=%2Facls%3Fprincipal%3DUser%3Abob"]
    status, headers, _ = request(app, "GET", "/_live/topics")
    assert status == 401 and headers["hx-redirect"] == ["/login"]
    assert request(app, "POST", "/topics", {"name": "t", "confirm": "yes"})[0] == 401
    assert request(app, "POST", "/logout", {})[0] == 401
    status, _, body = request(app, "GET", "/login?next=/groups")
    assert status == 200 and 'name="next" value="/groups"' in body
    assert request(app, "GET", "/static/console.css")[0] == 200


def test_a_refused_login_makes_no_session(app, logins):
    status, headers, body = login(app, "wrong")
    assert status == 401 and "authentication failed" in body and "set-cookie" not in headers
    status, headers, body = request(app, "POST", "/login", {"username": "alice", "password": ""})
    assert status == 400 and "set-cookie" not in headers and len(logins) == 1  # not even tried
    status, headers, _ = request(app, "POST", "/login", {"username": "alice", "password": "right"},
                                 headers={"Origin": "http://elsewhere.example"})
    assert status == 403 and "set-cookie" not in headers


def test_a_login_talks_as_its_principal(app, logins):
    status, headers, _ = login(app, next="/acls")
    assert status == 303 and headers["location"] == ["/acls"]
    (raw,) = headers["set-cookie"]
    cookie = SimpleCookie(raw)[COOKIE]
    assert cookie["httponly"] and cookie["samesite"].lower() == "strict" and cookie["path"] == "/"
    assert not cookie["secure"] and not cookie["max-age"]  # a browser session's cookie, over http
    (used,) = logins
    assert (used.protocol, used.mechanism, dict(used.options)) == (
        "SASL_SSL", "SCRAM-SHA-512", {"username": "alice", "password": "right"})
    status, _, body = request(app, "GET", "/acls", cookie=cookie.value)
    assert status == 200 and 'id="principal">User:alice<' in body and 'value="User:alice"' in body
    assert 'id="no-authorizer"' in body and "The brokers have no authorizer" in body


def test_logout(app, logins):
    _, headers, _ = login(app)
    token = SimpleCookie(headers["set-cookie"][0])[COOKIE].value
    assert request(app, "POST", "/logout", {}, cookie=token, headers={"Origin": "http://elsewhere.example"})[0] == 403
    status, headers, _ = request(app, "POST", "/logout", {}, cookie=token)
    assert status == 303 and headers["location"] == ["/login"]
    assert SimpleCookie(headers["set-cookie"][0])[COOKIE].value == ""
    assert request(app, "GET", "/acls", cookie=token)[0] == 303


def test_a_principal_filter_must_name_a_type(app, logins):
    _, headers, _ = login(app)
    token = SimpleCookie(headers["set-cookie"][0])[COOKIE].value
    status, _, body = request(app, "GET", "/acls?principal=alice", cookie=token)
    assert status == 400 and "a principal is TYPE:NAME" in body


@pytest.mark.parametrize("target, expected", [
    ("/groups/g?x=1", "/groups/g?x=1"), (None, "/"), ("", "/"), ("//evil.example/", "/"),
    ("/\\evil.example", "/"), ("https://evil.example/", "/"), ("/a\r\nSet-Cookie: x", "/")])
def test_after_login_only_this_consoles_paths(target, expected):
    assert safe_next(target) == expected


def test_login_needs_sasl_with_a_password():
    from kbroker.console.command import login_problem

    assert login_problem(ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", {})) is None
    assert "security.protocol SASL_PLAINTEXT or SASL_SSL" in login_problem(None)
    assert "not SSL" in login_problem(ClientSecurity("SSL"))
    assert "not OAUTHBEARER" in login_problem(ClientSecurity("SASL_SSL", None, "OAUTHBEARER", {}))


def test_login_command_config_needs_no_credentials(tmp_path, monkeypatch, capsys):
    """--login's sessions bring their own username and password: the command config may leave out
    sasl.jaas.config; the console without --login, and every other command, still refuse that."""
    from kbroker import cli
    from kbroker.console import command

    config = tmp_path / "login.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n")
    ran = []
    monkeypatch.setattr(command, "run_console", lambda args: ran.append(args.client_security) or 0)
    assert cli.main(["console", "--login", "--command-config", str(config)]) == 0
    assert ran == [ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", {})]
    from kbroker.console.command import login_problem

    assert login_problem(ran[0]) is None
    capsys.readouterr()
    for argv in (["console"], ["topics", "list"], ["users", "list"]):
        assert cli.main([*argv, "--bootstrap-server", "127.0.0.1:1", "--command-config", str(config)]) == 1, argv
        err = capsys.readouterr().err
        assert err == (f"kbroker {argv[0]}: --command-config {config}: sasl.mechanism=SCRAM-SHA-512 needs "
                       f"sasl.jaas.config, e.g. org.apache.kafka.common.security.scram.ScramLoginModule required "
                       f'username="alice" password="alice-secret";\n'), argv
    assert ran == [ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", {})]
