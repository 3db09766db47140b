"""Replicas on a failed log dir of a live broker (Kafka's ZooKeeper mode: replicasOnOfflineDirs,
onReplicasBecomeOffline).

The rules are pure (`ControllerContext.note_log_dir_answers`, `elect_after_replicas_offline`, and
every election and metadata read counting such replicas as offline). The controller's side runs
on a fake ZooKeeper (a dict of znodes) and fake brokers that answer through the wire codec: a
`/log_dir_event_notification` child makes the controller ask the broker named, the broker's
KAFKA_STORAGE_ERROR answers move leadership and shrink the ISR in the state znodes, UpdateMetadata
lists the replica offline everywhere, the notification is deleted, and answers from a broker
that has restarted since are ignored.
"""

from __future__ import annotations

import uuid

import pytest
import trio

from kbroker.controller import broker_requests as req
from kbroker.controller.context import (
    PREFERRED,
    UNCLEAN,
    ControllerContext,
    elect_after_replicas_offline,
    preferred_leader_elections,
    requested_election,
)
from kbroker.controller.controller import KafkaController
from kbroker.errors import ErrorCode
from kbroker.wire.protocol import decode_request, decode_response, encode_request, encode_response, \
    parse_request_header
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.client import Stat
from kbroker.zookeeper.znodes import NO_LEADER, BrokerRegistration, LeaderAndIsr, TopicAssignment

T_ID = uuid.UUID(int=11)


def cluster(live=(1, 2, 3)) -> ControllerContext:
    c = ControllerContext(epoch=5, epoch_zk_version=4)
    c.live_brokers = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, epoch=100 + b) for b in live}
    c.topics = {"t": TopicAssignment("t", T_ID, {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [2, 1]})}
    c.states = {("t", 0): LeaderAndIsr(1, 4, (1, 2, 3), 3, 10),
                ("t", 1): LeaderAndIsr(2, 4, (2, 3, 1), 3, 10),
                ("t", 2): LeaderAndIsr(3, 4, (3, 1), 3, 10),
                ("t", 3): LeaderAndIsr(2, 4, (2,), 3, 10)}
    return c


def never_unclean(_topic: str) -> bool:
    return False


# -- the rules --------------------------------------------------------------------------------------

def test_answers_record_newly_offline_replicas_once():
    c = cluster()
    assert c.note_log_dir_answers(2, {("t", 0), ("t", 1)}, set()) == {("t", 0), ("t", 1)}
    assert c.note_log_dir_answers(2, {("t", 0)}, set()) == set()  # known already: nothing new
    assert c.replicas_on_offline_dirs == {2: {("t", 0), ("t", 1)}}
    assert c.note_log_dir_answers(2, set(), {("t", 1)}) == set()  # answered NONE again: online
    assert c.replicas_on_offline_dirs == {2: {("t", 0)}}
    assert c.note_log_dir_answers(9, {("t", 0)}, set()) == set()  # not a live broker
    assert c.note_log_dir_answers(2, set(), {("t", 0)}) == set() and c.replicas_on_offline_dirs == {}


def test_an_offline_replica_counts_as_offline_in_every_read():
    c = cluster()
    c.note_log_dir_answers(1, {("t", 0)}, set())
    assert c.offline_replicas(("t", 0)) == [1] and c.offline_replicas(("t", 1)) == []
    assert not c.is_replica_online(1, ("t", 0)) and c.is_replica_online(1, ("t", 1))
    assert not c.is_online(("t", 0))  # its leader's replica is offline
    assert c.live_for(("t", 0)) == {2, 3} and c.live_for(("t", 1)) == {1, 2, 3}
    c.shutting_down.add(3)
    assert c.electable_for(("t", 0)) == {2}
    states = {p["partition_index"]: p for t in req.update_metadata(c, 1, c.live_brokers[2], [("t", 0)])["topic_states"]
              for p in t["partition_states"]}
    assert states[0]["offline_replicas"] == [1]


