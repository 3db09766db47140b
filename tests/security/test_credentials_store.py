"""SCRAM credentials in the metadata stores: the single node's `kbroker-scram-credentials.json`
(round trip, atomic owner-only writes, Kafka's text form, no password), and a cluster's
`/config/users/<user>` znodes with `/config/changes` notifications (Kafka's payloads, every broker's
memory copy following another broker's change), on a fake ZooKeeper."""

from __future__ import annotations

import json
import os
import stat
import sys

from pathlib import Path

import pytest
import trio
import trio.testing

from kbroker.errors import ResourceNotFoundError
from kbroker.metadata.cluster import ClusterMetadataStore
from kbroker.metadata.store import BrokerInfo, LocalMetadataStore
from kbroker.security.credentials import ScramCredential, credentials_from_config, make_credential
from kbroker.zookeeper import znodes as zk

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metadata"))
from fake_zookeeper import FakeSession, FakeZooKeeper  # noqa: E402

ME = BrokerInfo(1, "127.0.0.1", 9092)
SALT = b"salt-of-sixteen!"


def cred(password="pw", iterations=4096, mechanism="SCRAM-SHA-512") -> ScramCredential:
    return make_credential(mechanism, password, iterations, salt=SALT)


# -- the single node ---------------------------------------------------------------------------------

def test_local_store_round_trip(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    assert store.scram_users() == {} and store.scram_credential("alice", "SCRAM-SHA-512") is None
    store.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred(), "SCRAM-SHA-256": cred(mechanism="SCRAM-SHA-256")})
    store.alter_scram_credentials("bob smith", {"SCRAM-SHA-256": cred("x", 8192, "SCRAM-SHA-256")})
    again = LocalMetadataStore(tmp_path, ME)
    assert again.scram_users() == store.scram_users()
    assert again.scram_credential("alice", "SCRAM-SHA-512") == cred()
    assert again.scram_credential("bob smith", "SCRAM-SHA-256").iterations == 8192
    assert again.read_scram_users(["bob smith", "nobody"]) == {"bob smith": {"SCRAM-SHA-256": cred("x", 8192, "SCRAM-SHA-256")}}
    state = json.loads((tmp_path / "kbroker-scram-credentials.json").read_text())
    assert state == {"version": 1, "users": {
        "alice": {"SCRAM-SHA-256": cred(mechanism="SCRAM-SHA-256").to_kafka_string(),
                  "SCRAM-SHA-512": cred().to_kafka_string()},
        "bob smith": {"SCRAM-SHA-256": cred("x", 8192, "SCRAM-SHA-256").to_kafka_string()}}}
    assert state["users"]["alice"]["SCRAM-SHA-512"].endswith(",iterations=4096")


def test_local_store_deletes_and_refuses_a_missing_deletion(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    store.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred()})
    with pytest.raises(ResourceNotFoundError):
        store.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred("new")}, ["SCRAM-SHA-256"])
    assert store.scram_credential("alice", "SCRAM-SHA-512") == cred()  # nothing changed
    store.alter_scram_credentials("alice", {}, ["SCRAM-SHA-512"])
    assert store.scram_users() == {}
    assert json.loads((tmp_path / "kbroker-scram-credentials.json").read_text()) == {"version": 1, "users": {}}
    assert LocalMetadataStore(tmp_path, ME).scram_users() == {}


def test_local_store_writes_atomically_and_for_its_owner_only(tmp_path, monkeypatch):
    store = LocalMetadataStore(tmp_path, ME)
    store.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred()})
    path = tmp_path / "kbroker-scram-credentials.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before = path.read_bytes()
    (tmp_path / "kbroker-scram-credentials.json.tmp").write_text("left over by a crash")
    os.chmod(tmp_path / "kbroker-scram-credentials.json.tmp", 0o644)

    def crash(src, dst):  # the write dies before the rename: the old file is whole, memory unchanged
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.alter_scram_credentials("bob", {"SCRAM-SHA-512": cred()})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(store.scram_users()) == ["alice"]
    store.alter_scram_credentials("bob", {"SCRAM-SHA-512": cred()})  # a stale temp file is no obstacle
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert sorted(LocalMetadataStore(tmp_path, ME).scram_users()) == ["alice", "bob"]


def test_local_store_ignores_an_entry_that_is_not_a_credential(tmp_path, caplog):
    good = cred().to_kafka_string()
    (tmp_path / "kbroker-scram-credentials.json").write_text(json.dumps({"version": 1, "users": {
        "alice": {"SCRAM-SHA-512": good, "SCRAM-SHA-256": "salt=???"}, "bob": {"SCRAM-SHA-256": "nonsense"}}}))
    store = LocalMetadataStore(tmp_path, ME)
    assert store.scram_users() == {"alice": {"SCRAM-SHA-512": cred()}}
    assert "nonsense" not in caplog.text and "bob" in caplog.text


def test_credential_text_form_is_kafkas():
    c = cred()
    text = c.to_kafka_string()
    assert [part.split("=", 1)[0] for part in text.split(",")] == ["salt", "stored_key", "server_key", "iterations"]
    assert credentials_from_config({"SCRAM-SHA-512": text, "producer_byte_rate": "1024"}) == {"SCRAM-SHA-512": c}


# -- a cluster, on a fake ZooKeeper ------------------------------------------------------------------

def _changes(fake: FakeZooKeeper) -> list[dict]:
    return [json.loads(fake.nodes[p][0]) for p in sorted(fake.nodes) if p.startswith("/config/changes/config_change_")]


