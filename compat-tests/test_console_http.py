"""`kbroker console` over plain HTTP against a real broker (a real console process, urllib): every
page and its live fragment answer; record contents are escaped; changes need their confirmation
step and same-origin POSTs; bad input is a 4xx, not a crash. Also the admin client's additions
the console rests on (DescribeCluster, reads over Fetch) against the real broker."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request

import pytest

import consolekit
from kbroker.admin.client import AdminClient, KafkaErrorResponse
from kbroker.admin.partition_reader import fetch_records

pytestmark = pytest.mark.timeout(120)
KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
TOPIC = "orders"
GROUP = "billing"


@pytest.fixture(scope="module")
def console(kbroker, tmp_path_factory):
    consolekit.produce_orders(kbroker.bootstrap, TOPIC)
    assert consolekit.consume(kbroker.bootstrap, TOPIC, GROUP, 5) == 5
    c = consolekit.Console(kbroker.bootstrap, tmp_path_factory.mktemp("console-http"))
    yield c
    c.stop()


def get(console, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(console.url + path, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


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


def test_every_page_and_fragment_answers(console):
    for path in ("/", "/topics", f"/topics/{TOPIC}", f"/topics/{TOPIC}/messages?mode=earliest", "/groups",
                 f"/groups/{GROUP}"):
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


def test_fetch_records_reads_what_was_produced(kbroker):
    with AdminClient(kbroker.bootstrap) as admin:
        fetched = fetch_records(admin, TOPIC, 1, 0)
    orders = [r for r in fetched.records]
    assert [r.key for r in orders] == [f"order-{i}".encode() for i in range(1, 12, 3)]
    assert orders[0].headers[0] == ("source", b"checkout")
    assert fetched.high_watermark == 4 and fetched.next_offset == 4 and fetched.log_start_offset == 0
