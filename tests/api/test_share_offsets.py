"""DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0, DeleteShareGroupOffsets (92)
v0 and DeleteGroups of a share group, through the dispatch table on a real single-node broker: start
offsets and lag, moving the start of an empty group (records before it are not delivered, records
after it are), refusals for a group with members and for other groups' ids."""

from __future__ import annotations


from brokerkit import ask
from test_share_fetch import acknowledge, acquired, broker, join, produce, share_fetch  # noqa: F401 (broker: the fixture)

from kbroker.errors import ErrorCode as E

DESCRIBE, ALTER, DELETE, DELETE_GROUPS, HEARTBEAT, ACCEPT = 90, 91, 92, 42, 76, 1


def describe(broker, topics=None, version=1, group="sg"):
    body = {"groups": [{"group_id": group, "topics": None if topics is None else
                        [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}]}
    (g,) = ask(broker, DESCRIBE, version, body).groups
    return g


def leave(broker, member):
    return ask(broker, HEARTBEAT, 1, {"group_id": "sg", "member_id": member, "member_epoch": -1, "rack_id": None,
                                      "subscribed_topic_names": None})


def test_describe_shows_start_offset_and_lag(broker):
    assert describe(broker).error_code == E.group_id_not_found
    join(broker, "a")
    share_fetch(broker, "a", 0)
    produce(broker, [b"a", b"b", b"c"])
    assert acquired(share_fetch(broker, "a", 1))[0] == [(0, 2, 1)]
    acknowledge(broker, "a", 2, [(0, 0, [ACCEPT])])
    g = describe(broker)
    assert g.error_code == E.none
    ((topic,),) = [g.topics]
    (p,) = topic.partitions
    assert (topic.topic_name, topic.topic_id, p.partition_index, p.start_offset, p.lag) == \
        ("t", broker.metadata.topic("t").topic_id, 0, 1, 2)
    (p0,) = describe(broker, {"t": [0]}, version=0).topics[0].partitions
    assert p0.start_offset == 1
    (missing,) = describe(broker, {"t": [7]}).topics[0].partitions
    assert missing.error_code == E.unknown_topic_or_partition


def test_alter_and_delete_need_an_empty_group(broker):
    join(broker, "a")
    share_fetch(broker, "a", 0)
    produce(broker, [b"r0", b"r1", b"r2", b"r3"])
    alter = {"group_id": "sg", "topics": [{"topic_name": "t", "partitions": [{"partition_index": 0,
                                                                              "start_offset": 3}]}]}
    assert ask(broker, ALTER, 0, alter).error_code == E.non_empty_group
    assert ask(broker, DELETE, 0, {"group_id": "sg", "topics": [{"topic_name": "t"}]}).error_code == E.non_empty_group
    assert ask(broker, DELETE_GROUPS, 2, {"groups_names": ["sg"]}).results[0].error_code == E.non_empty_group
    share_fetch(broker, "a", -1, forget=True)  # close the session
    assert leave(broker, "a").error_code == E.none
    altered = ask(broker, ALTER, 0, alter)
    assert altered.error_code == E.none and altered.responses[0].partitions[0].error_code == E.none
    assert describe(broker).topics[0].partitions[0].start_offset == 3
    join(broker, "b")
    assert acquired(share_fetch(broker, "b", 0)) == ([(3, 3, 1)], [b"r3"])  # from the altered start
    share_fetch(broker, "b", -1, forget=True)
    leave(broker, "b")
    deleted = ask(broker, DELETE, 0, {"group_id": "sg", "topics": [{"topic_name": "t"}]})
    assert deleted.error_code == E.none and deleted.responses[0].error_code == E.none
    left = describe(broker)
    assert (left.error_code, left.topics) == (E.none, ())  # the (empty) group stays, its state is gone


def test_delete_groups_removes_a_share_group(broker):
    join(broker, "a")
    share_fetch(broker, "a", 0)
    share_fetch(broker, "a", -1, forget=True)
    leave(broker, "a")
    assert describe(broker).error_code == E.none  # its state outlives its members
    (result,) = ask(broker, DELETE_GROUPS, 2, {"groups_names": ["sg"]}).results
    assert result.error_code == E.none
    assert describe(broker).error_code == E.group_id_not_found
    assert ask(broker, DELETE_GROUPS, 2, {"groups_names": ["sg"]}).results[0].error_code == E.group_id_not_found


def test_another_groups_id_is_refused(broker):
    ask(broker, 68, 1, {"group_id": "cg", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None,
                        "rebalance_timeout": 30000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
                        "server_assignor": None, "topic_partitions": []})
    g = describe(broker, group="cg")
    assert (g.error_code, g.error_message) == (E.group_id_not_found, "Group cg is not a share group.")
