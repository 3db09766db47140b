"""The delay log's record formats round trip; delay headers are read as documented; a produce batch
splits into its delayed records and the batch the target keeps (producer state and offsets span
unchanged, as the log cleaner keeps an emptied batch)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.delayed import format as fmt
from kbroker.delayed.split import may_delay, split_batch
from kbroker.wire.records import COMPRESSION_NONE, COMPRESSION_ZSTD, Record, build_batch, decode_records, parse_batch_header

opt_bytes = st.one_of(st.none(), st.binary(max_size=50))


@given(key=opt_bytes, value=opt_bytes, headers=st.lists(st.tuples(st.text(max_size=10), opt_bytes), max_size=4),
       due=st.integers(0, 2**62), ts=st.integers(-1, 2**62), topic=st.text(min_size=1, max_size=20),
       partition=st.integers(0, 2**31 - 1))
def test_schedule_round_trip(key, value, headers, due, ts, topic, partition):
    rec = fmt.DelayedRecord(fmt.random_id(), (topic, partition), due, ts, key, value, tuple(headers))
    k, v = fmt.encode_schedule(rec)
    decoded = fmt.decode_key(k)
    assert decoded.kind == fmt.KIND_SCHEDULE and decoded.record_id == rec.id
    assert fmt.decode_schedule(rec.id, v) == rec
    assert fmt.decode_schedule_head(v) == ((topic, partition), due)


def test_intent_round_trip_and_ids():
    intent = fmt.Intent(("orders", 3), 42, 0, 2**31 - 2, ((fmt.random_id(), 7), (fmt.random_id(), 9)))
    k, v = fmt.encode_intent(intent)
    assert fmt.decode_key(k).target == ("orders", 3)
    assert fmt.decode_intent(("orders", 3), v) == intent
    assert fmt.parse_id(fmt.format_id(4, intent.items[0][0])) == (4, intent.items[0][0])
    with pytest.raises(ValueError):
        fmt.parse_id("4:abc")


def test_due_time_rules():
    now = 1_000_000
    assert fmt.due_time([], now, 0, 10**9) is None
    assert fmt.due_time([("delay.ms", b"250")], now, 0, 10**9) == now + 250
    assert fmt.due_time([("delay.ms", b"0")], now, 5000, 10**9) is None  # the header wins over the topic
    assert fmt.due_time([], now, 5000, 10**9) == now + 5000
    assert fmt.due_time([("deliver.at", str(now + 9).encode()), ("delay.ms", b"1")], now, 0, 10**9) == now + 9
    assert fmt.due_time([("deliver.at", str(now - 9).encode())], now, 0, 10**9) is None  # past: at once
    for bad in ([("delay.ms", b"soon")], [("delay.ms", b"-5")], [("delay.ms", b"99999")]):
        with pytest.raises(fmt.DelayHeaderError):
            fmt.due_time(bad, now, 0, 1000)
    assert fmt.delivered_headers((("a", b"1"), ("delay.ms", b"5"), ("scheduled.at", b"0")), 77) == \
        (("a", b"1"), ("scheduled.at", b"77"))


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_ZSTD])
def test_split_keeps_the_producer_state_and_offsets_span(codec):
    recs = [Record(0, 100, b"k0", b"now", []), Record(1, 101, b"k1", b"later", [("delay.ms", b"500")]),
            Record(2, 102, b"k2", b"now2", [("h", b"v")])]
    buf = build_batch(recs, compression=codec, producer_id=9, producer_epoch=1, base_sequence=40)
    header = parse_batch_header(buf)
    assert may_delay(buf, 0, header)
    split = split_batch(buf, 0, header, ("t", 0), 1000, 0, 10**9)
    assert [r.value for r in split.delayed] == [b"later"] and split.delayed[0].due_ms == 1500
    assert split.delayed[0].id == fmt.idempotent_id(("t", 0), 9, 1, 41)
    rest = parse_batch_header(split.remaining)
    assert (rest.producer_id, rest.producer_epoch, rest.base_sequence, rest.last_offset_delta) == (9, 1, 40, 2)
    assert [(r.offset, r.value) for r in decode_records(split.remaining, 0, rest)] == [(0, b"now"), (2, b"now2")]


def test_all_delayed_without_producer_appends_nothing_and_idempotent_keeps_an_empty_batch():
    recs = [Record(0, 100, None, b"x", [("delay.ms", b"5")])]
    plain = build_batch(recs)
    assert split_batch(plain, 0, parse_batch_header(plain), ("t", 0), 0, 0, 10**9).remaining is None
    idem = build_batch(recs, producer_id=3, producer_epoch=0, base_sequence=0)
    rest = split_batch(idem, 0, parse_batch_header(idem), ("t", 0), 0, 0, 10**9).remaining
    header = parse_batch_header(rest)
    assert header.records_count == 0 and header.last_sequence == 0 and header.producer_id == 3


def test_batches_without_delay_headers_are_ruled_out_unopened():
    buf = build_batch([Record(0, 1, b"deliver", b"delay", [("x", b"deliver.a")])])
    assert not may_delay(buf, 0, parse_batch_header(buf))


def test_a_topic_that_does_not_honour_headers_counts_only_its_own_delay():
    recs = [Record(0, 100, None, b"a", [("delay.ms", b"500")]), Record(1, 101, None, b"b", [("deliver.at", b"x")])]
    buf = build_batch(recs)
    header = parse_batch_header(buf)
    assert split_batch(buf, 0, header, ("t", 0), 1000, 0, 10**9, honour_headers=False) is None  # not even refused
    split = split_batch(buf, 0, header, ("t", 0), 1000, 200, 10**9, honour_headers=False)
    assert [(r.value, r.due_ms, r.headers) for r in split.delayed] == \
        [(b"a", 1200, (("delay.ms", b"500"),)), (b"b", 1200, (("deliver.at", b"x"),))]
