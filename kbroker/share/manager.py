"""SharePartitionManager: the share-partitions (KIP-932) this broker leads — one SharePartition
(share/partition.py, pure) per (share group, topic-partition) — and the share sessions of the members
that fetch from it (share/sessions.py). It reads the log through the ReplicaManager, turns what a
read returns into acquired records, applies acknowledgements, takes back the locks that time out
(a periodic task) and those of a member that left, and wakes the ShareFetches waiting for records.

A share-partition starts where the group's `share.auto.offset.reset` says (latest, the default:
the high watermark when it is first fetched; earliest: the log start; by_duration: the first
record at or after now minus the duration). Its state — start offset, and each in-flight record's
state and delivery count (acquired ones as available) — is written to `__share_group_state`
(share/state_records.py, Kafka's snapshot format) when it starts and after every change an
acknowledgement, a lock expiry or a member leaving makes, before the acknowledgement is answered;
a restarted broker takes it back from there. The state topic's partition must be led by the same
broker for that (always on the single node); a cluster's share-partitions whose state partition is
led elsewhere are kept in memory only, for now (docs/queues.md).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

import trio

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group.dynamic_configs import (DLQ_TOPIC_NAME, SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL,
                                           reset_duration_ms, share_backoff)
from kbroker.log.topic_partition import TopicPartition
from kbroker.share.partition import SharePartition
from kbroker.share.partition_types import AcquiredRecords, Outcome, ShareConfig
from kbroker.group.types import partition_for
from kbroker.replica.internal_topic import read_internal_batches
from kbroker.share.sessions import ShareSessions
from kbroker.share.state_records import (SHARE_STATE_TOPIC, ShareStateKey, ShareStateValue, decode_key, decode_value,
                                         encode_key, encode_value)
from kbroker.wire.internal_records import build_internal_batch
from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers, validate_batches

logger = logging.getLogger(__name__)

E = ErrorCode
Key = tuple[str, TopicPartition]
ACK_KINDS = {1: "accepted", 2: "released", 3: "rejected", 4: "renewed"}
READ_LIMIT = 1 << 20  # bytes one share fetch reads of a partition at most (a first batch beyond it still comes)
RECORD_BUDGET = 2048  # bytes read per record asked for (max_records), so a small fetch reads little


@dataclass
class AcquireResult:
    error: ErrorCode = E.none
    records: bytes = b""  # whole batches holding the acquired offsets (the client keeps those)
    acquired: tuple[AcquiredRecords, ...] = ()


class SharePartitionManager:
    def __init__(self, replica_manager, config: ShareConfig, clock: Callable[[], int],
                 group_configs: Callable[[str], Mapping[str, str]] | None = None,
                 max_sessions: int = 2000, topic_id: Callable[[str], uuid.UUID | None] = lambda _name: None,
                 state_partitions: int = 50, topic_configs: Callable[[str], Mapping[str, str] | None] = lambda _n: None,
                 topic_info: Callable[[str], object] = lambda _n: None,
                 topic_name: Callable[[uuid.UUID], str | None] = lambda _i: None,
                 view_of: Callable[[str], object] = lambda _n: None, view_filter: Callable | None = None) -> None:
        self.replica_manager = replica_manager
        self.view_of = view_of  # a filtered view's definition (None: an ordinary topic)
        self.view_filter = view_filter  # ViewReader.filter(view, partition, read result)
        self.topic_name = topic_name  # a topic id's name
        self.topic_configs = topic_configs  # a topic's stored configs (None: no such topic)
        self.topic_info = topic_info  # a topic's metadata (num_partitions)
        self.topic_id = topic_id  # a topic's id, for the state records' keys
        self.state_partitions = state_partitions  # of __share_group_state
        self._snapshots: dict[int, dict[ShareStateKey, ShareStateValue]] = {}  # per state partition, read once
        self.config = config
        self.clock = clock
        self.group_configs = group_configs
        self.partitions: dict[Key, SharePartition] = {}
        self.sessions = ShareSessions(max_sessions)
        self._changed = trio.Event()  # set when records became available again (released, expired)
        # counters for the metrics: per (group, topic, partition) and kind
        self.counts: dict[tuple[str, str, int, str], int] = {}

    # -- state ---------------------------------------------------------------------------------------
    def _start_offset(self, group_id: str, tp: TopicPartition) -> int:
        partition = self._leader(tp)  # NOT_LEADER_OR_FOLLOWER otherwise
        log = partition.log
        reset = "latest"
        if self.group_configs is not None:
            reset = str(self.group_configs(group_id).get(SHARE_AUTO_OFFSET_RESET, "latest")).strip().lower()
        if reset == "earliest":
            return log.log_start_offset
        duration = reset_duration_ms(reset) if reset.startswith("by_duration") else None
        if duration is not None:
            found = log.fetch_offset_by_timestamp(self.clock() - duration)  # (offset, timestamp)
            return min(found[0], partition.high_watermark) if found is not None else partition.high_watermark
        return partition.high_watermark

    def config_for(self, group_id: str) -> ShareConfig:
        """The broker's limits with the group's own redelivery backoff (share.redelivery.backoff.ms)."""
        if self.group_configs is None:
            return self.config
        backoff, most = share_backoff(self.group_configs(group_id))
        if (backoff, most) == (self.config.redelivery_backoff_ms, self.config.redelivery_backoff_max_ms):
            return self.config
        return replace(self.config, redelivery_backoff_ms=backoff, redelivery_backoff_max_ms=most)

    def state(self, group_id: str, tp: TopicPartition) -> SharePartition:
        key = (group_id, tp)
        sp = self.partitions.get(key)
        config = self.config_for(group_id)
        if sp is None:
            stored = self._stored(group_id, tp)
            if stored is not None:
                sp = self.partitions[key] = SharePartition.restore(stored.snapshot, config)
            else:
                sp = self.partitions[key] = SharePartition.initial(self._start_offset(group_id, tp), config)
                self._persist(group_id, tp)  # where it starts must survive a restart too
        elif sp.config != config:  # the group's configs changed
            sp = self.partitions[key] = sp.with_config(config)
        return sp

    # -- __share_group_state -------------------------------------------------------------------------
    def _state_key(self, group_id: str, tp: TopicPartition) -> tuple[ShareStateKey, int] | None:
        topic_id = self.topic_id(tp.topic)
        if topic_id is None:
            return None
        key = ShareStateKey(group_id, topic_id, tp.partition)
        return key, partition_for(key.coordinator_key(), self.state_partitions)

    def _state_partition(self, partition: int):
        """The local leader of a `__share_group_state` partition, None when there is none here."""
        try:
            return self.replica_manager.get_leader_partition(TopicPartition(SHARE_STATE_TOPIC, partition))
        except KafkaError:
            return None

    def _stored(self, group_id: str, tp: TopicPartition) -> ShareStateValue | None:
        found = self._state_key(group_id, tp)
        if found is None:
            return None
        key, partition = found
        snapshots = self._snapshots.get(partition)
        if snapshots is None:
            if self._state_partition(partition) is None:
                return None
            snapshots = self._stored_partition(partition)
        return snapshots.get(key)

    def _stored_partition(self, partition: int) -> dict[ShareStateKey, ShareStateValue]:
        """Every snapshot of a local `__share_group_state` partition, read once."""
        snapshots = self._snapshots[partition] = {}
        for batch in read_internal_batches(self.replica_manager, TopicPartition(SHARE_STATE_TOPIC, partition)):
            for _offset, raw_key, raw_value in batch.records:
                k = decode_key(raw_key) if raw_key is not None else None
                if k is None:
                    continue
                if raw_value is None:
                    snapshots.pop(k, None)
                    continue
                try:
                    snapshots[k] = decode_value(raw_value)
                except ValueError as exc:
                    logger.warning("unreadable share state for %s in %s-%d: %s", k, SHARE_STATE_TOPIC, partition, exc)
        return snapshots

    def _persist(self, group_id: str, tp: TopicPartition) -> None:
        """Write the share-partition's snapshot; KafkaError when the append fails (the caller answers
        with it). Skipped where the state partition is not led here (a cluster, for now)."""
        found = self._state_key(group_id, tp)
        if found is None:
            return
        key, partition = found
        leader = self._state_partition(partition)
        if leader is None:
            return
        sp = self.partitions[(group_id, tp)]
        value = ShareStateValue(sp.snapshot(), leader_epoch=self._leader_epoch(tp))
        buf = bytearray(build_internal_batch([(encode_key(key), encode_value(value))], self.clock()))
        leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1, from_client=False)
        self._snapshots.setdefault(partition, {})[key] = value

    def _leader_epoch(self, tp: TopicPartition) -> int:
        try:
            return self._leader(tp).leader_epoch
        except (KafkaError, AttributeError):
            return -1

    def _count(self, group_id: str, tp: TopicPartition, kind: str, n: int) -> None:
        if n:
            key = (group_id, tp.topic, tp.partition, kind)
            self.counts[key] = self.counts.get(key, 0) + n

    def _update(self, group_id: str, tp: TopicPartition, result: tuple[SharePartition, Outcome]) -> Outcome:
        sp, outcome = result
        self.partitions[(group_id, tp)] = sp
        if outcome.archived:
            self._dead_letter(group_id, tp, outcome.archived)
        if outcome.expired or outcome.released:
            self._wake()
        for kind, items in (("acquired", outcome.acquired), ("archived", outcome.archived),
                            ("expired", outcome.expired), ("member_released", outcome.released)):
            self._count(group_id, tp, kind, sum(i.last_offset - i.first_offset + 1 for i in items))
        return outcome

    # -- dead letters (KIP-1191) ---------------------------------------------------------------------
    def _dead_letter(self, group_id: str, tp: TopicPartition, archived) -> None:
        """Copy records rejected, or archived at the delivery count limit, to the group's dead-letter
        topic (errors.deadletterqueue.topic.name) with headers naming where they came from and why.
        The topic must exist with errors.deadletterqueue.group.enable=true and be led here; else the
        records are only archived (logged)."""
        name = str((self.group_configs(group_id) if self.group_configs else {}).get(DLQ_TOPIC_NAME, "")).strip()
        if not name:
            return
        target = self.dlq_target(name, tp.partition)
        if target is None:
            logger.warning("share group %s: dead-letter topic %s cannot take records (missing, not "
                           "errors.deadletterqueue.group.enable=true, or not led here); %d range(s) archived only",
                           group_id, name, len(archived))
            return
        records = []
        for item in archived:
            for record in self._read_records(tp, item.first_offset, item.last_offset):
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
        buf = bytearray(build_batch(records))
        try:
            target.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1, from_client=False)
        except KafkaError as exc:
            logger.warning("share group %s: could not write to dead-letter topic %s: %s", group_id, name, exc)
            return
        self._count(group_id, tp, "dead_lettered", len(records))

    def dlq_target(self, name: str, source_partition: int):
        """The local leader of the dead-letter topic's partition for records of `source_partition`."""
        configs = self.topic_configs(name)
        if configs is None or str(configs.get("errors.deadletterqueue.group.enable", "false")).lower() != "true":
            return None
        info = self.topic_info(name)
        if info is None or not info.num_partitions:
            return None
        try:
            return self.replica_manager.get_leader_partition(TopicPartition(name, source_partition % info.num_partitions))
        except KafkaError:
            return None

    def _read_records(self, tp: TopicPartition, first: int, last: int):
        """The records of [first, last] in the log (what remains of them)."""
        offset = first
        while offset <= last:
            read = self._read(tp, offset, 1 << 20, False)
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

    # -- the log under a share-partition: its topic's, or a filtered view's source's -------------------
    def _log_tp(self, tp: TopicPartition) -> TopicPartition:
        view = self.view_of(tp.topic)
        return TopicPartition(view.source, tp.partition) if view is not None else tp

    def _leader(self, tp: TopicPartition):
        return self.replica_manager.get_leader_partition(self._log_tp(tp))

    def _read(self, tp: TopicPartition, offset: int, max_bytes: int, read_committed: bool):
        """A read at `offset`; for a view, its source's read through the view's filter (the records
        it leaves out are offsets without a record: the clients acknowledge them as gaps)."""
        view = self.view_of(tp.topic)
        result = self.replica_manager.read_partition(self._log_tp(tp), offset, max_bytes, read_committed, True)
        if view is not None and result.error is None and self.view_filter is not None:
            self.view_filter(view, tp.partition, result)
        return result

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- events --------------------------------------------------------------------------------------
    def acquire(self, group_id: str, member_id: str, tp: TopicPartition, max_records: int, max_bytes: int,
                read_committed: bool = False) -> AcquireResult:
        """Read from the share-partition's next fetch offset and lock what the read returned (up to
        `max_records`) for the member."""
        try:
            sp = self.state(group_id, tp)
        except KafkaError as exc:
            return AcquireResult(exc.code)
        now = self.clock()
        if max_records <= 0 or not sp.can_acquire(now):
            return AcquireResult()
        offset = sp.next_fetch_offset(now)
        read_committed = read_committed or self._read_committed(group_id)
        # a share fetch keeps at most max_records of what it reads: reading the client's whole
        # max_bytes (librdkafka: 50 MiB) each time would cost as much as the partition has left
        read = self._read(tp, offset, max(min(max_bytes, READ_LIMIT, max_records * RECORD_BUDGET), 1), read_committed)
        if read.error is not None:
            return AcquireResult(read.error.code)
        if not read.records:
            return AcquireResult()
        data = b"".join(r.read() if not isinstance(r, (bytes, bytearray)) else bytes(r) for r in read.records)
        headers = list(_batches(data))
        if not headers:
            return AcquireResult()
        first, last = max(headers[0][2].base_offset, offset), headers[-1][2].last_offset
        outcome = self._update(group_id, tp, sp.acquire(member_id, first, last, max_records, now))
        if not outcome.acquired:
            return AcquireResult()
        # transaction markers, and with read_committed the aborted transactions' records, are no
        # records to the group: archived at once (as gaps), never handed out
        skipped = _skipped(headers, read.aborted_transactions if read_committed else None)
        acquired = outcome.acquired
        if skipped:
            gaps = [(a, b, (0,)) for a, b in _clip(skipped, acquired)]
            if gaps:
                self._update(group_id, tp, self.partitions[(group_id, tp)].acknowledge(member_id, gaps, now))
            acquired = tuple(_subtract(acquired, skipped))
            if not acquired:
                return AcquireResult()
        lo, hi = acquired[0].first_offset, acquired[-1].last_offset
        kept = b"".join(data[pos:end] for pos, end, h in headers
                        if h.last_offset >= lo and h.base_offset <= hi and not h.is_control)
        return AcquireResult(E.none, kept, acquired)

    def _read_committed(self, group_id: str) -> bool:
        if self.group_configs is None:
            return False
        return str(self.group_configs(group_id).get(SHARE_ISOLATION_LEVEL, "")).strip().lower() == "read_committed"

    def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                    batches: Iterable[tuple[int, int, tuple[int, ...]]]) -> ErrorCode:
        if (group_id, tp) not in self.partitions:
            try:
                self._leader(tp)
            except KafkaError as exc:
                return exc.code
            return E.invalid_record_state  # nothing was ever acquired here
        sp = self.state(group_id, tp)
        batches = list(batches)
        before = sp
        outcome = self._update(group_id, tp, sp.acknowledge(member_id, batches, self.clock()))
        if outcome.ok and self.partitions[(group_id, tp)] is not before:
            try:
                self._persist(group_id, tp)  # before the acknowledgement is answered
            except KafkaError as exc:
                self.partitions[(group_id, tp)] = before  # not kept: not acknowledged
                return exc.code
        if outcome.ok:
            for first, last, types in batches:
                for type_, n in (((types[0], last - first + 1),) if len(types) == 1 else ((t, 1) for t in types)):
                    self._count(group_id, tp, ACK_KINDS.get(type_, "gap"), n)
            if any(t == 2 for _f, _l, types in batches for t in types):
                self._wake()
        return outcome.error

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member left or was fenced, or its share session closed: its locks end now."""
        now = self.clock()
        for (group, tp), sp in list(self.partitions.items()):
            if group == group_id:
                if self._update(group, tp, sp.release_member(member_id, now)).released:
                    self._persist_quietly(group, tp)

    def member_gone(self, group_id: str, member_id: str) -> None:
        self.sessions.remove_member(group_id, member_id)
        self.release_member(group_id, member_id)

    def expire_locks(self) -> int:
        """Take back the locks whose time is up (a periodic task); how many records went back."""
        now = self.clock()
        n = 0
        for (group, tp), sp in list(self.partitions.items()):
            when = sp.next_event_ms(now)
            if when is not None and when <= now:
                outcome = self._update(group, tp, sp.expire(now))
                n += sum(r.last_offset - r.first_offset + 1 for r in outcome.expired)
                if outcome.expired or outcome.archived:
                    self._persist_quietly(group, tp)
        return n

    def _persist_quietly(self, group_id: str, tp: TopicPartition) -> None:
        """A change nobody waits for (locks taken back): written when it can be; the next change
        writes the whole state again."""
        try:
            self._persist(group_id, tp)
        except KafkaError as exc:
            logger.warning("could not write the share state of %s for group %s: %s", tp, group_id, exc)

    async def wait_for_records(self, tps: list[TopicPartition], timeout_s: float) -> None:
        """Until an append lands on one of `tps` or records are released anywhere, at most `timeout_s`."""
        changed = self._changed
        with trio.move_on_after(max(timeout_s, 0)):
            async with trio.open_nursery() as nursery:
                async def appended() -> None:
                    await self.replica_manager.wait_for_data(tps, timeout_s)
                    nursery.cancel_scope.cancel()

                async def released() -> None:
                    await changed.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(appended)
                nursery.start_soon(released)

    # -- the group's offsets (Describe/Alter/DeleteShareGroupOffsets) -----------------------------------
    def group_partitions(self, group_id: str) -> list[TopicPartition]:
        """The share-partitions a group has state for here: live, or stored in local state partitions."""
        found = {tp for group, tp in self.partitions if group == group_id}
        for partition in range(self.state_partitions):
            if partition not in self._snapshots and self._state_partition(partition) is not None:
                self._stored_partition(partition)
            for key in self._snapshots.get(partition, {}):
                if key.group_id == group_id:
                    name = self.topic_name(key.topic_id)
                    if name is not None:
                        found.add(TopicPartition(name, key.partition))
        return sorted(found, key=lambda tp: (tp.topic, tp.partition))

    def start_offset(self, group_id: str, tp: TopicPartition) -> int:
        """The share-partition start offset, -1 when the group has none for it."""
        sp = self.partitions.get((group_id, tp))
        if sp is not None:
            return sp.start_offset
        stored = self._stored(group_id, tp)
        return stored.snapshot.start_offset if stored is not None else -1

    def reset_start(self, group_id: str, tp: TopicPartition, offset: int) -> ErrorCode:
        """AlterShareGroupOffsets: the share-partition starts at `offset` (its in-flight state forgotten)."""
        try:
            self._leader(tp)
        except KafkaError as exc:
            return exc.code
        if (group_id, tp) in self.partitions or self._stored(group_id, tp) is not None:
            sp = self.state(group_id, tp)
            new, outcome = sp.reset_start(offset, self.clock())
            if not outcome.ok:
                return outcome.error
        else:
            new = SharePartition.initial(offset, self.config_for(group_id))
        self.partitions[(group_id, tp)] = new
        try:
            self._persist(group_id, tp)
        except KafkaError as exc:
            return exc.code
        return E.none

    def forget(self, group_id: str, tp: TopicPartition) -> ErrorCode:
        """DeleteShareGroupOffsets / DeleteGroups: the group's state for the partition goes (a
        tombstone in __share_group_state); it starts again by share.auto.offset.reset."""
        self.partitions.pop((group_id, tp), None)
        found = self._state_key(group_id, tp)
        if found is None:
            return E.none
        key, partition = found
        leader = self._state_partition(partition)
        if leader is None:
            return E.none
        buf = bytearray(build_internal_batch([(encode_key(key), None)], self.clock()))
        try:
            leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1, from_client=False)
        except KafkaError as exc:
            return exc.code
        self._snapshots.get(partition, {}).pop(key, None)
        return E.none

    def lag(self, group_id: str, tp: TopicPartition) -> int | None:
        sp = self.partitions.get((group_id, tp))
        if sp is None:
            return None
        try:
            end = self._leader(tp).high_watermark
        except KafkaError:
            return None
        return sp.lag(end)


def _skipped(headers, aborted) -> list[tuple[int, int]]:
    """Offset ranges that hold no record for a share group: control batches (transaction markers),
    and with read_committed (`aborted` not None) the batches of the aborted transactions — as a
    read_committed consumer drops them (Kafka's Fetcher): a producer is aborted from its
    transaction's first offset until its next control batch (the ABORT marker)."""
    out: list[tuple[int, int]] = []
    pending = sorted(aborted or (), key=lambda a: a.first_offset)
    aborted_producers: set[int] = set()
    for _pos, _end, h in headers:
        while pending and pending[0].first_offset <= h.last_offset:
            aborted_producers.add(pending.pop(0).producer_id)
        if h.is_control:
            aborted_producers.discard(h.producer_id)
            out.append((h.base_offset, h.last_offset))
        elif h.is_transactional and h.producer_id in aborted_producers:
            out.append((h.base_offset, h.last_offset))
    return out


def _clip(ranges, acquired) -> list[tuple[int, int]]:
    """The parts of `ranges` inside the acquired ranges."""
    out = []
    for a, b in ranges:
        for r in acquired:
            lo, hi = max(a, r.first_offset), min(b, r.last_offset)
            if lo <= hi:
                out.append((lo, hi))
    return sorted(out)


def _subtract(acquired, ranges):
    """The acquired ranges with `ranges` cut out."""
    for r in acquired:
        pieces = [(r.first_offset, r.last_offset)]
        for a, b in ranges:
            nxt = []
            for lo, hi in pieces:
                if b < lo or a > hi:
                    nxt.append((lo, hi))
                    continue
                if lo < a:
                    nxt.append((lo, a - 1))
                if b < hi:
                    nxt.append((b + 1, hi))
            pieces = nxt
        for lo, hi in pieces:
            yield AcquiredRecords(lo, hi, r.delivery_count)


def _batches(data: bytes):
    """(start, end, header) of each whole batch in `data`."""
    for pos, header in iter_batch_headers(data):
        yield pos, pos + header.size_in_bytes, header
