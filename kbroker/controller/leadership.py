"""Leader elections operators ask for, mixed into KafkaController: ElectLeaders (preferred or
unclean, KIP-183/KIP-460) and the automatic preferred-leader rebalance
(`auto.leader.rebalance.enable`, checked every `leader.imbalance.check.interval.seconds`).

The rules are the pure functions of `context` (`requested_election`, `preferred_leader_elections`);
here they are written to ZooKeeper (conditionally, like every state write) and announced. A
partition in the middle of a move is left alone: the move decides its leader when it completes.
"""

from __future__ import annotations

import logging

import trio

from kbroker.controller.context import PREFERRED, TopicPartition, preferred_leader_elections, requested_election
from kbroker.errors import ErrorCode

logger = logging.getLogger(__name__)

Answer = tuple[ErrorCode, str | None]


class LeadershipMixin:
    """Needs the KafkaController's `_ctx`, `_write_states`, `_announce`, `replica_sets`, `is_active`."""

    async def _elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None
                             ) -> dict[TopicPartition, Answer]:
        """An answer per partition (every partition of the cluster when `partitions` is None)."""
        ctx = self._ctx()
        wanted = ctx.all_partitions() if partitions is None else list(dict.fromkeys(partitions))
        answers: dict[TopicPartition, Answer] = {}
        changed: set[TopicPartition] = set()
        for _attempt in range(3):  # a state written meanwhile (an ISR change) is read back: decide again
            planned = {}
            for tp in wanted:
                if tp in answers or tp in changed:
                    continue
                if tp[0] in ctx.topics and tp[1] in ctx.topics[tp[0]].partitions and self.replica_sets(tp).moving:
                    answers[tp] = (ErrorCode.preferred_leader_not_available if election_type == PREFERRED
                                   else ErrorCode.eligible_leaders_not_available,
                                   f"{tp[0]}-{tp[1]} is being moved; its move elects its leader")
                    continue
                state, problem = requested_election(ctx, tp, election_type)
                if problem is not None:
                    answers[tp] = (ErrorCode(problem[0]), problem[1])
                else:
                    planned[tp] = state
            if not planned:
                break
            changed |= await self._write_states(planned)
        for tp in wanted:
            if tp in changed:
                answers[tp] = (ErrorCode.none, None)
            answers.setdefault(tp, (ErrorCode.request_timed_out, "the partition's state kept changing; ask again"))
        self._announce(changed)
        if changed:
            logger.info("controller: ElectLeaders (%s) moved leadership of %d partitions",
                        "preferred" if election_type == PREFERRED else "unclean", len(changed))
        return answers

    async def _rebalance_timer(self) -> None:
        while True:
            await trio.sleep(self.imbalance_check_interval_s)
            if self.is_active:
                self._enqueue("rebalance")

    async def _rebalance_leaders(self) -> None:
        """Leadership back to preferred replicas (auto.leader.rebalance.enable)."""
        ctx = self._ctx()
        planned = {tp: state for tp, state in preferred_leader_elections(ctx, self.imbalance_percentage).items()
                   if not self.replica_sets(tp).moving}
        changed = await self._write_states(planned)
        if changed:
            logger.info("controller: %d partitions led by their preferred replica again", len(changed))
        self._announce(changed)
