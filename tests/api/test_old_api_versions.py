"""The versions Kafka 3.9 serves and Kafka 4 removed (KIP-896), one raw-protocol test each: request
bytes written by hand from Kafka 3.9's JSON definitions (kbroker/wire/schemas/), answers parsed by
hand, through the dispatch table as a connection's frames go.

Fetch v0–3 answers with message sets (magic 0 for v0–1, magic 1 for v2–3) down-converted from the
log's record batches, unless the topic says `message.downconversion.enable=false`; a zstd topic or
batch is UNSUPPORTED_COMPRESSION_TYPE below Fetch v10."""

from __future__ import annotations

import functools
import struct
import zlib

import pytest
import trio

from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.control import COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    Record,
    build_batch,
    validate_batches,
)

FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 1, 2, 8, 9
CREATE_TOPICS, DELETE_TOPICS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS = 19, 20, 23, 32
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, API_VERSIONS = 34, 35, 18

# Kafka 3.9's ranges for the client APIs whose minimum Kafka 4 raised
KAFKA_39 = {FETCH: (0, 17), LIST_OFFSETS: (0, 9), OFFSET_COMMIT: (0, 9), OFFSET_FETCH: (0, 9),
            CREATE_TOPICS: (0, 7), DELETE_TOPICS: (0, 6), OFFSET_FOR_LEADER_EPOCH: (0, 4),
            DESCRIBE_CONFIGS: (0, 4), ALTER_REPLICA_LOG_DIRS: (0, 2), DESCRIBE_LOG_DIRS: (0, 4)}


# -- hand-written encoding (classic, non-flexible: every old version is) ------------------------------

def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)
def boolean(v): return b"\x01" if v else b"\x00"


def string(v: str | None) -> bytes:
    return i16(-1) if v is None else i16(len(v.encode())) + v.encode()


def array(items, encode=lambda x: x) -> bytes:
    return i32(-1) if items is None else i32(len(items)) + b"".join(encode(x) for x in items)


def request(api_key: int, version: int, body: bytes, correlation_id: int = 42) -> bytearray:
    """Request header v1 (api key, version, correlation id, client id) and the body: the frame
    without its size prefix, as the server hands it to the dispatch table."""
    return bytearray(i16(api_key) + i16(version) + i32(correlation_id) + string("old-client") + body)


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, fmt: str):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def i8(self): return self._take(">b")
    def i16(self): return self._take(">h")
    def i32(self): return self._take(">i")
    def i64(self): return self._take(">q")
    def boolean(self): return self._take(">?")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return v

    def bytes_(self):
        n = self.i32()
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return v

    def array(self, read):
        n = self.i32()
        return None if n < 0 else [read() for _ in range(n)]

    def end(self):
        assert self.pos == len(self.data), f"{len(self.data) - self.pos} bytes left unread"


def call(broker, api_key: int, version: int, body: bytes) -> Reader:
    frame = request(api_key, version, body)
    response = trio.run(handle_frame, broker, frame)
    if isinstance(response, list):
        response = b"".join(c if isinstance(c, bytes) else c.read() for c in response)
    (size,) = struct.unpack_from(">i", response, 0)
    assert size == len(response) - 4
    r = Reader(response[4:])
    assert r.i32() == 42  # response header v0: the correlation id alone
    return r


# -- message sets (magic 0 and 1), read by hand ----------------------------------------------------

def _decompress(codec: int, data: bytes, magic: int) -> bytes:
    from kafka import codec as kc

    if codec == COMPRESSION_GZIP:
        return kc.gzip_decode(data)
    if codec == COMPRESSION_SNAPPY:
        return kc.snappy_decode(data)
    return kc.lz4_decode_old_kafka(data) if magic == 0 else kc.lz4_decode(data)


