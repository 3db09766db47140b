"""The console's charts and consumer-protocol groups through the web application, with the brokers
faked at the backend (no sockets): the sampling round's requests, the charts on the group, groups
and topic pages, and a consumer-protocol group's page with and without ConsumerGroupDescribe.
compat-tests/test_console_browser.py checks the same pages in a browser against a real broker."""

from __future__ import annotations

import threading
import xml.etree.ElementTree as ET
from contextlib import contextmanager

import anyio
import pytest

from kbroker.admin.client import Broker, GroupListing, PartitionState, TopicState
from kbroker.admin.consumer_groups import ConsumerGroupDescription, ConsumerMember
from kbroker.admin.groups import OffsetRow
from kbroker.console import backend as backend_module
from kbroker.console.app import create_app
from kbroker.console.backend import ConsoleBackend, GroupDetail, SamplingStopped, TopicDetail
from kbroker.console.pages import consumer_group_info, consumer_member_row, member_view
from kbroker.console.samples import SampleRound
from tests.console.test_console_login import request

B1 = Broker(1, "127.0.0.1", 9092)
ORDERS = TopicState("orders", "id", False, tuple(PartitionState(p, 1, (1,), (1,), ()) for p in range(2)))
OFFSETS = TopicState("__consumer_offsets", "id2", True, (PartitionState(0, 1, (1,), (1,), ()),))


def member(member_id: str, epoch: int, current, target) -> ConsumerMember:
    return ConsumerMember(member_id, None, f"client-{member_id}", "/10.0.0.1", None, epoch, ("orders",), "ord.*",
                          tuple(current), tuple(target))


class FakeClient:
    """The AdminClient calls a sampling round makes, answered from dicts; every call recorded."""

    def __init__(self, committed: dict, log_end: dict) -> None:
        self.committed, self.log_end, self.calls = committed, log_end, []

    def list_groups(self):
        self.calls.append("ListGroups")
        return [GroupListing(g, "Stable", "consumer") for g in self.committed]

    def committed_offsets(self, group):
        self.calls.append(f"OffsetFetch {group}")
        return self.committed[group]

    def describe_topics(self, topics):
        self.calls.append("Metadata")
        return {1: B1}, [OFFSETS, ORDERS]

    def list_offsets(self, tps, timestamp, strict=True):
        self.calls.append(f"ListOffsets {len(set(tps))}")
        return {tp: self.log_end.get(tp) for tp in tps}


def backend_with(client) -> ConsoleBackend:
    backend = ConsoleBackend("127.0.0.1:1", 1.0)

    @contextmanager
    def lease():
        yield client

    backend.pool.client = lease  # type: ignore[method-assign]
    return backend


def test_a_sampling_round_is_one_listing_one_offset_fetch_per_group_and_one_list_offsets():
    client = FakeClient({"billing": {("orders", 0): 3, ("orders", 1): 1}, "audit": {("gone", 0): 5}},
                        {("orders", 0): 10, ("orders", 1): 4, ("__consumer_offsets", 0): 7})
    sample = backend_with(client).sample(threading.Event())
    assert client.calls == ["ListGroups", "OffsetFetch billing", "OffsetFetch audit", "Metadata", "ListOffsets 4"]
    assert sample == SampleRound({"billing": 10, "audit": None}, {"orders": 14, "__consumer_offsets": 7})


def test_a_round_stops_when_told():
    stop = threading.Event()
    stop.set()
    client = FakeClient({"billing": {}}, {})
    with pytest.raises(SamplingStopped):
        backend_with(client).sample(stop)
    assert client.calls == ["ListGroups"]


def test_a_consumer_group_is_described_with_consumer_group_describe(monkeypatch):
    desc = ConsumerGroupDescription("fresh", "Reconciling", 8, 8, "uniform", (
        member("m1", 7, [("orders", (0, 1))], [("orders", (0,))]), member("m2", 8, [], [("orders", (1,))])), B1)
    monkeypatch.setattr(backend_module, "describe_consumer_group", lambda client, g: desc if g == "fresh" else None)
    client = FakeClient({"fresh": {("orders", 0): 2}}, {("orders", 0): 4, ("orders", 1): 9})
    detail = backend_with(client).group("fresh")
    assert (detail.group_type, detail.state, detail.protocol, detail.total_lag) == (
        "consumer", "Reconciling", "uniform", 2)
    assert detail.consumer.group_epoch == 8 and [m.member_id for m in detail.consumer.members] == ["m1", "m2"]
    assert [(r.topic, r.partition, r.lag, r.consumer_id) for r in detail.offsets] == [
        ("orders", 0, 2, "m1"), ("orders", 1, None, "m1"), (None, None, None, "m2")]


