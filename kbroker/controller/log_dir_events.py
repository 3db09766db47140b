"""Log dirs that fail on a live broker, the controller's side (Kafka's ZooKeeper mode), mixed into
KafkaController.

A broker whose log dir fails writes `/log_dir_event_notification/log_dir_event_<seq>` naming
itself. The controller watches that znode's children: for each broker named it sends a
LeaderAndIsr of every replica the broker hosts, at their current states (a healthy replica
ignores it), and deletes the notifications read (Kafka's processLogDirEventNotification). The
broker answers KAFKA_STORAGE_ERROR for each replica in a failed dir. Every LeaderAndIsr answer
comes back here from the broker queues (`note_broker_response`); replicas newly known offline are
handled as Kafka's onReplicasBecomeOffline does: they leave the ISR, an offline leader is replaced
by an online ISR member (`context.elect_after_replicas_offline`), and every broker's metadata
lists them in offline_replicas. A controller taking over deletes the notifications left and
learns the same from the LeaderAndIsr it sends every broker. A broker that restarts (its dir
repaired) is forgotten as a whole and answers afresh.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kbroker.controller import broker_requests as req
from kbroker.controller.context import TopicPartition, elect_after_replicas_offline
from kbroker.errors import ErrorCode
from kbroker.zookeeper import znodes as zk

logger = logging.getLogger(__name__)

# (topic id, partition) -> True when answered KAFKA_STORAGE_ERROR, False when answered NONE
DirAnswers = dict[tuple[uuid.UUID, int], bool]


class LogDirEventsMixin:
    """Needs the KafkaController's `ctx`, `_ctx`, `_enqueue`, `_watch`, `_send`, `_write_states`,
    `_announce`, `unclean`, `session`, `zk`, `broker_id`."""

    def _init_log_dir_events(self) -> None:
        # broker -> (its epoch when it answered, its latest answer per replica), until handled
        self._dir_answers: dict[int, tuple[int, DirAnswers]] = {}

    # -- the notifications --------------------------------------------------------------------------
    async def _on_log_dir_events(self) -> None:
        ctx = self._ctx()
        names = await self._log_dir_event_names()
        if not names:
            return
        results = await self.session.call(self.zk.get_many, [zk.log_dir_event_path(n) for n in names])
        brokers = {zk.decode_log_dir_event(r[0]) for r in results if r is not None} - {None}
        logger.info("controller: log dir failures reported by brokers %s", sorted(brokers))
        for broker_id in sorted(brokers):
            broker = ctx.live_brokers.get(broker_id)
            hosted = [tp for tp in ctx.partitions_on(broker_id) if tp in ctx.states]
            if broker is not None and hosted:  # its answers say which replicas are offline
                self._send(broker, req.LEADER_AND_ISR, req.leader_and_isr(ctx, self.broker_id, broker, hosted))
        await self._delete_log_dir_events(names)

    async def _clear_log_dir_events(self) -> None:
        """On becoming controller: the LeaderAndIsr sent to every broker asks them all anyway."""
        await self._delete_log_dir_events(await self._log_dir_event_names())

    async def _log_dir_event_names(self) -> list[str]:
        names = await self.session.call(self.zk.children, zk.LOG_DIR_EVENT_NOTIFICATION, self._watch("log_dir_events"))
        return sorted(n for n in names if n.startswith(zk.LOG_DIR_EVENT_PREFIX))

    async def _delete_log_dir_events(self, names: list[str]) -> None:
        for name in names:
            try:
                await self.session.call(self.zk.delete, zk.log_dir_event_path(name))
            except zk.NoNodeError:
                pass

    # -- the brokers' answers -----------------------------------------------------------------------
    def note_broker_response(self, broker: zk.BrokerRegistration, api_key: int, response: Any) -> None:
        """From the broker queues (trio thread), after each answered request: LeaderAndIsr
        answers are kept for the next `log_dir_answers` event."""
        ctx = self.ctx
        if api_key != req.LEADER_AND_ISR or ctx is None or getattr(response, "error_code", 0):
            return
        answers: DirAnswers = {}
        for topic in getattr(response, "topics", None) or ():
            for p in topic.partition_errors:
                if p.error_code in (ErrorCode.kafka_storage_error, ErrorCode.none):
                    answers[(topic.topic_id, p.partition_index)] = p.error_code == ErrorCode.kafka_storage_error
        if not any(answers.values()) and broker.broker_id not in ctx.replicas_on_offline_dirs:
            return  # the usual case: nothing offline, nothing known offline
        epoch, kept = self._dir_answers.get(broker.broker_id, (broker.epoch, {}))
        if epoch != broker.epoch:
            kept = {}
        kept.update(answers)
        self._dir_answers[broker.broker_id] = (broker.epoch, kept)
        self._enqueue("log_dir_answers")

    async def _on_log_dir_answers(self) -> None:
        ctx = self._ctx()
        answers, self._dir_answers = self._dir_answers, {}
        names = {a.topic_id: t for t, a in ctx.topics.items() if a.topic_id is not None}
        newly: set[TopicPartition] = set()
        for broker_id, (epoch, by_replica) in answers.items():
            broker = ctx.live_brokers.get(broker_id)
            if broker is None or broker.epoch != epoch:  # gone or restarted since it answered
                continue
            offline = {(names[t], p) for (t, p), bad in by_replica.items() if bad and t in names}
            online = {(names[t], p) for (t, p), bad in by_replica.items() if not bad and t in names}
            mine = ctx.note_log_dir_answers(broker_id, offline, online)
            if mine:
                logger.info("controller: replicas on broker %d are offline (failed log dir): %s", broker_id,
                            ", ".join(f"{t}-{p}" for t, p in sorted(mine)[:20]))
            newly |= mine
        if newly:
            await self._on_replicas_offline(newly)

    async def _on_replicas_offline(self, partitions: set[TopicPartition]) -> None:
        ctx = self._ctx()
        changed: set[TopicPartition] = set()
        for _attempt in range(3):  # a state written meanwhile (an ISR change) is read back: decide again
            planned = elect_after_replicas_offline(ctx, partitions - changed, self.unclean)
            if not planned:
                break
            changed |= await self._write_states(planned)
        self._announce(changed)
        unchanged = partitions - changed  # their offline_replicas changed all the same
        if unchanged:
            for broker in ctx.live_brokers.values():
                self._send(broker, req.UPDATE_METADATA, req.update_metadata(ctx, self.broker_id, broker, unchanged))
        moved = [tp for tp in changed if ctx.states[tp].leader != zk.NO_LEADER]
        logger.info("controller: %d partitions changed for offline replicas (%d with a leader)", len(changed),
                    len(moved))
