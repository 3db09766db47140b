"""`kbroker acls` (kafka-acls.sh's options): the ACLs the options make (AclCommand's rules: --operation
defaulting to All, hosts to *, --producer / --consumer / --idempotent, --cluster only with the
literal pattern type, the per-type operation check) and its refusals with Kafka's words, then
--add / --list / --remove against an in-process broker with the ACL authorizer (kbroker.testing)."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from kbroker.admin.acls import UsageError, add_acls_command, check_args, filters_to_entries, resource_filters
from kbroker.cli import main
from kbroker.security.acl import (
    AccessControlEntry as Ace,
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternType as PT,
    ResourcePatternFilter as RPF,
    ResourceType as RT,
)
from kbroker.testing import KafkaContainer


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kbroker")
    add_acls_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["acls", *argv])


def test_operations_default_to_all_and_hosts_to_any():
    args = parse("--add", "--allow-principal", "User:alice", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9",
                 "--topic", "orders", "--group", "g")
    assert filters_to_entries(args) == {
        RPF(RT.TOPIC, "orders", PT.LITERAL): [Ace("User:alice", "*", Op.ALL, Perm.ALLOW),
                                              Ace("User:bob", "10.0.0.9", Op.ALL, Perm.DENY)],
        RPF(RT.GROUP, "g", PT.LITERAL): [Ace("User:alice", "*", Op.ALL, Perm.ALLOW),
                                         Ace("User:bob", "10.0.0.9", Op.ALL, Perm.DENY)]}


def test_producer_and_consumer_shortcuts_are_kafkas():
    args = parse("--add", "--allow-principal", "User:app", "--producer", "--consumer", "--topic", "t", "--group", "g",
                 "--transactional-id", "tx", "--idempotent", "--resource-pattern-type", "prefixed")
    made = {f: {(e.operation, e.permission_type) for e in entries} for f, entries in filters_to_entries(args).items()}
    allow = lambda *ops: {(o, Perm.ALLOW) for o in ops}  # noqa: E731
    assert made == {
        RPF(RT.TOPIC, "t", PT.PREFIXED): allow(Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ),
        RPF(RT.TRANSACTIONAL_ID, "tx", PT.PREFIXED): allow(Op.WRITE, Op.DESCRIBE),
        RPF(RT.CLUSTER, "kafka-cluster", PT.LITERAL): allow(Op.IDEMPOTENT_WRITE),
        RPF(RT.GROUP, "g", PT.PREFIXED): allow(Op.READ)}


def test_cluster_only_with_the_literal_pattern_type_as_kafka():
    assert resource_filters(parse("--list", "--cluster")) == [RPF(RT.CLUSTER, "kafka-cluster", PT.LITERAL)]
    assert resource_filters(parse("--list", "--cluster", "--resource-pattern-type", "match"), die_if_none=False) == []


def test_operation_names_as_kafka_and_as_the_enum():
    args = parse("--add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--operation",
                 "describe_configs", "--cluster")
    assert {e.operation for e in next(iter(filters_to_entries(args).values()))} == {Op.IDEMPOTENT_WRITE,
                                                                                    Op.DESCRIBE_CONFIGS}


@pytest.mark.parametrize("argv, words", [
    (["--list", "--producer", "--topic", "t"], 'Option "[list]" can\'t be used with option "[producer]"'),
    (["--add", "--producer", "--operation", "Read", "--topic", "t"], '"[producer]" can\'t be used with option "[operation]"'),
    (["--add", "--principal", "User:a", "--topic", "t"], "The --principal option is only available if --list is set"),
    (["--add", "--producer", "--allow-principal", "User:a"], "With --producer you must specify a --topic"),
    (["--add", "--idempotent", "--topic", "t"], "The --idempotent option is only available if --producer is set"),
    (["--add", "--consumer", "--topic", "t"], "With --consumer you must specify a --topic and a --group"),
])
def test_option_refusals_are_kafkas(argv, words):
    with pytest.raises(UsageError, match=words.replace("[", r"\[").replace("]", r"\]")):
        check_args(parse(*argv))


@pytest.mark.parametrize("argv, words", [
    (["--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"],
     "ResourceType GROUP only supports operations All, Read, Delete, Describe, DescribeConfigs, AlterConfigs"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "unknown operation 'Fly'"),
    (["--add", "--allow-principal", "User:a", "--resource-pattern-type", "glob", "--topic", "t"],
     "Unknown resource-pattern-type: glob"),
    (["--add", "--allow-principal", "alice", "--topic", "t"],
     "expected a string in format principalType:principalName but got alice"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
])
def test_option_values_refused_before_anything_is_sent(capsys, argv, words):
    assert main(["acls", "--bootstrap-server", "127.0.0.1:1", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kbroker acls: ") and words in err and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def bootstrap():
    container = (KafkaContainer(mode="thread").with_config("authorizer.class.name", "kbroker.security.authorizer.AclAuthorizer")
                 .with_config("super.users", "User:ANONYMOUS"))
    with container as broker:
        yield broker.get_bootstrap_server()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["acls", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def listed(capsys, bootstrap, *argv: str) -> list[dict]:
    status, out, err = run(capsys, "--bootstrap-server", bootstrap, "--list", "--output", "json", *argv)
    assert status == 0, err
    return json.loads(out)


def test_add_list_remove(bootstrap, capsys, monkeypatch):
    b = ("--bootstrap-server", bootstrap)
    status, out, err = run(capsys, *b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic",
                           "orders", "--topic", "team-", "--resource-pattern-type", "prefixed")
    assert (status, err) == (0, "")
    assert out.startswith("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
                          "patternType=PREFIXED)`: \n \t(principal=User:alice, host=*, operation=READ, "
                          "permissionType=ALLOW) \n")
    assert run(capsys, *b, "--add", "--deny-principal", "User:bob", "--topic", "team-orders")[0] == 0
    rows = listed(capsys, bootstrap, "--topic", "team-orders", "--resource-pattern-type", "match")
    assert [(r["name"], r["patternType"], r["principal"], r["operation"], r["permissionType"]) for r in rows] == [
        ("team-orders", "LITERAL", "User:bob", "ALL", "DENY"), ("team-", "PREFIXED", "User:alice", "READ", "ALLOW")]
    status, out, _ = run(capsys, *b, "--list", "--principal", "User:bob")
    assert out.splitlines()[0] == "ACLs for principal `User:bob`" and "User:alice" not in out

    # removing asks; an answer other than y (or none) removes nothing
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    status, out, _ = run(capsys, *b, "--remove", "--topic", "team-orders")
    assert status == 0 and "Are you sure you want to delete all ACLs for resource filter" in out
    assert len(listed(capsys, bootstrap)) == 3
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert run(capsys, *b, "--remove", "--topic", "team-orders")[0] == 0
    # an entry named exactly: only that one goes (operation All by default matches only All)
    assert run(capsys, *b, "--remove", "--allow-principal", "User:alice", "--topic", "orders",
               "--resource-pattern-type", "prefixed", "--force")[1].strip().endswith("Removed 0 ACLs of resource "
                                                                                     "filter `ResourcePattern("
                                                                                     "resourceType=TOPIC, name=orders, "
                                                                                     "patternType=PREFIXED)`.")
    status, out, _ = run(capsys, *b, "--remove", "--allow-principal", "User:alice", "--operation", "Read",
                         "--topic", "orders", "--topic", "team-", "--resource-pattern-type", "prefixed", "--force")
    assert status == 0 and out.count("Removed 1 ACL of") == 2
    assert listed(capsys, bootstrap) == []


def test_a_broker_without_an_authorizer_says_so(capsys):
    with KafkaContainer(mode="thread") as broker:
        status, out, err = run(capsys, "--bootstrap-server", broker.get_bootstrap_server(), "--list")
    assert status == 1 and "SECURITY_DISABLED" in err and "No Authorizer is configured on the broker" in err
