"""Log: one partition's log (Kafka's UnifiedLog + LocalLog + LogLoader, without replication policy).

Owns the segments of a `topic-partition` directory, offsets (log start, log end, high watermark,
recovery point, last stable offset), producer state, the leader epoch cache, loading/recovery,
appends, reads, retention and truncation. Loading and recovery live in log_load.py, the log start, retention and truncation
in log_retention.py (mixins),
transaction index work in log_txn.py.
Synchronous and not thread-safe: the caller serialises calls per log.
"""

from __future__ import annotations

import logging
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kbroker.errors import (
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kbroker.log._files import as_path
from kbroker.log.checkpoint import fsync_dir
from kbroker.log.config import LogConfig
from kbroker.log.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from kbroker.log.log_load import LogLoading, wall_clock_ms
from kbroker.log.log_retention import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogRetention
from kbroker.log.log_txn import (
    AbortedTransaction,
    collect_aborted_transactions,
    complete_txns,
    marker_of,
)
from kbroker.log.producer_state import (
    ActiveProducer,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
)
from kbroker.log.record_validation import validate_records
from kbroker.log.records_view import FetchDataInfo
from kbroker.log.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import (
    LOG_OVERHEAD,
    BatchHeader,
    decode_records,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

__all__ = ["Log", "LogAppendInfo", "DEFAULT_PRODUCER_ID_EXPIRATION_MS", "FUTURE_DIR_SUFFIX", "wall_clock_ms"]

FUTURE_DIR_SUFFIX = "-future"  # Kafka's: a replica's copy being made in another log dir

_logger = logging.getLogger(__name__)



@dataclass(slots=True)
class LogAppendInfo:
    """Result of an append. For a duplicate (an idempotent retry of one of the producer's last 5
    batches) nothing is written, `duplicate` is set and the offsets are the original batch's;
    `log_append_time_ms` is then that batch's timestamp, as Kafka answers it."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    num_messages: int
    valid_bytes: int = 0
    duplicate: bool = False


@dataclass(slots=True)
class FlushPlan:
    """A flush prepared on the owning thread and run anywhere: fsync `fds`, then `dir`."""

    target: int
    fds: list[int]
    dir: Path | None

    def run(self) -> None:
        for fd in self.fds:
            os.fsync(fd)
        if self.dir is not None:
            fsync_dir(self.dir)


class Log(LogLoading, LogRetention):
    def __init__(self, dir: Path, config: LogConfig, now_ms: Callable[[], int], *, cleaned: bool = False) -> None:
        self.dir = as_path(dir)
        self.topic_partition: TopicPartition | None = _partition_of_dir(self.dir.name)
        self.config = config
        self._now_ms = now_ms
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []  # segment base offsets, for bisect
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        # tiered storage: the last offset the archive holds (-1: none); only local retention reads it
        self.highest_offset_in_remote_storage = -1
        self.last_flush_ms = now_ms()
        self.producer_state = ProducerStateManager(self.dir)
        self.leader_epoch_cache = LeaderEpochCache(self.dir / LEADER_EPOCH_CHECKPOINT)  # loaded by _load
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._dir_dirty = False
        self.closed = False
        # Compaction leaves offset gaps; recovery must then not read a gap as damage.
        self.cleaned = cleaned
        self.recovered_segments = 0  # segments checked batch by batch when the log was opened
        # told of every truncation (the offset truncated to; None when the log restarted empty):
        # a copy of this log being made elsewhere (a move between log dirs) must follow it
        self.truncation_listener: Callable[[int | None], None] | None = None

    def batches_from(self, offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """(segment, position, header) of every batch whose last offset >= `offset`, in order."""
        return self._batches_from(offset)

    def _batches_from(self, offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """Headers of every batch whose last offset >= `offset`, across segments."""
        i = max(bisect_right(self._bases, offset) - 1, 0)
        for seg in self.segments[i:]:
            start = 0
            if offset > seg.base_offset:
                m = seg.translate_offset(offset)
                if m is None:
                    continue
                start = m.position
            for pos, h in seg.iter_batches(start):
                yield seg, pos, h

    # --- properties -------------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction that is open, or whose marker the high
        watermark has not passed yet (never below the log start); None without one."""
        unstable = self.producer_state.first_unstable_offset()
        return None if unstable is None else max(unstable, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first unstable offset when it lies below the high watermark, else the
        high watermark. read_committed consumers read up to it."""
        unstable = self.first_unstable_offset
        hw = self.high_watermark
        return unstable if unstable is not None and unstable < hw else hw

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTransaction]:
        """(producer id, first offset) of the aborted transactions overlapping [start_offset,
        upper_bound_offset): what a read_committed Fetch sends with the records it returns."""
        return collect_aborted_transactions(self.segments, self._bases, start_offset, upper_bound_offset)

    def active_producers(self) -> list[ActiveProducer]:
        """The producers this log's state holds, copied (DescribeProducers)."""
        return self.producer_state.active_producers()

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]; returns it.
        Completed transactions whose marker is now below it stop holding the LSO back."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        return self.high_watermark

    # --- appends ----------------------------------------------------------------------------------

    def append_as_leader(
        self,
        buf: bytearray,
        batches: Sequence[tuple[int, BatchHeader]],
        *,
        leader_epoch: int,
        now_ms: int | None = None,
        from_client: bool = True,
    ) -> LogAppendInfo:
        """Append client batches already checked by `validate_batches` (they fill `buf` exactly).

        Kafka's rules: a batch above max.message.bytes is MESSAGE_TOO_LARGE, a request above
        segment.bytes RECORD_LIST_TOO_LARGE; producer epoch/sequence validation; a duplicate
        returns the original offsets without writing. A coordinator's append (`from_client`
        False: transaction markers, transactional offset commits) has its producer epoch checked
        but no sequence, so no duplicate detection either (Kafka's AppendOrigin.COORDINATOR). A client's
        records are checked one by one only when the config asks (record_validation.py). Offsets (from log_end_offset), leader
        epoch and LogAppendTime are patched into `buf` in place; then one write.
        """
        if not batches:
            raise ValueError("append needs at least one batch")
        cfg = self.config
        now = self._now_ms() if now_ms is None else now_ms
        total = self._check_sizes(buf, batches)
        if from_client and cfg.validates_records:  # compacted, or a timestamp bound: open the records
            validate_records(buf, batches, cfg, now, self.topic_partition)
        log_append_time = cfg.log_append_time
        psm = self.producer_state
        updates: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        offset = self.log_end_offset
        first_offset = offset
        max_ts = -1
        offset_of_max_ts = -1
        num_messages = 0
        for _pos, h in batches:
            last = offset + h.last_offset_delta
            ts = now if log_append_time else h.max_timestamp
            pid = h.producer_id
            if pid >= 0:
                entry = psm.last_entry(pid)
                if entry is not None and not h.is_control and from_client:
                    dup = entry.find_duplicate_batch(h)
                    if dup is not None:
                        return LogAppendInfo(
                            dup.first_offset, dup.last_offset, h.max_timestamp, dup.last_offset, dup.timestamp,
                            self.log_start_offset, 0, 0, duplicate=True,
                        )
                info = updates.get(pid)
                if info is None:
                    info = updates[pid] = psm.prepare_update(pid, validate=True, check_sequence=from_client)
                if h.is_control:
                    marker = marker_of(buf, _pos, h)
                    if marker is not None:
                        txn = info.append_end_txn_marker(marker, h.producer_epoch, offset, ts)
                        if txn is not None:
                            completed.append(txn)
                else:
                    info.append_data_batch(
                        h.producer_epoch, h.base_sequence, h.last_sequence, ts, offset, last, h.is_transactional
                    )
            if ts > max_ts:
                max_ts = ts
                offset_of_max_ts = first_offset if log_append_time else last
            num_messages += h.last_offset_delta + 1
            offset = last + 1
        last_offset = offset - 1

        # Patch in place: base offsets and leader epoch are outside the CRC, LogAppendTime is not.
        offset = first_offset
        for pos, h in batches:
            set_base_offset(buf, pos, offset)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            if log_append_time:
                set_log_append_time(buf, pos, now)
            offset += h.last_offset_delta + 1

        latest_epoch = self.leader_epoch_cache.latest_epoch
        if leader_epoch >= 0 and (latest_epoch is None or leader_epoch > latest_epoch):
            # Before the data, as Kafka: the checkpoint never lacks an epoch the log holds.
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        self._write(buf, total, first_offset, last_offset, max_ts, offset_of_max_ts, now)
        self._update_producers(updates, completed)
        self._maybe_flush()
        return LogAppendInfo(
            first_offset, last_offset, max_ts, offset_of_max_ts, now if log_append_time else -1,
            self.log_start_offset, num_messages, total,
        )

    def append_as_follower(self, buf: bytes | bytearray | memoryview, batches: Sequence[tuple[int, BatchHeader]]) -> LogAppendInfo:
        """Append batches that already carry their offsets (replication): offsets only grow, from
        log_end_offset on; gaps are allowed (a compacted leader log has them). Producer state is
        updated without validation."""
        if not batches:
            raise ValueError("append needs at least one batch")
        total = self._check_sizes(buf, batches, check_message_size=False)
        expected = self.log_end_offset
        max_ts = -1
        offset_of_max_ts = -1
        num_messages = 0
        psm = self.producer_state
        updates: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        first_offset = batches[0][1].base_offset
        for pos, h in batches:
            if h.base_offset < expected:
                raise ValueError(f"follower append at offset {h.base_offset}, below {expected}")
            if h.producer_id >= 0:
                info = updates.get(h.producer_id)
                if info is None:
                    info = updates[h.producer_id] = psm.prepare_update(h.producer_id, validate=False)
                txn = info.append_batch(h, marker=marker_of(buf, pos, h) if h.is_control else None)
                if txn is not None:
                    completed.append(txn)
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
                offset_of_max_ts = h.base_offset + h.last_offset_delta
            num_messages += h.last_offset_delta + 1
            expected = h.base_offset + h.last_offset_delta + 1
        last_offset = expected - 1
        now = self._now_ms()
        cache = self.leader_epoch_cache
        for _pos, h in batches:  # the epochs the leader stamped, in memory; the file is written by the
            if h.partition_leader_epoch >= 0:  # server's epoch writer or the log's flush (recovery re-reads them from the batches)
                cache.assign(h.partition_leader_epoch, h.base_offset, sync=False, write=False)
        self._write(buf, total, first_offset, last_offset, max_ts, offset_of_max_ts, now)
        self._update_producers(updates, completed)
        self._maybe_flush()
        return LogAppendInfo(first_offset, last_offset, max_ts, offset_of_max_ts, -1, self.log_start_offset,
                             num_messages, total)

    def _update_producers(self, updates: dict[int, ProducerAppendInfo], completed: list[CompletedTxn]) -> None:
        """After the write, as Kafka: producer entries, then the completed transactions (aborts
        indexed in the segment the batches went to)."""
        psm = self.producer_state
        for info in updates.values():
            psm.update(info)
        if completed and complete_txns(psm, self.segments[-1], completed):
            self._dir_dirty = True
        psm.update_map_end_offset(self.log_end_offset)

    def _check_sizes(self, buf, batches: Sequence[tuple[int, BatchHeader]], check_message_size: bool = True) -> int:
        last_pos, last_h = batches[-1]
        total = last_pos + last_h.batch_length + LOG_OVERHEAD
        if total != len(buf) or batches[0][0] != 0:
            raise ValueError("the batches must fill the buffer exactly")
        if check_message_size:
            limit = self.config.max_message_bytes
            for _pos, h in batches:
                size = h.batch_length + LOG_OVERHEAD
                if size > limit:
                    raise MessageTooLargeError(
                        f"the record batch size in the append to {self.topic_partition} is {size} bytes which "
                        f"exceeds the maximum configured value of {limit}"
                    )
        if total > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"message batch size is {total} bytes in append to partition {self.topic_partition}, which "
                f"exceeds the maximum configured segment size of {self.config.segment_bytes}"
            )
        return total

    def _write(self, buf, total: int, first_offset: int, last_offset: int, max_ts: int, offset_of_max_ts: int,
               now: int) -> None:
        cfg = self.config
        seg = self.segments[-1]
        if seg.should_roll(
            max_segment_ms=cfg.segment_ms,
            max_segment_bytes=cfg.segment_bytes,
            max_timestamp_in_messages=max_ts,
            max_offset_in_messages=last_offset,
            messages_size=total,
            now_ms=now,
        ):
            seg = self.roll(first_offset)
        seg.append(last_offset, max_ts, offset_of_max_ts, buf)
        self.log_end_offset = last_offset + 1

    def _maybe_flush(self) -> None:
        if self.unflushed_messages >= self.config.flush_interval_messages:
            self.flush()

    # --- segments ---------------------------------------------------------------------------------

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log_end_offset) and snapshot
        the producer state at its base offset. The old segment is flushed later (flush_dirty_logs),
        as Kafka schedules that flush rather than doing it in the append path."""
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments[-1]
        if active.base_offset == new_offset and active.size == 0:
            active.created_ms = self._now_ms()  # Kafka recreates the empty segment: same effect
        else:
            if active.base_offset >= new_offset:
                raise KafkaStorageError(f"cannot roll {self.dir} to offset {new_offset} below {active.base_offset}")
            active.on_become_inactive()
            self._add_empty_segment(new_offset)
        self.producer_state.update_map_end_offset(new_offset)
        self.producer_state.take_snapshot(sync=False)
        return self.segments[-1]

    def _schedule_delete(self, segments: list[LogSegment]) -> None:
        """Kafka's async delete: rename to `.deleted` now, close and unlink after file.delete.delay.ms
        so in-flight reads of the fds (sendfile) finish."""
        deadline = self._now_ms() + self.config.file_delete_delay_ms
        for seg in segments:
            if self.config.file_delete_delay_ms <= 0:
                seg.delete()
            else:
                seg.rename_to_deleted()
                self._pending_deletes.append((deadline, seg))

    def delete_pending_segments(self, now_ms: int | None = None, *, force: bool = False) -> int:
        now = self._now_ms() if now_ms is None else now_ms
        due = [s for d, s in self._pending_deletes if force or d <= now]
        self._pending_deletes = [(d, s) for d, s in self._pending_deletes if not (force or d <= now)]
        for seg in due:
            seg.delete()
        return len(due)

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Kafka's replaceSegments for the log cleaner: `new` (written and fsynced under the
        `.cleaned` suffix, holding the surviving batches of the consecutive segments `old`) takes
        their place. Steps, each recoverable at load: `.cleaned` -> `.swap`; the old segments are
        renamed `.deleted` (their fds stay open for file.delete.delay.ms, so in-flight reads
        finish); `.swap` -> live name."""
        i = self.segments.index(old[0])
        if self.segments[i : i + len(old)] != old or new.base_offset != old[0].base_offset:
            raise ValueError("replaced segments must be consecutive and start at the new segment's base offset")
        if self.segments[i + len(old) - 1] is self.segments[-1]:
            raise ValueError("the active segment is never replaced")
        self.cleaned = True
        new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.dir)
        self.segments[i : i + len(old)] = [new]
        self._bases[i : i + len(old)] = [new.base_offset]
        self._schedule_delete(old)
        new.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_dir(self.dir)

    def _remove_segments_from(self, index: int) -> list[LogSegment]:
        removed = self.segments[index:]
        del self.segments[index:]
        del self._bases[index:]
        return removed

    # --- reads ------------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        include_aborted_txns: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one containing `start_offset`, stopping before the batch that
        holds `max_offset` (exclusive bound such as the high watermark, which sits on a batch
        boundary; default the log end), within `max_bytes` unless `min_one_message` lets a larger
        first batch through (KIP-74). Reads one segment, as Kafka does. With
        `include_aborted_txns` (read_committed) the result carries the aborted transactions
        overlapping the batches read (an empty list when none were).
        OffsetOutOfRangeError outside [log_start_offset, log_end_offset]."""
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is out of range for {self.topic_partition}: "
                f"[{self.log_start_offset}, {self.log_end_offset}]"
            )
        nothing = FetchDataInfo(start_offset, aborted_transactions=[] if include_aborted_txns else None)
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if start_offset >= limit:
            return nothing
        i = max(bisect_right(self._bases, start_offset) - 1, 0)
        n = len(self.segments)
        while i < n:
            seg = self.segments[i]
            if i + 1 < n and self._bases[i + 1] <= limit:
                max_pos = seg.size
            else:
                m = seg.translate_offset(limit)
                max_pos = seg.size if m is None else m.position
            info = seg.read(start_offset, max_bytes, max_pos, min_one_message)
            if info is not None:
                if include_aborted_txns:
                    info.aborted_transactions = self._aborted_transactions_of_read(start_offset, i, info)
                return info
            i += 1
        return nothing

    def _aborted_transactions_of_read(self, start_offset: int, i: int, info: FetchDataInfo) -> list[AbortedTransaction]:
        """Kafka's addAbortedTransactions for what segment `i` returned: from that segment on, up to
        the offset after the last batch read (the next batch's base, else the next segment's, else
        the log end). Kafka bounds by an offset index entry past the read, which may be further."""
        if not info.records:
            return []
        last = info.records[-1]
        upper_bound = self.segments[i].base_offset_at(last.position + last.size)
        if upper_bound is None:
            upper_bound = self._bases[i + 1] if i + 1 < len(self.segments) else self.log_end_offset
        return collect_aborted_transactions(self.segments[i:], self._bases[i:], start_offset, upper_bound)

    # --- timestamps -------------------------------------------------------------------------------

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `target_timestamp` (ListOffsets),
        from log_start_offset; None when none is. Bounding by the high watermark is the caller's."""
        for seg in self.segments:
            if seg.largest_timestamp >= target_timestamp:
                found = seg.find_offset_by_timestamp(target_timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP (-3): (offset, timestamp) of the first record carrying the
        largest timestamp in the log, or None for an empty log."""
        best = max(self.segments, key=lambda s: s.max_timestamp_so_far)
        ts = best.max_timestamp_so_far
        if ts < 0:
            return None
        start = best.offset_index.lookup(best.offset_of_max_timestamp_so_far).position
        for pos, h in best.iter_batches(start):
            if h.max_timestamp == ts:
                for rec in decode_records(best.read_batch(pos, h), 0, h):
                    if rec.timestamp == ts:
                        return rec.offset, ts
        return None

    # --- leader epochs ----------------------------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (Kafka's UnifiedLog.endOffsetForEpoch): (the largest epoch <=
        `epoch`, the offset where it ended), the log end for the latest epoch; (-1, -1) when
        unknown (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # --- durability / lifecycle -------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding offsets in [recovery_point, offset) (default: everything)
        and advance the recovery point to `offset`."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if target > self.recovery_point or offset is None:
            for seg in self._segments_to_flush(target):
                seg.flush()
            if self._dir_dirty:
                fsync_dir(self.dir)
                self._dir_dirty = False
            if target > self.recovery_point:
                self.recovery_point = target
        self.leader_epoch_cache.sync()
        self.last_flush_ms = self._now_ms()

    def _segments_to_flush(self, target: int) -> list[LogSegment]:
        i = max(bisect_right(self._bases, self.recovery_point) - 1, 0)
        chosen = []
        for seg in self.segments[i:]:
            if seg.base_offset >= target and seg is not self.segments[-1]:
                break
            chosen.append(seg)
        return chosen

    def prepare_flush(self) -> FlushPlan:
        """What a flush of everything appended so far must fsync, for running off the caller's
        thread (group commit); `complete_flush` then moves the recovery point. Only the data files
        are synced: indexes below the recovery point are rebuilt by recovery if they were torn."""
        target = self.log_end_offset
        fds = []
        for seg in self._segments_to_flush(target):
            fds.append(seg.fd)
            # Unlike the other indexes, a lost abort entry below the recovery point is never rebuilt.
            if seg.txn_index.fileno() is not None:
                fds.append(seg.txn_index.fileno())
        plan = FlushPlan(target, fds, self.dir if self._dir_dirty else None)
        self._dir_dirty = False
        return plan

    def complete_flush(self, plan: FlushPlan, ok: bool = True) -> None:
        if not ok:
            self._dir_dirty = self._dir_dirty or plan.dir is not None
            return
        if plan.target > self.recovery_point:
            self.recovery_point = plan.target
        self.leader_epoch_cache.sync()
        self.last_flush_ms = self._now_ms()

    def close(self) -> None:
        """Snapshot producer state at the log end and close every file (indexes get their final
        time-index entry). Does not fsync the log: call flush() first for a clean shutdown."""
        if self.closed:
            return
        self.leader_epoch_cache.write_if_changed()
        self.producer_state.update_map_end_offset(self.log_end_offset)
        self.producer_state.take_snapshot(sync=True)
        for seg in self.segments:
            seg.close()
        self.delete_pending_segments(force=True)
        self.closed = True

    def rename_dir(self, new_name: str) -> None:
        """Move the partition directory (topic deletion); open fds keep working."""
        new_dir = self.dir.with_name(new_name)
        os.replace(self.dir, new_dir)
        self.dir = new_dir
        self.producer_state.dir = new_dir
        self.leader_epoch_cache.path = new_dir / LEADER_EPOCH_CHECKPOINT
        for seg in self.segments:
            seg.move_to_dir(new_dir)
        for _d, seg in self._pending_deletes:
            seg.move_to_dir(new_dir)

    def close_handlers(self) -> None:
        """Close every file without writing anything (its log dir failed: writes may not work)."""
        for seg in self.segments + [seg for _d, seg in self._pending_deletes]:
            try:
                seg.close_handlers()
            except OSError:
                pass
        self.closed = True

    def delete(self) -> None:
        """Close and remove the whole directory."""
        for seg in self.segments:
            seg.close_handlers()
        for _d, seg in self._pending_deletes:
            seg.close_handlers()
        self._pending_deletes.clear()
        self.segments.clear()
        self._bases.clear()
        self.closed = True
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
            f"hw={self.high_watermark}, segments={len(self.segments)})"
        )



def _partition_of_dir(name: str) -> TopicPartition | None:
    """The partition a log dir holds: `topic-partition`, or a future log's suffixed name."""
    try:
        return TopicPartition.from_dir_name(name)
    except ValueError:
        pass
    try:
        return TopicPartition.from_suffixed_dir_name(name, FUTURE_DIR_SUFFIX)
    except ValueError:
        return None
