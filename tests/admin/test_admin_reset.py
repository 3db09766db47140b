"""Offset-reset planning as a pure function: each strategy, Kafka's clamping to [log start, log end],
--shift-by without a committed offset, --to-datetime past the last record, argument parsing."""

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.admin.reset import (PlanError, PlannedOffset, ResetSpec, parse_datetime_ms, parse_topic_spec,
                                 plan_reset)

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)
PARTS = [T0, T1, T2]
START = {T0: 0, T1: 5, T2: 10}
END = {T0: 8, T1: 6, T2: 10}  # t-2 is empty with everything before it deleted
COMMITTED = {T0: 3, T1: 6}


def _new(spec, **kw):
    plan, warnings = plan_reset(PARTS, spec, kw.get("committed", COMMITTED), START, END, kw.get("by_time"))
    return {(p.topic, p.partition): p.new for p in plan}, warnings


def test_to_earliest_and_to_latest():
    assert _new(ResetSpec("to-earliest"))[0] == START
    assert _new(ResetSpec("to-latest"))[0] == END


def test_plan_keeps_the_current_offset_and_sorts():
    plan, _ = plan_reset([T2, T0], ResetSpec("to-earliest"), COMMITTED, START, END)
    assert plan == [PlannedOffset("t", 0, 3, 0), PlannedOffset("t", 2, None, 10)]


def test_to_offset_is_clamped_both_ways_with_kafkas_warnings():
    new, warnings = _new(ResetSpec("to-offset", 7))
    assert new == {T0: 7, T1: 6, T2: 10}
    assert warnings == ["New offset (7) is higher than latest offset for t-1. Value will be set to 6",
                        "New offset (7) is lower than earliest offset for t-2. Value will be set to 10"]


def test_shift_by_moves_from_the_committed_offset_and_clamps():
    new, warnings = _new(ResetSpec("shift-by", -2), committed={T0: 3, T1: 6, T2: 10})
    assert new == {T0: 1, T1: 5, T2: 10}
    assert len(warnings) == 2  # t-1 (4 < 5) and t-2 (8 < 10)
    assert _new(ResetSpec("shift-by", 100), committed={T0: 3, T1: 6, T2: 10})[0] == END


def test_shift_by_needs_a_committed_offset():
    with pytest.raises(PlanError, match="t-2.*no committed offset"):
        _new(ResetSpec("shift-by", 1))


def test_to_datetime_uses_the_offsets_for_times_and_the_log_end_past_the_last_record():
    new, warnings = _new(ResetSpec("to-datetime", 1_700_000_000_000), by_time={T0: 4, T1: None, T2: None})
    assert new == {T0: 4, T1: 6, T2: 10}
    assert warnings == []


def test_missing_log_offsets_are_an_error():
    with pytest.raises(PlanError):
        plan_reset([("u", 0)], ResetSpec("to-earliest"), {}, START, END)


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(-2000, 2000), st.integers(0, 2000))
def test_every_new_offset_lies_in_the_log(start, length, shift, committed):
    end = start + length
    plan, warnings = plan_reset([T0], ResetSpec("shift-by", shift), {T0: committed}, {T0: start}, {T0: end})
    assert start <= plan[0].new <= end
    assert plan[0].new == min(max(committed + shift, start), end)
    assert len(warnings) == (committed + shift != plan[0].new)


def test_parse_topic_spec():
    assert parse_topic_spec("orders") == ("orders", None)
    assert parse_topic_spec("orders:2,0,2") == ("orders", [0, 2])
    for bad in ("", ":1", "orders:", "orders:x", "orders:-1"):
        with pytest.raises(PlanError):
            parse_topic_spec(bad)


def test_parse_datetime():
    assert parse_datetime_ms("2024-05-01T12:00:00.000+00:00") == 1714564800000
    assert parse_datetime_ms("2024-05-01T12:00:00Z") == 1714564800000
    assert parse_datetime_ms("2024-05-01T14:00:00.250+02:00") == 1714564800250
    local = datetime.datetime(2024, 5, 1, 12, 0).astimezone()
    assert parse_datetime_ms("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(PlanError):
        parse_datetime_ms("yesterday")
