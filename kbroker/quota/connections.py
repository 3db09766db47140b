"""Connection limits, as Kafka's ConnectionQuotas counts them: `max.connections` (the broker's
total), `listener.name.<listener>.max.connections` (one listener's), `max.connections.per.ip` and
`max.connections.per.ip.overrides` (`host:count,...`, hostnames or IPs).

The inter-broker listener is not held to the broker-wide limit while other listeners exist
(Kafka's protectedListener), so client connections never lock the brokers out of each other; it
keeps its own listener limit. Kafka makes a connection over a listener's or the broker's limit wait
in the accept backlog until a slot frees; kbroker refuses it at once, as it does over a per-IP
limit (where Kafka refuses too). Pure: the server asks `admit` for each accepted connection and
calls `release` when it closes.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

__all__ = ["ConnectionLimits", "parse_overrides", "normalize_ip", "OVERRIDES_KEY", "PER_IP_KEY"]

PER_IP_KEY = "max.connections.per.ip"
OVERRIDES_KEY = "max.connections.per.ip.overrides"
INT_MAX = 2**31 - 1
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Kafka's Utils.VALID_HOST_CHARACTERS


def parse_overrides(text: str) -> dict[str, int]:
    """`host:count,...` as Kafka reads it (Csv.parseCsvMap: split at the last ':' of each pair, so
    IPv6 addresses work; then every host checked against Utils.validHostPattern, every count an
    int). ValueError with Kafka's words."""
    out: dict[str, int] = {}
    if not text:
        return out
    for pair in re.split(r"\s*,\s*", text):
        host, sep, count = pair.rpartition(":")
        if not sep:
            raise ValueError(f"Error parsing configuration property '{OVERRIDES_KEY}': "
                             f"String index out of range: -1 in {pair!r}")
        host, count = host.strip(), count.strip()
        try:
            out[host] = int(count)
        except ValueError:
            raise ValueError(f"Error parsing configuration property '{OVERRIDES_KEY}': "
                             f"For input string: \"{count}\"") from None
    invalid = [h for h in out if not _VALID_HOST.fullmatch(h)]
    if invalid:
        raise ValueError(f"{OVERRIDES_KEY} contains invalid addresses : {','.join(invalid)}")
    return out


def normalize_ip(address: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 as IPv4, IPv6 compressed; other text as given."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


@dataclass
class ConnectionLimits:
    """The counts and limits; `configure` again after a dynamic change (open connections stay)."""

    max_connections: int = INT_MAX
    per_ip: int = INT_MAX
    ip_overrides: dict[str, int] = field(default_factory=dict)  # normalized address -> limit
    listener_max: dict[str, int] = field(default_factory=dict)  # listener name -> limit
    inter_broker_listener: str | None = None
    total: int = 0
    by_ip: dict[str, int] = field(default_factory=dict)
    by_listener: dict[str, int] = field(default_factory=dict)

    def configure(self, *, max_connections: int, per_ip: int, overrides: Mapping[str, int],
                  listener_max: Mapping[str, int], listeners: Iterable[str], inter_broker_listener: str | None,
                  resolve: Callable[[str], list[str]] = lambda host: [host]) -> None:
        """The limits now in force. `overrides` are by host as configured; `resolve` gives a host's
        addresses (Kafka's InetAddress.getByName; an IP resolves to itself)."""
        self.max_connections = max_connections
        self.per_ip = per_ip
        resolved: dict[str, int] = {}
        for host, count in overrides.items():
            for address in resolve(host):
                resolved[normalize_ip(address)] = count
        self.ip_overrides = resolved
        self.listener_max = {name.upper(): limit for name, limit in listener_max.items()}
        for name in listeners:
            self.by_listener.setdefault(name.upper(), 0)
        self.inter_broker_listener = inter_broker_listener.upper() if inter_broker_listener else None

    def ip_limit(self, ip: str) -> int:
        return self.ip_overrides.get(ip, self.per_ip)

    def _protected(self, listener: str) -> bool:
        return listener == self.inter_broker_listener and len(self.by_listener) > 1

    def admit(self, listener: str, ip: str) -> str | None:
        """Count a new connection in, or say (as a log line's words) why it is refused."""
        listener = listener.upper()
        ip = normalize_ip(ip)
        in_listener = self.by_listener.get(listener, 0)
        limit = self.listener_max.get(listener, INT_MAX)
        if in_listener >= limit:
            return f"listener {listener} already has its maximum of {limit} connections"
        if not self._protected(listener) and self.total >= self.max_connections:
            return f"the broker already has its maximum of {self.max_connections} connections (max.connections)"
        count, limit = self.by_ip.get(ip, 0), self.ip_limit(ip)
        if count >= limit:  # Kafka's TooManyConnectionsException words
            return f"address already has the configured maximum of {limit} connections"
        self.by_ip[ip] = count + 1
        self.by_listener[listener] = in_listener + 1
        self.total += 1
        return None

    def release(self, listener: str, ip: str) -> None:
        listener = listener.upper()
        ip = normalize_ip(ip)
        count = self.by_ip.get(ip, 0)
        if count <= 1:
            self.by_ip.pop(ip, None)
        else:
            self.by_ip[ip] = count - 1
        if self.by_listener.get(listener, 0) > 0:
            self.by_listener[listener] -= 1
        self.total = max(0, self.total - 1)
