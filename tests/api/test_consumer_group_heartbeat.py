"""ConsumerGroupHeartbeat (KIP-848) v0-v1 through the dispatch table on a real single-node broker:
topic ids on the wire, OffsetCommit v9 / OffsetFetch v9 at the member epoch (a zombie's commit is
STALE_MEMBER_EPOCH), ListGroups' group type, the two protocols refusing each other's members,
a restart that brings the group back from `__consumer_offsets`, and bad input answered with
Kafka's codes."""

import functools

import pytest
import trio
from brokerkit import ask, running, start

from kbroker.errors import ErrorCode as E

HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, JOIN_GROUP, API_VERSIONS = 68, 8, 9, 16, 11, 18




@pytest.fixture
def broker(tmp_path):
    yield from running(tmp_path, 4)




def beat(broker, member_id, epoch, version=1, owned=(), topics=("t",), **fields):
    topic_id = broker.metadata.topic("t").topic_id
    body = {"group_id": "g", "member_id": member_id, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 30000 if epoch == 0 else -1, "subscribed_topic_names": list(topics) if epoch == 0
            else None, "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": [{"topic_id": topic_id, "partitions": sorted(owned)}] if owned or epoch == 0
            else None}
    body.update(fields)
    if version == 0:
        body.pop("subscribed_topic_regex")
    return ask(broker, HEARTBEAT, version, body)


def assigned(response, broker) -> set[int]:
    topic_id = broker.metadata.topic("t").topic_id
    return {p for tp in response.assignment.topic_partitions if tp.topic_id == topic_id for p in tp.partitions}


