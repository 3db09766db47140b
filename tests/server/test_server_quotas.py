"""The server's side of quotas, in-process over real TCP: a throttled connection is not read until
its throttle ends (KIP-219) while another connection is served meanwhile; connection limits per IP
(with overrides, changed at run time) and per listener refuse the extra connection at once."""

import trio

from kbroker.config import BrokerConfig
from kbroker.server.server import KafkaServer
from kbroker.wire.protocol import decode_response, encode_request, to_ms
from kbroker.wire.records import Record, build_batch

from test_server import _closed, _read_frame, trio_test


def config_for(tmp_path, **extra):
    return BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                                   **{k.replace("_", "."): str(v) for k, v in extra.items()}})


async def _with_server(config, body):
    async with trio.open_nursery() as nursery:
        server = await nursery.start(KafkaServer(config).run)
        try:
            await body(server)
        finally:
            nursery.cancel_scope.cancel()


def produce_frame(correlation_id, size, client_id):
    batch = build_batch([Record(0, 1_000, None, b"x" * size, [])])
    return encode_request(0, 9, correlation_id, client_id, {
        "transactional_id": None, "acks": 1, "timeout": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})


def api_versions_frame(correlation_id, client_id="probe"):
    return encode_request(18, 0, correlation_id, client_id, {})


@trio_test
async def test_a_throttled_connection_is_muted_and_the_others_are_served(tmp_path):
    async def body(server):
        await server.broker.create_topic("t", num_partitions=1)
        server.broker.metadata.alter_client_quotas("clients/greedy", {"producer_byte_rate": "10000"})
        greedy = await trio.open_tcp_stream("127.0.0.1", server.port)
        await greedy.send_all(produce_frame(1, 40_000, "greedy"))  # ~40 KB over the window's 2 s floor
        _, answer = decode_response(0, 9, await _read_frame(greedy))
        throttle = to_ms(answer.throttle_time)
        assert 1900 <= throttle <= 2200  # (20 KB/s - 10 KB/s) / 10 KB/s x 2 s
        sent = trio.current_time()
        await greedy.send_all(api_versions_frame(2, "greedy"))  # pipelined during the throttle
        other = await trio.open_tcp_stream("127.0.0.1", server.port)
        await other.send_all(api_versions_frame(3))
        with trio.fail_after(2):
            assert await _read_frame(other) is not None  # another connection: at once
        with trio.move_on_after(1.5):
            await _read_frame(greedy)
            raise AssertionError("a muted connection was read")
        server.broker.metadata.alter_client_quotas("clients/greedy", {"producer_byte_rate": None})
        await _read_frame(greedy)  # read once the throttle ends (a quota removed does not unmute)
        assert throttle / 1000 - 0.1 <= trio.current_time() - sent <= throttle / 1000 + 1

    config = config_for(tmp_path)
    config.explicit["connections.max.idle.ms"] = 60_000
    # keep the throttle short enough for the test: a 1 s quota window x 3 samples
    config.explicit["quota.window.num"] = 3
    await _with_server(config, body)


@trio_test
async def test_max_connections_per_ip_with_overrides_and_dynamic_changes(tmp_path):
    async def body(server):
        first = await trio.open_tcp_stream("127.0.0.1", server.port)
        second = await trio.open_tcp_stream("127.0.0.1", server.port)
        for i, stream in enumerate((first, second)):
            await stream.send_all(api_versions_frame(i))
            assert await _read_frame(stream) is not None
        third = await trio.open_tcp_stream("127.0.0.1", server.port)
        assert await _closed(third)  # over max.connections.per.ip for 127.0.0.1
        await first.aclose()
        await trio.sleep(0.1)
        again = await trio.open_tcp_stream("127.0.0.1", server.port)
        await again.send_all(api_versions_frame(5))
        assert await _read_frame(again) is not None  # a slot freed
        # a dynamic override raises this address's limit
        await server.broker.set_broker_configs("0", {"max.connections.per.ip.overrides": "localhost:3,127.0.0.1:3"})
        more = await trio.open_tcp_stream("127.0.0.1", server.port)
        await more.send_all(api_versions_frame(6))
        assert await _read_frame(more) is not None
        assert await _closed(await trio.open_tcp_stream("127.0.0.1", server.port))

    config = config_for(tmp_path, max_connections_per_ip=2)
    await _with_server(config, body)


@trio_test
async def test_a_listeners_max_connections(tmp_path):
    async def body(server):
        one = await trio.open_tcp_stream("127.0.0.1", server.port)
        await one.send_all(api_versions_frame(1))
        assert await _read_frame(one) is not None
        assert await _closed(await trio.open_tcp_stream("127.0.0.1", server.port))
        assert server.connection_limits.total == 1

    config = config_for(tmp_path)
    config.explicit["listener.name.plaintext.max.connections"] = 1
    await _with_server(config, body)
