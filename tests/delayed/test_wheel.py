"""The timing wheel on a fake clock: every item fires exactly once, never early, in (due, order)
order, at most one tick late when the clock is advanced to each next expiration; cancelled items
never fire."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.delayed.wheel import TimingWheel

ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 200_000)),     # due offset from now
    st.tuples(st.just("cancel"), st.integers(0, 10_000)),   # index among added ids
    st.tuples(st.just("step"), st.integers(0, 5_000)),      # advance the clock by this much
), max_size=300)


@settings(max_examples=200, deadline=None)
@given(ops=ops, tick=st.sampled_from([1, 2, 7, 10]), size=st.sampled_from([2, 4, 16, 64]),
       start=st.integers(0, 10**12))
def test_fires_once_never_early_in_order_at_most_one_tick_late(ops, tick, size, start):
    wheel = TimingWheel(tick, size, start)
    now = start
    due_of: dict[int, int] = {}
    added_at: dict[int, int] = {}
    cancelled: set[int] = set()
    fired: dict[int, int] = {}
    next_id = 0

    def advance_to(t: int) -> None:
        got = wheel.advance(t)
        assert [(d, o) for _i, d, o in got] == sorted((d, o) for _i, d, o in got)
        for item_id, due, _order in got:
            assert item_id not in fired, "fired twice"
            assert item_id not in cancelled
            assert due == due_of[item_id]
            assert due <= t, "fired early"
            fired[item_id] = t

    def run_until(t: int) -> None:
        """Advance as a scheduler does: to every expiration up to t, then to t."""
        nonlocal now
        while True:
            nxt = wheel.next_expiration()
            if nxt is None or nxt > t:
                break
            advance_to(max(nxt, now))
            now = max(nxt, now)
        advance_to(t)
        now = t

    for op, arg in ops:
        if op == "add":
            due_of[next_id] = now + arg - 50  # some already due
            added_at[next_id] = now
            wheel.add(next_id, due_of[next_id], next_id)
            next_id += 1
        elif op == "cancel" and next_id:
            item_id = arg % next_id
            if wheel.cancel(item_id):
                cancelled.add(item_id)
                assert item_id not in fired
        else:
            run_until(now + arg)
    run_until(now + 200_000 + tick)
    assert len(wheel) == 0
    assert set(fired) == set(due_of) - cancelled
    for item_id, at in fired.items():
        # an item already due when added fires at the next advance; the others within a tick
        assert at - max(due_of[item_id], added_at[item_id]) <= tick - 1, (item_id, due_of[item_id], at)


def test_global_due_order_when_advanced_at_each_expiration():
    wheel = TimingWheel(1, 8, 0)
    dues = [5, 70, 3, 900, 70, 64, 4096, 513, 1]
    for i, d in enumerate(dues):
        wheel.add(i, d, i)
    out = []
    while (nxt := wheel.next_expiration()) is not None:
        out.extend(wheel.advance(nxt))
    assert [(d, o) for _i, d, o in out] == sorted((d, i) for i, d in enumerate(dues))


def test_replacing_an_id_moves_it():
    wheel = TimingWheel(1, 4, 0)
    wheel.add("a", 100)
    wheel.add("a", 10)
    assert len(wheel) == 1
    assert wheel.advance(10) == [("a", 10, 0)]
    assert wheel.advance(200) == []
