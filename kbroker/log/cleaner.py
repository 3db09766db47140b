"""Log compaction: Kafka's LogCleaner (the Cleaner and the LogCleanerManager's choice of what to
clean), run synchronously when LogManager.clean_compacted_logs is called.

Owns: which part of a compacted log is cleanable and how dirty it is (`LogToClean`), the map from
key to the latest offset of that key in the dirty part (`OffsetMap`), and the rewrite of the
segments below the first uncleanable offset keeping, per key, only the latest record
(`Cleaner`), with Kafka's rules for tombstones (KIP-534 delete horizon), null keys, control and
transactional batches and idempotent producer state. Swapping a cleaned segment in is
`Log.replace_segments`; the `cleaner-offset-checkpoint` file is LogManager's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from kbroker.log.config import LONG_MAX
from kbroker.log.log import Log
from kbroker.log.segment import CLEANED_SUFFIX, LogSegment, index_file_name, log_file_name, time_index_file_name
from kbroker.log.txn_index import txn_index_file_name
from kbroker.wire.records import (
    TIMESTAMP_LOG_APPEND_TIME,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
)

__all__ = ["Cleaner", "CleanerStats", "LogToClean", "OffsetMap", "group_segments_by_size", "log_segments",
           "logs_to_clean"]

_INT32_MAX = 2**31 - 1


class OffsetMap:
    """Key -> the highest offset of that key in the dirty part of the log.

    Kafka's SkimpyOffsetMap stores MD5 hashes in a fixed buffer and stops the pass when it fills;
    a dict of keys is exact and cleaning covers the whole dirty part in one pass."""

    def __init__(self) -> None:
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self._offsets.get(key, -1)

    def __len__(self) -> int:
        return len(self._offsets)


def log_segments(log: Log, start: int, end: int) -> list[LogSegment]:
    """Kafka's `logSegments(from, to)`: from the segment holding `start` to the last one whose
    base offset is below `end`."""
    out = []
    segments = log.segments
    for i, seg in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else LONG_MAX
        if nxt > start and seg.base_offset < end:
            out.append(seg)
    return out


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log with its clean part [log start, first_dirty_offset) and its cleanable dirty
    part [first_dirty_offset, first_uncleanable_offset); Kafka's LogToClean."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @classmethod
    def of(cls, log: Log, last_clean_offset: int | None, now_ms: int) -> LogToClean:
        """Kafka's cleanableOffsets: the dirty part starts at the checkpoint (the log start when
        there is none or it is out of range) and stops before the active segment, the last stable
        offset, and the first segment younger than min.compaction.lag.ms."""
        start = log.log_start_offset
        first_dirty = start if last_clean_offset is None else last_clean_offset
        if first_dirty < start or first_dirty > log.log_end_offset:
            first_dirty = start
        bound = min(log.last_stable_offset, log.active_segment.base_offset)
        lag = max(log.config.min_compaction_lag_ms, 0)
        if lag > 0:
            for seg in log_segments(log, first_dirty, log.active_segment.base_offset):
                if seg.largest_timestamp > now_ms - lag:
                    bound = min(bound, seg.base_offset)
                    break
        first_uncleanable = max(first_dirty, bound)
        clean_bytes = sum(s.size for s in log_segments(log, -1, first_dirty))
        cleanable_bytes = (
            sum(s.size for s in log_segments(log, first_dirty, first_uncleanable))
            if first_uncleanable > first_dirty else 0
        )
        return cls(log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes)


@dataclass(slots=True)
class CleanerStats:
    segments_cleaned: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    # The earliest delete horizon of a batch still holding tombstones: when it passes, the log is
    # worth cleaning again even if it is not dirty (Kafka's latestDeleteHorizon).
    next_delete_horizon_ms: int | None = None

    def _horizon(self, ms: int) -> None:
        if self.next_delete_horizon_ms is None or ms < self.next_delete_horizon_ms:
            self.next_delete_horizon_ms = ms


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments are cleaned into one while the sum of
    their sizes fits segment.bytes, their indexes fit segment.index.bytes and their offsets stay
    storable relative to the group's base offset."""
    groups: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.entries * segments[i].offset_index.ENTRY_SIZE
        time_size = segments[i].time_index.entries * segments[i].time_index.ENTRY_SIZE
        i += 1
        while i < n:
            seg = segments[i]
            last_offset = (segments[i + 1].base_offset if i + 1 < n else first_uncleanable_offset) - 1
            if not (
                log_size + seg.size <= max_size
                and index_size + seg.offset_index.entries * seg.offset_index.ENTRY_SIZE <= max_index_size
                and time_size + seg.time_index.entries * seg.time_index.ENTRY_SIZE <= max_index_size
                and (seg.size == 0 or last_offset - group[0].base_offset <= _INT32_MAX)
            ):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.entries * seg.offset_index.ENTRY_SIZE
            time_size += seg.time_index.entries * seg.time_index.ENTRY_SIZE
            i += 1
        groups.append(group)
    return groups


