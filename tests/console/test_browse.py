"""The message browser's pure core: queries parsed and bounded, where each partition's read starts,
the filter, and how keys, values and headers are shown (JSON, text, hex; cut when huge)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.console import browse
from kbroker.console.browse import BrowseQuery, QueryError, parse_query, show, start_offsets
from kbroker.wire.records import Record


def test_query_defaults_and_bounds():
    q = parse_query("t", {})
    assert (q.mode, q.partition, q.limit, q.format, q.filter) == ("latest", None, browse.DEFAULT_LIMIT, "auto", "")
    q = parse_query("t", {"mode": "offset", "offset": "7", "partition": "2", "limit": "5", "format": "hex"})
    assert (q.mode, q.offset, q.partition, q.limit, q.format) == ("offset", 7, 2, 5, "hex")
    for bad in ({"mode": "sideways"}, {"format": "xml"}, {"limit": "0"}, {"limit": str(browse.MAX_LIMIT + 1)},
                {"limit": "ten"}, {"partition": "-1"}, {"mode": "offset", "offset": "-3"},
                {"mode": "timestamp"}, {"mode": "timestamp", "timestamp": "yesterday"},
                {"filter": "x" * (browse.MAX_FILTER_CHARS + 1)}):
        with pytest.raises(QueryError):
            parse_query("t", bad)


def test_timestamps_in_ms_or_iso():
    assert browse.parse_timestamp("1700000000000") == 1700000000000
    assert browse.parse_timestamp("2023-11-14T22:13:20Z") == 1700000000000
    assert browse.parse_timestamp("2023-11-14T23:13:20+01:00") == 1700000000000
    assert browse.parse_timestamp("2023-11-14T22:13:20") == 1700000000000  # UTC without a zone


def _q(mode, **kw):
    return BrowseQuery("t", None, mode, kw.get("offset", 0), kw.get("ts", 0), kw.get("limit", 10), "", "auto")


def test_start_offsets_per_mode():
    start, end = {("t", 0): 5, ("t", 1): 0}, {("t", 0): 100, ("t", 1): 3}
    assert start_offsets(_q("earliest"), start, end) == {("t", 0): (5, 100), ("t", 1): (0, 3)}
    assert start_offsets(_q("latest"), start, end) == {("t", 0): (90, 100), ("t", 1): (0, 3)}
    assert start_offsets(_q("offset", offset=2), start, end) == {("t", 0): (5, 100), ("t", 1): (2, 3)}
    assert start_offsets(_q("offset", offset=500), start, end) == {("t", 0): (100, 100), ("t", 1): (3, 3)}
    by_time = {("t", 0): 42, ("t", 1): None}  # None: no record that recent
    assert start_offsets(_q("timestamp"), start, end, by_time) == {("t", 0): (42, 100), ("t", 1): (3, 3)}
    assert start_offsets(_q("earliest"), {("t", 0): None}, {("t", 0): 9}) == {}  # unknown: not read


def test_json_is_pretty_printed_and_left_as_text():
    shown = show(json.dumps({"b": 1, "a": "<script>"}).encode())
    assert shown.kind == "json" and shown.text == '{\n  "b": 1,\n  "a": "<script>"\n}'
    assert show(b"plain words").kind == "text"
    assert show(b"123").kind == "text"  # a JSON scalar reads as text in auto
    assert show(b"123", "json").kind == "json"
    assert show(b"{not json").kind == "text"
    assert show(b"[" * 100_000).kind == "text"  # deeper than json allows: no crash
    assert show(None) == browse.Shown("null", "null", 0, False)


def test_binary_is_hex_and_big_values_are_cut():
    shown = show(bytes(range(20)))
    assert shown.kind == "hex"
    assert shown.text.splitlines()[0] == "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  |................|"
    assert show(b"hi", "hex").text.startswith("00000000  68 69")
    assert show(b"\x00\xfe", dump=False).text == "00 fe"
    big = show(b"a" * (browse.MAX_SHOWN_BYTES + 10))
    assert big.truncated and big.size == browse.MAX_SHOWN_BYTES + 10 and len(big.text) == browse.MAX_SHOWN_BYTES
    cut_in_char = show("é".encode() * browse.MAX_SHOWN_BYTES)  # the cut falls inside a character
    assert cut_in_char.kind == "text" and cut_in_char.truncated


@given(st.binary(max_size=300), st.sampled_from(browse.FORMATS))
def test_any_bytes_are_shown(data, fmt):
    shown = show(data, fmt)
    assert shown.kind in ("json", "text", "hex") and shown.size == len(data)


def _rec(offset, ts, key=b"k", value=b"v", headers=()):
    return Record(offset, ts, key, value, list(headers))


def test_filter_looks_at_key_value_and_headers():
    r = _rec(0, 0, b"Order-7", b'{"x": 1}', [("Trace", b"abc"), ("bin", b"\xff")])
    assert all(browse.matches(r, n) for n in ("", "order-7", '"x"', "trace", "ABC"))
    assert not browse.matches(r, "missing")
    assert browse.matches(_rec(0, 0, None, None), "") and not browse.matches(_rec(0, 0, None, None), "x")


def test_select_orders_filters_and_limits():
    read = {0: [_rec(0, 10), _rec(1, 30, value=b"skip")], 1: [_rec(0, 20), _rec(1, 40)]}
    q = BrowseQuery("t", None, "earliest", 0, 0, 2, "", "auto")
    assert [(m.partition, m.offset) for m in browse.select(q, read)] == [(0, 0), (1, 0)]
    latest = q._replace(mode="latest", limit=3, filter="v")
    assert [(m.partition, m.offset) for m in browse.select(latest, read)] == [(1, 1), (1, 0), (0, 0)]


def test_partitions_to_read():
    assert browse.partitions_to_read(_q("earliest"), [2, 0, 1]) == [0, 1, 2]
    with pytest.raises(QueryError, match="no partition 9"):
        browse.partitions_to_read(_q("earliest")._replace(partition=9), [0, 1])
