"""The schema registry on this broker: its state read from the `_schemas` topic (partition 0, as
Confluent's registry keeps it) and its writes appended there, through the broker's own replicas.

One writer: the registry of the broker that leads `_schemas`-0. It reads the partition into a
`RegistryState` (schema_registry/state.py) once per leader epoch, then follows its high watermark
(records another writer — Confluent's tools, `kafka-console-producer` — appended are applied
too). A write takes the write lock, catches up, decides (schema_registry/rest.py), appends the
decision's records in one batch, waits for the ISR (a cluster), applies them and answers. Reads
are answered from the state without the lock. A broker that does not lead `_schemas`-0 forwards
the request to the registry of the broker that does (`forward`, given by the server); with none
known, it answers Confluent's 50003.

The topic is created on first use, compacted, one partition, `schema.registry.topic.replication.factor`
replicas (a single node uses what it has; a cluster with fewer live brokers answers 50003 until it has them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio

from kbroker.errors import ErrorCode, KafkaError
from kbroker.log.topic_partition import TopicPartition
from kbroker.schema_registry import formats
from kbroker.schema_registry.access import May
from kbroker.schema_registry.records import RecordError, decode_record, encode_record
from kbroker.schema_registry.rest import HttpRequest, HttpResponse, Write, error, handle, may_write
from kbroker.schema_registry.state import RegistryState
from kbroker.replica.internal_topic import read_log_batches
from kbroker.wire.internal_records import build_internal_batch
from kbroker.wire.records import validate_batches

logger = logging.getLogger(__name__)

SETTLE_S = 0.1
#: Confluent's error codes of the store (io.confluent.kafka.schemaregistry.rest.exceptions.Errors)
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
FORWARDING_ERROR = 50003

Forward = Callable[[int, HttpRequest], Awaitable[HttpResponse]]


class NotTheWriter(Exception):
    """This broker does not lead `_schemas`-0; `leader` is the broker that does (-1: none)."""

    def __init__(self, leader: int) -> None:
        super().__init__(f"the registry's writer is broker {leader}")
        self.leader = leader


class SchemaRegistryService:
    def __init__(self, broker, *, forward: Forward | None = None) -> None:
        config = broker.config
        self.broker = broker
        self.replicas = broker.replica_manager
        self.topic = config.get("schema.registry.topic")
        self.tp = TopicPartition(self.topic, 0)
        self.replication_factor = config.get("schema.registry.topic.replication.factor")
        self.timeout_s = config.get("schema.registry.request.timeout.ms") / 1000
        self.forward = forward
        self.state: RegistryState | None = None
        self._epoch: int | None = None  # the leader epoch the state was read at
        self._applied = 0  # the next offset of the partition to apply
        self._write_lock = trio.Lock()

    # -- the topic ------------------------------------------------------------------------------------
    async def ensure_topic(self) -> None:
        await self.broker.ensure_internal_topic(
            self.topic, 1, self.replication_factor, "schema.registry.topic.replication.factor",
            {"cleanup.policy": "compact", "compression.type": "producer", "unclean.leader.election.enable": "false",
             "min.insync.replicas": "2"})  # capped at the replication factor

    def _leader_partition(self):
        try:
            return self.replicas.get_leader_partition(self.tp)
        except KafkaError:
            raise NotTheWriter(self._leader_id()) from None

    def _leader_id(self) -> int:
        if not self.broker.cluster:
            return -1
        state = self.broker.metadata.partition_state(self.topic, 0)
        return state.leader if state is not None else -1

    def caught_up(self) -> RegistryState:
        """The state with every record below the high watermark applied (read anew under a new leader epoch)."""
        partition = self._leader_partition()
        if self.state is None or self._epoch != partition.leader_epoch:
            self.state = RegistryState(formats.parse, formats.check)
            self._epoch = partition.leader_epoch
            self._applied = partition.log.log_start_offset
            started = time.monotonic()
            self._read(partition)
            logger.info("schema registry: %s-0 read at leader epoch %d: %d subjects, max id %d (%.2f s)",
                        self.topic, self._epoch, len(self.state.subjects(deleted=True)), self.state.max_id,
                        time.monotonic() - started)
        else:
            self._read(partition)
        return self.state

    def _read(self, partition) -> None:
        """Up to the log end, not the high watermark: a new leader's high watermark may still be
        below records the old one acknowledged, and a state without them would hand their ids out
        again. What the leader's log holds is committed once the next write is replicated (as
        Kafka's coordinators load their partitions to the log end)."""
        log = partition.log
        offset = max(self._applied, log.log_start_offset)
        for next_offset, batches in read_log_batches(log, offset, log.log_end_offset):
            for batch in batches:  # control batches have no records
                for record_offset, key, value in batch.records:
                    if record_offset >= offset and key is not None:
                        self._apply(record_offset, key, value)
            offset = next_offset
        self._applied = max(self._applied, offset)

    def _apply(self, offset: int, key: bytes, value: bytes | None) -> None:
        assert self.state is not None
        try:
            self.state.apply(*decode_record(key, value))
        except (RecordError, ValueError, KeyError) as exc:  # Confluent skips what it cannot read, and so do we
            logger.warning("schema registry: %s-0 offset %d skipped: %s", self.topic, offset, exc)

    # -- requests -------------------------------------------------------------------------------------
    async def serve(self, request: HttpRequest, may: May | None = None, principal: str = "User:ANONYMOUS",
                    ) -> HttpResponse:
        if self.broker.metadata.topic(self.topic) is None:
            try:
                await self.ensure_topic()
            except KafkaError as exc:
                return error(500, FORWARDING_ERROR, f"The registry's topic {self.topic} is not available: {exc}")
        deadline = trio.current_time() + self.timeout_s
        while True:
            try:
                return await self._serve_here(request, may, principal)
            except NotTheWriter as moved:
                # a leader being elected, or this broker named leader but not yet told: wait for it
                settling = moved.leader < 0 or moved.leader == self.broker.node_id
                if settling and trio.current_time() < deadline:
                    await trio.sleep(SETTLE_S)
                    continue
                if settling or self.forward is None or request.forwarded:
                    return error(500, FORWARDING_ERROR, f"No leader of {self.topic}-0 to forward the request to")
                return await self.forward(moved.leader, request)

    async def _serve_here(self, request: HttpRequest, may: May | None, principal: str) -> HttpResponse:
        if not may_write(request):  # a read: answered from the state as it is, no lock
            answer = handle(self.caught_up(), request, may, principal)
            assert not isinstance(answer, Write), request
            return answer
        async with self._write_lock:  # one decision at a time, each on the state the previous one left
            answer = handle(self.caught_up(), request, may, principal)
            if isinstance(answer, Write):
                return await self._write(answer)
            return answer

    async def _write(self, write: Write) -> HttpResponse:
        records = write.decision.records
        if not records:
            return write.render(write.decision.answer)
        partition = self._leader_partition()
        batch = bytearray(build_internal_batch([encode_record(k, v) for k, v in records], int(time.time() * 1000)))
        try:
            info = partition.append_records_to_leader(batch, validate_batches(batch, from_client=False), -1,
                                                      from_client=False)
        except KafkaError as exc:
            return error(500, STORE_ERROR, f"Error while writing to {self.topic}: {exc}")
        if self.broker.cluster:
            code = await self.replicas.wait_for_replication(partition, info.last_offset + 1, self.timeout_s)
            if code == ErrorCode.request_timed_out:
                return error(500, OPERATION_TIMEOUT, f"Write to {self.topic} timed out")
            if code != ErrorCode.none:
                return error(500, STORE_ERROR, f"Error while writing to {self.topic}: {code.name}")
        self.caught_up()
        return write.render(write.decision.answer)


__all__ = ["FORWARDING_ERROR", "OPERATION_TIMEOUT", "STORE_ERROR", "NotTheWriter", "SchemaRegistryService"]
