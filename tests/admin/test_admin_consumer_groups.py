"""`kbroker groups` for consumer-protocol (KIP-848) groups without a broker: ConsumerGroupDescribe's
answer as plain values, what a member still has to give up, the describe tables and JSON, the
fallback to DescribeGroups for classic groups and brokers without the API, the TYPE column of
`list`, and reset refused for an active consumer group."""

from __future__ import annotations

import argparse
import json
import uuid
from types import SimpleNamespace as NS

import pytest
from kio.schema.errors import ErrorCode

from kbroker.admin import groups as cli
from kbroker.admin.client import AdminError, Broker, GroupDescription, GroupListing, KafkaErrorResponse
from kbroker.admin.connection import CONSUMER_GROUP_DESCRIBE, DESCRIBE_GROUPS
from kbroker.admin.consumer_groups import (ConsumerGroupDescription, ConsumerMember, describe_consumer_group,
                                           description_of, member_rows, pending_revocation, state_row,
                                           subscription_text)
from kbroker.admin.reset import ResetSpec

COORD = Broker(0, "127.0.0.1", 9092)


def test_pending_revocation_is_current_minus_target():
    current = (("t", (0, 1, 2)), ("u", (0,)))
    assert pending_revocation(current, (("t", (1,)),)) == (("t", (0, 2)), ("u", (0,)))
    assert pending_revocation(current, current) == ()
    assert pending_revocation(current, ()) == current
    assert pending_revocation((), (("t", (0,)),)) == ()  # to receive is not to give up


def _tp(name, parts, topic_id=None):
    return NS(topic_id=topic_id, topic_name=name, partitions=tuple(parts))


def _wire_member(mid, client, current, target, epoch=3, **extra):
    fields = {"member_id": mid, "instance_id": None, "rack_id": None, "member_epoch": epoch, "client_id": client,
              "client_host": "/10.0.0.1", "subscribed_topic_names": ("t",), "subscribed_topic_regex": None,
              "assignment": NS(topic_partitions=tuple(_tp(t, ps) for t, ps in current)),
              "target_assignment": NS(topic_partitions=tuple(_tp(t, ps) for t, ps in target))}
    fields.update(extra)
    return NS(**fields)


def _wire_group(*members, state="Reconciling", error=ErrorCode.none, group="g"):
    return NS(error_code=error, error_message=None, group_id=group, group_state=state, group_epoch=4,
              assignment_epoch=4, assignor_name="uniform", members=tuple(members))


def test_the_answer_as_plain_values():
    tid = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)
    m = _wire_member("m-b", "cb", [("t", [3, 1])], [], rack_id="r1", instance_id="i1",
                     subscribed_topic_names=(), subscribed_topic_regex="^t.*")
    m.assignment.topic_partitions += (_tp("", [0], topic_id=tid),)  # a topic the broker names only by id
    desc = description_of(_wire_group(m, _wire_member("m-a", "ca", [], [("t", [0])])), COORD)
    assert [x.member_id for x in desc.members] == ["m-a", "m-b"]  # by client id
    b = desc.members[1]
    assert b.assignment == (("ASNFZ4mrze8BI0VniavN7w", (0,)), ("t", (1, 3)))
    assert (b.rack_id, b.instance_id, b.subscribed_topic_regex) == ("r1", "i1", "^t.*")
    assert subscription_text(b) == "/^t.*/"
    assert (desc.group_epoch, desc.assignment_epoch, desc.assignor) == (4, 4, "uniform")


def _desc() -> ConsumerGroupDescription:
    # a: holds 0-3, its target is 0-1 (still to give up 2-3); b: waits for 2-3
    a = ConsumerMember("a-1", "static-a", "ca", "/10.0.0.1", "r1", 3, ("t",), None, (("t", (0, 1, 2, 3)),),
                       (("t", (0, 1)),))
    b = ConsumerMember("b-1", None, "cb", "/10.0.0.2", None, 4, ("t",), "^u$", (), (("t", (2, 3)),))
    return ConsumerGroupDescription("g", "Reconciling", 4, 4, "uniform", (a, b), COORD)


