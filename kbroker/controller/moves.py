"""What the controller does for partition reassignments (KIP-455), mixed into KafkaController.

A move is written where Kafka's ZooKeeper mode keeps it: the topic znode's replica list becomes the
full set (original + target) with `adding_replicas` / `removing_replicas`, so a controller that
takes over finds every move in progress and carries it on. Starting a move bumps the leader epoch
and sends LeaderAndIsr to every replica of the full set (the added ones start fetching); each ISR
change (AlterPartition) and each broker coming or going looks again at the moves it touches; a
move completes (rules in `reassignment`) by electing from the target if the leader is leaving,
shrinking the ISR to the target, stopping and deleting the removed replicas, and writing the
target as the topic's assignment. Topic znode writes are fenced by the controller epoch.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import trio

from kbroker.controller import broker_requests as req
from kbroker.controller.context import TopicPartition
from kbroker.controller.reassignment import (
    ReplicaSets,
    begin,
    cancel,
    completed_state,
    restore_targets,
    started_state,
    unneeded,
    validate_target,
)
from kbroker.errors import ErrorCode
from kbroker.zookeeper import znodes as zk

logger = logging.getLogger(__name__)

Answer = tuple[ErrorCode, str | None]


class ReassignmentMixin:
    """Needs the KafkaController's `_ctx`, `_write_states`, `_announce`, `_send`, `session`, `zk`."""

    def replica_sets(self, tp: TopicPartition) -> ReplicaSets:
        assignment = self._ctx().topics[tp[0]]
        p = tp[1]
        return ReplicaSets(tuple(assignment.partitions.get(p, ())), tuple(assignment.adding.get(p, ())),
                           tuple(assignment.removing.get(p, ())))

    def reassignments(self, topics: list[tuple[str, list[int]]] | None = None) -> dict[TopicPartition, ReplicaSets]:
        """The moves in progress (of the partitions asked for, if any)."""
        ctx = self._ctx()
        wanted = None if topics is None else {(t, p) for t, ps in topics for p in ps}
        out = {}
        for topic, assignment in ctx.topics.items():
            for p in set(assignment.adding) | set(assignment.removing):
                if wanted is None or (topic, p) in wanted:
                    sets = self.replica_sets((topic, p))
                    if sets.moving:
                        out[(topic, p)] = sets
        return out

    async def _alter_reassignments(self, changes: list[tuple[str, int, list[int] | None]]) -> dict[TopicPartition, Answer]:
        """Start (a replica list) or cancel (None) moves; an answer per partition."""
        ctx = self._ctx()
        answers: dict[TopicPartition, Answer] = {}
        planned: dict[TopicPartition, ReplicaSets] = {}
        for topic, partition, target in changes:
            tp = (topic, partition)
            assignment = ctx.topics.get(topic)
            if assignment is None or partition not in assignment.partitions:
                answers[tp] = (ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} does not exist")
                continue
            current = self.replica_sets(tp)
            if target is None:
                if not current.moving:
                    answers[tp] = (ErrorCode.no_reassignment_in_progress, f"no move of {topic}-{partition} to cancel")
                    continue
                planned[tp] = cancel(current)
            else:
                problem = validate_target(list(target), set(ctx.live_brokers))
                if problem is not None:
                    answers[tp] = problem
                    continue
                planned[tp] = begin(current, list(target))
            answers[tp] = (ErrorCode.none, None)
        if planned:
            await self._start_moves(planned)
        return answers

    async def _start_moves(self, planned: dict[TopicPartition, ReplicaSets]) -> None:
        ctx = self._ctx()
        before = {tp: self.replica_sets(tp) for tp in planned}
        await self._write_replica_sets(planned)
        for tp, after in planned.items():
            gone = unneeded(before[tp], after)
            if gone:
                self._stop_replicas(tp, gone)
        moving = [tp for tp, sets in planned.items() if sets.moving]
        logger.info("controller: %d partition moves started or changed (%s)", len(planned),
                    ", ".join(f"{t}-{p} -> {list(planned[(t, p)].target)}" for t, p in list(planned)[:5]))
        states = {tp: started_state(ctx.states[tp], ctx.epoch) for tp in planned if tp in ctx.states}
        await self._write_states(states)
        self._announce(set(planned) & set(ctx.states))  # also those whose epoch write lost a race
        await self._complete_moves(moving)

    async def _complete_moves(self, partitions) -> None:
        """Finish every move among `partitions` whose target replicas are all in the ISR."""
        ctx = self._ctx()
        finishing: dict[TopicPartition, tuple[ReplicaSets, zk.LeaderAndIsr]] = {}
        for tp in partitions:
            if tp not in ctx.states or tp[0] not in ctx.topics:
                continue
            sets = self.replica_sets(tp)
            if not sets.moving:
                continue
            state = completed_state(ctx.states[tp], sets, ctx.electable_for(tp), ctx.epoch)
            if state is not None:
                finishing[tp] = (sets, state)
        if not finishing:
            return
        changed = await self._write_states({tp: state for tp, (_, state) in finishing.items()})
        done = {tp: finishing[tp][0] for tp in changed}
        if not done:
            return
        await self._write_replica_sets({tp: ReplicaSets(sets.target) for tp, sets in done.items()})
        for tp, sets in done.items():
            self._stop_replicas(tp, list(sets.removing))
        self._announce(set(done))
        logger.info("controller: %d partition moves completed (%s)", len(done),
                    ", ".join(f"{t}-{p} on {list(s.target)}" for (t, p), s in list(done.items())[:5]))

    def _stop_replicas(self, tp: TopicPartition, brokers) -> None:
        """StopReplica with deletion to each live broker in `brokers` (it no longer hosts `tp`)."""
        ctx = self._ctx()
        for broker_id in brokers:
            broker = ctx.live_brokers.get(broker_id)
            if broker is not None:
                self._send(broker, req.STOP_REPLICA, req.stop_replica(ctx, self.broker_id, broker, [tp], True))

    async def _write_replica_sets(self, planned: dict[TopicPartition, ReplicaSets]) -> None:
        """One fenced write of each touched topic's znode; the context follows."""
        ctx = self._ctx()
        by_topic: dict[str, dict[int, ReplicaSets]] = {}
        for (topic, p), sets in planned.items():
            by_topic.setdefault(topic, {})[p] = sets
        for topic, parts in by_topic.items():
            assignment = ctx.topics[topic]
            partitions, adding, removing = dict(assignment.partitions), dict(assignment.adding), dict(assignment.removing)
            for p, sets in parts.items():
                partitions[p] = list(sets.replicas)
                for table, value in ((adding, sets.adding), (removing, sets.removing)):
                    if value:
                        table[p] = list(value)
                    else:
                        table.pop(p, None)
            updated = replace(assignment, partitions=partitions, adding=adding, removing=removing)
            await self._write_topic(updated)
            ctx.topics[topic] = updated

    # -- automatic re-replication (replica.restore.delay.ms, kbroker's own) -------------------------------
    def _note_brokers_gone(self, gone: set[int]) -> None:
        now = trio.current_time()
        for broker_id in gone:
            self._gone_since.setdefault(broker_id, now)

    def _note_brokers_back(self, back: set[int]) -> None:
        for broker_id in back:
            self._gone_since.pop(broker_id, None)

    def _note_absent_replicas(self) -> None:
        """A new controller cannot know since when a broker has been gone: its clock starts now."""
        ctx = self._ctx()
        hosted = {r for tp in ctx.all_partitions() for r in ctx.replicas(tp)}
        self._note_brokers_gone(hosted - set(ctx.live_brokers))

    async def _restore_timer(self) -> None:
        while True:
            await trio.sleep(min(max(self.replica_restore_delay_s / 4, 0.25), 5.0))
            if self.is_active and self._restore_due():
                self._enqueue("restore")

    def _restore_due(self) -> set[int]:
        ctx = self.ctx
        if ctx is None or self.replica_restore_delay_s <= 0:
            return set()
        now = trio.current_time()
        return {b for b, since in self._gone_since.items()
                if b not in ctx.live_brokers and now - since >= self.replica_restore_delay_s}

    async def _restore_replicas(self) -> None:
        """Brokers gone for longer than the delay: their replicas move to live brokers, with the
        same add-then-drop moves as a reassignment."""
        ctx = self._ctx()
        due = self._restore_due()
        if not due:
            return
        settled = {tp: tuple(ctx.replicas(tp)) for tp in ctx.all_partitions() if not self.replica_sets(tp).moving}
        targets = restore_targets(settled, due, {b: r.rack for b, r in ctx.live_brokers.items()})
        for broker_id in due:  # looked at: until it returns or a new controller starts, once is enough
            self._gone_since[broker_id] = float("inf")
        if not targets:
            return
        logger.info("controller: brokers %s gone for %.0f s or more: moving %d of their replicas to live brokers",
                    sorted(due), self.replica_restore_delay_s, len(targets))
        await self._start_moves({tp: begin(self.replica_sets(tp), target) for tp, target in targets.items()})
