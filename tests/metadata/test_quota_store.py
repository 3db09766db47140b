"""Client quotas in the metadata stores: the single node's `kbroker-client-quotas.json`, and a
cluster's Kafka znodes on a fake ZooKeeper — `/config/users/<u>` shared with the user's SCRAM
credentials, `/config/clients/<c>`, `/config/users/<u>/clients/<c>`, `<default>` entities, the
`/config/changes` notifications every broker follows, and quotas written by Kafka's tools loaded at start."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio
import trio.testing

from kbroker.metadata.cluster import ClusterMetadataStore
from kbroker.metadata.store import BrokerInfo, LocalMetadataStore
from kbroker.zookeeper import znodes as zk

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
from fake_zookeeper import FakeSession, FakeZooKeeper  # noqa: E402
from test_credentials_store import cred  # noqa: E402

ME = BrokerInfo(1, "127.0.0.1", 9092)


def _changes(fake):
    return [json.loads(fake.nodes[p][0])["entity_path"] for p in sorted(fake.nodes)
            if p.startswith("/config/changes/config_change_")]


def test_local_store_round_trip_and_listeners(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    heard = []
    store.client_quota_listeners.append(heard.append)
    store.alter_client_quotas("users/alice", {"producer_byte_rate": "100", "request_percentage": "5.0"})
    store.alter_client_quotas("users/%3Cdefault%3E/clients/<default>", {"consumer_byte_rate": "7"})
    store.alter_client_quotas("users/alice", {"request_percentage": None})
    assert heard[-1] == {"users/alice": {"producer_byte_rate": "100"},
                         "users/%3Cdefault%3E/clients/<default>": {"consumer_byte_rate": "7"}}
    again = LocalMetadataStore(tmp_path, ME)
    assert again.client_quota_configs() == heard[-1] == again.read_client_quotas()
    again.alter_client_quotas("users/alice", {"producer_byte_rate": None})
    assert "users/alice" not in LocalMetadataStore(tmp_path, ME).client_quota_configs()


def test_cluster_store_writes_kafkas_znodes_and_every_broker_follows():
    fake = FakeZooKeeper()

    async def main():
        one = ClusterMetadataStore(FakeSession(fake), ME)
        two = ClusterMetadataStore(FakeSession(fake), BrokerInfo(2, "127.0.0.1", 9093))
        heard = []
        two.client_quota_listeners.append(heard.append)
        async with trio.open_nursery() as nursery:
            for store in (one, two):
                store.attach(nursery)
                await store.start(None)
            await one.alter_scram_credentials("alice", {"SCRAM-SHA-512": cred()})
            await one.alter_client_quotas("users/alice", {"producer_byte_rate": "1024"})
            # one znode: the credential and the quota side by side
            assert json.loads(fake.nodes["/config/users/alice"][0]) == {
                "version": 1, "config": {"SCRAM-SHA-512": cred().to_kafka_string(), "producer_byte_rate": "1024"}}
            await one.alter_client_quotas("users/alice/clients/app", {"consumer_byte_rate": "5"})
            await one.alter_client_quotas("clients/<default>", {"request_percentage": "25.0"})
            await one.alter_client_quotas("users/<default>", {"controller_mutation_rate": "2.0"})
            assert json.loads(fake.nodes["/config/users/alice/clients/app"][0]) == {
                "version": 1, "config": {"consumer_byte_rate": "5"}}
            assert "/config/clients/<default>" in fake.nodes and "/config/users/<default>" in fake.nodes
            assert _changes(fake) == ["users/alice", "users/alice", "users/alice/clients/app", "clients/<default>",
                                      "users/<default>"]
            await trio.testing.wait_all_tasks_blocked()
            expected = {"users/alice": {"producer_byte_rate": "1024"},
                        "users/alice/clients/app": {"consumer_byte_rate": "5"},
                        "clients/<default>": {"request_percentage": "25.0"},
                        "users/<default>": {"controller_mutation_rate": "2.0"}}
            assert two.client_quota_configs() == expected == heard[-1] == one.client_quota_configs()

            # the quota removed, the credential kept; an entity left empty goes (its parent stays)
            await two.alter_client_quotas("users/alice", {"producer_byte_rate": None})
            assert json.loads(fake.nodes["/config/users/alice"][0])["config"] == {
                "SCRAM-SHA-512": cred().to_kafka_string()}
            await two.alter_client_quotas("users/alice/clients/app", {"consumer_byte_rate": None})
            assert "/config/users/alice/clients/app" not in fake.nodes
            await trio.testing.wait_all_tasks_blocked()
            assert "users/alice" not in one.client_quota_configs()
            assert one.scram_credential("alice", "SCRAM-SHA-512") == cred()
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_quotas_written_by_kafkas_tools_are_loaded_at_start_and_read_fresh():
    fake = FakeZooKeeper()
    fake.create("/config/users/bob", zk.encode_config({"producer_byte_rate": "10", "SCRAM-SHA-256": "x"}),
                makepath=True)
    fake.create("/config/users/bob/clients/c%2F1", zk.encode_config({"consumer_byte_rate": "20"}), makepath=True)
    fake.create("/config/clients/app", zk.encode_config({"request_percentage": "1.0E1"}), makepath=True)

    async def main():
        store = ClusterMetadataStore(FakeSession(fake), ME)
        await store.start(None)
        assert store.client_quota_configs() == {"users/bob": {"producer_byte_rate": "10"},
                                                "users/bob/clients/c%2F1": {"consumer_byte_rate": "20"},
                                                "clients/app": {"request_percentage": "1.0E1"}}
        fake.set("/config/clients/app", zk.encode_config({}))
        assert "clients/app" not in await store.read_client_quotas()

    trio.run(main)
