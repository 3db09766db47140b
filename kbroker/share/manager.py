"""SharePartitionManager: the share-partitions (KIP-932) this broker leads — one SharePartition
(share/partition.py, pure) per (share group, topic-partition) — and the share sessions of the members
that fetch from it (share/sessions.py). It reads the log through the ReplicaManager, turns what a
read returns into acquired records, applies acknowledgements, takes back the locks that time out
(a periodic task) and those of a member that left, and wakes the ShareFetches waiting for records.

A share-partition's state — start offset, each in-flight record's state and delivery count
(acquired ones as available) — is kept by its state coordinator through the SharePersister
(share/persister.py: `__share_group_state`, on this broker or another): read when this broker
first serves the share-partition under a leader epoch (a new leader carries on from it), written
when it starts and after every change an acknowledgement makes, before the acknowledgement is
answered; lock expiries and members leaving are written in the background (`run`). Writes of one
share-partition are ordered and coalesced: a write carries every change made before it started.
A share-partition with no stored state starts where the group's `share.auto.offset.reset` says
(latest, the default: the high watermark; earliest: the log start; by_duration: the first record
at or after now minus the duration). The group coordinator's reset or deletion of the offsets
writes the state with a new state epoch: the leader's older state is then refused
(FENCED_STATE_EPOCH) and read again, as it is when a new share session starts with nothing locked.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

import trio

from kbroker.errors import ErrorCode, KafkaError
from kbroker.group.dynamic_configs import SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL, reset_duration_ms, share_backoff
from kbroker.log.records_view import FileRecords
from kbroker.log.topic_partition import TopicPartition
from kbroker.share.dead_letters import DeadLetters
from kbroker.share.partition import SharePartition
from kbroker.share.partition_types import AcquiredRecords, Outcome, ShareConfig, ShareSnapshot
from kbroker.share.persister import KEEP_LEADER_EPOCH, SharePersister
from kbroker.share.sessions import ShareSessions
from kbroker.share.state_records import ShareStateKey, ShareStateValue
from kbroker.wire.fetch_response import RecordBytes
from kbroker.wire.records import iter_batch_headers

logger = logging.getLogger(__name__)

E = ErrorCode
Key = tuple[str, TopicPartition]
ACK_KINDS = {1: "accepted", 2: "released", 3: "rejected", 4: "renewed"}
READ_LIMIT = 1 << 20  # bytes one share fetch reads of a partition at most (a first batch beyond it still comes)
RECORD_BUDGET = 2048  # bytes read per record asked for (max_records), so a small fetch reads little
FENCED = (E.fenced_leader_epoch, E.fenced_state_epoch)


@dataclass
class AcquireResult:
    error: ErrorCode = E.none
    # whole batches holding the acquired offsets (the client keeps those): file ranges of the
    # segments, sent with sendfile, and batches in memory (a filtered view's)
    records: list = field(default_factory=list)
    acquired: tuple[AcquiredRecords, ...] = ()

    @property
    def size(self) -> int:
        return sum(r.size for r in self.records)


class SharePartitionManager:
    def __init__(self, replica_manager, config: ShareConfig, clock: Callable[[], int],
                 group_configs: Callable[[str], Mapping[str, str]] | None = None,
                 max_sessions: int = 2000, topic_id: Callable[[str], uuid.UUID | None] = lambda _name: None,
                 state_partitions: int = 50, topic_configs: Callable[[str], Mapping[str, str] | None] = lambda _n: None,
                 topic_info: Callable[[str], object] = lambda _n: None,
                 topic_name: Callable[[uuid.UUID], str | None] = lambda _i: None,
                 view_of: Callable[[str], object] = lambda _n: None, view_filter: Callable | None = None,
                 persister: SharePersister | None = None) -> None:
        self.replica_manager = replica_manager
        self.view_of = view_of  # a filtered view's definition (None: an ordinary topic)
        self.view_filter = view_filter  # ViewReader.filter(view, partition, read result)
        self.topic_name = topic_name  # a topic id's name
        self.topic_id = topic_id  # a topic's id, for the state records' keys
        self.persister = persister or SharePersister(replica_manager, clock, node_id=0, cluster=False,
                                                     state_partitions=state_partitions, leader_of=lambda _tp: 0)
        self.config = config
        self.clock = clock
        self.group_configs = group_configs
        self.partitions: dict[Key, SharePartition] = {}
        self._loaded_at: dict[Key, tuple[int, int]] = {}  # (leader epoch, state epoch) a share-partition was read at
        self._changes: dict[Key, int] = {}  # changes made to a share-partition since it was read
        self._written: dict[Key, int] = {}  # ... of which the persister has these
        self._locks: dict[Key, trio.Lock] = {}  # a share-partition's reads and writes of its state, in order
        self._pending: set[Key] = set()  # changes nobody waits for: written by run()
        self._pending_added = trio.Event()
        self.sessions = ShareSessions(max_sessions)
        self._changed = trio.Event()  # set when records became available again (released, expired)
        # counters for the metrics: per (group, topic, partition) and kind
        self.counts: dict[tuple[str, str, int, str], int] = {}
        self.dead_letters = DeadLetters(  # the broker's id, cluster and leaders: the persister's
            replica_manager, group_configs, topic_configs, topic_info, self._read, self._count,
            node_id=self.persister.node_id, cluster=self.persister.cluster, leader_of=self.persister.leader_of,
            timeout_s=self.persister.timeout_s)

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

    def _lock(self, key: Key) -> trio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = trio.Lock()
        return lock

    def _current(self, key: Key, epoch: int) -> SharePartition | None:
        sp = self.partitions.get(key)
        return sp if sp is not None and self._loaded_at[key][0] == epoch else None

    async def state(self, group_id: str, tp: TopicPartition) -> SharePartition:
        """The share-partition as this leader serves it, read from its state coordinator the first
        time under this leader epoch; KafkaError when this broker does not lead `tp` or the state
        cannot be read."""
        key = (group_id, tp)
        epoch = self._leader(tp).leader_epoch
        sp = self._current(key, epoch)
        if sp is None:
            async with self._lock(key):
                sp = self._current(key, epoch)
                if sp is None:
                    sp = await self._load(group_id, tp, epoch)
        config = self.config_for(group_id)
        if sp.config != config:  # the group's configs changed
            sp = self.partitions[key] = sp.with_config(config)
        return sp

    async def _load(self, group_id: str, tp: TopicPartition, epoch: int) -> SharePartition:
        key = (group_id, tp)
        self._drop(key)
        skey = self._state_key(group_id, tp)
        stored = None
        if skey is not None:
            code, stored = await self.persister.read(skey, epoch)
            if code != E.none:
                raise KafkaError(f"reading the share state of {tp} for group {group_id}", code)
        config = self.config_for(group_id)
        if stored is not None:
            try:
                sp = SharePartition.restore(stored.snapshot, config)
            except ValueError as exc:
                raise KafkaError(f"share state of {tp} for group {group_id}: {exc}", E.unknown_server_error) from None
            self.partitions[key], self._loaded_at[key] = sp, (epoch, stored.state_epoch)
            logger.info("share group %s: %s carries on from its stored state (start offset %d, %d state batches, "
                        "leader epoch %d)", group_id, tp, sp.start_offset, len(stored.snapshot.state_batches), epoch)
            return sp
        sp = SharePartition.initial(self._start_offset(group_id, tp), config)
        self.partitions[key], self._loaded_at[key] = sp, (epoch, 0)
        code = await self._write(key, self._changed_once(key))  # where it starts must survive a restart too
        if code != E.none:
            self._drop(key)
            raise KafkaError(f"writing the share state of {tp} for group {group_id}", code)
        return sp

    def _drop(self, key: Key) -> None:
        for d in (self.partitions, self._loaded_at, self._changes, self._written):
            d.pop(key, None)

    # -- writing the state -----------------------------------------------------------------------------
    def _state_key(self, group_id: str, tp: TopicPartition) -> ShareStateKey | None:
        topic_id = self.topic_id(tp.topic)
        return None if topic_id is None else ShareStateKey(group_id, topic_id, tp.partition)

    def _changed_once(self, key: Key) -> int:
        self._changes[key] = n = self._changes.get(key, 0) + 1
        return n

    async def _persist(self, group_id: str, tp: TopicPartition) -> ErrorCode:
        """Write the share-partition's state with the change just made (and any before it)."""
        key = (group_id, tp)
        want = self._changed_once(key)
        async with self._lock(key):
            return await self._write(key, want)

    async def _write(self, key: Key, want: int) -> ErrorCode:
        """With the key's lock held: write the current state unless change `want` is written already."""
        if self._written.get(key, 0) >= want:
            return E.none
        await self.dead_letters.wait_sent(key)  # the dead letters of the changes written are on their topic
        sp = self.partitions.get(key)
        if sp is None:
            return E.not_leader_or_follower  # taken away (fenced, leadership moved) meanwhile
        skey = self._state_key(*key)
        if skey is None:
            return E.none
        upto = self._changes.get(key, 0)
        loaded_at = self._loaded_at[key]
        leader_epoch, state_epoch = loaded_at
        code = await self.persister.write(skey, ShareStateValue(sp.snapshot(), state_epoch, leader_epoch))
        if code == E.none:
            if self._loaded_at.get(key) == loaded_at:  # not read again meanwhile
                self._written[key] = max(self._written.get(key, 0), upto)
        elif code in FENCED:
            logger.info("share state of %s for group %s was written by a newer leader or reset: reading it again",
                        key[1], key[0])
            self._drop(key)
        return code

    def _persist_later(self, key: Key) -> None:
        """A change nobody waits for (locks taken back): written by run() when it can be."""
        self._changed_once(key)
        self._pending.add(key)
        self._pending_added.set()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Writes the changes nobody waits for, each share-partition's in order; sends the dead letters
        (in a cluster)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.dead_letters.run)
            task_status.started()
            while True:
                await self._pending_added.wait()
                self._pending_added = trio.Event()
                keys, self._pending = self._pending, set()
                for key in keys:
                    nursery.start_soon(self._write_quietly, key)

    async def _write_quietly(self, key: Key) -> None:
        async with self._lock(key):
            code = await self._write(key, self._changes.get(key, 0))
        if code not in (E.none, E.not_leader_or_follower):
            logger.warning("could not write the share state of %s for group %s: %s", key[1], key[0], code.name)

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
            self.dead_letters.write(group_id, tp, outcome.archived)
        if outcome.expired or outcome.released:
            self._wake()
        for kind, items in (("acquired", outcome.acquired), ("archived", outcome.archived),
                            ("expired", outcome.expired), ("member_released", outcome.released)):
            self._count(group_id, tp, kind, sum(i.last_offset - i.first_offset + 1 for i in items))
        return outcome

    def dlq_target(self, name: str, source_partition: int):
        return self.dead_letters.target(name, source_partition)

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
    async def acquire(self, group_id: str, member_id: str, tp: TopicPartition, max_records: int, max_bytes: int,
                      read_committed: bool = False, whole_batches: bool = False) -> AcquireResult:
        """Read from the share-partition's next fetch offset and lock what the read returned (up to
        `max_records`) for the member. `whole_batches` (ShareFetch's BATCH_OPTIMIZED acquire mode,
        KIP-1206, v1's only one): the log batch holding the last record within `max_records` is
        taken whole, as Kafka does — the client gets that batch anyway, and the rest of it would
        be sent again with the next fetch."""
        try:
            sp = await self.state(group_id, tp)
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
        headers = list(_batches(read.records))  # the batches' headers only: the records stay in the files
        if not headers:
            return AcquireResult()
        first, last = max(headers[0][2].base_offset, offset), headers[-1][2].last_offset
        if whole_batches:
            max_records = _to_batch_end(headers, offset, max_records)
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
        kept = _pieces(read.records, [(pos, end) for pos, end, h in headers
                                      if h.last_offset >= lo and h.base_offset <= hi and not h.is_control])
        return AcquireResult(E.none, kept, acquired)

    def _read_committed(self, group_id: str) -> bool:
        if self.group_configs is None:
            return False
        return str(self.group_configs(group_id).get(SHARE_ISOLATION_LEVEL, "")).strip().lower() == "read_committed"

    async def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                          batches: Iterable[tuple[int, int, tuple[int, ...]]]) -> ErrorCode:
        """Apply a member's acknowledgements; answered once the state coordinator has them. A write
        that fails leaves the change in memory (written with the next one) and answers its error."""
        key = (group_id, tp)
        try:
            epoch = self._leader(tp).leader_epoch
        except KafkaError as exc:
            return exc.code
        sp = self._current(key, epoch)
        if sp is None:
            return E.invalid_record_state  # nothing was acquired here under this leadership
        batches = list(batches)
        outcome = self._update(group_id, tp, sp.acknowledge(member_id, batches, self.clock()))
        if outcome.ok and self.partitions[key] is not sp:
            code = await self._persist(group_id, tp)  # before the acknowledgement is answered
            if code != E.none:
                return code
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
                    self._persist_later((group, tp))

    def member_gone(self, group_id: str, member_id: str) -> None:
        self.sessions.remove_member(group_id, member_id)
        self.release_member(group_id, member_id)

    def session_started(self, group_id: str) -> None:
        """A member of the group started a share session: the group's share-partitions that hold no
        lock are read again from their state coordinator on their next fetch (in a cluster the group
        coordinator may have reset them on another broker since)."""
        if not self.persister.cluster:
            return  # on one node a reset drops the share-partition itself
        for key, sp in list(self.partitions.items()):
            if key[0] == group_id and not sp.acquired_count and key not in self._pending:
                self._drop(key)

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
                    self._persist_later((group, tp))
        return n

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

    # -- the group's offsets (Describe/Alter/DeleteShareGroupOffsets), for the group coordinator ---------
    def group_partitions(self, group_id: str, also: Iterable[TopicPartition] = ()) -> list[TopicPartition]:
        """The share-partitions a group has state for that this broker knows of: served here, or
        stored in the state partitions led here; `also` adds ones known elsewhere (its subscription)."""
        found = {tp for group, tp in self.partitions if group == group_id}
        found.update(also)
        for key in self.persister.local_keys(group_id):
            name = self.topic_name(key.topic_id)
            if name is not None:
                found.add(TopicPartition(name, key.partition))
        return sorted(found, key=lambda tp: (tp.topic, tp.partition))

    async def start_offset(self, group_id: str, tp: TopicPartition) -> int:
        """The share-partition start offset, -1 when the group has none for it."""
        sp = self._current((group_id, tp), self._leader_epoch(tp))
        if sp is not None:
            return sp.start_offset
        skey = self._state_key(group_id, tp)
        if skey is None:
            return -1
        code, stored = await self.persister.read(skey, -1)
        return stored.snapshot.start_offset if code == E.none and stored is not None else -1

    async def reset_start(self, group_id: str, tp: TopicPartition, offset: int) -> ErrorCode:
        """AlterShareGroupOffsets: the share-partition starts at `offset`, its in-flight state
        forgotten, under a new state epoch (a leader's older state is fenced)."""
        key = (group_id, tp)
        sp = self.partitions.get(key)
        if sp is not None and sp.acquired_count:
            return E.non_empty_group
        skey = self._state_key(group_id, tp)
        if skey is None:
            return E.unknown_topic_or_partition
        code, stored = await self.persister.read(skey, -1)
        if code != E.none:
            return code
        state_epoch = stored.state_epoch + 1 if stored is not None else 0
        code = await self.persister.write(skey, ShareStateValue(ShareSnapshot(offset), state_epoch, KEEP_LEADER_EPOCH))
        if code == E.none:
            self._drop(key)
        return code

    async def forget(self, group_id: str, tp: TopicPartition) -> ErrorCode:
        """DeleteShareGroupOffsets / DeleteGroups: the group's state for the partition goes (a
        tombstone in __share_group_state); it starts again by share.auto.offset.reset."""
        self._drop((group_id, tp))
        skey = self._state_key(group_id, tp)
        if skey is None:
            return E.none
        return await self.persister.delete(skey)

    async def stored_lag(self, group_id: str, tp: TopicPartition) -> int | None:
        """The lag of a share-partition with stored state that this broker leads but has not served
        since (after a reset): read in to count; None when it is led elsewhere or has no state."""
        lag = self.lag(group_id, tp)
        if lag is not None:
            return lag
        skey = self._state_key(group_id, tp)
        if skey is None or self._leader_epoch(tp) < 0:
            return None
        code, stored = await self.persister.read(skey, -1)
        if code != E.none or stored is None:
            return None
        try:
            await self.state(group_id, tp)
        except KafkaError:
            return None
        return self.lag(group_id, tp)

    def lag(self, group_id: str, tp: TopicPartition) -> int | None:
        sp = self.partitions.get((group_id, tp))
        if sp is None:
            return None
        try:
            end = self._leader(tp).high_watermark
        except KafkaError:
            return None
        return sp.lag(end)