def test_an_offline_leader_is_replaced_by_the_first_online_isr_member_and_leaves_the_isr():
    c = cluster()
    c.note_log_dir_answers(1, {("t", 0), ("t", 1), ("t", 2)}, set())
    planned = elect_after_replicas_offline(c, {("t", 0), ("t", 1), ("t", 2)}, never_unclean)
    assert planned[("t", 0)] == LeaderAndIsr(2, 5, (2, 3), 5, 10)  # assignment order: 2 before 3
    assert planned[("t", 1)] == LeaderAndIsr(2, 5, (2, 3), 5, 10)  # a follower: leaves the ISR only
    assert planned[("t", 2)] == LeaderAndIsr(3, 5, (3,), 5, 10)


def test_the_last_isr_member_offline_leaves_the_partition_leaderless_with_its_isr():
    c = cluster()
    c.note_log_dir_answers(2, {("t", 3)}, set())
    assert elect_after_replicas_offline(c, {("t", 3)}, never_unclean) == {
        ("t", 3): LeaderAndIsr(NO_LEADER, 5, (2,), 5, 10)}
    # unclean election takes the live out-of-sync replica, never the offline one
    assert elect_after_replicas_offline(c, {("t", 3)}, lambda _t: True) == {("t", 3): LeaderAndIsr(1, 5, (1,), 5, 10)}


def test_partitions_without_an_offline_replica_are_left_alone():
    c = cluster()
    assert elect_after_replicas_offline(c, {("t", 0), ("t", 9)}, never_unclean) == {}


def test_operator_elections_skip_offline_replicas():
    c = cluster()
    c.states[("t", 0)] = LeaderAndIsr(NO_LEADER, 5, (1,), 5, 11)
    c.note_log_dir_answers(1, {("t", 0)}, set())
    state, problem = requested_election(c, ("t", 0), PREFERRED)
    assert state is None and problem[0] == ErrorCode.preferred_leader_not_available
    state, problem = requested_election(c, ("t", 0), UNCLEAN)
    assert problem is None and state.leader == 2 and state.isr == (2,)
    c.states[("t", 1)] = LeaderAndIsr(3, 5, (2, 3), 5, 11)
    c.note_log_dir_answers(2, {("t", 1)}, set())
    assert ("t", 1) not in preferred_leader_elections(c, 0)


# -- the controller, on fakes -----------------------------------------------------------------------

