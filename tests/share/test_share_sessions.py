"""Share sessions as Kafka's SharePartitionManager keeps them: epochs 0 / next / -1, the errors the
stock clients react to (they reopen at epoch 0 on SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH
and SHARE_SESSION_LIMIT_REACHED), and the session's partitions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.errors import ErrorCode as E
from kbroker.share.sessions import MAX_EPOCH, ShareSessions, next_epoch


def test_a_session_opens_moves_on_and_closes():
    s = ShareSessions()
    a = s.fetch("g", "m", 0, [("t", 0), ("t", 1)], [], False)
    assert a.error == E.none and a.session.epoch == 1 and a.session.partitions == {("t", 0), ("t", 1)}
    b = s.fetch("g", "m", 1, [("u", 0)], [("t", 1)], True)  # acknowledgements ride on later fetches
    assert b.error == E.none and b.session.partitions == {("t", 0), ("u", 0)} and b.session.epoch == 2
    c = s.acknowledge("g", "m", 2)
    assert c.error == E.none and c.session.epoch == 3
    d = s.fetch("g", "m", -1, [], [], True)
    assert d.error == E.none and d.closed is d.session and s.get("g", "m") is None


def test_the_refusals_are_kafkas():
    s = ShareSessions()
    assert s.fetch("g", "m", 0, [("t", 0)], [], True).error == E.invalid_request  # acks in the first fetch
    assert s.fetch("g", "m", 3, [("t", 0)], [], False).error == E.share_session_not_found
    assert s.fetch("g", "m", -1, [], [], False).error == E.share_session_not_found
    assert s.acknowledge("g", "m", 1).error == E.share_session_not_found
    assert s.acknowledge("g", "m", 0).error == E.invalid_share_session_epoch  # an acknowledge never opens
    s.fetch("g", "m", 0, [("t", 0)], [], False)
    before = s.get("g", "m").epoch
    assert s.fetch("g", "m", 5, [("x", 0)], [], False).error == E.invalid_share_session_epoch
    assert s.acknowledge("g", "m", 7).error == E.invalid_share_session_epoch
    assert s.fetch("g", "m", -1, [("t", 0)], [], False).error == E.invalid_request  # final fetch asks nothing
    session = s.get("g", "m")
    assert session.epoch == before and session.partitions == {("t", 0)}  # refused requests change nothing


def test_reopening_replaces_the_old_session_and_says_so():
    s = ShareSessions()
    first = s.fetch("g", "m", 0, [("t", 0)], [], False).session
    again = s.fetch("g", "m", 0, [("t", 1)], [], False)
    assert again.closed is first and again.session.partitions == {("t", 1)} and len(s) == 1


def test_the_session_limit():
    s = ShareSessions(max_sessions=2)
    assert s.fetch("g", "a", 0, [], [], False).error == E.none
    assert s.fetch("g", "b", 0, [], [], False).error == E.none
    assert s.fetch("g", "c", 0, [], [], False).error == E.share_session_limit_reached
    assert s.fetch("g", "a", 0, [], [], False).error == E.none  # replacing one's own is not a new one
    assert s.remove_member("g", "b") is not None
    assert s.fetch("g", "c", 0, [], [], False).error == E.none


def test_epochs_wrap_to_one():
    assert next_epoch(0) == 1 and next_epoch(MAX_EPOCH) == 1 and next_epoch(-1) == -1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["fetch", "ack"]), st.integers(-1, 4), st.booleans()), max_size=30))
def test_only_the_expected_epoch_moves_a_session_on(steps):
    s = ShareSessions()
    expected = None  # the model: the epoch the member's next request must carry, None with no session
    for kind, epoch, acks in steps:
        answer = s.fetch("g", "m", epoch, [], [], acks) if kind == "fetch" else s.acknowledge("g", "m", epoch)
        if epoch == 0 and kind == "fetch" and not acks:
            assert answer.error == E.none
            expected = 1
        elif epoch == -1 and expected is not None:
            assert answer.error == E.none
            expected = None
        elif expected is not None and epoch == expected:
            assert answer.error == E.none
            expected += 1
        else:
            assert answer.error != E.none
        current = s.get("g", "m")
        assert (current.epoch if current else None) == expected