def test_state_and_member_rows():
    desc = _desc()
    assert state_row(desc) == ("g", "consumer", "127.0.0.1:9092 (0)", "uniform", "Reconciling", 4, 4, 2)
    a, b = member_rows(desc)
    assert a == ("g", "a-1", "static-a", "/10.0.0.1", "ca", "r1", 4, 3, "t(0,1,2,3)", 4, "t(0,1)", "t(2,3)", "t")
    assert b == ("g", "b-1", None, "/10.0.0.2", "cb", None, 0, 4, None, 4, "t(2,3)", None, "t,/^u$/")


def test_describe_text_and_json():
    desc = _desc()
    members = cli.consumer_member_views(desc)
    rows = cli.offset_rows(members, {("t", 0): 5}, {("t", p): 10 for p in range(4)})
    text = cli.consumer_describe_text(desc, rows).splitlines()
    assert text[0].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert text[1].split() == ["g", "t", "0", "5", "10", "5", "a-1", "/10.0.0.1", "ca"]
    state_at = text.index(next(ln for ln in text if ln.startswith("GROUP TYPE")))
    assert text[state_at].split() == ["GROUP", "TYPE", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                      "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert text[state_at + 1].split() == ["g", "consumer", "127.0.0.1:9092", "(0)", "uniform", "Reconciling",
                                          "4", "4", "2"]
    members_at = state_at + 3
    assert text[members_at].split()[-6:] == ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                                             "TARGET-ASSIGNMENT", "PENDING-REVOCATION", "SUBSCRIPTION"]
    assert text[members_at + 1].split()[-6:] == ["3", "t(0,1,2,3)", "4", "t(0,1)", "t(2,3)", "t"]
    assert text[members_at + 2].split()[-6:] == ["4", "-", "4", "t(2,3)", "-", "t,/^u$/"]

    data = json.loads(json.dumps(cli.consumer_describe_data(desc, rows)))
    assert (data["group_type"], data["state"], data["protocol_type"], data["assignment_strategy"]) == (
        "consumer", "Reconciling", "consumer", "uniform")
    assert (data["group_epoch"], data["assignment_epoch"]) == (4, 4)
    a = data["members"][0]
    assert a["pending_revocation"] == [{"topic": "t", "partitions": [2, 3]}]
    assert a["target_assignment"] == [{"topic": "t", "partitions": [0, 1]}]
    assert (a["member_epoch"], a["rack"], a["group_instance_id"]) == (3, "r1", "static-a")
    assert data["members"][1]["assignment"] == [] and data["members"][1]["subscribed_topic_regex"] == "^u$"
    assert len(data["offsets"]) == 4 + 1  # a's four partitions, then b with nothing


def test_classic_json_has_the_same_keys():
    classic = GroupDescription("c", "Empty", "consumer", "range", (), COORD)
    consumer = cli.consumer_describe_data(_desc(), [])
    data = cli.describe_data(classic, [], [])
    assert set(data) == set(consumer) and data["group_type"] == "classic" and data["group_epoch"] is None
    view = cli.MemberView("m", None, "c", "/h", (), (), None)
    assert set(cli.describe_data(classic, [view], [])["members"][0]) == set(consumer["members"][0])
    assert "classic" in cli.describe_text(classic, [], []).splitlines()[-1].split()


def test_empty_consumer_group_says_so():
    empty = _desc()._replace(members=(), state="Empty")
    assert cli.consumer_describe_text(empty, []).startswith("Consumer group 'g' has no active members.")


