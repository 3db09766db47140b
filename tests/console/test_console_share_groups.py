"""The console's share groups (KIP-932) against a real in-process broker with share groups on
(tests/admin/test_share_groups_cmd.py's SocketBroker, members made with the raw
ShareGroupHeartbeat): the groups list shows a share group with its type and a link to its page;
the page shows state, epochs, members with their partitions, each partition's start offset and
lag; the start offsets are reset behind the confirmation page, refused while the group has
members; a group of another type, or none, is an error in place."""

from __future__ import annotations

import pytest

from kbroker.admin.client import (
    AdminClient,
    Broker,
    ShareGroupDescription,
    ShareMember,
    ShareOffset,
)
from kbroker.console.app import create_app
from kbroker.console.pages import share_group_detail, share_group_row
from tests.admin.test_share_groups_cmd import SHARE_ON, SocketBroker, beat, produce
from tests.console.test_console_login import request


@pytest.fixture
def kb(tmp_path):
    b = SocketBroker(tmp_path, **SHARE_ON)
    b.create_topic("t", 2)
    yield b
    b.close()


@pytest.fixture
def app(kb):
    return create_app(kb.bootstrap, 5.0, 5.0)


def shown(n: int | None) -> str:
    """A figure as the page shows it."""
    return "—" if n is None else str(n)


def row_of(body: str, marker: str) -> str:
    start = body.index(marker)
    return body[start:body.index("</tr>", start)]


def test_the_list_and_the_page_show_a_share_group(kb, app):
    produce(kb, 0, 5)
    beat(kb, "member-a", 0)
    beat(kb, "member-a", -1)  # leaves: the group is Empty, its start offsets can be set
    with AdminClient(kb.bootstrap, 5) as client:
        client.alter_share_group_offsets("sg", {("t", 0): 2})
    beat(kb, "member-b", 0)
    with AdminClient(kb.bootstrap, 5) as client:  # what `kbroker share-groups --describe` shows
        offsets = {(o.topic, o.partition): o for o in client.describe_share_group_offsets("sg")}
    assert offsets[("t", 0)].start_offset == 2
    lag = offsets[("t", 0)].lag  # 3 (5 records, start offset 2) where the broker knows it
    assert lag in (3, None)

    status, _h, body = request(app, "GET", "/_live/groups")
    assert status == 200
    row = row_of(body, 'data-group="sg"')
    assert 'href="/share-groups/sg"' in row and 'class="type">share<' in row and ">Stable<" in row
    assert f'class="num lag">{shown(lag)}<' in row

    status, _h, body = request(app, "GET", "/share-groups/sg")
    assert status == 200 and 'hx-get="/_live/share-groups/sg"' in body and 'id="reset-offsets"' in body
    assert 'id="group-type">share<' in body and 'id="state">Stable<' in body
    assert 'id="group-epoch">3<' in body and 'id="assignment-epoch">3<' in body  # a, a leaving, b
    assert f'id="total-lag">{shown(lag)}<' in body
    member = row_of(body, 'data-member="member-b"')
    assert 'class="client">test<' in member and 'class="num count">2<' in member
    assert 'class="assignment">t [0, 1]<' in member
    assert "member-a" not in body  # it left
    p0 = row_of(body, 'data-tp="t-0"')
    assert 'class="num start">2<' in p0 and f'class="num lag">{shown(lag)}<' in p0

    status, _h, fragment = request(app, "GET", "/_live/share-groups/sg")
    assert status == 200 and "<html" not in fragment and 'data-member="member-b"' in fragment


def test_reset_start_offsets_needs_confirmation_and_an_empty_group(kb, app):
    produce(kb, 0, 5)
    beat(kb, "a", 0)
    status, body = request(app, "POST", "/share-groups/sg", {"topic": "t", "strategy": "to-offset", "value": "1"})[::2]
    assert status == 400 and "NON_EMPTY_GROUP" in body
    beat(kb, "a", -1)
    status, body = request(app, "POST", "/share-groups/sg", {"topic": "t", "strategy": "to-offset", "value": "1"})[::2]
    assert status == 200 and 'name="planned" value="t:0:1"' in body and 'action="/share-groups/sg"' in body
    with AdminClient(kb.bootstrap, 5) as client:
        assert all(o.start_offset is None for o in client.describe_share_group_offsets("sg"))  # nothing altered
    status, headers, _ = request(app, "POST", "/share-groups/sg", {"planned": "t:0:1", "confirm": "yes"})
    assert status == 303 and headers["location"] == ["/share-groups/sg?done=reset"]
    with AdminClient(kb.bootstrap, 5) as client:
        after = {(o.topic, o.partition): o.start_offset for o in client.describe_share_group_offsets("sg")}
    assert after[("t", 0)] == 1 and after.get(("t", 1)) is None
    status, body = request(app, "POST", "/share-groups/sg", {"strategy": "shift-by", "value": "1"})[::2]
    assert status == 400 and "strategy must be one of to-earliest, to-latest, to-datetime, to-offset" in body


def test_not_a_share_group_is_an_error_in_place(kb, app):
    with AdminClient(kb.bootstrap, 5) as client:
        client.commit_offsets("cg", {("t", 0): 0})
    status, _h, body = request(app, "GET", "/_live/share-groups/cg")
    assert status == 200 and "Group &#39;cg&#39; is not a share group (it is a classic group)" in body
    status, _h, body = request(app, "GET", "/share-groups/nobody")
    assert status == 502 and "Share group &#39;nobody&#39; does not exist" in body


def test_share_rows_are_pure():
    coordinator = Broker(1, "h", 9092)
    desc = ShareGroupDescription("g", "Stable", 4, 3, (ShareMember("m", "c", "/h", 2, (("t", (0, 1)), ("u", (5,)))),),
                                 coordinator)
    offsets = [ShareOffset("t", 0, 0, 7, 2), ShareOffset("t", 1, 0, None, None), ShareOffset("v", 0, 0, 1, 5)]
    detail = share_group_detail(desc, offsets)
    assert detail.total_lag == 7 and detail.members[0].partitions == 3 and detail.coordinator_id == 1
    row = share_group_row("g", "Empty", "share", desc, offsets)
    assert (row.state, row.members, row.topics, row.lag, row.group_type) == ("Stable", 1, ("t", "u", "v"), 7, "share")
    gone = share_group_row("g", "Empty", "share", None, None)
    assert (gone.state, gone.members, gone.lag) == ("Empty", None, None)
