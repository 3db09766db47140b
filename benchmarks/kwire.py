"""Owns the raw-socket Kafka requests the harness sends itself: ApiVersions v0 (readiness probe,
idle connections), Metadata v1 for all topics (timed; parsed to count topics/partitions and, for the
cluster phase, to read brokers, controller, leaders and ISRs) and
pipelined single-partition Produce v3 (the broker's cost per request).
No client library involved, so these time the broker and nothing else; and no kbroker code either
(the encoders here are deliberately the harness's own), so they load Kafka or any other broker
the same way."""

from __future__ import annotations

import socket
import struct
import threading
import time

from crc32c import crc32c

CLIENT_ID = b"kbroker-bench"
API_VERSIONS = 18
METADATA = 3
PRODUCE = 0


def request_bytes(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A size-prefixed request with a v1 request header (api_key, version, correlation, client_id)."""
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID + body
    return struct.pack(">i", len(payload)) + payload


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_response(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def api_versions(sock: socket.socket, correlation_id: int = 1) -> int:
    """Send ApiVersions v0 on an open socket; return the error code of the answer (0 = ok)."""
    sock.sendall(request_bytes(API_VERSIONS, 0, correlation_id))
    resp = read_response(sock)
    corr, error = struct.unpack_from(">ih", resp, 0)
    if corr != correlation_id:
        raise ConnectionError(f"ApiVersions: correlation id {corr} != {correlation_id}")
    return error


def probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if the broker accepts a connection and answers ApiVersions without error."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return api_versions(sock) == 0
    except OSError:
        return False


def metadata_all(host: str, port: int, timeout: float = 60.0) -> tuple[float, int, dict]:
    """Time one Metadata v1 request for all topics on a fresh, already-connected socket.

    Returns (seconds from send to the last byte of the response, response bytes, summary)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = request_bytes(METADATA, 1, 7, struct.pack(">i", -1))  # null topics = all topics
        t0 = time.perf_counter()
        sock.sendall(req)
        resp = read_response(sock)
        elapsed = time.perf_counter() - t0
    return elapsed, len(resp) + 4, parse_metadata_v1(resp)


def parse_metadata_v1(buf: bytes) -> dict:
    off = 4  # correlation id

    def i16():
        nonlocal off
        (v,) = struct.unpack_from(">h", buf, off)
        off += 2
        return v

    def i32():
        nonlocal off
        (v,) = struct.unpack_from(">i", buf, off)
        off += 4
        return v

    def string():
        nonlocal off
        n = i16()
        if n < 0:
            return None
        s = buf[off:off + n].decode()
        off += n
        return s

    brokers = []
    for _ in range(i32()):  # brokers: node id, host, port, rack
        brokers.append(i32()); string(); i32(); string()
    controller = i32()
    topics = partitions = errors = 0
    per_topic: dict[str, int] = {}
    layout: dict[str, dict[int, tuple[int, list[int], list[int]]]] = {}
    for _ in range(i32()):
        terr = i16(); name = string(); off += 1
        topics += 1
        errors += terr != 0
        per_topic[name] = 0
        parts = layout[name] = {}
        for _ in range(i32()):
            per_topic[name] += 1
            perr = i16(); index = i32(); leader = i32()
            replicas = [i32() for _ in range(i32())]
            isr = [i32() for _ in range(i32())]
            parts[index] = (leader, replicas, isr)
            partitions += 1
            errors += perr != 0
    return {"topics": topics, "partitions": partitions, "errors": errors, "per_topic": per_topic,
            "brokers": sorted(brokers), "controller": controller, "layout": layout}


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def record_batch(count: int, value: bytes, timestamp_ms: int) -> bytes:
    """A magic-v2 record batch of `count` records (no key, no headers), CRC-32C filled in."""
    records = bytearray()
    for i in range(count):
        body = b"\0" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(value)) + value + _varint(0)
        records += _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, count - 1, timestamp_ms, timestamp_ms, -1, -1, -1, count) + records
    crc = crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def produce_v3(correlation_id: int, topic: str, partition: int, batch: bytes, acks: int = 1) -> bytes:
    name = topic.encode()
    body = (struct.pack(">hhi", -1, acks, 30000) + struct.pack(">ih", 1, len(name)) + name
            + struct.pack(">iii", 1, partition, len(batch)) + batch)
    return request_bytes(PRODUCE, 3, correlation_id, body)


def produce_pipelined(host: str, port: int, topic: str, partitions: int, batch: bytes, count: int,
                      deadline: float) -> dict:
    """Send `count` Produce v3 requests (acks=1, one batch for partition i % partitions each) as fast
    as the socket takes them while a second thread reads the answers; errors are counted."""
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return produce_pipelined_on(sock, topic, partitions, batch, count, deadline)


def produce_pipelined_on(sock: socket.socket, topic: str, partitions: int, batch: bytes, count: int,
                         deadline: float) -> dict:
    """produce_pipelined on a socket already connected (and, on a SASL listener, authenticated)."""
    frames = [produce_v3(0, topic, p, batch) for p in range(partitions)]
    result = {"answered": 0, "errors": 0, "first_error": None}

    def read_answers() -> None:
        try:
            for _ in range(count):
                resp = read_response(sock)
                # correlation, [topic: name, [partition, error, ...]]
                (name_len,) = struct.unpack_from(">h", resp, 8)
                (error,) = struct.unpack_from(">h", resp, 10 + name_len + 8)
                if error:
                    result["errors"] += 1
                    result["first_error"] = result["first_error"] or f"error code {error}"
                result["answered"] += 1
        except OSError as exc:
            result["first_error"] = result["first_error"] or str(exc)

    reader = threading.Thread(target=read_answers, daemon=True)
    t0 = time.perf_counter()
    reader.start()
    sent = 0
    for i in range(count):
        if not i & 255 and time.perf_counter() > deadline:
            break
        frame = bytearray(frames[i % partitions])
        struct.pack_into(">i", frame, 8, i)  # correlation id
        sock.sendall(frame)
        sent += 1
    reader.join(max(1.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - t0
    return {"sent": sent, "seconds": elapsed, "aborted": sent < count or result["answered"] < sent, **result}