def test_groups_list_describes_consumer_groups_with_consumer_group_describe(monkeypatch):
    desc = ConsumerGroupDescription("fresh", "Stable", 3, 3, "uniform", (member("m1", 3, [("orders", (0,))],
                                                                                [("orders", (0,))]),), B1)
    monkeypatch.setattr(backend_module, "describe_consumer_group", lambda client, g: desc)

    class Client(FakeClient):
        def list_groups(self):
            return [GroupListing("fresh", "Stable", "consumer", "consumer")]

    (row,) = backend_with(Client({"fresh": {("orders", 0): 1}}, {("orders", 0): 4})).groups()
    assert row == ("fresh", "Stable", "consumer", 1, ("orders",), 3, None, "consumer")


# -- pages -------------------------------------------------------------------------------------------

@pytest.fixture
def app(monkeypatch):
    monkeypatch.setattr(ConsoleBackend, "may_reset_offsets", lambda self, group: True)
    return create_app("127.0.0.1:1", 1.0, 1.0)


def fill(app, clock_start: float = 100.0) -> None:
    """Three rounds of samples: billing's lag 9, 5, 0; orders at 0, 10, 30 messages (2 s apart)."""
    store = app.state.samples
    store.clock = lambda: clock_start + 6
    for i, (lag, end) in enumerate(((9, 0), (5, 10), (0, 30))):
        store.record(SampleRound({"billing": lag}, {"orders": end}), at=clock_start + 2 * i)


def figure(body: str, ident: str) -> ET.Element:
    start = body.index(f'<figure class="chart" id="{ident}"')
    return ET.fromstring(body[start:body.index("</figure>", start) + len("</figure>")])


def classic(group_id="billing") -> GroupDetail:
    return GroupDetail(group_id, "Empty", "consumer", "", B1, [], [OffsetRow("orders", 0, 4, 4, 0, None, None, None)],
                       0)


def test_group_page_charts_the_lag_with_the_latest_value(app, monkeypatch):
    monkeypatch.setattr(ConsoleBackend, "group", lambda self, g: classic(g))
    status, _h, body = request(app, "GET", "/groups/billing")
    assert status == 200 and 'class="chart empty" id="lag-chart"' in body and "collecting samples…" in body
    fill(app)
    status, _h, body = request(app, "GET", "/_live/groups/billing")
    chart = figure(body, "lag-chart")
    assert chart.get("data-samples") == "3"
    assert chart.find("figcaption/span[@class='latest']/span[@class='value']").text == "0"
    label = chart.find("{http://www.w3.org/2000/svg}svg").get("aria-label")
    assert label == "Lag of group billing, last 1 min: now 0 messages (lowest 0, highest 9, 3 samples)"
    assert 'id="group-type">classic<' in body


def test_groups_list_has_a_sparkline_per_group(app, monkeypatch):
    from kbroker.console.pages import GroupRow

    rows = [GroupRow("billing", "Stable", "consumer", 1, ("orders",), 0),
            GroupRow("fresh", "Stable", "consumer", None, (), None, None, "consumer")]
    monkeypatch.setattr(ConsoleBackend, "groups", lambda self: rows)
    fill(app)
    status, _h, body = request(app, "GET", "/groups")
    assert status == 200
    billing = body[body.index('data-group="billing"'):body.index('data-group="fresh"')]
    assert '<figure class="sparkline" data-samples="3">' in billing and 'role="img"' in billing
    fresh = body[body.index('data-group="fresh"'):]
    assert "collecting samples…" in fresh and '<td class="type">consumer</td>' in fresh