def messages(buf: bytes, magic: int) -> list[tuple]:
    """(offset, timestamp or None, key, value) per message, compressed sets opened (inner offsets
    of magic 1 are relative: the wrapper holds the last one's absolute offset)."""
    out = []
    pos = 0
    while pos + 12 <= len(buf):
        offset, size = struct.unpack_from(">qi", buf, pos)
        body = buf[pos + 12:pos + 12 + size]
        if len(body) < size:
            break  # a partial message at the end: old consumers skip it
        assert zlib.crc32(body[4:]) == struct.unpack_from(">I", body)[0]
        r = Reader(body[4:])
        assert r.i8() == magic
        attributes = r.i8()
        ts = r.i64() if magic == 1 else None
        key, value = r.bytes_(), r.bytes_()
        r.end()
        if attributes & 0x07:
            inner = messages(_decompress(attributes & 0x07, value, magic), magic)
            if magic == 1:
                inner = [(offset - inner[-1][0] + o, t, k, v) for o, t, k, v in inner]
            out += inner
        else:
            out.append((offset, ts, key, value))
        pos += 12 + size
    return out


# -- the broker -------------------------------------------------------------------------------------

VALUES = {codec: [(b"key-%d-%d" % (codec, i), b"value-%d-%d" % (codec, i)) for i in range(3)]
          for codec in (COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4)}
TS = 1_700_000_000_000


def append(broker, topic: str, buf: bytes, from_client: bool = True) -> None:
    partition = broker.replica_manager.get_leader_partition(TopicPartition(topic, 0))
    data = bytearray(buf)
    partition.append_records_to_leader(data, validate_batches(data, from_client=from_client), 1,
                                       from_client=from_client)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path_factory.mktemp("old"))}), ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "t", num_partitions=1))
    trio.run(functools.partial(b.create_topic, "nodc", num_partitions=1,
                               configs={"message.downconversion.enable": "false"}))
    trio.run(functools.partial(b.create_topic, "zt", num_partitions=1, configs={"compression.type": "zstd"}))
    trio.run(functools.partial(b.create_topic, "zb", num_partitions=1))
    # "t": 0-2 none, 3-5 gzip, 6-8 snappy, 9-11 lz4 (headers on every record), a commit marker at 12
    offset = 0
    for codec, kvs in VALUES.items():
        recs = [Record(i, TS + offset + i, k, v, [("h", b"dropped")]) for i, (k, v) in enumerate(kvs)]
        append(b, "t", build_batch(recs, compression=codec, producer_id=1, producer_epoch=0, base_sequence=offset,
                                   is_transactional=True))
        offset += 3
    append(b, "t", build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 0), producer_id=1, producer_epoch=0,
                                              timestamp=TS), from_client=False)
    append(b, "nodc", build_batch([Record(0, TS, None, b"x", [])]))
    append(b, "zt", build_batch([Record(0, TS, None, b"x", [])]))
    append(b, "zb", build_batch([Record(0, TS, None, b"plain", [])]))
    append(b, "zb", build_batch([Record(0, TS, None, b"zstd", [])], compression=COMPRESSION_ZSTD))
    yield b
    b.shutdown()


ALL_T = [(o, TS + o, k, v) for o, (k, v) in enumerate(kv for kvs in VALUES.values() for kv in kvs)]


# -- ApiVersions ------------------------------------------------------------------------------------

def test_api_versions_lists_kafka_39s_minimums(broker):
    r = call(broker, API_VERSIONS, 0, b"")
    assert r.i16() == 0
    ranges = {k: (lo, hi) for k, lo, hi in r.array(lambda: (r.i16(), r.i16(), r.i16()))}
    for key, (lo, hi) in KAFKA_39.items():
        assert ranges[key] == (lo, hi) == (DISPATCH[key].min_version, DISPATCH[key].max_version)


# -- Fetch v0-3 --------------------------------------------------------------------------------------

def fetch_body(version: int, topic: str, offset: int, partition_max: int = 1 << 20, max_wait: int = 0) -> bytes:
    body = i32(-1) + i32(max_wait) + i32(0)  # replica id, max wait ms, min bytes
    if version >= 3:
        body += i32(1 << 20)  # max bytes
    return body + array([topic], lambda t: string(t) + array([0], lambda p: i32(p) + i64(offset) + i32(partition_max)))


