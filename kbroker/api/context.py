"""What a handler gets besides its request: the header, the peer, and the broker's subsystems."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