class Cleaner:
    """Cleans one log at a time (Kafka's Cleaner.doClean)."""

    def clean(self, to_clean: LogToClean, now_ms: int) -> tuple[int, CleanerStats]:
        """Clean every non-active segment below `first_uncleanable_offset` against the offset map
        of the dirty part. Returns the new clean offset (the checkpoint) and statistics."""
        log = to_clean.log
        cfg = log.config
        end = to_clean.first_uncleanable_offset
        stats = CleanerStats()
        offset_map = self.build_offset_map(log, to_clean.first_dirty_offset, end)
        # A producer's last batch keeps its sequence and epoch: losing it would make the producer's
        # next append look out of sequence after a reload (Kafka's lastRecordsOfActiveProducers).
        active_producers = {
            pid: e.last_data_offset for pid, e in log.producer_state.producers.items() if e.last_data_offset >= 0
        }
        segments = [s for s in log.segments[:-1] if s.base_offset < end]
        for group in group_segments_by_size(segments, cfg.segment_bytes, cfg.segment_index_bytes, end):
            self._clean_segments(log, group, offset_map, end, now_ms, active_producers, stats)
        return end, stats

    @staticmethod
    def build_offset_map(log: Log, start: int, end: int) -> OffsetMap:
        """Keys of the data records in [start, end). Control and transactional batches are left
        out (transactions are not served yet: they are kept as they are, and must not shadow older
        values of their keys)."""
        offset_map = OffsetMap()
        for seg, pos, h in log.batches_from(start):
            if h.base_offset >= end:
                break
            if h.is_control or h.is_transactional or h.records_count == 0:
                continue
            for rec in decode_records(seg.read_batch(pos, h), 0, h):
                if start <= rec.offset < end and rec.key is not None:
                    offset_map.put(rec.key, rec.offset)
        return offset_map

    def _clean_segments(self, log: Log, group: list[LogSegment], offset_map: OffsetMap, end: int, now_ms: int,
                        active_producers: dict[int, int], stats: CleanerStats) -> None:
        cfg = log.config
        base = group[0].base_offset
        for name in (log_file_name(base), index_file_name(base), time_index_file_name(base), txn_index_file_name(base)):
            (log.dir / (name + CLEANED_SUFFIX)).unlink(missing_ok=True)  # a clean that failed earlier
        dest = LogSegment.open(log.dir, base, index_interval_bytes=cfg.index_interval_bytes,
                               max_index_size=cfg.segment_index_bytes, now_ms=now_ms, file_suffix=CLEANED_SUFFIX)
        try:
            for seg in group:
                for pos, h in seg.iter_batches():
                    raw = seg.read_batch(pos, h)
                    stats.bytes_read += len(raw)
                    out = self._filter_batch(raw, h, offset_map, end, now_ms, cfg.delete_retention_ms,
                                             active_producers, stats)
                    if out is not None:
                        data, max_ts = out
                        dest.append(h.last_offset, max_ts, h.last_offset, data)
                        stats.bytes_written += len(data)
            dest.time_index.maybe_append(dest.max_timestamp_so_far, dest.offset_of_max_timestamp_so_far,
                                         skip_full_check=True)
            # Transactional and control batches are kept whole, so every aborted transaction stays.
            dest.txn_index.replace_with([t for seg in group for t in seg.txn_index.all_aborted_txns()])
            dest.flush()
            dest.on_become_inactive()
            # Kafka keeps the last modified time of the original files (retention falls back to it).
            mtime = group[-1].last_modified_ms
            os.utime(dest.log_path, ns=(mtime * 1_000_000, mtime * 1_000_000))
        except BaseException:
            dest.delete()
            raise
        log.replace_segments(dest, group)
        stats.segments_cleaned += len(group)

    @staticmethod
    def _filter_batch(raw: bytes, h: BatchHeader, offset_map: OffsetMap, end: int, now_ms: int,
                      delete_retention_ms: int, active_producers: dict[int, int],
                      stats: CleanerStats) -> tuple[bytes, int] | None:
        """Kafka's MemoryRecords.filterTo for one batch: (bytes to keep, their max timestamp) or
        None when the batch goes. Retained records keep their offsets; a rebuilt batch keeps the
        base offset, last offset delta, producer fields, attributes and codec of the original."""
        if h.is_control or h.is_transactional or h.base_offset >= end:
            return raw, h.max_timestamp
        records = decode_records(raw, 0, h)
        stats.records_read += len(records)
        horizon = h.delete_horizon_ms
        retained: list[Record] = []
        tombstones = False
        for rec in records:
            if rec.offset >= end:
                keep = True
            elif rec.key is None:
                keep = False  # Kafka refuses null keys on compacted topics; the cleaner drops them
            elif offset_map.get(rec.key) > rec.offset:
                keep = False
            elif rec.value is None:
                keep = horizon is None or now_ms < horizon
            else:
                keep = True
            if keep:
                retained.append(rec)
                tombstones = tombstones or rec.value is None
        stats.records_retained += len(retained)
        log_append_time = h.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
        if retained:
            # KIP-534: the first clean that sees a tombstone stamps the batch with the time after
            # which a later clean may drop it.
            need_horizon = tombstones and horizon is None
            if need_horizon:
                horizon = min(now_ms + delete_retention_ms, LONG_MAX)
            if tombstones:
                stats._horizon(horizon)
            if len(retained) == len(records) and not need_horizon:
                return raw, h.max_timestamp
            data = build_batch(
                retained, base_offset=h.base_offset, compression=h.compression, producer_id=h.producer_id,
                producer_epoch=h.producer_epoch, base_sequence=h.base_sequence, is_transactional=h.is_transactional,
                is_control=h.is_control, partition_leader_epoch=h.partition_leader_epoch,
                timestamp_type=h.timestamp_type, last_offset_delta=h.last_offset_delta,
                max_timestamp=h.max_timestamp if log_append_time else None, delete_horizon_ms=horizon,
            )
            return data, (h.max_timestamp if log_append_time else max(r.timestamp for r in retained))
        if h.producer_id >= 0 and active_producers.get(h.producer_id) == h.last_offset:
            if not records:
                return raw, h.max_timestamp
            data = build_batch(
                (), base_offset=h.base_offset, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence, is_transactional=h.is_transactional,
                partition_leader_epoch=h.partition_leader_epoch, timestamp_type=h.timestamp_type,
                last_offset_delta=h.last_offset_delta, max_timestamp=h.max_timestamp,
            )
            return data, h.max_timestamp
        return None


def logs_to_clean(candidates: Iterable[tuple[LogToClean, int | None]], now_ms: int) -> list[LogToClean]:
    """Kafka's choice, filthiest first: logs whose cleanable ratio reaches min.cleanable.dirty.ratio,
    then logs holding a tombstone whose delete horizon (the second item) has passed."""
    dirty, due = [], []
    for ltc, horizon in candidates:
        if ltc.cleanable_bytes > 0 and ltc.cleanable_ratio >= ltc.log.config.min_cleanable_dirty_ratio:
            dirty.append(ltc)
        elif horizon is not None and horizon <= now_ms:
            due.append(ltc)
    dirty.sort(key=lambda ltc: ltc.cleanable_ratio, reverse=True)
    return dirty + due