def fetch(broker, version: int, topic: str, offset: int = 0, partition_max: int = 1 << 20):
    r = call(broker, FETCH, version, fetch_body(version, topic, offset, partition_max))
    throttle = r.i32() if version >= 1 else None
    topics = r.array(lambda: (r.string(), r.array(lambda: (r.i32(), r.i16(), r.i64(), r.bytes_()))))
    r.end()
    assert throttle in (None, 0)
    [(name, [(partition, error, hw, records)])] = topics
    assert (name, partition) == (topic, 0)
    return error, hw, records


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_answers_message_sets_of_every_codec(broker, version):
    magic = 0 if version <= 1 else 1
    error, hw, records = fetch(broker, version, "t")
    assert (error, hw) == (ErrorCode.none, 13)
    want = [(o, ts if magic == 1 else None, k, v) for o, ts, k, v in ALL_T]
    assert messages(records, magic) == want  # the marker skipped, headers gone, keys and values kept


@pytest.mark.parametrize("version", [0, 2])
def test_fetch_from_inside_a_batch(broker, version):
    magic = 0 if version <= 1 else 1
    _, _, plain = fetch(broker, version, "t", offset=1)
    assert [m[0] for m in messages(plain, magic)][:3] == [1, 2, 3]  # uncompressed: from the fetch offset
    _, _, gzip = fetch(broker, version, "t", offset=4)
    assert [m[0] for m in messages(gzip, magic)][:3] == [3, 4, 5]  # compressed: the whole set


def test_fetch_v0_to_v2_keep_the_partition_limit_hard(broker):
    """Before KIP-74 (v3) a batch larger than the partition's limit is not sent: the answer is empty."""
    for version in (0, 1, 2):
        assert fetch(broker, version, "t", partition_max=40)[2] in (b"", None)
    error, _, records = fetch(broker, 3, "t", partition_max=40)
    assert error == ErrorCode.none and [m[0] for m in messages(records, 1)] == [0, 1, 2]


def test_fetch_at_the_end_and_past_it(broker):
    assert fetch(broker, 2, "t", offset=13)[:2] == (ErrorCode.none, 13)
    assert fetch(broker, 2, "t", offset=99)[0] == ErrorCode.offset_out_of_range


def test_downconversion_disabled_is_unsupported_version(broker):
    assert fetch(broker, 2, "nodc") == (ErrorCode.unsupported_version, -1, b"")
    assert _modern_fetch_error(broker, 4, "nodc") == ErrorCode.none  # record batches need no conversion


def test_zstd_topic_is_unsupported_compression_type_below_v10(broker):
    assert fetch(broker, 3, "zt") == (ErrorCode.unsupported_compression_type, -1, b"")
    for version in (4, 9):  # Kafka's rule for every version before zstd (KIP-110, Fetch v10)
        assert _modern_fetch_error(broker, version, "zt") == ErrorCode.unsupported_compression_type
    assert _modern_fetch_error(broker, 10, "zt") == ErrorCode.none


def test_a_zstd_batch_ends_the_answer_and_is_refused_when_first(broker):
    error, _, records = fetch(broker, 2, "zb")
    assert error == ErrorCode.none and [m[3] for m in messages(records, 1)] == [b"plain"]
    assert fetch(broker, 2, "zb", offset=1)[0] == ErrorCode.unsupported_compression_type


def _modern_fetch_error(broker, version: int, topic: str) -> int:
    from kbroker.wire.protocol import decode_response, encode_request

    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    chunks = trio.run(handle_frame, broker, bytearray(encode_request(FETCH, version, 3, "t", body)[4:]))
    raw = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
    return decode_response(FETCH, version, raw[4:])[1].responses[0].partitions[0].error_code


# -- ListOffsets v0 ----------------------------------------------------------------------------------

