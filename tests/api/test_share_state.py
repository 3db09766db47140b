"""SharePersister's coordinator side on a real single-node broker (`__share_group_state` led here):
fencing by leader epoch and state epoch as Kafka's share coordinator does, a newer leader's read
recorded, tombstones, state read back from the log after the cache is gone; and the inter-broker
handlers (Read/Write/DeleteShareGroupState v0) answering through it, malformed snapshots refused."""

from __future__ import annotations

import functools
import types
import uuid

import pytest
import trio
from brokerkit import start

from kbroker.api import share_state
from kbroker.errors import ErrorCode as E
from kbroker.log.topic_partition import TopicPartition
from kbroker.share.partition_types import PersisterStateBatch, ShareSnapshot
from kbroker.share.persister import KEEP_LEADER_EPOCH
from kbroker.share.state_records import ShareStateKey, ShareStateValue
from kbroker.wire.protocol import decode_request, encode_request, parse_request_header

KEY = ShareStateKey("sg", uuid.UUID(int=7), 0)


@pytest.fixture
def broker(tmp_path):
    b = start(tmp_path, **{"group.coordinator.rebalance.protocols": "classic,consumer,share",
                           "share.coordinator.state.topic.num.partitions": "3"})
    trio.run(b.ensure_share_state_topic)
    yield b
    b.shutdown()


def run(fn, *args):
    return trio.run(functools.partial(fn, *args))


def value(start: int, state_epoch: int = 0, leader_epoch: int = 0, batches=()) -> ShareStateValue:
    return ShareStateValue(ShareSnapshot(start, tuple(batches)), state_epoch, leader_epoch)


def test_fencing_by_leader_epoch_and_state_epoch(broker):
    p = broker.share_manager.persister
    assert run(p.read, KEY, 3) == (E.none, None)  # nothing stored yet
    assert run(p.write, KEY, value(10, leader_epoch=3)) == E.none
    assert run(p.write, KEY, value(11, leader_epoch=2)) == E.fenced_leader_epoch  # an older leader
    assert run(p.read, KEY, 2) == (E.fenced_leader_epoch, None)
    code, stored = run(p.read, KEY, 5)  # a new leader: its epoch is recorded ...
    assert code == E.none and stored.snapshot.start_offset == 10 and stored.leader_epoch == 5
    assert run(p.write, KEY, value(12, leader_epoch=3)) == E.fenced_leader_epoch  # ... so the old one is fenced
    # the group coordinator's reset: a new state epoch, the leader epoch kept
    assert run(p.write, KEY, value(0, state_epoch=1, leader_epoch=KEEP_LEADER_EPOCH)) == E.none
    assert run(p.write, KEY, value(13, state_epoch=0, leader_epoch=5)) == E.fenced_state_epoch
    code, stored = run(p.read, KEY, -1)
    assert (code, stored.snapshot.start_offset, stored.state_epoch, stored.leader_epoch) == (E.none, 0, 1, 5)


def test_state_is_read_back_from_the_log_and_deleted_with_a_tombstone(broker):
    p = broker.share_manager.persister
    batches = (PersisterStateBatch(5, 6, 2, 1), PersisterStateBatch(7, 7, 0, 3))
    assert run(p.write, KEY, value(5, leader_epoch=0, batches=batches)) == E.none
    other = KEY._replace(partition=1)
    assert run(p.write, other, value(1)) == E.none
    p._snapshots.clear()  # as after a restart: read from __share_group_state
    code, stored = run(p.read, KEY, 0)
    assert code == E.none and stored.snapshot == ShareSnapshot(5, batches)
    assert sorted(k.partition for k in p.local_keys("sg")) == [0, 1]
    assert run(p.delete, KEY) == E.none
    p._snapshots.clear()
    assert run(p.read, KEY, 0) == (E.none, None)
    assert [k.partition for k in p.local_keys("sg")] == [1]


def _request(api_key: int, body: dict):
    frame = encode_request(api_key, 0, 1, "broker-2", body)[4:]
    header, offset = parse_request_header(frame)
    return decode_request(header, frame, offset)


def _partition(topic_id, partition: int, start: int, batches, leader_epoch: int = 0, state_epoch: int = 0) -> dict:
    return {"topic_id": topic_id, "partitions": [
        {"partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start,
         "state_batches": [{"first_offset": f, "last_offset": l, "delivery_state": s, "delivery_count": c}
                           for f, l, s, c in batches]}]}


def test_the_inter_broker_handlers(broker):
    ctx = types.SimpleNamespace(broker=broker)
    tid = KEY.topic_id

    def write(partition, start, batches, **kw):
        r = run(share_state.write_share_group_state, ctx,
                _request(85, {"group_id": "sg", "topics": [_partition(tid, partition, start, batches, **kw)]}))
        return r["results"][0]["partitions"][0]["error_code"]

    assert write(0, 4, [(4, 5, 2, 1), (6, 6, 0, 2)], leader_epoch=1) == E.none
    assert write(1, 4, [(6, 6, 0, 1), (4, 5, 2, 1)]) == E.invalid_request  # batches out of order
    assert write(1, 4, [(4, 5, 9, 1)]) == E.invalid_request  # no such delivery state
    assert write(0, 4, [], leader_epoch=0) == E.fenced_leader_epoch
    read = run(share_state.read_share_group_state, ctx, _request(84, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 1}, {"partition": 2, "leader_epoch": 1}]}]}))
    found, missing = read["results"][0]["partitions"]
    assert (found["error_code"], found["start_offset"], found["state_epoch"]) == (E.none, 4, 0)
    assert [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in found["state_batches"]] == [(4, 5, 2, 1), (6, 6, 0, 2)]
    assert (missing["error_code"], missing["state_epoch"], missing["start_offset"]) == (E.none, -1, -1)
    deleted = run(share_state.delete_share_group_state, ctx, _request(86, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0}]}]}))
    assert deleted["results"][0]["partitions"][0]["error_code"] == E.none
    assert run(broker.share_manager.persister.read, KEY, 1) == (E.none, None)


def test_a_state_partition_not_led_here_is_not_coordinator(broker):
    """(As a follower of it: the partition is not led here.)"""
    p = broker.share_manager.persister
    missing = p.partition_of(KEY)
    broker.replica_manager.partitions.pop(TopicPartition("__share_group_state", missing), None)
    assert run(p.write_local, KEY, value(1)) == E.not_coordinator
    assert run(p.read_local, KEY, 0) == (E.not_coordinator, None)
