"""Partition on a real Log: leader and follower roles, the high watermark over the maximal ISR,
followers' fetch state and last-caught-up times, ISR expansion and shrinking, acks=all completion,
min.insync.replicas, and the leader epoch a new leader starts at the log end (Kafka's
Partition/Replica rules)."""

from __future__ import annotations

import uuid

import pytest

from kbroker.errors import NotEnoughReplicasError
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition
from kbroker.replica.partition import NO_LEADER, FollowerState, Partition
from kbroker.wire.records import Record, build_batch, validate_batches

TP = TopicPartition("orders", 0)
ME = 1
LAG_MS = 10_000
T0 = 1_000_000


@pytest.fixture
def make(tmp_path):
    made = []

    def _make(replicas=(1, 2, 3), node_id=ME):
        log = Log.open(tmp_path / f"orders-{len(made)}", LogConfig(), now_ms=lambda: T0)
        woken: list[TopicPartition] = []  # partitions whose parked fetches / acks=all waits were woken
        p = Partition(TP, log, uuid.uuid4(), list(replicas), node_id, woken.append)
        # as ReplicaManager creates a partition for a LeaderAndIsr: no role until told
        p.leader_id, p.leader_epoch = NO_LEADER, -1
        made.append(log)
        return p, woken

    yield _make
    for log in made:
        log.close()


def batch(n=1):
    buf = bytearray(build_batch([Record(i, 0, None, b"v%d" % i, []) for i in range(n)]))
    return buf, validate_batches(buf)


def append(p: Partition, n=1, acks=-1):
    return p.append_records_to_leader(*batch(n), acks)


def leader(make, epoch=5, isr=(1, 2, 3), replicas=(1, 2, 3), now=T0, partition_epoch=0):
    p, woken = make(replicas)
    assert p.make_leader(epoch, list(isr), list(replicas), partition_epoch, now) is True
    return p, woken


# -- roles ----------------------------------------------------------------------------------------

def test_make_leader(make):
    p, woken = make()
    assert p.make_leader(5, [1, 2], [1, 2, 3], 11, T0) is True
    assert p.is_leader and p.leader_id == ME
    assert (p.leader_epoch, p.partition_epoch, p.isr, p.replicas) == (5, 11, [1, 2], [1, 2, 3])
    assert p.pending_isr is None
    assert set(p.followers) == {2, 3}
    # ISR members count as caught up from now; the others are not until they fetch
    assert p.followers[2] == FollowerState(log_end_offset=-1, last_caught_up_ms=T0)
    assert p.followers[3] == FollowerState(log_end_offset=-1, last_caught_up_ms=0)
    assert p.make_leader(5, [1, 2], [1, 2, 3], 11, T0 + 1) is False  # already leading


def test_new_leader_epoch_starts_at_the_log_end_and_offset_for_leader_epoch_answers_it(make):
    p, _ = make()
    p.make_follower(2, 3, [2, 1], [1, 2, 3], 0)
    buf, batches = batch(4)
    for pos, h in batches:  # replicated from the old leader, stamped with its epoch 3
        buf[pos + 12:pos + 16] = (3).to_bytes(4, "big")
    batches = validate_batches(buf, from_client=False)
    p.log.append_as_follower(buf, batches)
    assert p.log.leader_epoch_cache.latest_epoch == 3
    p.make_leader(7, [1, 2], [1, 2, 3], 1, T0)
    assert p.leader_epoch_start_offset == 4
    assert [tuple(e) for e in p.log.leader_epoch_cache.epoch_entries()] == [(3, 0), (7, 4)]
    # before anything is appended in epoch 7: a follower of epoch 3 learns where it ended
    assert p.log.end_offset_for_epoch(3) == (3, 4)
    assert p.log.end_offset_for_epoch(7) == (7, 4)
    assert p.log.end_offset_for_epoch(5) == (3, 4)
    append(p, 2, acks=1)
    assert p.log.end_offset_for_epoch(7) == (7, 6)
    assert p.log.end_offset_for_epoch(3) == (3, 4)