class FakeZooKeeper:
    """The adapter's calls the controller makes here, on a dict of znodes (data, version)."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.watches: list = []

    def children(self, path: str, watch=None) -> list[str]:
        if watch is not None:
            self.watches.append((path, watch))
        prefix = path + "/"
        return sorted(p[len(prefix):] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix):])

    def get_many(self, paths: list[str]):
        return [(self.nodes[p][0], Stat(self.nodes[p][1], 1, 0)) if p in self.nodes else None for p in paths]

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if path not in self.nodes:
            raise zk.NoNodeError(path)
        del self.nodes[path]

    def set_many(self, writes):
        out = []
        for path, data, version in writes:
            if self.nodes.get(path, (b"", -2))[1] != version:
                out.append(zk.BadVersionError(path))
                continue
            self.nodes[path] = (data, version + 1)
            out.append(Stat(version + 1, 1, 0))
        return out


class FakeSession:
    def __init__(self, client: FakeZooKeeper) -> None:
        self.client = client

    async def call(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def watch(self, callback):
        return callback


class FakeBrokers:
    """Each broker decodes the controller's requests through the wire codec and answers
    LeaderAndIsr as kbroker's handler does: KAFKA_STORAGE_ERROR for a replica on a failed dir,
    STALE_CONTROLLER_EPOCH for a leader epoch it has already seen."""

    def __init__(self) -> None:
        self.failed: dict[int, set[tuple[str, int]]] = {}
        self.received: list[tuple[int, int, object]] = []

    async def send(self, broker: BrokerRegistration, api_key: int, version: int, body: dict):
        frame = encode_request(api_key, version, 7, "kbroker-controller-1", body)
        header, offset = parse_request_header(frame[4:])
        request = decode_request(header, frame[4:], offset)
        self.received.append((broker.broker_id, api_key, request))
        answer: dict = {"error_code": 0}
        if api_key == req.LEADER_AND_ISR:
            failed = self.failed.get(broker.broker_id, set())
            answer["topics"] = [
                {"topic_id": t.topic_id, "partition_errors": [
                    {"partition_index": p.partition_index,
                     "error_code": ErrorCode.kafka_storage_error if (t.topic_name, p.partition_index) in failed
                     else ErrorCode.stale_controller_epoch} for p in t.partition_states]}
                for t in request.topic_states]
        response = encode_response(header, answer)
        return decode_response(api_key, version, response[4:])[1]

    def sent(self, api_key: int) -> list[tuple[int, object]]:
        return [(b, r) for b, k, r in self.received if k == api_key]


def partition_states(request) -> dict[tuple[str, int], object]:
    return {(t.topic_name, p.partition_index): p for t in request.topic_states for p in t.partition_states}


@pytest.fixture
def setup():
    zoo = FakeZooKeeper()
    brokers = FakeBrokers()
    controller = KafkaController(1, FakeSession(zoo), brokers.send, unclean_leader_election=never_unclean,
                                 auto_leader_rebalance=False)
    controller.ctx = cluster()
    for tp, s in controller.ctx.states.items():
        zoo.nodes[zk.partition_state_path(*tp)] = (zk.encode_partition_state(s), s.partition_epoch)
    return zoo, brokers, controller


async def next_event(controller: KafkaController) -> str:
    with trio.fail_after(5):
        key = await controller._events.receive()
    controller._pending.discard(key)
    return key


def test_a_log_dir_event_moves_leadership_off_the_failed_replicas(setup):
    trio.run(log_dir_event_scenario, *setup)


async def log_dir_event_scenario(zoo: FakeZooKeeper, brokers: FakeBrokers, controller: KafkaController) -> None:
    ctx = controller.ctx
    brokers.failed[1] = {("t", 0), ("t", 2)}  # broker 1's dir holding t-0 and t-2 failed
    zoo.nodes[zk.LOG_DIR_EVENT_NOTIFICATION + "/log_dir_event_0000000004"] = (zk.encode_log_dir_event(1), 0)
    async with trio.open_nursery() as nursery:
        controller.queues.attach(nursery)
        for broker in ctx.live_brokers.values():
            controller.queues.open(broker)
        await controller._handle_key("log_dir_events")
        assert zoo.children(zk.LOG_DIR_EVENT_NOTIFICATION) == []  # handled: deleted
        assert zoo.watches[-1][0] == zk.LOG_DIR_EVENT_NOTIFICATION  # watched for the next one

        assert await next_event(controller) == "log_dir_answers"  # broker 1 answered
        (asked,) = brokers.sent(req.LEADER_AND_ISR)
        assert asked[0] == 1 and set(partition_states(asked[1])) == {("t", 0), ("t", 1), ("t", 2), ("t", 3)}
        assert all(p.leader_epoch == ctx.states[tp].leader_epoch for tp, p in partition_states(asked[1]).items())
        brokers.received.clear()
        await controller._handle_key("log_dir_answers")

        assert ctx.replicas_on_offline_dirs == {1: {("t", 0), ("t", 2)}}
        written = {tp: zk.decode_partition_state(*zoo.nodes[zk.partition_state_path(*tp)]) for tp in ctx.states}
        assert (written[("t", 0)].leader, written[("t", 0)].isr, written[("t", 0)].leader_epoch) == (2, (2, 3), 5)
        assert (written[("t", 2)].leader, written[("t", 2)].isr) == (3, (3,))
        assert written[("t", 1)].isr == (2, 3, 1) and written[("t", 1)].leader_epoch == 4  # untouched
        assert ctx.states[("t", 0)] == written[("t", 0)]
        with trio.fail_after(5):
            while len(brokers.sent(req.UPDATE_METADATA)) < 3:
                await trio.sleep(0.01)
        for broker_id, request in brokers.sent(req.UPDATE_METADATA):
            states = partition_states(request)
            assert list(states[("t", 0)].offline_replicas) == [1] and states[("t", 0)].leader == 2
            assert list(states[("t", 2)].offline_replicas) == [1]
        # broker 1 is told too; its answer (the same storage errors) changes nothing more
        assert {b for b, _ in brokers.sent(req.LEADER_AND_ISR)} == {1, 2, 3}
        assert await next_event(controller) == "log_dir_answers"  # (answered before its UpdateMetadata)
        await controller._handle_key("log_dir_answers")
        assert ctx.states[("t", 0)].leader_epoch == 5 and len(brokers.sent(req.UPDATE_METADATA)) == 3
        nursery.cancel_scope.cancel()


def test_answers_from_an_earlier_incarnation_of_the_broker_are_ignored(setup):
    trio.run(earlier_incarnation_scenario, setup[2])


async def earlier_incarnation_scenario(controller: KafkaController) -> None:
    ctx = controller.ctx
    old = ctx.live_brokers[1]
    response = decode_leader_and_isr_answer({"error_code": 0, "topics": [{"topic_id": T_ID, "partition_errors": [
        {"partition_index": 0, "error_code": ErrorCode.kafka_storage_error}]}]})
    controller.note_broker_response(old, req.LEADER_AND_ISR, response)
    ctx.live_brokers[1] = BrokerRegistration(1, "127.0.0.1", 9001, epoch=999)  # restarted since
    assert await next_event(controller) == "log_dir_answers"
    await controller._handle_key("log_dir_answers")
    assert ctx.replicas_on_offline_dirs == {} and ctx.states[("t", 0)].leader == 1


def test_answers_without_storage_errors_cost_nothing(setup):
    _zoo, _brokers, controller = setup
    response = decode_leader_and_isr_answer({"error_code": 0, "topics": [{"topic_id": T_ID, "partition_errors": [
        {"partition_index": 0, "error_code": 0}]}]})
    controller.note_broker_response(controller.ctx.live_brokers[1], req.LEADER_AND_ISR, response)
    controller.note_broker_response(controller.ctx.live_brokers[1], req.UPDATE_METADATA, response)
    assert not controller._pending and controller._dir_answers == {}


def decode_leader_and_isr_answer(body: dict):
    frame = encode_request(req.LEADER_AND_ISR, 7, 3, "c", {"controller_id": 1, "controller_epoch": 5,
                                                           "broker_epoch": 1, "topic_states": [], "live_leaders": []})
    header, _offset = parse_request_header(frame[4:])
    return decode_response(req.LEADER_AND_ISR, 7, encode_response(header, body)[4:])[1]


def test_a_controller_taking_over_deletes_the_notifications_left(setup):
    """Its LeaderAndIsr to every broker asks them all (Kafka's onControllerFailover)."""
    zoo, _brokers, controller = setup
    for seq in (1, 2):
        zoo.nodes[f"{zk.LOG_DIR_EVENT_NOTIFICATION}/log_dir_event_000000000{seq}"] = (zk.encode_log_dir_event(seq), 0)
    trio.run(controller._clear_log_dir_events)
    assert zoo.children(zk.LOG_DIR_EVENT_NOTIFICATION) == []
    assert zoo.watches[0][0] == zk.LOG_DIR_EVENT_NOTIFICATION


def test_an_unreadable_notification_is_deleted_unread(setup):
    zoo, brokers, controller = setup
    zoo.nodes[f"{zk.LOG_DIR_EVENT_NOTIFICATION}/log_dir_event_0000000007"] = (b"{garbage", 0)
    trio.run(controller._handle_key, "log_dir_events")
    assert zoo.children(zk.LOG_DIR_EVENT_NOTIFICATION) == [] and brokers.received == []
