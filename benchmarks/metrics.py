"""Owns the `metrics` benchmark phase: what Prometheus metrics (`metrics.listener`) cost on the
produce path. Two brokers of its own run side by side, one with metrics off, one with them on and
scraped every second while it is measured (Prometheus' default is every 15 s: this is harsher).
Each workload runs on both, in the order off, on, on, off (the pairs straddle whatever else the
machine does), each run into a fresh topic right after prime_page_cache():

- librdkafka's produce run (1 KiB, 1 partition, acks=1, as the produce phase): the headline;
- raw pipelined Produce requests of one 1 KiB record each (as the requests phase): the
  per-request counting at its most frequent, judged by the broker's CPU per request (the request
  rate follows the harness's reading thread as much as the broker).

Rows report each mode's figures over its two runs and the on/off ratios the targets judge. On a
shared 2-core machine those ratios move by several percent from run to run, more than the
counting costs; so a last row times the counting itself (what one Produce request adds: two clock
reads, the topic's and the API's counters, as api/dispatch.py and api/produce.py do them) in
this process and sets it against the broker's CPU per request with metrics off.
"""

from __future__ import annotations

import shutil
import statistics
import threading
import time
import timeit
import urllib.request

from benchmarks import clients, kwire
from benchmarks.broker import OwnBroker
from benchmarks.phases import Ctx, Meter, _combined, prime_page_cache, row
from kbroker.metrics.stats import BrokerStats

SIZE = 1024
ORDER = ("off", "on", "on", "off")
SCRAPE_INTERVAL_S = 1.0


