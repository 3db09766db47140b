"""The log dirs' `.lock` and start-up checks (kbroker/log/dir_lock.py); the real-process cases
(a second broker, a killed one, an unwritable dir) are in compat-tests/test_startup.py."""

import pytest

from kbroker.errors import StartupError
from kbroker.log.config import LogConfig
from kbroker.log.dir_lock import LOCK_FILE, LogDirError, LogDirLock
from kbroker.log.log_manager import LogManager


def test_a_held_dir_is_refused_with_kafkas_message_until_released(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    first = LogDirLock(dirs)
    first.acquire()
    with pytest.raises(LogDirError, match=r"Failed to acquire lock on file \.lock in .*d1\. A Kafka instance in "
                                          r"another process or thread is using this directory\."):
        LogDirLock([dirs[0]]).acquire()
    first.release()
    second = LogDirLock(dirs)
    second.acquire()
    second.release()


def test_all_or_nothing(tmp_path):
    held = LogDirLock([tmp_path / "b"])
    held.acquire()
    attempt = LogDirLock([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(LogDirError):
        attempt.acquire()
    assert not attempt.held
    LogDirLock([tmp_path / "a"]).acquire()  # "a" was let go when "b" failed


def test_a_stale_lock_file_is_not_a_lock(tmp_path):
    (tmp_path / LOCK_FILE).write_bytes(b"")
    lock = LogDirLock([tmp_path])
    lock.acquire()
    assert lock.held


def test_missing_dirs_are_created_and_files_are_refused(tmp_path):
    LogDirLock([tmp_path / "x" / "y"]).acquire()
    assert (tmp_path / "x" / "y" / LOCK_FILE).exists()
    (tmp_path / "f").write_text("")
    with pytest.raises(StartupError, match="is not a readable log directory"):
        LogDirLock([tmp_path / "f"]).acquire()
    with pytest.raises(StartupError, match="Failed to create data directory"):
        LogDirLock([tmp_path / "f" / "sub"]).acquire()


def test_the_log_manager_holds_the_lock_until_shutdown(tmp_path):
    manager = LogManager([tmp_path], LogConfig())
    manager.lock_dirs()
    manager.startup()
    with pytest.raises(LogDirError):
        LogDirLock([tmp_path]).acquire()
    manager.shutdown()
    LogDirLock([tmp_path]).acquire()
