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
from kbroker.wire.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
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


def _txn_batch(partition, pid, seq, n=2):
    buf = bytearray(build_batch([Record(i, 0, None, b"t", []) for i in range(n)], producer_id=pid, producer_epoch=0,
                                base_sequence=seq, is_transactional=True))
    return partition.append_records_to_leader(buf, validate_batches(buf), 1)


def _marker(partition, pid, control_type):
    buf = bytearray(build_end_txn_marker_batch(EndTransactionMarker(control_type, 0), producer_id=pid,
                                               producer_epoch=0, timestamp=1_000))
    return partition.append_records_to_leader(buf, validate_batches(buf, from_client=False), 1, from_client=False)


def test_read_committed_returns_the_aborted_transactions_of_the_range(rm):
    rm.metadata.create_topic("t", [[0]], {})
    tp = TopicPartition("t", 0)
    partition = rm.get_leader_partition(tp)
    _txn_batch(partition, 1, 0)  # 0-1 committed
    _txn_batch(partition, 2, 0)  # 2-3 aborted
    _marker(partition, 1, COMMIT)  # 4
    _marker(partition, 2, ABORT)  # 5
    _txn_batch(partition, 2, 2)  # 6-7: a new transaction, still open, so beyond the LSO
    assert partition.last_stable_offset == 6

    committed = rm.read_partition(tp, 0, 1 << 20, read_committed=True, min_one_message=True)
    assert committed.aborted_transactions == [(2, 2)]
    assert committed.size and committed.records[-1].size  # up to the LSO
    uncommitted = rm.read_partition(tp, 0, 1 << 20, read_committed=False, min_one_message=True)
    assert uncommitted.aborted_transactions is None and uncommitted.size > committed.size
    at_lso = rm.read_partition(tp, 6, 1 << 20, read_committed=True, min_one_message=True)
    assert (at_lso.records, at_lso.aborted_transactions) == ([], [])  # nothing read, nothing aborted
    follower = rm.read_partition(tp, 0, 1 << 20, read_committed=True, min_one_message=True, replica_id=1)
    assert follower.aborted_transactions is None  # a follower copies the log, markers and all
    unknown = rm.read_partition(TopicPartition("nope", 0), 0, 1 << 20, read_committed=True, min_one_message=True)
    assert unknown.error is not None and unknown.aborted_transactions is None


def test_a_refused_isr_expansion_is_not_proposed_again_at_every_fetch(rm):
    """The controller refuses an ISR change (INELIGIBLE_REPLICA: the follower is shutting down);
    the follower keeps fetching, and the leader asks again only after a back-off, not per fetch."""
    import uuid

    from kbroker.errors import ErrorCode
    from kbroker.replica.partition import Partition

    tp = TopicPartition("isr-refused", 0)
    log = rm.log_manager.get_or_create_log(tp)
    partition = Partition(tp, log, uuid.uuid4(), [0, 1], 0, lambda _tp: None)
    partition.make_leader(1, [0], [0, 1], 0, rm.now_ms())
    rm.partitions[tp] = partition
    sent = []

    async def refuse(items):
        sent.append(items)
        return {(t, p): (ErrorCode.ineligible_replica, None) for t, p, *_ in items}

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rm.run_isr_changes, refuse)
            for _ in range(50):  # a follower at the leader's end fetching every 5 ms, for 250 ms
                rm.update_follower_fetch(tp, 1, partition.log.log_end_offset)
                await trio.sleep(0.005)
            nursery.cancel_scope.cancel()

    trio.run(main)  # the back-off is on the broker's real clock
    assert len(sent) == 1, f"{len(sent)} AlterPartition requests in 250 ms for one refused change"
    assert partition.isr == [0]
