"""The controller's LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4 bodies, built from a
controller context and sent through the wire codec: what a broker decodes is what the controller
decided (leaders, epochs, partition epochs, offline replicas, deletions, live leaders)."""

from __future__ import annotations

import uuid

import pytest

from kbroker.controller import broker_requests as req
from kbroker.controller.context import LEADER_DURING_DELETE, ControllerContext
from kbroker.wire.protocol import decode_request, encode_request, parse_request_header
from kbroker.zookeeper.znodes import NO_LEADER, BrokerRegistration, LeaderAndIsr, TopicAssignment

ORDERS_ID = uuid.UUID("436b7b8b-4bd3-4214-9bb8-7f5b1f9c83e4")
CONTROLLER_ID = 1


def through_the_wire(api_key: int, body: dict):
    frame = encode_request(api_key, req.VERSIONS[api_key], 42, "kbroker-controller-1", body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, offset = parse_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, req.VERSIONS[api_key], 42)
    assert header.client_id == "kbroker-controller-1" and header.flexible
    return decode_request(header, frame[4:], offset)


@pytest.fixture
def ctx():
    c = ControllerContext(epoch=6, epoch_zk_version=5)
    c.live_brokers = {
        1: BrokerRegistration(1, "b1.example", 9091, rack="r1", epoch=4294967401),
        2: BrokerRegistration(2, "b2.example", 9092, epoch=4294967402),
        3: BrokerRegistration(3, "b3.example", 9093, rack="r3", epoch=4294967403),
    }
    c.topics = {
        "orders": TopicAssignment("orders", ORDERS_ID, {0: [1, 2, 3], 1: [2, 3, 4], 2: [4, 1, 2]}),
        "legacy": TopicAssignment("legacy", None, {0: [3, 1]}),
        "fresh": TopicAssignment("fresh", uuid.UUID(int=5), {0: [4, 5]}),  # never had a live replica
    }
    c.states = {
        ("orders", 0): LeaderAndIsr(1, 3, (1, 2, 3), 5, 12),
        ("orders", 1): LeaderAndIsr(2, 8, (2, 3), 6, 20),
        ("orders", 2): LeaderAndIsr(4, 2, (4,), 4, 3),  # its leader (4) is dead: it stays the leader of record
        ("legacy", 0): LeaderAndIsr(NO_LEADER, 9, (1,), 6, 30),
    }
    return c


def states_by_partition(request):
    return {(t.topic_name, p.partition_index): p for t in request.topic_states for p in t.partition_states}


# -- LeaderAndIsr ---------------------------------------------------------------------------------

def test_leader_and_isr_carries_each_partitions_state(ctx):
    broker = ctx.live_brokers[2]
    body = req.leader_and_isr(ctx, CONTROLLER_ID, broker, [("orders", 1), ("orders", 0), ("orders", 0)])
    r = through_the_wire(req.LEADER_AND_ISR, body)
    assert (r.controller_id, r.controller_epoch, r.broker_epoch) == (1, 6, 4294967402)
    assert r.is_k_raft_controller is False and r.type_ == 0
    assert [(t.topic_name, t.topic_id) for t in r.topic_states] == [("orders", ORDERS_ID)]
    got = states_by_partition(r)
    assert list(got) == [("orders", 0), ("orders", 1)]  # sorted, each once
    p0, p1 = got[("orders", 0)], got[("orders", 1)]
    assert (p0.leader, p0.leader_epoch, p0.isr, p0.partition_epoch, p0.controller_epoch) == (1, 3, (1, 2, 3), 12, 5)
    assert p0.replicas == (1, 2, 3) and p0.adding_replicas == () and p0.removing_replicas == ()
    assert (p1.leader, p1.leader_epoch, p1.isr, p1.partition_epoch, p1.controller_epoch) == (2, 8, (2, 3), 20, 6)
    assert p1.replicas == (2, 3, 4)
    assert p0.is_new is False and p0.leader_recovery_state == 0


def test_leader_and_isr_names_the_live_leaders_only(ctx):
    body = req.leader_and_isr(ctx, CONTROLLER_ID, ctx.live_brokers[1],
                              [("orders", 0), ("orders", 2), ("legacy", 0)], is_new=True)
    r = through_the_wire(req.LEADER_AND_ISR, body)
    got = states_by_partition(r)
    assert got[("orders", 2)].leader == 4 and got[("legacy", 0)].leader == NO_LEADER
    assert all(p.is_new for p in got.values())
    # leaders 1, 4 (dead) and -1 are named; only the live one is described
    assert [(b.broker_id, b.host_name, b.port) for b in r.live_leaders] == [(1, "b1.example", 9091)]


def test_leader_and_isr_live_leaders_for_the_leaders_named_not_every_broker(ctx):
    r = through_the_wire(req.LEADER_AND_ISR, req.leader_and_isr(ctx, CONTROLLER_ID, ctx.live_brokers[3],
                                                                   [("orders", 1)]))
    assert [b.broker_id for b in r.live_leaders] == [2]


def test_leader_and_isr_topic_without_id_and_partition_without_state(ctx):
    r = through_the_wire(req.LEADER_AND_ISR, req.leader_and_isr(
        ctx, CONTROLLER_ID, ctx.live_brokers[3], [("legacy", 0), ("fresh", 0)]))
    assert [(t.topic_name, t.topic_id) for t in r.topic_states] == [("legacy", None)]  # Uuid.ZERO on the wire
    assert r.live_leaders == ()


