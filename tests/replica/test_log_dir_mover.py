"""LogDirMover: a replica's log copied to another log dir and swapped in while appends go on,
nothing appended lost; truncations of the current log repeated on the copy; a cancelled move
leaves the current log serving."""

import functools

import pytest
import trio

from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.log_dir_mover import _follow
from kbroker.wire.records import Record, build_batch, decode_records, validate_batches

TP = TopicPartition("moved", 0)


@pytest.fixture
def broker(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    config = BrokerConfig.from_dict({"log.dirs": ",".join(map(str, dirs)), "log.segment.bytes": "4096",
                                     "replica.alter.log.dirs.io.max.bytes.per.second": "200000"})
    b = Broker(config, ("127.0.0.1", 9092))
    b.startup()
    trio.run(functools.partial(b.create_topic, "moved", num_partitions=1))
    yield b
    b.shutdown()


def produce(partition, i: int) -> int:
    buf = bytearray(build_batch([Record(0, 1000 + i, b"k", b"value-%06d" % i, [])]))
    return partition.append_records_to_leader(buf, validate_batches(buf), 1).first_offset


def all_values(log) -> list[tuple[int, bytes]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:  # a read returns one segment's batches
        data = bytearray(log.read(offset, 1 << 24).read_bytes())
        for pos, h in validate_batches(data, from_client=False):
            out += [(r.offset, r.value) for r in decode_records(bytes(data[pos:pos + h.batch_length + 12]), 0, h)]
            offset = h.base_offset + h.last_offset_delta + 1
    return out


def other_dir(broker):
    lm = broker.log_manager
    return next(d for d in lm.log_dirs if d != lm.dir_of(TP))


def test_a_move_under_appends_loses_nothing(broker):
    rm, lm = broker.replica_manager, broker.log_manager
    partition = rm.partitions[TP]
    acked = [(produce(partition, i), b"value-%06d" % i) for i in range(300)]
    dest = other_dir(broker)

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(rm.log_dir_mover.run)
            assert rm.alter_replica_log_dir(TP, str(dest.absolute())) == 0
            assert lm.get_future_log(TP) is not None and rm.log_dir_mover.is_moving(TP)
            i = len(acked)
            with trio.fail_after(20):
                while lm.get_future_log(TP) is not None:
                    acked.append((produce(rm.partitions[TP], i), b"value-%06d" % i))  # the partition's current log
                    i += 1
                    await trio.sleep(0.002)
            for j in range(i, i + 20):  # after the swap, into the new log
                acked.append((produce(rm.partitions[TP], j), b"value-%06d" % j))
            nursery.cancel_scope.cancel()
    trio.run(main)
    assert lm.dir_of(TP) == dest and rm.partitions[TP].log is lm.get_log(TP)
    assert rm.log_dir_mover.moves_completed == 1 and len(acked) > 320
    assert all_values(lm.get_log(TP)) == acked
    assert rm.partitions[TP].high_watermark == acked[-1][0] + 1


def test_asking_for_the_current_dir_cancels_a_move(broker):
    rm, lm = broker.replica_manager, broker.log_manager
    partition = rm.partitions[TP]
    for i in range(50):
        produce(partition, i)
    src = lm.dir_of(TP)
    assert rm.alter_replica_log_dir(TP, str(other_dir(broker).absolute())) == 0
    assert rm.alter_replica_log_dir(TP, str(src.absolute())) == 0
    assert lm.get_future_log(TP) is None and lm.dir_of(TP) == src


def test_the_copy_follows_truncations_of_the_current_log(broker):
    lm = broker.log_manager
    partition = broker.replica_manager.partitions[TP]
    for i in range(30):
        produce(partition, i)
    current = partition.log
    future = lm.create_future_log(TP, other_dir(broker))
    data = bytearray(current.read(0, 1 << 20).read_bytes())
    future.append_as_follower(data, validate_batches(data, from_client=False))
    seen = []
    current.truncation_listener = seen.append
    current.truncate_to(20)
    for i in range(5):
        produce(partition, 100 + i)  # re-appended at the same offsets: the copy must not keep the old ones
    _follow(current, future, seen)
    assert future.log_end_offset == 20 and seen == []
    data = bytearray(current.read(20, 1 << 20).read_bytes())
    future.append_as_follower(data, validate_batches(data, from_client=False))
    assert all_values(future) == all_values(current)
    current.truncate_fully_and_start_at(40)
    _follow(current, future, [None])
    assert (future.log_start_offset, future.log_end_offset) == (40, 40)
