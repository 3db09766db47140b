"""The replication throttle applied, with a fake clock: the leader sends nothing for a throttled
partition to a follower outside the ISR while its quota is exceeded and counts what followers get;
the follower leaves throttled partitions that are not in sync out of its fetches, waits for the
quota rather than a fixed back-off when nothing else is left, and counts what it fetched."""

import uuid
from types import SimpleNamespace

import pytest
import trio

from kbroker.config import BrokerConfig, log_config_for
from kbroker.errors import ErrorCode
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.log_manager import LogManager
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.store import BrokerInfo, LocalMetadataStore
from kbroker.replica.fetcher import FETCH, _FetchState, _LeaderFetcher
from kbroker.replica.manager import ReplicaManager
from kbroker.replica.partition import Partition
from kbroker.replica.quota import ReplicationQuotas
from kbroker.wire.records import Record, build_batch, validate_batches


class Clock:
    def __init__(self) -> None:
        self.ms = 5_000_000

    def __call__(self) -> int:
        return self.ms


def _batch(n: int = 1, size: int = 100) -> bytearray:
    return bytearray(build_batch([Record(i, 0, None, b"x" * size, []) for i in range(n)]))


# -- the leader side ------------------------------------------------------------------------------

@pytest.fixture
def leader(tmp_path):
    clock = Clock()
    config = BrokerConfig.from_dict({"log.dirs": str(tmp_path)})
    logs = LogManager([tmp_path], log_config_for(config, {}))
    logs.startup()
    store = LocalMetadataStore(tmp_path, BrokerInfo(0, "h", 1))
    manager = ReplicaManager(0, config, logs, store, quota_clock_ms=clock)
    manager.startup()
    store.create_topic("moving", [[0]], {"leader.replication.throttled.replicas": "0:0"})
    store.create_topic("still", [[0]], {})
    for name in ("moving", "still"):
        partition = manager.partitions[TopicPartition(name, 0)]
        buf = _batch(10)
        partition.append_records_to_leader(buf, validate_batches(buf), 1)
    manager.quotas.update_rates({"leader.replication.throttled.rate": "1000"}, {})
    return manager, clock


def _read(rm, topic: str, replica_id: int):
    return rm.read_partition(TopicPartition(topic, 0), 0, 1 << 20, False, True, replica_id=replica_id)


def test_the_leader_holds_back_an_out_of_sync_follower_of_a_throttled_partition(leader):
    rm, clock = leader
    first = _read(rm, "moving", 5)
    assert first.size > 1000  # within the quota: served
    rm.record_sent_to_follower([first])
    assert rm.quotas.leader.is_quota_exceeded()
    held = _read(rm, "moving", 5)
    assert held.records == [] and held.error is None and held.high_watermark == first.high_watermark
    assert _read(rm, "still", 5).size > 0  # not a throttled partition
    assert _read(rm, "moving", -1).size > 0  # consumers are not replication
    rm.partitions[TopicPartition("moving", 0)].isr = [0, 5]
    assert _read(rm, "moving", 5).size > 0  # an in-sync follower is never held back (it would leave the ISR)
    rm.partitions[TopicPartition("moving", 0)].isr = [0]
    clock.ms += rm.quotas.leader.throttle_time_ms()
    assert _read(rm, "moving", 5).size > 0


def test_only_throttled_partitions_count_towards_the_leader_quota(leader):
    rm, _clock = leader
    rm.record_sent_to_follower([_read(rm, "still", 5)])
    assert rm.quotas.leader.rate() == 0
    moving = _read(rm, "moving", 5)
    rm.record_sent_to_follower([moving, _read(rm, "still", 5)])
    assert rm.quotas.leader.rate() == moving.size


def test_a_topic_config_change_starts_and_stops_the_throttle(leader):
    rm, _clock = leader
    tp = TopicPartition("still", 0)
    assert not rm.quotas.leader.is_throttled(tp)
    rm.metadata.set_topic_configs("still", {"leader.replication.throttled.replicas": "*"})
    assert rm.quotas.leader.is_throttled(tp)
    rm.metadata.delete_topic("still")
    assert not rm.quotas.leader.is_throttled(tp)


# -- the follower side ----------------------------------------------------------------------------

class FetchChannel:
    """Records the partitions of each Fetch; answers with nothing, and keeps no fetch session (so
    every request lists every partition the follower fetches)."""

    def __init__(self) -> None:
        self.fetched: list[set[TopicPartition]] = []

    async def request(self, api_key, version, body, timeout_s=None):
        assert api_key == FETCH
        self.fetched.append({TopicPartition(t["topic"], p["partition"]) for t in body["topics"]
                             for p in t["partitions"]})
        return SimpleNamespace(error_code=ErrorCode.none, session_id=0, throttle_time=0, responses=[])

    async def aclose(self):
        pass