def _to_batch_end(headers, offset: int, max_records: int) -> int:
    """`max_records` from `offset`, stretched to the end of the log batch its last record is in."""
    want = offset + max_records - 1
    for _pos, _end, h in headers:
        if h.base_offset <= want <= h.last_offset:
            return max(max_records, h.last_offset - offset + 1)
    return max_records


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


def _batches(records):
    """(start, end, header) of each whole batch of a read, positions as in its pieces joined:
    headers read from the files (FileRecords.batch_headers) or parsed from in-memory batches."""
    at = 0
    for r in records:
        found = r.batch_headers() if isinstance(r, FileRecords) else iter_batch_headers(r)
        for pos, header in found:
            yield at + pos, at + pos + header.size_in_bytes, header
        at += _size(r)


def _pieces(records, spans: list[tuple[int, int]]) -> list:
    """The [pos, end) spans of the read's bytes (`records` joined) as what they are: file ranges of
    the segments (neighbours merged), or the bytes of an in-memory batch. A batch never straddles
    two of `records` (each holds whole batches)."""
    out: list = []
    i, start = 0, 0
    for pos, end in spans:
        while start + _size(records[i]) <= pos:
            start += _size(records[i])
            i += 1
        r, off = records[i], pos - start
        if isinstance(r, FileRecords):
            last = out[-1] if out else None
            if isinstance(last, FileRecords) and last.fd == r.fd and last.position + last.size == r.position + off:
                out[-1] = FileRecords(r.fd, last.position, last.size + end - pos)
            else:
                out.append(FileRecords(r.fd, r.position + off, end - pos))
        else:
            out.append(RecordBytes(bytes(r[off:off + end - pos])))
    return out


def _size(r) -> int:
    return r.size if isinstance(r, FileRecords) else len(r)