def test_same_epoch_again_keeps_follower_state_and_follows_the_replica_set(make):
    p, _ = leader(make, isr=(1, 2))
    append(p, 3)
    p.update_follower_fetch(2, 3, T0 + 5)
    assert p.make_leader(5, [1, 2], [1, 2, 4], 0, T0 + 10) is False
    assert p.followers[2].log_end_offset == 3 and p.followers[2].last_caught_up_ms == T0 + 5
    assert set(p.followers) == {2, 4} and p.followers[4] == FollowerState()
    assert p.leader_epoch_start_offset == 0  # the epoch did not change


def test_make_follower(make):
    p, woken = leader(make)
    append(p, 2)
    woken.clear()
    assert p.make_follower(2, 6, [2, 1], [1, 2, 3], 4) is True
    assert not p.is_leader
    assert (p.leader_id, p.leader_epoch, p.isr, p.partition_epoch) == (2, 6, [2, 1], 4)
    assert p.followers == {} and p.pending_isr is None
    assert woken == [TP]  # parked fetches and acks=all waits re-check the role
    assert p.make_follower(2, 6, [2, 1, 3], [1, 2, 3], 5) is False  # same leader and epoch
    # a follower's high watermark is the leader's, capped by its own log end
    p.update_follower_high_watermark(1)
    assert p.high_watermark == 1
    p.update_follower_high_watermark(100)
    assert p.high_watermark == 2
    p.update_follower_high_watermark(0)
    assert p.high_watermark == 2  # never backwards


def test_a_follower_does_not_move_the_high_watermark_as_leader(make):
    p, _ = make()
    p.make_follower(2, 1, [2, 1], [1, 2], 0)
    p.update_follower_fetch(3, 10, T0)  # not a leader: ignored
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 0


# -- high watermark -------------------------------------------------------------------------------

def test_alone_in_the_isr_the_high_watermark_follows_the_log_end(make):
    p, woken = leader(make, isr=(1,))
    append(p, 3)
    assert (p.log_end_offset, p.high_watermark, p.last_stable_offset) == (3, 3, 3)
    assert TP in woken


def test_high_watermark_is_the_smallest_log_end_in_the_isr(make):
    p, woken = leader(make)
    append(p, 10)
    assert p.high_watermark == 0  # followers have confirmed nothing
    p.update_follower_fetch(2, 10, T0)
    assert p.high_watermark == 0
    woken.clear()
    p.update_follower_fetch(3, 4, T0)
    assert p.high_watermark == 4 and woken == [TP]
    p.update_follower_fetch(3, 10, T0)
    assert p.high_watermark == 10


def test_followers_outside_the_isr_do_not_hold_the_high_watermark(make):
    p, _ = leader(make, isr=(1, 2))
    append(p, 10)
    p.update_follower_fetch(3, 0, T0)
    p.update_follower_fetch(2, 8, T0)
    assert p.high_watermark == 8


def test_high_watermark_never_moves_backwards(make):
    p, _ = leader(make, isr=(1, 2))
    append(p, 10)
    p.update_follower_fetch(2, 8, T0)
    p.update_follower_fetch(2, 5, T0)  # a follower that truncated fetches from lower down
    assert p.high_watermark == 8


def test_pending_shrink_still_counts_the_member_being_removed(make):
    """Kafka's maximal ISR: until the controller accepts the shrink, the follower still counts."""
    p, _ = leader(make, isr=(1, 2, 3))
    append(p, 10)
    p.update_follower_fetch(2, 10, T0)
    p.update_follower_fetch(3, 3, T0)
    p.pending_isr = [1, 2]  # removing 3, in flight
    assert p.maximal_isr == [1, 2, 3]
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 3
    p.pending_isr, p.isr = None, [1, 2]  # accepted
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 10


