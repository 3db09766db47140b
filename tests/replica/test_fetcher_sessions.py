"""The follower's side of fetch sessions against the leader's real session cache (the pure core a
leader runs), on a mock clock: a full request opens the session; steady rounds then send only the
partitions whose fetch offset moved; a change of partitions, a session error (the leader
restarted: its cache is new) or FULL_ROUND_S make the next round full again."""

import uuid
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from kbroker.errors import ErrorCode
from kbroker.fetch_session import FetchMetadata, FetchSessionCache, PartitionRequest, PartitionResult, TopicIdPartition
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.fetcher import FETCH, FULL_ROUND_S, _FetchState, _LeaderFetcher
from kbroker.replica.partition import Partition
from kbroker.replica.quota import ReplicationQuotas
from kbroker.wire.records import Record, build_batch

A, B, C = (TopicPartition("t", p) for p in range(3))
ZERO = uuid.UUID(int=0)


class Leader:
    """Answers Fetch with the leader's session cache; `logs[tp]` is its log: a list of batches."""

    def __init__(self) -> None:
        self.cache = FetchSessionCache(10, now_ms=lambda: 0)
        self.logs: dict[TopicPartition, list[bytes]] = {A: [], B: [], C: []}
        self.requests: list[dict] = []
        self.fenced: set[TopicPartition] = set()  # answered FENCED_LEADER_EPOCH
        self.while_out = None  # called while a request is out (before its answer is built)

    async def request(self, api_key, version, body, timeout_s=None):
        assert api_key == FETCH
        self.requests.append(body)
        if self.while_out is not None:
            self.while_out()
        parts = [(TopicIdPartition(ZERO, t["topic"], p["partition"]),
                  PartitionRequest(p["fetch_offset"], p["partition_max_bytes"], p["log_start_offset"],
                                   p["current_leader_epoch"]))
                 for t in body["topics"] for p in t["partitions"]]
        forgotten = [TopicIdPartition(ZERO, t["topic"], p) for t in body["forgotten_topics_data"] for p in t["partitions"]]
        context = self.cache.new_context(FetchMetadata(body["session_id"], body["session_epoch"]), parts, forgotten,
                                         version=12, is_follower=True)
        results = []
        for tip, req in context.partitions_to_read():
            if TopicPartition(tip.topic, tip.partition) in self.fenced:
                results.append((tip, PartitionResult(error_code=ErrorCode.fenced_leader_epoch)))
                continue
            log = self.logs[TopicPartition(tip.topic, tip.partition)]
            records = b"".join(log[req.fetch_offset:])
            results.append((tip, PartitionResult(high_watermark=len(log), last_stable_offset=len(log),
                                                 log_start_offset=0, records_size=len(records), payload=records)))
        answer = context.build_response(results)
        by_topic: dict[str, list] = {}
        for tip, r in answer.partitions:
            by_topic.setdefault(tip.topic, []).append(SimpleNamespace(
                partition_index=tip.partition, error_code=r.error_code, high_watermark=r.high_watermark,
                log_start_offset=r.log_start_offset, records=r.payload))
        return SimpleNamespace(error_code=answer.error, session_id=answer.session_id, throttle_time=0,
                               responses=[SimpleNamespace(topic=t, partitions=ps) for t, ps in by_topic.items()])

    def append(self, tp: TopicPartition) -> None:
        offset = len(self.logs[tp])
        self.logs[tp].append(bytes(build_batch([Record(offset, 0, None, b"v", [])], base_offset=offset)))

    async def aclose(self):
        pass


def sent(body: dict) -> tuple[set[TopicPartition], set[TopicPartition], int]:
    return ({TopicPartition(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]},
            {TopicPartition(t["topic"], p) for t in body["forgotten_topics_data"] for p in t["partitions"]},
            body["session_epoch"])


@pytest.fixture
def follower(tmp_path):
    leader = Leader()
    partitions, logs = {}, []
    for tp in (A, B, C):
        log = Log.open(tmp_path / f"t-{tp.partition}", LogConfig(), now_ms=lambda: 0)
        logs.append(log)
        partition = Partition(tp, log, uuid.uuid4(), [1, 2], 2, lambda tp: None)
        partition.make_follower(1, 0, [1, 2], [1, 2], 0)
        partitions[tp] = partition
    quotas = ReplicationQuotas(2, lambda: 0)
    manager = SimpleNamespace(open_channel=lambda host, port: leader, node_id=2, backoff_s=5.0,
                              replica_manager=SimpleNamespace(partitions=partitions, quotas=quotas),
                              partition_max_bytes=1 << 20, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                              request_timeout_s=5)
    fetcher = _LeaderFetcher(manager, 1, ("leader", 9092))
    for tp in partitions:
        fetcher.partitions[tp] = _FetchState(0, truncating=False)
    clock = trio.testing.MockClock()
    yield fetcher, leader, partitions, clock
    for log in logs:
        log.close()