def test_topic_page_charts_messages_per_second(app, monkeypatch):
    monkeypatch.setattr(ConsoleBackend, "topic", lambda self, name: TopicDetail(ORDERS, [], [], {1: B1}))
    fill(app)
    status, _h, body = request(app, "GET", "/topics/orders")
    assert status == 200
    chart = figure(body, "rate-chart")
    assert chart.get("data-samples") == "2"  # three sums, two rates
    assert chart.find("figcaption/span[@class='latest']/span[@class='value']").text == "10"
    assert "msg/s" in "".join(chart.itertext())


def test_a_failed_round_is_said_under_the_chart(app, monkeypatch):
    monkeypatch.setattr(ConsoleBackend, "group", lambda self, g: classic(g))
    fill(app)
    app.state.samples.failed("no broker answered <at all>")
    _status, _h, body = request(app, "GET", "/_live/groups/billing")
    assert "The last sampling round failed: no broker answered &lt;at all&gt;" in body


def consumer_detail(desc: ConsumerGroupDescription) -> GroupDetail:
    return GroupDetail("fresh", desc.state, "consumer", desc.assignor, B1, [member_view(m) for m in desc.members],
                       [OffsetRow("orders", 0, 2, 4, 2, "m1", "/10.0.0.1", "c1")], 2, "consumer",
                       consumer_group_info(desc))


def test_consumer_group_page_shows_epochs_and_each_members_current_and_target(app, monkeypatch):
    desc = ConsumerGroupDescription("fresh", "Reconciling", 9, 8, "uniform", (
        member("m1", 7, [("orders", (0, 1))], [("orders", (0,))]), member("m2", 8, [], [("orders", (1,))])), B1)
    monkeypatch.setattr(ConsoleBackend, "group", lambda self, g: consumer_detail(desc))
    status, _h, body = request(app, "GET", "/groups/fresh")
    assert status == 200
    assert 'id="group-type">consumer<' in body and 'id="state">Reconciling<' in body
    assert 'id="group-epoch">9<' in body and 'id="assignment-epoch">8<' in body and "the uniform assignor" in body
    m1 = body[body.index('data-member="m1"'):body.index('data-member="m2"')]
    assert 'class="reconciling"' in m1 and 'class="current">orders [0, 1]<' in m1
    assert 'class="target">orders [0]<' in m1 and "orders [1]</span>" in m1  # pending revocation
    m2 = body[body.index('data-member="m2"'):]
    assert "waiting for orders [1]" in m2


def test_member_row_reconciliation():
    row = consumer_member_row(member("m", 3, [("a", (0, 2)), ("b", (1,))], [("a", (0,)), ("b", (1, 2))]))
    assert row.pending_revocation == (("a", (2,)),) and row.awaiting == (("b", (2,)),)
    assert not row.reconciled and row.subscribed == "orders, /ord.*/"
    assert consumer_member_row(member("m", 3, [("a", (0,))], [("a", (0,))])).reconciled


def test_no_charts_with_login():
    from kbroker.admin.security import ClientSecurity

    security = ClientSecurity("SASL_SSL", None, "PLAIN", {"username": "u", "password": "p"})
    app = create_app("127.0.0.1:1", 5.0, 1.0, security, login=True)
    assert app.state.samples is None
    from kbroker.console.app import Charts

    assert "No charts with --login" in Charts(None).group_lag("g")


def test_the_sampler_runs_in_the_lifespan_and_stops_with_the_app(monkeypatch):
    stops: list[threading.Event] = []

    def sample(self, stop):
        stops.append(stop)
        return SampleRound({"billing": 7}, {"orders": len(stops)})

    monkeypatch.setattr(ConsoleBackend, "sample", sample)
    app = create_app("127.0.0.1:1", 0.5, 1.0)
    store = app.state.samples
    assert store.period_s == 1.0  # --refresh 0.5: sampled once a second

    async def main():
        inbox = [{"type": "lifespan.startup"}]
        sent = []
        started = anyio.Event()
        done = anyio.Event()

        async def receive():
            if inbox:
                return inbox.pop(0)
            await done.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message):
            sent.append(message["type"])
            if message["type"] == "lifespan.startup.complete":
                started.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
            await started.wait()
            with anyio.fail_after(5):
                while store.rounds < 1:
                    await anyio.sleep(0.01)
            done.set()
        return sent

    sent = anyio.run(main)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert store.lag("billing")[-1].value == 7 and stops and stops[0].is_set()
