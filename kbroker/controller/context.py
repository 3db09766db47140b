"""What the controller knows of the cluster, and its decisions as pure functions of that knowledge.

`ControllerContext` mirrors ZooKeeper (live brokers with their epochs, topic assignments, partition
states) plus what the brokers answered about their log dirs (replicas on a failed dir are offline
although their broker lives, Kafka's `replicasOnOfflineDirs`); the election functions decide new
leaders and ISRs without any I/O, so every failure rule (Kafka's: preferred replica first, leaders
only from the ISR unless unclean election is on, the ISR never emptied by the controller, offline
replicas never elected) is testable on its own. The controller performs the writes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable

from kbroker.errors import ErrorCode
from kbroker.zookeeper.znodes import NO_LEADER, BrokerRegistration, LeaderAndIsr, TopicAssignment

TopicPartition = tuple[str, int]
LEADER_DURING_DELETE = -2  # UpdateMetadata's "this partition is being deleted"


@dataclass
class ControllerContext:
    epoch: int
    epoch_zk_version: int
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    # broker -> its replicas on a failed log dir, learnt from LeaderAndIsr answers; forgotten when
    # the broker leaves or restarts (a restarted broker answers afresh)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    # -- reads ------------------------------------------------------------------------------------
    def replicas(self, tp: TopicPartition) -> list[int]:
        topic = self.topics.get(tp[0])
        return list(topic.partitions.get(tp[1], [])) if topic else []

    def adding(self, tp: TopicPartition) -> list[int]:
        topic = self.topics.get(tp[0])
        return list(topic.adding.get(tp[1], [])) if topic else []

    def removing(self, tp: TopicPartition) -> list[int]:
        topic = self.topics.get(tp[0])
        return list(topic.removing.get(tp[1], [])) if topic else []

    def topic_id(self, topic: str) -> uuid.UUID | None:
        t = self.topics.get(topic)
        return t.topic_id if t else None

    def all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, a in self.topics.items() for p in sorted(a.partitions)]

    def partitions_of(self, topics) -> list[TopicPartition]:
        return [(t, p) for t in topics if t in self.topics for p in sorted(self.topics[t].partitions)]

    def electable(self) -> set[int]:
        """Brokers that may lead: alive and not in a controlled shutdown."""
        return set(self.live_brokers) - self.shutting_down

    def is_replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        return broker_id in self.live_brokers and tp not in self.replicas_on_offline_dirs.get(broker_id, ())

    def offline_replicas(self, tp: TopicPartition) -> list[int]:
        return [r for r in self.replicas(tp) if not self.is_replica_online(r, tp)]

    def live_for(self, tp: TopicPartition) -> set[int]:
        """The live brokers whose replica of `tp` (if any) is online: the `live` of an election."""
        return {b for b in self.live_brokers if tp not in self.replicas_on_offline_dirs.get(b, ())}

    def electable_for(self, tp: TopicPartition) -> set[int]:
        """Brokers that may lead `tp`: electable, with their replica of it online."""
        return self.live_for(tp) - self.shutting_down

    def note_log_dir_answers(self, broker_id: int, offline: set[TopicPartition],
                             online: set[TopicPartition]) -> set[TopicPartition]:
        """A broker's LeaderAndIsr answers (KAFKA_STORAGE_ERROR: `offline`; NONE: `online`), as
        Kafka's processLeaderAndIsrResponseReceived: returns its replicas newly known offline."""
        if broker_id not in self.live_brokers:
            return set()
        before = self.replicas_on_offline_dirs.get(broker_id, set())
        now = (before - online) | offline
        if now:
            self.replicas_on_offline_dirs[broker_id] = now
        else:
            self.replicas_on_offline_dirs.pop(broker_id, None)
        return now - before

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, s in self.states.items() if s.leader == broker_id]

    def is_online(self, tp: TopicPartition) -> bool:
        state = self.states.get(tp)
        return state is not None and self.is_replica_online(state.leader, tp)