def list_offsets_v0(broker, topic: str, timestamp: int, max_num: int = 10, partition: int = 0):
    body = i32(-1) + array([topic], lambda t: string(t) + array([partition],
                                                                lambda p: i32(p) + i64(timestamp) + i32(max_num)))
    r = call(broker, LIST_OFFSETS, 0, body)
    topics = r.array(lambda: (r.string(), r.array(lambda: (r.i32(), r.i16(), r.array(r.i64)))))
    r.end()
    [(name, [(p, error, offsets)])] = topics
    assert (name, p) == (topic, partition)
    return error, offsets


def test_list_offsets_v0(broker):
    assert list_offsets_v0(broker, "t", -1) == (ErrorCode.none, [13, 0])  # the end, then segment starts
    assert list_offsets_v0(broker, "t", -1, max_num=1) == (ErrorCode.none, [13])
    assert list_offsets_v0(broker, "t", -2) == (ErrorCode.none, [0])
    assert list_offsets_v0(broker, "t", 0) == (ErrorCode.none, [])  # no segment was modified that early
    assert list_offsets_v0(broker, "t", -3) == (ErrorCode.unsupported_version, [])  # v0 knows -1 and -2 only
    assert list_offsets_v0(broker, "t", -1, partition=5)[0] == ErrorCode.unknown_topic_or_partition


# -- OffsetCommit v0, v1 and OffsetFetch v0 -----------------------------------------------------------

def offset_commit(broker, version: int, group: str, offset: int, metadata: str | None = "meta") -> list:
    head = string(group) + (i32(-1) + string("") if version == 1 else b"")
    part = i32(0) + i64(offset) + (i64(-1) if version == 1 else b"") + string(metadata)
    r = call(broker, OFFSET_COMMIT, version, head + array(["t"], lambda t: string(t) + array([part])))
    topics = r.array(lambda: (r.string(), r.array(lambda: (r.i32(), r.i16()))))
    r.end()
    return topics


def offset_fetch_v0(broker, group: str, partitions: list[int]) -> list:
    r = call(broker, OFFSET_FETCH, 0, string(group) + array(["t"], lambda t: string(t) + array(partitions, i32)))
    topics = r.array(lambda: (r.string(), r.array(lambda: (r.i32(), r.i64(), r.string(), r.i16()))))
    r.end()
    return topics


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_then_offset_fetch_v0(broker, version):
    group = f"old-group-{version}"
    assert offset_commit(broker, version, group, 7) == [("t", [(0, ErrorCode.none)])]
    assert offset_fetch_v0(broker, group, [0, 3]) == [("t", [(0, 7, "meta", ErrorCode.none),
                                                             (3, -1, "", ErrorCode.none)])]


# -- CreateTopics v0, v1 and DeleteTopics v0 -------------------------------------------------------------

def create_topics(broker, version: int, name: str, partitions: int, validate_only: bool = False) -> list:
    topic = string(name) + i32(partitions) + i16(1) + array([]) + array([("retention.ms", "1000")],
                                                                       lambda c: string(c[0]) + string(c[1]))
    body = array([topic]) + i32(5000) + (boolean(validate_only) if version == 1 else b"")
    r = call(broker, CREATE_TOPICS, version, body)
    topics = r.array(lambda: (r.string(), r.i16(), r.string() if version == 1 else "-"))
    r.end()
    return topics


def test_create_topics_v0_v1_and_delete_topics_v0(broker):
    assert create_topics(broker, 1, "made-v1", 2, validate_only=True) == [("made-v1", ErrorCode.none, None)]
    assert broker.metadata.topic("made-v1") is None
    assert create_topics(broker, 0, "made-v0", 2) == [("made-v0", ErrorCode.none, "-")]
    info = broker.metadata.topic("made-v0")
    assert (info.num_partitions, info.configs) == (2, {"retention.ms": "1000"})
    [(name, code, message)] = create_topics(broker, 1, "made-v0", 2)
    assert (name, code) == ("made-v0", ErrorCode.topic_already_exists) and "already exists" in message

    r = call(broker, DELETE_TOPICS, 0, array(["made-v0", "never-made"], string) + i32(5000))
    assert r.array(lambda: (r.string(), r.i16())) == [("made-v0", ErrorCode.none),
                                                     ("never-made", ErrorCode.unknown_topic_or_partition)]
    r.end()
    assert broker.metadata.topic("made-v0") is None