def test_cluster_store_writes_kafkas_znodes_and_every_broker_follows():
    fake = FakeZooKeeper()

    async def main():
        one = ClusterMetadataStore(FakeSession(fake), ME)
        two = ClusterMetadataStore(FakeSession(fake), BrokerInfo(2, "127.0.0.1", 9093))
        async with trio.open_nursery() as nursery:
            for store in (one, two):
                store.attach(nursery)
                await store.start(None)
            await one.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred()})
            assert json.loads(fake.nodes["/config/users/alice"][0]) == {
                "version": 1, "config": {"SCRAM-SHA-512": cred().to_kafka_string()}}
            assert _changes(fake) == [{"version": 2, "entity_path": "users/alice"}]
            assert one.scram_credential("alice", "SCRAM-SHA-512") == cred()  # the writer's at once
            await trio.testing.wait_all_tasks_blocked()
            assert two.scram_credential("alice", "SCRAM-SHA-512") == cred()  # the other's on the notification

            # a name that is not a plain znode name is url-encoded as Kafka's Sanitizer does
            await two.alter_scram_credentials("bob smith*/ü~", {"SCRAM-SHA-256": cred(mechanism="SCRAM-SHA-256")})
            assert "/config/users/bob%20smith%2A%2F%C3%BC%7E" in fake.nodes
            assert _changes(fake)[-1] == {"version": 2, "entity_path": "users/bob%20smith%2A%2F%C3%BC%7E"}
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(one.scram_users()) == ["alice", "bob smith*/ü~"]

            # another tool's quota beside the credential stays; a deletion keeps it and notifies
            path = "/config/users/alice"
            data = json.loads(fake.nodes[path][0])
            data["config"]["producer_byte_rate"] = "1024"
            fake.set(path, json.dumps(data).encode())
            await one.alter_scram_credentials("alice", {}, ["SCRAM-SHA-512"])
            assert json.loads(fake.nodes[path][0]) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
            await trio.testing.wait_all_tasks_blocked()
            assert two.scram_credential("alice", "SCRAM-SHA-512") is None and "alice" not in two.scram_users()

            # the last credential of a user without other entries: the znode goes, as Kafka cleans it
            await one.alter_scram_credentials("bob smith*/ü~", {}, ["SCRAM-SHA-256"])
            assert "/config/users/bob%20smith%2A%2F%C3%BC%7E" not in fake.nodes
            with pytest.raises(ResourceNotFoundError):
                await one.alter_scram_credentials("carol", {}, ["SCRAM-SHA-256"])
            await trio.testing.wait_all_tasks_blocked()
            assert two.scram_users() == {}
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_cluster_store_loads_every_user_at_start_and_reads_fresh_for_describe():
    fake = FakeZooKeeper()
    fake.create("/config/users/alice", zk.encode_config({"SCRAM-SHA-256": cred(mechanism="SCRAM-SHA-256").to_kafka_string()}),
                makepath=True)
    fake.create("/config/users/a%2Bb", zk.encode_config({"SCRAM-SHA-512": cred().to_kafka_string()}))
    fake.create("/config/users/quota-only", zk.encode_config({"consumer_byte_rate": "5"}))

    async def main():
        store = ClusterMetadataStore(FakeSession(fake), ME)
        await store.start(None)  # no nursery attached: it hears of no notification
        assert sorted(store.scram_users()) == ["a+b", "alice"]
        assert store.scram_credential("a+b", "SCRAM-SHA-512") == cred()
        fake.set("/config/users/alice", zk.encode_config({"SCRAM-SHA-256": cred("new", 5000, "SCRAM-SHA-256").to_kafka_string()}))
        fake.delete("/config/users/a%2Bb")
        assert (await store.read_scram_users(["alice", "nobody"]))["alice"]["SCRAM-SHA-256"].iterations == 5000
        assert store.scram_credential("a+b", "SCRAM-SHA-512") == cred()  # only the users read were refreshed
        assert sorted(await store.read_scram_users(None)) == ["alice"]
        assert sorted(store.scram_users()) == ["alice"]

    trio.run(main)


def test_concurrent_writers_each_apply_to_what_the_other_wrote():
    """A conditional write that loses (another broker wrote in between) reads again and retries."""
    fake = FakeZooKeeper()

    async def main():
        store = ClusterMetadataStore(FakeSession(fake), ME)
        await store.start(None)
        await store.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred()})
        real_set = fake.set
        raced = []

        def set_after_another_writer(path, data, version=-1):
            if not raced:
                raced.append(path)
                other = json.loads(fake.nodes[path][0])
                other["config"]["SCRAM-SHA-256"] = cred(mechanism="SCRAM-SHA-256").to_kafka_string()
                real_set(path, json.dumps(other).encode())
            return real_set(path, data, version)

        fake.set = set_after_another_writer
        await store.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred("new")})
        config = zk.decode_config(fake.nodes["/config/users/alice"][0])
        assert sorted(config) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert config["SCRAM-SHA-512"] == cred("new").to_kafka_string()

    trio.run(main)


def test_sanitize_is_kafkas():
    assert zk.sanitize("alice") == "alice"
    assert zk.sanitize("user.name-1_x") == "user.name-1_x"
    assert zk.sanitize("a b*c+d~e/é") == "a%20b%2Ac%2Bd%7Ee%2F%C3%A9"
    for name in ("alice", "a b*c+d~e/é", "<default>", "100%"):
        assert zk.desanitize(zk.sanitize(name)) == name
    assert zk.desanitize("a+b") == "a b"  # Java's URLDecoder
    assert zk.user_config_path("CN=x,O=y") == "/config/users/CN%3Dx%2CO%3Dy"
