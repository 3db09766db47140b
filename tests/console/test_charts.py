"""The console's SVG charts: well-formed markup, points inside the plot, empty states, escaping."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from kbroker.console.charts import (COLLECTING, HEIGHT, WIDTH, format_value, line_chart, nice_ceiling, span_for,
                                    sparkline)
from kbroker.console.samples import Point

SVG = "{http://www.w3.org/2000/svg}"
NOW = 5000.0


def parse(markup: str) -> ET.Element:
    return ET.fromstring(markup)  # raises on anything not well-formed XML


def coordinates(figure: ET.Element) -> list[tuple[float, float]]:
    out = []
    for path in figure.iter(SVG + "path"):
        out += [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", path.get("d"))]
    return out


def chart(points, **kw) -> str:
    return line_chart(points, NOW, what="Lag of group <billing> & co", unit="messages", window_s=600, period_s=1, **kw)


def test_line_chart_is_well_formed_and_its_points_are_inside_the_viewbox():
    points = [Point(NOW - 90 + i, float(v)) for i, v in enumerate(range(0, 900, 10))]
    figure = parse(chart(points, chart_id="lag-chart"))
    assert figure.tag == "figure" and figure.get("id") == "lag-chart" and figure.get("data-samples") == "90"
    svg = figure.find(SVG + "svg")
    assert svg.get("viewBox") == f"0 0 {WIDTH} {HEIGHT}" and svg.get("role") == "img"
    xy = coordinates(figure)
    assert len(xy) == 90
    assert all(0 <= x <= WIDTH and 0 <= y <= HEIGHT for x, y in xy)
    assert xy == sorted(xy, key=lambda p: p[0])  # time runs left to right
    assert xy[-1][1] < xy[0][1]  # a higher value is higher up
    # the span: 2 minutes hold 90 s of samples; the axes say so, with the unit
    texts = [t.text for t in figure.iter(SVG + "text")]
    assert "-2 min" in texts and "now" in texts and "messages" in texts and "1000" in texts
    caption = figure.find("figcaption")
    assert caption.find("span[@class='latest']/span[@class='value']").text == "890"


def test_summary_in_aria_label_and_title_escaped():
    markup = chart([Point(NOW - 10, 4.0), Point(NOW, 2.0)])
    figure = parse(markup)
    svg = figure.find(SVG + "svg")
    label = svg.get("aria-label")
    assert label == "Lag of group <billing> & co, last 1 min: now 2 messages (lowest 2, highest 4, 2 samples)"
    assert svg.find(SVG + "title").text == label
    assert "<billing>" not in markup  # escaped in the markup itself


def test_fewer_than_two_samples_say_collecting():
    for points in ([], [Point(NOW - 1, 3.0)]):
        figure = parse(chart(points, chart_id="lag-chart"))
        assert figure.find(SVG + "svg") is None and COLLECTING in "".join(figure.itertext())
        assert "empty" in figure.get("class") and figure.get("id") == "lag-chart"
        spark = parse(sparkline(points, NOW, what="x", unit="messages", window_s=600, period_s=1))
        assert COLLECTING in "".join(spark.itertext())


def test_all_zero_values_draw_a_flat_line_on_the_axis():
    figure = parse(chart([Point(NOW - 2, 0.0), Point(NOW - 1, 0.0), Point(NOW, 0.0)]))
    ys = {y for _x, y in coordinates(figure)}
    assert ys == {float(HEIGHT - 26)}  # the bottom of the plot area


def test_a_gap_breaks_the_line():
    points = [Point(NOW - 60 + t, 1.0) for t in (0, 1, 2, 30, 31, 32)]
    figure = parse(chart(points))
    assert len(list(figure.iter(SVG + "path"))) == 2


def test_points_older_than_the_window_are_left_out():
    points = [Point(NOW - 2000, 100.0), Point(NOW - 500, 1.0), Point(NOW, 2.0)]
    figure = parse(line_chart(points, NOW, what="x", unit="msg/s", window_s=600, period_s=1000))
    assert figure.get("data-samples") == "2"
    assert all(0 <= x <= WIDTH for x, _y in coordinates(figure))


def test_sparkline_is_small_and_inside_its_viewbox():
    points = [Point(NOW - 30 + i, float(i % 7)) for i in range(31)]
    figure = parse(sparkline(points, NOW, what="Lag of group g", unit="messages", window_s=600, period_s=1))
    svg = figure.find(SVG + "svg")
    _, _, w, h = (float(v) for v in svg.get("viewBox").split())
    assert all(0 <= x <= w and 0 <= y <= h for x, y in coordinates(figure))
    assert svg.get("aria-label").startswith("Lag of group g, last 1 min: now 2 messages")


@pytest.mark.parametrize("value, ceiling", [(0, 1), (0.3, 0.5), (1, 1), (7, 10), (12, 20), (890, 1000), (5000, 5000)])
def test_nice_ceiling(value, ceiling):
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_span_is_the_smallest_that_holds_the_samples():
    assert span_for([Point(NOW - 30, 0)], NOW, 600) == 60
    assert span_for([Point(NOW - 61, 0)], NOW, 600) == 120
    assert span_for([Point(NOW - 250, 0)], NOW, 600) == 300
    assert span_for([Point(NOW - 250, 0)], NOW, 200) == 200  # never past the window


def test_format_value():
    assert [format_value(v) for v in (0, 7, 0.25, 2.5, 12.34, 1234, 12345, 1.5e6, -3)] == [
        "0", "7", "0.25", "2.5", "12.3", "1234", "12.3k", "1.5M", "-3"]
