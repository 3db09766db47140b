"""The web console in a real browser: headless Chromium (Debian's, driven by Selenium) opens
`kbroker console` against a real broker and checks what a user sees — the topic list, messages
browsed with JSON values and headers (and untrusted markup shown as text), a group's lag changing
on the page by itself after a consumer reads, the charts the console draws from its own samples
(a topic's messages/s, a group's lag), a consumer-protocol (KIP-848) group's epochs and
assignments, a topic created through the form and its confirmation — then, against a three-broker
cluster with RF 3, each partition's leader, replicas and ISR as the brokers' Metadata gives them.
Every page visited is saved as a screenshot under KBROKER_TEST_ARTIFACTS (default: pytest's
temporary directory).
"""

from __future__ import annotations

import time

import pytest

import clusterkit as ck
import consolekit
from kbroker.admin.client import AdminClient

pytestmark = pytest.mark.timeout(180)
KBROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
TOPIC = "orders"
GROUP = "billing"
WAIT_S = 20


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    return consolekit.artifacts_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = consolekit.chrome(tmp_path_factory.mktemp("chromium-profile"))
    yield d
    d.quit()


@pytest.fixture(scope="module")
def console(kbroker, tmp_path_factory):
    consolekit.produce_orders(kbroker.bootstrap, TOPIC)
    c = consolekit.Console(kbroker.bootstrap, tmp_path_factory.mktemp("console"), refresh_s=1)
    yield c
    c.stop()


def wait(driver, condition, what: str):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"timed out after {WAIT_S}s waiting for {what}; page:\n"
                             f"{driver.find_element('tag name', 'body').text[:2000]}") from None


def css(driver, selector):
    return driver.find_elements("css selector", selector)


def test_topic_list(driver, console, artifacts):
    driver.get(console.url + "/topics")
    row = wait(driver, lambda d: css(d, f'tr[data-topic="{TOPIC}"]'), "the topic's row")[0]
    cells = [c.text for c in row.find_elements("tag name", "td")]
    assert cells[0] == TOPIC and cells[1:3] == ["3", "1"] and cells[5] == "12"  # partitions, RF, messages
    assert css(driver, 'tr[data-topic="__consumer_offsets"]') == [] or "internal" in driver.page_source
    consolekit.screenshot(driver, artifacts, "topics")


def test_browse_messages_shows_json_and_headers(driver, console, artifacts):
    driver.get(console.url + f"/topics/{TOPIC}/messages?partition=0&mode=earliest")
    rows = wait(driver, lambda d: css(d, "tr.message"), "messages")
    assert [int(r.get_attribute("data-offset")) for r in rows] == [0, 1, 2, 3]
    first = rows[0]
    value = first.find_element("css selector", "td.value pre")
    assert "json" in value.get_attribute("class")
    assert value.text.startswith('{\n  "order": 0,\n  "customer": "c-0",')  # pretty-printed
    headers = [li.text for li in first.find_elements("css selector", "ul.headers li")]
    assert headers == ["source: checkout", "trace-id: t-0000", "raw: 00 01 fe"]
    assert first.find_element("css selector", "td.key pre").text == "order-0"
    fragile = rows[1].find_element("css selector", "td.value pre")  # order 3 (partition 0, offset 1)
    assert '"note": "<b>fragile</b>"' in fragile.text and fragile.find_elements("tag name", "b") == []
    consolekit.screenshot(driver, artifacts, "messages")

    # the filter, and hex on request, through the form
    box = driver.find_element("name", "filter")
    box.clear()
    box.send_keys("t-0006")
    driver.find_element("css selector", "select[name=format] option[value=hex]").click()
    driver.find_element("css selector", "#browse button").click()
    rows = wait(driver, lambda d: [r for r in css(d, "tr.message") if r.get_attribute("data-offset") == "2"]
                and len(css(d, "tr.message")) == 1 and css(d, "tr.message"), "the filtered message")
    assert rows[0].find_element("css selector", "td.value pre").text.startswith("00000000  7b 22 6f 72")
    consolekit.screenshot(driver, artifacts, "messages-filtered")


