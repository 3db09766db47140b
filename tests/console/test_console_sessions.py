"""The console's session store (`--login`): tokens, idle expiry, the bound on sessions, and each
session's resource closed when it ends, on a fake clock."""

import pytest

from kbroker.console.sessions import SessionStore


class Pool:
    def __init__(self, name):
        self.name, self.closed = name, False

    def close(self):
        self.closed = True


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def store(idle=60.0, max_sessions=3):
    clock = Clock()
    return SessionStore(idle, max_sessions, clock), clock


def test_a_token_finds_its_session_and_nothing_else_does():
    sessions, _ = store()
    token, session = sessions.create("alice", Pool("a"))
    assert len(token) >= 40 and session.principal == "User:alice"
    assert sessions.get(token) is session
    for other in (None, "", "forged", token[:-1], token + "x"):
        assert sessions.get(other) is None
    assert token not in repr(sessions._sessions)  # only the token's hash is kept


def test_tokens_are_random():
    sessions, _ = store(max_sessions=100)
    tokens = {sessions.create("alice", Pool(i))[0] for i in range(50)}
    assert len(tokens) == 50


def test_an_idle_session_expires_and_its_pool_is_closed():
    sessions, clock = store(idle=60)
    token, session = sessions.create("alice", Pool("a"))
    clock.now += 59
    assert sessions.get(token) is session  # a request restarts the idle time
    clock.now += 59
    assert sessions.get(token) is session
    clock.now += 61
    assert sessions.get(token) is None and session.resource.closed and len(sessions) == 0


def test_expire_ends_every_idle_session():
    sessions, clock = store(idle=10, max_sessions=10)
    old = [sessions.create(u, Pool(u))[1] for u in ("a", "b")]
    clock.now += 5
    token, fresh = sessions.create("c", Pool("c"))
    clock.now += 6
    assert sessions.expire() == 2 and all(s.resource.closed for s in old)
    assert sessions.get(token) is fresh and not fresh.resource.closed


def test_a_full_store_ends_the_session_idle_the_longest():
    sessions, clock = store(max_sessions=2)
    first, a = sessions.create("a", Pool("a"))
    clock.now += 1
    second, b = sessions.create("b", Pool("b"))
    clock.now += 1
    sessions.get(first)  # a was used last: b is now idle the longest
    clock.now += 1
    third, c = sessions.create("c", Pool("c"))
    assert len(sessions) == 2 and b.resource.closed and not a.resource.closed
    assert sessions.get(second) is None and sessions.get(first) is a and sessions.get(third) is c


def test_logout_and_close():
    sessions, _ = store()
    token, a = sessions.create("a", Pool("a"))
    _, b = sessions.create("b", Pool("b"))
    assert sessions.end(token) and a.resource.closed and sessions.get(token) is None
    assert not sessions.end(token) and not sessions.end(None)
    sessions.close()
    assert b.resource.closed and len(sessions) == 0


def test_a_pool_failing_to_close_does_not_keep_the_others_open():
    class Broken(Pool):
        def close(self):
            raise OSError("already gone")

    sessions, clock = store(idle=1, max_sessions=5)
    sessions.create("a", Broken("a"))
    _, b = sessions.create("b", Pool("b"))
    clock.now += 2
    assert sessions.expire() == 2 and b.resource.closed


def test_bounds_are_checked():
    with pytest.raises(ValueError):
        SessionStore(0, 1)
    with pytest.raises(ValueError):
        SessionStore(10, 0)
