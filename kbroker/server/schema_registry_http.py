"""The schema registry's listener (`schema.registry.listener`): Confluent's REST API over HTTP/1.1
(server/http_server.py's connections), each request handed to the broker's
`SchemaRegistryService` (kbroker/schema_store) and its answer written back.

Bounds: a request head of at most MAX_REQUEST_HEAD bytes, a body of at most
`schema.registry.max.request.bytes` (413 beyond, before it is read), MAX_CONNECTIONS clients at
once, idle connections closed after IDLE_TIMEOUT_S.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import Any

import h11
import trio

from kbroker.metadata import registry_urls
from kbroker.schema_registry.rest import DEFAULT_CONTENT_TYPE, HttpRequest, HttpResponse, error
from kbroker.schema_store.service import FORWARDING_ERROR, SchemaRegistryService
from kbroker.server.http_server import HttpEndpoint, bind_http_listeners, header

logger = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 16 * 1024
MAX_CONNECTIONS = 256
IDLE_TIMEOUT_S = 120.0
KEY = "schema.registry.listener"
FORWARDED_HEADER = b"kbroker-forwarded"
MAX_FORWARDED_ANSWER = 64 * 1024 * 1024
REPUBLISH_INTERVAL_S = 5.0


async def bind_schema_registry_listeners(host: str, port: int) -> list[trio.SocketListener]:
    return await bind_http_listeners(host, port, KEY)


def to_request(request: h11.Request, body: bytes) -> HttpRequest:
    target = request.target.decode("latin-1")
    path, _, query = target.partition("?")
    return HttpRequest(request.method.decode("latin-1").upper(), path, query, body,
                       header(request, b"content-type"), header(request, b"accept"),
                       authorization=header(request, b"authorization"),
                       forwarded=header(request, FORWARDED_HEADER) is not None)


async def forward(url: str, request: HttpRequest, timeout_s: float, max_body: int) -> HttpResponse:
    """`request` sent on to the registry at `url` (http://host:port), marked as forwarded so it is
    not forwarded again; its answer (at most `max_body` bytes) comes back as it is."""
    match = re.fullmatch(r"http://(?:\[([^\]]+)\]|([^:/]+)):(\d{1,5})/?", url)
    if not match:
        return error(500, FORWARDING_ERROR, f"The registry's leader has no usable URL ({url[:200]})")
    host, port = match.group(1) or match.group(2), int(match.group(3))
    target = request.path + (f"?{request.query}" if request.query else "")
    headers = [(b"host", f"{host}:{port}".encode()), (FORWARDED_HEADER, b"1"),
               (b"content-length", str(len(request.body)).encode())]
    for name, value in ((b"content-type", request.content_type), (b"accept", request.accept),
                        (b"authorization", request.authorization)):
        if value is not None:
            headers.append((name, value.encode("latin-1")))
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_REQUEST_HEAD)
    try:
        with trio.fail_after(timeout_s):
            stream = await trio.open_tcp_stream(host, port)
            async with stream:
                data = conn.send(h11.Request(method=request.method, target=target, headers=headers))
                data += conn.send(h11.Data(data=request.body)) + conn.send(h11.EndOfMessage())
                await stream.send_all(data)
                status, content_type, body = 0, DEFAULT_CONTENT_TYPE, bytearray()
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        chunk = await stream.receive_some(64 * 1024)
                        conn.receive_data(chunk)
                        continue
                    if isinstance(event, h11.Response):
                        status = event.status_code
                        for name, value in event.headers:
                            if name == b"content-type":
                                content_type = value.decode("latin-1")
                    elif isinstance(event, h11.Data):
                        body += event.data
                        if len(body) > max_body:
                            return error(500, FORWARDING_ERROR, "The registry's leader answered too much")
                    elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                        break
                return HttpResponse(status, bytes(body), content_type)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError, h11.ProtocolError) as exc:
        return error(500, FORWARDING_ERROR, f"Error while forwarding the request to the leader at {url}: "
                     f"{str(exc)[:200] or type(exc).__name__}")


class SchemaRegistryEndpoint(HttpEndpoint):
    def __init__(self, listeners: list[trio.SocketListener], service: SchemaRegistryService, max_body: int) -> None:
        super().__init__("schema registry", listeners, self._respond, max_head=MAX_REQUEST_HEAD, max_body=max_body,
                         max_connections=MAX_CONNECTIONS, idle_timeout_s=IDLE_TIMEOUT_S)
        self.service = service

    async def _respond(self, request: h11.Request, body: bytes) -> tuple[int, list, bytes]:
        answer = await self.service.serve(to_request(request, body))
        return answer.status, [(b"content-type", answer.content_type.encode())], answer.body


def advertised_url(config, port: int) -> str:
    """`schema.registry.advertised.url`, else the listener's URL (a wildcard host: the broker's advertised host)."""
    url = config.get("schema.registry.advertised.url")
    if url:
        return url.rstrip("/")
    host = config.schema_registry_listener[0]
    if host in ("", "0.0.0.0", "::"):
        host = config.advertised_endpoints[0].host if config.advertised_endpoints else "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def serve_schema_registry(broker, listeners: list[trio.SocketListener], *,
                                task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """The registry's endpoint, for as long as the broker runs; in a cluster, its URL published for
    the other brokers' registries and theirs looked up to forward requests to the writer."""
    config = broker.config
    timeout_s = config.get("schema.registry.request.timeout.ms") / 1000
    metadata = broker.metadata if broker.cluster else None

    async def forward_to(leader: int, request: HttpRequest) -> HttpResponse:
        url = await registry_urls.url_of(metadata.session, metadata.zk, leader)
        if url is None:
            return error(500, FORWARDING_ERROR, f"Broker {leader} leads the registry's topic but serves no registry")
        return await forward(url, request, timeout_s, MAX_FORWARDED_ANSWER)

    service = SchemaRegistryService(broker, forward=forward_to if metadata is not None else None)
    endpoint = SchemaRegistryEndpoint(listeners, service, config.get("schema.registry.max.request.bytes"))
    url = advertised_url(config, endpoint.port)
    logger.info("schema registry served on %s", url)
    async with trio.open_nursery() as nursery:
        if metadata is not None:
            nursery.start_soon(partial(_keep_published, metadata, broker.node_id, url))
        await nursery.start(partial(endpoint.run))
        task_status.started()


async def _keep_published(metadata, node_id: int, url: str) -> None:
    """The URL znode is ephemeral: written again whenever it is gone (a new ZooKeeper session)."""
    while True:
        try:
            if await registry_urls.url_of(metadata.session, metadata.zk, node_id) != url:
                await registry_urls.publish(metadata.session, metadata.zk, node_id, url)
        except Exception as exc:  # ZooKeeper away: try again later
            logger.info("schema registry: could not publish %s yet: %s", url, exc)
        await trio.sleep(REPUBLISH_INTERVAL_S)
