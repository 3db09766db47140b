"""Hostile and malformed input on raw sockets. Each case checks what Kafka does (close the
connection, or answer with the documented error) and then that a stock client still produces and
consumes through the same broker."""

from __future__ import annotations

import socket
import struct
import time

import crc32c
import pytest

pytestmark = pytest.mark.timeout(90)


# ---- helpers --------------------------------------------------------------------------------


def connect(kbroker, timeout=5.0):
    s = socket.create_connection((kbroker.host, kbroker.port), timeout=timeout)
    s.settimeout(timeout)
    return s


def assert_closed_by_broker(sock, what, timeout=5.0):
    """The broker must close the connection (EOF or reset) within `timeout`, without us closing."""
    sock.settimeout(timeout)
    received = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        return received
    except socket.timeout:
        pass
    pytest.fail(f"{what}: connection still open after {timeout}s (received {received[:64]!r})", pytrace=False)


def assert_healthy(kbroker, kt, tag):
    """The broker process is alive, answers ApiVersions, and kafka-python can produce + consume."""
    assert kbroker.alive(), f"broker died after {tag}: exit status {kbroker.proc.returncode}"
    assert kt.probe(kbroker.host, kbroker.port, timeout=5), f"broker does not answer ApiVersions after {tag}"
    kafka = kt.require_module("kafka")
    topic = kt.topic_name("bad", tag)
    producer = kafka.KafkaProducer(bootstrap_servers=kbroker.bootstrap, acks="all", request_timeout_ms=15000,
                                   max_block_ms=20000)
    try:
        md = producer.send(topic, key=b"k-" + tag.encode(), value=b"still fine after " + tag.encode(),
                           headers=[("after", tag.encode())], partition=0).get(timeout=20)
    finally:
        producer.close(timeout=10)
    assert (md.partition, md.offset) == (0, 0)
    consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=None, enable_auto_commit=False,
                                   request_timeout_ms=15000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        recs = []
        deadline = time.monotonic() + 20
        while not recs and time.monotonic() < deadline:
            for rs in consumer.poll(timeout_ms=500).values():
                recs.extend(rs)
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == \
        [(0, b"k-" + tag.encode(), b"still fine after " + tag.encode(), [("after", tag.encode())])]


def zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n: int) -> bytes:
    return uvarint(zigzag(n))


def record_batch_v2(records: list[tuple[bytes, bytes]], base_ts: int, corrupt_crc: bool = False) -> bytes:
    """An uncompressed magic-2 batch, written by hand (no shared code with the broker)."""
    body = bytearray()
    for i, (k, v) in enumerate(records):
        r = b"\x00" + varint(0) + varint(i) + varint(len(k)) + k + varint(len(v)) + v + varint(0)
        body += varint(len(r)) + r
    after_crc = struct.pack(">hiqqqhii", 0, len(records) - 1, base_ts, base_ts, -1, -1, -1, len(records)) + bytes(body)
    crc = crc32c.crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0x5A5A5A5A
    after_len = struct.pack(">ibI", 0, 2, crc) + after_crc  # partition leader epoch, magic, crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


def produce_v3(topic: str, partition: int, batch: bytes, correlation_id: int, kt) -> bytes:
    t = topic.encode()
    body = (struct.pack(">hhi", -1, -1, 10000)  # transactional_id null, acks=all, timeout
            + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
            + struct.pack(">i", 1) + struct.pack(">ii", partition, len(batch)) + batch)
    return kt.frame(kt.request_header_v1(0, 3, correlation_id) + body)


