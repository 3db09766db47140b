"""Loading a partition's log from its directory (Kafka's LogLoader), mixed into `Log`: interrupted
segment swaps completed, stray files removed, segments opened in order, the tail past the
recovery point (or everything after an unclean shutdown) recovered — batches checked, a corrupt
tail truncated, indexes and .txnindex rebuilt — then the leader epoch cache and producer state
restored from their files and the batches after them.
"""

from __future__ import annotations

import logging
import os
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kbroker.errors import CorruptRecordError, KafkaStorageError
from kbroker.log._files import as_path
from kbroker.log.checkpoint import CheckpointError, fsync_dir
from kbroker.log.config import LogConfig
from kbroker.log.leader_epoch_cache import LeaderEpochCache
from kbroker.log.log_txn import rebuild_txn_indexes, with_markers
from kbroker.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from kbroker.log.txn_index import TXN_INDEX_SUFFIX, CorruptTxnIndexError
from kbroker.wire.records import BatchHeader

if TYPE_CHECKING:
    from kbroker.log.log import Log

_logger = logging.getLogger("kbroker.log.log")
_STRAY_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _txn_index_sane(seg: LogSegment) -> bool:
    try:
        seg.txn_index.sanity_check()
    except (OSError, CorruptTxnIndexError) as e:
        _logger.warning("recovering segment %s: %s", seg.log_path, e)
        return False
    return True


