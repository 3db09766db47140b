"""The broker's advertised ApiVersions: a subset of what kio (the codec it is built on) implements,
the same in v0 and v3, and covering what the stock clients in this suite need."""

from __future__ import annotations

import socket
import struct

import pytest

pytestmark = pytest.mark.timeout(60)

# API key -> minimum max-version the stock clients here need (Java 3.9 idempotent producer,
# librdkafka 2.x, kafka-python 3, aiokafka).
NEEDED = {
    0: 3,   # Produce (v3: magic-2 batches, headers)
    1: 4,   # Fetch (v4: magic-2 batches, isolation level)
    2: 1,   # ListOffsets (v1: by timestamp, single offset)
    3: 1,   # Metadata
    18: 3,  # ApiVersions (flexible v3 is what new clients send first)
    19: 0,  # CreateTopics
    20: 0,  # DeleteTopics
    22: 0,  # InitProducerId (idempotent producers)
}


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def skip_tagged(buf: bytes, pos: int) -> int:
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def api_versions_v3(kbroker, kt) -> tuple[int, list[tuple[int, int, int]]]:
    header = kt.request_header_v1(18, 3, 99) + b"\x00"  # request header v2: + tagged fields
    body = b"\x0fkbroker-compat" + b"\x061.0.0" + b"\x00"
    with socket.create_connection((kbroker.host, kbroker.port), timeout=5) as s:
        s.settimeout(5)
        s.sendall(kt.frame(header + body))
        resp = kt.recv_frame(s)
    # ApiVersions responses always use response header v0 (no tagged fields), even at v3.
    corr, err = struct.unpack_from(">ih", resp, 0)
    assert corr == 99
    n, pos = read_uvarint(resp, 6)
    ranges = []
    for _ in range(n - 1):
        ranges.append(struct.unpack_from(">hhh", resp, pos))
        pos = skip_tagged(resp, pos + 6)
    (_throttle,) = struct.unpack_from(">i", resp, pos)
    pos = skip_tagged(resp, pos + 4)
    assert pos == len(resp), f"{len(resp) - pos} trailing bytes after the ApiVersions v3 body"
    return err, ranges


# Versions kio does not generate, served by kbroker's own codecs: Produce v0-2 (kbroker/wire/legacy.py,
# produce_request.py), and the old versions Kafka 3.9 serves (Fetch v0-3, ListOffsets v0, ...),
# decoded by kbroker/wire/schema_codec.py from Kafka 3.9's JSON (kbroker/wire/interbroker.OLD_VERSIONS).
def _hand_written() -> set[tuple[int, int]]:
    from kbroker.wire.interbroker import OLD_VERSIONS

    return {(0, 0), (0, 1), (0, 2)} | {(key, v) for key, old in OLD_VERSIONS.items() for v in old.versions}


HAND_WRITTEN = _hand_written()


def test_advertised_ranges_are_implemented_by_kio(kbroker, kt):
    from kio.schema.index import api_key_map, schema_name_map
    from kio.static.constants import EntityType

    ranges = kt.api_versions(kbroker.host, kbroker.port)
    assert ranges, "empty ApiVersions response"
    keys = [k for k, _, _ in ranges]
    assert len(keys) == len(set(keys)), f"duplicate api keys advertised: {keys}"
    problems = []
    for key, lo, hi in ranges:
        if lo < 0 or hi < lo:
            problems.append(f"api {key}: bad range {lo}..{hi}")
            continue
        name = api_key_map.get(key)
        if name is None:
            problems.append(f"api {key}: unknown to kio")
            continue
        for v in range(lo, hi + 1):
            if (key, v) in HAND_WRITTEN:
                continue
            entities = schema_name_map.get(name, {}).get(v, {})
            if EntityType.request not in entities or EntityType.response not in entities:
                problems.append(f"{name} ({key}) v{v}: kio has no request/response schema")
    assert not problems, "advertised but not implemented by kio:\n" + "\n".join(problems)
    from kbroker.api.dispatch import DISPATCH

    # the single node: the inter-broker APIs are neither served nor advertised, nor the SASL ones on
    # a plaintext listener, nor share groups' (group.coordinator.rebalance.protocols has no share by default)
    assert {k: (lo, hi) for k, lo, hi in ranges} == {
        k: (spec.min_version, spec.max_version) for k, spec in DISPATCH.items()
        if not spec.cluster_only and not spec.sasl_only and spec.group_protocol != "share"}


def test_v3_matches_v0_and_covers_clients(kbroker, kt):
    v0 = sorted(kt.api_versions(kbroker.host, kbroker.port))
    err, v3 = api_versions_v3(kbroker, kt)
    assert err == 0
    assert sorted(v3) == v0, "ApiVersions v3 and v0 advertise different ranges"
    by_key = {k: (lo, hi) for k, lo, hi in v0}
    missing = {k: need for k, need in NEEDED.items() if k not in by_key or by_key[k][1] < need}
    assert not missing, f"APIs the stock clients need are missing or too old (key: needed max): {missing}; have {by_key}"


def _message_v1(key: bytes, value: bytes, ts: int) -> bytes:
    """A legacy magic-1 message (the only formats Produce v0-v2 can carry), in a message set."""
    import zlib

    rest = struct.pack(">bbq", 1, 0, ts) + struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(rest)) + rest
    return struct.pack(">qi", 0, len(msg)) + msg


def test_advertised_legacy_produce_versions_accept_legacy_messages(kbroker, kt):
    """Kafka 3.9 takes Produce v0-v2 with magic 0/1 message sets and converts them to v2 batches.
    A broker that advertises those versions must accept what they carry (or not advertise them)."""
    import time

    by_key = {k: (lo, hi) for k, lo, hi in kt.api_versions(kbroker.host, kbroker.port)}
    legacy = [v for v in range(by_key[0][0], min(by_key[0][1], 2) + 1)]
    if not legacy:
        return  # Produce starts at v3: nothing legacy is promised
    kafka = kt.require_module("kafka")
    topic = kt.topic_name("legacy-produce")
    admin = kafka.KafkaAdminClient(bootstrap_servers=kbroker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()
    t = topic.encode()
    errors = {}
    for v in legacy:
        ms = _message_v1(b"k%d" % v, b"legacy produce v%d" % v, int(time.time() * 1000))
        body = (struct.pack(">hi", -1, 10000) + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
                + struct.pack(">i", 1) + struct.pack(">ii", 0, len(ms)) + ms)
        with socket.create_connection((kbroker.host, kbroker.port), timeout=10) as s:
            s.settimeout(10)
            s.sendall(kt.frame(kt.request_header_v1(0, v, 30 + v) + body))
            resp = kt.recv_frame(s)
        corr, = struct.unpack_from(">i", resp, 0)
        assert corr == 30 + v
        (err,) = struct.unpack_from(">h", resp, 4 + 4 + 2 + len(t) + 4 + 4)
        errors[v] = err
    assert all(e == 0 for e in errors.values()), (
        f"Produce v{legacy[0]}-v{legacy[-1]} advertised, but a magic-1 message set is refused: error codes {errors} "
        f"(87 = INVALID_RECORD)")
