"""The console's login sessions (`kbroker console --login`), server-side and pure: no web stack,
no sockets, an injected clock, so expiry and bounds are tested without waiting.

A session is a random token (`secrets`, 256 bits) the browser holds in a cookie; the store keeps
only the token's SHA-256, so a lookup's timing says nothing about stored tokens. Each session owns
a resource — the principal's own client pool — that is closed when the session ends: at logout,
after `idle_timeout_s` without a request, or when a new login finds the store full and the session
idle the longest makes room.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

__all__ = ["Closeable", "Session", "SessionStore", "TOKEN_BYTES"]

TOKEN_BYTES = 32


class Closeable(Protocol):
    def close(self) -> None: ...


@dataclass
class Session:
    """One logged-in browser: its principal and what it talks to the brokers with. The token is
    in the browser only (the store keeps its hash)."""

    username: str
    resource: Closeable = field(repr=False)
    created: float = 0.0
    last_seen: float = 0.0

    @property
    def principal(self) -> str:
        """The principal a SASL PLAIN or SCRAM login is on the brokers (Kafka's default builder)."""
        return f"User:{self.username}"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class SessionStore:
    """Sessions by token: at most `max_sessions`, each ended after `idle_timeout_s` idle."""

    def __init__(self, idle_timeout_s: float, max_sessions: int,
                 clock: Callable[[], float] = time.monotonic,
                 new_token: Callable[[], str] = lambda: secrets.token_urlsafe(TOKEN_BYTES)) -> None:
        if idle_timeout_s <= 0 or max_sessions < 1:
            raise ValueError("the idle timeout must be positive and the store hold at least one session")
        self.idle_timeout_s, self.max_sessions = idle_timeout_s, max_sessions
        self._clock, self._new_token = clock, new_token
        self._sessions: dict[bytes, Session] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def create(self, username: str, resource: Closeable) -> tuple[str, Session]:
        """A new session owning `resource`: (its token, for the cookie; the session). Expired
        sessions go first; a full store then ends the one idle the longest."""
        now = self._clock()
        token = self._new_token()
        session = Session(username, resource, now, now)
        with self._lock:
            ended = self._expired(now)
            while len(self._sessions) >= self.max_sessions:
                oldest = min(self._sessions, key=lambda k: self._sessions[k].last_seen)
                ended.append(self._sessions.pop(oldest))
            self._sessions[_digest(token)] = session
        _close(ended)
        return token, session

    def get(self, token: str | None) -> Session | None:
        """The live session of `token` (its idle time starts again), or None: no such token, or
        it expired (and is ended now)."""
        now = self._clock()
        with self._lock:
            ended = self._expired(now)
            session = self._sessions.get(_digest(token)) if token else None
            if session is not None:
                session.last_seen = now
        _close(ended)
        return session

    def end(self, token: str | None) -> bool:
        """Log out: the session is removed and its resource closed; False when there was none."""
        with self._lock:
            session = self._sessions.pop(_digest(token), None) if token else None
        _close([session] if session is not None else [])
        return session is not None

    def expire(self) -> int:
        """End every session idle longer than the timeout; how many ended."""
        with self._lock:
            ended = self._expired(self._clock())
        _close(ended)
        return len(ended)

    def close(self) -> None:
        """End every session (the console is stopping)."""
        with self._lock:
            ended, self._sessions = list(self._sessions.values()), {}
        _close(ended)

    def _expired(self, now: float) -> list[Session]:
        stale = [k for k, s in self._sessions.items() if now - s.last_seen > self.idle_timeout_s]
        return [self._sessions.pop(k) for k in stale]


def _close(sessions: list[Session]) -> None:
    """Close each session's resource outside the lock; one failing does not keep the others open."""
    for session in sessions:
        try:
            session.resource.close()
        except Exception:  # noqa: BLE001 - a pool's sockets failing to close must not fail a request
            pass