def test_pending_expansion_counts_the_member_being_added(make):
    p, _ = leader(make, isr=(1, 2))
    append(p, 10)
    p.update_follower_fetch(2, 10, T0)
    assert p.high_watermark == 10
    append(p, 5)
    p.update_follower_fetch(3, 10, T0)
    p.pending_isr = [1, 2, 3]  # adding 3, in flight
    assert sorted(p.maximal_isr) == [1, 2, 3]
    p.update_follower_fetch(2, 15, T0)
    assert p.high_watermark == 10  # 3 holds it back already


def test_new_leader_does_not_advance_the_high_watermark_before_its_isr_followers_fetch(make):
    p, _ = make()
    p.make_follower(2, 3, [2, 1, 3], [1, 2, 3], 0)
    append_as_follower(p, 6)
    p.update_follower_high_watermark(2)
    p.make_leader(4, [1, 3], [1, 2, 3], 1, T0)
    assert p.high_watermark == 2  # 3 may lack offsets 2..5
    p.update_follower_fetch(3, 6, T0)
    assert p.high_watermark == 6


def test_new_leader_alone_in_the_isr_takes_its_whole_log(make):
    p, _ = make()
    p.make_follower(2, 3, [2, 1], [1, 2], 0)
    append_as_follower(p, 6)
    p.make_leader(4, [1], [1, 2], 1, T0)
    assert p.high_watermark == 6


def append_as_follower(p: Partition, n: int) -> None:
    buf, _ = batch(n)
    base = p.log.log_end_offset
    buf[0:8] = base.to_bytes(8, "big")
    p.log.append_as_follower(buf, validate_batches(buf, from_client=False))


# -- followers' fetch state -----------------------------------------------------------------------

def test_fetch_at_the_leaders_log_end_is_caught_up_now(make):
    p, _ = leader(make, isr=(1,))
    append(p, 5)
    p.update_follower_fetch(3, 5, T0 + 100)
    s = p.followers[3]
    assert (s.log_end_offset, s.last_caught_up_ms, s.last_fetch_ms, s.last_fetch_leader_log_end_offset) == \
        (5, T0 + 100, T0 + 100, 5)


def test_fetch_reaching_the_previous_fetchs_leader_end_is_caught_up_as_of_that_fetch(make):
    """Kafka's rule: a follower that keeps up with a busy leader never fetches at its end, but if it
    reached where the leader's end was at its previous fetch, it was caught up at that fetch."""
    p, _ = leader(make, isr=(1,))
    append(p, 5)
    p.update_follower_fetch(3, 2, T0 + 100)  # leader end then: 5
    assert p.followers[3].last_caught_up_ms == 0
    append(p, 5)
    p.update_follower_fetch(3, 5, T0 + 200)  # reached 5 (the previous end), not 10
    assert p.followers[3].last_caught_up_ms == T0 + 100
    assert p.followers[3].last_fetch_leader_log_end_offset == 10
    append(p, 5)
    p.update_follower_fetch(3, 9, T0 + 300)  # below 10 (the previous end): no progress in lag terms
    assert p.followers[3].last_caught_up_ms == T0 + 100
    assert p.followers[3].log_end_offset == 9


def test_last_caught_up_time_never_goes_back(make):
    p, _ = leader(make, isr=(1,))
    append(p, 5)
    p.update_follower_fetch(3, 5, T0 + 500)
    append(p, 1)
    p.update_follower_fetch(3, 5, T0 + 600)  # reached the previous end (5) as of T0 + 500
    assert p.followers[3].last_caught_up_ms == T0 + 500


def test_fetch_from_an_unknown_replica_is_ignored(make):
    p, _ = leader(make, replicas=(1, 2), isr=(1, 2))
    append(p, 3)
    p.update_follower_fetch(9, 3, T0)
    assert set(p.followers) == {2} and p.high_watermark == 0


