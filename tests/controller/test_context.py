"""The controller's election rules (Kafka's PartitionLeaderElectionAlgorithms and the ISR rules of
its partition and replica state machines) as pure functions, and ControllerContext's reads.

Properties: whatever the assignment, ISR and live brokers, a chosen leader is live and assigned,
and without unclean election it comes from the previous ISR; the ISR is never emptied; and over
random sequences of failures, returns, ISR changes and acks=all writes, no leader ever lacks an
acknowledged record unless unclean election is on."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.controller.context import (
    LEADER_DURING_DELETE,
    ControllerContext,
    elect_after_failure,
    elect_for_controlled_shutdown,
    elect_on_broker_return,
    new_partition_state,
    offline_partition_leader,
)
from kbroker.zookeeper.znodes import NO_LEADER, BrokerRegistration, LeaderAndIsr, TopicAssignment

CE = 9  # the controller epoch deciding


def state(leader, isr, leader_epoch=4, controller_epoch=2, partition_epoch=7):
    return LeaderAndIsr(leader, leader_epoch, tuple(isr), controller_epoch, partition_epoch)


# -- offline_partition_leader ---------------------------------------------------------------------

def test_offline_leader_is_the_first_live_isr_member_in_assignment_order():
    # the assignment's order (preferred replica first) decides, not the ISR's
    assert offline_partition_leader([3, 1, 2], [1, 2, 3], {1, 2, 3}, False) == 3
    assert offline_partition_leader([3, 1, 2], [2, 1], {1, 2, 3}, False) == 1
    assert offline_partition_leader([3, 1, 2], [2, 1], {2, 3}, False) == 2


def test_offline_leader_only_from_the_isr_without_unclean():
    assert offline_partition_leader([1, 2, 3], [1], {2, 3}, False) is None
    assert offline_partition_leader([1, 2, 3], [], {1, 2, 3}, False) is None
    assert offline_partition_leader([1, 2], [1, 2], set(), False) is None


def test_offline_leader_unclean_takes_any_live_replica_in_assignment_order():
    assert offline_partition_leader([1, 3, 2], [1], {2, 3}, True) == 3
    assert offline_partition_leader([1, 2, 3], [1, 2], {2, 3}, True) == 2  # an ISR member still wins
    assert offline_partition_leader([1, 2], [1], {4}, True) is None  # never a broker outside the assignment


# -- new_partition_state ---------------------------------------------------------------------------

def test_new_partition_first_live_replica_leads_live_replicas_are_the_isr():
    assert new_partition_state([2, 3, 1], {1, 2, 3}, CE) == LeaderAndIsr(2, 0, (2, 3, 1), CE, 0)
    assert new_partition_state([2, 3, 1], {1, 3}, CE) == LeaderAndIsr(3, 0, (3, 1), CE, 0)


def test_new_partition_without_live_replicas_has_no_state():
    assert new_partition_state([1, 2], {3}, CE) is None
    assert new_partition_state([], {1}, CE) is None


# -- elect_after_failure ---------------------------------------------------------------------------

def test_dead_leader_replaced_by_first_live_isr_member_in_assignment_order():
    s = state(1, [1, 2, 3])
    new = elect_after_failure(s, [1, 3, 2], {2, 3}, {2, 3}, False, CE)
    assert new == LeaderAndIsr(3, 5, (2, 3), CE, 7)  # ISR keeps its order; the znode version is kept for the write


def test_dead_follower_leaves_the_isr_leader_stays():
    s = state(1, [1, 2, 3])
    new = elect_after_failure(s, [1, 2, 3], {1, 3}, {1, 3}, False, CE)
    assert new == LeaderAndIsr(1, 5, (1, 3), CE, 7)


def test_nothing_changes_when_no_isr_member_died():
    s = state(1, [1, 2])
    assert elect_after_failure(s, [1, 2, 3], {1, 2}, {1, 2}, False, CE) is None  # 3 was out of the ISR already
    assert elect_after_failure(s, [1, 2, 3], {1, 2, 3}, {1, 2, 3}, False, CE) is None


def test_last_isr_member_stays_when_it_dies_and_partition_goes_offline():
    s = state(2, [2])
    new = elect_after_failure(s, [1, 2], {1}, {1}, False, CE)
    assert new == LeaderAndIsr(NO_LEADER, 5, (2,), CE, 7)  # 1 is live but out of sync: not elected


def test_isr_is_never_emptied_when_every_member_dies_at_once():
    s = state(1, [1, 2])
    new = elect_after_failure(s, [1, 2, 3], {3}, {3}, False, CE)
    assert new.leader == NO_LEADER and new.leader_epoch == 5
    assert new.isr and set(new.isr) <= {1, 2}  # some member of the last ISR stays: it has every acked record


def test_offline_partition_stays_offline_while_its_isr_is_dead():
    s = state(NO_LEADER, [2], leader_epoch=5)
    assert elect_after_failure(s, [1, 2, 3], {1, 3}, {1, 3}, False, CE) is None
    assert elect_after_failure(s, [1, 2, 3], set(), set(), False, CE) is None


def test_offline_partition_regains_its_leader_when_an_isr_member_is_live():
    # what a new controller finds after brokers came back while nobody was controller
    s = state(NO_LEADER, [2, 3], leader_epoch=5)
    assert elect_after_failure(s, [1, 2, 3], {1, 3}, {1, 3}, False, CE) == LeaderAndIsr(3, 6, (3,), CE, 7)


def test_unclean_election_picks_a_live_out_of_sync_replica_as_the_only_isr_member():
    s = state(1, [1])
    new = elect_after_failure(s, [1, 3, 2], {2, 3}, {2, 3}, True, CE)
    assert new == LeaderAndIsr(3, 5, (3,), CE, 7)


def test_unclean_election_still_prefers_the_isr():
    s = state(1, [1, 2])
    assert elect_after_failure(s, [1, 3, 2], {2, 3}, {2, 3}, True, CE) == LeaderAndIsr(2, 5, (2,), CE, 7)


def test_unclean_election_without_live_replicas_leaves_the_partition_offline():
    s = state(1, [1])
    assert elect_after_failure(s, [1, 2], {3}, {3}, True, CE) == LeaderAndIsr(NO_LEADER, 5, (1,), CE, 7)


def test_shutting_down_brokers_are_not_elected():
    s = state(1, [1, 2, 3])
    new = elect_after_failure(s, [1, 2, 3], {2, 3}, {3}, False, CE)  # 2 is in a controlled shutdown
    assert new.leader == 3 and new.isr == (2, 3)


def test_a_dead_leader_whose_only_live_isr_member_is_shutting_down_goes_offline():
    s = state(1, [1, 2])
    new = elect_after_failure(s, [1, 2], {2}, set(), False, CE)
    assert new.leader == NO_LEADER and new.isr == (2,)


def test_follower_death_keeps_a_live_leader_that_is_shutting_down():
    """A follower died; the leader is alive (in a controlled shutdown it could not complete, as no
    other ISR member could take over). Kafka only removes the dead follower from the ISR
    (ReplicaStateMachine: OfflineReplica -> removeReplicasFromIsr, the leader kept); only a partition
    whose leader died gets an election. Taking leadership away from the live leader leaves the
    partition without any leader until that broker restarts."""
    s = state(1, [1, 2])
    live = {1, 3}
    electable = {3}  # 1 is shutting down; 3 is live but out of sync
    new = elect_after_failure(s, [1, 2, 3], live, electable, False, CE)
    assert new == LeaderAndIsr(1, 5, (1,), CE, 7)


@pytest.mark.parametrize("unclean", [False, True])
def test_leader_epoch_bumps_exactly_when_something_changes(unclean):
    s = state(1, [1, 2, 3], leader_epoch=10)
    assert elect_after_failure(s, [1, 2, 3], {1, 2, 3}, {1, 2, 3}, unclean, CE) is None
    assert elect_after_failure(s, [1, 2, 3], {1, 2, 3, 4}, {1, 2, 3, 4}, unclean, CE) is None
    assert elect_after_failure(s, [1, 2, 3], {1, 2}, {1, 2}, unclean, CE).leader_epoch == 11
    assert elect_after_failure(s, [1, 2, 3], {2, 3}, {2, 3}, unclean, CE).leader_epoch == 11


# -- elect_for_controlled_shutdown -----------------------------------------------------------------

def test_controlled_shutdown_moves_leadership_to_the_first_live_isr_member():
    s = state(1, [1, 2, 3])
    new = elect_for_controlled_shutdown(s, [1, 3, 2], 1, {1, 2, 3}, CE)
    assert new == LeaderAndIsr(3, 5, (2, 3), CE, 7)


def test_controlled_shutdown_skips_brokers_that_are_shutting_down_too():
    s = state(1, [1, 2, 3])
    # the controller passes electable = live - shutting_down, plus the broker asking
    new = elect_for_controlled_shutdown(s, [1, 2, 3], 1, {1, 3}, CE)
    assert new.leader == 3 and 1 not in new.isr


def test_controlled_shutdown_keeps_a_leader_nobody_can_replace():
    assert elect_for_controlled_shutdown(state(1, [1]), [1, 2], 1, {1, 2}, CE) is None  # 2 is out of sync
    assert elect_for_controlled_shutdown(state(1, [1, 2]), [1, 2], 1, {1}, CE) is None  # 2 shuts down too


def test_controlled_shutdown_of_a_follower_drops_it_from_the_isr():
    s = state(1, [1, 2, 3])
    assert elect_for_controlled_shutdown(s, [1, 2, 3], 2, {1, 2, 3}, CE) == LeaderAndIsr(1, 5, (1, 3), CE, 7)


def test_controlled_shutdown_of_an_out_of_sync_follower_changes_nothing():
    assert elect_for_controlled_shutdown(state(1, [1, 3]), [1, 2, 3], 2, {1, 2, 3}, CE) is None


def test_controlled_shutdown_never_empties_the_isr():
    # a follower alone in the ISR (the leader died before the ISR shrank) stays there
    assert elect_for_controlled_shutdown(state(NO_LEADER, [2]), [1, 2], 2, {1, 2}, CE) is None


# -- elect_on_broker_return ------------------------------------------------------------------------

def test_partition_without_a_state_gets_its_first_one():
    assert elect_on_broker_return(None, [2, 1], {1, 2}, {1, 2}, False, CE) == LeaderAndIsr(2, 0, (2, 1), CE, 0)
    assert elect_on_broker_return(None, [2, 1], {1}, {1}, False, CE) == LeaderAndIsr(1, 0, (1,), CE, 0)
    assert elect_on_broker_return(None, [2, 1], {3}, {3}, False, CE) is None


def test_online_partition_is_left_alone():
    assert elect_on_broker_return(state(1, [1]), [1, 2], {1, 2}, {1, 2}, False, CE) is None
    assert elect_on_broker_return(state(1, [1]), [1, 2], {1, 2}, {1, 2}, True, CE) is None


def test_offline_partition_regains_a_leader_when_an_isr_member_returns():
    s = state(NO_LEADER, [2], leader_epoch=6)
    assert elect_on_broker_return(s, [1, 2, 3], {1, 2}, {1, 2}, False, CE) == LeaderAndIsr(2, 7, (2,), CE, 7)


def test_returning_out_of_sync_replica_does_not_lead_without_unclean():
    s = state(NO_LEADER, [2], leader_epoch=6)
    assert elect_on_broker_return(s, [1, 2, 3], {1, 3}, {1, 3}, False, CE) is None


def test_returning_out_of_sync_replica_leads_alone_with_unclean():
    s = state(NO_LEADER, [2], leader_epoch=6)
    assert elect_on_broker_return(s, [3, 1, 2], {1, 3}, {1, 3}, True, CE) == LeaderAndIsr(3, 7, (3,), CE, 7)


def test_returning_isr_members_in_assignment_order_and_only_live_ones_stay():
    s = state(NO_LEADER, [1, 2, 3], leader_epoch=6)
    new = elect_on_broker_return(s, [3, 2, 1], {1, 2}, {1, 2}, False, CE)
    assert new == LeaderAndIsr(2, 7, (1, 2), CE, 7)


def test_a_returning_broker_does_not_lead_while_shutting_down():
    s = state(NO_LEADER, [2], leader_epoch=6)
    assert elect_on_broker_return(s, [1, 2], {1, 2}, {1}, False, CE) is None


# -- ControllerContext -----------------------------------------------------------------------------

@pytest.fixture
def ctx():
    c = ControllerContext(epoch=3, epoch_zk_version=2)
    c.live_brokers = {b: BrokerRegistration(b, f"h{b}", 9090 + b, epoch=100 + b) for b in (1, 2, 3)}
    tid = uuid.UUID(int=7)
    c.topics = {"a": TopicAssignment("a", tid, {1: [2, 3], 0: [1, 2]}),
                "b": TopicAssignment("b", None, {0: [3, 4]})}
    c.states = {("a", 0): state(1, [1, 2]), ("a", 1): state(2, [2, 3]), ("b", 0): state(4, [4])}
    return c


def test_context_reads(ctx):
    assert ctx.replicas(("a", 1)) == [2, 3]
    assert ctx.replicas(("a", 9)) == [] and ctx.replicas(("zzz", 0)) == []
    r = ctx.replicas(("a", 0))
    r.append(99)
    assert ctx.replicas(("a", 0)) == [1, 2]  # a copy
    assert ctx.topic_id("a") == uuid.UUID(int=7) and ctx.topic_id("b") is None and ctx.topic_id("zzz") is None
    assert ctx.all_partitions() == [("a", 0), ("a", 1), ("b", 0)]
    assert ctx.partitions_of(["b", "zzz", "a"]) == [("b", 0), ("a", 0), ("a", 1)]
    assert ctx.offline_replicas(("b", 0)) == [4]
    assert ctx.offline_replicas(("a", 0)) == []
    assert ctx.partitions_on(3) == [("a", 1), ("b", 0)]
    assert ctx.partitions_on(9) == []
    assert sorted(ctx.partitions_led_by(2)) == [("a", 1)]


def test_context_online_and_electable(ctx):
    assert ctx.is_online(("a", 0)) and ctx.is_online(("a", 1))
    assert not ctx.is_online(("b", 0))  # leader 4 is not live
    assert not ctx.is_online(("zzz", 0))
    ctx.states[("a", 0)] = state(NO_LEADER, [1])
    assert not ctx.is_online(("a", 0))
    assert ctx.electable() == {1, 2, 3}
    ctx.shutting_down.add(2)
    assert ctx.electable() == {1, 3}
    assert ctx.is_online(("a", 1))  # a broker shutting down still leads until it hands over


def test_leader_during_delete_is_kafkas():
    assert LEADER_DURING_DELETE == -2 and NO_LEADER == -1


# -- properties ------------------------------------------------------------------------------------

BROKERS = list(range(1, 7))


@st.composite
def partition_situation(draw):
    assignment = draw(st.permutations(BROKERS).map(lambda p: p[: draw(st.integers(1, 5))]))
    isr = draw(st.lists(st.sampled_from(assignment), min_size=1, unique=True))
    leader = draw(st.sampled_from(isr) | st.just(NO_LEADER))
    live = draw(st.sets(st.sampled_from(BROKERS)))
    shutting = draw(st.sets(st.sampled_from(sorted(live)))) if live else set()
    unclean = draw(st.booleans())
    old = LeaderAndIsr(leader, draw(st.integers(0, 1000)), tuple(isr), 1, draw(st.integers(0, 1000)))
    return old, list(assignment), live, live - shutting, unclean


def check_decision(old: LeaderAndIsr, new: LeaderAndIsr | None, assignment, live, electable, unclean):
    """What every decision satisfies; `electable` are the brokers a new leader may be."""
    result = new if new is not None else old
    assert result.isr, "the ISR is never empty"
    assert len(set(result.isr)) == len(result.isr)
    if new is None:
        return result
    assert (new.leader, new.isr) != (old.leader, old.isr), "a no-op decision must be None"
    assert new.leader_epoch == old.leader_epoch + 1
    assert new.controller_epoch == CE and new.partition_epoch == old.partition_epoch
    if new.leader != NO_LEADER:
        assert new.leader in live and new.leader in assignment
        assert new.leader in new.isr
        if new.leader != old.leader:
            assert new.leader in electable
            clean = [r for r in assignment if r in electable and r in old.isr]
            if clean:  # a clean choice always wins, in assignment order
                assert new.leader == clean[0]
    unclean_leader = {new.leader} if new.leader not in set(old.isr) | {NO_LEADER} else set()
    if not unclean:
        assert not unclean_leader, "without unclean election only the old ISR holds every acked record"
    assert set(new.isr) <= set(old.isr) | unclean_leader
    assert not unclean_leader or new.isr == (new.leader,)
    return result


@given(partition_situation())
@settings(max_examples=400, deadline=None)
def test_property_elect_after_failure(situation):
    old, assignment, live, electable, unclean = situation
    new = elect_after_failure(old, assignment, live, electable, unclean, CE)
    result = check_decision(old, new, assignment, live, electable, unclean)
    assert result.leader == NO_LEADER or result.leader in live, "a dead leader is always replaced"
    if result.leader != NO_LEADER or any(r in live for r in old.isr):
        assert set(result.isr) <= live, "dead brokers leave the ISR unless it would empty"
    if old.leader in electable:
        assert result.leader == old.leader, "a live leader is never replaced after a failure"
    if any(r in electable for r in old.isr):
        assert result.leader != NO_LEADER, "a live electable ISR member means the partition has a leader"


@given(partition_situation())
@settings(max_examples=400, deadline=None)
def test_property_elect_on_broker_return(situation):
    old, assignment, live, electable, unclean = situation
    new = elect_on_broker_return(old, assignment, live, electable, unclean, CE)
    check_decision(old, new, assignment, live, electable, unclean)
    if old.leader in live:
        assert new is None
    else:
        if any(r in electable for r in old.isr):
            assert new is not None and new.leader in old.isr, "a returning ISR member leads"
        if new is not None and new.leader != NO_LEADER:
            assert set(new.isr) <= live, "only live ISR members stay"


@given(partition_situation(), st.sampled_from(BROKERS))
@settings(max_examples=400, deadline=None)
def test_property_controlled_shutdown(situation, shutting):
    old, assignment, live, electable, _unclean = situation
    if shutting not in assignment or old.leader not in live | {NO_LEADER}:
        return
    live = live | {shutting}
    new = elect_for_controlled_shutdown(old, assignment, shutting, (electable - {shutting}) | {shutting}, CE)
    check_decision(old, new, assignment, live, electable - {shutting}, False)
    if new is not None:
        assert new.leader != shutting and shutting not in new.isr
    if old.leader == shutting and any(r in electable - {shutting} for r in old.isr if r != shutting):
        assert new is not None and new.leader != shutting, "leadership moves off when someone can take it"


# A model of acks=all: a write is acknowledged once every ISR member has it. Events happen one at a
# time, and the controller reacts to each as kbroker's controller does.
EVENTS = st.lists(st.tuples(st.sampled_from(["write", "die", "return", "catchup", "shrink", "shutdown"]),
                            st.sampled_from(BROKERS[:4])), max_size=60)


@given(st.permutations(BROKERS[:4]).flatmap(lambda p: st.integers(1, 4).map(lambda n: list(p[:n]))), EVENTS)
@settings(max_examples=300, deadline=None)
def test_property_nothing_acknowledged_is_lost_without_unclean_election(assignment, events):
    live = set(BROKERS[:4])
    s = new_partition_state(assignment, live, CE)
    logs: dict[int, set[int]] = {b: set() for b in BROKERS}
    acked: set[int] = set()
    next_record = 0

    def elected(old, new):
        nonlocal s
        if new is None:
            return
        assert new.leader_epoch == old.leader_epoch + 1
        if new.leader != NO_LEADER:
            assert new.leader != old.leader or new.isr != old.isr
            assert acked <= logs[new.leader], f"leader {new.leader} lacks acknowledged records"
        s = new

    def fail(broker):
        live.discard(broker)
        if s.leader == broker or broker in s.isr:
            elected(s, elect_after_failure(s, assignment, live, set(live), False, CE))

    for kind, b in events:
        assert s.isr and (s.leader == NO_LEADER or s.leader in s.isr)
        if kind == "write" and s.leader != NO_LEADER:
            for member in s.isr:  # acks=all: on every ISR member, then acknowledged
                logs[member].add(next_record)
            acked.add(next_record)
            next_record += 1
        elif kind == "die" and b in live:
            fail(b)
        elif kind == "return" and b not in live:
            live.add(b)
            if b in assignment:
                elected(s, elect_on_broker_return(s, assignment, live, set(live), False, CE))
        elif kind == "catchup" and s.leader != NO_LEADER and b in live and b in assignment and b not in s.isr:
            logs[b] = set(logs[s.leader])  # AlterPartition: a follower that caught up joins
            s = s.with_(isr=s.isr + (b,), leader_epoch=s.leader_epoch + 1)
        elif kind == "shrink" and s.leader not in (NO_LEADER, b) and b in s.isr:
            s = s.with_(isr=tuple(r for r in s.isr if r != b), leader_epoch=s.leader_epoch + 1)
        elif kind == "shutdown" and b in live and b in assignment:
            electable = set(live) - {b}
            elected(s, elect_for_controlled_shutdown(s, assignment, b, electable | {b}, CE))
            fail(b)