def round_(fetcher, clock) -> bool:
    return trio.run(fetcher._round, clock=clock)


def test_steady_rounds_send_only_what_moved(follower):
    fetcher, leader, partitions, clock = follower
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == ({A, B, C}, set(), 0)  # full: the session opens
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == (set(), set(), 1)  # nothing moved: an empty incremental fetch
    leader.append(A)
    leader.append(A)
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == (set(), set(), 2)
    assert partitions[A].log.log_end_offset == 2  # the answer carried A's records
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == ({A}, set(), 3)  # only A's fetch offset moved
    assert [p["fetch_offset"] for t in leader.requests[-1]["topics"] for p in t["partitions"]] == [2]
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == (set(), set(), 4)


def test_a_change_of_partitions_or_time_makes_a_full_round(follower):
    fetcher, leader, partitions, clock = follower
    for _ in range(2):
        round_(fetcher, clock)
    fetcher.manager.replica_manager.partitions.pop(C)  # no longer hosted here
    fetcher.poke()
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == (set(), {C}, 2)  # a full round's look: C forgotten
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == (set(), set(), 3)
    partitions[B].log.truncate_fully_and_start_at(7)  # the follower's own log moved without a fetch
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1])[0] == set()  # a steady round does not look
    clock.jump(FULL_ROUND_S + 0.1)
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1])[0] == {B}  # the periodic full round does


def test_a_restarted_leader_gets_a_full_request_at_once(follower):
    fetcher, leader, partitions, clock = follower
    for _ in range(2):
        round_(fetcher, clock)
    leader.cache = FetchSessionCache(10, now_ms=lambda: 0)  # its sessions are gone
    assert round_(fetcher, clock)  # FETCH_SESSION_ID_NOT_FOUND: no back-off
    assert leader.cache.requests["error"] == 1
    leader.append(C)
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == ({A, B, C}, set(), 0)
    assert partitions[C].log.log_end_offset == 1
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1]) == ({C}, set(), 1)


def test_an_error_for_one_partition_ends_steady_rounds_until_it_clears(follower):
    fetcher, leader, partitions, clock = follower
    for _ in range(2):
        round_(fetcher, clock)
    assert fetcher.steady
    answer = SimpleNamespace(partition_index=1, error_code=ErrorCode.not_leader_or_follower, high_watermark=-1,
                             log_start_offset=-1, records=None)

    async def apply():
        fetcher._apply(B, partitions[B], fetcher.partitions[B], answer)
    trio.run(apply, clock=clock)
    assert not fetcher.steady and fetcher.partitions[B].delayed_until > 0
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1])[1] == {B}  # held back: forgotten for now
    assert not fetcher.steady
    clock.jump(5.1)  # replica.fetch.backoff.ms passed
    assert round_(fetcher, clock)
    assert sent(leader.requests[-1])[0] == {B} and fetcher.steady


@pytest.mark.parametrize("steady", [True, False])
def test_an_answer_for_an_epoch_replaced_while_it_was_out_is_not_applied(follower, steady):
    """A controlled shutdown bumps the leader epoch: the leader may fence this follower's fetch at
    the old epoch just as LeaderAndIsr re-adds the partition at the new one. The stale
    FENCED_LEADER_EPOCH must not hold the new epoch back for replica.fetch.backoff.ms."""
    fetcher, leader, partitions, clock = follower
    for _ in range(2):
        round_(fetcher, clock)
    if not steady:
        fetcher.poke()  # the round in flight is a full one
    assert fetcher.steady is steady
    leader.fenced = {A}
    leader.append(A)  # A has news: a steady round's answer carries it

    def leader_and_isr():  # what ReplicaManager.become_leader_or_follower does for a follower
        partitions[A].make_follower(1, 1, [1, 2], [1, 2], 1)
        fetcher.partitions[A] = _FetchState(1, truncating=False)
        fetcher.poke()
        leader.while_out = None
    leader.while_out = leader_and_isr
    assert round_(fetcher, clock)
    assert fetcher.partitions[A].delayed_until == 0  # the old epoch's answer was not applied to the new one
    leader.fenced = set()
    assert round_(fetcher, clock)
    assert A in sent(leader.requests[-1])[0]
    assert partitions[A].log.log_end_offset == 1  # fetched at once, at the new epoch
