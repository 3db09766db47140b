"""Dead letters of share groups (KIP-1191): the records a share group rejected, or archived at the
delivery count limit, copied to the group's `errors.deadletterqueue.topic.name` with headers saying
where they came from and why (`__dlq.errors.*`). The topic must exist with
`errors.deadletterqueue.group.enable=true` (Kafka's opt-in); otherwise the records are only
archived, and that is logged.

The copies an acknowledgement (or an expiry) archives are one batch for the dead-letter partition
(the source partition modulo its partition count), written wherever that partition's leader is.
Led here, the batch is appended at once: the caller (SharePartitionManager._update) is synchronous;
on the single node that is all, in a cluster the wait for the ISR (acks=all) is done in the
background (`run`, started by the manager's). Led by another broker, the batch goes there in the
background as a Produce request (acks=-1, client id `__admin_client`) over the channel the server
layer injects (`request`), as delayed delivery's TargetWriter sends its deliveries. A copy whose
partition's leader moves or cannot be reached (NOT_LEADER_OR_FOLLOWER, not enough replicas, a
broker unreachable) is sent again to the leader of the moment, `ATTEMPTS` times at most with a
growing backoff, then given up with a warning (the records stay archived only). Copies are sent
concurrently, so batches sent again may land out of order.

The manager waits for a share-partition's copies in flight (`wait_sent`) before it writes the
share-partition's state, so an acknowledgement is answered after its dead letters are on their
topic (or given up). A broker failing in between, or a Produce whose answer was lost and is sent
again, can copy a record twice; none is lost unless given up.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.group.dynamic_configs import DLQ_TOPIC_NAME
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers, validate_batches

logger = logging.getLogger(__name__)

E = ErrorCode
PRODUCE, PRODUCE_VERSION = 0, 9
Request = Callable[[int, int, int, dict], Awaitable[Any]]  # (broker id, api key, version, body) -> response
LeaderOf = Callable[[tuple[str, int]], "int | None"]  # None: the topic is gone; -1: no leader now
ATTEMPTS = 10  # sends of a copy whose partition's leader moved or was unreachable, before giving up
BACKOFF_S, MAX_BACKOFF_S = 0.25, 4.0  # before a copy is sent again: doubling, up to the maximum
MAX_QUEUED = 1000  # copies waiting for the background (beyond: archived only, logged)
RETRIABLE = frozenset({E.not_leader_or_follower, E.leader_not_available, E.request_timed_out, E.not_enough_replicas,
                       E.not_enough_replicas_after_append, E.kafka_storage_error, E.network_exception})
Key = tuple[str, TopicPartition]  # (share group, source partition)


@dataclass(eq=False)
class _Copy:
    """One batch of dead letters on its way to the dead-letter partition."""

    group_id: str
    source: TopicPartition
    target: TopicPartition
    batch: bytes
    count: int
    appended: tuple[Any, int] | None = None  # appended here: (the partition, the offset after the batch)
    done: trio.Event = field(default_factory=trio.Event)


class DeadLetters:
    def __init__(self, replica_manager, group_configs: Callable[[str], Mapping[str, str]] | None,
                 topic_configs: Callable[[str], Mapping[str, str] | None], topic_info: Callable[[str], object],
                 read: Callable, count: Callable[[str, TopicPartition, str, int], None], *, node_id: int = 0,
                 cluster: bool = False, leader_of: LeaderOf = lambda _tp: 0, timeout_s: float = 15.0) -> None:
        self.replica_manager = replica_manager
        self.group_configs = group_configs
        self.topic_configs = topic_configs  # a topic's stored configs (None: no such topic)
        self.topic_info = topic_info  # a topic's metadata (num_partitions)
        self.read = read  # (tp, offset, max_bytes, read_committed) -> a read result
        self.count = count  # (group, tp, kind, n): the metrics' counters
        self.node_id = node_id
        self.cluster = cluster
        self.leader_of = leader_of  # a partition's leader id (None: no such topic; -1: none now)
        self.timeout_s = timeout_s  # a Produce's and a wait for the ISR's
        self.request: Request | None = None  # set in a cluster
        self._queue, self._queued = trio.open_memory_channel[_Copy](MAX_QUEUED)
        self._in_flight: dict[Key, list[_Copy]] = {}

    def write(self, group_id: str, tp: TopicPartition, archived) -> None:
        """Copy the archived ranges' records to the group's dead-letter topic, if it has one."""
        name = str((self.group_configs(group_id) if self.group_configs else {}).get(DLQ_TOPIC_NAME, "")).strip()
        if not name:
            return
        target = self.target(name, tp.partition)
        if target is None:
            logger.warning("share group %s: dead-letter topic %s cannot take records (missing, or not "
                           "errors.deadletterqueue.group.enable=true); %d range(s) archived only",
                           group_id, name, len(archived))
            return
        records = []
        for item in archived:
            for record in self.records(tp, item.first_offset, item.last_offset):
                headers = [*record.headers,
                           ("__dlq.errors.group.id", group_id.encode()),
                           ("__dlq.errors.topic", tp.topic.encode()),
                           ("__dlq.errors.partition", str(tp.partition).encode()),
                           ("__dlq.errors.offset", str(record.offset).encode()),
                           ("__dlq.errors.delivery.count", str(item.delivery_count).encode()),
                           ("__dlq.errors.reason", str(item.reason).encode())]
                records.append(Record(len(records), record.timestamp, record.key, record.value, headers))
        if not records:
            return
        copy = _Copy(group_id, tp, target, build_batch(records), len(records))
        try:
            copy.appended = self._append_here(copy)
        except KafkaError as exc:
            if not self.cluster:
                logger.warning("share group %s: could not write to dead-letter topic %s: %s", group_id, name, exc)
                return
            # led elsewhere (or not writable here now): sent in the background
        if not self.cluster:
            self.count(group_id, tp, "dead_lettered", copy.count)
            return
        try:
            self._queue.send_nowait(copy)
        except trio.WouldBlock:
            what = "not waited for" if copy.appended else "archived only"
            logger.warning("share group %s: %d dead letter(s) of %s for %s: %d copies queued already, %s",
                           group_id, copy.count, tp, name, MAX_QUEUED, what)
            return
        self._in_flight.setdefault((group_id, tp), []).append(copy)

    async def wait_sent(self, key: Key) -> None:
        """Until none of the share-partition's copies is in flight (each written, or given up)."""
        while self._in_flight.get(key):
            await self._in_flight[key][0].done.wait()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Sends the copies `write` could not finish (in a cluster), each in a task of its own."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            async for copy in self._queued:
                nursery.start_soon(self._deliver, copy)

    async def _deliver(self, copy: _Copy) -> None:
        key = (copy.group_id, copy.source)
        try:
            code = await self._send(copy)
        finally:
            copy.done.set()
            waiting = self._in_flight.get(key, [])
            if copy in waiting:
                waiting.remove(copy)
            if not waiting:
                self._in_flight.pop(key, None)
        if code == E.none:
            self.count(copy.group_id, copy.source, "dead_lettered", copy.count)
        else:
            logger.warning("share group %s: gave up copying %d dead letter(s) of %s to %s: %s; archived only",
                           copy.group_id, copy.count, copy.source, copy.target, code.name)

    async def _send(self, copy: _Copy) -> ErrorCode:
        """Until the batch is on the dead-letter partition's ISR, sent again while its leader moves."""
        code = E.none
        for attempt in range(ATTEMPTS):
            if attempt:
                await trio.sleep(min(BACKOFF_S * 2 ** (attempt - 1), MAX_BACKOFF_S))
            if copy.appended is None:
                code = await self._send_once(copy)  # appended here, or produced to the leader
            if copy.appended is not None:
                partition, end = copy.appended
                copy.appended = None  # not replicated: sent again (a second copy if it was after all)
                try:
                    await partition.maybe_flush()
                except KafkaError as exc:
                    code = error_code_of(exc)
                else:
                    code = await self.replica_manager.wait_for_replication(partition, end, self.timeout_s)
            if code not in RETRIABLE:
                return code
        return code

    async def _send_once(self, copy: _Copy) -> ErrorCode:
        tp = copy.target
        leader = self.leader_of((tp.topic, tp.partition))
        if leader is None:
            return E.unknown_topic_or_partition  # the dead-letter topic is gone
        if leader == self.node_id:
            try:
                copy.appended = self._append_here(copy)
            except KafkaError as exc:
                return error_code_of(exc)
            return E.none
        if leader < 0 or self.request is None:
            return E.not_leader_or_follower
        try:
            response = await self.request(leader, PRODUCE, PRODUCE_VERSION, {
                "transactional_id": None, "acks": -1, "timeout": int(self.timeout_s * 1000),
                "topic_data": [{"name": tp.topic, "partition_data": [{"index": tp.partition, "records": copy.batch}]}]})
        except Exception as exc:  # noqa: BLE001 - unreachable, restarting: sent again
            logger.info("dead letters to %s at broker %d failed: %s", tp, leader, exc)
            return E.not_leader_or_follower
        for topic in response.responses:
            for p in topic.partition_responses:
                if topic.name == tp.topic and p.index == tp.partition:
                    return ErrorCode(p.error_code)
        return E.unknown_server_error

    def _append_here(self, copy: _Copy) -> tuple[Any, int]:
        """Append the batch to the dead-letter partition led here: (the partition, the offset after
        it); KafkaError when it is not led here or cannot take it."""
        partition = self.replica_manager.get_leader_partition(copy.target)
        buf = bytearray(copy.batch)
        info = partition.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1,
                                                  from_client=False)
        return partition, info.last_offset + 1

    def target(self, name: str, source_partition: int) -> TopicPartition | None:
        """The dead-letter topic's partition for records of `source_partition` (None: it takes none)."""
        configs = self.topic_configs(name)
        if configs is None or str(configs.get("errors.deadletterqueue.group.enable", "false")).lower() != "true":
            return None
        info = self.topic_info(name)
        if info is None or not info.num_partitions:
            return None
        return TopicPartition(name, source_partition % info.num_partitions)

    def records(self, tp: TopicPartition, first: int, last: int) -> Iterator[Record]:
        """The records of [first, last] in the log (what remains of them)."""
        offset = first
        while offset <= last:
            read = self.read(tp, offset, 1 << 20, False)
            if read.error is not None or not read.records:
                return
            data = b"".join(r.read() if not isinstance(r, (bytes, bytearray)) else bytes(r) for r in read.records)
            progressed = False
            for pos, header in iter_batch_headers(data):
                if header.is_control:
                    offset = max(offset, header.next_offset)
                    continue
                for record in decode_records(data, pos, header):
                    if first <= record.offset <= last and record.offset >= offset:
                        yield record
                offset = max(offset, header.next_offset)
                progressed = True
            if not progressed:
                return