# -- elections (Kafka's PartitionLeaderElectionAlgorithms) ---------------------------------------------
def offline_partition_leader(assignment: list[int], isr: list[int] | tuple[int, ...], live: set[int],
                             unclean: bool) -> int | None:
    """First live ISR member in assignment order; with unclean election, else any live replica."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica
    if unclean:
        for replica in assignment:
            if replica in live:
                return replica
    return None


def new_partition_state(assignment: list[int], live: set[int], controller_epoch: int) -> LeaderAndIsr | None:
    """A new partition: the first live replica leads, the live replicas are the ISR."""
    isr = tuple(r for r in assignment if r in live)
    if not isr:
        return None
    return LeaderAndIsr(isr[0], 0, isr, controller_epoch)


def elect_after_failure(state: LeaderAndIsr, assignment: list[int], live: set[int], electable: set[int],
                        unclean: bool, controller_epoch: int) -> LeaderAndIsr | None:
    """The new state of a partition after brokers left `live`; None when nothing changes.

    Dead brokers leave the ISR (never emptying it: the last member stays, since it holds every
    acknowledged record), a dead leader is replaced by a live ISR member, and when none is left the
    partition is offline (leader -1) unless unclean election may pick any live replica.
    """
    isr = tuple(r for r in state.isr if r in live)
    leader = state.leader
    if leader not in live:  # a live leader keeps leading, even one in a controlled shutdown
        candidate = offline_partition_leader(assignment, isr, electable, False)
        if candidate is None and unclean:
            candidate = offline_partition_leader(assignment, (), electable, True)
            if candidate is not None:
                isr = (candidate,)
        leader = candidate if candidate is not None else NO_LEADER
    if not isr:
        isr = state.isr if leader == NO_LEADER else (leader,)
    if leader == state.leader and isr == state.isr:
        return None
    return LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch, state.partition_epoch)


def elect_after_replicas_offline(ctx: ControllerContext, partitions: set[TopicPartition],
                                 unclean: Callable[[str], bool]) -> dict[TopicPartition, LeaderAndIsr]:
    """Kafka's onReplicasBecomeOffline for replicas whose log dir failed (their broker lives on):
    each partition's offline replicas leave its ISR and an offline leader is replaced by an online
    ISR member, by the broker-failure rules with the offline replicas counted as gone."""
    planned = {}
    for tp in sorted(partitions):
        state = ctx.states.get(tp)
        if state is None:
            continue
        new = elect_after_failure(state, ctx.replicas(tp), ctx.live_for(tp), ctx.electable_for(tp),
                                  unclean(tp[0]), ctx.epoch)
        if new is not None:
            planned[tp] = new
    return planned


def elect_for_controlled_shutdown(state: LeaderAndIsr, assignment: list[int], shutting: int,
                                  electable: set[int], controller_epoch: int) -> LeaderAndIsr | None:
    """Move leadership off a broker shutting down (to a live ISR member), or drop it from the ISR
    when it only follows. None when it cannot or need not change (a single replica keeps leading)."""
    if state.leader == shutting:
        isr = tuple(r for r in state.isr if r != shutting)
        leader = offline_partition_leader(assignment, isr, electable - {shutting}, False)
        if leader is None:
            return None
        return LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch, state.partition_epoch)
    if shutting in state.isr and len(state.isr) > 1:
        isr = tuple(r for r in state.isr if r != shutting)
        return LeaderAndIsr(state.leader, state.leader_epoch + 1, isr, controller_epoch, state.partition_epoch)
    return None


def elect_on_broker_return(state: LeaderAndIsr | None, assignment: list[int], live: set[int],
                           electable: set[int], unclean: bool, controller_epoch: int) -> LeaderAndIsr | None:
    """An offline partition (no live leader) regains a leader when an ISR member (or, with unclean
    election, any replica) is back; a partition that never had a state gets its first."""
    if state is None:
        return new_partition_state(assignment, electable, controller_epoch)
    if state.leader in live:
        return None
    leader = offline_partition_leader(assignment, state.isr, electable, unclean)
    if leader is None:
        return None
    isr = tuple(r for r in state.isr if r in live) if leader in state.isr else (leader,)
    return LeaderAndIsr(leader, state.leader_epoch + 1, isr or (leader,), controller_epoch, state.partition_epoch)


def preferred_leader_elections(ctx: ControllerContext, imbalance_percentage: int) -> dict[TopicPartition, LeaderAndIsr]:
    """Kafka's auto leader rebalance: for every broker whose share of partitions it prefers but does
    not lead is above `imbalance_percentage`, give those partitions back to it where it is alive,
    in the ISR and not shutting down."""
    preferred_of: dict[int, list[TopicPartition]] = {}
    for tp in ctx.states:
        replicas = ctx.replicas(tp)
        if replicas:
            preferred_of.setdefault(replicas[0], []).append(tp)
    electable = ctx.electable()
    planned = {}
    for broker_id, tps in preferred_of.items():
        if broker_id not in electable:
            continue
        not_led = [tp for tp in tps if ctx.states[tp].leader != broker_id]
        if not tps or len(not_led) * 100 <= imbalance_percentage * len(tps):
            continue
        for tp in not_led:
            state = ctx.states[tp]
            if broker_id in state.isr and ctx.is_replica_online(broker_id, tp):
                planned[tp] = LeaderAndIsr(broker_id, state.leader_epoch + 1, state.isr, ctx.epoch,
                                           state.partition_epoch)
    return planned


PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


def requested_election(ctx: ControllerContext, tp: TopicPartition, election_type: int
                       ) -> tuple[LeaderAndIsr | None, tuple[int, str] | None]:
    """ElectLeaders for one partition (Kafka's rules): the new state, or an error (code, message).

    Preferred: the first replica leads if it is alive, electable and in the ISR; nothing to do
    when it already leads. Unclean: only a partition without a live leader, which gets the first
    live ISR member or, failing that, the first live replica (whose log becomes the truth)."""
    state = ctx.states.get(tp)
    replicas = ctx.replicas(tp)
    if state is None or not replicas:
        return None, (ErrorCode.unknown_topic_or_partition, f"{tp[0]}-{tp[1]} does not exist")
    electable = ctx.electable_for(tp)
    if election_type == PREFERRED:
        preferred = replicas[0]
        if state.leader == preferred:
            return None, (ErrorCode.election_not_needed, f"broker {preferred} already leads {tp[0]}-{tp[1]}")
        if preferred not in electable or preferred not in state.isr:
            return None, (ErrorCode.preferred_leader_not_available,
                          f"preferred replica {preferred} of {tp[0]}-{tp[1]} is not alive and in sync")
        return state.with_(leader=preferred, leader_epoch=state.leader_epoch + 1, controller_epoch=ctx.epoch), None
    if election_type == UNCLEAN:
        if ctx.is_replica_online(state.leader, tp):
            return None, (ErrorCode.election_not_needed, f"{tp[0]}-{tp[1]} has a live leader ({state.leader})")
        leader = offline_partition_leader(replicas, state.isr, electable, True)
        if leader is None:
            return None, (ErrorCode.eligible_leaders_not_available, f"no replica of {tp[0]}-{tp[1]} is alive")
        isr = tuple(r for r in state.isr if ctx.is_replica_online(r, tp)) if leader in state.isr else (leader,)
        return state.with_(leader=leader, leader_epoch=state.leader_epoch + 1, isr=isr or (leader,),
                           controller_epoch=ctx.epoch), None
    return None, (ErrorCode.invalid_request, f"unknown election type {election_type}")
