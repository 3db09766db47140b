"""The trio server in-process on port 0, driven with raw Kafka frames over real TCP."""

import struct
import time

import pytest
import trio

from kbroker.config import BrokerConfig
from kbroker.server.server import KafkaServer
from kbroker.wire.framing import frame
from kbroker.wire.protocol import build, request_class


def _request(api_key, version, body=None, correlation_id=1, flexible=None):
    cls = request_class(api_key, version)
    flexible = cls.__flexible__ if flexible is None else flexible
    import io
    from kio.serial import entity_writer

    out = io.BytesIO()
    out.write(struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test")
    if flexible:
        out.write(b"\0")
    entity_writer(cls)(out, build(cls, body or {}))
    return frame(out.getvalue())


async def _read_frame(stream):
    buf = b""
    while len(buf) < 4:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        buf += chunk
    (size,) = struct.unpack(">i", buf[:4])
    while len(buf) < size + 4:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        buf += chunk
    return buf[4:]


async def _closed(stream):
    with trio.fail_after(5):
        try:
            return await stream.receive_some(10) == b""
        except trio.BrokenResourceError:
            return True


def trio_test(fn):
    """Run an async test under trio with a hard deadline."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        async def bounded():
            with trio.fail_after(30):
                await fn(*args, **kwargs)

        trio.run(bounded)

    return wrapper


@pytest.fixture
def config(tmp_path):
    return BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                                   "socket.request.max.bytes": "1000000"})


async def _with_server(config, body):
    async with trio.open_nursery() as nursery:
        server = await nursery.start(KafkaServer(config).run)
        try:
            await body(server)
        finally:
            nursery.cancel_scope.cancel()


@trio_test
async def test_api_versions_lists_the_dispatch_table(config):
    async def body(server):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(_request(18, 0))
        response = await _read_frame(stream)
        correlation_id, error, count = struct.unpack_from(">ihi", response)
        from kbroker.api.dispatch import DISPATCH

        # the inter-broker APIs are served (and advertised) only in a cluster, a group protocol's only
        # when group.coordinator.rebalance.protocols lists it (share groups are off by default)
        protocols = server.broker.group_coordinator.config.rebalance_protocols
        assert "share" not in protocols
        assert (correlation_id, error, count) == (1, 0, len([
            s for s in DISPATCH.values() if not s.cluster_only and not s.sasl_only
            and (s.group_protocol is None or s.group_protocol in protocols)]))

    await _with_server(config, body)


@trio_test
async def test_unknown_api_versions_version_gets_v0_error_answer(config):
    async def body(server):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(frame(struct.pack(">hhih", 18, 99, 5, -1) + b"\x00\x01\x02"))
        response = await _read_frame(stream)
        assert struct.unpack(">ihihhh", response) == (5, 35, 1, 18, 0, 4)

    await _with_server(config, body)


@pytest.mark.parametrize("payload", [
    struct.pack(">i", 2_000_000),  # larger than socket.request.max.bytes
    struct.pack(">i", -5),
    frame(struct.pack(">hhih", 9999, 0, 1, -1)),  # unknown api key
    frame(struct.pack(">hhih", 3, 99, 1, -1)),  # unsupported Metadata version
    frame(b"\x00\x03\x00\x0c\x00\x00\x00\x01\xff\xff\x00" + b"\xfe" * 20),  # garbage body
])
@trio_test
async def test_bad_input_closes_only_that_connection(config, payload):
    async def body(server):
        bad = await trio.open_tcp_stream("127.0.0.1", server.port)
        good = await trio.open_tcp_stream("127.0.0.1", server.port)
        await bad.send_all(payload)
        assert await _closed(bad)
        await good.send_all(_request(3, 1, {"topics": []}))
        assert await _read_frame(good) is not None

    await _with_server(config, body)


@trio_test
async def test_produce_then_fetch_round_trip_and_long_poll_wakes(config):
    from kbroker.wire.records import Record, build_batch, decode_records, parse_batch_header

    async def body(server):
        consumer = await trio.open_tcp_stream("127.0.0.1", server.port)
        producer = await trio.open_tcp_stream("127.0.0.1", server.port)
        await producer.send_all(_request(19, 5, {"topics": [{"name": "t", "num_partitions": 1,
                                                             "replication_factor": 1}], "timeout": 1000}))
        assert await _read_frame(producer) is not None

        fetch = _request(1, 11, {"max_wait": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                                 "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                            "partition_max_bytes": 1 << 20}]}]})
        await consumer.send_all(fetch)
        start = trio.current_time()
        batch = build_batch([Record(0, 1000, b"k", b"v", [("h", b"1")])])
        produce = _request(0, 7, {"acks": 1, "timeout": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
        await producer.send_all(produce)
        await _read_frame(producer)
        response = await _read_frame(consumer)
        assert trio.current_time() - start < 4  # woken by the append, not by max_wait
        from kio.schema.fetch.v11.response import FetchResponse
        from kio.serial import entity_reader

        parsed, _ = entity_reader(FetchResponse)(memoryview(response), 4)
        records = parsed.responses[0].partitions[0].records
        header = parse_batch_header(records, 0)
        assert [(r.offset, r.key, r.value) for r in decode_records(records, 0, header)] == [(0, b"k", b"v")]

    await _with_server(config, body)


async def _call(stream, api_key, version, body, response_cls_version=None):
    from kio.serial import entity_reader

    from kbroker.wire.protocol import response_class

    await stream.send_all(_request(api_key, version, body))
    raw = await _read_frame(stream)
    cls = response_class(api_key, version)
    offset = 5 if cls.__flexible__ and api_key != 18 else 4
    return entity_reader(cls)(memoryview(raw), offset)[0]


async def _create_topic(stream, name, partitions=1):
    response = await _call(stream, 19, 5, {"topics": [{"name": name, "num_partitions": partitions,
                                                       "replication_factor": 1}], "timeout": 1000})
    assert response.topics[0].error_code in (0, 36)  # created, or already there


def _produce_body(topic, batch, acks=-1):
    return {"acks": acks, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


@trio_test
async def test_idempotent_duplicates_get_original_offsets_and_gaps_are_refused(config):
    from kbroker.wire.records import Record, build_batch

    async def body(server):
        s = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _create_topic(s, "idem")
        init = await _call(s, 22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                      "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        assert init.error_code == 0 and pid >= 0 and epoch == 0

        def batch(seq, n=2):
            return build_batch([Record(i, 1000 + i, None, b"m%d" % (seq + i), []) for i in range(n)],
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq)

        first = await _call(s, 0, 9, _produce_body("idem", batch(0)))
        second = await _call(s, 0, 9, _produce_body("idem", batch(2)))
        again = await _call(s, 0, 9, _produce_body("idem", batch(0)))  # a retry of the first
        gap = await _call(s, 0, 9, _produce_body("idem", batch(10)))
        offsets = [r.responses[0].partition_responses[0] for r in (first, second, again, gap)]
        assert [(p.error_code, p.base_offset) for p in offsets[:3]] == [(0, 0), (0, 2), (0, 0)]
        assert offsets[3].error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        end = await _call(s, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "idem", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert end.topics[0].partitions[0].offset == 4  # the duplicate was not written again

    await _with_server(config, body)


@trio_test
async def test_producer_state_survives_restart(config):
    from kbroker.wire.records import Record, build_batch

    batch = build_batch([Record(0, 5, None, b"x", [])], producer_id=77, producer_epoch=0, base_sequence=0)

    async def produce_once(server):
        s = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _create_topic(s, "restart")
        response = await _call(s, 0, 9, _produce_body("restart", batch))
        produce_once.result = response.responses[0].partition_responses[0]

    await _with_server(config, produce_once)
    assert (produce_once.result.error_code, produce_once.result.base_offset) == (0, 0)
    await _with_server(config, produce_once)  # same data dir: the retry is recognised
    assert (produce_once.result.error_code, produce_once.result.base_offset) == (0, 0)


@trio_test
async def test_fetch_respects_min_bytes_max_wait_and_returns_whole_batches(config):
    from kbroker.wire.records import Record, build_batch

    async def body(server):
        s = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _create_topic(s, "fb")
        for i in range(3):
            batch = build_batch([Record(j, 0, None, b"v" * 100, []) for j in range(5)])
            r = await _call(s, 0, 9, _produce_body("fb", batch, acks=1))
            assert r.responses[0].partition_responses[0].base_offset == 5 * i

        def fetch(offset, min_bytes=1, max_wait=0, partition_max=1 << 20):
            return {"max_wait": max_wait, "min_bytes": min_bytes, "max_bytes": 1 << 20, "isolation_level": 0,
                    "topics": [{"topic": "fb", "partitions": [{"partition": 0, "fetch_offset": offset,
                                                               "partition_max_bytes": partition_max}]}]}

        whole = (await _call(s, 1, 11, fetch(7))).responses[0].partitions[0]
        from kbroker.wire.records import iter_batch_headers

        assert [h.base_offset for _, h in iter_batch_headers(whole.records)] == [5, 10]  # from inside a batch
        one = (await _call(s, 1, 11, fetch(0, partition_max=10))).responses[0].partitions[0]
        assert [h.base_offset for _, h in iter_batch_headers(one.records)] == [0]  # too small: still one batch
        start = trio.current_time()
        waited = (await _call(s, 1, 11, fetch(15, min_bytes=1, max_wait=300))).responses[0].partitions[0]
        assert waited.records in (b"", None) and trio.current_time() - start >= 0.29
        out = (await _call(s, 1, 11, fetch(99))).responses[0].partitions[0]
        assert out.error_code == 1  # OFFSET_OUT_OF_RANGE
        assert (whole.high_watermark, whole.log_start_offset, whole.last_stable_offset) == (15, 0, 15)

    await _with_server(config, body)


@trio_test
async def test_large_frames_are_received_whole_and_served_by_sendfile(config):
    """Frames above the large-frame threshold take the recv_into path; fetches above the
    sendfile threshold go out as file ranges: the bytes must come back identical."""
    import os as _os

    from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers

    payloads = [_os.urandom(150_000), _os.urandom(70_000)]

    async def body(server):
        s = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _create_topic(s, "big")
        for i, payload in enumerate(payloads):
            r = await _call(s, 0, 9, _produce_body("big", build_batch([Record(0, 1, b"k", payload, [])]), acks=1))
            assert r.responses[0].partition_responses[0].base_offset == i
        fetched = await _call(s, 1, 12, {"max_wait": 0, "min_bytes": 1, "max_bytes": 10_000_000, "isolation_level": 0,
                                         "topics": [{"topic": "big", "partitions": [
                                             {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10_000_000}]}]})
        records = fetched.responses[0].partitions[0].records
        values = [r.value for pos, h in iter_batch_headers(records) for r in decode_records(records, pos, h)]
        assert values == payloads

    await _with_server(config, body)


@trio_test
async def test_flush_messages_1_acknowledges_only_synced_data_and_shares_fsyncs(config, tmp_path):
    from kbroker.log.log import FlushPlan
    from kbroker.wire.records import Record, build_batch

    config.explicit["log.flush.interval.messages"] = 1
    fsyncs = []
    original_run = FlushPlan.run

    def counting_run(plan):  # a slow disk: appends arriving meanwhile must share the next fsync
        import time

        fsyncs.append(plan.target)
        time.sleep(0.005)
        original_run(plan)

    FlushPlan.run = counting_run
    try:
        async def body(server):
            setup = await trio.open_tcp_stream("127.0.0.1", server.port)
            await _create_topic(setup, "durable")
            log = server.broker.replica_manager.partitions[("durable", 0)].log

            async def producer(n):
                s = await trio.open_tcp_stream("127.0.0.1", server.port)
                for _ in range(n):
                    r = await _call(s, 0, 9, _produce_body("durable", build_batch([Record(0, 0, None, b"x", [])]), acks=1))
                    assert r.responses[0].partition_responses[0].error_code == 0
                    # acknowledged means on disk: the recovery point covers it
                    assert log.recovery_point > r.responses[0].partition_responses[0].base_offset

            async with trio.open_nursery() as nursery:
                for _ in range(8):
                    nursery.start_soon(producer, 10)
            assert log.log_end_offset == 80 and log.recovery_point == 80

        await _with_server(config, body)
    finally:
        FlushPlan.run = original_run
    assert 0 < len(fsyncs) < 40  # 80 acknowledged produce requests, far fewer fsyncs


@trio_test
async def test_idle_connections_are_closed_and_max_connections_is_enforced(config):
    config.explicit["connections.max.idle.ms"] = 300
    config.explicit["max.connections"] = 2

    async def body(server):
        idle = await trio.open_tcp_stream("127.0.0.1", server.port)
        busy = await trio.open_tcp_stream("127.0.0.1", server.port)
        await busy.send_all(_request(18, 0))
        assert await _read_frame(busy) is not None
        third = await trio.open_tcp_stream("127.0.0.1", server.port)
        assert await _closed(third)  # over max.connections
        start = trio.current_time()
        assert await _closed(idle)
        assert trio.current_time() - start < 3

    await _with_server(config, body)


@trio_test
async def test_a_connection_with_pipelined_requests_does_not_starve_another(config):
    """Pipelined requests are handled in turns of at most PIPELINE_SLICE_S, then the connection
    yields: a client that pipelines thousands of requests still lets another connection be answered
    long before its own are all done."""
    import socket

    from kbroker.wire.records import Record, build_batch

    pipelined = 3000

    def recv_frame(sock):
        head = b""
        while len(head) < 4:
            head += sock.recv(4 - len(head))
        (size,) = struct.unpack(">i", head)
        body = b""
        while len(body) < size:
            body += sock.recv(size - len(body))
        return body

    def clients(port):
        with socket.create_connection(("127.0.0.1", port)) as busy, \
                socket.create_connection(("127.0.0.1", port)) as other:
            request = _request(0, 9, _produce_body("busy", build_batch([Record(0, 1000, None, b"v", [])]), acks=1))
            busy.sendall(request * pipelined)
            recv_frame(busy)  # the broker is working through them
            other.sendall(_request(18, 0))
            assert struct.unpack_from(">ih", recv_frame(other)) == (1, 0)
            busy.setblocking(False)
            buffered = b""
            while True:
                try:
                    buffered += busy.recv(1 << 20)
                except BlockingIOError:
                    break
            answered, pos = 1, 0
            while len(buffered) >= pos + 4 and len(buffered) >= pos + 4 + struct.unpack_from(">i", buffered, pos)[0]:
                pos += 4 + struct.unpack_from(">i", buffered, pos)[0]
                answered += 1
            return answered

    async def body(server):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _create_topic(stream, "busy")
        answered = await trio.to_thread.run_sync(clients, server.port)
        assert answered < pipelined // 2, f"{answered} of {pipelined} pipelined requests answered first"

    await _with_server(config, body)


@trio_test
async def test_a_backlog_of_pipelined_requests_is_handled_several_per_turn(config):
    """A producer far behind (librdkafka sends one partition per Produce, thousands pipelined) has
    its buffered requests handled in turns of up to PIPELINE_SLICE_S, not one per round of every
    other task: beside a task with work every round, 1,000 pipelined requests are answered in far
    fewer rounds than requests (one per round before)."""
    import socket

    from kbroker.wire.records import Record, build_batch

    pipelined = 1000

    def client(port):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            request = _request(0, 9, _produce_body("backlog", build_batch([Record(0, 1000, None, b"v", [])]), acks=1))
            sock.sendall(request * pipelined)
            got, answered = b"", 0
            while answered < pipelined:
                got += sock.recv(1 << 20)
                while len(got) >= 4 and len(got) >= 4 + struct.unpack_from(">i", got)[0]:
                    got = got[4 + struct.unpack_from(">i", got)[0]:]
                    answered += 1

    async def body(server):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await _create_topic(stream, "backlog")
        rounds = 0

        async def count_rounds(task_status=trio.TASK_STATUS_IGNORED):
            nonlocal rounds  # a task with 0.5 ms of work every round (a busy broker's other work)
            task_status.started()
            while True:
                rounds += 1
                time.sleep(0.0005)
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            await nursery.start(count_rounds)
            await trio.to_thread.run_sync(client, server.port)
            nursery.cancel_scope.cancel()
        assert rounds < pipelined * 0.6, f"{pipelined} pipelined requests took {rounds} scheduler rounds"

    await _with_server(config, body)
