"""What a handler gets besides its request: the header, the peer, and the broker's subsystems."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from kbroker.wire.protocol import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    broker: "Broker"
    client_host: str = ""

    @property
    def version(self) -> int:
        return self.header.api_version


@dataclass(frozen=True, slots=True)
class Deferred:
    """A handler's answer that is ready only after a wait (acks=all until the ISR has the batch):
    the connection reads its next request meanwhile and answers in request order, so a client's
    pipelined produce requests are appended while earlier ones replicate."""
    complete: Callable[[], Awaitable[Any]]