# -- ISR expansion --------------------------------------------------------------------------------

def test_follower_joins_when_caught_up_to_the_high_watermark_and_the_epoch_start(make):
    p, _ = leader(make, isr=(1, 2))
    append(p, 10)
    p.update_follower_fetch(2, 8, T0)
    assert p.high_watermark == 8
    p.update_follower_fetch(3, 7, T0)
    assert p.isr_expansion(3) is None  # below the high watermark
    p.update_follower_fetch(3, 8, T0)
    assert p.isr_expansion(3) == [1, 2, 3]  # at the HW, though behind the log end


def test_follower_must_reach_the_leader_epoch_start_offset(make):
    """A follower at the HW but short of where this leader's epoch began could still hold records
    of an older epoch that this leader does not have (Kafka's isFollowerInSync)."""
    p, _ = make()
    p.make_follower(2, 3, [2, 1, 3], [1, 2, 3], 0)
    append_as_follower(p, 10)
    p.update_follower_high_watermark(6)
    p.make_leader(4, [1, 2], [1, 2, 3], 1, T0)  # 2 is in the ISR and has not fetched: the HW stays at 6
    assert (p.high_watermark, p.leader_epoch_start_offset) == (6, 10)
    p.update_follower_fetch(3, 8, T0)
    assert p.isr_expansion(3) is None  # >= HW 6 but < 10
    p.update_follower_fetch(3, 10, T0)
    assert p.isr_expansion(3) == [1, 2, 3]


def test_no_expansion_when_not_applicable(make):
    p, _ = leader(make, isr=(1, 2), replicas=(1, 2, 3))
    p.update_follower_fetch(2, 0, T0)
    p.update_follower_fetch(3, 0, T0)
    assert p.isr_expansion(2) is None  # already a member
    assert p.isr_expansion(9) is None  # not a replica
    p.pending_isr = [1]
    assert p.isr_expansion(3) is None  # a change is in flight
    p.pending_isr = None
    assert p.isr_expansion(3) == [1, 2, 3]
    p.make_follower(2, 6, [2, 1], [1, 2, 3], 1)
    assert p.isr_expansion(3) is None  # only a leader changes its ISR


# -- ISR shrink -----------------------------------------------------------------------------------

def test_follower_that_has_not_caught_up_for_the_lag_time_leaves(make):
    p, _ = leader(make, isr=(1, 2, 3))
    append(p, 5)
    p.update_follower_fetch(2, 5, T0 + 1000)
    p.update_follower_fetch(3, 5, T0 + 1000)
    append(p, 5)
    p.update_follower_fetch(2, 10, T0 + 2000)  # 2 keeps up; 3 stops fetching
    assert p.isr_shrink(T0 + 1000 + LAG_MS, LAG_MS) is None  # exactly at the limit: still in
    assert p.isr_shrink(T0 + 1001 + LAG_MS, LAG_MS) == [1, 2]


def test_isr_members_never_heard_from_leave_after_the_lag_time(make):
    p, _ = leader(make, isr=(1, 2, 3), now=T0)
    append(p, 1)
    assert p.isr_shrink(T0 + LAG_MS, LAG_MS) is None  # counted as caught up when leadership began
    assert p.isr_shrink(T0 + LAG_MS + 1, LAG_MS) == [1]


def test_slow_follower_that_never_reaches_the_end_leaves(make):
    p, _ = leader(make, isr=(1, 2))
    t = T0
    for _ in range(30):  # the leader's end always runs ahead of the follower by more than it fetches
        append(p, 10)
        t += 1000
        p.update_follower_fetch(2, p.log_end_offset - 15, t)
    assert p.followers[2].last_caught_up_ms == T0
    assert p.isr_shrink(t, LAG_MS) == [1]