def commit(broker, member_id, epoch, offset=5, version=9):
    body = ask(broker, OFFSET_COMMIT, version, {
        "group_id": "g", "generation_id_or_member_epoch": epoch, "member_id": member_id, "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                  "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return body.topics[0].partitions[0].error_code


def test_join_share_commit_and_fence(broker, tmp_path):
    r = beat(broker, "m1", 0)
    assert r.error_code == E.none and r.member_epoch == 1 and r.member_id == "m1"
    assert assigned(r, broker) == {0, 1, 2, 3}
    assert r.heartbeat_interval.total_seconds() * 1000 == 5000
    r2 = beat(broker, "m2", 0)
    assert r2.member_epoch == 2 and assigned(r2, broker) == set()  # m1 still holds everything
    r = beat(broker, "m1", 1, owned={0, 1, 2, 3})
    keep = assigned(r, broker)
    assert len(keep) == 2 and r.member_epoch == 1  # revoke two first
    r = beat(broker, "m1", 1, owned=keep)
    assert r.member_epoch == 2
    r2 = beat(broker, "m2", 2)
    assert assigned(r2, broker) == {0, 1, 2, 3} - keep

    assert commit(broker, "m1", 2) == E.none
    assert commit(broker, "m1", 1) == E.stale_member_epoch  # a zombie's commit
    assert commit(broker, "nobody", 2) == E.unknown_member_id
    assert commit(broker, "", -1) == E.unknown_member_id  # the group has members: no simple commits
    assert commit(broker, "m1", 2, version=8) == E.unsupported_version

    fetched = ask(broker, OFFSET_FETCH, 9, {"groups": [{"group_id": "g", "member_id": "m1", "member_epoch": 1,
                                                       "topics": None}], "require_stable": False})
    assert fetched.groups[0].error_code == E.stale_member_epoch
    fetched = ask(broker, OFFSET_FETCH, 9, {"groups": [{"group_id": "g", "member_id": "m1", "member_epoch": 2,
                                                       "topics": None}], "require_stable": False})
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 5

    listed = ask(broker, LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [("g", "consumer", "Stable")]
    assert ask(broker, LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]}).groups == ()

    # a classic member may join this consumer group (the online migration): first a member id
    join = ask(broker, JOIN_GROUP, 9, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                                       "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                       "protocols": [{"name": "range", "metadata": b""}], "reason": None})
    assert join.error_code == E.member_id_required

    # leaving frees the partitions for the other member
    r = beat(broker, "m2", -1)
    assert r.error_code == E.none and r.member_epoch == -1
    r = beat(broker, "m1", 2, owned=keep)
    assert r.member_epoch == 3 and assigned(r, broker) == {0, 1, 2, 3}


def test_a_restarted_broker_brings_the_group_back(tmp_path):
    b = start(tmp_path)
    trio.run(functools.partial(b.create_topic, "t", num_partitions=2))
    r = beat(b, "m1", 0)
    assert assigned(r, b) == {0, 1}
    assert commit(b, "m1", 1, offset=9) == E.none
    b.shutdown()
    b = start(tmp_path)
    try:
        group = b.group_coordinator.groups["g"].consumer
        assert group is not None and group.members["m1"].epoch == 1
        assert group.members["m1"].current.assigned == {"t": frozenset({0, 1})}
        r = beat(b, "m1", 1, owned={0, 1})
        assert r.error_code == E.none and r.member_epoch == 1
        assert commit(b, "m1", 1, offset=10) == E.none
    finally:
        b.shutdown()


def test_v0_names_the_member_and_v1_requires_a_name(broker):
    r = beat(broker, "", 0, version=0)
    assert r.error_code == E.none and len(r.member_id) == 22
    assert beat(broker, "", 0, version=1).error_code == E.invalid_request


@pytest.mark.parametrize("fields, code", [
    ({"member_epoch": 5}, E.unknown_member_id),
    ({"subscribed_topic_regex": "(["}, E.invalid_regular_expression),
    ({"server_assignor": "sticky"}, E.unsupported_assignor),
    ({"rebalance_timeout": -1}, E.invalid_request),
    ({"group_id": ""}, E.invalid_group_id),
])
def test_bad_heartbeats(broker, fields, code):
    epoch = fields.pop("member_epoch", 0)
    r = beat(broker, "m1", epoch, **fields)
    assert r.error_code == code
    assert r.assignment is None


def test_a_classic_group_with_an_unreadable_subscription_is_not_upgraded(broker):
    done = []
    broker.group_coordinator.join_group("g", "", None, False, "c", "/h", 10000, 10000, "consumer",
                                        [("range", b"")], done.append)
    r = beat(broker, "m1", 0)
    assert r.error_code == E.group_id_not_found


def test_disabled_protocol_is_not_advertised(tmp_path):
    b = start(tmp_path, **{"group.coordinator.rebalance.protocols": "classic"})
    try:
        versions = ask(b, API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert HEARTBEAT not in {k.api_key for k in versions.api_keys}
    finally:
        b.shutdown()
    b = start(tmp_path / "on")
    try:
        versions = ask(b, API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert {(k.api_key, k.min_version, k.max_version) for k in versions.api_keys if k.api_key == HEARTBEAT} \
            == {(HEARTBEAT, 0, 1)}
    finally:
        b.shutdown()


DESCRIBE = 69


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_describe(broker, version):
    r = beat(broker, "m1", 0, rack_id="r1")
    beat(broker, "m2", 0)
    described = ask(broker, DESCRIBE, version, {"group_ids": ["g", "nothing"], "include_authorized_operations": True})
    g, missing = described.groups
    assert g.error_code == E.none and g.group_state == "Reconciling"  # m1 still has to revoke
    assert (g.group_epoch, g.assignment_epoch, g.assignor_name) == (2, 2, "uniform")
    members = {m.member_id: m for m in g.members}
    assert set(members) == {"m1", "m2"} and members["m1"].rack_id == "r1"
    assert members["m1"].subscribed_topic_names == ("t",) and members["m1"].member_epoch == 1
    current = {p for tp in members["m1"].assignment.topic_partitions for p in tp.partitions}
    target = {p for tp in members["m1"].target_assignment.topic_partitions for p in tp.partitions}
    assert current == assigned(r, broker) == {0, 1, 2, 3} and len(target) == 2
    assert members["m1"].assignment.topic_partitions[0].topic_name == "t"
    if version >= 1:
        assert members["m1"].member_type == 1
    assert g.authorized_operations != -2147483648
    assert missing.error_code == E.group_id_not_found and missing.members == ()


def test_consumer_group_describe_of_a_classic_group(broker):
    broker.group_coordinator.join_group("classic", "", None, False, "c", "/h", 10000, 10000, "consumer",
                                        [("range", b"")], lambda _r: None)
    described = ask(broker, DESCRIBE, 1, {"group_ids": ["classic"], "include_authorized_operations": False})
    assert described.groups[0].error_code == E.group_id_not_found
    assert "not a consumer group" in described.groups[0].error_message


def test_transactional_offset_commit_from_a_consumer_protocol_member(broker):
    beat(broker, "m1", 0)

    def txn_commit(member_id, epoch, version=4):
        body = ask(broker, 28, version, {
            "transactional_id": "tx", "group_id": "g", "producer_id": 4000, "producer_epoch": 0,
            "generation_id": epoch, "member_id": member_id, "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 3,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        return body.topics[0].partitions[0].error_code

    assert txn_commit("m1", 1) == E.none
    assert txn_commit("m1", 0) == E.illegal_generation  # Kafka maps STALE_MEMBER_EPOCH here
    assert txn_commit("zz", 1) == E.unknown_member_id
    assert txn_commit("", -1) == E.unknown_member_id  # the group has members


def test_without_migration_the_protocols_refuse_each_other(tmp_path):
    b = start(tmp_path, **{"group.consumer.migration.policy": "disabled"})
    try:
        trio.run(functools.partial(b.create_topic, "t", num_partitions=2))
        assert beat(b, "m1", 0).error_code == E.none
        join = ask(b, JOIN_GROUP, 9, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                                      "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                      "protocols": [{"name": "range", "metadata": b""}], "reason": None})
        assert join.error_code == E.inconsistent_group_protocol
        b.group_coordinator.join_group("c", "", None, False, "c", "/h", 10000, 10000, "consumer",
                                       [("range", b"")], lambda _r: None)
        r = ask(b, HEARTBEAT, 1, {"group_id": "c", "member_id": "m9", "member_epoch": 0, "instance_id": None,
                                  "rack_id": None, "rebalance_timeout": 1000, "subscribed_topic_names": ["t"],
                                  "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
        assert r.error_code == E.group_id_not_found
    finally:
        b.shutdown()