@pytest.fixture
def follower(tmp_path):
    clock = Clock()
    quotas = ReplicationQuotas(2, clock)
    quotas.update_rates({"follower.replication.throttled.rate": "1000"}, {})
    quotas.update_topic("t", {"follower.replication.throttled.replicas": "0:2,2:2"})
    partitions, logs = {}, []
    for p in range(3):
        tp = TopicPartition("t", p)
        log = Log.open(tmp_path / f"t-{p}", LogConfig(), now_ms=lambda: 0)
        logs.append(log)
        partition = Partition(tp, log, uuid.uuid4(), [1, 2], 2, lambda tp: None)
        partition.make_follower(1, 0, [1, 2], [1, 2], 0)
        partitions[tp] = partition
    channel = FetchChannel()
    manager = SimpleNamespace(open_channel=lambda host, port: channel, node_id=2, backoff_s=5.0,
                              replica_manager=SimpleNamespace(partitions=partitions, quotas=quotas),
                              partition_max_bytes=1 << 20, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                              request_timeout_s=5)
    fetcher = _LeaderFetcher(manager, 1, ("leader", 9092))
    for tp, partition in partitions.items():
        fetcher.partitions[tp] = _FetchState(0, truncating=False)
    yield fetcher, channel, quotas, clock
    for log in logs:
        log.close()


A, B, C = (TopicPartition("t", p) for p in range(3))  # A and C throttled here, B not


def test_throttled_partitions_out_of_sync_are_left_out_while_the_quota_is_exceeded(follower):
    fetcher, channel, quotas, clock = follower
    assert trio.run(fetcher._round)
    assert channel.fetched[-1] == {A, B, C}  # within the quota
    quotas.follower.record(5000)
    fetcher.partitions[C].in_sync = True
    assert trio.run(fetcher._round)
    assert channel.fetched[-1] == {B, C}  # A is out of sync: held back; C keeps its ISR place
    clock.ms += quotas.follower.throttle_time_ms()
    assert trio.run(fetcher._round)
    assert channel.fetched[-1] == {A, B, C}


def test_with_everything_held_back_the_fetcher_waits_for_the_quota_not_the_back_off(follower):
    fetcher, channel, quotas, clock = follower
    del fetcher.partitions[B], fetcher.partitions[C]
    quotas.follower.record(1500)
    assert not trio.run(fetcher._round)
    assert channel.fetched == []
    assert fetcher._pause_s == pytest.approx(1.5)  # 1500 bytes take 1.5 s at 1000 B/s
    quotas.follower.update_quota(1200)
    assert not trio.run(fetcher._round)
    assert fetcher._pause_s == pytest.approx(1.25)
    quotas.follower.update_quota(100)
    assert not trio.run(fetcher._round)
    assert fetcher._pause_s == 5.0  # never longer than replica.fetch.backoff.ms
    clock.ms += 15_000
    assert trio.run(fetcher._round) and channel.fetched == [{A}]


def test_fetched_bytes_of_throttled_partitions_count_and_the_high_watermark_says_in_sync(follower):
    fetcher, _channel, quotas, _clock = follower
    partition = fetcher.manager.replica_manager.partitions[A]
    records = bytes(_batch(3))
    answer = SimpleNamespace(error_code=ErrorCode.none, records=records, high_watermark=5, log_start_offset=0)
    fetcher._apply(A, partition, fetcher.partitions[A], answer)
    assert quotas.follower.rate() == len(records)
    assert partition.log.log_end_offset == 3 and not fetcher.partitions[A].in_sync  # the leader is at 5
    rest = _at_offset(_batch(2), 3)
    fetcher._apply(A, partition, fetcher.partitions[A], SimpleNamespace(
        error_code=ErrorCode.none, records=rest, high_watermark=5, log_start_offset=0))
    assert partition.log.log_end_offset == 5 and fetcher.partitions[A].in_sync
    untracked = fetcher.manager.replica_manager.partitions[B]
    fetcher._apply(B, untracked, fetcher.partitions[B], answer)
    assert untracked.log.log_end_offset == 3
    assert quotas.follower.rate() == len(records) + len(rest)  # B is not throttled: not counted


def _at_offset(buf: bytearray, base_offset: int) -> bytes:
    """A batch as a leader sends it: its base offset set (bytes 0-8 of the batch header)."""
    out = bytearray(buf)
    out[0:8] = base_offset.to_bytes(8, "big")
    return bytes(out)
