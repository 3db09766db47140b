"""`kbroker users`: argument parsing, and add / alter / list / delete against an in-process broker
(kbroker.testing): the password salted on the client side, Kafka's error names on one line with exit
status 1, `add` refusing an existing user and `alter` a missing one."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from kbroker.admin.client import AdminClient
from kbroker.admin.users import (
    Upsertion,
    add_users_command,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from kbroker.cli import main
from kbroker.testing import KafkaContainer


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kbroker")
    add_users_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["users", *argv])


def test_parsing():
    args = parse("add", "alice", "--password-stdin", "--bootstrap-server", "h:1")
    assert (args.users_command, args.user, args.password_stdin, args.password, args.mechanism, args.iterations,
            args.bootstrap_server) == ("add", "alice", True, None, "SCRAM-SHA-512", 4096, "h:1")
    args = parse("alter", "bob", "--password", "pw", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192")
    assert (args.users_command, args.password, args.mechanism, args.iterations) == ("alter", "pw", "SCRAM-SHA-256", 8192)
    args = parse("list", "--output", "json")
    assert (args.users_command, args.user, args.output) == ("list", [], "json")
    assert parse("list", "a", "b").user == ["a", "b"]
    args = parse("delete", "alice")
    assert (args.users_command, args.user, args.mechanism) == ("delete", "alice", None)
    assert parse("delete", "alice", "--mechanism", "SCRAM-SHA-256").mechanism == "SCRAM-SHA-256"


@pytest.mark.parametrize("argv", [
    ["add", "alice"],  # no password source
    ["add", "alice", "--password", "x", "--password-stdin"],  # two
    ["add", "alice", "--password", "x", "--mechanism", "PLAIN"],
    ["delete", "alice", "--mechanism", "SCRAM-SHA-1"],
    ["list", "--output", "yaml"],
    ["rename", "alice"],
])
def test_bad_arguments_are_refused(argv):
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2


@pytest.fixture(scope="module")
def bootstrap():
    with KafkaContainer(mode="thread") as broker:
        yield broker.get_bootstrap_server()


def run(capsys, *argv: str, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    status = main(["users", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_add_alter_list_delete(bootstrap, capsys, monkeypatch):
    b = ("--bootstrap-server", bootstrap)
    status, out, err = run(capsys, "add", "alice", "--password-stdin", *b, stdin="s3cret\n", monkeypatch=monkeypatch)
    assert (status, err) == (0, "") and out.strip() == "Added SCRAM-SHA-512 credential of user alice (4096 iterations)."
    assert run(capsys, "add", "bob", "--password", "pw", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192", *b)[0] == 0

    status, out, err = run(capsys, "add", "alice", "--password", "again", *b)
    assert status == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "DUPLICATE_RESOURCE" in err and "SCRAM-SHA-512" in err
    status, out, err = run(capsys, "alter", "nobody", "--password", "pw", *b)
    assert status == 1 and "RESOURCE_NOT_FOUND" in err and len(err.strip().splitlines()) == 1

    assert run(capsys, "alter", "alice", "--password", "new", "--mechanism", "SCRAM-SHA-256", "--iterations", "5000",
               *b)[0] == 0
    status, out, _ = run(capsys, "list", "--output", "json", *b)
    assert status == 0
    assert json.loads(out) == [
        {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 5000},
        {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 4096},
        {"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": 8192},
    ]
    status, out, _ = run(capsys, "list", "bob", *b)
    assert out.splitlines() == ["USER MECHANISM     ITERATIONS", "bob  SCRAM-SHA-256 8192"]

    status, out, err = run(capsys, "delete", "alice", "--mechanism", "SCRAM-SHA-256", *b)
    assert status == 0 and out.strip() == "Deleted SCRAM-SHA-256 credential of user alice."
    status, out, err = run(capsys, "delete", "alice", "--mechanism", "SCRAM-SHA-256", *b)
    assert status == 1 and "RESOURCE_NOT_FOUND" in err and "Attempt to delete a user credential that does not exist" in err
    status, out, err = run(capsys, "delete", "bob", *b)
    assert (status, out.strip()) == (0, "Deleted SCRAM-SHA-256 credential of user bob.")
    status, out, err = run(capsys, "list", "bob", *b)
    assert status == 1 and "RESOURCE_NOT_FOUND" in err and "Traceback" not in err
    assert json.loads(run(capsys, "list", "--output", "json", *b)[1]) == [
        {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    run(capsys, "delete", "alice", *b)


def test_errors_are_one_line_with_kafkas_name(bootstrap, capsys, monkeypatch):
    b = ("--bootstrap-server", bootstrap)
    for argv, name in ((("add", "carol", "--password", "pw", "--iterations", "100"), "UNACCEPTABLE_CREDENTIAL"),
                       (("alter", "carol", "--password", "pw", "--iterations", "99999"), "UNACCEPTABLE_CREDENTIAL"),
                       (("add", "", "--password", "pw"), "RESOURCE_NOT_FOUND"),
                       (("delete", "carol"), "RESOURCE_NOT_FOUND")):
        status, out, err = run(capsys, *argv, *b)
        assert status == 1 and out == "" and name in err and len(err.strip().splitlines()) == 1, (argv, err)
    status, _, err = run(capsys, "add", "carol", "--password-stdin", *b, stdin="", monkeypatch=monkeypatch)
    assert status == 1 and "password is empty" in err
    status, _, err = run(capsys, "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2")
    assert status == 1 and err.startswith("kbroker users:") and "Traceback" not in err


def test_library_calls_salt_on_the_client(bootstrap):
    with AdminClient(bootstrap) as admin:
        answers = alter_user_scram_credentials(admin, [Upsertion("dave", "SCRAM-SHA-256", "pw", 4096, salt=b"s" * 16),
                                                       Upsertion("erin", "SCRAM-SHA-512", b"pw")])
        assert answers == {"dave": (0, None), "erin": (0, None)}
        found = describe_user_scram_credentials(admin, ["dave", "erin"])
        assert [(c.mechanism, c.iterations) for c in found["dave"]] == [("SCRAM-SHA-256", 4096)]
        assert "pw" not in repr(Upsertion("x", "SCRAM-SHA-256", "pw"))
        answers = alter_user_scram_credentials(admin, deletions=[("dave", "SCRAM-SHA-256"), ("erin", "SCRAM-SHA-512")])
        assert answers == {"dave": (0, None), "erin": (0, None)}
        assert describe_user_scram_credentials(admin) == {}
