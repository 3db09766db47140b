"""Connections from this broker to another: the controller's requests and the followers' fetches.

One request in flight per channel, as on any Kafka connection; a broken connection is reopened on
the next request. Response frames are size-checked before they are buffered. This is socket I/O,
so it lives in server/ with the listener side; the layers above get `open_channel` injected.
"""

from __future__ import annotations

import itertools
import ssl
import struct
from typing import Any

import trio

from kbroker.security.errors import SaslAuthenticationError
from kbroker.server.client_security import PLAINTEXT, ClientSecurity
from kbroker.wire.protocol import ProtocolError, decode_response, encode_request

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 128 * 1024 * 1024


class ChannelError(Exception):
    """The peer could not be reached or broke the connection; the request may be retried."""


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, connect_timeout_s: float = 10.0,
                 security: "ClientSecurity | None" = None) -> None:
        self.security = security or PLAINTEXT
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._stream: trio.SocketStream | None = None
        self._correlation = itertools.count(1)
        self._lock = trio.Lock()

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout_s: float = 30.0) -> Any:
        """Send one request and return its decoded response; ChannelError when the peer fails."""
        async with self._lock:
            try:
                with trio.fail_after(timeout_s):
                    return await self._request(api_key, version, body)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                    ProtocolError, ChannelError, ssl.SSLError) as exc:
                await self.aclose()
                raise ChannelError(f"{self.host}:{self.port}: {type(exc).__name__}: {exc}") from exc

    async def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        if self._stream is None:
            with trio.fail_after(self.connect_timeout_s):
                self._stream = await self.security.wrap(await trio.open_tcp_stream(self.host, self.port), self.host)
                try:
                    await self.security.authenticate(self._exchange)
                except SaslAuthenticationError as exc:
                    raise ChannelError(f"authentication failed: {exc}") from None
        return await self._exchange(api_key, version, body)

    async def _exchange(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        await self._stream.send_all(encode_request(api_key, version, correlation_id, self.client_id, body))
        size = _SIZE.unpack(await self._receive_exactly(4))[0]
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise ChannelError(f"implausible response size {size}")
        frame = await self._receive_exactly(size)
        got, response = decode_response(api_key, version, frame)
        if got != correlation_id:
            raise ChannelError(f"correlation id {got}, expected {correlation_id}")
        return response

    async def _receive_exactly(self, n: int) -> bytearray:
        buf = bytearray()
        assert self._stream is not None
        while len(buf) < n:
            chunk = await self._stream.receive_some(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ChannelError("connection closed by the peer")
            buf += chunk
        return buf

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            with trio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                except (OSError, trio.BrokenResourceError):
                    pass


def open_channel(host: str, port: int, client_id: str) -> BrokerChannel:
    return BrokerChannel(host, port, client_id)
