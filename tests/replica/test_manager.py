"""ReplicaManager with real logs: partitions follow metadata, appends move the high watermark and
wake parked fetches (trio's MockClock: no real sleeping)."""

import trio
import trio.testing

from kbroker.config import BrokerConfig
from kbroker.errors import NotEnoughReplicasError
from kbroker.log.log_manager import LogManager
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.store import BrokerInfo, LocalMetadataStore
from kbroker.replica.manager import ReplicaManager
from kbroker.wire.records import Record, build_batch, validate_batches
from kbroker.config import log_config_for
import pytest


@pytest.fixture
def rm(tmp_path):
    config = BrokerConfig.from_dict({"log.dirs": str(tmp_path)})
    logs = LogManager([tmp_path], log_config_for(config, {}))
    logs.startup()
    store = LocalMetadataStore(tmp_path, BrokerInfo(0, "h", 1))
    manager = ReplicaManager(0, config, logs, store)
    manager.startup()
    return manager


def _append(partition, n=1, acks=1):
    buf = bytearray(build_batch([Record(i, 0, None, b"x", []) for i in range(n)]))
    return partition.append_records_to_leader(buf, validate_batches(buf), acks)


def test_partitions_follow_metadata(rm):
    rm.metadata.create_topic("t", [[0], [0]], {})
    assert set(rm.partitions) == {TopicPartition("t", 0), TopicPartition("t", 1)}
    rm.metadata.delete_topic("t")
    assert rm.partitions == {}


def test_append_moves_high_watermark_and_min_isr_is_checked(rm):
    rm.metadata.create_topic("t", [[0]], {"min.insync.replicas": "2"})
    partition = rm.get_leader_partition(TopicPartition("t", 0))
    _append(partition, 3)
    assert (partition.high_watermark, partition.last_stable_offset) == (3, 3)
    with pytest.raises(NotEnoughReplicasError):
        _append(partition, acks=-1)  # min.insync.replicas=2 with an ISR of one


def test_parked_fetch_wakes_on_append_not_on_timeout(rm):
    rm.metadata.create_topic("t", [[0]], {})
    partition = rm.get_leader_partition(TopicPartition("t", 0))
    woke = []

    async def main():
        async with trio.open_nursery() as nursery:
            async def waiter():
                woke.append((await rm.wait_for_data([TopicPartition("t", 0)], 30), trio.current_time()))

            nursery.start_soon(waiter)
            await trio.sleep(1)
            _append(partition)

    clock = trio.testing.MockClock(autojump_threshold=0)
    trio.run(main, clock=clock)
    assert woke == [(True, 1)]
    assert rm.statistics()["parked_fetch_partitions"] == 0


def test_parked_fetch_times_out(rm):
    rm.metadata.create_topic("t", [[0]], {})

    async def main():
        return await rm.wait_for_data([TopicPartition("t", 0)], 5), trio.current_time()

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == (False, 5)
