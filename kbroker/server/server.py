"""The trio server: listeners, one task per connection, graceful drain. The only socket I/O.

Each connection handles one request at a time and answers in request order, as Kafka's clients
expect; an answer that waits for replication (acks=all) is Deferred to the connection's writer
task, so the next requests are read and appended meanwhile. On shutdown the listeners close first, idle connections are closed, busy ones
finish their current request (bounded by shutdown.timeout.ms), then storage is flushed.
Beside it: side_listeners.py (the metrics and schema registry HTTP listeners), connection_admission.py
(the connection limits as configured, refused connections' log lines).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
from functools import partial
import socket
import time
from typing import Any

import trio

from kbroker.api.context import Deferred
from kbroker.api.dispatch import handle_frame
from kbroker.broker import Broker, startup_phase
from kbroker.config import BrokerConfig
from kbroker.errors import InvalidConfigError, StartupError
from kbroker.log.dir_lock import LogDirLock
from kbroker.quota.connections import ConnectionLimits
from kbroker.security.session import ConnectionSession, Phase
from kbroker.server import client_security, listeners as listener_security
from kbroker.server.connection_admission import ConnectionLimitsConfig, RefusalLog
from kbroker.server.listeners import ListenerSecurity
from kbroker.server.side_listeners import SideListeners
from kbroker.server.tls import server_handshake, tls_recv_into, tls_send_all, tls_send_response
from kbroker.wire.framing import FrameDecoder, FrameError
from kbroker.wire.protocol import ProtocolError

logger = logging.getLogger(__name__)

RECEIVE_CHUNK = 256 * 1024


LARGE_FRAME = 64 * 1024  # frames larger than this are received straight into their own buffer
REUSE_LIMIT = 8 * 1024 * 1024  # the largest frame buffer a connection keeps between requests
SENDFILE_MIN = 64 * 1024  # smaller record data is read and sent with the header in one write
# Pipelined requests already buffered are handled in turns of up to this long before the connection
# yields: a producer thousands of requests behind (one partition each, as librdkafka sends them)
# would otherwise wait a whole round of every other task per request, and each round's follower
# fetches would carry one partition's news instead of a turn's.
PIPELINE_SLICE_S = 0.002
COALESCE_MAX = 64 * 1024  # answers to pipelined requests are sent together up to this many bytes
GC_FULL_COLLECTION_THRESHOLD = 100  # gen-1 collections between full ones (Python: 10); see serve()


async def _recv_into(sock, view: memoryview, idle_timeout: float = float("inf")) -> int:
    """recv_into straight on the descriptor; trio only when the socket is dry. Bytes received,
    0 when the peer closed or nothing arrived for `idle_timeout` seconds.

    trio's own socket methods yield to the scheduler twice per call; under load the data is
    usually there already, and a request pays for one yield (after its response) instead.
    """
    while True:
        try:
            return os.readv(sock.fileno(), (view,))
        except BlockingIOError:
            pass
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        with trio.move_on_after(idle_timeout):
            await trio.lowlevel.wait_readable(sock)
            continue
        return 0


async def _send_all(sock, data) -> None:
    view = memoryview(data)
    while view:
        try:
            sent = os.write(sock.fileno(), view)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        view = view[sent:]


async def _receive_rest(sock, body: bytearray | memoryview, have: int, recv_into=_recv_into):
    """Fill `body` from the socket; None if the peer closed first."""
    view = memoryview(body)
    while have < len(body):
        got = await recv_into(sock, view[have:])
        if not got:
            return None
        have += got
    return body


async def send_response(sock, response: bytes | list) -> None:
    """Send a response: bytes, or chunks of bytes and file ranges (a Fetch), the large ranges with
    sendfile so record data never passes through Python."""
    if isinstance(response, bytes):
        await _send_all(sock, response)
        return
    small = sum(c.size for c in response if not isinstance(c, bytes)) < SENDFILE_MIN
    pending = bytearray()
    for chunk in response:
        if isinstance(chunk, bytes):
            pending += chunk
        elif small:
            data = chunk.read()
            if len(data) != chunk.size:
                raise trio.BrokenResourceError("a file range shrank before it was sent")
            pending += data
        else:
            if pending:
                await _send_all(sock, pending)
                pending = bytearray()
            await _sendfile(sock, chunk)
    if pending:
        await _send_all(sock, pending)


async def _sendfile(sock, file_range) -> None:
    offset, remaining = file_range.position, file_range.size
    while remaining:
        try:
            sent = os.sendfile(sock.fileno(), file_range.fd, offset, remaining)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        if sent == 0:  # the file shrank under us (truncation): this frame cannot be completed
            raise trio.BrokenResourceError("a file range shrank during sendfile")
        offset += sent
        remaining -= sent


MAX_DEFERRED = 16  # answers a connection may owe before it stops reading (acks=all waits)


class _Connection:
    __slots__ = ("scope", "handling", "owed", "to_writer", "muted_until")

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.handling = False
        self.owed = 0  # answers queued for the writer task, not yet sent
        self.to_writer: trio.MemorySendChannel | None = None
        self.muted_until = 0.0  # trio time before which no request is read (a client quota's throttle)

    @property
    def busy(self) -> bool:
        return self.handling or self.owed > 0

    def mute(self, throttle_ms: int) -> None:
        """KIP-219: a throttled client's next requests are not read for `throttle_ms`."""
        self.muted_until = max(self.muted_until, trio.current_time() + throttle_ms / 1000)


class KafkaServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker: Broker | None = None
        self.cluster_node = None  # ClusterNode, in a cluster
        self.listeners: list[trio.SocketListener] = []
        self.bound: list[tuple[str, list[trio.SocketListener]]] = []  # (listener name, its sockets)
        self.securities: dict[str, ListenerSecurity] = {}  # rebuilt when a dynamic config changes them
        self.side_listeners = SideListeners(config)  # metrics.listener, schema.registry.listener
        self._connections: set[_Connection] = set()
        self.connection_limits = ConnectionLimits()  # max.connections, per listener, per IP
        self._limits_config = ConnectionLimitsConfig(self.connection_limits)
        self._refusals = RefusalLog()
        self._shutting_down = False
        # shared by all connections: each copies what it received into its decoder before it awaits
        self._receive_buffer = memoryview(bytearray(RECEIVE_CHUNK))

    @property
    def port(self) -> int:
        return self.listeners[0].socket.getsockname()[1]

    def _configure_socket(self, stream: trio.SocketStream) -> None:
        # Kafka sets these by default (100 KiB); here only when the operator asks, because fixed
        # buffers switch off the kernel's autotuning, which serves loopback and fast links better.
        for key, option in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                            ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
            if self.config.is_set(key) and self.config.get(key) > 0:
                stream.setsockopt(socket.SOL_SOCKET, option, self.config.get(key))

    def port_of(self, listener: str) -> int:
        """The bound port of a listener (by name), for tests and for advertising port 0 listeners."""
        for name, bound in self.bound:
            if name == listener.upper():
                return bound[0].socket.getsockname()[1]
        raise KeyError(listener)

    async def _handle_connection(self, listener: str, stream: trio.SocketStream) -> None:
        security = self.securities[listener]
        try:
            address = stream.socket.getpeername()[0]
        except OSError:
            address = ""
        refusal = self.connection_limits.admit(listener, address)
        if refusal is not None:  # closed at once, as Kafka closes a connection over its per-IP limit
            self._refusals.refused(address, listener, refusal)
            await stream.aclose()
            return
        try:
            await self._serve_connection(listener, security, stream)
        finally:
            self.connection_limits.release(listener, address)

    async def _serve_connection(self, listener: str, security: ListenerSecurity, stream: trio.SocketStream) -> None:
        self._configure_socket(stream)
        idle_timeout = self.config.get("connections.max.idle.ms") / 1000
        conn = _Connection()
        self._connections.add(conn)
        max_frame = self.config.get("socket.request.max.bytes")
        decoder = FrameDecoder(min(max_frame, security.max_receive_size), "sasl.server.max.receive.size") \
            if security.sasl else FrameDecoder(max_frame)
        sock, tls = stream.socket, None
        try:
            peer = sock.getpeername()[0]
        except OSError:
            peer = ""
        try:
            with conn.scope:
                if security.ssl_context is not None:
                    try:
                        tls = await server_handshake(security.ssl_context, socket.socket(fileno=sock.detach()),
                                                     self.config.get("request.timeout.ms") / 1000)
                    except trio.BrokenResourceError as exc:
                        logger.info("closing connection from %s on %s: %s", peer, security.endpoint, exc)
                        return
                try:
                    session = security.new_session(tls.getpeercert(binary_form=True) if tls is not None else None)
                except ValueError as exc:
                    logger.info("closing connection from %s: its certificate maps to no principal: %s", peer, exc)
                    return
                io = (tls, tls_recv_into, tls_send_response) if tls is not None else (sock, _recv_into, send_response)
                async with trio.open_nursery() as writer:
                    try:
                        await self._guarded(conn, peer, self._read_requests(conn, writer, decoder, io, peer,
                                                                            idle_timeout, session, security))
                    finally:
                        if conn.to_writer is not None:
                            conn.to_writer.close()  # the writer sends what is owed, then ends
        finally:
            self._connections.discard(conn)
            with trio.CancelScope(shield=True):
                if tls is not None:
                    tls.close()
                await stream.aclose()

    @staticmethod
    async def _guarded(conn: _Connection, peer: str, work) -> None:
        """Run a connection's reader or writer; whatever ends it ends the connection, never the broker."""
        try:
            await work
            return
        except (FrameError, ProtocolError) as exc:
            logger.info("closing connection from %s: %s", peer, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # a bug must cost one connection, never the broker
            logger.exception("closing connection from %s after an internal error", peer)
        conn.scope.cancel()

    async def _read_requests(self, conn: _Connection, writer: trio.Nursery, decoder: FrameDecoder, io,
                             peer: str, idle_timeout: float, session: ConnectionSession,
                             security: ListenerSecurity) -> None:
        sock, recv_into, send = io
        reusable: bytearray | None = None  # fresh large buffers cost page faults; one is kept
        chunk = self._receive_buffer
        authenticated, phase = session.authenticated, session.phase
        throttled = conn.mute
        max_frame = self.config.get("socket.request.max.bytes")
        unsent = bytearray()  # answers held while the next pipelined request is already buffered
        slice_start: float | None = None  # when this turn of pipelined requests began
        while not self._shutting_down:
            if conn.muted_until:  # throttled by a client quota: nothing is read until it ends (KIP-219)
                await trio.sleep_until(conn.muted_until)
                conn.muted_until = 0.0
                continue
            frame = decoder.next_frame()
            if frame is None:
                if decoder.bytes_wanted > LARGE_FRAME and decoder.buffered >= 4:
                    frame = await _receive_rest(sock, *decoder.begin_frame_into(reusable), recv_into)
                    if frame is None:
                        return
                    if isinstance(frame, bytearray) and len(frame) <= REUSE_LIMIT:
                        reusable = frame  # kept for this connection's next large frame
                else:
                    got = await recv_into(sock, chunk, idle_timeout if idle_timeout > 0 else float("inf"))
                    if not got:
                        return  # closed by the peer, or idle for connections.max.idle.ms
                    decoder.receive_data(chunk[:got])
                    continue
            conn.handling = True
            with trio.CancelScope(shield=self._shutting_down):
                if session.unframed_tokens:  # after a v0 SaslHandshake: a bare token, answered bare
                    response = _unframed_answer(session, frame)
                else:
                    try:
                        response = await handle_frame(self.broker, frame, peer, session, throttled)
                    except ProtocolError:
                        if unsent:  # the answers before the bad request still go out
                            await send(sock, bytes(unsent))
                        raise
                if isinstance(response, Deferred) or conn.owed:
                    if unsent:
                        await send(sock, bytes(unsent))
                        unsent.clear()
                    await self._owe(conn, writer, io, peer, response)
                elif isinstance(response, bytes) and decoder.has_frame() and not conn.muted_until \
                        and len(unsent) + len(response) <= COALESCE_MAX and session.phase is phase:
                    unsent += response  # pipelined requests: their answers leave in one write
                elif unsent:
                    if isinstance(response, bytes):
                        unsent += response
                        await send(sock, bytes(unsent))
                    else:
                        await send(sock, bytes(unsent))
                        if response is not None:
                            await send(sock, response)
                    unsent.clear()
                elif response is not None:
                    await send(sock, response)
            conn.handling = False
            if session.phase is not phase:
                if session.phase is Phase.FAILED:
                    logger.info("closing connection from %s on %s: authentication failed", peer, security.endpoint)
                    await trio.sleep(security.failed_auth_delay_s)  # connection.failed.authentication.delay.ms
                    return
                phase = session.phase
            if session.authenticated != authenticated:
                authenticated = session.authenticated
                if authenticated:
                    decoder.max_frame_size, decoder.limit_name = max_frame, "socket.request.max.bytes"
                else:
                    decoder.max_frame_size = min(max_frame, security.max_receive_size)
                    decoder.limit_name = "sasl.server.max.receive.size"
            if decoder.has_frame() and not conn.muted_until:  # pipelined requests already read
                now = trio.current_time()
                if slice_start is None:
                    slice_start = now
                if now - slice_start < PIPELINE_SLICE_S:
                    continue  # more of them in this turn: a backlog does not wait a round per request
            slice_start = None
            await trio.lowlevel.checkpoint()  # other connections get their turn
        if unsent:  # shutting down with answers held
            await send(sock, bytes(unsent))

    async def _owe(self, conn: _Connection, writer: trio.Nursery, io, peer: str, response) -> None:
        """Queue an answer behind the ones still owed; the writer sends them in request order."""
        if conn.to_writer is None:
            conn.to_writer, receive = trio.open_memory_channel(MAX_DEFERRED)
            writer.start_soon(self._guarded, conn, peer, self._write_answers(conn, io, receive))
        conn.owed += 1
        await conn.to_writer.send(response)

    @staticmethod
    async def _write_answers(conn: _Connection, io, receive: trio.MemoryReceiveChannel) -> None:
        sock, _recv, send = io
        async for response in receive:
            if isinstance(response, Deferred):
                response = await response.complete()
            if response is not None:
                await send(sock, response)
            conn.owed -= 1

    async def _write_leader_epochs(self) -> None:
        """Each second, the leader-epoch checkpoints that changed in memory only, one file at a time
        with a yield between two: a failover or restart of thousands of partitions makes thousands
        at once, and writing them in one go (an atomic rewrite costs ~1 ms here) held requests up."""
        lm = self.broker.log_manager
        marks = -1
        while True:
            await trio.sleep(1.0)
            marks, unwritten = lm.unwritten_leader_epochs(marks)
            for d, lg in unwritten:
                lm.write_leader_epochs(d, lg)
                await trio.sleep(0)

    async def _periodic(self, interval, job) -> None:
        while True:
            await trio.sleep(interval() if callable(interval) else interval)
            try:
                job()
            except Exception:
                logger.exception("background job failed")

    async def _run_group_timers(self) -> None:
        """Fires the group coordinator's timeouts (session, rebalance, initial delay) when due;
        scheduling an earlier deadline wakes this task, so nothing polls."""
        coordinator = self.broker.group_coordinator
        wake = trio.Event()

        def changed() -> None:
            wake.set()

        coordinator.timers.on_change = changed
        while True:
            deadline = coordinator.timers.next_deadline()
            delay = float("inf") if deadline is None else max(0.0, (deadline - coordinator.clock()) / 1000)
            with trio.move_on_after(delay):
                await wake.wait()
            wake = trio.Event()
            try:
                coordinator.poll()
            except Exception:
                logger.exception("group coordinator timer failed")

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        dir_lock = LogDirLock(self.config.log_dirs)
        # the phase line comes once both succeed: a failed start-up is one line, its reason
        with startup_phase("log dirs locked, listeners bound"):
            dir_lock.acquire()  # as Kafka: a dir in use by another broker is the first thing reported
            try:
                await self._bind()
            except BaseException:
                dir_lock.release()
                raise
        try:
            endpoints = tuple((e.name, e.protocol, e.host, e.port or self.port_of(e.name))
                              for e in self.config.advertised_endpoints)
            inter_broker = self.config.inter_broker_listener_name
            adv = next(e for e in endpoints if e[0] == inter_broker)
            session = None
            if self.config.is_set("zookeeper.connect"):
                from kbroker.server.cluster_node import ClusterNode, open_session

                with startup_phase("ZooKeeper session open"):
                    session = await open_session(self.config)
            self.broker = Broker(self.config, (adv[2], adv[3]), session, dir_lock, endpoints)
        except BaseException:
            dir_lock.release()
            raise
        node = None
        if session is not None:
            with startup_phase("cluster metadata read from ZooKeeper"):
                await self.broker.metadata.start(self.config.get("cluster.id"))
            node = self.cluster_node = ClusterNode(self.broker, session)
        self.broker.reconfigurables.append(self._reload_listener_security)
        self.broker.reconfigurables.append(self._configure_connection_limits)
        self.broker.startup()
        try:
            async with trio.open_nursery() as background:
                for interval, job in self.broker.periodic_tasks():
                    background.start_soon(self._periodic, interval, job)
                background.start_soon(self._run_group_timers)
                background.start_soon(self._write_leader_epochs)
                await background.start(self.broker.txn_coordinator.run)
                if self.broker.remote_log_manager is not None:  # tiered storage: manifests loaded first
                    await background.start(self.broker.remote_log_manager.run)
                await background.start(self.broker.delayed.run)
                await background.start(self.broker.share_manager.run)  # share-state writes nobody waits for
                await background.start(self.broker.replica_manager.log_dir_mover.run)
                if node is not None:
                    await background.start(node.run)
                await self.side_listeners.start(background, self.broker, self.securities,
                                                lambda: len(self._connections))
                async with trio.open_nursery() as connections:
                    listen_scope = trio.CancelScope()

                    async def listen() -> None:
                        with listen_scope:
                            async with trio.open_nursery() as each:
                                for name, bound in self.bound:
                                    each.start_soon(partial(trio.serve_listeners, partial(self._handle_connection,
                                                    name), bound, handler_nursery=connections))

                    connections.start_soon(listen)
                    # what start-up built (schemas, metadata, loaded logs) lives as long as the broker:
                    # out of the collector's sight, a full collection no longer walks it (tens of ms
                    # with the event loop stopped)
                    gc.collect()
                    gc.freeze()
                    # full collections ten times rarer than Python's default (700, 10, 10): with
                    # thousands of partitions the heap holds millions of long-lived objects (partitions
                    # created after start-up are not frozen), and each full walk stops the event loop
                    gc.set_threshold(700, 10, GC_FULL_COLLECTION_THRESHOLD)
                    logger.info("kbroker %d serving on %s (data in %s)", self.broker.node_id,
                                ", ".join(f"{n}://{h}:{p}" for n, _, h, p in self.broker.info.endpoints),
                                ",".join(str(d) for d in self.config.log_dirs))
                    task_status.started(self)
                    try:
                        await trio.sleep_forever()
                    finally:
                        with trio.CancelScope(shield=True):
                            await self._drain(listen_scope)
                background.cancel_scope.cancel()
        finally:
            self.broker.shutdown()
            if node is not None:
                with trio.CancelScope(shield=True):
                    await node.close()
            logger.info("kbroker stopped")

    def _scram_credential(self, user: str, mechanism: str):
        return None if self.broker is None else self.broker.metadata.scram_credential(user, mechanism)

    async def _bind(self) -> None:
        """Each listener's security first (a listener whose security cannot be served never comes
        up), then the sockets."""
        self.securities = securities = listener_security.build_all(self.config, self._scram_credential)
        try:
            inter_broker = self.config.inter_broker_listener_name
            self.config.control_plane_listener_name  # noqa: B018 - checked
        except InvalidConfigError as exc:
            raise StartupError(str(exc)) from None
        if self.config.is_set("zookeeper.connect"):  # the broker's own credentials, checked before it binds
            client_security.for_listener(self.config, inter_broker)
        for security in securities.values():
            e = security.endpoint
            try:
                bound = await trio.open_tcp_listeners(e.port, host=e.host or None)
            except OSError as exc:  # Kafka's words
                raise StartupError(f"Socket server failed to bind to {e.host or '0.0.0.0'}:{e.port}: "
                                   f"{exc.strerror or exc}.") from None
            self.bound.append((e.name, bound))
            self.listeners += bound
        await self.side_listeners.bind(securities)
        self._configure_connection_limits()

    def _configure_connection_limits(self) -> None:
        """The connection limits as they are now (at start, and after each dynamic config change)."""
        self._limits_config.apply(self.config, [name for name, _ in self.bound])

    def _reload_listener_security(self) -> None:
        """After a dynamic config change: each listener's security built anew (a renewed keystore is
        served to new connections; connections already open keep theirs). A listener whose new
        settings do not load keeps its old ones (AlterConfigs validated them already)."""
        for name, old in list(self.securities.items()):
            try:
                self.securities[name] = listener_security.build(self.config, old.endpoint, self._scram_credential)
            except StartupError as exc:
                logger.error("listener %s keeps its security settings: %s", old.endpoint, exc)

    async def prepare_shutdown(self) -> None:
        """Before anything stops: in a cluster, a controlled shutdown while the controller, the
        listeners and the fetchers still run (the controller moves our leaderships and tells us)."""
        if self.cluster_node is not None:
            await self.cluster_node.controlled_shutdown()

    async def _drain(self, listen_scope: trio.CancelScope) -> None:
        self._shutting_down = True
        listen_scope.cancel()
        self.broker.group_coordinator.shutdown()  # parked JoinGroup/SyncGroup answer now
        for conn in list(self._connections):
            if not conn.busy:
                conn.scope.cancel()
        with trio.move_on_after(self.config.get("shutdown.timeout.ms") / 1000):
            while any(c.busy for c in self._connections):
                await trio.sleep(0.01)
        for conn in list(self._connections):
            conn.scope.cancel()


def _unframed_answer(session: ConnectionSession, token: bytes) -> bytes | None:
    """A SASL token sent bare (SaslHandshake v0): the next token, size-prefixed; a failure closes the
    connection with no answer, as Kafka does for the unframed exchange."""
    step = session.authenticate(bytes(token), int(time.time() * 1000))
    if step.close:
        return None
    return len(step.token).to_bytes(4, "big") + step.token


async def serve(config: BrokerConfig, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Run a broker until cancelled or SIGINT/SIGTERM; `task_status.started(server)` once serving."""
    server = KafkaServer(config)
    # trio re-delivers signals still queued when its receiver closes, to the handlers it found: with
    # these, a second Ctrl-C or SIGTERM during the shutdown is ignored instead of killing the process
    originals = {s: signal.signal(s, lambda *_: None) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        await _serve_until_signal(server, task_status)
    finally:
        for signum, handler in originals.items():
            signal.signal(signum, handler)


async def _serve_until_signal(server: "KafkaServer", task_status: Any) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            task_status.started(server)
            async for signum in signals:
                logger.info("received %s, shutting down", signal.Signals(signum).name)
                await server.prepare_shutdown()
                nursery.cancel_scope.cancel()
                break
