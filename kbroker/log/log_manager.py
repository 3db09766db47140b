"""LogManager: every partition log of the broker across its log dirs (Kafka's LogManager).

Loads `topic-partition` directories at startup with the per-dir checkpoint files
(`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`, `replication-offset-checkpoint`,
`cleaner-offset-checkpoint`) and the clean shutdown marker `.kafka_cleanshutdown`; creates and
deletes logs; runs retention, compaction and interval flushes when the caller's scheduler asks;
writes checkpoints and the marker on shutdown. `lock_dirs` (dir_lock.py) creates and checks the
dirs and holds their `.lock` from before anything reads them until shutdown. Future logs (moves
between log dirs) and offline log dirs are the LogDirs mixin's (log_dirs.py).
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from kbroker.errors import KafkaStorageError
from kbroker.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    OffsetCheckpointFile,
    fsync_dir,
    write_atomically,
)
from kbroker.log.cleaner import Cleaner, LogToClean, logs_to_clean
from kbroker.log.config import LogConfig
from kbroker.log.dir_lock import LogDirLock
from kbroker.log.leader_epoch_cache import LeaderEpochCache
from kbroker.log.load_progress import LoadProgress
from kbroker.log.log import DEFAULT_PRODUCER_ID_EXPIRATION_MS, Log, wall_clock_ms
from kbroker.log.log_dirs import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, LogDirs
from kbroker.log.topic_partition import TopicPartition

__all__ = ["LogManager", "CLEAN_SHUTDOWN_FILE", "DELETE_DIR_SUFFIX", "FUTURE_DIR_SUFFIX"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_STRAY_DIR_SUFFIX = "-stray"


def _log_dir_entries(d: Path) -> list[tuple[Path, TopicPartition, bool]]:
    """(directory, partition, is a future log) of every partition log in log dir `d`; deletions
    interrupted by a restart are finished here, stray logs left alone."""
    entries = []
    for child in sorted(d.iterdir()):
        if not child.is_dir():
            continue
        name = child.name
        if name.endswith(DELETE_DIR_SUFFIX):
            shutil.rmtree(child, ignore_errors=True)
            continue
        if name.endswith(_STRAY_DIR_SUFFIX):
            continue
        future = name.endswith(FUTURE_DIR_SUFFIX)
        try:
            tp = (TopicPartition.from_suffixed_dir_name(name, FUTURE_DIR_SUFFIX) if future
                  else TopicPartition.from_dir_name(name))
        except ValueError:
            continue
        entries.append((child, tp, future))
    return entries


class LogManager(LogDirs):
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        now_ms: Callable[[], int] = wall_clock_ms,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        dir_lock: LogDirLock | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._now_ms = now_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._last_checkpoints: dict[tuple[Path, str], dict[TopicPartition, int]] = {}  # what each file says
        self._logs_to_delete: list[tuple[int, Log]] = []
        self.had_clean_shutdown: dict[Path, bool] = {}
        # Compacted logs: how far each is clean (cleaner-offset-checkpoint), and the earliest
        # delete horizon of its remaining tombstones (in memory, as Kafka keeps it).
        self.cleaner_offsets: dict[TopicPartition, int] = {}
        self._delete_horizons: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()  # a clean failed: skipped until restart, as Kafka does
        self._dir_lock = dir_lock or LogDirLock(self.log_dirs)  # a broker may take it before binding
        self._init_log_dirs()

    def lock_dirs(self) -> None:
        """Create and check the log dirs and take their `.lock` for this broker's life, before
        anything reads or writes them (LogDirError, a StartupError, when one is unusable or
        another broker holds it). A broker calls it; tests that simulate crashes may skip it."""
        if not self._dir_lock.held:
            self._dir_lock.acquire()

    # --- startup ----------------------------------------------------------------------------------

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CheckpointError as e:
            log.warning("ignoring corrupt checkpoint: %s", e)
            return {}

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Load every partition directory. `topic_configs` gives per-topic configs known at boot
        (others get the default; `Log.update_config` can change them later)."""
        topic_configs = topic_configs or {}
        futures: list[tuple[Path, TopicPartition, Log]] = []
        entries = {}
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            entries[d] = _log_dir_entries(d)
        progress = LoadProgress(sum(map(len, entries.values())), log.info)
        for d in self.log_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            self.had_clean_shutdown[d] = clean
            recovery_points = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT)
            cleaner_offsets = self._read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
            for child, tp, future in entries[d]:
                if tp in self.logs and not future:
                    raise RuntimeError(f"duplicate log directories for {tp}: {self._dir_of[tp]} and {d}")
                loaded = Log.open(
                    child,
                    topic_configs.get(tp.topic, self.default_config),
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    high_watermark=high_watermarks.get(tp, 0),
                    had_clean_shutdown=clean,
                    now_ms=self._now_ms,
                    cleaned=tp in cleaner_offsets,
                )
                progress.loaded(str(d), loaded.recovered_segments > 0)
                if future:
                    futures.append((d, tp, loaded))
                    continue
                self.logs[tp] = loaded
                self._dir_of[tp] = d
                if tp in cleaner_offsets:
                    self.cleaner_offsets[tp] = cleaner_offsets[tp]
            if clean:
                # The marker only vouches for the shutdown that wrote it.
                marker.unlink()
                fsync_dir(d)
        self._load_future_logs(futures)

    # --- logs -------------------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def all_logs(self) -> list[Log]:
        return list(self.logs.values())

    def _next_log_dir(self, tp: TopicPartition) -> Path:
        """Kafka's choice: the dir AlterReplicaLogDirs named for `tp`, else the live log dir
        holding the fewest partitions."""
        live = self.live_log_dirs
        if not live:
            raise KafkaStorageError(f"no log directory is online: {', '.join(map(str, self.log_dirs))}")
        preferred = self.preferred_dirs.pop(tp, None)
        if preferred in live:
            return preferred
        if len(live) == 1:
            return live[0]
        counts = Counter(self._dir_of.values())
        return min(live, key=lambda d: counts[d])

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        if "/" in tp.topic or tp.topic in ("", ".", "..") or tp.partition < 0:
            raise ValueError(f"invalid topic partition {tp!r}")
        if tp in self.offline_logs:
            raise KafkaStorageError(f"the log of {tp} is in the offline log directory {self.offline_logs[tp]}")
        d = self._next_log_dir(tp)
        d.mkdir(parents=True, exist_ok=True)
        new = Log.open(d / tp.dir_name, config or self.default_config, now_ms=self._now_ms)
        fsync_dir(d)
        self.logs[tp] = new
        self._dir_of[tp] = d
        return new

    def delete_log(self, tp: TopicPartition) -> Log | None:
        """Kafka's async delete: rename the dir to `{topic}-{partition}.{uuid}-delete` now, remove it
        after file.delete.delay.ms (at a later cleanup_logs), so in-flight reads finish."""
        self.abandon_future_log(tp)
        self.preferred_dirs.pop(tp, None)
        self.offline_logs.pop(tp, None)
        removed = self.logs.pop(tp, None)
        if removed is None:
            return None
        self._delete_horizons.pop(tp, None)
        self._uncleanable.discard(tp)
        had_cleaner_offset = self.cleaner_offsets.pop(tp, None) is not None
        d = self._dir_of.pop(tp)
        removed.rename_dir(tp.suffixed_dir_name(DELETE_DIR_SUFFIX))
        fsync_dir(d)
        delay = removed.config.file_delete_delay_ms
        if delay <= 0:
            removed.delete()
        else:
            self._logs_to_delete.append((self._now_ms() + delay, removed))
        self._checkpoint_dir(d)
        if had_cleaner_offset:
            self._write_cleaner_checkpoint(d)
        return removed

    def _delete_due_logs(self, now: int, force: bool = False) -> None:
        due = [lg for t, lg in self._logs_to_delete if force or t <= now]
        self._logs_to_delete = [(t, lg) for t, lg in self._logs_to_delete if not (force or t <= now)]
        for lg in due:
            lg.delete()

    # --- checkpoints ------------------------------------------------------------------------------

    def _logs_in(self, d: Path) -> dict[TopicPartition, Log]:
        """The logs in `d`, current and future (a partition has at most one of each, in two dirs)."""
        dir_of = self._dir_of
        if len(self.log_dirs) == 1:  # every log is in the one dir
            logs = dict(self.logs)
        else:
            logs = {tp: lg for tp, lg in self.logs.items() if (x := dir_of[tp]) is d or x == d}
        logs.update((tp, lg) for tp, lg in self.future_logs.items() if self._future_dir_of[tp] == d)
        return logs

    def _write_checkpoint(self, d: Path, name: str, offsets: dict[TopicPartition, int]) -> None:
        """Write a checkpoint file, unless it would say what the last write to it said (idle
        partitions cost no file write every few seconds)."""
        key = (d, name)
        if self._last_checkpoints.get(key) == offsets and (d / name).exists():
            return
        OffsetCheckpointFile(d / name).write(offsets)
        self._last_checkpoints[key] = offsets

    def checkpoint_recovery_points(self) -> None:
        for d in self.live_log_dirs:
            self._in_dir(d, "writing the recovery point checkpoint", lambda d=d: self._write_checkpoint(
                d, RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in self._logs_in(d).items()}))

    def checkpoint_log_start_offsets(self) -> None:
        # As Kafka: only logs whose start moved past their first segment need the checkpoint.
        for d in self.live_log_dirs:
            self._in_dir(d, "writing the log start offset checkpoint", lambda d=d: self._write_checkpoint(
                d, LOG_START_OFFSET_CHECKPOINT,
                {tp: lg.log_start_offset for tp, lg in self._logs_in(d).items()
                 if lg.log_start_offset > lg.segments[0].base_offset}))

    def checkpoint_high_watermarks(self) -> None:
        for d in self.live_log_dirs:
            self._in_dir(d, "writing the high watermark checkpoint", lambda d=d: self._write_checkpoint(
                d, REPLICATION_OFFSET_CHECKPOINT, {tp: lg.high_watermark for tp, lg in self._logs_in(d).items()}))

    def _write_cleaner_checkpoint(self, d: Path) -> None:
        self._write_checkpoint(
            d, CLEANER_OFFSET_CHECKPOINT,
            {tp: off for tp, off in self.cleaner_offsets.items() if self._dir_of.get(tp) == d},
        )

    def checkpoint_cleaner_offsets(self) -> None:
        for d in self.live_log_dirs:
            self._in_dir(d, "writing the cleaner offset checkpoint", lambda d=d: self._write_cleaner_checkpoint(d))

    def _checkpoint_dir(self, d: Path) -> None:
        logs = self._logs_in(d)
        self._write_checkpoint(d, RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in logs.items()})
        self._write_checkpoint(
            d,
            LOG_START_OFFSET_CHECKPOINT,
            {tp: lg.log_start_offset for tp, lg in logs.items() if lg.log_start_offset > lg.segments[0].base_offset},
        )
        self._write_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT, {tp: lg.high_watermark for tp, lg in logs.items()})

    # --- periodic work ----------------------------------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention for every log (Kafka's log.retention.check.interval.ms task), producer id
        expiry, and removal of deleted logs whose delay passed. Returns segments deleted."""
        now = self._now_ms() if now_ms is None else now_ms
        deleted = 0
        for tp, lg in list(self.logs.items()):
            if self.logs.get(tp) is not lg:
                continue  # its dir went offline meanwhile

            def retain(lg: Log = lg) -> None:
                nonlocal deleted
                deleted += lg.delete_old_segments(now)
                lg.remove_expired_producers(now, self.producer_id_expiration_ms)
            self._in_dir(self._dir_of[tp], f"retention of {tp}", retain)
        self._delete_due_logs(now)
        return deleted

    def clean_compacted_logs(self, now_ms: int | None = None) -> int:
        """Kafka's log cleaner pass: clean every log with cleanup.policy compact whose dirty ratio
        reaches min.cleanable.dirty.ratio (dirty part bounded by the active segment, the last
        stable offset and min.compaction.lag.ms), or that holds tombstones whose delete horizon
        has passed; filthiest first. Updates `cleaner-offset-checkpoint`. Returns logs cleaned."""
        now = self._now_ms() if now_ms is None else now_ms
        candidates = [
            (LogToClean.of(lg, self.cleaner_offsets.get(tp), now), self._delete_horizons.get(tp))
            for tp, lg in self.logs.items()
            if lg.config.compact_enabled and tp not in self._uncleanable
        ]
        cleaned = 0
        cleaner = Cleaner()
        for ltc in logs_to_clean(candidates, now):
            tp = ltc.log.topic_partition
            d = self._dir_of[tp]
            if tp not in self.cleaner_offsets:
                # Registered before the first swap: from then on a restart reads offset gaps in
                # this log as compaction, not damage.
                self.cleaner_offsets[tp] = ltc.first_dirty_offset
                self._write_cleaner_checkpoint(d)
            try:
                end, stats = cleaner.clean(ltc, now)
            except Exception:
                log.exception("cleaning %s failed; it is not cleaned again until restart", tp)
                self._uncleanable.add(tp)
                continue
            self.cleaner_offsets[tp] = end
            if stats.next_delete_horizon_ms is None:
                self._delete_horizons.pop(tp, None)
            else:
                self._delete_horizons[tp] = stats.next_delete_horizon_ms
            self._write_cleaner_checkpoint(d)
            log.debug("cleaned %s up to offset %d: %s", tp, end, stats)
            cleaned += 1
        return cleaned

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync logs whose flush.ms elapsed, and segments rolled since the last flush (Kafka
        flushes a rolled segment in the background). Returns the number of logs flushed."""
        now = self._now_ms() if now_ms is None else now_ms
        flushed = 0
        for logs, dir_of in ((self.logs, self._dir_of), (self.future_logs, self._future_dir_of)):
            for tp, lg in list(logs.items()):
                if lg.closed:
                    continue  # its dir went offline meanwhile
                if now - lg.last_flush_ms >= lg.config.flush_interval_ms:
                    self._in_dir(dir_of[tp], f"flushing {tp}", lg.flush)
                    flushed += 1
                elif lg.recovery_point < lg.log_end_offset and lg.recovery_point < lg.active_segment.base_offset:
                    self._in_dir(dir_of[tp], f"flushing {tp}", lambda lg=lg: lg.flush(lg.active_segment.base_offset))
                    flushed += 1
        return flushed

    def unwritten_leader_epochs(self, since_marks: int = -1) -> tuple[int, list[tuple[Path, Log]]]:
        """The logs whose leader-epoch checkpoint changed in memory only (a new leader or follower
        epoch, a truncation at load), with their dirs: the server writes them one at a time. With
        the `LeaderEpochCache.marks` count of the last call, none are looked for if it has not
        moved. Returns the count now, and the logs."""
        marks = LeaderEpochCache.marks
        if marks == since_marks:
            return marks, []
        all_logs = ((self.logs, self._dir_of), (self.future_logs, self._future_dir_of))
        return marks, [(dir_of[tp], lg) for logs, dir_of in all_logs
                       for tp, lg in list(logs.items()) if lg.leader_epoch_cache.unwritten and not lg.closed]

    def write_leader_epochs(self, d: Path, lg: Log) -> None:
        """Write one log's leader-epoch checkpoint if it is still unwritten (without fsync)."""
        if not lg.closed and lg.leader_epoch_cache.unwritten:
            self._in_dir(d, f"writing {lg.dir.name}'s leader epochs", lg.leader_epoch_cache.write_if_changed)

    def shutdown(self) -> None:
        """Flush and close every log, write all checkpoints, then the clean shutdown marker."""
        for lg in list(self.logs.values()) + list(self.future_logs.values()):
            self._in_dir(self._dir_holding(lg), f"closing {lg.dir.name}", lambda lg=lg: (lg.flush(), lg.close()))
        self._delete_due_logs(0, force=True)
        for d in self.live_log_dirs:  # an offline dir gets no clean-shutdown marker: the next start recovers it

            def finish(d: Path = d) -> None:
                d.mkdir(parents=True, exist_ok=True)
                self._checkpoint_dir(d)
                self._write_cleaner_checkpoint(d)
                write_atomically(d / CLEAN_SHUTDOWN_FILE, b'{"version":0,"BrokerEpoch":-1}')
            self._in_dir(d, "writing the shutdown checkpoints", finish)
        self.logs.clear()
        self._dir_of.clear()
        self.future_logs.clear()
        self._future_dir_of.clear()
        self._dir_lock.release()

