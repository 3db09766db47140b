"""TimerQueue against a reference model: whatever the order of schedules (earlier, later, the same
key again), cancels and runs, exactly the due keys fire, in deadline order, with their last action."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.group.timers import TimerQueue

keys = st.sampled_from("abcdef")
ops = st.lists(st.one_of(
    st.tuples(st.just("schedule"), keys, st.integers(0, 100)),
    st.tuples(st.just("cancel"), keys, st.just(0)),
    st.tuples(st.just("run"), st.just(""), st.integers(0, 100))), max_size=60)


@settings(max_examples=400, deadline=None)
@given(ops=ops)
def test_timer_queue_matches_a_model(ops):
    queue = TimerQueue()
    model: dict[str, tuple[int, int]] = {}  # key -> (deadline, the version of its action)
    fired: list[tuple[str, int]] = []
    versions = iter(range(10**6))
    now = 0
    for op, key, value in ops:
        if op == "schedule":
            version = next(versions)
            queue.schedule(key, value, lambda k=key, v=version: fired.append((k, v)))
            model[key] = (value, version)
        elif op == "cancel":
            queue.cancel(key)
            model.pop(key, None)
        else:
            now = max(now, value)
            fired.clear()
            count = queue.run_due(now)
            due = sorted((d, k) for k, (d, _v) in model.items() if d <= now)
            assert sorted(fired) == sorted((k, model[k][1]) for _d, k in due)
            assert count == len(due)
            deadlines = [model[k][0] for k, _v in fired]
            assert deadlines == sorted(deadlines)  # in deadline order
            for _d, k in due:
                del model[k]
        assert queue.next_deadline() == (min(d for d, _v in model.values()) if model else None)
        for k in "abcdef":
            assert queue.deadline(k) == (model[k][0] if k in model else None)
            assert (k in queue) == (k in model)


def test_an_earlier_deadline_wakes_the_runner_and_a_later_one_does_not():
    queue = TimerQueue()
    woken = []
    queue.on_change = lambda: woken.append(1)
    queue.schedule("a", 100, lambda: None)
    queue.schedule("a", 200, lambda: None)  # renewed: later, no wake-up needed
    assert len(woken) == 1
    queue.schedule("b", 50, lambda: None)
    assert len(woken) == 2
    assert queue.run_due(150) == 1 and queue.next_deadline() == 200
