"""ElectLeaders' rules (`context.requested_election`) and the rebalance planner
(`controller.balance`), without ZooKeeper or brokers."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.controller.balance import balanced_assignment, counts
from kbroker.controller.context import PREFERRED, UNCLEAN, ControllerContext, requested_election
from kbroker.errors import ErrorCode
from kbroker.zookeeper.znodes import NO_LEADER, BrokerRegistration, LeaderAndIsr, TopicAssignment


def cluster(live=(1, 2, 3), **partitions) -> ControllerContext:
    """partitions: name=(replicas, leader, isr) for partitions 0 of topics named so."""
    c = ControllerContext(epoch=4, epoch_zk_version=3)
    c.live_brokers = {b: BrokerRegistration(b, "h", 9000 + b, epoch=10 + b) for b in live}
    for topic, (replicas, leader, isr) in partitions.items():
        c.topics[topic] = TopicAssignment(topic, None, {0: list(replicas)})
        c.states[(topic, 0)] = LeaderAndIsr(leader, 7, tuple(isr), 2, 11)
    return c


def test_preferred_election_moves_leadership_to_the_first_replica():
    c = cluster(t=([1, 2, 3], 2, [1, 2, 3]))
    state, problem = requested_election(c, ("t", 0), PREFERRED)
    assert problem is None
    assert (state.leader, state.leader_epoch, state.isr, state.controller_epoch, state.partition_epoch) == \
        (1, 8, (1, 2, 3), 4, 11)


def test_preferred_election_not_needed_when_the_preferred_replica_leads():
    state, problem = requested_election(cluster(t=([1, 2], 1, [1, 2])), ("t", 0), PREFERRED)
    assert state is None and problem[0] == ErrorCode.election_not_needed


def test_preferred_replica_must_be_alive_in_sync_and_not_shutting_down():
    for c in (cluster(t=([1, 2], 2, [2])),                  # out of the ISR
              cluster(live=(2, 3), t=([1, 2], 2, [1, 2]))):  # dead
        assert requested_election(c, ("t", 0), PREFERRED)[1][0] == ErrorCode.preferred_leader_not_available
    c = cluster(t=([1, 2], 2, [1, 2]))
    c.shutting_down.add(1)
    assert requested_election(c, ("t", 0), PREFERRED)[1][0] == ErrorCode.preferred_leader_not_available


def test_unknown_partition():
    c = cluster(t=([1, 2], 1, [1, 2]))
    assert requested_election(c, ("t", 5), PREFERRED)[1][0] == ErrorCode.unknown_topic_or_partition
    assert requested_election(c, ("nope", 0), UNCLEAN)[1][0] == ErrorCode.unknown_topic_or_partition


def test_unclean_election_only_for_a_partition_without_a_live_leader():
    assert requested_election(cluster(t=([1, 2], 2, [2])), ("t", 0), UNCLEAN)[1][0] == ErrorCode.election_not_needed
    # leader 3 died with the ISR = {3}: an out-of-sync live replica takes over, alone in the ISR
    state, problem = requested_election(cluster(live=(1, 2), t=([3, 2, 1], 3, [3])), ("t", 0), UNCLEAN)
    assert problem is None and state.leader == 2 and state.isr == (2,) and state.leader_epoch == 8
    # an ISR member that is alive is preferred over an out-of-sync one
    state, _ = requested_election(cluster(live=(1, 2), t=([2, 1, 3], NO_LEADER, [1, 3])), ("t", 0), UNCLEAN)
    assert state.leader == 1 and state.isr == (1,)
    assert requested_election(cluster(live=(9,), t=([1, 2], NO_LEADER, [1])), ("t", 0), UNCLEAN)[1][0] == \
        ErrorCode.eligible_leaders_not_available


# -- rebalance ---------------------------------------------------------------------------------------

def apply(assignments, plan):
    out = dict(assignments)
    out.update({tp: tuple(r) for tp, r in plan.items()})
    return out


def test_a_new_empty_broker_gets_its_share_of_replicas_and_leaderships():
    three = {("t", p): tuple((p + i) % 3 + 1 for i in range(3)) for p in range(12)}
    racks = {b: None for b in (1, 2, 3, 4)}
    after = apply(three, balanced_assignment(three, racks))
    replicas, leaders = counts(after, racks)
    assert sorted(replicas.values()) == [9, 9, 9, 9]
    assert sorted(leaders.values()) == [3, 3, 3, 3]
    assert all(len(set(r)) == 3 for r in after.values())


def test_a_balanced_cluster_needs_no_moves():
    balanced = {("t", p): ((p % 3) + 1, ((p + 1) % 3) + 1) for p in range(6)}
    assert balanced_assignment(balanced, {1: None, 2: None, 3: None}) == {}


def test_partitions_on_a_broker_that_is_gone_are_left_alone():
    assignments = {("t", 0): (1, 9), ("t", 1): (1, 2), ("t", 2): (1, 2)}
    plan = balanced_assignment(assignments, {1: None, 2: None, 3: None})
    assert ("t", 0) not in plan


def test_moves_never_put_a_partition_on_fewer_racks():
    racks = {1: "a", 2: "b", 3: "a", 4: "b", 5: "a"}
    assignments = {("t", p): (1, 2) for p in range(8)}
    after = apply(assignments, balanced_assignment(assignments, racks))
    assert all({racks[r] for r in replicas} == {"a", "b"} for replicas in after.values())


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_plans_keep_every_partition_whole_and_even_out_counts_without_racks(data):
    brokers = list(range(1, data.draw(st.integers(2, 6)) + 1))
    rf = data.draw(st.integers(1, len(brokers)))
    n = data.draw(st.integers(1, 30))
    assignments = {("t", p): tuple(data.draw(st.permutations(brokers))[:rf]) for p in range(n)}
    racks = {b: None for b in brokers}
    plan = balanced_assignment(assignments, racks)
    after = apply(assignments, plan)
    for tp, replicas in after.items():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(brokers)
    replicas, leaders = counts(after, brokers)
    assert max(replicas.values()) - min(replicas.values()) <= 1
    assert max(leaders.values()) - min(leaders.values()) <= 1
    # a plan only changes what needs it: nothing in it is a no-op
    assert all(tuple(r) != assignments[tp] for tp, r in plan.items())
    # the total is unchanged
    assert sum(replicas.values()) == rf * n and Counter(leaders).total() == n


# -- auto.leader.rebalance.enable: Kafka's imbalance check -----------------------------------------

def test_auto_rebalance_moves_leadership_back_only_above_the_imbalance_percentage():
    from kbroker.controller.context import preferred_leader_elections

    c = ControllerContext(epoch=4, epoch_zk_version=3)
    c.live_brokers = {b: BrokerRegistration(b, "h", 9000 + b, epoch=10 + b) for b in (1, 2, 3)}
    # broker 1 prefers 10 partitions and leads 9 of them: 10 % imbalance is not above 10 %
    c.topics["t"] = TopicAssignment("t", None, {p: [1, 2, 3] for p in range(10)})
    c.states = {("t", p): LeaderAndIsr(1 if p else 2, 7, (1, 2, 3), 2, 11) for p in range(10)}
    assert preferred_leader_elections(c, 10) == {}
    # two not led: 20 % > 10 %, both go back (each where broker 1 is in the ISR)
    c.states[("t", 1)] = LeaderAndIsr(3, 7, (3, 2), 2, 11)  # broker 1 out of this ISR: stays
    c.states[("t", 2)] = LeaderAndIsr(2, 7, (1, 2, 3), 2, 11)
    planned = preferred_leader_elections(c, 10)
    assert sorted(planned) == [("t", 0), ("t", 2)]
    assert all(s.leader == 1 and s.leader_epoch == 8 and s.controller_epoch == 4 for s in planned.values())
    c.shutting_down.add(1)  # a broker shutting down takes nothing back
    assert preferred_leader_elections(c, 10) == {}
