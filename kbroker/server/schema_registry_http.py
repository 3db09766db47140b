"""The schema registry's listener (`schema.registry.listener`): Confluent's REST API over HTTP/1.1
(server/http_server.py's connections), each request handed to the broker's
`SchemaRegistryService` (kbroker/schema_store) and its answer written back.

Bounds: a request head of at most MAX_REQUEST_HEAD bytes, a body of at most
`schema.registry.max.request.bytes` (413 beyond, before it is read), MAX_CONNECTIONS clients at
once, idle connections closed after IDLE_TIMEOUT_S.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import ssl
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import h11
import trio

from kbroker.api.authorization import AclAuthorizerAdapter
from kbroker.errors import InvalidConfigError, StartupError
from kbroker.metadata import registry_urls
from kbroker.security.acl import AclOperation, ResourceType
from kbroker.security.http_basic import parse_basic, verify_password
from kbroker.schema_registry.rest import DEFAULT_CONTENT_TYPE, HttpRequest, HttpResponse, error
from kbroker.schema_store.service import FORWARDING_ERROR, SchemaRegistryService
from kbroker.server.http_server import HttpEndpoint, Request, bind_http_listeners, header
from kbroker.server import client_security
from kbroker.server.client_security import ClientSecurity
from kbroker.server.listeners import ListenerSecurity

logger = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 16 * 1024
MAX_CONNECTIONS = 256
IDLE_TIMEOUT_S = 120.0
KEY = "schema.registry.listener"
FORWARDED_HEADER = b"kbroker-forwarded"
VOUCH_HEADER = b"kbroker-forwarded-principal"
MAX_FORWARDED_ANSWER = 64 * 1024 * 1024
REPUBLISH_INTERVAL_S = 5.0
HANDSHAKE_TIMEOUT_S = 10.0
LOGIN_CACHE_S = 60.0  # a checked login is trusted this long (a changed password is refused after it)
MAX_CACHED_LOGINS = 10_000


async def bind_schema_registry_listeners(host: str, port: int) -> list[trio.SocketListener]:
    return await bind_http_listeners(host, port, KEY)


def registry_security(config, securities: dict[str, ListenerSecurity]) -> ListenerSecurity | None:
    """The security listener's settings, checked against the registry's scheme (https needs the
    listener's TLS, a TLS listener needs https); StartupError, one line, otherwise."""
    try:
        endpoint = config.schema_registry_security_listener
    except InvalidConfigError as exc:
        raise StartupError(str(exc)) from None
    if endpoint is None or endpoint.protocol == "PLAINTEXT":
        if config.schema_registry_tls:
            raise StartupError("schema.registry.listener is https:// but no listener with TLS is named by "
                               "schema.registry.security.listener (its keystore serves the registry)")
        return None
    security = securities[endpoint.name]
    tls = security.ssl_context is not None
    if tls != config.schema_registry_tls:
        scheme = "https" if tls else "http"
        raise StartupError(f"schema.registry.listener must be {scheme}:// with the security of listener "
                           f"{endpoint.name} ({endpoint.protocol})")
    if security.sasl and not any(m in security.mechanisms for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")):
        raise StartupError(f"the schema registry's basic authentication needs PLAIN or SCRAM on listener "
                           f"{endpoint.name}; it has {', '.join(security.mechanisms)}")
    return security


def to_request(request: Request, body: bytes) -> HttpRequest:
    target = request.target.decode("latin-1")
    path, _, query = target.partition("?")
    return HttpRequest(request.method.decode("latin-1").upper(), path, query, body,
                       header(request, b"content-type"), header(request, b"accept"),
                       authorization=header(request, b"authorization"),
                       forwarded=header(request, FORWARDED_HEADER) is not None)


async def forward(url: str, request: HttpRequest, timeout_s: float, max_body: int,
                  tls: ClientSecurity | None = None) -> HttpResponse:
    """`request` sent on to the registry at `url` (http://host:port), marked as forwarded so it is
    not forwarded again; its answer (at most `max_body` bytes) comes back as it is."""
    match = re.fullmatch(r"https?://(?:\[([^\]]+)\]|([^:/]+)):(\d{1,5})/?", url)
    if not match:
        return error(500, FORWARDING_ERROR, f"The registry's leader has no usable URL ({url[:200]})")
    host, port = match.group(1) or match.group(2), int(match.group(3))
    target = request.path + (f"?{request.query}" if request.query else "")
    headers = [(b"host", f"{host}:{port}".encode()), (FORWARDED_HEADER, b"1"),
               (b"content-length", str(len(request.body)).encode())]
    for name, value in ((b"content-type", request.content_type), (b"accept", request.accept),
                        (b"authorization", request.authorization), (VOUCH_HEADER, request.vouch)):
        if value is not None:
            headers.append((name, value.encode("latin-1")))
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_REQUEST_HEAD)
    try:
        with trio.fail_after(timeout_s):
            stream = await trio.open_tcp_stream(host, port)
            if tls is not None:
                stream = await tls.wrap(stream, host)
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
    except (OSError, ssl.SSLError, trio.TooSlowError, trio.BrokenResourceError, h11.ProtocolError) as exc:
        return error(500, FORWARDING_ERROR, f"Error while forwarding the request to the leader at {url}: "
                     f"{str(exc)[:200] or type(exc).__name__}")


@dataclass
class Peer:
    host: str
    principal: str | None  # from a client certificate (mTLS); None: to be authenticated per request


class SchemaRegistryEndpoint(HttpEndpoint):
    """Requests handed to the service, with the principal they come as: the client certificate's
    (an SSL security listener with client authentication), HTTP basic authentication against the
    SASL users (a SASL_* security listener), else User:ANONYMOUS. With an ACL authorizer, the
    principal's ACLs decide (schema_registry/access.py)."""

    def __init__(self, listeners: list[trio.SocketListener], service: SchemaRegistryService, max_body: int, *,
                 security: ListenerSecurity | None = None, authorizer=None) -> None:
        super().__init__("schema registry", listeners, self._respond, max_head=MAX_REQUEST_HEAD, max_body=max_body,
                         max_connections=MAX_CONNECTIONS, idle_timeout_s=IDLE_TIMEOUT_S)
        self.service = service
        self.security = security
        self.authorizer = authorizer
        self._logins: dict[bytes, tuple[str, float]] = {}  # sha256(user, password) -> (user, expiry)

    async def accept(self, stream: trio.abc.Stream) -> tuple[trio.abc.Stream, Peer] | None:
        host = _peer_host(stream)
        security = self.security
        if security is None or security.ssl_context is None:
            return stream, Peer(host, None)
        tls = trio.SSLStream(stream, security.ssl_context, server_side=True)
        try:
            with trio.fail_after(HANDSHAKE_TIMEOUT_S):
                await tls.do_handshake()
        except (trio.TooSlowError, trio.BrokenResourceError, ssl.SSLError, OSError) as exc:
            logger.info("schema registry: TLS handshake with %s failed: %s", host, exc)
            await stream.aclose()
            return None
        principal = None
        if not security.sasl:  # SSL: the certificate's principal (User:ANONYMOUS without one)
            try:
                principal = str(security.new_session(tls.getpeercert(binary_form=True)).principal)
            except ValueError as exc:  # no mapping rule matches: refused as Kafka refuses it
                logger.info("schema registry: client certificate of %s refused: %s", host, exc)
                await tls.aclose()
                return None
        return tls, Peer(host, principal)

    async def _respond(self, request: Request, body: bytes, peer: Peer) -> tuple[int, list, bytes]:
        principal = peer.principal
        vouched = header(request, VOUCH_HEADER)
        if principal is not None and vouched is not None:  # forwarded by a broker, for its client
            if self.authorizer is not None and principal not in self.authorizer.acl_authorizer.super_users:
                return 403, [(b"content-type", DEFAULT_CONTENT_TYPE.encode())], json.dumps(
                    {"error_code": 40301, "message": f"{principal} may not forward requests for other principals "
                     "(only super users may)"}).encode()
            principal = vouched
        if principal is None:
            principal = self._authenticate(header(request, b"authorization"))
            if principal is None:
                return 401, [(b"content-type", DEFAULT_CONTENT_TYPE.encode()),
                             (b"www-authenticate", b'Basic realm="kbroker schema registry"')], \
                    b'{"error_code":401,"message":"Unauthorized"}'
        may = self._may(principal, peer.host) if self.authorizer is not None else None
        forwardable = to_request(request, body)
        if peer.principal is not None:  # a certificate's principal: the writer is told whom it is for
            forwardable = dataclasses.replace(forwardable, vouch=principal)
        answer = await self.service.serve(forwardable, may, principal)
        return answer.status, [(b"content-type", answer.content_type.encode())], answer.body

    def _authenticate(self, authorization: str | None) -> str | None:
        security = self.security
        if security is None or not security.sasl:
            return "User:ANONYMOUS"
        credentials = parse_basic(authorization)
        if credentials is None:
            return None
        user, password = credentials
        key = hashlib.sha256(f"{len(user)}:{user}:{password}".encode()).digest()
        now = time.monotonic()
        cached = self._logins.get(key)
        if cached is not None and cached[1] > now:
            return f"User:{cached[0]}"
        if not verify_password(security.mechanisms, security.sasl_server, user, password):
            return None
        if len(self._logins) >= MAX_CACHED_LOGINS:
            self._logins = {k: v for k, v in self._logins.items() if v[1] > now}
            if len(self._logins) >= MAX_CACHED_LOGINS:
                self._logins.clear()
        self._logins[key] = (user, now + LOGIN_CACHE_S)
        return f"User:{user}"

    def _may(self, principal: str, host: str):
        acls = self.authorizer.acl_authorizer
        audit = self.authorizer.audit

        def may(operation: str, resource_type: str, name: str) -> bool:
            op, rtype = AclOperation[operation], ResourceType[resource_type]
            if acls.authorize(principal, host, op, rtype, name):
                return True
            audit.denied(principal, host, op, rtype, name, "SchemaRegistry")
            return False
        return may


def _peer_host(stream: trio.abc.Stream) -> str:
    try:
        return stream.socket.getpeername()[0]
    except (AttributeError, OSError):
        return ""


def advertised_url(config, port: int) -> str:
    """`schema.registry.advertised.url`, else the listener's URL (a wildcard host: the broker's advertised host)."""
    url = config.get("schema.registry.advertised.url")
    if url:
        return url.rstrip("/")
    host = config.schema_registry_listener[0]
    if host in ("", "0.0.0.0", "::"):
        host = config.advertised_endpoints[0].host if config.advertised_endpoints else "127.0.0.1"
    scheme = "https" if config.schema_registry_tls else "http"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


async def serve_schema_registry(broker, listeners: list[trio.SocketListener], security: ListenerSecurity | None, *,
                                task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """The registry's endpoint, for as long as the broker runs; in a cluster, its URL published for
    the other brokers' registries and theirs looked up to forward requests to the writer."""
    config = broker.config
    timeout_s = config.get("schema.registry.request.timeout.ms") / 1000
    metadata = broker.metadata if broker.cluster else None
    # forwarding to the writer over TLS: the listener's truststore, its keystore as a client certificate
    tls = (client_security.tls_for_listener(config, security.endpoint.name)
           if security is not None and security.ssl_context is not None else None)

    async def forward_to(leader: int, request: HttpRequest) -> HttpResponse:
        url = await registry_urls.url_of(metadata.session, metadata.zk, leader)
        if url is None:
            return error(500, FORWARDING_ERROR, f"Broker {leader} leads the registry's topic but serves no registry")
        return await forward(url, request, timeout_s, MAX_FORWARDED_ANSWER, tls)

    service = SchemaRegistryService(broker, forward=forward_to if metadata is not None else None)
    authorizer = broker.authorizer if isinstance(broker.authorizer, AclAuthorizerAdapter) else None
    endpoint = SchemaRegistryEndpoint(listeners, service, config.get("schema.registry.max.request.bytes"),
                                      security=security, authorizer=authorizer)
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
