"""`kbroker console --login` against a broker with an authorizer: one broker (SASL_PLAINTEXT, PLAIN
users, `authorizer.class.name` set, super user admin; aclkit.start) and one console process
started with `--login` and admin's command config — whose credentials each session's replace.

alice may READ and DESCRIBE the topics prefixed `team.`, READ group `team-g` and DESCRIBE group
`team-view`, and DESCRIBE the cluster (which DescribeAcls needs: without it she could not list her
own ACLs); bob may only DESCRIBE the `team.` topics. Driven over HTTP (urllib, no browser): the
login gate, the Access page, the broker's refusals as 403 pages that name the principal and the
missing operation (and nothing changed, checked with an admin client), forms hidden from the
authorized operations, logout, forged cookies, and the start-up checks of --login.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

import aclkit
import consolekit
import securitykit as sk
from aclkit import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, Grant
from kbroker.admin.client import AdminClient, KafkaErrorResponse
from kbroker.admin.security import client_security

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("kbroker")]

COOKIE = "kbroker_console_session"
TEAM_TOPIC, SECRET_TOPIC = "team.orders", "secret"
COMMITTED = {"other-g": 3, "team-g": 2, "team-view": 1}  # each group's committed offset of team.orders-0
GRANTS = [
    Grant(TOPIC, "team.", "READ", "User:alice", "PREFIXED"),
    Grant(TOPIC, "team.", "DESCRIBE", "User:alice", "PREFIXED"),
    Grant(GROUP, "team-g", "READ", "User:alice"),
    Grant(GROUP, "team-view", "DESCRIBE", "User:alice"),
    Grant(CLUSTER, CLUSTER_NAME, "DESCRIBE", "User:alice"),
    Grant(TOPIC, "team.", "DESCRIBE", "User:bob", "PREFIXED"),
]


@pytest.fixture(scope="module")
def acl(kt, tmp_path_factory):
    yield from aclkit.start(kt, tmp_path_factory.mktemp("console-acl"), ["alice", "bob"])


@pytest.fixture(scope="module")
def kbroker(acl):
    return acl.broker


def admin_client(acl) -> AdminClient:
    return AdminClient(acl.bootstrap, 15, client_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{sk.PLAIN_LOGIN} required username="admin" password="{acl.passwords["admin"]}";'}))


class LoginConsole(consolekit.Console):
    """`kbroker console --login --command-config <admin's>`, stopped by PID."""

    def __init__(self, bootstrap: str, workdir: Path, command_config: Path) -> None:
        from conftest import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(workdir) / "console.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kbroker", "console", "--bootstrap-server", bootstrap, "--port",
                 str(self.port), "--refresh", "1", "--login", "--command-config", str(command_config)],
                stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parent.parent)
        deadline = time.monotonic() + consolekit.READY_S
        while True:
            try:
                with urllib.request.urlopen(self.url + "/static/console.css", timeout=2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the console did not start: {self.log_tail()}")
                time.sleep(0.2)


@pytest.fixture(scope="module")
def console(acl, tmp_path_factory):
    with admin_client(acl) as admin:
        for topic in (TEAM_TOPIC, SECRET_TOPIC):
            admin.create_topic(topic, 1, 1)
        for group, offset in COMMITTED.items():
            admin.commit_offsets(group, {(TEAM_TOPIC, 0): offset})
    acl.grant(GRANTS)
    c = LoginConsole(acl.bootstrap, tmp_path_factory.mktemp("console-acl-http"), acl.command_config("admin"))
    yield c
    c.stop()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def call(console, method: str, path: str, fields=None, cookie: str | None = None,
         headers: dict | None = None) -> tuple[int, str, object]:
    """(status, body, headers), redirects not followed."""
    data = None if fields is None else urllib.parse.urlencode(fields, doseq=True).encode()
    all_headers = dict(headers or {})
    if cookie is not None:
        all_headers["Cookie"] = f"{COOKIE}={cookie}"
    req = urllib.request.Request(console.url + path, data=data, headers=all_headers, method=method)
    try:
        with urllib.request.build_opener(_NoRedirect).open(req, timeout=30) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


def login(console, acl, user: str) -> str:
    status, body, headers = call(console, "POST", "/login", {"username": user, "password": acl.passwords[user]})
    assert status == 303, body[:500]
    raw = headers.get("Set-Cookie")
    cookie = SimpleCookie(raw)[COOKIE]
    assert cookie["httponly"] and cookie["samesite"].lower() == "strict" and cookie["path"] == "/", raw
    return cookie.value


@pytest.fixture(scope="module")
def alice(console, acl):
    return login(console, acl, "alice")


def test_without_a_session_pages_redirect_and_posts_are_401(console):
    status, _, headers = call(console, "GET", "/")
    assert status == 303 and headers["Location"] == "/login"
    status, _, headers = call(console, "GET", "/topics?x=1")
    assert status == 303 and headers["Location"] == "/login?next=%2Ftopics%3Fx%3D1"
    status, _, headers = call(console, "GET", "/_live/topics")
    assert status == 401 and headers["HX-Redirect"] == "/login"
    for path in ("/topics", "/groups/team-g", "/logout"):
        assert call(console, "POST", path, {"name": "never", "confirm": "yes"})[0] == 401, path
    status, body, _ = call(console, "GET", "/login")
    assert status == 200 and 'id="login"' in body and 'href="/topics"' not in body  # no nav before logging in


def test_a_wrong_password_is_refused_without_a_session(console, acl):
    status, body, headers = call(console, "POST", "/login", {"username": "alice", "password": "not-her-password"})
    assert status == 401 and "authentication failed" in body and headers.get("Set-Cookie") is None
    status, body, headers = call(console, "POST", "/login", {"username": "nobody", "password": "x"})
    assert status == 401 and "authentication failed" in body and headers.get("Set-Cookie") is None
    status, _, headers = call(console, "POST", "/login", {"username": "alice", "password": acl.passwords["alice"]},
                              headers={"Origin": "http://elsewhere.example"})
    assert status == 403 and headers.get("Set-Cookie") is None  # the login form's cross-site check


def test_forged_cookies_are_refused(console):
    for forged in ("forged", "A" * 43, ""):
        status, _, headers = call(console, "GET", "/topics", cookie=forged)
        assert status == 303 and headers["Location"].startswith("/login"), forged
        assert call(console, "POST", "/topics", {"name": "never", "confirm": "yes"}, cookie=forged)[0] == 401


def test_alice_sees_her_acls_and_her_name(console, alice):
    status, body, _ = call(console, "GET", "/acls", cookie=alice)
    assert status == 200 and 'id="principal">User:alice<' in body and 'action="/logout"' in body
    _, fragment, _ = call(console, "GET", "/_live/acls", cookie=alice)
    for row in ("TOPIC:PREFIXED:team.:User:alice:READ:ALLOW", "TOPIC:PREFIXED:team.:User:alice:DESCRIBE:ALLOW",
                "GROUP:LITERAL:team-g:User:alice:READ:ALLOW", "CLUSTER:LITERAL:kafka-cluster:User:alice:DESCRIBE:ALLOW"):
        assert f'data-acl="{row}"' in fragment, row
    assert "User:bob" not in fragment  # her own by default
    _, body, _ = call(console, "GET", "/acls?principal=User:bob", cookie=alice)
    assert 'data-acl="TOPIC:PREFIXED:team.:User:bob:DESCRIBE:ALLOW"' in body and ":User:alice:" not in body
    _, body, _ = call(console, "GET", "/acls?principal=", cookie=alice)
    assert body.count('class="acl"') == len(GRANTS)


def test_a_principal_without_cluster_describe_is_told_so(console, acl):
    bob = login(console, acl, "bob")
    status, body, _ = call(console, "GET", "/acls", cookie=bob)
    assert status == 403 and "this principal may not describe ACLs (DESCRIBE on the cluster)" in body
    assert "User:bob may not DESCRIBE the cluster" in body and 'class="error"' not in body


def test_alice_may_not_create_a_topic(console, acl, alice):
    _, body, _ = call(console, "GET", "/topics", cookie=alice)
    assert 'id="create-topic"' not in body and 'id="no-create"' in body  # hidden: no CREATE anywhere
    status, body, _ = call(console, "POST", "/topics", {"name": "payments", "partitions": "1", "confirm": "yes"},
                           cookie=alice)
    assert status == 403 and "User:alice may not CREATE topic payments" in body, body[:2000]
    assert 'id="refused-operation">CREATE<' in body
    with admin_client(acl) as admin, pytest.raises(KafkaErrorResponse, match="UNKNOWN_TOPIC_OR_PARTITION"):
        admin.describe_topics(["payments"])


def test_alice_may_not_reset_a_group_she_may_not_read(console, acl, alice):
    planned = {"planned": [f"{TEAM_TOPIC}:0:0"], "confirm": "yes"}
    status, body, _ = call(console, "POST", "/groups/other-g", planned, cookie=alice)
    assert status == 403 and "User:alice may not READ group other-g" in body, body[:2000]
    status, body, _ = call(console, "POST", "/groups/other-g", {"topic": "", "strategy": "to-earliest"}, cookie=alice)
    assert status == 403 and "User:alice may not DESCRIBE group other-g" in body  # the preview too
    with admin_client(acl) as admin:
        assert admin.committed_offsets("other-g") == {(TEAM_TOPIC, 0): COMMITTED["other-g"]}


def test_a_reset_with_one_refused_topic_commits_nothing(console, acl, alice):
    planned = {"planned": [f"{TEAM_TOPIC}:0:0", f"{SECRET_TOPIC}:0:0"], "confirm": "yes"}
    status, body, _ = call(console, "POST", "/groups/team-g", planned, cookie=alice)
    assert status == 403 and f"User:alice may not READ topic {SECRET_TOPIC}" in body, body[:2000]
    with admin_client(acl) as admin:  # team.orders was not committed either (OffsetCommit would have)
        assert admin.committed_offsets("team-g") == {(TEAM_TOPIC, 0): COMMITTED["team-g"]}


def test_the_reset_form_follows_the_groups_authorized_operations(console, alice):
    status, body, _ = call(console, "GET", "/groups/team-g", cookie=alice)
    assert status == 200 and 'id="reset-offsets"' in body
    status, body, _ = call(console, "GET", "/groups/team-view", cookie=alice)
    assert status == 200 and 'id="reset-offsets"' not in body and 'id="no-reset"' in body
    status, body, _ = call(console, "GET", "/groups/other-g", cookie=alice)
    assert status == 403 and "User:alice may not DESCRIBE group other-g" in body and 'class="error"' not in body


def test_alice_does_not_see_a_topic_she_may_not_describe(console, alice):
    status, body, _ = call(console, "GET", "/_live/topics", cookie=alice)
    assert status == 200 and f'data-topic="{TEAM_TOPIC}"' in body and f'data-topic="{SECRET_TOPIC}"' not in body
    status, body, _ = call(console, "GET", f"/topics/{SECRET_TOPIC}", cookie=alice)
    assert status == 403 and f"User:alice may not DESCRIBE topic {SECRET_TOPIC}" in body and 'class="error"' not in body
    status, body, _ = call(console, "GET", f"/_live/topics/{SECRET_TOPIC}", cookie=alice)
    assert status == 200 and f"User:alice may not DESCRIBE topic {SECRET_TOPIC}" in body
    status, body, _ = call(console, "GET", f"/topics/{TEAM_TOPIC}", cookie=alice)  # no DESCRIBE_CONFIGS: only those
    assert status == 200 and 'data-partition="0"' in body
    assert f"User:alice may not DESCRIBE_CONFIGS topic {TEAM_TOPIC}" in body


def test_admin_may_create_the_topic(console, acl):
    admin = login(console, acl, "admin")
    _, body, _ = call(console, "GET", "/topics", cookie=admin)
    assert 'id="create-topic"' in body and 'id="principal">User:admin<' in body
    status, _, headers = call(console, "POST", "/topics", {"name": "payments", "partitions": "2", "confirm": "yes"},
                              cookie=admin)
    assert status == 303 and headers["Location"].endswith("/topics/payments?done=created")
    with admin_client(acl) as client:
        _, (topic,) = client.describe_topics(["payments"])
    assert len(topic.partitions) == 2


def test_logout_ends_the_session(console, acl):
    cookie = login(console, acl, "alice")
    assert call(console, "GET", "/", cookie=cookie)[0] == 200
    status, _, headers = call(console, "POST", "/logout", {}, cookie=cookie)
    assert status == 303 and headers["Location"] == "/login"
    status, _, headers = call(console, "GET", "/", cookie=cookie)
    assert status == 303 and headers["Location"] == "/login"
    assert call(console, "GET", "/_live/acls", cookie=cookie)[0] == 401


def test_login_needs_a_sasl_command_config(acl, tmp_path):
    plaintext = sk.write_properties(tmp_path / "plain.properties", {"security.protocol": "PLAINTEXT"})
    for extra in ([], ["--command-config", str(plaintext)]):
        cp = subprocess.run([sys.executable, "-m", "kbroker", "console", "--bootstrap-server", acl.bootstrap,
                             "--port", "0", "--login", *extra], capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parent.parent)
        assert cp.returncode == 2, cp.stderr
        (line,) = cp.stderr.strip().splitlines()
        assert "--login needs --command-config with security.protocol SASL_PLAINTEXT or SASL_SSL" in line