def test_leader_and_isr_with_nothing_known_is_empty(ctx):
    r = through_the_wire(req.LEADER_AND_ISR, req.leader_and_isr(ctx, CONTROLLER_ID, ctx.live_brokers[1], []))
    assert r.topic_states == () and r.live_leaders == ()


# -- UpdateMetadata -------------------------------------------------------------------------------

def test_update_metadata_carries_states_offline_replicas_and_live_brokers(ctx):
    body = req.update_metadata(ctx, CONTROLLER_ID, ctx.live_brokers[3], ctx.all_partitions())
    r = through_the_wire(req.UPDATE_METADATA, body)
    assert (r.controller_id, r.controller_epoch, r.broker_epoch) == (1, 6, 4294967403)
    assert r.is_k_raft_controller is False
    ids = {t.topic_name: t.topic_id for t in r.topic_states}
    assert ids == {"fresh": uuid.UUID(int=5), "legacy": None, "orders": ORDERS_ID}
    got = states_by_partition(r)
    o0, o1, o2 = got[("orders", 0)], got[("orders", 1)], got[("orders", 2)]
    assert (o0.leader, o0.leader_epoch, o0.isr, o0.zk_version, o0.replicas, o0.offline_replicas) == \
        (1, 3, (1, 2, 3), 12, (1, 2, 3), ())
    assert (o1.leader, o1.leader_epoch, o1.zk_version, o1.offline_replicas) == (2, 8, 20, (4,))
    assert (o2.leader, o2.isr, o2.offline_replicas, o2.controller_epoch) == (4, (4,), (4,), 4)
    legacy = got[("legacy", 0)]
    assert (legacy.leader, legacy.leader_epoch, legacy.isr, legacy.offline_replicas) == (NO_LEADER, 9, (1,), ())
    fresh = got[("fresh", 0)]  # never had a leader: announced offline so clients see it
    assert (fresh.leader, fresh.leader_epoch, fresh.isr, fresh.zk_version) == (-1, -1, (), -1)
    assert (fresh.replicas, fresh.offline_replicas, fresh.controller_epoch) == ((4, 5), (4, 5), 6)
    brokers = [(b.id_, b.rack, [(e.host, e.port, e.listener, e.security_protocol) for e in b.endpoints])
               for b in r.live_brokers]
    assert brokers == [(1, "r1", [("b1.example", 9091, "PLAINTEXT", 0)]),
                       (2, None, [("b2.example", 9092, "PLAINTEXT", 0)]),
                       (3, "r3", [("b3.example", 9093, "PLAINTEXT", 0)])]


def test_update_metadata_for_no_partitions_still_lists_the_brokers(ctx):
    r = through_the_wire(req.UPDATE_METADATA, req.update_metadata(ctx, CONTROLLER_ID, ctx.live_brokers[1], []))
    assert r.topic_states == ()
    assert [b.id_ for b in r.live_brokers] == [1, 2, 3]


def test_update_metadata_for_a_deletion_names_leader_during_delete(ctx):
    body = req.update_metadata(ctx, CONTROLLER_ID, ctx.live_brokers[2], ctx.partitions_of(["orders"]), deleting=True)
    r = through_the_wire(req.UPDATE_METADATA, body)
    got = states_by_partition(r)
    assert sorted(got) == [("orders", 0), ("orders", 1), ("orders", 2)]
    for (topic, p), s in got.items():
        assert s.leader == LEADER_DURING_DELETE == -2
        assert s.replicas == tuple(ctx.replicas((topic, p)))
        assert s.controller_epoch == 6


# -- StopReplica ----------------------------------------------------------------------------------

def test_stop_replica_for_deletion(ctx):
    body = req.stop_replica(ctx, CONTROLLER_ID, ctx.live_brokers[1], [("orders", 2), ("orders", 0)], True)
    r = through_the_wire(req.STOP_REPLICA, body)
    assert (r.controller_id, r.controller_epoch, r.broker_epoch) == (1, 6, 4294967401)
    assert r.is_k_raft_controller is False
    assert [(t.topic_name, [(p.partition_index, p.leader_epoch, p.delete_partition) for p in t.partition_states])
            for t in r.topic_states] == [("orders", [(0, -2, True), (2, -2, True)])]  # EpochDuringDelete


def test_stop_replica_without_deletion_carries_the_leader_epoch(ctx):
    body = req.stop_replica(ctx, CONTROLLER_ID, ctx.live_brokers[2],
                            [("orders", 1), ("legacy", 0), ("fresh", 0)], False)
    r = through_the_wire(req.STOP_REPLICA, body)
    got = {(t.topic_name, p.partition_index): (p.leader_epoch, p.delete_partition)
           for t in r.topic_states for p in t.partition_states}
    assert got == {("orders", 1): (8, False), ("legacy", 0): (9, False), ("fresh", 0): (-1, False)}


def test_versions_are_the_zookeeper_mode_ones():
    assert req.VERSIONS == {req.LEADER_AND_ISR: 7, req.STOP_REPLICA: 4, req.UPDATE_METADATA: 8,
                            req.CONTROLLED_SHUTDOWN: 3}
    assert (req.LEADER_AND_ISR, req.STOP_REPLICA, req.UPDATE_METADATA, req.CONTROLLED_SHUTDOWN) == (4, 5, 6, 7)
