"""The describe rows and the tables, from made-up group descriptions (no broker), and the argument
handling of `kbroker groups`."""

import json

import pytest

from kbroker.admin.client import Broker, GroupDescription, Member
from kbroker.admin.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from kbroker.admin.groups import (describe_data, describe_text, format_table, member_views, offset_rows,
                                  parse_states)
from kbroker.admin.client import AdminError
from kbroker.cli import main

COORD = Broker(0, "127.0.0.1", 9092)


def _member(mid, partitions, topics=("t",)):
    return Member(mid, None, f"client-{mid}", "/127.0.0.1",
                  encode_subscription(Subscription(0, topics, b"", (), -1, None)),
                  encode_assignment(Assignment(0, partitions, b"")))


def _group(*members, state="Stable", protocol_type="consumer"):
    return GroupDescription("g", state, protocol_type, "range", tuple(members), COORD)


def test_rows_follow_kafka_describe():
    desc = _group(_member("m1", (("t", (0, 1)),)), _member("m2", ()))
    members = member_views(desc)
    committed = {("t", 0): 5, ("u", 0): 1}  # t-1 assigned, never committed; u-0 committed, unassigned
    log_end = {("t", 0): 8, ("t", 1): 4, ("u", 0): 3}
    rows = offset_rows(members, committed, log_end)
    assert [tuple(r) for r in rows] == [
        ("t", 0, 5, 8, 3, "m1", "/127.0.0.1", "client-m1"),
        ("t", 1, None, 4, None, "m1", "/127.0.0.1", "client-m1"),
        ("u", 0, 1, 3, 2, None, None, None),
        (None, None, None, None, None, "m2", "/127.0.0.1", "client-m2"),
    ]
    text = describe_text(desc, members, rows)
    lines = text.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[2].split() == ["g", "t", "1", "-", "4", "-", "m1", "/127.0.0.1", "client-m1"]
    assert "Stable" in text and "t(0,1)" in text
    data = json.loads(json.dumps(describe_data(desc, members, rows)))
    assert data["state"] == "Stable" and data["assignment_strategy"] == "range"
    assert data["members"][0]["assignment"] == [{"topic": "t", "partitions": [0, 1]}]
    assert data["members"][0]["subscribed_topics"] == ["t"]
    assert data["offsets"][1] == {"topic": "t", "partition": 1, "current_offset": None, "log_end_offset": 4,
                                  "lag": None, "consumer_id": "m1", "host": "/127.0.0.1", "client_id": "client-m1"}


def test_empty_group_says_so():
    desc = _group(state="Empty")
    rows = offset_rows([], {("t", 0): 2}, {("t", 0): None})
    assert rows[0].lag is None  # log end unknown: no lag either
    assert describe_text(desc, [], rows).startswith("Consumer group 'g' has no active members.")


def test_a_member_whose_assignment_does_not_decode_is_reported_not_fatal():
    bad = Member("m1", None, "c", "h", b"", b"\x00\x00\x7f\xff\xff\xff")
    views = member_views(_group(bad, _member("m2", (("t", (3,)),))))
    assert views[0].error and "assignment" in views[0].error
    assert views[1].assignment == (("t", (3,)),)


def test_other_protocol_types_are_not_decoded():
    views = member_views(_group(Member("m", None, "c", "h", b"garbage", b"garbage"), protocol_type="connect"))
    assert views[0].assignment == () and views[0].error is None


def test_format_table_aligns_and_marks_absent_values():
    assert format_table(("A", "LONGER"), [("xyz", None), ("", 7)]).splitlines() == [
        "A   LONGER", "xyz -", "-   7"]


def test_parse_states():
    assert parse_states(None) is None
    assert parse_states(["stable,EMPTY", "Empty"]) == ["Empty", "Stable"]
    with pytest.raises(AdminError, match="unknown group state 'Running'"):
        parse_states(["Running"])


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["groups", "reset-offsets", "g", "--topic", "t"])  # no strategy
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["groups", "reset-offsets", "g", "--topic", "t", "--all-topics", "--to-latest"])
    assert e.value.code == 2


def test_bad_arguments_are_reported_before_connecting(capsys):
    assert main(["groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "soon",
                 "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert "--to-datetime" in capsys.readouterr().err
    assert main(["groups", "list", "--bootstrap-server", "nohost"]) == 1
    assert "HOST:PORT" in capsys.readouterr().err
