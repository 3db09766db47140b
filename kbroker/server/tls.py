"""TLS connections' I/O, for SSL and SASL_SSL listeners: the server-side handshake, and reading and
writing through an OpenSSL object over memory buffers (the plaintext path in server.py reads and
writes the descriptor directly). The contexts are built from Kafka's keys in kbroker/tlsconfig.py.

The socket is read in large chunks (up to 256 KiB per system call) into OpenSSL's incoming buffer,
then decrypted record by record with no further system call; an `ssl.SSLSocket` would make two
reads per TLS record, and clients such as librdkafka send many small records. Encrypted output
collects in the outgoing buffer and leaves with one write per chunk. trio only waits when the
socket is dry or full.
"""

from __future__ import annotations

import os
import socket
import ssl

import trio

__all__ = ["TlsConnection", "server_handshake", "tls_recv_into", "tls_send_all", "tls_send_response",
           "TLS_READ_CHUNK"]

TLS_READ_CHUNK = 1 << 20  # file ranges go out through OpenSSL in pieces of this size (no sendfile over TLS)
RAW_CHUNK = 256 * 1024  # encrypted bytes read from the socket per system call
WRITE_CHUNK = 256 * 1024  # plaintext encrypted and sent per step


class TlsConnection:
    """One server-side TLS connection: the socket (non-blocking, owned) and the OpenSSL object."""

    __slots__ = ("sock", "fd", "obj", "incoming", "outgoing", "_raw")

    def __init__(self, ctx: ssl.SSLContext, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)
        self.fd = sock.fileno()
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self._raw = memoryview(bytearray(RAW_CHUNK))

    def fileno(self) -> int:
        return self.fd

    def getpeercert(self, binary_form: bool = False):
        return self.obj.getpeercert(binary_form)

    def close(self) -> None:
        self.sock.close()

    async def _fill(self, idle_timeout: float = float("inf")) -> bool:
        """Encrypted bytes from the socket into OpenSSL; False when the peer closed or was idle."""
        while True:
            try:
                got = os.readv(self.fd, (self._raw,))
            except BlockingIOError:
                with trio.move_on_after(idle_timeout):
                    await trio.lowlevel.wait_readable(self.sock)
                    continue
                return False
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from None
            if not got:
                self.incoming.write_eof()
                return False
            self.incoming.write(self._raw[:got])
            return True

    async def _flush(self) -> None:
        """What OpenSSL produced (records, handshake messages, alerts) onto the socket."""
        data = self.outgoing.read()
        view = memoryview(data)
        while view:
            try:
                sent = os.write(self.fd, view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from None
            view = view[sent:]

    async def handshake(self) -> None:
        while True:
            try:
                self.obj.do_handshake()
                await self._flush()
                return
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise trio.BrokenResourceError("TLS handshake failed: the peer closed") from None
            except (ssl.SSLError, OSError) as exc:
                try:
                    await self._flush()  # the alert, so the client learns why
                except trio.BrokenResourceError:
                    pass
                raise trio.BrokenResourceError(f"TLS handshake failed: {exc}") from None

    async def recv_into(self, view: memoryview, idle_timeout: float = float("inf")) -> int:
        while True:
            try:
                return self.obj.read(len(view), view)
            except ssl.SSLWantReadError:
                if self.outgoing.pending:  # e.g. a TLS 1.3 key update's answer
                    await self._flush()
                if not await self._fill(idle_timeout):
                    return 0
            except ssl.SSLZeroReturnError:
                return 0
            except (ssl.SSLError, OSError) as exc:
                raise trio.BrokenResourceError(str(exc)) from None

    async def send_all(self, data) -> None:
        view = memoryview(data).cast("B")
        while view:
            piece = view[:WRITE_CHUNK]
            try:
                written = self.obj.write(piece)
            except ssl.SSLWantReadError:
                # OpenSSL must read first: the connection's reader task does that; poll briefly
                await self._flush()
                await trio.sleep(0.001)
                continue
            except (ssl.SSLError, OSError) as exc:
                raise trio.BrokenResourceError(str(exc)) from None
            view = view[written:]
            await self._flush()


async def server_handshake(ctx: ssl.SSLContext, raw: socket.socket, timeout_s: float) -> TlsConnection:
    """Take over an accepted socket and run the handshake; BrokenResourceError when the peer is no
    TLS client, fails the handshake or is too slow at it."""
    tls = TlsConnection(ctx, raw)
    try:
        with trio.fail_after(timeout_s):
            await tls.handshake()
    except trio.TooSlowError:
        tls.close()
        raise trio.BrokenResourceError("TLS handshake timed out") from None
    except BaseException:
        tls.close()
        raise
    return tls


async def tls_recv_into(tls: TlsConnection, view: memoryview, idle_timeout: float = float("inf")) -> int:
    """Decrypted bytes into `view`: how many, 0 when the peer closed or was idle `idle_timeout` s."""
    return await tls.recv_into(view, idle_timeout)


async def tls_send_all(tls: TlsConnection, data) -> None:
    await tls.send_all(data)


async def tls_send_response(tls: TlsConnection, response: bytes | list) -> None:
    """A response through OpenSSL: bytes, or a Fetch's chunks, whose file ranges are read in pieces
    (TLS has no sendfile here: kernel TLS is not available to Python 3.11's ssl module)."""
    if isinstance(response, (bytes, bytearray)):
        await tls.send_all(response)
        return
    pending = bytearray()
    for chunk in response:
        if isinstance(chunk, (bytes, bytearray)):
            pending += chunk
            continue
        if not hasattr(chunk, "fd"):  # bytes in memory that stand where a range would
            pending += chunk.read()
            continue
        position, remaining = chunk.position, chunk.size
        while remaining:
            piece = os.pread(chunk.fd, min(remaining, TLS_READ_CHUNK), position)
            if not piece:
                raise trio.BrokenResourceError("a file range shrank before it was sent")
            pending += piece
            position += len(piece)
            remaining -= len(piece)
            if len(pending) >= TLS_READ_CHUNK:
                await tls.send_all(pending)
                pending = bytearray()
    if pending:
        await tls.send_all(pending)
