"""The log dirs' start-up checks and Kafka's `.lock`: one broker process per data directory.

As Kafka's LogManager: a missing log dir is created (with its parents); one that cannot be created,
is not a directory or cannot be written ends the start-up; then exclusive, non-blocking OS locks
on the file `.lock` in each dir are held for the broker's life (Kafka's FileChannel.tryLock). The
locks live on the open file, so the OS drops it when the process dies, however it dies: a `.lock`
left behind by a killed broker is just a file and does not block a restart.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from kbroker.errors import StartupError

__all__ = ["LOCK_FILE", "LogDirError", "LogDirLock"]

LOCK_FILE = ".lock"


class LogDirError(StartupError):
    """A log dir the broker cannot use, or one another broker holds."""


class LogDirLock:
    """The locks on a set of log dirs, taken together: all or none."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self._files: list = []

    @property
    def held(self) -> bool:
        return bool(self._files)

    def acquire(self) -> None:
        """Create and check every dir, then lock them all; LogDirError (nothing held) if one fails."""
        try:
            for d in self.log_dirs:
                _create_and_validate(d)
                self._files.append(_lock(d))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for f in self._files:
            f.close()  # closing the file drops its lock; the file itself stays, as Kafka's does
        self._files = []

    def release_dir(self, d: Path) -> None:
        """Drop the lock of one dir (it went offline), keeping the others'."""
        target = (Path(d).absolute() / LOCK_FILE)
        for f in [f for f in self._files if Path(f.name).absolute() == target]:
            try:
                f.close()
            except OSError:
                pass
            self._files.remove(f)


def _create_and_validate(d: Path) -> None:
    """Kafka's createAndValidateLogDirs, with its words."""
    if not d.exists():
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LogDirError(f"Failed to create data directory {d.absolute()}: {exc.strerror}") from None
    if not d.is_dir() or not os.access(d, os.R_OK | os.X_OK):
        raise LogDirError(f"{d.absolute()} is not a readable log directory.")


def _lock(d: Path):
    try:
        # "a": never truncates, creates when missing; opening it for writing is the dir's write check
        f = open(d / LOCK_FILE, "ab")
    except OSError as exc:
        raise LogDirError(f"Disk error while locking directory {d.absolute()}: {exc.strerror}") from None
    try:
        # flock excludes other kbroker processes and a second lock in this one; the POSIX record
        # lock (what Java's tryLock takes on Linux) excludes a Kafka broker on the same dir too
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        f.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):  # lockf answers a held lock with either
            raise LogDirError(f"Failed to acquire lock on file {LOCK_FILE} in {d.absolute()}. "
                              "A Kafka instance in another process or thread is using this directory.") from None
        raise LogDirError(f"Disk error while locking directory {d.absolute()}: {exc.strerror}") from None
    return f
