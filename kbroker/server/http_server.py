"""A small HTTP/1.1 server for the broker's HTTP listeners (metrics.listener,
schema.registry.listener): keep-alive connections parsed by h11 on trio, each request read whole
(head and body, both bounded) and handed to an async `respond(request, body)` that returns
(status, headers, body).

Everything is bounded: a request head of at most `max_head` bytes (431 beyond), a body of at most
`max_body` (413), `max_connections` at once (more are closed at accept), an idle connection closed
after `idle_timeout_s`. Anything malformed gets h11's 4xx and a closed connection; an exception in
`respond` a 500 (logged), never the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import h11
import trio

from kbroker.errors import StartupError

logger = logging.getLogger(__name__)

RECEIVE_SIZE = 64 * 1024

#: (request, body, what `accept` learned of the connection) -> (status, headers, body)
Respond = Callable[[h11.Request, bytes, Any], Awaitable[tuple[int, list, bytes]]]


async def bind_http_listeners(host: str, port: int, key: str) -> list[trio.SocketListener]:
    """Bound at start-up with the Kafka listeners: a port in use is a start-up error."""
    try:
        return await trio.open_tcp_listeners(port, host=host or None)
    except OSError as exc:
        raise StartupError(f"{key} failed to bind to {host or '0.0.0.0'}:{port}: {exc.strerror or exc}.") from None


def header(request: h11.Request, name: bytes) -> str | None:
    """A request header's value (the last of repeated ones), latin-1 decoded; None when absent."""
    found = None
    for key, value in request.headers:
        if key == name:
            found = value
    return None if found is None else found.decode("latin-1")


class HttpEndpoint:
    def __init__(self, name: str, listeners: list[trio.SocketListener], respond: Respond, *,
                 max_head: int = 16 * 1024, max_body: int = 64 * 1024, max_connections: int = 32,
                 idle_timeout_s: float = 120.0) -> None:
        self.name = name
        self.listeners = listeners
        self.respond = respond
        self.max_head = max_head
        self.max_body = max_body
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.open_connections = 0

    @property
    def port(self) -> int:
        return self.listeners[0].socket.getsockname()[1]

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self.serve_connection, self.listeners)
            task_status.started(self)

    async def serve_connection(self, stream: trio.abc.Stream) -> None:
        """One client's connection: requests answered in turn until it closes, idles or errs."""
        if self.open_connections >= self.max_connections:
            await stream.aclose()
            return
        self.open_connections += 1
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_head)
        try:
            accepted = await self.accept(stream)
            if accepted is None:
                return
            stream, info = accepted
            await self._serve(conn, stream, info)
        except h11.RemoteProtocolError as exc:
            await self._refuse(conn, stream, exc.error_status_hint, str(exc))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # a bug costs one request, never the broker
            logger.exception("%s: internal error", self.name)
            await self._refuse(conn, stream, 500, "internal error")
        finally:
            self.open_connections -= 1
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def accept(self, stream: trio.abc.Stream) -> tuple[trio.abc.Stream, Any] | None:
        """A new connection before its first request (a subclass may wrap it in TLS and learn the
        peer); None closes it."""
        return stream, None

    async def _serve(self, conn: h11.Connection, stream: trio.abc.Stream, info: Any) -> None:
        while True:
            request = await self._next_event(conn, stream)
            if not isinstance(request, h11.Request):
                return  # the peer closed (or idled) between requests
            declared = header(request, b"content-length")
            if declared is not None and declared.strip().isdigit() and int(declared) > self.max_body:
                await self._refuse(conn, stream, 413, "request body too large")
                return
            event, chunks, size = request, [], 0
            while not isinstance(event, h11.EndOfMessage):
                event = await self._next_event(conn, stream)
                if event is None or isinstance(event, h11.ConnectionClosed):
                    return
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > self.max_body:
                        await self._refuse(conn, stream, 413, "request body too large")
                        return
                    chunks.append(event.data)
            status, headers, body = await self.respond(request, b"".join(chunks), info)
            if request.method == b"HEAD":
                headers, body = headers + [(b"content-length", str(len(body)).encode())], b""
            await self._send(conn, stream, status, headers, body)
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()

    async def _next_event(self, conn: h11.Connection, stream: trio.abc.Stream):
        """The next h11 event, None after idle_timeout_s without one."""
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            with trio.move_on_after(self.idle_timeout_s):
                conn.receive_data(await stream.receive_some(RECEIVE_SIZE))
                continue
            return None

    @staticmethod
    async def _send(conn: h11.Connection, stream: trio.abc.Stream, status: int, headers: list, body: bytes) -> None:
        if not any(name == b"content-length" for name, _ in headers):
            headers = headers + [(b"content-length", str(len(body)).encode())]
        data = conn.send(h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase.encode()))
        if body:
            data += conn.send(h11.Data(data=body))
        data += conn.send(h11.EndOfMessage())
        await stream.send_all(data)

    async def _refuse(self, conn: h11.Connection, stream: trio.abc.Stream, status: int, why: str) -> None:
        """An error answer when the response has not started (then the connection closes)."""
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        logger.info("%s: answering %d (%s)", self.name, status, why)
        try:
            await self._send(conn, stream, status, [(b"connection", b"close"),
                                                    (b"content-type", b"text/plain; charset=utf-8")],
                             f"{why}\n".encode())
        except (h11.LocalProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
