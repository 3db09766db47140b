"""DescribeUserScramCredentials v0 and AlterUserScramCredentials v0 through the dispatch table on a
real single-node broker: Kafka's ZooKeeper-mode semantics (ZkAdminManager) and every error code,
the stored credential being what the salted password makes, and nothing applied for a refused user."""

import functools
import json
import os

import pytest
import trio

from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode
from kbroker.security.credentials import make_credential, salted_password
from kbroker.wire.protocol import decode_response, encode_request

DESCRIBE, ALTER = 50, 51
SHA256, SHA512 = 1, 2


@pytest.fixture
def broker(tmp_path):
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path)}), ("127.0.0.1", 9092))
    b.startup()
    yield b
    b.shutdown()


def call(broker, api_key, data):
    frame = encode_request(api_key, 0, 9, "test", data)
    response = trio.run(functools.partial(handle_frame, broker, bytearray(frame[4:])))
    correlation_id, body = decode_response(api_key, 0, response[4:])
    assert correlation_id == 9
    return body


def upsertion(name, mechanism=SHA512, iterations=4096, password="secret", salt=b"0123456789abcdef"):
    name_of = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": salted_password(name_of, password, salt, min(max(iterations, 1), 16384))}


def deletion(name, mechanism=SHA512):
    return {"name": name, "mechanism": mechanism}


def alter(broker, upsertions=(), deletions=()):
    body = call(broker, ALTER, {"upsertions": list(upsertions), "deletions": list(deletions)})
    return [(r.user, r.error_code, r.error_message) for r in body.results]


def describe(broker, users):
    return call(broker, DESCRIBE, {"users": None if users is None else [{"name": u} for u in users]})


def infos(result):
    return [(c.mechanism, c.iterations) for c in result.credential_infos]


def test_served_at_v0_in_every_mode():
    for key, name in ((DESCRIBE, "DescribeUserScramCredentials"), (ALTER, "AlterUserScramCredentials")):
        spec = DISPATCH[key]
        assert (spec.name, spec.min_version, spec.max_version, spec.cluster_only) == (name, 0, 0, False)


def test_upsert_describe_and_delete(broker):
    assert alter(broker, [upsertion("alice"), upsertion("alice", SHA256, 8192), upsertion("bob", SHA256)]) == [
        ("alice", ErrorCode.none, None), ("bob", ErrorCode.none, None)]
    body = describe(broker, None)
    assert body.error_code == ErrorCode.none
    assert [(r.user, r.error_code, infos(r)) for r in body.results] == [
        ("alice", ErrorCode.none, [(SHA256, 8192), (SHA512, 4096)]), ("bob", ErrorCode.none, [(SHA256, 4096)])]
    assert describe(broker, []).results == body.results  # empty is "every user" too
    # the stored credential is what the client's salted password makes: the SASL server's lookup
    stored = broker.metadata.scram_credential("alice", "SCRAM-SHA-512")
    assert stored == make_credential("SCRAM-SHA-512", "secret", 4096, salt=b"0123456789abcdef")
    assert broker.metadata.scram_credential("alice", "SCRAM-SHA-1") is None
    assert broker.metadata.scram_credential("carol", "SCRAM-SHA-512") is None
    # an upsertion replaces, a deletion removes one mechanism, the last one removes the user
    assert alter(broker, [upsertion("alice", iterations=10000, password="new")], [deletion("alice", SHA256)]) == [
        ("alice", ErrorCode.none, None)]
    assert infos(describe(broker, ["alice"]).results[0]) == [(SHA512, 10000)]
    assert broker.metadata.scram_credential("alice", "SCRAM-SHA-256") is None
    assert alter(broker, deletions=[deletion("alice")]) == [("alice", ErrorCode.none, None)]
    assert [r.user for r in describe(broker, None).results] == ["bob"]
    assert sorted(broker.metadata.scram_users()) == ["bob"]


def test_describe_errors(broker):
    alter(broker, [upsertion("alice")])
    body = describe(broker, ["nobody", "alice", "twice", "", "twice"])
    assert body.error_code == ErrorCode.none
    got = [(r.user, r.error_code, r.error_message, infos(r)) for r in body.results]
    assert got == [
        ("nobody", ErrorCode.resource_not_found, "Attempt to describe a user credential that does not exist: nobody",
         []),
        ("alice", ErrorCode.none, None, [(SHA512, 4096)]),
        ("twice", ErrorCode.duplicate_resource,
         "Cannot describe SCRAM credentials for the same user twice in a single request: twice", []),
        ("", ErrorCode.resource_not_found, "Username must not be empty", []),
    ]


def test_alter_refusals(broker):
    alter(broker, [upsertion("kept")])
    got = alter(broker, [
        upsertion("", SHA512),
        upsertion("weird", mechanism=7),
        upsertion("few", iterations=4095),
        upsertion("many", iterations=16385),
        upsertion("twice"), upsertion("twice"),
        upsertion("both"),
        upsertion("fine", SHA256, iterations=16384),
    ], [deletion("both"), deletion("ghost"), deletion("unknown-mech", 0), deletion("kept", SHA256)])
    assert got == [
        ("unknown-mech", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
        ("weird", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        ("few", ErrorCode.unacceptable_credential, "Too few iterations"),
        ("many", ErrorCode.unacceptable_credential, "Too many iterations"),
        ("twice", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
        ("both", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
        ("ghost", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        ("kept", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        ("fine", ErrorCode.none, None),
    ]
    assert sorted(broker.metadata.scram_users()) == ["fine", "kept"]  # nothing of the refused users applied
    assert list(broker.metadata.scram_users()["kept"]) == ["SCRAM-SHA-512"]


def test_a_refused_part_refuses_the_whole_user(broker):
    """Kafka refuses a user, not an alteration: its valid alterations are not applied either."""
    got = alter(broker, [upsertion("alice", SHA256), upsertion("alice", SHA512, iterations=1)])
    assert got == [("alice", ErrorCode.unacceptable_credential, "Too few iterations")]
    assert broker.metadata.scram_users() == {}
    got = alter(broker, [upsertion("bob", SHA256)], [deletion("bob", SHA512)])
    assert got == [("bob", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")]
    assert broker.metadata.scram_users() == {}


def test_credentials_survive_a_restart_and_the_file_holds_no_password(tmp_path):
    broker = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path)}), ("127.0.0.1", 9092))
    broker.startup()
    alter(broker, [upsertion("alice", password="hunter2-password")])
    path = tmp_path / "kbroker-scram-credentials.json"
    text = path.read_text()
    assert "hunter2" not in text
    stored = json.loads(text)["users"]["alice"]["SCRAM-SHA-512"]
    assert stored.startswith("salt=") and stored.endswith(",iterations=4096")
    assert os.stat(path).st_mode & 0o077 == 0  # the owner's only
    broker.shutdown()
    again = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path)}), ("127.0.0.1", 9092))
    again.startup()
    try:
        assert [(r.user, infos(r)) for r in describe(again, None).results] == [("alice", [(SHA512, 4096)])]
        assert again.metadata.scram_credential("alice", "SCRAM-SHA-512") == broker.metadata.scram_credential(
            "alice", "SCRAM-SHA-512")
    finally:
        again.shutdown()
