"""The web console's test parts: a real `kbroker console` process, a headless Chromium driven by
Selenium (Debian's chromium and chromedriver; Selenium never downloads a driver), screenshots
saved as artifacts, and sample data a page can show (a JSON topic with headers, a group with lag,
records in Confluent's wire format: Avro, JSON Schema and Protobuf through the broker's registry).

`PYTHONPATH=. python compat-tests/consolekit.py docs/images` regenerates the documentation's
screenshots: a three-broker cluster, sample data, the console, one PNG per page.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1000")
READY_S = 20.0


def _missing(reason: str) -> None:
    if CI:
        pytest.fail(f"required under CI=true but missing: {reason}", pytrace=False)
    pytest.skip(reason)


def artifacts_dir(tmp_path_factory) -> Path:
    """KBROKER_TEST_ARTIFACTS, or a directory under pytest's temporary path."""
    chosen = os.environ.get("KBROKER_TEST_ARTIFACTS")
    path = Path(chosen) / "console" if chosen else tmp_path_factory.mktemp("console-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Console:
    """One `python -m kbroker console` process on a free port, stopped by PID."""

    def __init__(self, bootstrap: str, workdir: Path, refresh_s: float = 1.0, extra_args: tuple[str, ...] = ()) -> None:
        from conftest import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = Path(workdir) / "console.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kbroker", "console", "--bootstrap-server", bootstrap,
                 "--port", str(self.port), "--refresh", str(refresh_s), *extra_args],
                stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parent.parent)
        deadline = time.monotonic() + READY_S
        while True:
            try:
                with urllib.request.urlopen(self.url + "/static/console.css", timeout=2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the console did not start: {self.log_tail()}")
                time.sleep(0.2)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def get(console: Console, path: str) -> tuple[int, str]:
    """(status, body) of a GET of one of the console's pages, error statuses included."""
    try:
        with urllib.request.urlopen(console.url + path, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def chrome(profile_dir: Path):
    """A headless Chromium from Debian's packages, with a fresh profile; skip (fail under CI)
    when Selenium, chromium or chromedriver is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        _missing(f"selenium is not importable ({exc}); pip install -e '.[test]'")
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            _missing(f"{exe} is missing (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver


def screenshot(driver, directory: Path, name: str, max_height: int = 4000) -> Path:
    """The whole page, down to `max_height` CSS pixels (Chromium's DevTools capture beyond the
    viewport)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height), "scale": 1}
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                            "clip": clip})
    path = directory / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


# -- sample data ---------------------------------------------------------------------------------

ORDERS = [{"order": i, "customer": f"c-{i % 4}", "items": [{"sku": f"sku-{i}", "qty": i % 3 + 1}],
           "note": "<b>fragile</b>" if i == 3 else None} for i in range(12)]


def produce_orders(bootstrap: str, topic: str, replication_factor: int = 1) -> None:
    """A topic of 3 partitions with 12 JSON orders, keyed, with text and binary headers."""
    from confluent_kafka import Producer

    from kbroker.admin.client import AdminClient

    with AdminClient(bootstrap) as admin:
        admin.create_topic(topic, 3, replication_factor)
    producer = Producer({"bootstrap.servers": bootstrap})
    for o in ORDERS:
        producer.produce(topic, key=f"order-{o['order']}", value=json.dumps(o), partition=o["order"] % 3,
                         headers=[("source", b"checkout"), ("trace-id", f"t-{o['order']:04d}".encode()),
                                  ("raw", b"\x00\x01\xfe")])
    assert producer.flush(30) == 0, "orders not all delivered"


def produce_slowly(bootstrap: str, topic: str, count: int, interval_s: float) -> None:
    """`count` small JSON records, one every `interval_s` seconds (traffic a sampler can see)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, key=f"tick-{i}", value=json.dumps({"tick": i}))
        producer.flush(10)
        time.sleep(interval_s)
    assert producer.flush(30) == 0, "ticks not all delivered"


def consume(bootstrap: str, topic: str, group: str, count: int, timeout_s: float = 30) -> int:
    """Consume `count` records as `group`, commit, and leave the group."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + timeout_s
    try:
        while got < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
                consumer.commit(msg, asynchronous=False)
    finally:
        consumer.close()
    return got


SHARE_OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
                   "group.share.heartbeat.interval.ms": "500",
                   "group.share.session.timeout.ms": "5000"}  # a closed share consumer is gone soon


def share_member(bootstrap: str, topic: str, group: str, per_partition: int, client_id: str = "console-share",
                 timeout_s: float = 30):
    """A confluent-kafka ShareConsumer in `group` on a new 2-partition `topic`, joined before
    `per_partition` records go to each partition (a share group starts at the log end), every one
    of them received and acknowledged. Returns the consumer, still a member: close it to leave."""
    from confluent_kafka import Producer, ShareConsumer

    from kbroker.admin.client import AdminClient

    with AdminClient(bootstrap) as admin:
        admin.create_topic(topic, 2, 1)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                              "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 3  # join and open the share session before producing
        while time.monotonic() < deadline:
            consumer.poll(0.1)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(2 * per_partition):
            producer.produce(topic, value=b"job-%d" % i, partition=i % 2)
        assert producer.flush(30) == 0, "jobs not all delivered"
        got, deadline = 0, time.monotonic() + timeout_s
        while got < 2 * per_partition and time.monotonic() < deadline:
            for m in consumer.poll(0.2) or []:
                assert m.error() is None, m.error()
                got += 1
        assert got == 2 * per_partition, f"the share consumer received {got} of {2 * per_partition} jobs"
        consumer.poll(1)  # acknowledges the last batch (implicit acknowledgement)
    except BaseException:
        consumer.close()
        raise
    return consumer


