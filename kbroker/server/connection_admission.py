"""Which connections the server admits: the connection limits as configured, and refused
connections' log lines. Owns applying max.connections, listener.name.<listener>.max.connections,
max.connections.per.ip and max.connections.per.ip.overrides to the server's `ConnectionLimits`
(kbroker/quota/connections.py counts and decides; this module resolves the overrides' hostnames,
as Kafka does when it reads the config, hence server/), and `RefusalLog`, which logs refusals at
most once per interval.
"""

from __future__ import annotations

import logging
import socket
import time

from kbroker.config import BrokerConfig
from kbroker.quota.connections import ConnectionLimits, parse_overrides

__all__ = ["ConnectionLimitsConfig", "RefusalLog"]

logger = logging.getLogger("kbroker.server.server")  # the server's lines keep the server's logger name


class RefusalLog:
    """Refused connections, logged at most once per interval (a flood of refusals is one line)."""

    INTERVAL_S = 10.0

    def __init__(self) -> None:
        self._last = float("-inf")
        self._suppressed = 0

    def refused(self, peer: str, listener: str, reason: str) -> None:
        now = time.monotonic()
        if now - self._last < self.INTERVAL_S:
            self._suppressed += 1
            return
        more = f" ({self._suppressed} more refused since the last line)" if self._suppressed else ""
        logger.warning("refused a connection from %s on listener %s: %s%s", peer, listener, reason, more)
        self._last, self._suppressed = now, 0


class ConnectionLimitsConfig:
    """Applies the configured connection limits to `limits`; the overrides' hosts are resolved
    again only when the overrides change."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._overrides_text: str | None = None  # max.connections.per.ip.overrides as last applied
        self._resolved_hosts: dict[str, list[str]] = {}  # its hosts' addresses

    def apply(self, config: BrokerConfig, listeners: list[str]) -> None:
        """max.connections, listener.name.<listener>.max.connections, max.connections.per.ip and its
        overrides as they are now, for the bound `listeners` (none yet: the configured ones). A
        hostname in the overrides is resolved here, as Kafka resolves it when it reads the config."""
        text = config.get("max.connections.per.ip.overrides") or ""
        if text != self._overrides_text:  # hosts are resolved again only when the overrides change
            self._overrides_text, self._resolved_hosts = text, {}

        def resolve(host: str) -> list[str]:
            if host not in self._resolved_hosts:
                try:
                    self._resolved_hosts[host] = sorted({info[4][0] for info in socket.getaddrinfo(host, None)})
                except OSError as exc:
                    logger.warning("max.connections.per.ip.overrides: %s does not resolve (%s); its limit is not "
                                   "applied", host, exc)
                    self._resolved_hosts[host] = []
            return self._resolved_hosts[host]

        names = listeners or [e.name for e in config.endpoints]
        try:
            overrides = parse_overrides(text)
        except ValueError as exc:  # validated when set: only a hand-edited store gets here
            logger.error("max.connections.per.ip.overrides not applied: %s", exc)
            overrides = {}
        self.limits.configure(
            max_connections=config.get("max.connections"), per_ip=config.get("max.connections.per.ip"),
            overrides=overrides, listener_max={n: config.listener_get(n, "max.connections") for n in names},
            listeners=names, inter_broker_listener=config.inter_broker_listener_name, resolve=resolve)
