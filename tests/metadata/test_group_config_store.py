"""Per-group configs in the metadata stores: the single node's `kbroker-group-configs.json`, and a
cluster's `/config/groups/<group>` znodes (Kafka's entity config layout) with `groups/<group>`
notifications every broker follows; an empty set removes the group's entry or znode."""

from __future__ import annotations

import json

import trio
import trio.testing

from kbroker.metadata.cluster import ClusterMetadataStore
from kbroker.metadata.group_configs import GroupConfigFile
from kbroker.metadata.store import BrokerInfo, LocalMetadataStore
from kbroker.zookeeper import znodes as zk

from fake_zookeeper import FakeSession, FakeZooKeeper

ME = BrokerInfo(1, "127.0.0.1", 9092)
HB = "consumer.heartbeat.interval.ms"


def _changes(fake):
    return [json.loads(fake.nodes[p][0])["entity_path"] for p in sorted(fake.nodes)
            if p.startswith("/config/changes/config_change_")]


def test_local_store_keeps_them_beside_the_metadata_across_restarts(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    assert store.group_configs("g") == {} == store.read_group_configs("g")
    store.set_group_configs("g", {HB: "6000"})
    store.set_group_configs("other/group", {HB: "7000", "consumer.session.timeout.ms": "50000"})
    assert store.group_configs("g") == {HB: "6000"}
    saved = json.loads((tmp_path / GroupConfigFile.FILE_NAME).read_text())
    assert saved == {"version": 1, "groups": {"g": {HB: "6000"}, "other/group": {
        HB: "7000", "consumer.session.timeout.ms": "50000"}}}
    assert not list(tmp_path.glob("*.tmp"))  # written atomically

    again = LocalMetadataStore(tmp_path, ME)
    assert again.group_configs("g") == {HB: "6000"} and again.read_group_configs("other/group")[HB] == "7000"
    again.set_group_configs("g", {})  # an empty set removes the entry
    assert "g" not in json.loads((tmp_path / GroupConfigFile.FILE_NAME).read_text())["groups"]
    assert LocalMetadataStore(tmp_path, ME).group_configs("g") == {}


def test_cluster_store_writes_kafkas_znodes_and_every_broker_follows():
    fake = FakeZooKeeper()
    # written before the brokers start (by another broker, or Kafka's tools): read at start
    fake.create(zk.group_config_path("early"), zk.encode_config({HB: "8000"}), makepath=True)

    async def main():
        one = ClusterMetadataStore(FakeSession(fake), ME)
        two = ClusterMetadataStore(FakeSession(fake), BrokerInfo(2, "127.0.0.1", 9093))
        async with trio.open_nursery() as nursery:
            for store in (one, two):
                store.attach(nursery)
                await store.start(None)
            assert two.group_configs("early") == {HB: "8000"}

            await one.set_group_configs("g", {HB: "6000"})
            assert json.loads(fake.nodes["/config/groups/g"][0]) == {"version": 1, "config": {HB: "6000"}}
            assert _changes(fake) == ["groups/g"]
            await trio.testing.wait_all_tasks_blocked()
            assert two.group_configs("g") == {HB: "6000"} == one.group_configs("g")

            # a name that is no znode name is sanitized as user names are
            await two.set_group_configs("app/orders v2", {HB: "7000"})
            assert "/config/groups/app%2Forders%20v2" in fake.nodes
            await two.set_group_configs("..", {HB: "7000"})
            assert "/config/groups/%2E%2E" in fake.nodes
            await trio.testing.wait_all_tasks_blocked()
            assert one.group_configs("app/orders v2") == {HB: "7000"} == one.group_configs("..")

            # the describe read goes to ZooKeeper: a write it has not heard of yet counts
            fake.set("/config/groups/g", zk.encode_config({HB: "9000"}))
            assert await two.read_group_configs("g") == {HB: "9000"} == two.group_configs("g")

            # an empty set removes the znode, and every broker drops the group's configs
            await one.set_group_configs("g", {})
            assert "/config/groups/g" not in fake.nodes
            await trio.testing.wait_all_tasks_blocked()
            assert two.group_configs("g") == {} == one.group_configs("g")
            await one.set_group_configs("never-set", {})  # nothing to remove: fine
            nursery.cancel_scope.cancel()

    trio.run(main)