class Scraper:
    """GET /metrics every SCRAPE_INTERVAL_S in a thread; the time and size of each scrape."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.times_ms: list[float] = []
        self.size = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def scrape(self) -> None:
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(self.url, timeout=10) as response:
                self.size = len(response.read())
            self.times_ms.append((time.perf_counter() - t0) * 1000)
        except OSError:
            self.errors += 1

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_INTERVAL_S):
            self.scrape()

    def __enter__(self) -> "Scraper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(15)


def _metrics_url(broker: OwnBroker) -> str:
    text = broker.log_path.read_text(errors="replace")
    marker = "metrics served on "
    return text[text.rindex(marker) + len(marker):].split()[0]


def _produce(ctx: Ctx, broker: OwnBroker, label: str) -> dict:
    topic = ctx.new_topic(f"metrics-{label}", 1, bootstrap=broker.bootstrap)
    prime_page_cache(ctx.base, SIZE * ctx.scale.messages)
    with Meter(broker.stats()) as meter:
        r = clients.produce_run(broker.bootstrap, topic, 1, SIZE, ctx.scale.messages, "1", ctx.deadline())
    clients.delete_topics(broker.bootstrap, [topic])
    return {**r, **meter.metrics(r["bytes"])}


def _requests(ctx: Ctx, broker: OwnBroker, label: str) -> dict:
    topic = ctx.new_topic(f"metrics-req-{label}", 1, bootstrap=broker.bootstrap)
    batch = kwire.record_batch(1, bytes(SIZE), int(time.time() * 1000))
    host, port = broker.bootstrap.rsplit(":", 1)
    count = ctx.scale.requests * 4
    with Meter(broker.stats()) as meter:
        r = kwire.produce_pipelined(host, int(port), topic, 1, batch, count, ctx.deadline())
    clients.delete_topics(broker.bootstrap, [topic])
    m = {**r, **meter.metrics(), "requests_s": r["answered"] / r["seconds"] if r["seconds"] else None}
    if meter.broker_cpu is not None and r["answered"]:
        m["broker_user_us_per_request"] = meter.broker_utime / r["answered"] * 1e6
        m["broker_sys_us_per_request"] = meter.broker_stime / r["answered"] * 1e6
    return m


def _combined_requests(runs: list[dict]) -> dict:
    out = dict(runs[0])
    for key in ("requests_s", "broker_user_us_per_request", "broker_sys_us_per_request"):
        values = [r.get(key) for r in runs if r.get(key) is not None]
        out[key] = statistics.mean(values) if values else None
    out["errors"] = sum(r.get("errors") or 0 for r in runs)
    out["requests_s_each"] = ", ".join(f"{r['requests_s']:.0f}" for r in runs if r.get("requests_s"))
    return out


def phase_metrics(ctx: Ctx) -> list[dict]:
    brokers = {"off": OwnBroker(ctx.base, "metrics-off", list(ctx.overrides), ctx.log_level),
               "on": OwnBroker(ctx.base, "metrics-on", ["metrics.listener=http://127.0.0.1:0", *ctx.overrides],
                               ctx.log_level)}
    ctx.side_brokers.extend(brokers.values())
    rows = []
    try:
        for broker in brokers.values():
            broker.start()
        scraper = Scraper(_metrics_url(brokers["on"]))
        for workload, run, combine, kind, name in (
                ("produce", _produce, _combined, "throughput", "1 KiB, 1 part, acks=1"),
                ("requests", _requests, _combined_requests, "requests", "Produce 1 x 1 KiB per request, pipelined")):
            runs: dict[str, list[dict]] = {"off": [], "on": []}
            for mode in ORDER:
                ctx.check_alive()
                if mode == "on":
                    with scraper:
                        runs[mode].append(run(ctx, brokers[mode], mode))
                    scraper = Scraper(scraper.url)
                else:
                    runs[mode].append(run(ctx, brokers[mode], mode))
            merged = {mode: combine(runs[mode]) for mode in runs}
            speed = "mb_s" if kind == "throughput" else "requests_s"
            if merged["off"].get(speed) and merged["on"].get(speed):
                merged["on"]["ratio_to_off"] = merged["on"][speed] / merged["off"][speed]
            cpu = {mode: (merged[mode].get("broker_user_us_per_request") or 0) +
                   (merged[mode].get("broker_sys_us_per_request") or 0) for mode in merged}
            if cpu["off"] and cpu["on"]:  # the request rate follows the client's thread; this does not
                merged["on"]["cpu_ratio_to_off"] = cpu["on"] / cpu["off"]
            for mode in ("off", "on"):
                label = "metrics off" if mode == "off" else f"metrics on, scraped every {SCRAPE_INTERVAL_S:g} s"
                rows.append(row(f"metrics.{workload}.{mode}", "metrics", f"{name}, {label}", kind, merged[mode]))
        rows.append(_scrape_row(ctx, brokers["on"], scraper.url))
        rows.append(_counting_row(rows))
    finally:
        for broker in brokers.values():
            broker.stop()
            shutil.rmtree(broker.data, ignore_errors=True)
    return rows


def _scrape_row(ctx: Ctx, broker: OwnBroker, url: str) -> dict:
    """How long a scrape takes (it runs on the broker's event loop) with 1,000 partitions, each a
    log size, log end and log start series."""
    partitions = 10 * ctx.scale.meta_partitions
    topic = ctx.new_topic("metrics-wide", partitions, bootstrap=broker.bootstrap)
    scraper = Scraper(url)
    for _ in range(5):
        scraper.scrape()
    clients.delete_topics(broker.bootstrap, [topic])
    times = sorted(scraper.times_ms)
    return row("metrics.scrape", "metrics", f"GET /metrics with {partitions:,} partitions "
               f"({scraper.size / 1e6:.1f} MB of text)", "latency",
               {"p50_ms": times[len(times) // 2] if times else None, "p99_ms": times[-1] if times else None,
                "max_ms": times[-1] if times else None, "bytes": scraper.size, "errors": scraper.errors})


def _counting_row(rows: list[dict]) -> dict:
    stats = BrokerStats()
    clock = time.perf_counter

    def one_produce_request() -> None:
        started = clock()
        stats.record_produce("orders", 1100, 1)
        stats.record_request("Produce", 9, clock() - started)

    n = 200_000
    ns = min(timeit.repeat(one_produce_request, number=n, repeat=5)) / n * 1e9
    off = next((r["metrics"] for r in rows if r["key"] == "metrics.requests.off"), {})
    request_us = (off.get("broker_user_us_per_request") or 0) + (off.get("broker_sys_us_per_request") or 0)
    m = {"counting_ns": ns, "request_us": request_us or None,
         "share_of_request": ns / 1000 / request_us if request_us else None}
    return row("metrics.counting", "metrics", "the counting one Produce request adds", "counting", m)
