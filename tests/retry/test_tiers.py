"""Retry tiers' rules, pure: durations and tier lists, names, where a record produced to a tier
goes (back to its main partition, into the tier, or to the dead-letter topic) and with which
headers; a tier's produce batch split keeps an idempotent producer's sequence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.config import BrokerConfig, validate_topic_configs
from kbroker.delayed.split import split_records
from kbroker.errors import InvalidConfigError
from kbroker.retry import tiers as rt
from kbroker.wire.records import Record, build_batch, decode_records, parse_batch_header


def route(**kw) -> rt.TierRoute:
    base = dict(tier_topic="orders.retry.30s", partition=4, delay_ms=30_000, into_tier=False, main_topic="orders",
                main_partitions=6, max_attempts=3, dlq_partitions=6)
    return rt.TierRoute(**{**base, **kw})


def test_durations_and_tier_lists():
    assert [rt.parse_duration(t) for t in ("250ms", "30s", "5m", "1h", "2d")] == \
        [250, 30_000, 300_000, 3_600_000, 172_800_000]
    for bad in ("", "0s", "30", "30x", "1.5s", "-1s", "30S", "05s", "1h30m"):
        with pytest.raises(ValueError):
            rt.parse_duration(bad)
    assert rt.parse_tiers("30s, 5m,1h") == [("30s", 30_000), ("5m", 300_000), ("1h", 3_600_000)]
    assert rt.parse_tiers(None) == rt.parse_tiers([]) == rt.parse_tiers("") == []
    with pytest.raises(ValueError, match="twice"):
        rt.parse_tiers("1s,1s")
    with pytest.raises(ValueError, match="longer than"):
        rt.parse_tiers("2d", max_delay_ms=86_400_000)
    with pytest.raises(ValueError, match="at most"):
        rt.parse_tiers(",".join(f"{i}s" for i in range(1, rt.MAX_TIERS + 2)))
    assert rt.effective_max_attempts(-1, 3) == 4 and rt.effective_max_attempts(7, 3) == 7


def test_names():
    assert rt.retry_topic("a.b", "30s") == "a.b.retry.30s" and rt.dlq_topic("a.b") == "a.b.dlq"
    assert rt.main_topic_of("a.b.retry.30s") == "a.b"
    assert rt.main_topic_of("a.retry.b.retry.1m") == "a.retry.b"
    assert rt.main_topic_of("orders") is None and rt.main_topic_of(".retry.1s") is None


def test_config_rules():
    broker = BrokerConfig.from_dict({"delayed.delivery.max.delay.ms": "3600000"})
    assert validate_topic_configs({"retry.topics": "1s,2m", "max.delivery.attempts": "5"}, broker)
    for bad, words in [({"retry.topics": "1x"}, "not a duration"), ({"retry.topics": "2h"}, "longer than"),
                       ({"retry.topics": "1s", "retry.delay.ms": "1000"}, "no tiers of its own"),
                       ({"retry.delay.ms": "7200000"}, "longer than"), ({"max.delivery.attempts": "0"}, "max.delivery"),
                       ({"retry.target": "elsewhere"}, "retry.target")]:
        with pytest.raises(InvalidConfigError, match=words):
            validate_topic_configs(bad, broker)


def test_first_retry_goes_back_to_the_same_partition_index_after_the_delay():
    planned = rt.plan_record(route(), [("error", b"boom"), ("retry.topic", b"stale")], 1000)
    assert planned.target == ("orders", 4) and planned.due_ms == 31_000
    assert planned.headers == (("error", b"boom"), ("retry.count", b"1"), ("retry.topic", b"orders.retry.30s"))
    assert rt.plan_record(route(main_partitions=3), [], 0).target == ("orders", 1)  # main shrank: modulo
    assert rt.plan_record(route(into_tier=True), [], 0).target == ("orders.retry.30s", 4)


def test_past_max_delivery_attempts_the_record_goes_to_the_dlq_at_once():
    planned = rt.plan_record(route(), [("retry.count", b"2"), ("error", b"x")], 1000)
    assert planned.target == ("orders.dlq", 4) and planned.due_ms == 1000
    assert planned.headers == (("error", b"x"), ("retry.count", b"2"),
                               ("dlq.reason", b"max.delivery.attempts 3 exceeded"),
                               ("dlq.source.topic", b"orders.retry.30s"), ("dlq.source.partition", b"4"))
    with pytest.raises(rt.RetryRecordError, match="does not exist"):
        rt.plan_record(route(dlq_partitions=None), [("retry.count", b"5")], 0)


@given(count=st.integers(0, 50), max_attempts=st.integers(1, 50))
def test_dlq_exactly_when_the_attempts_are_used_up(count, max_attempts):
    headers = [("retry.count", b"0"), ("retry.count", str(count).encode())]  # the last one counts
    planned = rt.plan_record(route(max_attempts=max_attempts), headers, 0)
    # deliveries so far: the first one and `count` retries; another retry would be one more
    assert (planned.target[0] == "orders.dlq") == (count + 2 > max_attempts)
    counts = [v for k, v in planned.headers if k == "retry.count"]
    assert counts == [str(count if planned.target[0] == "orders.dlq" else count + 1).encode()]


@pytest.mark.parametrize("raw", [b"x", b"-1", b"", b"\xff"])
def test_a_malformed_retry_count_is_refused(raw):
    with pytest.raises(rt.RetryRecordError, match="retry.count"):
        rt.plan_record(route(), [("retry.count", raw)], 0)


def test_a_tier_batch_is_all_scheduled_and_an_idempotent_producer_keeps_its_sequence():
    recs = [Record(0, 100, b"k0", b"a", []), Record(1, 101, b"k1", b"b", [("retry.count", b"2")])]
    buf = build_batch(recs, producer_id=9, producer_epoch=1, base_sequence=40)
    header = parse_batch_header(buf)

    def plan(rec):
        p = rt.plan_record(route(), rec.headers, 5000)
        return p.target, p.due_ms, p.headers
    split = split_records(buf, 0, header, ("orders.retry.30s", 4), plan)
    assert [(d.target, d.due_ms, d.key) for d in split.delayed] == [(("orders", 4), 35_000, b"k0"),
                                                                     (("orders.dlq", 4), 5000, b"k1")]
    kept = parse_batch_header(split.remaining)
    assert (kept.producer_id, kept.base_sequence, kept.last_offset_delta, kept.records_count) == (9, 40, 1, 0)
    assert decode_records(split.remaining, 0, kept) == []
    again = split_records(buf, 0, header, ("orders.retry.30s", 4), plan)
    assert [d.id for d in again.delayed] == [d.id for d in split.delayed]  # a retried produce: the same ids
    plain = build_batch(recs)
    assert split_records(plain, 0, parse_batch_header(plain), ("orders.retry.30s", 4), plan).remaining is None
