"""The Prometheus endpoint on `metrics.listener`: GET (or HEAD) /metrics over HTTP/1.1, keep-alive,
parsed by h11. Socket I/O, so it lives in server/. A scrape takes the broker's metrics in two
steps (kbroker/metrics/collector): `collect()` on the event loop, so it reads the broker's state
between two requests, never in the middle of one; `encode()` (the text format, the larger part
with many partitions) in a worker thread, so the event loop keeps serving meanwhile.

Everything is bounded: a request head of at most MAX_REQUEST_HEAD bytes (431 beyond), a request
body of at most MAX_REQUEST_BODY (413), MAX_CONNECTIONS scrapers at once, one encoding at a time,
an idle connection closed after IDLE_TIMEOUT_S. Anything malformed gets h11's 4xx and a closed
connection.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any, Callable

import h11
import trio

from kbroker.errors import StartupError

logger = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 16 * 1024
MAX_REQUEST_BODY = 64 * 1024
MAX_CONNECTIONS = 32
IDLE_TIMEOUT_S = 120.0
RECEIVE_SIZE = 16 * 1024
METRICS_PATH = b"/metrics"


async def bind_metrics_listeners(host: str, port: int) -> list[trio.SocketListener]:
    """Bound at start-up with the Kafka listeners: a port in use is a start-up error."""
    try:
        return await trio.open_tcp_listeners(port, host=host or None)
    except OSError as exc:
        raise StartupError(f"metrics.listener failed to bind to {host or '0.0.0.0'}:{port}: "
                           f"{exc.strerror or exc}.") from None


def answer(request: h11.Request) -> tuple[int, list, bytes | None]:
    """(status, headers, body) for one request; body None: the metrics (GET/HEAD /metrics, any query)."""
    path = request.target.split(b"?", 1)[0]
    if path != METRICS_PATH:
        return 404, [(b"content-type", b"text/plain; charset=utf-8")], b"Not found: metrics are at /metrics\n"
    if request.method not in (b"GET", b"HEAD"):
        return 405, [(b"allow", b"GET, HEAD"), (b"content-type", b"text/plain; charset=utf-8")], \
            b"Method not allowed\n"
    return 200, [], None


class MetricsEndpoint:
    def __init__(self, listeners: list[trio.SocketListener], collect: Callable[[], Any], encode: Callable[[Any], bytes],
                 content_type: str) -> None:
        self.listeners = listeners
        self.collect = collect
        self.encode = encode
        self.content_type = content_type
        self.open_connections = 0
        self._encoding = trio.CapacityLimiter(1)

    @property
    def port(self) -> int:
        return self.listeners[0].socket.getsockname()[1]

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self.serve_connection, self.listeners)
            task_status.started(self)

    async def serve_connection(self, stream: trio.abc.Stream) -> None:
        """One scraper's connection: requests answered in turn until it closes, idles or errs."""
        if self.open_connections >= MAX_CONNECTIONS:
            await stream.aclose()
            return
        self.open_connections += 1
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
        try:
            await self._serve(conn, stream)
        except h11.RemoteProtocolError as exc:
            await self._refuse(conn, stream, exc.error_status_hint, str(exc))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # a bug costs one scrape, never the broker
            logger.exception("metrics endpoint: internal error")
            await self._refuse(conn, stream, 500, "internal error")
        finally:
            self.open_connections -= 1
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _serve(self, conn: h11.Connection, stream: trio.abc.Stream) -> None:
        while True:
            request = await self._next_event(conn, stream)
            if not isinstance(request, h11.Request):
                return  # the peer closed (or idled) between requests
            event, body_size = request, 0
            while not isinstance(event, h11.EndOfMessage):  # a GET has no body; a bounded one is read
                event = await self._next_event(conn, stream)
                if event is None or isinstance(event, h11.ConnectionClosed):
                    return
                if isinstance(event, h11.Data):
                    body_size += len(event.data)
                    if body_size > MAX_REQUEST_BODY:
                        await self._refuse(conn, stream, 413, "request body too large")
                        return
            status, headers, body = answer(request)
            if body is None:
                headers = [(b"content-type", self.content_type.encode())]
                body = await trio.to_thread.run_sync(self.encode, self.collect(), limiter=self._encoding)
            if request.method == b"HEAD":
                headers, body = headers + [(b"content-length", str(len(body)).encode())], b""
            await self._send(conn, stream, status, headers, body)
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()

    @staticmethod
    async def _next_event(conn: h11.Connection, stream: trio.abc.Stream):
        """The next h11 event, None after IDLE_TIMEOUT_S without one."""
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            with trio.move_on_after(IDLE_TIMEOUT_S):
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
        logger.info("metrics endpoint: answering %d (%s)", status, why)
        try:
            await self._send(conn, stream, status, [(b"connection", b"close"),
                                                    (b"content-type", b"text/plain; charset=utf-8")],
                             f"{why}\n".encode())
        except (h11.LocalProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
