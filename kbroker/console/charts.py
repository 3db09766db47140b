"""The console's charts as inline SVG, drawn on the server (pure: strings in, markup out; no script,
no library). A chart is a `<figure>`: the SVG (role="img", its aria-label and <title> summing up
what it shows: the span, the latest value, the lowest and the highest), axes with the unit and the
time span, and the latest value as text beside it. Fewer than two points draw no line: the figure
says "collecting samples…".

Time runs left to right up to now; the span is the smallest of 1, 2, 5 and 10 minutes (up to the
store's window) that holds the samples. The line breaks where samples are missing (a round
that failed, a group that was not listed), instead of drawing a slope across the gap.
"""

from __future__ import annotations

import math
from itertools import pairwise
from html import escape
from statistics import median
from typing import Sequence

from kbroker.console.samples import Point

__all__ = ["COLLECTING", "SPANS_S", "format_value", "line_chart", "nice_ceiling", "span_for", "sparkline"]

COLLECTING = "collecting samples…"
SPANS_S = (60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# the line chart's viewBox and its plot area inside it
WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 26, 26
SPARK_WIDTH, SPARK_HEIGHT = 120, 26


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at least `value` (1 for nothing above zero)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * magnitude >= value * (1 - 1e-12):
            return float(step * magnitude)
    return 10.0 * magnitude


def span_for(points: Sequence[Point], now: float, window_s: float) -> float:
    """The time the chart spans: the smallest of SPANS_S holding every point, at most `window_s`."""
    oldest = now - min((p.t for p in points), default=now)
    for span in SPANS_S:
        if span >= oldest:
            return min(span, window_s)
    return window_s


def format_value(value: float) -> str:
    """Short, exact for whole numbers below 10000: 7, 0.25, 2.5, 12.3, 1234, 12.3k, 1.5M."""
    v, sign = abs(value), "-" if value < 0 else ""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= (1e4 if suffix == "k" else limit * 0.9995):
            x = v / limit
            return sign + (f"{x:.1f}" if x < 100 else f"{x:.0f}").removesuffix(".0") + suffix
    if v == int(v):
        return f"{sign}{int(v)}"
    text = f"{v:.2g}" if v < 1 else f"{v:.1f}" if v < 100 else f"{v:.0f}"
    return sign + text.removesuffix(".0")


def _span_text(span_s: float) -> str:
    return f"{span_s / 60:g} min" if span_s >= 60 else f"{span_s:g} s"


def _segments(points: Sequence[Point], gap_s: float) -> list[list[Point]]:
    """The points in runs without a gap: a pause longer than `gap_s` (and than three usual
    intervals between samples, for a cluster sampled slower than asked) starts a new run."""
    steps = [b.t - a.t for a, b in pairwise(points)]
    limit = max(gap_s, 3 * median(steps)) if steps else gap_s
    runs: list[list[Point]] = [[points[0]]] if points else []
    for prev, p in pairwise(points):
        if p.t - prev.t > limit:
            runs.append([])
        runs[-1].append(p)
    return runs


def _summary(what: str, points: Sequence[Point], span_s: float, unit: str) -> str:
    values = [p.value for p in points]
    return (f"{what}, last {_span_text(span_s)}: now {format_value(values[-1])} {unit} "
            f"(lowest {format_value(min(values))}, highest {format_value(max(values))}, {len(values)} samples)")


def _collecting(css: str, what: str, chart_id: str | None) -> str:
    ident = f' id="{escape(chart_id)}"' if chart_id else ""
    return (f'<figure class="{css} empty"{ident} data-samples="0"><span class="collecting muted" '
            f'title="{escape(what)}">{COLLECTING}</span></figure>')


def _path(run: Sequence[Point], x_of, y_of) -> str:
    return " ".join(f"{'M' if i == 0 else 'L'}{x_of(p.t):.1f},{y_of(p.value):.1f}" for i, p in enumerate(run))


def _shown(points: Sequence[Point], now: float, window_s: float) -> tuple[list[Point], float]:
    """The points the chart shows (none after now, none before its span) and the span."""
    points = [p for p in points if now - window_s <= p.t <= now]
    span = span_for(points, now, window_s)
    return [p for p in points if p.t >= now - span], span


def line_chart(points: Sequence[Point], now: float, *, what: str, unit: str, window_s: float, period_s: float,
               chart_id: str | None = None) -> str:
    """A figure: `what` (e.g. "Lag of group billing") over time in `unit` (e.g. "messages"),
    y from 0 to a round number above the highest value, the latest value beside it. `period_s`:
    how often samples are taken (a pause of three periods breaks the line)."""
    points, span = _shown(points, now, window_s)
    if len(points) < 2:
        return _collecting("chart", what, chart_id)
    top = nice_ceiling(max(max(p.value for p in points), 0.0))
    bottom = min(0.0, min(p.value for p in points))  # a lag below zero (committed past the log end) shows
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM

    def x_of(t: float) -> float:
        return x0 + (t - (now - span)) / span * (x1 - x0)

    def y_of(v: float) -> float:
        return y1 - (v - bottom) / (top - bottom) * (y1 - y0)

    summary = _summary(what, points, span, unit)
    latest = points[-1]
    parts = [(f'<svg class="chart-svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
              f'aria-label="{escape(summary)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(summary)}</title>')]
    for value in sorted({bottom, (top + bottom) / 2, top}):  # grid lines and the y axis labels
        y = y_of(value)
        parts.append(f'<line class="grid" x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}"/><text class="tick" '
                     f'x="{x0 - 6}" y="{y + 3.5:.1f}" text-anchor="end">{format_value(value)}</text>')
    for frac in (0.0, 0.5, 1.0):  # the time axis: minutes ago
        x = x0 + frac * (x1 - x0)
        ago = span * (1 - frac)
        label = "now" if ago == 0 else f"-{_span_text(ago)}"
        anchor = "start" if frac == 0 else "end" if frac == 1 else "middle"
        parts.append(f'<line class="axis" x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y1 + 4}"/>'
                     f'<text class="tick" x="{x:.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">{label}</text>')
    parts.append(f'<line class="axis" x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}"/>'
                 f'<text class="unit" x="4" y="12" text-anchor="start">{escape(unit)}</text>')
    for run in _segments(points, 3 * period_s):
        if len(run) > 1:
            parts.append(f'<path class="line" d="{_path(run, x_of, y_of)}"/>')
    parts.append(f'<circle class="latest-dot" cx="{x_of(latest.t):.1f}" cy="{y_of(latest.value):.1f}" r="3"/></svg>')
    ident = f' id="{escape(chart_id)}"' if chart_id else ""
    return (f'<figure class="chart"{ident} data-samples="{len(points)}">{"".join(parts)}'
            f'<figcaption><span class="latest"><span class="value">{format_value(latest.value)}</span> '
            f'{escape(unit)}</span><span class="what">{escape(what)}</span>'
            f'<span class="span muted">last {_span_text(span)}, sampled every {period_s:g} s</span>'
            f'</figcaption></figure>')


def sparkline(points: Sequence[Point], now: float, *, what: str, unit: str, window_s: float,
              period_s: float) -> str:
    """A small line without axes for a table cell (y from 0 to the highest value); the summary
    in its aria-label and <title>."""
    points, span = _shown(points, now, window_s)
    if len(points) < 2:
        return _collecting("sparkline", what, None)
    top = max(max(p.value for p in points), 0.0) or 1.0
    bottom = min(0.0, min(p.value for p in points))
    pad = 2

    def x_of(t: float) -> float:
        return pad + (t - (now - span)) / span * (SPARK_WIDTH - 2 * pad)

    def y_of(v: float) -> float:
        return SPARK_HEIGHT - pad - (v - bottom) / (top - bottom) * (SPARK_HEIGHT - 2 * pad)

    summary = _summary(what, points, span, unit)
    paths = "".join(f'<path class="line" d="{_path(run, x_of, y_of)}"/>'
                    for run in _segments(points, 3 * period_s) if len(run) > 1)
    return (f'<figure class="sparkline" data-samples="{len(points)}"><svg viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" '
            f'width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" role="img" aria-label="{escape(summary)}" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{escape(summary)}</title>'
            f'<line class="axis" x1="{pad}" y1="{y_of(0):.1f}" x2="{SPARK_WIDTH - pad}" y2="{y_of(0):.1f}"/>{paths}'
            f'<circle class="latest-dot" cx="{x_of(points[-1].t):.1f}" cy="{y_of(points[-1].value):.1f}" r="2"/>'
            f'</svg></figure>')
