"""Where a follower's log stops agreeing with its leader's: `truncation_offset` (Kafka's
AbstractFetcherThread.getOffsetTruncationState) on real logs with leader epoch caches, and the
follower's OffsetForLeaderEpoch exchange run against a leader's real log until the follower's log
is a prefix of the leader's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from kbroker.errors import ErrorCode
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.fetcher import OFFSET_FOR_LEADER_EPOCH, UNDEFINED_EPOCH, _FetchState, _LeaderFetcher, truncation_offset
from kbroker.wire.records import Record, build_batch, validate_batches

TP = TopicPartition("orders", 0)


@pytest.fixture
def logs(tmp_path):
    opened = []

    def build(name: str, epochs: list[tuple[int, int]], hw: int | None = None, latest: int | None = None) -> Log:
        """A log whose records were written in `epochs`: (leader epoch, record count), in order; `latest`
        is an epoch assigned at the log end with nothing written in it yet (a leader that just took over)."""
        log = Log.open(tmp_path / f"{name}-0", LogConfig(), now_ms=lambda: 0)
        opened.append(log)
        for epoch, count in epochs:
            for _ in range(count):
                buf = bytearray(build_batch([Record(0, 0, None, b"%s-%d" % (name.encode(), epoch), [])]))
                log.append_as_leader(buf, validate_batches(buf), leader_epoch=epoch)
        if latest is not None:
            log.leader_epoch_cache.assign(latest, log.log_end_offset)
        log.update_high_watermark(log.log_end_offset if hw is None else hw)
        return log

    yield build
    for log in opened:
        log.close()


def epochs_of(log: Log) -> list[int]:
    return [log.leader_epoch_cache.epoch_for_offset(o) for o in range(log.log_start_offset, log.log_end_offset)]


# -- truncation_offset ----------------------------------------------------------------------------

def test_undefined_epoch_truncates_to_the_high_watermark(logs):
    f = logs("f", [(0, 5), (1, 5)], hw=3)
    assert truncation_offset(f, UNDEFINED_EPOCH, -1) == (3, True)  # the leader knows no epoch at or below ours
    assert truncation_offset(f, 1, -1) == (3, True)  # UNDEFINED_EPOCH_OFFSET: from the initial fetch offset, the HW


def test_same_epoch_truncates_to_the_smaller_log_end(logs):
    f = logs("f", [(0, 5), (1, 5)], hw=3)
    assert truncation_offset(f, 1, 8) == (8, True)  # our unacknowledged tail of epoch 1 goes
    assert truncation_offset(f, 1, 10) == (10, True)
    assert truncation_offset(f, 1, 12) == (10, True)  # the leader has more: nothing of ours goes


def test_leader_epoch_older_than_ours_truncates_to_our_end_of_that_epoch(logs):
    f = logs("f", [(0, 5), (2, 5)], hw=3)
    # the leader's latest epoch at or below 2 is 0, ending at 7 on the leader and at 5 here
    assert truncation_offset(f, 0, 7) == (5, True)
    # ending earlier on the leader: that is where we diverge
    assert truncation_offset(f, 0, 4) == (4, True)


def test_leader_epoch_older_than_ours_with_several_of_ours(logs):
    f = logs("f", [(1, 3), (3, 3), (4, 3)], hw=0)
    assert truncation_offset(f, 3, 100) == (6, True)
    assert truncation_offset(f, 3, 5) == (5, True)
    assert truncation_offset(f, 1, 100) == (3, True)


def test_never_truncates_above_our_log_end(logs):
    f = logs("f", [(0, 4)], hw=4)
    assert truncation_offset(f, 0, 50) == (4, True)
    assert truncation_offset(f, UNDEFINED_EPOCH, -1) == (4, True)


# -- the exchange with a leader -------------------------------------------------------------------

class LeaderChannel:
    """Answers OffsetForLeaderEpoch from a leader's real log, as the leader's handler does."""

    def __init__(self, leader: Log) -> None:
        self.leader = leader
        self.asked: list[int] = []

    async def request(self, api_key, version, body, timeout_s=None):
        assert api_key == OFFSET_FOR_LEADER_EPOCH
        assert body["replica_id"] == 2
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                self.asked.append(p["leader_epoch"])
                epoch, end = self.leader.end_offset_for_epoch(p["leader_epoch"])
                parts.append(SimpleNamespace(partition=p["partition"], error_code=ErrorCode.none,
                                             leader_epoch=epoch, end_offset=end))
            topics.append(SimpleNamespace(topic=t["topic"], partitions=parts))
        return SimpleNamespace(topics=topics)

    async def aclose(self):
        pass


def truncate_against(leader: Log, follower: Log, leader_epoch: int, rounds: int = 10) -> LeaderChannel:
    """Run the follower's truncation phase until it says it is done."""
    channel = LeaderChannel(leader)
    manager = SimpleNamespace(open_channel=lambda host, port: channel, node_id=2, backoff_s=0.01,
                              replica_manager=None)
    fetcher = _LeaderFetcher(manager, 1, ("leader", 9092))
    state = _FetchState(leader_epoch)
    parts = {TP: (SimpleNamespace(log=follower), state)}

    async def run():
        for _ in range(rounds):
            if not state.truncating:
                return
            await fetcher._truncate(parts)
        raise AssertionError("truncation never completed")

    trio.run(run)
    return channel


def test_unacknowledged_tail_of_the_same_epoch_goes(logs):
    leader = logs("l", [(0, 5), (1, 5)], latest=2)
    follower = logs("f", [(0, 5), (1, 8)], hw=10)
    channel = truncate_against(leader, follower, 2)
    assert channel.asked == [1]
    assert follower.log_end_offset == 10
    assert epochs_of(follower) == epochs_of(leader)


def test_follower_with_an_epoch_the_leader_never_had(logs):
    leader = logs("l", [(0, 5), (1, 3)], latest=3)
    follower = logs("f", [(0, 5), (2, 5)], hw=5)
    truncate_against(leader, follower, 3)
    assert follower.log_end_offset == 5
    assert epochs_of(follower) == epochs_of(leader)[:5]


def test_an_empty_follower_has_nothing_to_truncate(logs):
    leader = logs("l", [(0, 5)], latest=1)
    follower = logs("f", [])
    channel = truncate_against(leader, follower, 1)
    assert channel.asked == [] and follower.log_end_offset == 0


def test_truncation_reaches_the_divergence_point_when_the_follower_lacks_the_leaders_epoch(logs):
    """KIP-279 (fast leader fail-over): the follower wrote epoch 0 up to 10 and epoch 2 after it; the
    leader has epoch 0 up to 5, then epoch 1 (5-6) the follower never saw, then epoch 3. Asked about
    epoch 2 the leader answers "epoch 1 ends at 7". The follower has no epoch 1: its largest epoch
    below is 0, which it holds up to 10, so all it learns is that it diverges at or before 10 —
    Kafka truncates there and asks again, about epoch 0 ("ends at 5"), and ends at 5. Stopping after
    the first answer keeps the follower's epoch-0 records at offsets 5 and 6 where the leader has
    epoch-1 records: the logs differ below the follower's log end for good."""
    leader = logs("l", [(0, 5), (1, 2), (3, 3)], latest=4)
    follower = logs("f", [(0, 10), (2, 5)], hw=5)
    channel = truncate_against(leader, follower, 4)
    assert epochs_of(follower) == epochs_of(leader)[:follower.log_end_offset], \
        f"follower kept records the leader does not have (asked about epochs {channel.asked})"
    assert follower.log_end_offset == 5
