"""DescribeLogDirs v1-v4 through the dispatch table: each log dir with its hosted partitions and
their sizes in bytes, filtered by the request's topics; v3 adds the top-level error, v4 the
volume's sizes; ApiVersions advertises exactly what is served."""

import functools

import pytest
import trio

from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.protocol import decode_response, encode_request
from kbroker.wire.records import Record, build_batch, validate_batches

DESCRIBE_LOG_DIRS = 35


@pytest.fixture
def broker(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    b = Broker(BrokerConfig.from_dict({"log.dirs": ",".join(map(str, dirs))}), ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "sized", num_partitions=3))
    trio.run(functools.partial(b.create_topic, "other", num_partitions=1))
    for partition, batches in ((0, 1), (1, 4)):
        log = b.log_manager.get_log(TopicPartition("sized", partition))
        for i in range(batches):
            buf = bytearray(build_batch([Record(0, 1000, b"k", b"v" * 500, [])]))
            log.append_as_leader(buf, validate_batches(buf), leader_epoch=0)
    yield b
    b.shutdown()


def ask(broker, version: int, topics) -> object:
    frame = encode_request(DESCRIBE_LOG_DIRS, version, 7, "test", {"topics": topics})
    response = trio.run(handle_frame, broker, bytearray(frame[4:]))
    correlation_id, body = decode_response(DESCRIBE_LOG_DIRS, version, response[4:])
    assert correlation_id == 7
    return body


def sizes_of(body) -> dict:
    return {(t.name, p.partition_index): (r.log_dir, p.partition_size, p.offset_lag, p.is_future_key)
            for r in body.results for t in r.topics for p in t.partitions}


def test_served_v0_to_v4_in_every_mode():
    spec = DISPATCH[DESCRIBE_LOG_DIRS]  # v0 is Kafka 3.9's (the same as v1), decoded by schema_codec
    assert (spec.name, spec.min_version, spec.max_version, spec.cluster_only) == ("DescribeLogDirs", 0, 4, False)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_partition_with_its_size_in_its_log_dir(broker, version):
    body = ask(broker, version, None)
    dirs = sorted(str(d.absolute()) for d in broker.log_manager.log_dirs)
    assert sorted(r.log_dir for r in body.results) == dirs  # one result per log dir, even an empty one
    assert all(r.error_code == 0 for r in body.results)
    got = sizes_of(body)
    assert set(got) == {("sized", 0), ("sized", 1), ("sized", 2), ("other", 0)}
    for (topic, p), (log_dir, size, lag, future) in got.items():
        log = broker.log_manager.get_log(TopicPartition(topic, p))
        assert log_dir == str(log.dir.parent.absolute())
        assert size == log.size_in_bytes and (lag, future) == (0, False)
    assert got[("sized", 1)][1] > 4 * 500 > got[("sized", 0)][1] > 500 and got[("sized", 2)][1] == 0
    if version >= 3:
        assert body.error_code == 0
    if version >= 4:
        assert all(r.total_bytes > 0 and 0 <= r.usable_bytes <= r.total_bytes for r in body.results)


def test_only_the_partitions_asked_for(broker):
    body = ask(broker, 4, [{"topic": "sized", "partitions": [1, 2, 9]}, {"topic": "missing", "partitions": [0]}])
    assert set(sizes_of(body)) == {("sized", 1), ("sized", 2)}  # unknown ones are simply not there
    assert len(body.results) == 2
    assert sizes_of(ask(broker, 2, [])) == {}


def test_a_log_that_is_no_replica_here_has_an_invalid_lag(broker):
    tp = TopicPartition("sized", 0)
    partition = broker.replica_manager.partitions.pop(tp)
    try:
        assert sizes_of(ask(broker, 4, [{"topic": "sized", "partitions": [0]}]))[("sized", 0)][2] == -1
    finally:
        broker.replica_manager.partitions[tp] = partition
