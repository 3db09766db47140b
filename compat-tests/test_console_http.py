"""`kbroker console` over plain HTTP against a real broker (a real console process, urllib): every
page and its live fragment answer; record contents are escaped; changes need their confirmation
step and same-origin POSTs; bad input is a 4xx, not a crash; a share group (confluent-kafka's
ShareConsumer as its member) in the groups list and on its page with the figures `kbroker
share-groups --describe` shows, its start offsets reset behind the confirmation once it is empty.
Also the admin client's additions the console rests on (DescribeCluster, reads over Fetch) against
the real broker."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import pytest

import consolekit
from conftest import settled
from kbroker.admin.client import AdminClient, KafkaErrorResponse
from kbroker.admin.partition_reader import fetch_records

pytestmark = pytest.mark.timeout(120)
KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", **consolekit.SHARE_OVERRIDES}
TOPIC = "orders"
GROUP = "billing"
QUEUE, SHARE_GROUP, JOBS = "jobs", "jobs-workers", 6  # a share group; jobs per partition


@pytest.fixture(scope="module")
def console(kbroker, tmp_path_factory):
    consolekit.produce_orders(kbroker.bootstrap, TOPIC)
    assert consolekit.consume(kbroker.bootstrap, TOPIC, GROUP, 5) == 5
    c = consolekit.Console(kbroker.bootstrap, tmp_path_factory.mktemp("console-http"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def share_member(kbroker):
    """A ShareConsumer in SHARE_GROUP that received and acknowledged every job; closed at the end
    of the module (or by the test that needs the group empty)."""
    consumer = consolekit.share_member(kbroker.bootstrap, QUEUE, SHARE_GROUP, JOBS, client_id="console-share")
    yield consumer
    consumer.close()


def row_of(body: str, marker: str) -> str:
    start = body.index(marker)
    return body[start:body.index("</tr>", start)]


get = consolekit.get


def post(console, path: str, fields, headers=None) -> tuple[int, str, str | None]:
    """(status, body, Location) without following redirects."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    data = urllib.parse.urlencode(fields).encode() if not isinstance(fields, bytes) else fields
    req = urllib.request.Request(console.url + path, data=data, headers=headers or {}, method="POST")
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=30) as r:
            return r.status, r.read().decode(), r.headers.get("Location")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers.get("Location")


def test_every_page_and_fragment_answers(console, share_member):
    for path in ("/", "/topics", f"/topics/{TOPIC}", f"/topics/{TOPIC}/messages?mode=earliest", "/groups",
                 f"/groups/{GROUP}", f"/share-groups/{SHARE_GROUP}"):
        status, body = get(console, path)
        assert status == 200, (path, body[:500])
        assert 'hx-get="/_live' in body or "messages" in path
        status, fragment = get(console, "/_live" + path)
        assert status == 200 and "<html" not in fragment and "updated" in fragment, path


def test_pages_show_the_cluster(console, kbroker):
    with AdminClient(kbroker.bootstrap) as admin:
        cluster = admin.describe_cluster()
    assert list(cluster.brokers) == [cluster.controller_id]  # the single node is its own controller
    _, body = get(console, "/_live/")
    assert f'id="controller">{cluster.controller_id}<' in body and kbroker.bootstrap in body
    _, body = get(console, "/_live/topics")
    assert f'data-topic="{TOPIC}"' in body and "__consumer_offsets" in body
    with AdminClient(kbroker.bootstrap) as admin:
        committed = admin.committed_offsets(GROUP)
    _, body = get(console, f"/_live/groups/{GROUP}")
    assert f'id="total-lag">{sum(4 - o for o in committed.values())}<' in body  # 4 orders per partition


def test_message_contents_are_escaped(console):
    _, body = get(console, f"/topics/{TOPIC}/messages?mode=earliest&partition=0&filter=fragile")
    assert "&lt;b&gt;fragile&lt;/b&gt;" in body and "<b>fragile</b>" not in body
    assert body.count('class="message"') == 1


def test_bad_queries_are_400(console):
    for query in ("mode=sideways", "limit=100000", "partition=x", "mode=timestamp&timestamp=soon"):
        status, body = get(console, f"/topics/{TOPIC}/messages?{query}")
        assert status == 400 and 'class="error"' in body, query
    status, body = get(console, f"/topics/{TOPIC}/messages?partition=99")
    assert status == 502 and "no partition 99" in body


def test_unknown_topic_and_group_are_errors_on_the_page(console):
    status, body = get(console, "/topics/no-such-topic")
    assert status == 502 and "UNKNOWN_TOPIC_OR_PARTITION" in body
    status, body = get(console, "/_live/groups/no-such-group")
    assert status == 200 and "does not exist" in body  # a fragment shows the error in place


def test_create_topic_needs_confirmation(console, kbroker):
    fields = {"name": "created-http", "partitions": "2", "replication_factor": "", "configs": "retention.ms=3600000"}
    status, body, _ = post(console, "/topics", fields)
    assert status == 200 and 'id="confirm"' in body
    with AdminClient(kbroker.bootstrap) as admin, pytest.raises(KafkaErrorResponse):
        admin.describe_topics(["created-http"])
    status, _, location = post(console, "/topics", {**fields, "confirm": "yes"})
    assert status == 303 and location.endswith("/topics/created-http?done=created")
    with AdminClient(kbroker.bootstrap) as admin:
        _, (topic,) = admin.describe_topics(["created-http"])
        configs = {c.name: c.value for c in admin.describe_topic_configs(["created-http"])["created-http"]}
    assert len(topic.partitions) == 2 and configs["retention.ms"] == "3600000"
    status, body, _ = post(console, "/topics", {**fields, "confirm": "yes"})
    assert status == 400 and "TOPIC_ALREADY_EXISTS" in body