def test_group_lag_changes_after_consuming(driver, console, kbroker, artifacts):
    assert consolekit.consume(kbroker.bootstrap, TOPIC, GROUP, 3) == 3
    driver.get(console.url + f"/groups/{GROUP}")

    def lag_on_page(d):
        found = css(d, "#total-lag")
        return int(found[0].text) if found and found[0].text.isdigit() else None

    def expected_lag():
        with AdminClient(kbroker.bootstrap) as admin:
            return sum(4 - o for o in admin.committed_offsets(GROUP).values())

    before = expected_lag()
    wait(driver, lambda d: lag_on_page(d) == before, f"lag {before}")
    consolekit.screenshot(driver, artifacts, "group-before")
    assert consolekit.consume(kbroker.bootstrap, TOPIC, GROUP, 12 - 3) == 9  # the rest: lag 0 everywhere
    wait(driver, lambda d: lag_on_page(d) == 0, "the page to show lag 0 by itself (live refresh)")
    assert len(css(driver, "#offsets tr[data-tp]")) == 3
    consolekit.screenshot(driver, artifacts, "group-after")
    driver.get(console.url + "/groups")
    row = wait(driver, lambda d: css(d, f'tr[data-group="{GROUP}"]'), "the group in the list")[0]
    assert row.find_element("css selector", "td.lag").text == "0"
    consolekit.screenshot(driver, artifacts, "groups")


def chart_on_page(driver, ident: str) -> dict | None:
    """The chart `ident` as the page shows it now (read in one script, so a live swap cannot leave
    half of it stale): its SVG's aria-label, the latest value beside it, its sample count, the
    lines drawn and the page's total-lag card; None while it has no SVG."""
    return driver.execute_script("""
        const f = document.getElementById(arguments[0]);
        const svg = f && f.querySelector('svg'), latest = f && f.querySelector('.latest .value');
        const lag = document.getElementById('total-lag');
        return svg && latest ? {label: svg.getAttribute('aria-label'), latest: latest.textContent,
                                samples: Number(f.dataset.samples), lines: f.querySelectorAll('path.line').length,
                                viewbox: svg.getAttribute('viewBox'), lag: lag ? lag.textContent : null} : null;
    """, ident)


def highest(label: str) -> float:
    return float(label.rsplit("highest ", 1)[1].split(",")[0].rstrip("kMG"))


def test_charts_draw_messages_per_second_and_lag(driver, console, kbroker, artifacts):
    """The console samples every second (--refresh 1): after a producer wrote for a couple of
    seconds, the topic page charts its messages/s as an SVG with the latest value beside it; the
    group page charts the group's lag, its latest value the page's total lag; the groups list has
    a sparkline per group."""
    consolekit.produce_slowly(kbroker.bootstrap, TOPIC, 8, 0.25)
    driver.get(console.url + f"/topics/{TOPIC}")
    chart = wait(driver, lambda d: (c := chart_on_page(d, "rate-chart")) and c["samples"] >= 2
                 and highest(c["label"]) > 0 and c, "a messages/s chart with the traffic in it")
    assert chart["label"].startswith(f"Messages/s into topic {TOPIC}, last ") and chart["lines"] >= 1
    assert f": now {chart['latest']} msg/s" in chart["label"] and chart["viewbox"] == "0 0 640 180"
    consolekit.screenshot(driver, artifacts, "topic-chart")

    driver.get(console.url + f"/groups/{GROUP}")
    chart = wait(driver, lambda d: (c := chart_on_page(d, "lag-chart")) and c["samples"] >= 2
                 and c["latest"] == c["lag"] and c, "a lag chart ending at the group's total lag")
    assert chart["label"].startswith(f"Lag of group {GROUP}, last ")
    assert f"now {chart['lag']} messages" in chart["label"]
    assert css(driver, "#group-type")[0].text == "classic"
    consolekit.screenshot(driver, artifacts, "group-chart")

    driver.get(console.url + "/groups")
    wait(driver, lambda d: css(d, f'tr[data-group="{GROUP}"] td.trend svg[role="img"]'), "the group's sparkline")
    consolekit.screenshot(driver, artifacts, "groups-sparklines")


