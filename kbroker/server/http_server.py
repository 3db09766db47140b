"""A small HTTP/1.1 server for the broker's HTTP listeners (metrics.listener,
schema.registry.listener): keep-alive connections on trio, each request read whole (head and body,
both bounded) and handed to an async `respond(request, body, info)` that returns (status, headers,
body).

The request parser is this module's own, written for the hot path of a schema registry (a keep-alive
GET costs tens of microseconds here, h11 cost about three times that): the request line, header
fields (`name: value`, no obsolete line folding), `Content-Length` bodies; `Transfer-Encoding` is
refused (501: the clients of these endpoints send lengths), `Expect: 100-continue` is answered.
Everything is bounded: a request head of at most `max_head` bytes (431 beyond), a body of at most
`max_body` (413, answered before it is read), `max_connections` at once (more are closed at
accept), an idle connection closed after `idle_timeout_s`. Anything malformed gets a 4xx and a
closed connection; an exception in `respond` a 500 (logged), never the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import trio

from kbroker.errors import StartupError

logger = logging.getLogger(__name__)

RECEIVE_SIZE = 64 * 1024
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@dataclass(slots=True)
class Request:
    """A request's head: method and target as sent, header names lower-cased, values stripped."""

    method: bytes
    target: bytes
    headers: list[tuple[bytes, bytes]]
    http_version: bytes = b"1.1"


class BadRequest(Exception):
    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


#: (request, body, what `accept` learned of the connection) -> (status, headers, body)
Respond = Callable[[Request, bytes, Any], Awaitable[tuple[int, list, bytes]]]


async def bind_http_listeners(host: str, port: int, key: str) -> list[trio.SocketListener]:
    """Bound at start-up with the Kafka listeners: a port in use is a start-up error."""
    try:
        return await trio.open_tcp_listeners(port, host=host or None)
    except OSError as exc:
        raise StartupError(f"{key} failed to bind to {host or '0.0.0.0'}:{port}: {exc.strerror or exc}.") from None


def header(request: Request, name: bytes) -> str | None:
    """A request header's value (the last of repeated ones), latin-1 decoded; None when absent."""
    found = None
    for key, value in request.headers:
        if key == name:
            found = value
    return None if found is None else found.decode("latin-1")


def parse_head(head: bytes) -> Request:
    """The request line and header fields (without the blank line); BadRequest otherwise."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[0] or not parts[1] or not set(parts[0]) <= _TOKEN:
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise BadRequest(505 if version.startswith(b"HTTP/") else 400, "unsupported HTTP version")
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or not set(name) <= _TOKEN:  # also obs-fold lines, which start with a space
            raise BadRequest(400, "malformed header field")
        value = value.strip(b" \t")
        if b"\r" in value or b"\n" in value or b"\0" in value:
            raise BadRequest(400, "malformed header value")
        headers.append((name.lower(), value))
    if not target.startswith(b"/") and target != b"*":
        raise BadRequest(400, "the request target must be a path")
    return Request(method, target, headers, version[5:])


def body_length(request: Request, max_body: int) -> int:
    if header(request, b"transfer-encoding") is not None:
        raise BadRequest(501, "Transfer-Encoding is not served: send Content-Length")
    lengths = {value for name, value in request.headers if name == b"content-length"}
    if not lengths:
        return 0
    if len(lengths) > 1:
        raise BadRequest(400, "conflicting Content-Length")
    text = lengths.pop()
    if not text.isdigit() or len(text) > 18:
        raise BadRequest(400, "malformed Content-Length")
    length = int(text)
    if length > max_body:
        raise BadRequest(413, "request body too large")
    return length


def keep_alive(request: Request) -> bool:
    connection = (header(request, b"connection") or "").lower()
    if request.http_version == b"1.0":
        return "keep-alive" in connection
    return "close" not in connection


def response_bytes(status: int, headers: list, body: bytes, *, close: bool, head_only: bool = False) -> bytes:
    out = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))]
    has_length = False
    for name, value in headers:
        if name == b"content-length":
            has_length = True
        out.append(name + b": " + value + b"\r\n")
    if not has_length:
        out.append(b"content-length: %d\r\n" % len(body))
    if close:
        out.append(b"connection: close\r\n")
    out.append(b"\r\n")
    if not head_only:
        out.append(body)
    return b"".join(out)


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

    async def accept(self, stream: trio.abc.Stream) -> tuple[trio.abc.Stream, Any] | None:
        """A new connection before its first request (a subclass may wrap it in TLS and learn the
        peer); None closes it."""
        return stream, None

    async def serve_connection(self, stream: trio.abc.Stream) -> None:
        """One client's connection: requests answered in turn until it closes, idles or errs."""
        if self.open_connections >= self.max_connections:
            await stream.aclose()
            return
        self.open_connections += 1
        answered = [False]  # whether the current request's answer has started
        try:
            accepted = await self.accept(stream)
            if accepted is None:
                return
            stream, info = accepted
            await self._serve(stream, info, answered)
        except BadRequest as exc:
            if not answered[0]:
                await self._refuse(stream, exc.status, str(exc))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # a bug costs one request, never the broker
            logger.exception("%s: internal error", self.name)
            if not answered[0]:
                await self._refuse(stream, 500, "internal error")
        finally:
            self.open_connections -= 1
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _serve(self, stream: trio.abc.Stream, info: Any, answered: list[bool]) -> None:
        buf = bytearray()
        while True:
            answered[0] = False
            scanned = 0
            while True:  # the head
                end = buf.find(b"\r\n\r\n", max(0, scanned - 3))
                if end >= 0:
                    break
                scanned = len(buf)
                if scanned > self.max_head:
                    raise BadRequest(431, "request head too large")
                data = await self._receive(stream)
                if not data:
                    if buf:
                        raise BadRequest(400, "incomplete request")
                    return  # the peer closed (or idled) between requests
                buf += data
            if end > self.max_head:
                raise BadRequest(431, "request head too large")
            request = parse_head(bytes(buf[:end]))
            del buf[:end + 4]
            length = body_length(request, self.max_body)
            if length > len(buf) and (header(request, b"expect") or "").lower() == "100-continue":
                await stream.send_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            while len(buf) < length:
                data = await self._receive(stream)
                if not data:
                    return
                buf += data
            body = bytes(buf[:length])
            del buf[:length]
            status, headers, answer = await self.respond(request, body, info)
            close = not keep_alive(request)
            answered[0] = True
            await stream.send_all(response_bytes(status, headers, answer, close=close,
                                                 head_only=request.method == b"HEAD"))
            if close:
                return

    async def _receive(self, stream: trio.abc.Stream) -> bytes:
        """The next bytes; b"" at the end of the stream or after idle_timeout_s without any."""
        with trio.move_on_after(self.idle_timeout_s):
            return await stream.receive_some(RECEIVE_SIZE)
        return b""

    async def _refuse(self, stream: trio.abc.Stream, status: int, why: str) -> None:
        """An error answer when the response has not started (then the connection closes)."""
        logger.info("%s: answering %d (%s)", self.name, status, why)
        try:
            await stream.send_all(response_bytes(status, [(b"content-type", b"text/plain; charset=utf-8")],
                                                 f"{why}\n".encode(), close=True))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
