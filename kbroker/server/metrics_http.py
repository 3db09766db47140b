"""The Prometheus endpoint on `metrics.listener`: GET (or HEAD) /metrics over HTTP/1.1, keep-alive,
(server/http_server.py). Socket I/O, so it lives in server/. A scrape takes the broker's metrics in two
steps (kbroker/metrics/collector): `collect()` on the event loop, so it reads the broker's state
between two requests, never in the middle of one; `encode()` (the text format, the larger part
with many partitions) in a worker thread, so the event loop keeps serving meanwhile.

Connections are server/http_server.py's, with these bounds: a request head of at most
MAX_REQUEST_HEAD bytes (431 beyond), a request body of at most MAX_REQUEST_BODY (413),
MAX_CONNECTIONS scrapers at once, an idle connection closed after IDLE_TIMEOUT_S; and one encoding
at a time.
"""

from __future__ import annotations

from typing import Any, Callable

import trio

from kbroker.server.http_server import HttpEndpoint, Request, bind_http_listeners

MAX_REQUEST_HEAD = 16 * 1024
MAX_REQUEST_BODY = 64 * 1024
MAX_CONNECTIONS = 32
IDLE_TIMEOUT_S = 120.0
METRICS_PATH = b"/metrics"


async def bind_metrics_listeners(host: str, port: int) -> list[trio.SocketListener]:
    """Bound at start-up with the Kafka listeners: a port in use is a start-up error."""
    return await bind_http_listeners(host, port, "metrics.listener")


def answer(request: Request) -> tuple[int, list, bytes | None]:
    """(status, headers, body) for one request; body None: the metrics (GET/HEAD /metrics, any query)."""
    path = request.target.split(b"?", 1)[0]
    if path != METRICS_PATH:
        return 404, [(b"content-type", b"text/plain; charset=utf-8")], b"Not found: metrics are at /metrics\n"
    if request.method not in (b"GET", b"HEAD"):
        return 405, [(b"allow", b"GET, HEAD"), (b"content-type", b"text/plain; charset=utf-8")], \
            b"Method not allowed\n"
    return 200, [], None


class MetricsEndpoint(HttpEndpoint):
    def __init__(self, listeners: list[trio.SocketListener], collect: Callable[[], Any], encode: Callable[[Any], bytes],
                 content_type: str) -> None:
        super().__init__("metrics endpoint", listeners, self._respond, max_head=MAX_REQUEST_HEAD,
                         max_body=MAX_REQUEST_BODY, max_connections=MAX_CONNECTIONS, idle_timeout_s=IDLE_TIMEOUT_S)
        self.collect = collect
        self.encode = encode
        self.content_type = content_type
        self._encoding = trio.CapacityLimiter(1)

    async def _respond(self, request: Request, _body: bytes, _info: Any) -> tuple[int, list, bytes]:
        status, headers, body = answer(request)
        if body is None:
            headers = [(b"content-type", self.content_type.encode())]
            body = await trio.to_thread.run_sync(self.encode, self.collect(), limiter=self._encoding)
        return status, headers, body
