"""SCRAM users through stock admin clients and `kbroker users`, against real broker processes:

- confluent-kafka's AdminClient creates, describes, alters and deletes users and gets Kafka's errors
  (RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL, DUPLICATE_RESOURCE);
- kafka-python's KafkaAdminClient does the same, and sends what librdkafka refuses to send (the
  same user and mechanism twice, an unknown mechanism);
- the stored credential is the one the client's password makes (salt, stored key, server key
  recomputed here from the password), whoever salted it;
- `kbroker users add|alter|list|delete` as subprocesses, seen by the stock clients and back;
- a three-broker ZooKeeper cluster: a user added through one broker is described alike by every
  broker, every other broker reloads it from its change notification within seconds (its log says
  so), and ZooKeeper holds Kafka's `/config/users/<user>` and `/config/changes` payloads.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import clusterkit as ck
from kbroker.admin.client import AdminClient as KbrokerAdmin
from kbroker.admin.users import describe_user_scram_credentials
from kbroker.security.credentials import credential_from_salted_password, salted_password

pytestmark = pytest.mark.timeout(240)

CREDENTIAL_TEXT = re.compile(r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,server_key=[A-Za-z0-9+/=]+,iterations=\d+")


def _confluent(kt):
    kt.require_module("confluent_kafka")
    import confluent_kafka.admin as admin

    return admin


def _kafka_python(kt):
    kafka = kt.require_module("kafka")
    admin = kt.require_module("kafka.admin")
    kt.require(hasattr(admin.KafkaAdminClient, "alter_user_scram_credentials"),
               f"kafka-python {kafka.__version__} has no alter_user_scram_credentials")
    return admin


def _code(future) -> int:
    exc = future.exception(30)
    assert exc is not None, "expected an error"
    return exc.args[0].code()


def _described(admin_client, users):
    """confluent: user -> sorted [(mechanism name, iterations)]."""
    futures = admin_client.describe_user_scram_credentials(users)
    return {u: sorted((i.mechanism.name, i.iterations) for i in f.result(30).scram_credential_infos)
            for u, f in futures.items()}


def _stored(kbroker, user: str, mechanism: str):
    """The credential in the single node's file (None when the test runs against another broker)."""
    if kbroker.data_dir is None:
        return None
    from kbroker.security.credentials import ScramCredential

    state = json.loads((kbroker.data_dir / "kbroker-scram-credentials.json").read_text())
    text = state["users"][user][mechanism]
    assert CREDENTIAL_TEXT.fullmatch(text), text
    return ScramCredential.from_kafka_string(text)


def _matches_password(credential, mechanism: str, password: bytes) -> bool:
    expected = credential_from_salted_password(
        mechanism, salted_password(mechanism, password, credential.salt, credential.iterations),
        credential.salt, credential.iterations)
    return expected == credential


def _users_cli(*args: str, password: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", "users", *args], input=password, capture_output=True,
                          text=True, timeout=timeout)


# -- one broker ----------------------------------------------------------------------------------

