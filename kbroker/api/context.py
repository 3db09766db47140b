"""What a handler gets besides its request: the header, the peer, and the broker's subsystems."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from kbroker.wire.protocol import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker
    from kbroker.security.session import ConnectionSession


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: "Broker"
    client_host: str = ""
    session: "ConnectionSession | None" = None  # the connection's listener, principal and SASL state
    throttle_ms: int = 0  # a handler's own quota throttle (controller mutations: api/throttling.py)
    fetch_context: Any = None  # a Fetch's session context, for its throttled answer (api/throttling.py)

    @property
    def listener(self) -> str | None:
        """The name of the listener the request came in on (None for in-process callers)."""
        return None if self.session is None else self.session.listener

    @property
    def version(self) -> int:
        return self.header.api_version


def listener_addresses(ctx: RequestContext, brokers: Iterable[Any]) -> list[tuple[Any, str, int]]:
    """(broker, host, port) of each broker that has the listener the request came in on, at that
    listener's advertised address: Kafka's rule, so a client is never sent to another listener."""
    out = []
    for b in brokers:
        address = b.address_for(ctx.listener)
        if address is not None:
            out.append((b, address[0], address[1]))
    return out


@dataclass(frozen=True, slots=True)
class Deferred:
    """A handler's answer that is ready only after a wait (acks=all until the ISR has the batch):
    the connection reads its next request meanwhile and answers in request order, so a client's
    pipelined produce requests are appended while earlier ones replicate."""
    complete: Callable[[], Awaitable[Any]]
