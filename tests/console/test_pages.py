"""The console's table rows from made-up admin answers (no broker)."""

from kbroker.admin.client import Broker, ClusterDescription, GroupDescription, PartitionState, TopicState
from kbroker.admin.groups import MemberView, OffsetRow
from kbroker.console.pages import broker_rows, group_row, partition_rows, topic_rows

B = {i: Broker(i, "127.0.0.1", 9090 + i) for i in (1, 2, 3)}
T = TopicState("orders", "id", False, (PartitionState(0, 1, (1, 2, 3), (1, 2, 3), ()),
                                        PartitionState(1, 2, (2, 3, 1), (2, 3), ()),
                                        PartitionState(2, -1, (3, 1, 2), (3,), (3,))))
SIZES = {1: {("orders", 0): 100, ("orders", 1): 90, ("orders", 2): 5}, 2: {("orders", 0): 100, ("orders", 1): 100,
         ("orders", 2): 5}, 3: "timed out"}


def test_broker_rows_count_replicas_leaders_and_size():
    rows = broker_rows(ClusterDescription("c", 2, B), [T], SIZES)
    assert [(r.node_id, r.controller, r.replicas, r.leaders, r.size, r.size_error) for r in rows] == [
        (1, False, 3, 1, 195, None), (2, True, 3, 1, 205, None), (3, False, 3, 0, None, "timed out")]


def test_partition_and_topic_rows():
    start = {("orders", 0): 0, ("orders", 1): 5, ("orders", 2): None}
    end = {("orders", 0): 10, ("orders", 1): 7, ("orders", 2): 3}
    rows = partition_rows(T, start, end, SIZES)
    assert [(r.partition, r.messages, r.under_replicated, r.sizes) for r in rows] == [
        (0, 10, False, {1: 100, 2: 100, 3: None}), (1, 2, True, {2: 100, 3: None, 1: 90}),
        (2, None, True, {3: None, 1: 5, 2: 5})]
    (row,) = topic_rows([T], start, end, SIZES)
    assert (row.partitions, row.replication_factor, row.under_replicated, row.offline, row.messages, row.size) == (
        3, 3, 2, 1, None, None)
    (known,) = topic_rows([T], {k: 0 for k in end}, end, {b: {k: 1 for k in end} for b in B})
    assert (known.messages, known.size) == (20, 9)


def test_group_row_sums_lag_and_lists_topics():
    desc = GroupDescription("g", "Stable", "consumer", "range", (), B[1])
    members = [MemberView("m", None, "c", "/h", (("b", (0,)),), ("b",), None)]
    offsets = [OffsetRow("a", 0, 5, 9, 4, None, None, None), OffsetRow("b", 0, None, 3, None, "m", "/h", "c")]
    assert group_row(desc, members, offsets) == ("g", "Stable", "consumer", 1, ("a", "b"), 4, None, "classic")
    assert group_row(desc, [], []).lag is None