# -- DescribeConfigs v0 -----------------------------------------------------------------------------------

def test_describe_configs_v0(broker):
    keys = ["retention.ms", "message.downconversion.enable"]
    r = call(broker, DESCRIBE_CONFIGS, 0, array([(2, "nodc", keys)], lambda x: i8(x[0]) + string(x[1])
                                                   + array(x[2], string)))
    assert r.i32() == 0
    results = r.array(lambda: (r.i16(), r.string(), r.i8(), r.string(), r.array(
        lambda: (r.string(), r.string(), r.boolean(), r.boolean(), r.boolean()))))
    r.end()
    # v0's IsDefault in place of the source: the topic's own override is not a default
    assert results == [(0, None, 2, "nodc", [("message.downconversion.enable", "false", False, False, False),
                                             ("retention.ms", "1209600000", False, True, False)])]


# -- OffsetForLeaderEpoch v0, v1 --------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch(broker, version):
    body = array([("t", [(0, 0), (9, 0)])], lambda t: string(t[0]) + array(t[1], lambda p: i32(p[0]) + i32(p[1])))
    r = call(broker, OFFSET_FOR_LEADER_EPOCH, version, body)
    topics = r.array(lambda: (r.string(), r.array(
        lambda: (r.i16(), r.i32(), r.i32() if version == 1 else None, r.i64()))))
    r.end()
    epoch = 0 if version == 1 else None
    assert topics == [("t", [(ErrorCode.none, 0, epoch, 13),
                             (ErrorCode.unknown_topic_or_partition, 9, -1 if version == 1 else None, -1)])]


# -- DescribeLogDirs v0 and AlterReplicaLogDirs v0 ----------------------------------------------------------

def test_describe_log_dirs_v0(broker):
    r = call(broker, DESCRIBE_LOG_DIRS, 0, array([("t", [0])], lambda t: string(t[0]) + array(t[1], i32)))
    assert r.i32() == 0
    results = r.array(lambda: (r.i16(), r.string(), r.array(lambda: (r.string(), r.array(
        lambda: (r.i32(), r.i64(), r.i64(), r.boolean()))))))
    r.end()
    [(error, log_dir, [(name, [(partition, size, lag, future)])])] = results
    assert (error, name, partition, lag, future) == (0, "t", 0, 0, False) and size > 0
    assert log_dir == broker.config.get("log.dirs")


def test_alter_replica_log_dirs_v0(broker):
    log_dir = broker.config.get("log.dirs")
    body = array([(log_dir, [("t", [0])])], lambda d: string(d[0]) + array(
        d[1], lambda t: string(t[0]) + array(t[1], i32)))
    r = call(broker, ALTER_REPLICA_LOG_DIRS, 0, body)
    assert r.i32() == 0
    assert r.array(lambda: (r.string(), r.array(lambda: (r.i32(), r.i16())))) == [("t", [(0, ErrorCode.none)])]
    r.end()


# -- random well-formed requests of every old version: answered, never a handler's crash ------------------

def _strategy(schema: dict, fields: list, version: int):
    from hypothesis import strategies as st

    from kbroker.wire.schema_codec import _version_range, to_snake_case

    common = {s["name"]: s["fields"] for s in schema.get("commonStructs", ())}

    def value(kind: str, spec: dict, element: bool = False):
        if kind.startswith("[]"):
            items = st.lists(value(kind[2:], spec, element=True), max_size=3)
            return st.one_of(st.none(), items) if version in _version_range(spec.get("nullableVersions")) else items
        bits = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}.get(kind)
        if bits:
            return st.one_of(st.integers(-3, 20), st.integers(-(1 << bits), (1 << bits) - 1))
        if kind == "bool":
            return st.booleans()
        if kind == "string":
            text = st.one_of(st.sampled_from(["t", "nodc", "zb", "g", ""]), st.text(max_size=20))
            nullable = not element and version in _version_range(spec.get("nullableVersions"))
            return st.one_of(st.none(), text) if nullable else text
        return struct_of(common.get(kind) or spec["fields"])

    def struct_of(specs):
        return st.fixed_dictionaries({to_snake_case(f["name"], kio_names=True): value(f["type"], f)
                                      for f in specs if version in _version_range(f["versions"])})

    return struct_of(fields)


