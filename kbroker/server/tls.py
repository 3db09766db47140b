"""TLS connections' I/O, for SSL and SASL_SSL listeners: the server-side handshake, and reading and
writing through the OpenSSL object, non-blocking, with trio waiting when it wants to read or write
(the plaintext path in server.py reads and writes the descriptor directly). The contexts are built
from Kafka's keys in kbroker/tlsconfig.py.
"""

from __future__ import annotations

import os
import socket
import ssl

import trio

__all__ = ["server_handshake", "client_handshake", "tls_recv_into", "tls_send_all", "tls_send_response",
           "TLS_READ_CHUNK"]

TLS_READ_CHUNK = 1 << 20  # file ranges go out through OpenSSL in pieces of this size (no sendfile over TLS)


# -- the connection's I/O -------------------------------------------------------------------------
async def _handshake(sslsock: ssl.SSLSocket) -> None:
    while True:
        try:
            sslsock.do_handshake()
            return
        except ssl.SSLWantReadError:
            await trio.lowlevel.wait_readable(sslsock)
        except ssl.SSLWantWriteError:
            await trio.lowlevel.wait_writable(sslsock)
        except (ssl.SSLError, OSError) as exc:
            raise trio.BrokenResourceError(f"TLS handshake failed: {exc}") from None


async def server_handshake(ctx: ssl.SSLContext, raw: socket.socket, timeout_s: float) -> ssl.SSLSocket:
    """Wrap an accepted socket (non-blocking) and run the handshake; BrokenResourceError when the
    peer is no TLS client, fails the handshake or is too slow at it."""
    sslsock = ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
    sslsock.setblocking(False)
    try:
        with trio.fail_after(timeout_s):
            await _handshake(sslsock)
    except trio.TooSlowError:
        sslsock.close()
        raise trio.BrokenResourceError("TLS handshake timed out") from None
    except BaseException:
        sslsock.close()
        raise
    return sslsock


async def client_handshake(ctx: ssl.SSLContext, raw: socket.socket, host: str) -> ssl.SSLSocket:
    sslsock = ctx.wrap_socket(raw, server_side=False, server_hostname=host, do_handshake_on_connect=False)
    sslsock.setblocking(False)
    try:
        await _handshake(sslsock)
    except BaseException:
        sslsock.close()
        raise
    return sslsock


async def tls_recv_into(sslsock: ssl.SSLSocket, view: memoryview, idle_timeout: float = float("inf")) -> int:
    """Decrypted bytes into `view`: how many, 0 when the peer closed or was idle `idle_timeout` s."""
    while True:
        try:
            return sslsock.recv_into(view)
        except ssl.SSLWantReadError:
            with trio.move_on_after(idle_timeout):
                await trio.lowlevel.wait_readable(sslsock)
                continue
            return 0
        except ssl.SSLWantWriteError:
            await trio.lowlevel.wait_writable(sslsock)
        except ssl.SSLZeroReturnError:
            return 0
        except (ssl.SSLError, OSError) as exc:
            raise trio.BrokenResourceError(str(exc)) from None


async def tls_send_all(sslsock: ssl.SSLSocket, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        try:
            sent = sslsock.send(view)
        except ssl.SSLWantWriteError:
            await trio.lowlevel.wait_writable(sslsock)
            continue
        except ssl.SSLWantReadError:
            # OpenSSL must read first (a TLS 1.3 key update): the connection's reader task may be the
            # one waiting on the socket, and trio allows one waiter per direction, so poll briefly
            await trio.sleep(0.001)
            continue
        except (ssl.SSLError, OSError) as exc:
            raise trio.BrokenResourceError(str(exc)) from None
        view = view[sent:]


async def tls_send_response(sslsock: ssl.SSLSocket, response: bytes | list) -> None:
    """A response through OpenSSL: bytes, or a Fetch's chunks, whose file ranges are read in pieces
    (TLS has no sendfile here: kernel TLS is not available to Python 3.11's ssl module)."""
    if isinstance(response, (bytes, bytearray)):
        await tls_send_all(sslsock, response)
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
                await tls_send_all(sslsock, pending)
                pending = bytearray()
    if pending:
        await tls_send_all(sslsock, pending)