def test_consumer_protocol_group_page(driver, console, kbroker, artifacts):
    """A KIP-848 group (librdkafka, group.protocol=consumer) that read and committed: its page says
    so, with its epochs and the member's current and target assignment, and charts its lag."""
    from confluent_kafka import Consumer

    group = "billing-848"
    consumer = Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    try:
        got, deadline, partition = 0, time.monotonic() + WAIT_S, None
        while got < 5 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
                partition = msg.partition()
                consumer.commit(msg, asynchronous=False)
        assert got == 5
        # three more records behind the committed offset: the group's lag is at least 3, whatever
        # else the module's topic holds
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": kbroker.bootstrap})
        for i in range(3):
            producer.produce(TOPIC, value=f"lag-{i}".encode(), partition=partition)
        assert producer.flush(30) == 0
        driver.get(console.url + f"/groups/{group}")

        def member_row(d):
            rows = css(d, "#consumer-members tr[data-member]")
            return len(rows) == 1 and "reconciling" not in (rows[0].get_attribute("class") or "") and rows[0]

        row = wait(driver, member_row, "the member holding its whole target")
        assert row.find_element("css selector", "td.current").text == f"{TOPIC} [0, 1, 2]"
        assert row.find_element("css selector", "td.target").text == f"{TOPIC} [0, 1, 2]"
        assert row.find_element("css selector", "td.revoking").text == "—"
        assert css(driver, "#group-type")[0].text == "consumer" and css(driver, "#state")[0].text == "Stable"
        epoch = int(css(driver, "#group-epoch")[0].text)
        assert epoch >= 1 and int(css(driver, "#assignment-epoch")[0].text) == epoch
        assert int(row.find_element("css selector", "td.epoch").text) == epoch
        chart = wait(driver, lambda d: (c := chart_on_page(d, "lag-chart")) and c["samples"] >= 2
                     and c["latest"] == c["lag"] and c, "the group's lag chart")
        assert int(chart["lag"]) >= 3
        consolekit.screenshot(driver, artifacts, "group-consumer-protocol")
        driver.get(console.url + "/groups")
        listed = wait(driver, lambda d: css(d, f'tr[data-group="{group}"] td.type'), "the group in the list")[0]
        assert listed.text == "consumer"
    finally:
        consumer.close()


def test_create_topic_through_the_ui(driver, console, kbroker, artifacts):
    driver.get(console.url + "/topics")
    form = wait(driver, lambda d: css(d, "#create-topic"), "the create form")[0]
    form.find_element("name", "name").send_keys("made-in-browser")
    form.find_element("name", "partitions").send_keys("2")
    form.find_element("name", "configs").send_keys("cleanup.policy=compact")
    form.find_element("tag name", "button").click()
    confirm = wait(driver, lambda d: css(d, "#confirm"), "the confirmation page")[0]
    assert "Create topic made-in-browser?" in driver.page_source
    consolekit.screenshot(driver, artifacts, "create-confirm")
    with AdminClient(kbroker.bootstrap) as admin:
        assert "made-in-browser" not in admin.metadata(None)[1]  # nothing before the confirmation
    confirm.click()
    wait(driver, lambda d: d.current_url.endswith("/topics/made-in-browser?done=created")
         and len(css(d, "#partitions tr[data-partition]")) == 2, "the new topic's page")
    assert "Topic made-in-browser created." in driver.page_source
    config = css(driver, 'tr[data-config="cleanup.policy"]')[0]
    assert "compact" in config.text and "override" in config.get_attribute("class")
    consolekit.screenshot(driver, artifacts, "topic-created")
    with AdminClient(kbroker.bootstrap) as admin:
        _, (topic,) = admin.describe_topics(["made-in-browser"])
    assert len(topic.partitions) == 2


def test_cluster_pages_show_leaders_and_isr(driver, tmp_path, artifacts):
    cluster = ck.start_cluster(tmp_path / "cluster", 3)
    console = None
    try:
        bootstrap = ck.live_bootstrap(cluster)
        ck.create_topic(cluster, "replicated", 3, 3)  # waits for a leader and a full ISR everywhere
        console = consolekit.Console(bootstrap, tmp_path, refresh_s=1)
        expected = ck.partitions(cluster, "replicated")
        driver.get(console.url + "/topics/replicated")
        wait(driver, lambda d: len(css(d, "#partitions tr[data-partition]")) == 3, "three partitions")

        def ids(row, cell):
            text = row.find_element("css selector", f"td.{cell}").text
            return [int(x) for x in text.replace(",", " ").split() if x.isdigit()]

        for row in css(driver, "#partitions tr[data-partition]"):
            p = expected[int(row.get_attribute("data-partition"))]
            leader, replicas, isr = ids(row, "leader"), ids(row, "replicas"), ids(row, "isr")
            assert (leader, replicas, sorted(isr)) == ([p["leader"]], p["replicas"], sorted(p["isr"]))
            assert len(isr) == 3
        consolekit.screenshot(driver, artifacts, "cluster-topic")
        driver.get(console.url + "/")
        rows = wait(driver, lambda d: len(css(d, "#brokers tr[data-broker]")) == 3 and css(d, "#brokers tr[data-broker]"),
                    "three brokers")
        controller = ck.controller_id(cluster)
        assert css(driver, "#controller")[0].text == str(controller)
        roles = {int(r.get_attribute("data-broker")): r.text for r in rows}
        assert "controller" in roles[controller] and sum("controller" in t for t in roles.values()) == 1
        consolekit.screenshot(driver, artifacts, "cluster-overview")
    finally:
        if console is not None:
            console.stop()
        ck.stop_cluster(cluster)
