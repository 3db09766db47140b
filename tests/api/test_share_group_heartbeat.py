"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77) v1 through the dispatch table on a real
single-node broker with `group.coordinator.rebalance.protocols=classic,consumer,share`: members share
partitions when there are more of them than partitions, topic ids on the wire, a member silent past
its session timeout is fenced, group ids of one type refuse the other protocols, and the APIs are
neither served nor advertised while share groups are off."""

from __future__ import annotations

import functools

import pytest
import trio
from brokerkit import ask, start

from kbroker.errors import ErrorCode as E

HEARTBEAT, DESCRIBE, API_VERSIONS, JOIN_GROUP, CONSUMER_HEARTBEAT = 76, 77, 18, 11, 68


@pytest.fixture
def broker(tmp_path):
    b = start(tmp_path, **{"group.coordinator.rebalance.protocols": "classic,consumer,share",
                           "group.share.session.timeout.ms": "45000"})
    trio.run(functools.partial(b.create_topic, "t", num_partitions=2))
    yield b
    b.shutdown()


def beat(broker, member_id, epoch, topics=("t",), group="sg"):
    return ask(broker, HEARTBEAT, 1, {"group_id": group, "member_id": member_id, "member_epoch": epoch,
                                      "rack_id": None,
                                      "subscribed_topic_names": list(topics) if topics is not None else None})


def parts(broker, response) -> set[int]:
    topic_id = broker.metadata.topic("t").topic_id
    return {p for tp in response.assignment.topic_partitions if tp.topic_id == topic_id for p in tp.partitions}


def test_more_members_than_partitions_all_get_work(broker):
    a = beat(broker, "a", 0)
    assert (a.error_code, a.member_id, a.member_epoch) == (E.none, "a", 1) and parts(broker, a) == {0, 1}
    b = beat(broker, "b", 0)
    c = beat(broker, "c", 0)
    assert c.member_epoch == 3
    owned = {"a": parts(broker, a), "b": parts(broker, b), "c": parts(broker, c)}
    for member, epoch in (("a", 1), ("b", 2)):  # steady heartbeats: the epoch moves on
        r = beat(broker, member, epoch, topics=None)
        assert r.member_epoch == 3
        if r.assignment is not None:  # sent only when it changed
            owned[member] = parts(broker, r)
    assert all(owned.values())  # three members, two partitions: every member has work
    assert set().union(*owned.values()) == {0, 1}
    steady = beat(broker, "a", 3, topics=None)
    assert steady.error_code == E.none and steady.assignment is None  # unchanged: not sent again
    (group,) = ask(broker, DESCRIBE, 1, {"group_ids": ["sg"], "include_authorized_operations": False}).groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignor_name) == (E.none, "Stable", 3,
                                                                                          "simple")
    assert {m.member_id: {p for tp in m.assignment.topic_partitions for p in tp.partitions} for m in group.members} \
        == owned
    assert all(tp.topic_name == "t" for m in group.members for tp in m.assignment.topic_partitions)


def test_kafkas_errors(broker):
    assert beat(broker, "", 0).error_code == E.invalid_request
    assert beat(broker, "a", 0, topics=None).error_code == E.invalid_request  # the first heartbeat subscribes
    assert beat(broker, "a", 3, topics=None).error_code == E.unknown_member_id  # unknown here (after a failover, too): join again
    beat(broker, "a", 0)
    assert beat(broker, "x", 1, topics=None).error_code == E.unknown_member_id
    assert beat(broker, "a", 7, topics=None).error_code == E.fenced_member_epoch
    left = beat(broker, "a", -1, topics=None)
    assert (left.error_code, left.member_epoch) == (E.none, -1)
    (group,) = ask(broker, DESCRIBE, 1, {"group_ids": ["nope"], "include_authorized_operations": False}).groups
    assert (group.error_code, group.error_message) == (E.group_id_not_found, "Group nope not found.")


def test_a_silent_member_is_fenced_after_its_session_timeout(broker):
    coordinator = broker.group_coordinator
    gone = []
    coordinator.share_member_gone.append(lambda g, m: gone.append((g, m)))
    beat(broker, "a", 0)
    beat(broker, "b", 0)
    deadline = max(coordinator.timers.deadline(("shb", "sg", m)) for m in "ab")
    assert deadline - coordinator.clock() <= 45000
    coordinator.timers.run_due(deadline)
    assert ("sg", "a") in gone and ("sg", "b") in gone  # neither heartbeated again
    assert beat(broker, "a", 1, topics=None).error_code == E.unknown_member_id


def test_one_group_id_one_protocol(broker):
    beat(broker, "a", 0, group="shared-name")
    consumer = ask(broker, CONSUMER_HEARTBEAT, 1, {
        "group_id": "shared-name", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout": 30000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []})
    assert consumer.error_code == E.group_id_not_found
    join = ask(broker, JOIN_GROUP, 9, {
        "group_id": "shared-name", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
        "reason": None})
    assert join.error_code == E.inconsistent_group_protocol
    # and a consumer group's id is not a share group's
    ask(broker, CONSUMER_HEARTBEAT, 1, {
        "group_id": "cg", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout": 30000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []})
    refused = beat(broker, "a", 0, group="cg")
    assert (refused.error_code, refused.error_message) == (E.group_id_not_found, "Group cg is not a share group.")


def test_not_served_or_advertised_when_share_groups_are_off(tmp_path):
    b = start(tmp_path)  # the default: classic,consumer
    try:
        keys = {k.api_key for k in ask(b, API_VERSIONS, 3, {"client_software_name": "t",
                                                           "client_software_version": "1"}).api_keys}
        assert 68 in keys and HEARTBEAT not in keys and DESCRIBE not in keys
    finally:
        b.shutdown()


def test_advertised_at_the_versions_served(broker):
    versions = {k.api_key: (k.min_version, k.max_version) for k in ask(
        broker, API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert versions[HEARTBEAT] == (1, 1) and versions[DESCRIBE] == (1, 1)


def test_list_groups_shows_share_groups_with_their_type(broker):
    beat(broker, "a", 0)
    listed = ask(broker, 16, 5, {"states_filter": [], "types_filter": []}).groups
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == \
        [("sg", "share", "Stable", "share")]
    assert [g.group_id for g in ask(broker, 16, 5, {"states_filter": [], "types_filter": ["Share"]}).groups] == ["sg"]
    assert ask(broker, 16, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups == ()
