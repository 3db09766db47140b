"""AlterReplicaLogDirs v1-v2 through the dispatch table, with Kafka's per-partition answers, and
what DescribeLogDirs then shows: the future log (is_future_key, its lag behind the current log's
end) and an offline log dir (KAFKA_STORAGE_ERROR)."""

import functools

import pytest
import trio

from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.protocol import decode_response, encode_request
from kbroker.wire.records import Record, build_batch, validate_batches

ALTER, DESCRIBE = 34, 35


@pytest.fixture
def broker(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    b = Broker(BrokerConfig.from_dict({"log.dirs": ",".join(map(str, dirs))}), ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "t", num_partitions=2))
    for p in range(2):
        log = b.log_manager.get_log(TopicPartition("t", p))
        for _ in range(3):
            buf = bytearray(build_batch([Record(0, 1000, b"k", b"v" * 100, [])]))
            log.append_as_leader(buf, validate_batches(buf), leader_epoch=0)
    yield b
    b.shutdown()


def call(broker, api: int, version: int, body: dict):
    frame = encode_request(api, version, 3, "test", body)
    response = trio.run(handle_frame, broker, bytearray(frame[4:]))
    return decode_response(api, version, response[4:])[1]


def alter(broker, version: int, dirs: dict[str, dict[str, list[int]]]) -> dict:
    body = call(broker, ALTER, version, {"dirs": [
        {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        for path, topics in dirs.items()]})
    return {(t.topic_name, p.partition_index): ErrorCode(p.error_code) for t in body.results for p in t.partitions}


def describe(broker) -> tuple[dict, dict]:
    body = call(broker, DESCRIBE, 4, {"topics": None})
    errors = {r.log_dir: ErrorCode(r.error_code) for r in body.results}
    return errors, {(r.log_dir, t.name, p.partition_index, p.is_future_key): p.offset_lag
                    for r in body.results for t in r.topics for p in t.partitions}


def test_served_v0_to_v2():
    spec = DISPATCH[ALTER]  # v0 is Kafka 3.9's (the same as v1), decoded by schema_codec
    assert (spec.name, spec.min_version, spec.max_version, spec.cluster_only) == ("AlterReplicaLogDirs", 0, 2, False)


@pytest.mark.parametrize("version", [1, 2])
def test_kafka_answers_per_partition(broker, version, tmp_path):
    lm = broker.log_manager
    t0 = TopicPartition("t", 0)
    src, dest = str(lm.dir_of(t0).absolute()), str(next(d for d in lm.log_dirs if d != lm.dir_of(t0)).absolute())
    got = alter(broker, version, {dest: {"t": [0], "unknown": [0]}, str(tmp_path / "nowhere"): {"t": [1]}})
    assert got == {("t", 0): ErrorCode.none, ("unknown", 0): ErrorCode.replica_not_available,
                   ("t", 1): ErrorCode.log_dir_not_found}
    assert lm.preferred_dirs[TopicPartition("unknown", 0)] == lm.log_dir_named(dest)  # created there later
    errors, parts = describe(broker)
    assert set(errors.values()) == {ErrorCode.none}
    assert parts[(src, "t", 0, False)] == 0
    assert parts[(dest, "t", 0, True)] == 3  # the copy has not started: it lacks the 3 records
    assert alter(broker, version, {dest: {"t": [0]}}) == {("t", 0): ErrorCode.none}  # again: no change
    assert alter(broker, version, {"x" * 300: {"y" * 250: [0]}}) == {("y" * 250, 0): ErrorCode.invalid_topic_exception}


def test_offline_dir_and_its_partitions(broker):
    lm, rm = broker.log_manager, broker.replica_manager
    t1 = TopicPartition("t", 1)
    failed = lm.dir_of(t1)
    other = next(d for d in lm.log_dirs if d != failed)
    heard = []  # in a cluster: the notification the controller watches
    rm.log_dir_failure_listeners.append(lambda d, tps: heard.append((d, tps)))
    failing_log = lm.get_log(t1)
    rm.handle_log_failure(failing_log, OSError(5, "Input/output error"))
    assert t1 in rm.offline_partitions and t1 not in rm.partitions
    rm.handle_log_failure(failing_log, OSError(5, "Input/output error"))  # a second error: told once
    assert heard == [(failed, [t1])]
    errors, parts = describe(broker)
    assert errors == {str(failed.absolute()): ErrorCode.kafka_storage_error, str(other.absolute()): ErrorCode.none}
    assert not [k for k in parts if k[0] == str(failed.absolute())]
    assert alter(broker, 2, {str(other.absolute()): {"t": [1]}}) == {("t", 1): ErrorCode.kafka_storage_error}
    assert alter(broker, 2, {str(failed.absolute()): {"t": [0]}}) == {("t", 0): ErrorCode.kafka_storage_error}
    meta = call(broker, 3, 12, {"topics": [{"name": "t", "topic_id": None}], "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False})
    by_index = {p.partition_index: p for p in meta.topics[0].partitions}
    assert ErrorCode(by_index[1].error_code) == ErrorCode.kafka_storage_error and by_index[1].leader_id == -1
    assert list(by_index[1].offline_replicas) == [broker.node_id]
    assert ErrorCode(by_index[0].error_code) == ErrorCode.none