def test_confluent_creates_describes_alters_and_deletes_users(kbroker, kt):
    admin = _confluent(kt)
    from confluent_kafka import KafkaError

    A, M = admin.ScramCredentialInfo, admin.ScramMechanism
    client = admin.AdminClient({"bootstrap.servers": kbroker.bootstrap})
    futures = client.alter_user_scram_credentials([
        admin.UserScramCredentialUpsertion("cf-alice", A(M.SCRAM_SHA_256, 8192), b"alice-pw-256"),
        admin.UserScramCredentialUpsertion("cf-alice", A(M.SCRAM_SHA_512, 10000), b"alice-pw-512"),
        admin.UserScramCredentialUpsertion("cf-bob", A(M.SCRAM_SHA_512, 4096), b"bob-pw"),
    ])
    assert sorted(futures) == ["cf-alice", "cf-bob"]
    for f in futures.values():
        assert f.result(30) is None
    assert _described(client, ["cf-alice", "cf-bob"]) == {
        "cf-alice": [("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 10000)], "cf-bob": [("SCRAM_SHA_512", 4096)]}
    everyone = client.describe_user_scram_credentials().result(30)
    assert {"cf-alice", "cf-bob"} <= set(everyone)
    assert sorted((i.mechanism.name, i.iterations) for i in everyone["cf-bob"].scram_credential_infos) == [
        ("SCRAM_SHA_512", 4096)]

    stored = _stored(kbroker, "cf-alice", "SCRAM-SHA-256")
    if stored is not None:  # librdkafka's salt and PBKDF2 made the keys a password check will use
        assert stored.iterations == 8192 and _matches_password(stored, "SCRAM-SHA-256", b"alice-pw-256")
        assert not _matches_password(stored, "SCRAM-SHA-256", b"wrong")
        assert b"alice-pw" not in (kbroker.data_dir / "kbroker-scram-credentials.json").read_bytes()

    # alter: a new password and iteration count replace the old credential
    for f in client.alter_user_scram_credentials([
            admin.UserScramCredentialUpsertion("cf-bob", A(M.SCRAM_SHA_512, 12000), b"bob-new")]).values():
        assert f.result(30) is None
    assert _described(client, ["cf-bob"]) == {"cf-bob": [("SCRAM_SHA_512", 12000)]}
    stored = _stored(kbroker, "cf-bob", "SCRAM-SHA-512")
    if stored is not None:
        assert _matches_password(stored, "SCRAM-SHA-512", b"bob-new")

    # errors
    assert _code(client.describe_user_scram_credentials(["cf-nobody"])["cf-nobody"]) == KafkaError.RESOURCE_NOT_FOUND
    refused = client.alter_user_scram_credentials([
        admin.UserScramCredentialUpsertion("cf-few", A(M.SCRAM_SHA_256, 1000), b"pw"),
        admin.UserScramCredentialUpsertion("cf-many", A(M.SCRAM_SHA_256, 20000), b"pw"),
        admin.UserScramCredentialDeletion("cf-ghost", M.SCRAM_SHA_512),
        admin.UserScramCredentialDeletion("cf-bob", M.SCRAM_SHA_256),  # bob has no SHA-256 credential
    ])
    assert _code(refused["cf-few"]) == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert _code(refused["cf-many"]) == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert _code(refused["cf-ghost"]) == KafkaError.RESOURCE_NOT_FOUND
    assert _code(refused["cf-bob"]) == KafkaError.RESOURCE_NOT_FOUND
    assert _described(client, ["cf-bob"]) == {"cf-bob": [("SCRAM_SHA_512", 12000)]}  # unchanged
    assert _code(client.describe_user_scram_credentials(["cf-few"])["cf-few"]) == KafkaError.RESOURCE_NOT_FOUND

    # delete one mechanism, then the user's last one: gone from the listing
    for f in client.alter_user_scram_credentials([
            admin.UserScramCredentialDeletion("cf-alice", M.SCRAM_SHA_256),
            admin.UserScramCredentialDeletion("cf-bob", M.SCRAM_SHA_512)]).values():
        assert f.result(30) is None
    assert _described(client, ["cf-alice"]) == {"cf-alice": [("SCRAM_SHA_512", 10000)]}
    assert _code(client.describe_user_scram_credentials(["cf-bob"])["cf-bob"]) == KafkaError.RESOURCE_NOT_FOUND
    assert "cf-bob" not in client.describe_user_scram_credentials().result(30)
    for f in client.alter_user_scram_credentials([
            admin.UserScramCredentialDeletion("cf-alice", M.SCRAM_SHA_512)]).values():
        assert f.result(30) is None


def test_kafka_python_creates_describes_alters_deletes_and_gets_kafkas_errors(kbroker, kt):
    admin = _kafka_python(kt)
    M = admin.ScramMechanism
    client = admin.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=30000)
    try:
        answers = client.alter_user_scram_credentials([
            admin.UserScramCredentialUpsertion("kp-carol", M.SCRAM_SHA_512, "carol-pw", iterations=5000),
            admin.UserScramCredentialUpsertion("kp-carol", M.SCRAM_SHA_256, "carol-pw-2"),
        ])
        assert answers == {"kp-carol": None}
        described = client.describe_user_scram_credentials(["kp-carol"])
        assert described["kp-carol"]["error"] is None
        assert sorted((int(c["mechanism"]), c["iterations"]) for c in described["kp-carol"]["credential_infos"]) == [
            (1, 4096), (2, 5000)]
        stored = _stored(kbroker, "kp-carol", "SCRAM-SHA-512")
        if stored is not None:
            assert stored.iterations == 5000 and _matches_password(stored, "SCRAM-SHA-512", b"carol-pw")

        # what librdkafka would refuse to send, the broker refuses with Kafka's codes and words
        answers = client.alter_user_scram_credentials([
            admin.UserScramCredentialUpsertion("kp-dup", M.SCRAM_SHA_256, "a"),
            admin.UserScramCredentialUpsertion("kp-dup", M.SCRAM_SHA_256, "b"),
            admin.UserScramCredentialUpsertion("kp-low", M.SCRAM_SHA_256, "a", iterations=10),
            admin.UserScramCredentialDeletion("kp-carol", M.SCRAM_SHA_512),
            admin.UserScramCredentialUpsertion("kp-carol", M.SCRAM_SHA_512, "c"),
        ])
        assert answers == {"kp-dup": "A user credential cannot be altered twice in the same request",
                           "kp-low": "Too few iterations",
                           "kp-carol": "A user credential cannot be altered twice in the same request"}
        described = client.describe_user_scram_credentials(["kp-dup", "kp-carol", "kp-dup2"])
        assert described["kp-dup"]["error"] == "Attempt to describe a user credential that does not exist: kp-dup"
        assert described["kp-dup2"]["error"].startswith("Attempt to describe a user credential that does not exist")
        assert described["kp-carol"]["error"] is None and len(described["kp-carol"]["credential_infos"]) == 2
        described = client.describe_user_scram_credentials(["kp-carol", "kp-carol"])
        assert described["kp-carol"]["error"].startswith("Cannot describe SCRAM credentials for the same user twice")

        # a deletion and an upsertion of different mechanisms of one user, in one request
        answers = client.alter_user_scram_credentials([
            admin.UserScramCredentialDeletion("kp-carol", M.SCRAM_SHA_256),
            admin.UserScramCredentialUpsertion("kp-carol", M.SCRAM_SHA_512, "carol-new", iterations=6000),
        ])
        assert answers == {"kp-carol": None}
        infos = client.describe_user_scram_credentials(["kp-carol"])["kp-carol"]["credential_infos"]
        assert [(int(c["mechanism"]), c["iterations"]) for c in infos] == [(2, 6000)]
        assert client.alter_user_scram_credentials([admin.UserScramCredentialDeletion("kp-carol", M.SCRAM_SHA_512)]) \
            == {"kp-carol": None}
        assert "kp-carol" not in client.describe_user_scram_credentials()
    finally:
        client.close()


def test_kbroker_users_commands_and_stock_clients_agree(kbroker, kt):
    admin = _confluent(kt)
    b = ("--bootstrap-server", kbroker.bootstrap)
    done = _users_cli("add", "cli-dora", "--password-stdin", "--iterations", "8192", *b, password="dora-pw\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Added SCRAM-SHA-512 credential of user cli-dora (8192 iterations)."
    client = admin.AdminClient({"bootstrap.servers": kbroker.bootstrap})
    assert _described(client, ["cli-dora"]) == {"cli-dora": [("SCRAM_SHA_512", 8192)]}
    stored = _stored(kbroker, "cli-dora", "SCRAM-SHA-512")
    if stored is not None:
        assert _matches_password(stored, "SCRAM-SHA-512", b"dora-pw")  # the newline is not the password's

    refused = _users_cli("add", "cli-dora", "--password", "x", *b)
    assert refused.returncode == 1 and "DUPLICATE_RESOURCE" in refused.stderr and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1
    refused = _users_cli("alter", "cli-nobody", "--password", "x", *b)
    assert refused.returncode == 1 and "RESOURCE_NOT_FOUND" in refused.stderr
    refused = _users_cli("add", "cli-low", "--password", "x", "--iterations", "10", *b)
    assert refused.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in refused.stderr

    # a user made by a stock client is altered and listed by the command
    for f in client.alter_user_scram_credentials([admin.UserScramCredentialUpsertion(
            "cli-eve", admin.ScramCredentialInfo(admin.ScramMechanism.SCRAM_SHA_256, 4096), b"eve-pw")]).values():
        assert f.result(30) is None
    done = _users_cli("alter", "cli-eve", "--password-stdin", "--mechanism", "SCRAM-SHA-256", "--iterations", "9000",
                      *b, password="eve-new\n")
    assert done.returncode == 0, done.stderr
    listed = _users_cli("list", "cli-dora", "cli-eve", "--output", "json", *b)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [{"user": "cli-dora", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
                                         {"user": "cli-eve", "mechanism": "SCRAM-SHA-256", "iterations": 9000}]
    table = _users_cli("list", *b).stdout.splitlines()
    assert table[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert ["cli-eve", "SCRAM-SHA-256", "9000"] in [line.split() for line in table[1:]]

    assert _users_cli("delete", "cli-eve", *b).returncode == 0
    done = _users_cli("delete", "cli-dora", "--mechanism", "SCRAM-SHA-512", *b)
    assert done.returncode == 0 and done.stdout.strip() == "Deleted SCRAM-SHA-512 credential of user cli-dora."
    gone = client.describe_user_scram_credentials(["cli-eve", "cli-dora"])
    for user in ("cli-eve", "cli-dora"):
        assert gone[user].exception(30) is not None
    again = _users_cli("delete", "cli-dora", *b)
    assert again.returncode == 1 and "RESOURCE_NOT_FOUND" in again.stderr and "Traceback" not in again.stderr


# -- a cluster -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = ck.start_cluster(tmp_path_factory.mktemp("scram-cluster"), 3)
    yield c
    ck.stop_cluster(c)


def _each_broker(cluster, users):
    out = {}
    for broker_id, broker in cluster.brokers.items():
        with KbrokerAdmin(broker.address, timeout=10) as admin:  # that broker alone answers
            found = describe_user_scram_credentials(admin, users)
        out[broker_id] = {u: sorted((c.mechanism, c.iterations) for c in creds) for u, creds in found.items()}
    return out


def _all_reloaded(cluster, user: str, count: int) -> bool:
    """Every broker (the writer too: it hears its own notification) logged `count` reloads of the user."""
    line = f"SCRAM credentials of user {user!r} reloaded after a change"
    return all(b.log_tail(500_000).count(line) >= count for b in cluster.brokers.values())


def test_cluster_every_broker_has_the_user_and_zookeeper_holds_kafkas_format(cluster, kt):
    from kazoo.client import KazooClient

    user = "zk user@example.com"  # url-encoded in ZooKeeper, as Kafka's Sanitizer does
    znode = "/config/users/zk%20user%40example.com"
    added = _users_cli("add", user, "--password-stdin", "--bootstrap-server", cluster.brokers[2].address,
                       password="zk-pw\n")
    assert added.returncode == 0, added.stderr
    ck.wait_for(lambda: _all_reloaded(cluster, user, 1), 5, "every broker to reload the user from the notification")
    views = _each_broker(cluster, [user])
    assert all(v == {user: [("SCRAM-SHA-512", 4096)]} for v in views.values()), views

    zk = KazooClient(hosts=f"{cluster.zookeeper.connect}/kbroker")
    zk.start(timeout=10)
    try:
        payload = json.loads(zk.get(znode)[0])
        assert set(payload) == {"version", "config"} and payload["version"] == 1
        assert list(payload["config"]) == ["SCRAM-SHA-512"]
        assert CREDENTIAL_TEXT.fullmatch(payload["config"]["SCRAM-SHA-512"])
        from kbroker.security.credentials import ScramCredential

        assert _matches_password(ScramCredential.from_kafka_string(payload["config"]["SCRAM-SHA-512"]),
                                 "SCRAM-SHA-512", b"zk-pw")
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))]
        assert {"version": 2, "entity_path": "users/zk%20user%40example.com"} in changes
        assert all(c.startswith("config_change_") for c in zk.get_children("/config/changes"))

        # altered through another broker with a stock client: all three follow
        admin = _confluent(kt)
        client = admin.AdminClient({"bootstrap.servers": cluster.brokers[3].address})
        for f in client.alter_user_scram_credentials([admin.UserScramCredentialUpsertion(
                user, admin.ScramCredentialInfo(admin.ScramMechanism.SCRAM_SHA_256, 8192), b"pw-256")]).values():
            assert f.result(30) is None
        ck.wait_for(lambda: _all_reloaded(cluster, user, 2), 5, "every broker to reload the altered user")
        views = _each_broker(cluster, [user])
        assert all(v == {user: [("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)]} for v in views.values()), views
        assert sorted(json.loads(zk.get(znode)[0])["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]

        # deleted through a third: the znode goes (nothing left in it), every broker forgets the user
        deleted = _users_cli("delete", user, "--bootstrap-server", cluster.brokers[1].address)
        assert deleted.returncode == 0, deleted.stderr
        assert zk.exists(znode) is None
        ck.wait_for(lambda: _all_reloaded(cluster, user, 3), 5, "every broker to hear of the deletion")
        for broker in cluster.brokers.values():
            with KbrokerAdmin(broker.address, timeout=10) as admin:
                assert user not in describe_user_scram_credentials(admin)
    finally:
        zk.stop()
        zk.close()
