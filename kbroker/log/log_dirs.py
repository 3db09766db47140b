"""Several log dirs (JBOD), mixed into LogManager: future logs — a replica's copy being made in
another log dir (AlterReplicaLogDirs) — with the swap that makes the copy current, and log dirs
taken offline after an I/O error (Kafka's LogDirFailureChannel and handleLogDirFailure).

The swap renames in an order that leaves exactly one live log wherever a crash stops it (Kafka
renames the future first and, after a crash between its two renames, refuses to start with both):
1. the future log, caught up with the current one (same log end), takes over its high watermark,
   log start, leader epochs and producers, and is flushed;
2. the current log's dir is renamed `{topic}-{partition}.{uuid}-delete` (start-up removes those);
3. the future log's dir `{topic}-{partition}.{uuid}-future` is renamed `{topic}-{partition}`.
At start-up a future log whose partition has a current log is resumed (`future_logs`); one without
(a crash between 2 and 3) becomes the current log: it held everything the current one did at 1.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from kbroker.errors import KafkaStorageError
from kbroker.log.checkpoint import fsync_dir
from kbroker.log.log import FUTURE_DIR_SUFFIX, Log
from kbroker.log.topic_partition import TopicPartition

__all__ = ["LogDirs", "DELETE_DIR_SUFFIX", "FUTURE_DIR_SUFFIX"]

log = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"

# (the failed dir, the partitions whose current log it held)
DirFailureListener = Callable[[Path, list[TopicPartition]], None]


class LogDirs:
    """Needs LogManager's fields: log_dirs, logs, _dir_of, _now_ms, _dir_lock, _logs_to_delete,
    cleaner_offsets, and its _checkpoint_dir / _write_cleaner_checkpoint."""

    def _init_log_dirs(self) -> None:
        self.future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self.offline_dirs: set[Path] = set()
        self.offline_logs: dict[TopicPartition, Path] = {}  # partitions whose current log is in an offline dir
        # AlterReplicaLogDirs for a partition not created yet: where it will be (Kafka's preferredLogDirs)
        self.preferred_dirs: dict[TopicPartition, Path] = {}
        self.dir_failure_listener: DirFailureListener | None = None

    # --- which dir ---------------------------------------------------------------------------------

    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def log_dir_named(self, path: str) -> Path | None:
        """The configured log dir whose absolute path is `path` (how clients name dirs), or None."""
        wanted = os.path.normpath(path)
        for d in self.log_dirs:
            if str(d.absolute()) == wanted:
                return d
        return None

    def dir_of(self, tp: TopicPartition) -> Path | None:
        return self._dir_of.get(tp)

    def future_dir_of(self, tp: TopicPartition) -> Path | None:
        return self._future_dir_of.get(tp)

    def _dir_holding(self, lg: Log) -> Path:
        for logs, dirs in ((self.logs, self._dir_of), (self.future_logs, self._future_dir_of)):
            for tp, candidate in logs.items():
                if candidate is lg:
                    return dirs[tp]
        parent = lg.dir.parent
        return next((d for d in self.log_dirs if d.absolute() == parent.absolute()), parent)

    # --- future logs -------------------------------------------------------------------------------

    def get_future_log(self, tp: TopicPartition) -> Log | None:
        return self.future_logs.get(tp)

    def create_future_log(self, tp: TopicPartition, dest: Path) -> Log:
        """The future log of `tp` in `dest` (an existing one there is kept; one elsewhere is
        abandoned), empty from the current log's start."""
        current = self.logs.get(tp)
        if current is None:
            raise KafkaStorageError(f"no current log for {tp}")
        if dest in self.offline_dirs:
            raise KafkaStorageError(f"log directory {dest} is offline")
        if dest == self._dir_of[tp]:
            raise ValueError(f"the current log of {tp} is already in {dest}")
        existing = self.future_logs.get(tp)
        if existing is not None:
            if self._future_dir_of[tp] == dest:
                return existing
            self.abandon_future_log(tp)
        future = Log.open(dest / tp.suffixed_dir_name(FUTURE_DIR_SUFFIX), current.config, now_ms=self._now_ms,
                          cleaned=current.cleaned)
        if current.log_start_offset > future.log_end_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        fsync_dir(dest)
        self.future_logs[tp] = future
        self._future_dir_of[tp] = dest
        return future

    def abandon_future_log(self, tp: TopicPartition) -> bool:
        """Drop a move: the future log's dir is renamed `-delete` first (a crash amid the removal
        must not leave a future log with holes), then removed."""
        future = self.future_logs.pop(tp, None)
        if future is None:
            return False
        d = self._future_dir_of.pop(tp)
        if d in self.offline_dirs:
            return True
        try:
            future.rename_dir(tp.suffixed_dir_name(DELETE_DIR_SUFFIX))
            fsync_dir(d)
            future.delete()
        except OSError as exc:
            self.mark_dir_offline(d, f"deleting the future log of {tp}: {exc}")
        return True

    def replace_current_with_future_log(self, tp: TopicPartition) -> Log:
        """The swap (see the module's docstring). Synchronous: the caller runs it with no append
        between its check that the future caught up and here. Returns the new current log."""
        current, future = self.logs[tp], self.future_logs[tp]
        if future.log_end_offset != current.log_end_offset:
            raise ValueError(f"the future log of {tp} ends at {future.log_end_offset}, "
                             f"the current one at {current.log_end_offset}")
        src, dest = self._dir_of[tp], self._future_dir_of[tp]
        _take_over_state(future, current)
        future.flush()
        current.rename_dir(tp.suffixed_dir_name(DELETE_DIR_SUFFIX))
        fsync_dir(src)
        future.rename_dir(tp.dir_name)
        fsync_dir(dest)
        del self.future_logs[tp], self._future_dir_of[tp]
        self.logs[tp], self._dir_of[tp] = future, dest
        for d in (src, dest):
            self._checkpoint_dir(d)
            if tp in self.cleaner_offsets:
                self._write_cleaner_checkpoint(d)
        delay = current.config.file_delete_delay_ms
        if delay <= 0:
            current.delete()
        else:  # in-flight reads of its files finish first, as for a deleted topic
            self._logs_to_delete.append((self._now_ms() + delay, current))
        log.info("the log of %s moved from %s to %s (log end %d)", tp, src, dest, future.log_end_offset)
        return future

    def _load_future_logs(self, futures: list[tuple[Path, TopicPartition, Log]]) -> None:
        """Start-up, after every current log is loaded (see the module's docstring)."""
        for d, tp, future in futures:
            if tp in self.future_logs:
                raise RuntimeError(f"duplicate future logs for {tp}: {self._future_dir_of[tp]} and {d}")
            if tp in self.logs:
                self.future_logs[tp], self._future_dir_of[tp] = future, d
                log.info("resuming the move of %s to %s", tp, d)
                continue
            future.rename_dir(tp.dir_name)
            fsync_dir(d)
            self.logs[tp], self._dir_of[tp] = future, d
            log.info("the move of %s to %s was interrupted after its old log was retired: the copy is now "
                     "its log (log end %d)", tp, d, future.log_end_offset)

    # --- offline dirs ------------------------------------------------------------------------------

    def fail_dir_of(self, lg: Log, exc: BaseException) -> list[TopicPartition]:
        """An I/O error on `lg`: its log dir goes offline. Returns the partitions it held."""
        return self.mark_dir_offline(self._dir_holding(lg), f"{type(exc).__name__}: {exc}")

    def mark_dir_offline(self, d: Path, reason: str) -> list[TopicPartition]:
        """Stop serving `d`: its logs (current and future) are closed and forgotten, its
        partitions remembered as offline, its `.lock` released; the listener is told once."""
        if d in self.offline_dirs or d not in self.log_dirs:
            return []
        self.offline_dirs.add(d)
        offline = sorted(tp for tp, x in self._dir_of.items() if x == d)
        for tp in offline:
            self.logs.pop(tp).close_handlers()
            del self._dir_of[tp]
            self.offline_logs[tp] = d
            self.cleaner_offsets.pop(tp, None)
        for tp in [tp for tp, x in self._future_dir_of.items() if x == d]:
            self.future_logs.pop(tp).close_handlers()
            del self._future_dir_of[tp]
        in_dir = [(t, lg) for t, lg in self._logs_to_delete if lg.dir.parent.absolute() == d.absolute()]
        self._logs_to_delete = [entry for entry in self._logs_to_delete if entry not in in_dir]
        for _t, lg in in_dir:
            lg.close_handlers()
        self._dir_lock.release_dir(d)
        shown = ", ".join(map(str, offline[:20])) + (f" and {len(offline) - 20} more" if len(offline) > 20 else "")
        log.error("log directory %s is offline (%s); its partitions are offline: %s", d.absolute(), reason,
                  shown or "none")
        if self.dir_failure_listener is not None:
            self.dir_failure_listener(d, offline)
        return offline

    def _in_dir(self, d: Path, what: str, job: Callable[[], object]) -> None:
        """Run a periodic job's part for dir `d`; an OSError takes `d` offline."""
        if d in self.offline_dirs:
            return
        try:
            job()
        except OSError as exc:
            self.mark_dir_offline(d, f"{what}: {exc}")


def _take_over_state(future: Log, current: Log) -> None:
    """What the copied batches do not carry: the high watermark, a log start moved past a batch
    boundary, leader epochs with no batch yet, producers known only from older snapshots."""
    future.update_high_watermark(current.high_watermark)
    if current.log_start_offset > future.log_start_offset:
        future.maybe_increment_log_start_offset(current.log_start_offset)
    for entry in current.leader_epoch_cache.epoch_entries():
        future.leader_epoch_cache.assign(entry.epoch, entry.start_offset, sync=False)
    producers = future.producer_state.producers
    for pid, entry in current.producer_state.producers.items():
        if pid not in producers:
            producers[pid] = entry.copy()
