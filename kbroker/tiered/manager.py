"""RemoteLogManager: the trio shell of tiered storage (Kafka's RemoteLogManager and its RLMTask).

Every `remote.log.manager.task.interval.ms`, for each partition of a topic with
`remote.storage.enable`:
- as leader: load the archive's manifest (again after every leadership change), remove what an
  interrupted copy or delete left behind, copy each closed segment below the last stable offset
  with its indexes and leader epochs (the store writes them crash-safe; then the manifest names
  the segment, and only then does `Log.highest_offset_in_remote_storage` let local retention
  delete the local copy), and apply the archive's retention (retention.ms/bytes): the manifest
  drops the segments first, their objects go after;
- as follower: reload the manifest, so its local retention too deletes only what is archived.

It also serves what the replica layer and ListOffsets ask of the archive: its log start offset,
reads below the local log start (file ranges from the directory store, bytes from S3, bounded by
the fetch's max bytes; read_committed reads get the aborted transactions from the archived
`.txnindex` files and, past the archive, from the local log), offsets by timestamp, and
DeleteRecords. All blocking store calls run in worker threads; reads at most
`remote.log.reader.threads` at once. Partitions are the replica layer's, reached through an
injected callable (duck-typed: `topic_partition`, `topic_id`, `log`, `is_leader`, `leader_epoch`,
`last_stable_offset`), so this package never imports replica/.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

from kbroker.errors import KafkaStorageError, OffsetOutOfRangeError
from kbroker.log._files import pread_upto
from kbroker.log.log_txn import AbortedTransaction
from kbroker.log.offset_index import OffsetIndex
from kbroker.log.records_view import FetchDataInfo, FileRecords
from kbroker.log.time_index import TimeIndex
from kbroker.log.topic_partition import TopicPartition
from kbroker.log.txn_index import parse_aborted_txns
from kbroker.tiered.decisions import LocalSegment, local_only_bytes, segments_to_copy, segments_to_expire
from kbroker.tiered.manifest import Manifest, ManifestError, RemoteSegment
from kbroker.tiered.reader import find_offset_by_timestamp, read_batches
from kbroker.tiered.store import (
    EPOCHS,
    INDEX,
    MANIFEST_NAME,
    TIME_INDEX,
    TMP_SUFFIX,
    TXN_INDEX,
    RemoteStorageManager,
    SegmentData,
)
from kbroker.wire.fetch_response import RecordBytes

logger = logging.getLogger(__name__)

__all__ = ["RemoteLogManager"]

_MAX_OPEN_SEGMENTS = 128  # archived segment files kept open for reads
_CLOSE_DELAY_MS = 60_000  # an evicted fd stays open this long: a sendfile of it may still be queued
_INDEX_CACHE_BYTES = 32 * 1024 * 1024


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class _PartitionState:
    path: str  # the partition's place in the store: <topic>-<topic id>/<partition>
    manifest: Manifest | None = None
    loaded_epoch: int | None = None  # the leader epoch it was loaded as leader for (None: as follower)
    swept_epoch: int | None = None
    lock: trio.Lock = field(default_factory=trio.Lock)  # one manifest change at a time


class RemoteLogManager:
    def __init__(self, config: Any, store: RemoteStorageManager, partitions: Callable[[], Iterable[Any]],
                 now_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.store = store
        self.partitions = partitions
        self.now_ms = now_ms
        self.interval_s = config.get("remote.log.manager.task.interval.ms") / 1000
        self.orphan_grace_ms = max(10 * config.get("remote.log.manager.task.interval.ms"), 60_000)
        self._limiter = trio.CapacityLimiter(config.get("remote.log.reader.threads"))
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._fds: OrderedDict[str, int] = OrderedDict()  # segment id -> open fd (directory store)
        self._closing: list[tuple[int, int]] = []  # (close after ms, fd)
        self._indexes: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._index_bytes = 0

    # --- the task ---------------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Load the manifests of the partitions already here (reads below the local log start are
        served from the start), then run a round every interval."""
        for partition in self._tiered_partitions():
            try:
                await self._load(partition, self._state(partition))
            except Exception:  # noqa: BLE001 - the round retries; reads load on demand
                logger.exception("%s: loading the archive's manifest failed", partition.topic_partition)
        task_status.started()
        while True:
            await trio.sleep(self.interval_s)
            await self.run_once()

    async def run_once(self) -> None:
        """One round over every tiered partition (each one's failure is logged, the others go on)."""
        present = set()
        for partition in self._tiered_partitions():
            present.add(partition.topic_partition)
            try:
                if partition.is_leader:
                    await self._leader_round(partition)
                else:
                    await self._load(partition, self._state(partition))
            except Exception:  # noqa: BLE001 - a store outage must not stop the other partitions
                logger.exception("%s: tiered storage round failed", partition.topic_partition)
        for tp in [tp for tp in self._states if tp not in present]:
            del self._states[tp]
        self._close_due_fds(self.now_ms())

    def _tiered_partitions(self) -> list[Any]:
        return [p for p in self.partitions() if p.log.config.remote_storage_enable and not p.log.closed]

    def _state(self, partition: Any) -> _PartitionState:
        tp = partition.topic_partition
        path = f"{tp.topic}-{partition.topic_id}/{tp.partition}"
        state = self._states.get(tp)
        if state is None or state.path != path:  # new, or a topic re-created under the same name
            state = self._states[tp] = _PartitionState(path)
        return state

    async def _load(self, partition: Any, state: _PartitionState) -> Manifest:
        async with state.lock:
            data = await trio.to_thread.run_sync(self.store.read_manifest, state.path)
            return self._loaded_from(partition, state, data)

    @staticmethod
    def _loaded_from(partition: Any, state: _PartitionState, data: bytes | None) -> Manifest:
        tp = partition.topic_partition
        if data is None:
            manifest = Manifest(tp.topic, str(partition.topic_id), tp.partition)
        else:
            try:
                manifest = Manifest.decode(data)
            except ManifestError as exc:
                raise KafkaStorageError(f"{tp}: the archive's manifest is unreadable: {exc}") from exc
        state.manifest = manifest
        state.loaded_epoch = partition.leader_epoch if partition.is_leader else None
        partition.log.highest_offset_in_remote_storage = manifest.highest_offset
        return manifest

    async def _leader_round(self, partition: Any) -> None:
        state = self._state(partition)
        epoch = partition.leader_epoch
        if state.manifest is None or state.loaded_epoch != epoch:
            await self._load(partition, state)
        if state.manifest.leader_epoch > epoch:
            return  # a newer leader writes this archive now
        if state.swept_epoch != epoch:
            await self._remove_leftovers(state)
            state.swept_epoch = epoch
        await self._copy_segments(partition, state, epoch)
        await self._expire_segments(partition, state, epoch)

    def _still_leading(self, partition: Any, epoch: int) -> bool:
        return partition.is_leader and partition.leader_epoch == epoch and not partition.log.closed

    # --- copying ----------------------------------------------------------------------------------

    @staticmethod
    def _local_segments(log: Any) -> list[LocalSegment]:
        segs = log.segments
        out = []
        for i, seg in enumerate(segs):
            nxt = segs[i + 1].base_offset if i + 1 < len(segs) else log.log_end_offset
            out.append(LocalSegment(seg.base_offset, nxt, seg.size, seg.max_timestamp_so_far))
        return out

    async def _copy_segments(self, partition: Any, state: _PartitionState, epoch: int) -> None:
        log = partition.log
        local = self._local_segments(log)
        plan = segments_to_copy(local[:-1], state.manifest.highest_offset, log.log_start_offset,
                                partition.last_stable_offset)
        for info in plan:
            if not self._still_leading(partition, epoch):
                return
            segment = next((s for s in log.segments if s.base_offset == info.base_offset), None)
            if segment is None or segment.closed or segment is log.segments[-1]:
                return  # deleted or truncated meanwhile: the next round plans again
            remote, data = self._prepare_copy(log, segment, info)  # no await between lookup and dup
            try:
                await trio.to_thread.run_sync(self.store.copy_log_segment, state.path, remote, data)
            finally:
                os.close(data.log_fd)
            async with state.lock:
                if not self._still_leading(partition, epoch):
                    return  # its objects are leftovers the next leader removes
                manifest = state.manifest.with_segment(remote, epoch, log.log_start_offset)
                await self._write_manifest(state, manifest)
            log.highest_offset_in_remote_storage = manifest.highest_offset
            logger.info("%s: archived segment %d-%d (%d bytes)", partition.topic_partition, remote.base_offset,
                        remote.end_offset, remote.size)

    def _prepare_copy(self, log: Any, segment: Any, info: LocalSegment) -> tuple[RemoteSegment, SegmentData]:
        epochs = [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.epoch_entries()
                  if e.start_offset <= info.end_offset]
        in_segment = [(e, max(o, info.base_offset)) for i, (e, o) in enumerate(epochs)
                      if i + 1 == len(epochs) or epochs[i + 1][1] > info.base_offset]
        checkpoint = "\n".join(["0", str(len(epochs))] + [f"{e} {o}" for e, o in epochs]) + "\n"
        txn_index = b"".join(t.pack() for t in segment.txn_index.all_aborted_txns())
        remote = RemoteSegment(uuid.uuid4().hex, info.base_offset, info.end_offset, info.max_timestamp, info.size,
                               tuple(in_segment), len(txn_index), self.now_ms())
        indexes = {INDEX: segment.offset_index.to_bytes(), TIME_INDEX: segment.time_index.to_bytes(),
                   TXN_INDEX: txn_index, EPOCHS: checkpoint.encode()}
        return remote, SegmentData(os.dup(segment.fd), info.size, indexes)

    async def _write_manifest(self, state: _PartitionState, manifest: Manifest) -> None:
        await trio.to_thread.run_sync(self.store.write_manifest, state.path, manifest.encode())
        state.manifest = manifest

    # --- the archive's retention ------------------------------------------------------------------

    async def _expire_segments(self, partition: Any, state: _PartitionState, epoch: int) -> None:
        log = partition.log
        cfg = log.config
        async with state.lock:
            manifest = state.manifest
            expired = segments_to_expire(
                manifest, retention_ms=cfg.retention_ms if cfg.delete_enabled else -1,
                retention_bytes=cfg.retention_bytes if cfg.delete_enabled else -1,
                local_only=local_only_bytes(self._local_segments(log), manifest.highest_offset), now_ms=self.now_ms())
            if not expired or not self._still_leading(partition, epoch):
                return
            await self._write_manifest(state, manifest.without(expired, epoch))
        for seg in expired:
            self._forget(seg)
        await trio.to_thread.run_sync(self._delete_segments, state.path, expired)
        logger.info("%s: the archive's retention deleted %d segments; it starts at %d now", partition.topic_partition,
                    len(expired), state.manifest.log_start_offset)

    def _delete_segments(self, path: str, segments: list[RemoteSegment]) -> None:
        for seg in segments:
            self.store.delete_log_segment(path, seg)

    async def _remove_leftovers(self, state: _PartitionState) -> None:
        """Objects the manifest does not name (an interrupted copy's, a delete's that did not
        finish, `.tmp` files of a crash), once older than the grace time: a leader deposed a moment
        ago may still be copying."""
        named = {s.name for s in state.manifest.segments}
        objects = await trio.to_thread.run_sync(self.store.list_objects, state.path)
        now = self.now_ms()
        leftovers = [name for name, modified in objects
                     if name != MANIFEST_NAME and now - modified > self.orphan_grace_ms
                     and (name.endswith(TMP_SUFFIX) or name.split(".", 1)[0] not in named)]
        if leftovers:
            logger.info("%s: removing %d leftover objects from the archive", state.path, len(leftovers))
            await trio.to_thread.run_sync(self.store.delete_objects, state.path, leftovers)

    # --- what the replica layer and the handlers ask ----------------------------------------------

    def log_start_offset(self, partition: Any) -> int:
        """The partition's log start as clients see it: the archive's start when it holds
        anything below the local log start (the manifest as last loaded)."""
        local = partition.log.log_start_offset
        state = self._states.get(partition.topic_partition)
        start = state.manifest.start_offset if state is not None and state.manifest is not None else None
        return local if start is None else min(start, local)

    async def _loaded(self, partition: Any) -> Manifest:
        state = self._state(partition)
        if state.manifest is None:
            await self._load(partition, state)
        return state.manifest

    async def earliest_offset(self, partition: Any) -> int:
        await self._loaded(partition)
        return self.log_start_offset(partition)

    async def highest_offset(self, partition: Any) -> int:
        """ListOffsets LATEST_TIERED (-5): the last archived offset, -1 when none is."""
        manifest = await self._loaded(partition)
        return manifest.highest_offset if manifest.segments else -1

    async def advance_log_start_offset(self, partition: Any, offset: int) -> None:
        """DeleteRecords: the archive serves nothing below `offset` from now on; its segments wholly
        below go at the next round."""
        state = self._state(partition)
        await self._loaded(partition)
        async with state.lock:
            manifest = state.manifest.with_log_start_offset(offset, partition.leader_epoch)
            if manifest is not state.manifest:
                await self._write_manifest(state, manifest)

    async def read(self, partition: Any, fetch_offset: int, max_bytes: int, min_one_message: bool,
                   with_aborted: bool) -> FetchDataInfo:
        """Whole batches of the archived segment holding `fetch_offset` (one segment, like a
        local read). OffsetOutOfRangeError when the archive does not hold it."""
        manifest = await self._loaded(partition)
        state = self._state(partition)
        segment = manifest.segment_for(fetch_offset)
        if segment is None:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is out of range for {partition.topic_partition}: the archive holds "
                f"[{manifest.log_start_offset}, {manifest.highest_offset}], the local log starts at "
                f"{partition.log.log_start_offset}")
        try:
            return await self._read_segment(partition, state, manifest, segment, fetch_offset, max_bytes,
                                            min_one_message, with_aborted)
        except OSError as exc:
            raise KafkaStorageError(f"{partition.topic_partition}: reading the archive failed: {exc}") from exc

    async def _read_segment(self, partition: Any, state: _PartitionState, manifest: Manifest, segment: RemoteSegment,
                            fetch_offset: int, max_bytes: int, min_one_message: bool,
                            with_aborted: bool) -> FetchDataInfo:
        index = await self._index(state, segment, INDEX)
        fd = await self._fd(state, segment) if self.store.supports_file_ranges else None
        read_range = self._range_reader(state, segment, fd)
        found = await trio.to_thread.run_sync(read_batches, index, read_range, segment.size, segment.end_offset,
                                              fetch_offset, max_bytes, min_one_message, limiter=self._limiter)
        info = FetchDataInfo(fetch_offset, aborted_transactions=[] if with_aborted else None)
        if found is None or found.size == 0:
            info.first_entry_incomplete = found is not None and found.first_entry_incomplete
            return info
        if fd is not None:
            info.records.append(FileRecords(fd, found.position, found.size))
        else:
            data = found.data
            if data is None:
                data = await trio.to_thread.run_sync(self.store.fetch_log_segment, state.path, segment,
                                                     found.position, found.size, limiter=self._limiter)
            info.records.append(RecordBytes(data))
        if with_aborted:
            info.aborted_transactions = await self._aborted_transactions(partition, state, manifest, segment,
                                                                         fetch_offset, found.next_offset)
        return info

    def _range_reader(self, state: _PartitionState, segment: RemoteSegment, fd: int | None):
        if fd is not None:
            return lambda position, size: pread_upto(fd, size, position)
        return lambda position, size: self.store.fetch_log_segment(state.path, segment, position, size)

    async def _aborted_transactions(self, partition: Any, state: _PartitionState, manifest: Manifest,
                                    segment: RemoteSegment, start: int, upper: int) -> list[AbortedTransaction]:
        """Kafka's collectAbortedTransactions over the archive: the archived transaction indexes
        from the segment read on, until an entry's last stable offset reaches the bound; then the
        local log's (transactions whose marker lies past the archive)."""
        out: list[AbortedTransaction] = []
        for seg in manifest.segments_from(segment):
            if not seg.txn_index_size:
                continue
            for txn in parse_aborted_txns(await self._index(state, seg, TXN_INDEX), seg.name):
                if txn.last_offset >= start and txn.first_offset < upper:
                    out.append(AbortedTransaction(txn.producer_id, txn.first_offset))
                if txn.last_stable_offset >= upper:
                    return out
        seen = set(out)
        out.extend(t for t in partition.log.collect_aborted_transactions(start, upper) if t not in seen)
        return out

    async def find_offset_by_timestamp(self, partition: Any, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first archived record at or after `timestamp`, or None."""
        manifest = await self._loaded(partition)
        state = self._state(partition)
        for segment in manifest.segments:
            if segment.max_timestamp >= timestamp and segment.end_offset >= manifest.log_start_offset:
                found = await self._find_in(state, segment, timestamp, manifest.log_start_offset)
                if found is not None:
                    return found
        return None

    async def max_timestamp_and_offset(self, partition: Any) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP (-3) over the archive: (offset, timestamp) of the first record
        with the largest archived timestamp."""
        manifest = await self._loaded(partition)
        live = [s for s in manifest.segments if s.end_offset >= manifest.log_start_offset and s.max_timestamp >= 0]
        if not live:
            return None
        best = max(live, key=lambda s: s.max_timestamp)  # the first of equals: max keeps the first
        return await self._find_in(self._state(partition), best, best.max_timestamp, manifest.log_start_offset)

    async def _find_in(self, state: _PartitionState, segment: RemoteSegment, timestamp: int,
                       starting_offset: int) -> tuple[int, int] | None:
        offsets = await self._index(state, segment, INDEX)
        times = await self._index(state, segment, TIME_INDEX)
        fd = await self._fd(state, segment) if self.store.supports_file_ranges else None
        return await trio.to_thread.run_sync(find_offset_by_timestamp, offsets, times,
                                             self._range_reader(state, segment, fd), segment.size, timestamp,
                                             starting_offset, limiter=self._limiter)

    # --- caches: archived indexes, open archived segment files ------------------------------------

    async def _index(self, state: _PartitionState, segment: RemoteSegment, suffix: str) -> Any:
        key = (segment.segment_id, suffix)
        cached = self._indexes.get(key)
        if cached is not None:
            self._indexes.move_to_end(key)
            return cached[0]
        data = await trio.to_thread.run_sync(self.store.fetch_index, state.path, segment, suffix,
                                             limiter=self._limiter)
        value: Any = data
        if suffix == INDEX:
            value = OffsetIndex.from_bytes(data, segment.base_offset)
        elif suffix == TIME_INDEX:
            value = TimeIndex.from_bytes(data, segment.base_offset)
        self._indexes[key] = (value, len(data))
        self._index_bytes += len(data)
        while self._index_bytes > _INDEX_CACHE_BYTES and len(self._indexes) > 1:
            _key, (_value, size) = self._indexes.popitem(last=False)
            self._index_bytes -= size
        return value

    async def _fd(self, state: _PartitionState, segment: RemoteSegment) -> int:
        fd = self._fds.get(segment.segment_id)
        if fd is not None:
            self._fds.move_to_end(segment.segment_id)
            return fd
        fd = await trio.to_thread.run_sync(self.store.open_log_segment, state.path, segment, limiter=self._limiter)
        existing = self._fds.get(segment.segment_id)
        if existing is not None:  # opened by another read meanwhile; ours was never handed out
            os.close(fd)
            return existing
        self._fds[segment.segment_id] = fd
        while len(self._fds) > _MAX_OPEN_SEGMENTS:
            _id, old = self._fds.popitem(last=False)
            self._closing.append((self.now_ms() + _CLOSE_DELAY_MS, old))
        return fd

    def _forget(self, segment: RemoteSegment) -> None:
        for suffix in (INDEX, TIME_INDEX, TXN_INDEX):
            entry = self._indexes.pop((segment.segment_id, suffix), None)
            if entry is not None:
                self._index_bytes -= entry[1]
        fd = self._fds.pop(segment.segment_id, None)
        if fd is not None:
            self._closing.append((self.now_ms() + _CLOSE_DELAY_MS, fd))

    def _close_due_fds(self, now: int, force: bool = False) -> None:
        due = [fd for at, fd in self._closing if force or at <= now]
        self._closing = [(at, fd) for at, fd in self._closing if not (force or at <= now)]
        for fd in due:
            os.close(fd)

    def close(self) -> None:
        """At shutdown: every archived file closed, the store's connections released."""
        self._closing.extend((0, fd) for fd in self._fds.values())
        self._fds.clear()
        self._close_due_fds(0, force=True)
        self.store.close()

    def statistics(self) -> dict[str, int]:
        return {"partitions": len(self._states), "open_archived_segments": len(self._fds),
                "cached_index_bytes": self._index_bytes}