# -- records in Confluent's wire format, through a schema registry --------------------------------------

ADDRESS_SCHEMA = {"type": "record", "name": "Address", "namespace": "shop",
                  "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}
PAYMENT_SCHEMA = {"type": "record", "name": "Payment", "namespace": "shop",
                  "fields": [{"name": "order", "type": "long"}, {"name": "customer", "type": "string"},
                             {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                                         "precision": 9, "scale": 2}},
                             {"name": "method", "type": {"type": "enum", "name": "Method",
                                                         "symbols": ["CARD", "CASH", "VOUCHER"]}},
                             {"name": "bill_to", "type": "shop.Address"},
                             {"name": "note", "type": ["null", "string"], "default": None}]}
SHIPMENT_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Shipment", "type": "object",
                   "properties": {"order": {"type": "integer"}, "carrier": {"type": "string"},
                                  "parcels": {"type": "array", "items": {"type": "string"}}},
                   "required": ["order", "carrier"]}


def payments(count: int = 6) -> list[dict]:
    import decimal

    return [{"order": i, "customer": f"c-{i % 4}", "amount": decimal.Decimal(f"{10 + i}.{i:02d}"),
             "method": ["CARD", "CASH", "VOUCHER"][i % 3], "bill_to": {"city": ["Oslo", "Lyon", "Porto"][i % 3],
                                                                    "zip": f"0{i}150"},
             "note": "<script>alert(1)</script>" if i == 2 else None} for i in range(count)]


def shipments(count: int = 4) -> list[dict]:
    return [{"order": i, "carrier": ["posten", "dhl"][i % 2], "parcels": [f"p-{i}-{j}" for j in range(i % 3 + 1)]}
            for i in range(count)]


def produce_schema_records(bootstrap: str, registry_url: str, payments_topic: str = "payments",
                           shipments_topic: str = "shipments", replication_factor: int = 1) -> None:
    """Avro payments (a decimal, an enum, a named type from a referenced subject `shop.Address`;
    keys Avro strings) and JSON Schema shipments (keys plain text), written by confluent-kafka's
    own AvroSerializer and JSONSerializer, which register the schemas."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kbroker.admin.client import AdminClient

    with AdminClient(bootstrap) as admin:
        admin.create_topic(payments_topic, 1, replication_factor)
        admin.create_topic(shipments_topic, 1, replication_factor)
    registry = SchemaRegistryClient({"url": registry_url})
    registry.register_schema("shop.Address", Schema(json.dumps(ADDRESS_SCHEMA), "AVRO"))
    payment = Schema(json.dumps(PAYMENT_SCHEMA), "AVRO",
                     [SchemaReference("shop.Address", "shop.Address", 1)])
    value_avro = AvroSerializer(registry, payment, conf={"auto.register.schemas": True})
    key_avro = AvroSerializer(registry, '"string"')
    value_json = JSONSerializer(json.dumps(SHIPMENT_SCHEMA), registry)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in payments():
        producer.produce(payments_topic,
                         key=key_avro(f"order-{p['order']}", SerializationContext(payments_topic, MessageField.KEY)),
                         value=value_avro(p, SerializationContext(payments_topic, MessageField.VALUE)))
    for s in shipments():
        producer.produce(shipments_topic, key=f"order-{s['order']}",
                         value=value_json(s, SerializationContext(shipments_topic, MessageField.VALUE)))
    assert producer.flush(30) == 0, "schema records not all delivered"


DOC_PAGES = {"console-overview": "/", "console-topics": "/topics", "console-topic": "/topics/orders",
             "console-messages": "/topics/orders/messages?mode=earliest&partition=0",
             "console-groups": "/groups", "console-group": "/groups/billing",
             "console-share-group": "/share-groups/jobs-workers",
             "console-schemas": "/topics/payments/messages?mode=earliest&limit=3",
             "console-subject": "/schemas/payments-value"}


def docs_screenshots(out: Path) -> None:
    """A three-broker cluster with sample data (RF 3), the console, one screenshot per page in `out`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import clusterkit as ck

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        from conftest import free_port

        registries = {i: f"http://127.0.0.1:{free_port()}" for i in (1, 2, 3)}
        cluster = ck.start_cluster(Path(tmp) / "cluster", 3, overrides=SHARE_OVERRIDES, broker_overrides={
            i: {"schema.registry.listener": url} for i, url in registries.items()})
        console = driver = member = None
        try:
            bootstrap = ck.live_bootstrap(cluster)
            produce_orders(bootstrap, "orders", replication_factor=3)
            consume(bootstrap, "orders", "billing", 5)
            produce_schema_records(bootstrap, registries[1], replication_factor=3)
            member = share_member(bootstrap, "jobs", "jobs-workers", 6)  # a member while the pages are shot
            console = Console(bootstrap, Path(tmp), refresh_s=5,
                              extra_args=("--schema-registry-url", registries[1]))
            driver = chrome(Path(tmp) / "profile")
            for name, path in DOC_PAGES.items():
                driver.get(console.url + path)
                time.sleep(0.5)
                print(screenshot(driver, out, name, max_height=1100))
        finally:
            if member is not None:
                member.close()
            if driver is not None:
                driver.quit()
            if console is not None:
                console.stop()
            ck.stop_cluster(cluster)


if __name__ == "__main__":
    docs_screenshots(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images"))
