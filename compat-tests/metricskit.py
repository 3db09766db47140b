"""Scraping a real broker's Prometheus endpoint (metrics.listener) in compat tests: the address a
broker started with `metrics.listener=http://127.0.0.1:0` logged, one scrape over HTTP parsed with
prometheus_client's own parser, and sums over label sets."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

LISTENER_ANY_PORT = "http://127.0.0.1:0"
_SERVED = re.compile(rb"metrics served on (http://[^\s]+/metrics)")

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metrics_url(log_path: Path | str) -> str | None:
    """The endpoint the broker logging to `log_path` serves (the last start's), None before it says."""
    try:
        found = _SERVED.findall(Path(log_path).read_bytes())
    except OSError:
        return None
    return found[-1].decode() if found else None


def scrape(url: str, timeout_s: float = 10) -> Samples:
    """{(sample name, sorted (label, value) pairs): value} of one scrape."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over every series whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))