def test_isr_shrink_keeps_a_follower_at_the_leaders_log_end(make):
    """Kafka's isCaughtUp: a follower whose log end equals the leader's is never out of sync, however
    long ago its last fetch (an idle partition has nothing for it to catch up on)."""
    p, _ = leader(make, isr=(1, 2))
    append(p, 5)
    p.update_follower_fetch(2, 5, T0 + 100)
    assert p.isr_shrink(T0 + 100 + 5 * LAG_MS, LAG_MS) is None


def test_no_shrink_while_a_change_is_in_flight_or_not_leading(make):
    p, _ = leader(make, isr=(1, 2))
    append(p, 1)
    p.pending_isr = [1, 2, 3]
    assert p.isr_shrink(T0 + 10 * LAG_MS, LAG_MS) is None
    p.pending_isr = None
    p.make_follower(2, 6, [2, 1], [1, 2, 3], 1)
    assert p.isr_shrink(T0 + 10 * LAG_MS, LAG_MS) is None


def test_leader_never_shrinks_itself_out(make):
    p, _ = leader(make, isr=(1,))
    assert p.isr_shrink(T0 + 10 * LAG_MS, LAG_MS) is None


# -- acks=all and min.insync.replicas ------------------------------------------------------------

def test_replication_done_when_the_high_watermark_reaches_the_offset(make):
    p, _ = leader(make, isr=(1, 2))
    info = append(p, 4)
    required = info.last_offset + 1
    assert not p.replication_done(required)
    p.update_follower_fetch(2, 3, T0)
    assert not p.replication_done(required)
    p.update_follower_fetch(2, 4, T0)
    assert p.replication_done(required)


def test_min_insync_replicas_refuses_acks_all_before_appending(make):
    p, _ = leader(make, isr=(1,), replicas=(1, 2, 3))
    p.set_log_config(LogConfig(), min_insync_replicas=2)
    with pytest.raises(NotEnoughReplicasError):
        append(p, 3, acks=-1)
    assert p.log_end_offset == 0  # nothing written
    append(p, 1, acks=1)
    append(p, 1, acks=0)
    assert p.log_end_offset == 2
    p.make_leader(6, [1, 2], [1, 2, 3], 1, T0)
    append(p, 1, acks=-1)
    assert p.log_end_offset == 3


def test_acks_all_with_enough_replicas_appends_in_the_leaders_epoch(make):
    p, _ = leader(make, epoch=9, isr=(1, 2))
    p.set_log_config(LogConfig(), min_insync_replicas=2)
    info = append(p, 2, acks=-1)
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert p.log.leader_epoch_cache.latest_epoch == 9


def test_an_append_carries_an_idle_caught_up_followers_time_forward_to_its_latest_fetch(tmp_path):
    """A fetch session does not read an idle partition for each of a follower's fetches (so
    update_follower_fetch is not called for it): at the next append, a follower at the log end
    counts as caught up as of its latest fetch, and keeps its ISR place while it fetches on; one
    that stopped fetching is caught up only as of its last fetch, and leaves after the lag."""
    seen = {2: T0, 3: T0}
    log = Log.open(tmp_path / "orders-seen", LogConfig(), now_ms=lambda: T0)
    try:
        p = Partition(TP, log, uuid.uuid4(), [1, 2, 3], ME, lambda tp: None, follower_seen_ms=seen.get)
        p.leader_id, p.leader_epoch = NO_LEADER, -1
        assert p.make_leader(5, [1, 2, 3], [1, 2, 3], 0, T0)
        append(p, 2)
        for r in (2, 3):
            p.update_follower_fetch(r, 2, T0)  # both at the log end
        quiet = T0 + 5 * LAG_MS  # long idle: follower 2 kept fetching (its session skips the partition), 3 died
        seen[2] = quiet
        append(p, 1)
        assert p.followers[2].last_caught_up_ms == quiet and p.followers[3].last_caught_up_ms == T0
        assert p.isr_shrink(quiet + 10, LAG_MS) == [1, 2]  # only the dead one goes
    finally:
        log.close()
