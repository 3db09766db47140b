"""The metrics endpoint's HTTP handling over in-memory streams (h11 on both sides of the
parser's contract): keep-alive scrapes, HEAD, wrong paths and methods, and every bound —
request head, request body, connections, idle time — ending in a 4xx and a closed connection."""

from __future__ import annotations

import contextlib

import h11
import trio
import trio.testing

from kbroker.server import metrics_http
from kbroker.server.metrics_http import MetricsEndpoint

BODY = b"kafka_controller_kafkacontroller_activecontrollercount 1.0\n"


def _endpoint(collect=lambda: BODY) -> MetricsEndpoint:
    return MetricsEndpoint([], collect, lambda collected: collected, "text/plain; version=0.0.4; charset=utf-8")


async def _read_response(stream, client: h11.Connection) -> tuple[int, dict, bytes] | None:
    """One response as a client reads it; None if the server closed first."""
    response, body = None, b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await stream.receive_some(65536))
            continue
        if isinstance(event, h11.ConnectionClosed):
            return None
        if isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return response.status_code, {k.decode(): v.decode() for k, v in response.headers}, body


async def _closed(stream) -> bool:
    with trio.fail_after(5):
        try:
            while True:
                if await stream.receive_some(65536) == b"":
                    return True
        except trio.BrokenResourceError:
            return True


@contextlib.asynccontextmanager
async def _served(endpoint: MetricsEndpoint):
    """A client's end of one in-memory connection that `endpoint` serves (awaited on exit)."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(endpoint.serve_connection, server_stream)
        yield client_stream


def run(test):
    async def bounded():
        with trio.fail_after(10):
            await test()
    trio.run(bounded)


def _request(method: bytes, target: bytes, headers=(), body: bytes | None = None) -> tuple[h11.Connection, bytes]:
    client = h11.Connection(h11.CLIENT)
    all_headers = [(b"host", b"test"), *headers]
    if body is not None:
        all_headers.append((b"content-length", str(len(body)).encode()))
    data = client.send(h11.Request(method=method, target=target, headers=all_headers))
    if body:
        data += client.send(h11.Data(data=body))
    data += client.send(h11.EndOfMessage())
    return client, data


def test_get_metrics_twice_on_one_connection_then_close():
    async def test():
        endpoint = _endpoint()
        async with _served(endpoint) as client_stream:
            client, data = _request(b"GET", b"/metrics")
            for _ in range(2):
                await client_stream.send_all(data)
                status, headers, body = await _read_response(client_stream, client)
                assert status == 200 and body == BODY
                assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
                assert headers["content-length"] == str(len(BODY))
                client.start_next_cycle()
                data = client.send(h11.Request(method=b"GET", target=b"/metrics?name[]=x",
                                               headers=[(b"host", b"test")])) + client.send(h11.EndOfMessage())
            await client_stream.aclose()
        assert endpoint.open_connections == 0
    run(test)


def test_head_gets_the_length_without_the_body():
    async def test():
        async with _served(_endpoint()) as client_stream:
            client, data = _request(b"HEAD", b"/metrics")
            await client_stream.send_all(data)
            status, headers, body = await _read_response(client_stream, client)
            assert (status, headers["content-length"], body) == (200, str(len(BODY)), b"")
            await client_stream.aclose()
    run(test)


def test_other_paths_are_404_and_other_methods_405():
    async def test():
        for method, target, body, expected in ((b"GET", b"/", None, 404), (b"GET", b"/metricsx", None, 404),
                                               (b"POST", b"/metrics", b"x=1", 405), (b"DELETE", b"/metrics", None, 405)):
            async with _served(_endpoint()) as client_stream:
                client, data = _request(method, target, body=body)
                await client_stream.send_all(data)
                status, headers, _ = await _read_response(client_stream, client)
                assert status == expected, (method, target)
                if expected == 405:
                    assert headers["allow"] == "GET, HEAD"
                await client_stream.aclose()
    run(test)


def test_an_oversized_head_is_431_and_closes():
    async def test():
        async with _served(_endpoint()) as client_stream:
            huge = b"x" * (metrics_http.MAX_REQUEST_HEAD + 1)
            await client_stream.send_all(b"GET /metrics HTTP/1.1\r\nhost: t\r\nx-big: " + huge)
            status, headers, _ = await _read_response(client_stream, _request(b"GET", b"/metrics")[0])
            assert status == 431 and headers["connection"] == "close"
            assert await _closed(client_stream)
    run(test)


def test_an_oversized_body_is_413_and_closes():
    async def test():
        async with _served(_endpoint()) as client_stream:
            client, data = _request(b"GET", b"/metrics", body=b"y" * (metrics_http.MAX_REQUEST_BODY + 1))
            await client_stream.send_all(data)
            status, _, _ = await _read_response(client_stream, client)
            assert status == 413
            assert await _closed(client_stream)
    run(test)


def test_garbage_is_400_and_a_failing_render_500_and_both_close():
    async def test():
        async with _served(_endpoint()) as client_stream:
            await client_stream.send_all(b"\x00\x01 not http at all\r\n\r\n")
            status, _, _ = await _read_response(client_stream, _request(b"GET", b"/metrics")[0])
            assert status == 400
            assert await _closed(client_stream)

        def broken() -> bytes:
            raise RuntimeError("a bug")

        async with _served(_endpoint(broken)) as client_stream:
            client, data = _request(b"GET", b"/metrics")
            await client_stream.send_all(data)
            status, _, _ = await _read_response(client_stream, client)
            assert status == 500
            assert await _closed(client_stream)
    run(test)


def test_connections_beyond_the_limit_are_closed_and_idle_ones_time_out(monkeypatch):
    monkeypatch.setattr(metrics_http, "IDLE_TIMEOUT_S", 0.2)

    async def test():
        endpoint = _endpoint()
        endpoint.open_connections = metrics_http.MAX_CONNECTIONS
        async with _served(endpoint) as client_stream:
            assert await _closed(client_stream)
        endpoint.open_connections = 0
        async with _served(endpoint) as client_stream:
            await client_stream.send_all(b"GET /met")  # and nothing more
            assert await _closed(client_stream)
        assert endpoint.open_connections == 0
    run(test)