class FakeClient:
    """What describe/reset ask of AdminClient, answering from canned bodies."""

    def __init__(self, answer=None, serves=True, committed=None) -> None:
        self.answer, self.calls = answer, []
        self.versions = {DESCRIBE_GROUPS: (0, 5), **({CONSUMER_GROUP_DESCRIBE: (0, 1)} if serves else {})}
        self.committed = committed or {}

    def find_coordinator(self, group):
        return COORD

    def connection(self, host, port):
        return NS(versions=self.versions)

    def _group_call(self, group, api_key, data, error_of):
        self.calls.append((api_key, data))
        assert api_key == CONSUMER_GROUP_DESCRIBE and data["group_ids"] == [group]
        error_of(self.answer)
        return self.answer, COORD

    def describe_group(self, group):
        self.calls.append((DESCRIBE_GROUPS, group))
        return GroupDescription(group, "Empty", "consumer", "", (), COORD)

    def committed_offsets(self, group):
        return dict(self.committed)

    def list_offsets(self, partitions, timestamp, strict=True):
        return {tp: 10 for tp in partitions}


def test_describe_falls_back_for_classic_groups_and_old_brokers():
    old = FakeClient(serves=False)
    assert describe_consumer_group(old, "g") is None and old.calls == []  # Kafka 3.x: no API 69
    classic = FakeClient(NS(groups=(_wire_group(error=ErrorCode.group_id_not_found),)))
    assert describe_consumer_group(classic, "g") is None
    denied = FakeClient(NS(groups=(_wire_group(error=ErrorCode.group_authorization_failed),)))
    with pytest.raises(KafkaErrorResponse, match="GROUP_AUTHORIZATION_FAILED"):
        describe_consumer_group(denied, "g")
    wrong = FakeClient(NS(groups=(_wire_group(group="other"),)))
    with pytest.raises(AdminError, match="none for 'g'"):
        describe_consumer_group(wrong, "g")


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(output=kw.pop("output", "table"), **kw)


def test_describe_command_shows_a_consumer_group(capsys):
    body = NS(groups=(_wire_group(_wire_member("m1", "c1", [("t", [0, 1])], [("t", [0])])),))
    client = FakeClient(body, committed={("t", 0): 4})
    assert cli._describe(client, _args(group="g", output="json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["group_type"] == "consumer" and data["members"][0]["pending_revocation"] == [
        {"topic": "t", "partitions": [1]}]
    assert [(r["partition"], r["current_offset"], r["lag"]) for r in data["offsets"]] == [(0, 4, 6), (1, None, None)]
    assert all(api == CONSUMER_GROUP_DESCRIBE for api, _ in client.calls)  # DescribeGroups not needed


def test_reset_is_refused_while_a_consumer_group_is_active():
    client = FakeClient(NS(groups=(_wire_group(_wire_member("m1", "c1", [], []), state="Stable"),)))
    with pytest.raises(AdminError, match="current state is Stable"):
        cli.plan_group_reset(client, "g", ResetSpec("to-earliest"), ["t:0"])


def test_list_shows_the_group_type(capsys):
    listed = [GroupListing("a", "Stable", "consumer", "consumer"), GroupListing("b", "Empty", "")]
    client = NS(list_groups=lambda states: listed)
    cli._list(client, _args(state=None))
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    assert lines == [["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"], ["a", "consumer", "Stable", "consumer"],
                     ["b", "classic", "Empty", "-"]]
    cli._list(client, _args(state=None, output="json"))
    assert json.loads(capsys.readouterr().out)[1] == {"group_id": "b", "group_type": "classic", "state": "Empty",
                                                      "protocol_type": ""}


def test_a_coordinator_not_found_yet_is_left_to_the_retrying_call():
    client = FakeClient(NS(groups=(_wire_group(_wire_member("m1", "c1", [], []), state="Stable"),)))

    def loading(group):
        raise KafkaErrorResponse(ErrorCode.coordinator_not_available, "FindCoordinator")

    client.find_coordinator = loading  # the real _group_call looks it up again until its timeout
    assert describe_consumer_group(client, "g").state == "Stable"