class LogLoading:
    """Needs the Log's fields (dir, config, segments, offsets, producer_state, leader_epoch_cache)."""


    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        now_ms: Callable[[], int] = wall_clock_ms,
        cleaned: bool = False,
    ) -> Log:
        """Load (creating if needed) the log in `dir`.

        Stray `.deleted/.cleaned/.swap/.tmp` files go; segments from the one holding
        `recovery_point` onwards are recovered (all skipped after a clean shutdown, except segments
        whose index is missing); the first invalid batch truncates its segment and deletes every
        later segment. Producer state comes from the newest snapshot plus a replay of the log; the
        leader epoch cache from `leader-epoch-checkpoint`, or from the batch headers without one.
        An interrupted cleaner swap is completed (see `_complete_swaps`). `cleaned` says the log
        may hold compacted segments (offset gaps are then valid); compacted topics imply it.
        """
        dir = as_path(dir)
        dir.mkdir(parents=True, exist_ok=True)
        log = cls(dir, config, now_ms, cleaned=cleaned)
        log._load(recovery_point, log_start_offset, had_clean_shutdown)
        hw = log.log_start_offset if high_watermark is None else high_watermark
        log.update_high_watermark(hw)
        return log

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.open(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            now_ms=self._now_ms(),
        )

    def _add_empty_segment(self, base_offset: int) -> LogSegment:
        """Open a new segment at `base_offset` and append it; refuses a file that already has data."""
        seg = self._new_segment(base_offset)
        if seg.size:
            seg.close_handlers()
            raise KafkaStorageError(f"segment file for offset {base_offset} already exists in {self.dir}")
        self.segments.append(seg)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return seg

    @property
    def allows_offset_gaps(self) -> bool:
        return self.cleaned or self.config.compact_enabled

    def _complete_swaps(self, swap_bases: list[int]) -> None:
        """Kafka's recovery of an interrupted `replace_segments`: a `.log.swap` file was fully
        written and fsynced, so it wins (unless it fails recovery). The segments it replaces are those whose base offset lies
        in [swap base, swap next offset) and those files go; the swap is renamed into place. Its
        indexes are rebuilt at load (the `.index.swap` files were deleted)."""
        for base in swap_bases:
            seg = LogSegment.open(self.dir, base, index_interval_bytes=self.config.index_interval_bytes,
                                  max_index_size=self.config.segment_index_bytes, now_ms=self._now_ms(),
                                  file_suffix=SWAP_SUFFIX)
            if seg.recover(allow_offset_gaps=True) > 0:
                # Swaps are fsynced before they get their name, so this one is damage: keep the
                # segments it would have replaced, as if the clean had never run.
                seg.delete()
                continue
            end = max(seg.read_next_offset(), base + 1)
            for p in list(self.dir.iterdir()):
                stem, _, suffix = p.name.partition(".")
                if (
                    stem.isdigit() and len(stem) == 20 and base <= int(stem) < end
                    and "." + suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
                ):
                    p.unlink(missing_ok=True)
            seg.change_file_suffixes(SWAP_SUFFIX, "")
            seg.close_handlers()
            for p in (seg.offset_index.path, seg.time_index.path, seg.txn_index.path):  # rebuilt below
                p.unlink(missing_ok=True)
        if swap_bases:
            fsync_dir(self.dir)

    def _load(self, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        bases: list[int] = []
        swap_bases: list[int] = []
        names = os.listdir(self.dir)  # one listing, kept current below (10,000 logs load at a restart)
        for name in list(names):
            if name.endswith(SWAP_SUFFIX):
                stem = name.partition(".")[0]
                if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and stem.isdigit() and len(stem) == 20:
                    swap_bases.append(int(stem))
                else:  # index swap files: rebuilt from the log
                    (self.dir / name).unlink(missing_ok=True)
                    names.remove(name)
            elif name.endswith(_STRAY_SUFFIXES):
                (self.dir / name).unlink(missing_ok=True)
                names.remove(name)
        if swap_bases:
            self.cleaned = True
            self._complete_swaps(sorted(swap_bases))
            names = os.listdir(self.dir)
        for name in names:
            stem, dot, suffix = name.partition(".")
            if stem.isdigit() and len(stem) == 20 and "." + suffix == LOG_SUFFIX:
                bases.append(int(stem))
        for name in list(names):  # indexes without their log file (Kafka deletes them too)
            stem, _, suffix = name.partition(".")
            if "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and stem.isdigit() \
                    and int(stem) not in bases:
                (self.dir / name).unlink(missing_ok=True)
                names.remove(name)
        bases.sort()
        self.producer_state.known_files(names)
        needs_recovery: list[bool] = []
        for base in bases:
            seg = self._new_segment(base)
            self.segments.append(seg)
            self._bases.append(base)
            needs_recovery.append(not seg.indexes_exist() or not _txn_index_sane(seg))
        if not clean and self.segments:
            first = max(bisect_right(self._bases, recovery_point) - 1, 0)
            for i in range(first, len(self.segments)):
                needs_recovery[i] = True
        recovered: set[int] = set()  # base offsets of segments whose transaction index needs a rebuild
        for i, seg in enumerate(self.segments):
            if not needs_recovery[i]:
                continue
            recovered.add(seg.base_offset)
            gaps = self.allows_offset_gaps
            if seg.recover(gaps) > 0 or (
                i + 1 < len(self.segments)
                and (seg.read_next_offset() > self._bases[i + 1] if gaps else seg.read_next_offset() != self._bases[i + 1])
            ):
                # Everything after the first invalid batch is unreachable: drop later segments.
                for later in self.segments[i + 1 :]:
                    later.delete()
                del self.segments[i + 1 :]
                del self._bases[i + 1 :]
                break
        if self.segments and not needs_recovery[len(self.segments) - 1]:
            # A trusted (clean or flushed) active segment must still end on a batch boundary,
            # or appends would land after garbage.
            active = self.segments[-1]
            try:
                clean_tail = active.scan_tail()[1] == active.size
            except CorruptRecordError:
                clean_tail = False
            if not clean_tail:
                active.recover(self.allows_offset_gaps)
                recovered.add(active.base_offset)
        if not self.segments:
            seg = self._new_segment(log_start_offset)
            self.segments.append(seg)
            self._bases.append(log_start_offset)
        self.log_end_offset = self.segments[-1].read_next_offset()
        self.log_start_offset = max(log_start_offset, self._bases[0])
        if self.log_start_offset > self.log_end_offset:
            # The log lost data above a DeleteRecords point: nothing below it is readable anyway.
            self.truncate_fully_and_start_at(self.log_start_offset)
        self.recovery_point = self.log_end_offset if clean else min(recovery_point, self.log_end_offset)
        self.recovered_segments = len(recovered)  # for the start-up progress lines
        rebuild_txn_indexes(self.dir, self.segments, recovered & set(self._bases), self.log_start_offset)
        self._rebuild_producer_state()
        self._load_leader_epoch_cache()

    def _load_leader_epoch_cache(self) -> None:
        path = self.leader_epoch_cache.path
        try:
            cache = LeaderEpochCache.read(path)
        except FileNotFoundError:
            cache = None
        except CheckpointError as e:
            _logger.warning("rebuilding the leader epoch cache from the log: %s", e)
            cache = None
        if cache is None:
            self.leader_epoch_cache = LeaderEpochCache(path, self._leader_epochs_from_log())
            if len(self.leader_epoch_cache) or path.exists():  # a new, empty log writes it on first assign
                self.leader_epoch_cache.flush()
            return
        # Entries are written before their data, so a crash can leave some past the recovered
        # log end; a checkpoint written lazily (Kafka flushes truncations in the background) can
        # also lag the log start.
        # a new leader's epoch starts at the log end it had, with nothing after it yet: every such
        # log drops that entry here; its file is rewritten by the server's epoch writer, not one fsync per log
        cache.truncate_from_end(self.log_end_offset, write=False)
        cache.truncate_from_start(self.log_start_offset)
        # An entry written without fsync may be missing after a machine crash while its batches,
        # past the recovery point, survived: Kafka's segment recovery re-assigns them the same way.
        latest = cache.latest_epoch
        if self.recovery_point < self.log_end_offset:  # after a clean shutdown there is nothing past it
            for epoch, start in self._leader_epochs_from_log(max(self.recovery_point, self.log_start_offset),
                                                             -1 if latest is None else latest):
                cache.assign(epoch, start)
        self.leader_epoch_cache = cache

    def _leader_epochs_from_log(self, start: int | None = None, latest: int = -1) -> list[tuple[int, int]]:
        """(epoch, start offset) at each rise of the batches' leader epoch above `latest` from
        `start` (default the log start) on (Kafka's recovery rule: only an epoch above the latest
        counts, -1 never does). Epochs never fall along a log, so a segment whose first and last
        batches share one is not scanned."""
        start = self.log_start_offset if start is None else start
        out: list[tuple[int, int]] = []
        for seg in self.segments[max(bisect_right(self._bases, start) - 1, 0):]:
            pos = 0
            if start > seg.base_offset:
                m = seg.translate_offset(start)
                if m is None:
                    continue
                pos = m.position
            first = next(seg.iter_batches(pos), None)
            if first is None:
                continue
            last = first[1]
            for _pos, h in seg.iter_batches(max(pos, seg.offset_index.last_entry().position)):
                last = h
            if first[1].partition_leader_epoch == last.partition_leader_epoch:
                headers: Iterator[tuple[int, BatchHeader]] = iter((first,))
            else:
                headers = seg.iter_batches(pos)
            for _pos, h in headers:
                if h.partition_leader_epoch > latest:
                    latest = h.partition_leader_epoch
                    out.append((latest, max(h.base_offset, start)))
        return out

    def _rebuild_producer_state(self) -> None:
        psm = self.producer_state
        psm.truncate_and_reload(self.log_start_offset, self.log_end_offset)
        start = max(psm.map_end_offset, self.log_start_offset, self._bases[0])
        psm.update_map_end_offset(start)
        psm.replay(with_markers(self._batches_from(start)), end_offset=self.log_end_offset)
        psm.update_map_end_offset(self.log_end_offset)
        psm.take_snapshot(sync=False)
