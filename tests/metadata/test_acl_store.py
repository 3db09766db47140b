"""ACLs in the metadata stores: the single node's `kbroker-acls.json` (round trip, atomic write,
listeners, Kafka's delete attribution), Kafka's znode payloads (`/kafka-acl/<Type>/<name>`,
`/kafka-acl-extended/prefixed/...`, the two change notification formats), and a cluster's store on
a fake ZooKeeper: conditional writes, every broker following another's change through the
notifications, ACLs written by Kafka's own tools loaded at start, and a lost race retried."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from kbroker.metadata.cluster import ClusterMetadataStore
from kbroker.metadata.store import BrokerInfo, LocalMetadataStore
from kbroker.security.acl import (
    AccessControlEntry as Ace,
    AccessControlEntryFilter as AceFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternType as PT,
    ResourcePattern as RP,
    ResourcePatternFilter as RPF,
    ResourceType as RT,
)
from kbroker.zookeeper import znodes as zk

from fake_zookeeper import FakeSession, FakeZooKeeper

ME = BrokerInfo(1, "127.0.0.1", 9092)
READ = Ace("User:alice", "*", Op.READ, Perm.ALLOW)
WRITE = Ace("User:alice", "*", Op.WRITE, Perm.ALLOW)
DENY_BOB = Ace("User:bob", "10.0.0.9", Op.ALL, Perm.DENY)
ORDERS = RP(RT.TOPIC, "orders")
TEAM = RP(RT.TOPIC, "team-", PT.PREFIXED)
TXN = RP(RT.TRANSACTIONAL_ID, "app-", PT.PREFIXED)


def everything() -> AclBindingFilter:
    return AclBindingFilter()


# -- Kafka's znode payloads ---------------------------------------------------------------------------

def test_acl_paths_are_kafkas():
    assert zk.acl_resource_path(ORDERS) == "/kafka-acl/Topic/orders"
    assert zk.acl_resource_path(TEAM) == "/kafka-acl-extended/prefixed/Topic/team-"
    assert zk.acl_resource_path(TXN) == "/kafka-acl-extended/prefixed/TransactionalId/app-"
    assert zk.acl_resource_path(RP(RT.CLUSTER, "kafka-cluster")) == "/kafka-acl/Cluster/kafka-cluster"
    assert zk.acl_change_path(ORDERS) == "/kafka-acl-changes/acl_changes_"
    assert zk.acl_change_path(TEAM) == "/kafka-acl-extended-changes/acl_changes_"
    assert set(zk.acl_paths()) >= {"/kafka-acl", "/kafka-acl/Group", "/kafka-acl/DelegationToken", "/kafka-acl/User",
                                   "/kafka-acl-extended/prefixed/Cluster", "/kafka-acl-changes",
                                   "/kafka-acl-extended-changes"}


def test_acl_znode_payload_is_kafkas():
    data = zk.encode_acls({READ, DENY_BOB})
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "All", "host": "10.0.0.9"}]}
    assert data.startswith(b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read"')
    assert zk.decode_acls(data) == ({READ, DENY_BOB}, [])
    # what Kafka writes (its JSON keys in any order, upper-case names accepted by SecurityUtils)
    kafka = b'{"acls":[{"host":"host1","permissionType":"DENY","operation":"IdempotentWrite","principal":"User:alice"}],"version":1}'
    assert zk.decode_acls(kafka) == ({Ace("User:alice", "host1", Op.IDEMPOTENT_WRITE, Perm.DENY)}, [])
    entries, skipped = zk.decode_acls(b'{"version":1,"acls":[{"principal":"nocolon","permissionType":"Allow",'
                                      b'"operation":"Read","host":"*"}]}')
    assert entries == set() and len(skipped) == 1
    assert zk.decode_acls(b'{"version":2,"acls":[]}')[0] == set()


def test_change_notifications_are_kafkas():
    assert zk.encode_acl_change(ORDERS) == b"TOPIC:orders"
    assert zk.encode_acl_change(RP(RT.TRANSACTIONAL_ID, "a:b")) == b"TRANSACTIONAL_ID:a:b"
    assert json.loads(zk.encode_acl_change(TEAM)) == {"version": 1, "resourceType": "TOPIC", "name": "team-",
                                                      "patternType": "PREFIXED"}
    assert zk.decode_acl_change(zk.ACL_CHANGES, b"TRANSACTIONAL_ID:a:b") == RP(RT.TRANSACTIONAL_ID, "a:b")
    assert zk.decode_acl_change(zk.ACL_CHANGES, b"Topic:orders") == ORDERS  # fromString is case-blind
    assert zk.decode_acl_change(zk.EXTENDED_ACL_CHANGES, zk.encode_acl_change(TXN)) == TXN
    for parent, junk in ((zk.ACL_CHANGES, b"no-separator"), (zk.ACL_CHANGES, b"NOPE:x"),
                         (zk.EXTENDED_ACL_CHANGES, b"not json"), (zk.EXTENDED_ACL_CHANGES, b'{"version":2,"name":"x"}'),
                         (zk.EXTENDED_ACL_CHANGES, b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"MATCH"}'),
                         (zk.ACL_CHANGES, b"\xff\xfe")):
        assert zk.decode_acl_change(parent, junk) is None


# -- the single node ----------------------------------------------------------------------------------

def test_local_store_round_trip_and_listeners(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    heard = []
    store.add_acl_listener(heard.append)
    assert store.acls() == []
    assert store.create_acls([AclBinding(ORDERS, READ), AclBinding(TEAM, WRITE), AclBinding(ORDERS, READ)]) == [None] * 3
    assert sorted(map(str, store.acls())) == sorted(map(str, [AclBinding(ORDERS, READ), AclBinding(TEAM, WRITE)]))
    assert len(heard) == 1 and set(heard[-1]) == set(store.acls())
    store.create_acls([AclBinding(ORDERS, READ)])  # nothing new: not written, nobody told
    assert len(heard) == 1
    again = LocalMetadataStore(tmp_path, ME)
    assert set(again.acls()) == set(store.acls())
    state = json.loads((tmp_path / "kbroker-acls.json").read_text())
    assert state["version"] == 1
    assert state["resources"][0] == {"resourceType": "Topic", "patternType": "LITERAL", "name": "orders", "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}


def test_local_store_delete_attributes_each_binding_to_the_first_filter(tmp_path):
    store = LocalMetadataStore(tmp_path, ME)
    store.create_acls([AclBinding(ORDERS, READ), AclBinding(ORDERS, DENY_BOB), AclBinding(TEAM, WRITE)])
    match = AclBindingFilter(RPF(RT.TOPIC, "team-orders", PT.MATCH), AceFilter())
    exact = AclBinding(ORDERS, READ).to_filter()
    everyone_of_orders = AclBindingFilter(RPF(RT.TOPIC, "orders", PT.LITERAL), AceFilter())
    deleted = store.delete_acls([match, exact, everyone_of_orders, AclBindingFilter(RPF(RT.GROUP), AceFilter())])
    assert deleted == [[AclBinding(TEAM, WRITE)], [AclBinding(ORDERS, READ)], [AclBinding(ORDERS, DENY_BOB)], []]
    assert store.acls() == []
    assert LocalMetadataStore(tmp_path, ME).acls() == []
    assert store.delete_acls([everything()]) == [[]]


def test_local_store_write_is_atomic(tmp_path, monkeypatch):
    import os

    store = LocalMetadataStore(tmp_path, ME)
    store.create_acls([AclBinding(ORDERS, READ)])
    before = (tmp_path / "kbroker-acls.json").read_bytes()

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.create_acls([AclBinding(TEAM, WRITE)])
    monkeypatch.undo()
    assert (tmp_path / "kbroker-acls.json").read_bytes() == before
    assert store.acls() == [AclBinding(ORDERS, READ)]  # memory follows the disk


def test_local_store_skips_what_it_cannot_read(tmp_path, caplog):
    (tmp_path / "kbroker-acls.json").write_text(json.dumps({"version": 1, "resources": [
        {"resourceType": "Topic", "patternType": "LITERAL", "name": "orders", "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
            {"principal": "alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]},
        {"resourceType": "Spaceship", "patternType": "LITERAL", "name": "x", "acls": []}]}))
    assert LocalMetadataStore(tmp_path, ME).acls() == [AclBinding(ORDERS, READ)]
    assert "ignoring" in caplog.text


# -- a cluster, on a fake ZooKeeper ---------------------------------------------------------------------

def _notifications(fake: FakeZooKeeper, parent: str) -> list[bytes]:
    return [fake.nodes[p][0] for p in sorted(fake.nodes) if p.startswith(parent + "/acl_changes_")]


def test_cluster_store_writes_kafkas_znodes_and_every_broker_follows():
    fake = FakeZooKeeper()

    async def main():
        one = ClusterMetadataStore(FakeSession(fake), ME)
        two = ClusterMetadataStore(FakeSession(fake), BrokerInfo(2, "127.0.0.1", 9093))
        heard: list[list[AclBinding]] = []
        two.add_acl_listener(heard.append)
        async with trio.open_nursery() as nursery:
            for store in (one, two):
                store.attach(nursery)
                await store.start(None)
            assert "/kafka-acl/Topic" in fake.nodes and "/kafka-acl-extended/prefixed/Group" in fake.nodes
            assert await one.create_acls([AclBinding(ORDERS, READ), AclBinding(TEAM, WRITE),
                                          AclBinding(ORDERS, DENY_BOB)]) == [None] * 3
            assert zk.decode_acls(fake.nodes["/kafka-acl/Topic/orders"][0])[0] == {READ, DENY_BOB}
            assert zk.decode_acls(fake.nodes["/kafka-acl-extended/prefixed/Topic/team-"][0])[0] == {WRITE}
            assert _notifications(fake, zk.ACL_CHANGES) == [b"TOPIC:orders"]
            assert [json.loads(n) for n in _notifications(fake, zk.EXTENDED_ACL_CHANGES)] == [
                {"version": 1, "resourceType": "TOPIC", "name": "team-", "patternType": "PREFIXED"}]
            assert set(one.acls()) == {AclBinding(ORDERS, READ), AclBinding(ORDERS, DENY_BOB), AclBinding(TEAM, WRITE)}
            await trio.testing.wait_all_tasks_blocked()
            assert set(two.acls()) == set(one.acls())  # the other broker, from the notifications
            assert set(heard[-1]) == set(one.acls())

            # a delete through the other broker: one.acls() follows; the last entry removes the znode
            deleted = await two.delete_acls([AclBindingFilter(RPF(RT.TOPIC, "team-x", PT.MATCH), AceFilter()),
                                             AclBinding(ORDERS, READ).to_filter()])
            assert deleted == [[AclBinding(TEAM, WRITE)], [AclBinding(ORDERS, READ)]]
            assert "/kafka-acl-extended/prefixed/Topic/team-" not in fake.nodes
            await trio.testing.wait_all_tasks_blocked()
            assert one.acls() == [AclBinding(ORDERS, DENY_BOB)]
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_cluster_store_loads_kafkas_acls_at_start_and_deletes_what_it_had_not_heard_of():
    fake = FakeZooKeeper()
    for path in zk.acl_paths():
        fake.ensure_path(path)
    # as Kafka's AclAuthorizer wrote them (and a type kbroker does not know, skipped)
    fake.create("/kafka-acl/Group/g1", b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                                       b'"operation":"Read","host":"*"}]}')
    fake.create("/kafka-acl-extended/prefixed/TransactionalId/app-", zk.encode_acls({WRITE}))
    fake.create("/kafka-acl/Spaceship/x", zk.encode_acls({READ}), makepath=True)

    async def main():
        store = ClusterMetadataStore(FakeSession(fake), ME)
        await store.start(None)  # no nursery attached: it hears of no notification
        assert set(store.acls()) == {AclBinding(RP(RT.GROUP, "g1"), READ), AclBinding(TXN, WRITE)}
        # written by another broker after the load: a filter naming the pattern exactly reads it fresh
        fake.create("/kafka-acl/Topic/late", zk.encode_acls({READ}))
        deleted = await store.delete_acls([AclBindingFilter(RPF(RT.TOPIC, "late", PT.LITERAL), AceFilter())])
        assert deleted == [[AclBinding(RP(RT.TOPIC, "late"), READ)]]
        assert "/kafka-acl/Topic/late" not in fake.nodes

    trio.run(main)


def test_a_lost_conditional_write_reads_again_and_keeps_the_other_brokers_entries():
    fake = FakeZooKeeper()

    async def main():
        store = ClusterMetadataStore(FakeSession(fake), ME)
        await store.start(None)
        await store.create_acls([AclBinding(ORDERS, READ)])
        real_set = fake.set
        raced = []

        def set_after_another_writer(path, data, version=-1):
            if not raced:  # another broker adds DENY_BOB between our read and our write
                raced.append(path)
                real_set(path, zk.encode_acls({READ, DENY_BOB}))
            return real_set(path, data, version)

        fake.set = set_after_another_writer
        assert await store.create_acls([AclBinding(ORDERS, WRITE)]) == [None]
        assert zk.decode_acls(fake.nodes["/kafka-acl/Topic/orders"][0])[0] == {READ, WRITE, DENY_BOB}
        assert set(store.acls()) == {AclBinding(ORDERS, e) for e in (READ, WRITE, DENY_BOB)}

    trio.run(main)


def test_a_failed_write_fails_only_its_patterns_bindings():
    fake = FakeZooKeeper()

    async def main():
        store = ClusterMetadataStore(FakeSession(fake), ME)
        await store.start(None)
        real_create = fake.create

        def create(path, data=b"", **kwargs):
            if path.startswith("/kafka-acl/Topic/orders"):
                raise zk.ZkError("ConnectionLoss")
            return real_create(path, data, **kwargs)

        fake.create = create
        results = await store.create_acls([AclBinding(ORDERS, READ), AclBinding(TEAM, WRITE)])
        assert isinstance(results[0], zk.ZkError) and results[1] is None
        assert store.acls() == [AclBinding(TEAM, WRITE)]

    trio.run(main)


def test_after_a_new_session_the_watches_are_armed_again_and_every_acl_read():
    fake = FakeZooKeeper()

    async def main():
        store = ClusterMetadataStore(FakeSession(fake), ME)
        heard: list[list[AclBinding]] = []
        store.add_acl_listener(heard.append)
        async with trio.open_nursery() as nursery:
            store.attach(nursery)
            await store.start(None)
            fake.watches.clear()  # the session expired: its watches went with it
            fake.create("/kafka-acl/Topic/orders", zk.encode_acls({READ}))  # written meanwhile, notification missed
            fake.create("/kafka-acl-changes/acl_changes_", b"TOPIC:orders", sequence=True)
            await trio.testing.wait_all_tasks_blocked()
            assert store.acls() == []
            await store.resync_acls()
            assert store.acls() == [AclBinding(ORDERS, READ)] and heard[-1] == [AclBinding(ORDERS, READ)]
            fake.create("/kafka-acl-extended/prefixed/Topic/team-", zk.encode_acls({WRITE}), makepath=True)
            fake.create("/kafka-acl-extended-changes/acl_changes_", zk.encode_acl_change(TEAM), sequence=True)
            await trio.testing.wait_all_tasks_blocked()
            assert set(store.acls()) == {AclBinding(ORDERS, READ), AclBinding(TEAM, WRITE)}
            nursery.cancel_scope.cancel()

    trio.run(main)