def test_reset_offsets_needs_confirmation(console, kbroker):
    status, body, _ = post(console, f"/groups/{GROUP}", {"topic": TOPIC, "strategy": "to-earliest", "value": ""})
    assert status == 200 and 'name="planned"' in body
    with AdminClient(kbroker.bootstrap) as admin:
        before = admin.committed_offsets(GROUP)
    assert sum(before.values()) == 5  # the preview committed nothing
    planned = [f"{TOPIC}:{p}:0" for p in range(3)]
    status, _, location = post(console, f"/groups/{GROUP}",
                               urllib.parse.urlencode([("planned", v) for v in planned] + [("confirm", "yes")]).encode())
    assert status == 303 and location.endswith(f"/groups/{GROUP}?done=reset")
    with AdminClient(kbroker.bootstrap) as admin:
        assert admin.committed_offsets(GROUP) == {(TOPIC, p): 0 for p in range(3)}
    status, body, _ = post(console, f"/groups/{GROUP}", {"topic": TOPIC, "strategy": "shift-by", "value": "x"})
    assert status == 400 and "whole number" in body


def test_cross_site_and_oversized_posts_are_refused(console):
    fields = {"name": "never-created", "confirm": "yes"}
    assert post(console, "/topics", fields, {"Origin": "http://elsewhere.example"})[0] == 403
    assert post(console, "/topics", fields, {"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert post(console, "/topics", b"name=" + b"x" * (2 * 1024 * 1024))[0] == 413
    status, body, _ = post(console, "/topics", {"name": "", "confirm": "yes"})
    assert status == 400 and "needs a name" in body


def test_a_share_group_in_the_list_and_on_its_page(console, kbroker, share_member):
    def acknowledged(body: str) -> bool:
        return all(f'class="num start">{JOBS}<' in row_of(body, f'data-tp="{QUEUE}-{p}"') for p in (0, 1))

    _, body = settled(lambda: get(console, f"/_live/share-groups/{SHARE_GROUP}"), lambda r: acknowledged(r[1]))
    assert 'id="group-type">share<' in body and 'id="state">Stable<' in body
    member = row_of(body, 'data-member="')
    assert 'class="client">console-share<' in member and 'class="num count">2<' in member
    assert f'class="assignment">{QUEUE} [0, 1]<' in member
    for p in (0, 1):  # every job acknowledged: the start offset past them, nothing to deliver
        row = row_of(body, f'data-tp="{QUEUE}-{p}"')
        assert f'class="num start">{JOBS}<' in row and 'class="num lag">0<' in row, row
    assert 'id="total-lag">0<' in body
    with AdminClient(kbroker.bootstrap) as admin:  # the figures `kbroker share-groups --describe` shows
        desc = admin.describe_share_group(SHARE_GROUP)
    assert f'data-member="{desc.members[0].member_id}"' in body
    assert f'id="group-epoch">{desc.group_epoch}<' in body and f'id="assignment-epoch">{desc.assignment_epoch}<' in body

    status, page = get(console, f"/share-groups/{SHARE_GROUP}")
    assert status == 200 and f'hx-get="/_live/share-groups/{SHARE_GROUP}"' in page
    _, listing = get(console, "/_live/groups")
    row = row_of(listing, f'data-group="{SHARE_GROUP}"')
    assert f'href="/share-groups/{SHARE_GROUP}"' in row and 'class="type">share<' in row and ">Stable<" in row
    assert 'class="num lag">0<' in row
    assert f'href="/groups/{GROUP}"' in row_of(listing, f'data-group="{GROUP}"')  # consumer groups as before


def test_share_group_start_offsets_reset_needs_confirmation(console, kbroker, share_member):
    fields = {"topic": QUEUE, "strategy": "to-earliest", "value": ""}
    status, body, _ = post(console, f"/share-groups/{SHARE_GROUP}", fields)
    assert status == 400 and "NON_EMPTY_GROUP" in body  # a member: refused, nothing planned
    share_member.close()
    empty = settled(lambda: get(console, f"/_live/share-groups/{SHARE_GROUP}")[1], lambda b: 'id="state">Empty<' in b)
    assert 'id="state">Empty<' in empty and "No active members." in empty
    status, body, _ = post(console, f"/share-groups/{SHARE_GROUP}", fields)
    assert status == 200 and f'name="planned" value="{QUEUE}:0:0"' in body and f"{QUEUE}:1:0" in body
    with AdminClient(kbroker.bootstrap) as admin:  # the preview altered nothing
        assert {o.partition: o.start_offset for o in admin.describe_share_group_offsets(SHARE_GROUP)} == \
            {0: JOBS, 1: JOBS}
    status, _, location = post(console, f"/share-groups/{SHARE_GROUP}",
                               urllib.parse.urlencode([("planned", f"{QUEUE}:0:0"), ("confirm", "yes")]).encode())
    assert status == 303 and location.endswith(f"/share-groups/{SHARE_GROUP}?done=reset")
    _, body = get(console, f"/_live/share-groups/{SHARE_GROUP}")
    assert 'class="num start">0<' in row_of(body, f'data-tp="{QUEUE}-0"')
    assert f'class="num start">{JOBS}<' in row_of(body, f'data-tp="{QUEUE}-1"')


def test_fetch_records_reads_what_was_produced(kbroker):
    with AdminClient(kbroker.bootstrap) as admin:
        fetched = fetch_records(admin, TOPIC, 1, 0)
    orders = [r for r in fetched.records]
    assert [r.key for r in orders] == [f"order-{i}".encode() for i in range(1, 12, 3)]
    assert orders[0].headers[0] == ("source", b"checkout")
    assert fetched.high_watermark == 4 and fetched.next_offset == 4 and fetched.log_start_offset == 0
