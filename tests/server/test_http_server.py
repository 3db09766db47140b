"""The HTTP/1.1 request parser of the broker's HTTP listeners (server/http_server.py) over in-memory
streams: keep-alive and pipelined requests, bodies by Content-Length, 100-continue, and every
refusal (Transfer-Encoding, conflicting or malformed lengths, bad request lines and header fields,
HTTP/1.0 closing) — plus the parser itself against hypothesis-made heads."""

from __future__ import annotations

import contextlib

import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

from kbroker.server.http_server import BadRequest, HttpEndpoint, header, parse_head


def _endpoint() -> HttpEndpoint:
    async def respond(request, body, _info):
        text = b"%s %s %d %s" % (request.method, request.target, len(body), body[:20])
        return 200, [(b"content-type", b"text/plain")], text
    return HttpEndpoint("test", [], respond, max_head=1024, max_body=100, idle_timeout_s=5)


@contextlib.asynccontextmanager
async def _served():
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_endpoint().serve_connection, server)
        yield client


async def _read_all(stream) -> bytes:
    out = b""
    with trio.fail_after(5):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return out
            if not data:
                return out
            out += data


def _exchange(data: bytes) -> bytes:
    """What the server answers to `data`, sent whole, after which the client sends no more."""
    async def main():
        async with _served() as client:
            await client.send_all(data)
            await client.send_eof()
            return await _read_all(client)
    return trio.run(main)


def test_pipelined_keep_alive_requests_and_bodies():
    answer = _exchange(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                       b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                       b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.count(b"HTTP/1.1 200 OK") == 3
    assert b"GET /a 0 " in answer and b"POST /b 5 hello" in answer and b"GET /c 0 " in answer
    assert answer.rstrip().endswith(b"GET /c 0")
    assert b"connection: close" in answer.split(b"GET /c")[0].rsplit(b"HTTP/1.1 200", 1)[1]


def test_http_1_0_closes_unless_kept_alive():
    answer = _exchange(b"GET /a HTTP/1.0\r\n\r\nGET /never HTTP/1.0\r\n\r\n")
    assert answer.count(b"HTTP/1.1 200") == 1 and b"/never" not in answer


def test_expect_100_continue_is_answered_before_the_body():
    async def main():
        async with _served() as client:
            await client.send_all(b"POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
            with trio.fail_after(5):
                first = await client.receive_some(1000)
            assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
            await client.send_all(b"abc")
            with trio.fail_after(5):
                second = await client.receive_some(1000)
            assert second.startswith(b"HTTP/1.1 200 OK") and second.endswith(b"POST /p 3 abc")
    trio.run(main)


@pytest.mark.parametrize("request_bytes, status", [
    (b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501),
    (b"POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
    (b"POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
    (b"POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413),
    (b"GET /x HTTP/2.0\r\n\r\n", 505),
    (b"GET /x\r\n\r\n", 400),
    (b"GET x HTTP/1.1\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nBad Header: v\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400),
    (b"\x00\x01\x02 not http\r\n\r\n", 400),
    (b"GET /x HTTP/1.1\r\nX: " + b"y" * 2000 + b"\r\n\r\n", 431),
])
def test_refusals_answer_and_close(request_bytes, status):
    answer = _exchange(request_bytes)
    assert answer.startswith(b"HTTP/1.1 %d " % status), answer[:80]
    assert b"connection: close" in answer
    assert answer.count(b"HTTP/1.1 ") == 1  # nothing after the refusal: the connection is closed


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_the_parser_refuses_or_parses_any_head(head):
    try:
        request = parse_head(head)
    except BadRequest as exc:
        assert exc.status in (400, 505)
        return
    assert request.target.startswith(b"/") or request.target == b"*"
    assert all(name == name.lower() for name, _ in request.headers)
    assert header(request, b"\x00") is None
