"""`kbroker quotas`: argument parsing, and alter / describe against an in-process broker
(kbroker.testing): kafka-configs' entity options, strict describes of what is named, Kafka's error
names on one line with exit status 1, and the admin functions the command is made of."""

from __future__ import annotations

import argparse
import json

import pytest

from kbroker.admin.client import AdminClient
from kbroker.admin.quotas import ANY, add_quotas_command, alter_client_quotas, describe_client_quotas
from kbroker.cli import main
from kbroker.testing import KafkaContainer


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kbroker")
    add_quotas_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["quotas", *argv])


def test_parsing():
    args = parse("alter", "--user", "alice", "--client", "app", "--add-config", "producer_byte_rate=10")
    assert (args.quotas_command, args.user, args.client, args.add_config, args.validate_only) == (
        "alter", "alice", "app", "producer_byte_rate=10", False)
    args = parse("alter", "--user-defaults", "--client-id", "x", "--delete-config", "a,b", "--validate-only")
    assert (args.user_defaults, args.client, args.delete_config, args.validate_only) == (True, "x", "a,b", True)
    args = parse("describe", "--user", "--client-defaults", "--output", "json")
    assert (args.user, args.client, args.client_defaults, args.output) == (ANY, None, True, "json")
    assert parse("describe").user is None


@pytest.mark.parametrize("argv", [
    ["alter", "--user", "a", "--user-defaults", "--add-config", "x=1"],
    ["alter", "--client", "c", "--client-defaults", "--add-config", "x=1"],
    ["describe", "--output", "yaml"],
    ["drop", "--user", "a"],
])
def test_bad_arguments_are_refused(argv):
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2


@pytest.fixture(scope="module")
def bootstrap():
    with KafkaContainer(mode="thread") as broker:
        yield broker.get_bootstrap_server()


def run(capsys, *argv):
    code = main(["quotas", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_alter_and_describe(bootstrap, capsys):
    b = ("--bootstrap-server", bootstrap)
    assert run(capsys, "alter", *b, "--user", "alice", "--add-config",
               "producer_byte_rate=1048576,request_percentage=12.5")[:2] == (
        0, "Altered quotas of user 'alice': producer_byte_rate=1048576, request_percentage=12.5.\n")
    assert run(capsys, "alter", *b, "--user", "alice", "--client", "app", "--add-config", "consumer_byte_rate=7")[0] == 0
    assert run(capsys, "alter", *b, "--client-defaults", "--add-config", "controller_mutation_rate=3")[0] == 0
    code, out, _ = run(capsys, "describe", *b)
    assert code == 0
    assert out.splitlines()[1:] == [
        "-     <default> controller_mutation_rate 3",
        "alice -         producer_byte_rate       1048576",
        "alice -         request_percentage       12.5",
        "alice app       consumer_byte_rate       7",
    ]
    code, out, _ = run(capsys, "describe", *b, "--user", "alice", "--output", "json")
    assert json.loads(out) == [{"entity": {"user": "alice"},
                                "quotas": {"producer_byte_rate": 1048576.0, "request_percentage": 12.5}}]
    code, out, _ = run(capsys, "describe", *b, "--user", "--client", "--output", "json")
    assert json.loads(out) == [{"entity": {"user": "alice", "client-id": "app"}, "quotas": {"consumer_byte_rate": 7.0}}]
    assert run(capsys, "alter", *b, "--user", "alice", "--delete-config", "request_percentage",
               "--validate-only")[1] == "Validated quotas of user 'alice': request_percentage deleted.\n"
    with AdminClient(bootstrap) as admin:
        assert [e.values for e in describe_client_quotas(admin, [("user", "alice")], strict=True)] == [
            {"producer_byte_rate": 1048576.0, "request_percentage": 12.5}]  # validate-only changed nothing
        assert alter_client_quotas(admin, [({"client-id": None}, {"controller_mutation_rate": None})]) == [
            ({"client-id": None}, 0, None)]
        assert describe_client_quotas(admin, [("client-id", None)], strict=True) == []


def test_failures_are_one_line_with_kafkas_error(bootstrap, capsys):
    b = ("--bootstrap-server", bootstrap)
    code, out, err = run(capsys, "alter", *b, "--user", "bob", "--add-config", "producer_byte_rate=1.5")
    assert (code, out) == (1, "")
    assert err == ("kbroker quotas: AlterClientQuotas for user 'bob': INVALID_REQUEST "
                   "(Configuration producer_byte_rate must be a LONG value)\n")
    code, _, err = run(capsys, "alter", *b, "--user", "bob", "--add-config", "nope=1")
    assert code == 1 and "Invalid configuration key nope" in err
    code, _, err = run(capsys, "alter", *b, "--add-config", "producer_byte_rate=1")
    assert code == 1 and "name an entity" in err
    code, _, err = run(capsys, "alter", *b, "--user", "bob")
    assert code == 1 and "nothing to change" in err
    code, _, err = run(capsys, "alter", *b, "--user", "bob", "--add-config", "producer_byte_rate")
    assert code == 1 and "key=value" in err
