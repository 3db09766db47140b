"""The audit of authorization denials, rate-limited, and the authorizer's decision counts. Pure: the
clock and where a line goes are injected (the broker: time.monotonic and the `kbroker.authorizer`
logger at INFO, api/authorization.py).

A denied request is logged in Kafka's AclAuthorizer words (its `kafka.authorizer.logger` line):

    Principal = User:alice is Denied Operation = Write from host = 127.0.0.1 on resource =
    Topic:LITERAL:orders for request = Produce with resourceRefCount = 1

at most once per principal, resource and operation per interval (a minute): a client retrying a
refused request in a loop, or a consumer polling a topic it may not read, writes one line a minute,
not one per request. The next line of that key after the interval says how many denials were not
logged meanwhile (`(12 more denials of it not logged in the last 60 s)`). At most `max_keys`
keys are remembered; past that (a principal probing thousands of names within a minute) new keys
are counted and summed up in one line per interval instead of logged one by one, so the log never
grows faster than `max_keys` lines a minute, and memory stays bounded.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable

from kbroker.security.acl import AclOperation, PatternType, ResourceType, name_of

__all__ = ["DenialAudit", "DecisionCounts", "denial_line", "DEFAULT_INTERVAL_S", "DEFAULT_MAX_KEYS"]

DEFAULT_INTERVAL_S = 60.0
DEFAULT_MAX_KEYS = 10_000


def denial_line(principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str,
                api: str) -> str:
    """Kafka's AclAuthorizer.logAuditMessage for a denial (the resource as
    `<Type>:<PatternType>:<name>`, a request being about a literal resource)."""
    return (f"Principal = {principal} is Denied Operation = {name_of(operation)} from host = {host} on resource = "
            f"{name_of(resource_type)}:{PatternType.LITERAL.name}:{name} for request = {api} with resourceRefCount = 1")


class DenialAudit:
    """`denied(...)` for every denial; `emit(line)` is called for the ones worth a line."""

    def __init__(self, emit: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 interval_s: float = DEFAULT_INTERVAL_S, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        self.emit = emit
        self.clock = clock
        self.interval_s = interval_s
        self.max_keys = max_keys
        # key -> [when its last line was written, denials since not logged]; oldest line first
        self._seen: OrderedDict[tuple, list] = OrderedDict()
        self._overflow = 0  # denials of keys not remembered (the table was full) since the last summary
        self._overflow_logged_at: float | None = None

    def denied(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str,
               api: str) -> str | None:
        """Note one denial; the line written for it, or None when it was not worth one."""
        now = self.clock()
        key = (principal, resource_type, name, operation)
        seen = self._seen
        entry = seen.get(key)
        if entry is not None:
            if now - entry[0] < self.interval_s:
                entry[1] += 1
                return None
            del seen[key]
            suppressed = entry[1]
        else:
            suppressed = 0
            if len(seen) >= self.max_keys:
                self._forget_expired(now)
                if len(seen) >= self.max_keys:
                    return self._overflowed(now)
        seen[key] = [now, 0]
        line = denial_line(principal, host, operation, resource_type, name, api)
        if suppressed:
            line += f" ({suppressed} more denials of it not logged in the last {self.interval_s:g} s)"
        self.emit(line)
        return line

    def _forget_expired(self, now: float) -> None:
        seen = self._seen
        while seen:
            key, entry = next(iter(seen.items()))
            if now - entry[0] < self.interval_s:
                break
            del seen[key]

    def _overflowed(self, now: float) -> str | None:
        self._overflow += 1
        if self._overflow_logged_at is not None and now - self._overflow_logged_at < self.interval_s:
            return None
        line = (f"{self._overflow} denials of resources beyond the {self.max_keys:,} denied in the last "
                f"{self.interval_s:g} s not logged one by one")
        self._overflow_logged_at = now
        self._overflow = 0
        self.emit(line)
        return line

    def __len__(self) -> int:
        return len(self._seen)


class DecisionCounts:
    """The authorizer's decisions since start (KIP-608's authorization-allowed / -denied; requests
    are their sum)."""

    __slots__ = ("allowed", "denied")

    def __init__(self) -> None:
        self.allowed = 0
        self.denied = 0

    @property
    def requests(self) -> int:
        return self.allowed + self.denied
