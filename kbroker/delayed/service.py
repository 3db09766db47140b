"""Delayed delivery, the broker's side: where a record to delay goes, who delivers it, and the one
entry point the produce path (and later features, such as retry topics) call:

    await broker.delayed.schedule(target, records)   # ErrorCode.none once durably scheduled

A target partition's records go to the `__delayed_messages` partition `partition_for(target)`
picks (created on first need, replicated like `__transaction_state`); that partition's leader
delivers them (a `PartitionRunner`, following leadership as the coordinators do). A schedule for a
partition led elsewhere is forwarded there as a Produce of ready-made delay-log records with the
client id `__admin_client`, which `append_request` serves (also `kbroker delayed cancel`'s
tombstones).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from kbroker.config import BrokerConfig, effective_topic_value
from kbroker.delayed.delay_log import DelayLog
from kbroker.delayed.format import (
    DELAYED_TOPIC,
    KIND_SCHEDULE,
    DelayedRecord,
    Target,
    decode_key,
    decode_schedule,
    encode_schedule,
    partition_for,
)
from kbroker.delayed.runner import PartitionRunner
from kbroker.delayed.target import Request, TargetWriter
from kbroker.errors import ErrorCode, InvalidRecordError, KafkaError, NotLeaderOrFollowerError
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.internal_records import build_internal_batch, iter_internal_records
from kbroker.wire.primitives import DecodeError

logger = logging.getLogger(__name__)

PRODUCE, PRODUCE_VERSION = 0, 9
FORWARD_ATTEMPTS = 3  # a delay-log partition whose leader is moving is asked again, briefly
FORWARD_BACKOFF_S = 0.2
FORWARD_BATCH_RECORDS = 2000
RESTART_MIN_S, RESTART_MAX_S = 0.5, 30.0  # a failed partition runner is restarted after this backoff
# what the producer of a delayed record is told when the delay log could not take it: retriable codes
_RETRIABLE = {ErrorCode.not_leader_or_follower, ErrorCode.request_timed_out, ErrorCode.not_enough_replicas,
              ErrorCode.not_enough_replicas_after_append, ErrorCode.leader_not_available}


@dataclass(frozen=True)
class DelayConfig:
    enabled: bool
    max_delay_ms: int
    max_in_memory: int
    timeout_s: float

    @classmethod
    def of(cls, config: BrokerConfig) -> "DelayConfig":
        return cls(config.get("delayed.delivery.enable"), config.get("delayed.delivery.max.delay.ms"),
                   config.get("delayed.delivery.max.in.memory.records"), config.get("request.timeout.ms") / 1000)


class DelayService:
    def __init__(self, node_id: int, config: BrokerConfig, replica_manager, metadata,
                 ensure_topic: Callable[[], Awaitable[None]], allocate_producer_id: Callable[[], Awaitable[int]],
                 leader_of: Callable[[tuple[str, int]], "int | None"], now_ms: Callable[[], int], *,
                 cluster: bool) -> None:
        self.node_id = node_id
        self.broker_config = config
        self.config = DelayConfig.of(config)
        self.enabled = self.config.enabled
        self.replicas = replica_manager
        self.metadata = metadata
        self.ensure_topic = ensure_topic
        self.allocate_producer_id = allocate_producer_id
        self.leader_of = leader_of
        self.now_ms = now_ms
        self.cluster = cluster
        self.log = DelayLog(replica_manager, now_ms, cluster=cluster, timeout_s=self.config.timeout_s)
        self.writer = TargetWriter(node_id, replica_manager, self._target_leader, cluster=cluster,
                                   timeout_s=self.config.timeout_s)
        self.forward_request: Request | None = None  # set in a cluster (`connect`)
        self.runners: dict[int, PartitionRunner] = {}
        self._nursery: trio.Nursery | None = None
        self._waiting: list[PartitionRunner] = []

    # -- the server layer injects the requests to other brokers (client id __admin_client) ------
    def connect(self, *, schedules: Request, deliveries: Request) -> None:
        """Requests to other brokers, on separate connections: a producer waiting for its forwarded
        schedules never queues behind deliveries (a connection carries one request at a time)."""
        self.forward_request = schedules
        self.writer.request = deliveries

    # -- the produce path ---------------------------------------------------------------------------
    def topic_delay_ms(self, topic: str) -> int:
        """The topic's `delivery.delay.ms` (0: records wait only when their headers say so)."""
        info = self.metadata.topic(topic)
        if info is None or "delivery.delay.ms" not in info.configs:
            return 0
        return int(effective_topic_value(self.broker_config, info.configs, "delivery.delay.ms"))

    def honours_headers(self, topic: str) -> bool:
        """Whether the topic's records may ask for a delay by header (`delivery.delay.headers.enable`)."""
        info = self.metadata.topic(topic)
        return bool(effective_topic_value(self.broker_config, info.configs if info is not None else {},
                                          "delivery.delay.headers.enable"))

    async def schedule(self, target: Target, records: list[DelayedRecord]) -> ErrorCode:
        """Durably schedule `records` for `target` (acks=all in the delay log); the entry point."""
        if not records:
            return ErrorCode.none
        try:
            await self.ensure_topic()
        except KafkaError as exc:
            logger.info("cannot create %s: %s", DELAYED_TOPIC, exc)
            return ErrorCode.not_enough_replicas
        if not self.cluster:
            self.load_led_partitions()
        info = self.metadata.topic(DELAYED_TOPIC)
        with trio.move_on_after(FORWARD_BACKOFF_S * 10):
            while info is None:  # just created: the cluster's metadata has yet to hear of it
                await trio.sleep(FORWARD_BACKOFF_S / 4)
                info = self.metadata.topic(DELAYED_TOPIC)
        if info is None:
            return ErrorCode.not_leader_or_follower
        partition = partition_for(target, info.num_partitions)
        code = ErrorCode.not_leader_or_follower
        for attempt in range(FORWARD_ATTEMPTS):
            runner = self.runners.get(partition)
            if runner is not None:
                code = await runner.append_schedules(records)
            else:
                code = await self._forward(partition, records)
            if code not in (ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available):
                break
            await trio.sleep(FORWARD_BACKOFF_S * (attempt + 1))
        return code if code == ErrorCode.none or code in _RETRIABLE else ErrorCode.not_enough_replicas

    async def _forward(self, partition: int, records: list[DelayedRecord]) -> ErrorCode:
        leader = self.leader_of((DELAYED_TOPIC, partition))
        if leader is None or leader < 0 or leader == self.node_id or self.forward_request is None:
            return ErrorCode.not_leader_or_follower
        entries = [encode_schedule(r) for r in records]
        for start in range(0, len(entries), FORWARD_BATCH_RECORDS):
            batch = build_internal_batch(entries[start:start + FORWARD_BATCH_RECORDS], self.now_ms())
            try:
                response = await self.forward_request(leader, PRODUCE, PRODUCE_VERSION, {
                    "transactional_id": None, "acks": -1, "timeout": int(self.config.timeout_s * 1000),
                    "topic_data": [{"name": DELAYED_TOPIC, "partition_data": [{"index": partition, "records": batch}]}]})
            except Exception as exc:  # noqa: BLE001 - unreachable or moving: the producer retries
                logger.info("forwarding delayed records to broker %d failed: %s", leader, exc)
                return ErrorCode.not_leader_or_follower
            code = ErrorCode(response.responses[0].partition_responses[0].error_code)
            if code != ErrorCode.none:
                return code
        return ErrorCode.none

    async def append_request(self, partition: int, buf) -> tuple[ErrorCode, int]:
        """A Produce to `__delayed_messages` by `__admin_client`: schedules another broker forwards,
        or tombstones (`kbroker delayed cancel`). (error, offset of the first record)."""
        runner = self.runners.get(partition)
        if runner is None:
            raise NotLeaderOrFollowerError(f"this broker does not deliver {DELAYED_TOPIC}-{partition}")
        schedules: list[DelayedRecord] = []
        cancels: list[bytes] = []
        try:
            for _offset, key, value in iter_internal_records(buf):
                decoded = decode_key(key)
                if decoded.kind != KIND_SCHEDULE or decoded.record_id is None:
                    raise InvalidRecordError(f"only schedules and cancels may be written to {DELAYED_TOPIC}")
                if value is None:
                    cancels.append(decoded.record_id)
                else:
                    record = decode_schedule(decoded.record_id, value)
                    if partition_for(record.target, self.metadata.topic(DELAYED_TOPIC).num_partitions) != partition:
                        raise InvalidRecordError(f"{record.target} is delivered by another partition")
                    schedules.append(record)
        except DecodeError as exc:
            raise InvalidRecordError(f"not a {DELAYED_TOPIC} record: {exc}") from None
        if cancels:  # which records are being delivered is known once the runner has loaded
            with trio.move_on_after(self.config.timeout_s):
                await runner.loaded.wait()
            if not runner.loaded.is_set() or self.runners.get(partition) is not runner:
                raise NotLeaderOrFollowerError(f"{DELAYED_TOPIC}-{partition} is loading")
        busy = [record_id.hex() for record_id in cancels if runner.in_flight(record_id)]
        if busy:
            raise InvalidRecordError(f"being delivered now, too late to cancel: {', '.join(busy)}")
        code = ErrorCode.none
        if schedules:
            code = await runner.append_schedules(schedules)
        if cancels and code == ErrorCode.none:
            code = await runner.cancel(cancels)
        return code, -1

    def _target_leader(self, target: tuple[str, int]) -> int | None:
        info = self.metadata.topic(target[0])
        if info is None or not 0 <= target[1] < info.num_partitions:
            return None
        return self.leader_of(target)

    def _target_exists(self, target: Target) -> bool:
        return self._target_leader(target) is not None

    # -- leadership ---------------------------------------------------------------------------------
    def become_leader(self, partition: int, leader_epoch: int) -> None:
        current = self.runners.get(partition)
        if current is not None and current.leader_epoch == leader_epoch:
            return
        self.resign(partition)
        runner = self._new_runner(partition, leader_epoch)
        if self._nursery is None:
            self._waiting.append(runner)
        else:
            self._nursery.start_soon(self._run_runner, runner)

    def _new_runner(self, partition: int, leader_epoch: int) -> PartitionRunner:
        runner = self.runners[partition] = PartitionRunner(
            partition, leader_epoch, self.log, self.writer, self.allocate_producer_id, self.now_ms,
            self.config.max_in_memory, self._target_exists)
        return runner

    def resign(self, partition: int) -> None:
        runner = self.runners.pop(partition, None)
        if runner is not None:
            runner.stop()
        self.log.forget(partition)

    def load_led_partitions(self) -> None:
        """The single node: every `__delayed_messages` partition is led here."""
        info = self.metadata.topic(DELAYED_TOPIC)
        if info is None:
            return
        for partition in range(info.num_partitions):
            if partition in self.runners:
                continue
            try:
                leader = self.replicas.get_leader_partition(TopicPartition(DELAYED_TOPIC, partition))
            except KafkaError:
                continue
            self.become_leader(partition, leader.leader_epoch)

    async def _run_runner(self, runner: PartitionRunner) -> None:
        """Run the partition's deliveries while this broker leads it: a runner that fails (a bug,
        an unreadable log) is replaced by a fresh one after a backoff, which loads the partition
        again and resends what the failed one left half-delivered, as after a failover."""
        backoff = RESTART_MIN_S
        while True:
            started = trio.current_time()
            try:
                await runner.run()
                return  # stopped: leadership moved
            except Exception:  # noqa: BLE001 - one partition's failure must not take the broker down
                current = self.runners.get(runner.partition) is runner
                if trio.current_time() - started > RESTART_MAX_S:
                    backoff = RESTART_MIN_S  # it ran well for a while: not a crash loop
                logger.exception("delayed deliveries of %s-%d failed%s", DELAYED_TOPIC, runner.partition,
                                 f"; restarting them in {backoff:.1f} s" if current else "")
                if not current:
                    return
            # the replacement takes the schedules and cancels meanwhile (it scans the log when it starts)
            runner = self._new_runner(runner.partition, runner.leader_epoch)
            await trio.sleep(backoff)
            if self.runners.get(runner.partition) is not runner:
                return
            backoff = min(backoff * 2, RESTART_MAX_S)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for runner in self._waiting:
                nursery.start_soon(self._run_runner, runner)
            self._waiting.clear()
            task_status.started()
            await trio.sleep_forever()

    def statistics(self) -> dict[str, int]:
        return {"partitions": len(self.runners),
                "in_memory": sum(r.pending_in_memory() for r in self.runners.values())}