def _old_served():
    from kbroker.wire.interbroker import OLD_VERSIONS

    return [(key, version) for key, old in OLD_VERSIONS.items() for version in old.versions
            if DISPATCH[key].min_version <= version]


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    """A broker of its own: random requests delete and create topics."""
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(tmp_path_factory.mktemp("fuzz"))}), ("127.0.0.1", 9092))
    b.startup()
    for name in ("t", "zb"):
        trio.run(functools.partial(b.create_topic, name, num_partitions=1))
        append(b, name, build_batch([Record(0, TS, b"k", b"v", [])], compression=COMPRESSION_GZIP))
    yield b
    b.shutdown()


def test_old_versions_have_their_fuzz_cases():
    assert {k for k, _ in _old_served()} >= {FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS,
                                             DELETE_TOPICS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS,
                                             ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS}


from hypothesis import HealthCheck, given, settings, strategies as hst  # noqa: E402


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.data_too_large])
@given(api=hst.sampled_from(_old_served()), data=hst.data())
def test_random_old_version_requests_are_answered(fuzz_broker, caplog, api, data):
    import logging

    from kbroker.wire.interbroker import OLD_VERSIONS
    from kbroker.wire.protocol import decode_response, encode_request
    from kbroker.wire.schema_codec import load_schema

    key, version = api
    schema = load_schema(OLD_VERSIONS[key].message + "Request")
    body = data.draw(_strategy(schema, schema["fields"], version))
    if key == FETCH:
        body["max_wait"] = min(max(body["max_wait"], 0), 10)  # no long poll in a test
    if key in (CREATE_TOPICS, DELETE_TOPICS):
        body["timeout"] = 0
    frame = encode_request(key, version, 5, "fuzz", body)[4:]
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="kbroker"):
        response = trio.run(handle_frame, fuzz_broker, bytearray(frame))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    if isinstance(response, list):
        response = b"".join(c if isinstance(c, bytes) else c.read() for c in response)
    correlation_id, _decoded = decode_response(key, version, response[4:])
    assert correlation_id == 5


def test_one_answer_converts_a_bounded_amount(broker, monkeypatch):
    """kbroker converts before it answers, so it bounds what one answer converts (Kafka converts as it
    sends): past the bound a partition answers no records, without an error, and is asked again;
    the first batch is always sent whole."""
    from kbroker.api import fetch_legacy

    monkeypatch.setattr(fetch_legacy, "CONVERTED_BYTES_PER_RESPONSE", 100)
    body = i32(-1) + i32(0) + i32(0) + array(["t", "zb"], lambda t: string(t) + array(
        [0], lambda p: i32(p) + i64(0) + i32(1 << 20)))
    r = call(broker, FETCH, 2, body)
    assert r.i32() == 0
    topics = r.array(lambda: (r.string(), r.array(lambda: (r.i32(), r.i16(), r.i64(), r.bytes_()))))
    r.end()
    [(name_t, [(_, error_t, _, records_t)]), (name_zb, [(_, error_zb, hw_zb, records_zb)])] = topics
    assert (name_t, name_zb) == ("t", "zb")
    assert (error_t, error_zb, hw_zb) == (ErrorCode.none, ErrorCode.none, 2)
    assert [m[0] for m in messages(records_t, 1)] == [0, 1, 2]  # the first batch alone: past the bound
    assert records_zb == b""