def parse_produce_v3_response(resp: bytes) -> tuple[int, dict[tuple[str, int], tuple[int, int]], int]:
    corr, ntopics = struct.unpack_from(">ii", resp, 0)
    pos = 8
    out = {}
    for _ in range(ntopics):
        (nlen,) = struct.unpack_from(">h", resp, pos)
        name = resp[pos + 2:pos + 2 + nlen].decode()
        pos += 2 + nlen
        (nparts,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        for _ in range(nparts):
            idx, err, base_offset, _log_append = struct.unpack_from(">ihqq", resp, pos)
            pos += 22
            out[(name, idx)] = (err, base_offset)
    (throttle,) = struct.unpack_from(">i", resp, pos)
    assert pos + 4 == len(resp), f"Produce v3 response has {len(resp) - pos - 4} trailing bytes"
    return corr, out, throttle


# ---- framing ----------------------------------------------------------------------------------


def test_oversized_frame_is_closed(kbroker, kt):
    with connect(kbroker) as s:
        s.sendall(struct.pack(">i", kt.SOCKET_REQUEST_MAX_BYTES + 1))  # only the size prefix
        assert_closed_by_broker(s, "size prefix above socket.request.max.bytes")
    assert_healthy(kbroker, kt, "oversized")


def test_negative_size_is_closed(kbroker, kt):
    with connect(kbroker) as s:
        s.sendall(struct.pack(">i", -1))
        assert_closed_by_broker(s, "negative size prefix")
    assert_healthy(kbroker, kt, "negative")


def test_truncated_frame_then_close(kbroker, kt):
    for cut in (2, 4 + 5, 4 + 30):  # inside the size prefix, inside the header, inside the body
        full = kt.frame(kt.request_header_v1(3, 1, 11) + struct.pack(">i", 1) + b"\x00\x05hello" + b"\x00" * 64)
        with connect(kbroker) as s:
            s.sendall(full[:cut])
        # the peer went away mid-request: the broker must shrug it off
    assert_healthy(kbroker, kt, "truncated")


def test_garbage_bytes_are_closed(kbroker, kt):
    # An HTTP request: its first four bytes read as a size of ~1.2 GB.
    with connect(kbroker) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: kbroker\r\n\r\n")
        assert_closed_by_broker(s, "an HTTP request")
    # A well-framed payload too short to hold a request header.
    with connect(kbroker) as s:
        s.sendall(kt.frame(b"\x00\x12\x00"))
        assert_closed_by_broker(s, "a 3-byte frame")
    # A frame whose header names a client_id longer than the frame.
    with connect(kbroker) as s:
        s.sendall(kt.frame(struct.pack(">hhih", 18, 0, 1, 500) + b"short"))
        assert_closed_by_broker(s, "a client_id length past the frame end")
    assert_healthy(kbroker, kt, "garbage")


def test_unknown_api_key_is_closed(kbroker, kt):
    with connect(kbroker) as s:
        s.sendall(kt.frame(kt.request_header_v1(9999, 0, 5)))
        assert_closed_by_broker(s, "api_key 9999")
    assert_healthy(kbroker, kt, "unknown-api")


def test_unsupported_version_of_other_api_is_closed(kbroker, kt):
    # Kafka answers only ApiVersions with UNSUPPORTED_VERSION; any other API at an unknown version
    # cannot be parsed, and the connection is closed.
    with connect(kbroker) as s:
        s.sendall(kt.frame(kt.request_header_v1(3, 999, 6) + b"\x00" * 8))
        assert_closed_by_broker(s, "Metadata v999")
    assert_healthy(kbroker, kt, "metadata-v999")


# ---- a null where the version's schema allows none ----------------------------------------------

NULL_ARRAY = struct.pack(">i", -1)
NULLS_NOT_ALLOWED = {  # the bodies a fuzzer found reaching handlers with a null array (Kafka's parser refuses them)
    "CreateTopics v4 topics": (19, 4, NULL_ARRAY + struct.pack(">i?", 30000, False)),
    "DescribeGroups v1 groups": (15, 1, NULL_ARRAY),
    "DescribeGroups v4 groups": (15, 4, NULL_ARRAY + b"\x00"),
    "DeleteGroups v1 groups_names": (42, 1, NULL_ARRAY),
}


def test_null_where_the_schema_allows_none_is_closed(kbroker, kt):
    """Each frame closes its connection like any malformed request (one INFO line, no ERROR or
    traceback), while a connection opened before keeps being answered."""
    log_start = kbroker.stderr_path.stat().st_size if kbroker.proc is not None else None
    with connect(kbroker) as other:
        for correlation_id, (what, (key, version, body)) in enumerate(NULLS_NOT_ALLOWED.items(), 100):
            with connect(kbroker) as s:
                s.sendall(kt.frame(kt.request_header_v1(key, version, correlation_id) + body))
                assert_closed_by_broker(s, what)
            other.sendall(kt.api_versions_v0_request(correlation_id))
            assert kt.parse_api_versions_v0(kt.recv_frame(other))[:2] == (correlation_id, 0), what
    assert_healthy(kbroker, kt, "null-arrays")
    if log_start is not None:  # a broker process of ours: its log tells how each was handled
        with open(kbroker.stderr_path, "rb") as log:
            log.seek(log_start)
            text = log.read().decode(errors="replace")
        assert "ERROR" not in text and "Traceback" not in text, text[-3000:]
        refused = [line for line in text.splitlines() if "closing connection" in line]
        assert len(refused) == len(NULLS_NOT_ALLOWED), text[-3000:]
        assert all("INFO" in line and "does not allow to be null" in line for line in refused), refused


# ---- ApiVersions at an unknown version ---------------------------------------------------------


@pytest.mark.parametrize("version", [127, 32767])
def test_api_versions_unknown_high_version(kbroker, kt, version):
    with connect(kbroker) as s:
        # Clients send newer ApiVersions requests in flexible format (header v2); the broker cannot
        # know the layout, so it must answer from the header's first fields alone.
        s.sendall(kt.frame(kt.request_header_v1(18, version, 4242) + b"\x00"
                           + b"\x0fkbroker-compat\x061.0.0\x00"))
        resp = kt.recv_frame(s)
    corr, err, ranges = kt.parse_api_versions_v0(resp)  # strict: response header v0, v0 body, exact length
    assert corr == 4242
    assert err == 35, f"error_code {err}, expected UNSUPPORTED_VERSION (35)"
    by_key = {k: (lo, hi) for k, lo, hi in ranges}
    assert 18 in by_key, f"the ApiVersions range is missing from the error response: {ranges}"
    lo, hi = by_key[18]
    assert lo == 0 and 3 <= hi < version, f"ApiVersions range {lo}..{hi}"
    assert_healthy(kbroker, kt, f"apiversions-v{version}")


# ---- Produce with a corrupted CRC ------------------------------------------------------------


def test_produce_corrupt_crc(kbroker, kt):
    kafka = kt.require_module("kafka")
    topic = kt.topic_name("bad", "crc")
    admin = kafka.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()
    now = int(time.time() * 1000)
    with connect(kbroker, timeout=15) as s:
        # control: the same hand-written request with a good CRC is accepted
        s.sendall(produce_v3(topic, 0, record_batch_v2([(b"k0", b"good")], now), 21, kt))
        corr, parts, _ = parse_produce_v3_response(kt.recv_frame(s))
        assert corr == 21 and parts == {(topic, 0): (0, 0)}, parts
        # the corrupted one is refused with CORRUPT_MESSAGE, and the connection stays usable
        s.sendall(produce_v3(topic, 0, record_batch_v2([(b"k1", b"bad"), (b"k2", b"bad")], now, corrupt_crc=True), 22, kt))
        corr, parts, _ = parse_produce_v3_response(kt.recv_frame(s))
        assert corr == 22
        assert parts[(topic, 0)][0] == 2, f"error_code {parts[(topic, 0)][0]}, expected CORRUPT_MESSAGE (2)"
        s.sendall(produce_v3(topic, 0, record_batch_v2([(b"k3", b"good again")], now), 23, kt))
        corr, parts, _ = parse_produce_v3_response(kt.recv_frame(s))
        assert corr == 23 and parts == {(topic, 0): (0, 1)}, parts
    consumer = kafka.KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=None, enable_auto_commit=False,
                                   request_timeout_ms=15000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        assert consumer.end_offsets([tp], timeout_ms=15000)[tp] == 2, "the corrupt batch was appended"
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        recs = []
        deadline = time.monotonic() + 20
        while len(recs) < 2 and time.monotonic() < deadline:
            for rs in consumer.poll(timeout_ms=500).values():
                recs.extend(rs)
    finally:
        consumer.close()
    assert [(r.offset, r.key, r.value) for r in recs] == [(0, b"k0", b"good"), (1, b"k3", b"good again")]
    assert_healthy(kbroker, kt, "corrupt-crc")
