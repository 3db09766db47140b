"""What `kbroker groups describe` and the metrics read of a consumer-protocol group, on a real
single-node broker: ConsumerGroupDescribe's current assignment is what a member holds (partitions it
has yet to revoke included), and the coordinator counts its group epoch bumps — not the log it
replays — and forgets a group it no longer coordinates."""

from __future__ import annotations

import pytest
from brokerkit import running
from test_consumer_group_heartbeat import ask, assigned, beat

from kbroker.errors import ErrorCode as E

DESCRIBE = 69


@pytest.fixture
def broker(tmp_path):
    yield from running(tmp_path, 4)


def _parts(assignment) -> set[int]:
    return {p for tp in assignment.topic_partitions for p in tp.partitions}


def test_a_member_revoking_still_shows_what_it_holds(broker):
    first = beat(broker, "m1", 0)
    beat(broker, "m2", 0)
    r = beat(broker, "m1", first.member_epoch, owned=assigned(first, broker))  # told to give up two
    assert r.error_code == E.none and len(assigned(r, broker)) == 2
    g = ask(broker, DESCRIBE, 1, {"group_ids": ["g"], "include_authorized_operations": False}).groups[0]
    m1 = next(m for m in g.members if m.member_id == "m1")
    assert _parts(m1.assignment) == {0, 1, 2, 3}  # still its own until its heartbeat no longer lists them
    assert _parts(m1.target_assignment) == assigned(r, broker)


def test_group_epoch_bumps_are_counted_not_replayed(broker):
    coordinator = broker.group_coordinator
    first = beat(broker, "m1", 0)
    beat(broker, "m2", 0)
    beat(broker, "m1", first.member_epoch, owned=assigned(first, broker))  # reconciling: no new epoch
    assert coordinator.consumer_rebalances == {"g": 2} and coordinator.consumer_rebalances_total == 2
    partition = coordinator.partition_for("g")
    coordinator.unload_partition(partition)
    assert coordinator.consumer_rebalances == {}
    coordinator.load_partition(partition)
    assert coordinator.groups["g"].consumer.epoch == 2 and coordinator.consumer_rebalances == {}
    assert coordinator.consumer_rebalances_total == 2  # Kafka's count since start


def test_describe_groups_v6_says_group_id_not_found_where_v5_says_dead(broker):
    """KIP-1043: DescribeGroups v6 answers a group that is not a classic group — unknown, or a
    consumer-protocol group — GROUP_ID_NOT_FOUND with Kafka's message; v0-5 only call it Dead."""
    beat(broker, "m1", 0)  # "g": a consumer-protocol group
    request = {"groups": ["g", "nope"], "include_authorized_operations": True}
    g, nope = ask(broker, 15, 6, request).groups
    assert (g.error_code, g.group_state, g.error_message) == (E.group_id_not_found, "Dead",
                                                              "Group g is not a classic group.")
    assert (nope.error_code, nope.group_state, nope.error_message) == (E.group_id_not_found, "Dead",
                                                                       "Group nope not found.")
    assert g.authorized_operations == nope.authorized_operations == -2**31  # only for groups described
    for old in ask(broker, 15, 5, request).groups:
        assert (old.error_code, old.group_state, old.members) == (E.none, "Dead", ())
