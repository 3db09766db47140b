"""The archive's store (Kafka's RemoteStorageManager) and the built-in directory store.

A store keeps, per partition (`<topic>-<topic id>/<partition>`), each archived segment's objects
— `<stem>.log`, `.index`, `.timeindex`, `.txnindex` (only with aborted transactions),
`.leader-epoch-checkpoint` — and the partition's `manifest.json`. Every method blocks: the remote
log manager calls them in worker threads. `load_store` builds the configured one from the broker
config: `remote.log.storage.manager.class.name` (`directory`, `s3`, or `module.Class`) with the
settings under `remote.log.storage.manager.impl.prefix` (default `rsm.config.`), prefix removed.

The directory store (`rsm.config.dir`: a local disk, a mounted NAS or an HDFS fuse path) writes
every object to `<name>.tmp`, fsyncs it, renames it into place and fsyncs the directory, so a
crash leaves either the whole object or a `.tmp` file that nothing reads (the manager removes
leftovers). Reads are file ranges: the server sends them with sendfile like local segments.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbroker.log.checkpoint import fsync_dir
from kbroker.tiered.manifest import RemoteSegment

__all__ = ["RemoteStorageManager", "DirectoryRemoteStorageManager", "SegmentData", "StoreError", "load_store",
           "MANIFEST_NAME", "TMP_SUFFIX", "SEGMENT_SUFFIXES"]

MANIFEST_NAME = "manifest.json"
TMP_SUFFIX = ".tmp"
LOG, INDEX, TIME_INDEX, TXN_INDEX, EPOCHS = ".log", ".index", ".timeindex", ".txnindex", ".leader-epoch-checkpoint"
SEGMENT_SUFFIXES = (LOG, INDEX, TIME_INDEX, TXN_INDEX, EPOCHS)
_COPY_CHUNK = 8 * 1024 * 1024


class StoreError(Exception):
    """A store is misconfigured or an operation on it failed."""


@dataclass
class SegmentData:
    """What is copied for one segment: `log_size` bytes from position 0 of `log_fd` (the caller's
    own dup of the segment's fd, closed by the caller), and the index objects' contents by suffix
    (an empty transaction index is not stored)."""

    log_fd: int
    log_size: int
    indexes: dict[str, bytes] = field(default_factory=dict)


class RemoteStorageManager:
    """The store interface. `supports_file_ranges`: `open_log_segment` gives an fd to send ranges
    of (a file system), else reads are byte ranges (`fetch_log_segment`)."""

    supports_file_ranges = False

    def copy_log_segment(self, partition: str, segment: RemoteSegment, data: SegmentData) -> None:
        raise NotImplementedError

    def fetch_log_segment(self, partition: str, segment: RemoteSegment, position: int, size: int) -> bytes:
        raise NotImplementedError

    def open_log_segment(self, partition: str, segment: RemoteSegment) -> int:
        raise NotImplementedError

    def fetch_index(self, partition: str, segment: RemoteSegment, suffix: str) -> bytes:
        """An index object's content; b"" when the segment has none of that kind."""
        raise NotImplementedError

    def delete_log_segment(self, partition: str, segment: RemoteSegment) -> None:
        self.delete_objects(partition, [segment.name + s for s in SEGMENT_SUFFIXES])

    def list_objects(self, partition: str) -> list[tuple[str, int]]:
        """(object name, last modified ms) of every object of the partition."""
        raise NotImplementedError

    def delete_objects(self, partition: str, names: list[str]) -> None:
        """Delete these objects of the partition; missing ones are no error."""
        raise NotImplementedError

    def read_manifest(self, partition: str) -> bytes | None:
        raise NotImplementedError

    def write_manifest(self, partition: str, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class DirectoryRemoteStorageManager(RemoteStorageManager):
    supports_file_ranges = True

    def __init__(self, settings: dict[str, str]) -> None:
        root = settings.get("dir")
        if not root:
            raise StoreError("the directory store needs rsm.config.dir (the archive's directory)")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _dir(self, partition: str) -> Path:
        return self.root / partition

    def _write(self, directory: Path, name: str, content: bytes | None = None, fd: int = -1, size: int = 0) -> None:
        """Crash-safe: `<name>.tmp`, fsync, rename."""
        tmp = directory / (name + TMP_SUFFIX)
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if content is not None:
                view = memoryview(content)
                while view:
                    view = view[os.write(out, view):]
            else:
                _copy_range(fd, out, size)
            os.fsync(out)
        finally:
            os.close(out)
        os.replace(tmp, directory / name)

    def copy_log_segment(self, partition: str, segment: RemoteSegment, data: SegmentData) -> None:
        directory = self._dir(partition)
        directory.mkdir(parents=True, exist_ok=True)
        for suffix, content in data.indexes.items():
            if content or suffix != TXN_INDEX:
                self._write(directory, segment.name + suffix, content)
        self._write(directory, segment.name + LOG, fd=data.log_fd, size=data.log_size)
        fsync_dir(directory)

    def open_log_segment(self, partition: str, segment: RemoteSegment) -> int:
        return os.open(self._dir(partition) / (segment.name + LOG), os.O_RDONLY)

    def fetch_log_segment(self, partition: str, segment: RemoteSegment, position: int, size: int) -> bytes:
        fd = self.open_log_segment(partition, segment)
        try:
            return os.pread(fd, size, position)
        finally:
            os.close(fd)

    def fetch_index(self, partition: str, segment: RemoteSegment, suffix: str) -> bytes:
        try:
            return (self._dir(partition) / (segment.name + suffix)).read_bytes()
        except FileNotFoundError:
            return b""

    def list_objects(self, partition: str) -> list[tuple[str, int]]:
        try:
            entries = list(os.scandir(self._dir(partition)))
        except FileNotFoundError:
            return []
        return [(e.name, int(e.stat().st_mtime * 1000)) for e in entries if e.is_file()]

    def delete_objects(self, partition: str, names: list[str]) -> None:
        directory = self._dir(partition)
        for name in names:
            (directory / name).unlink(missing_ok=True)
        if directory.exists():
            fsync_dir(directory)

    def read_manifest(self, partition: str) -> bytes | None:
        try:
            return (self._dir(partition) / MANIFEST_NAME).read_bytes()
        except FileNotFoundError:
            return None

    def write_manifest(self, partition: str, data: bytes) -> None:
        directory = self._dir(partition)
        directory.mkdir(parents=True, exist_ok=True)
        self._write(directory, MANIFEST_NAME, data)
        fsync_dir(directory)


def _copy_range(src: int, dst: int, size: int) -> None:
    """`size` bytes from position 0 of `src` to `dst`, in the kernel where it can."""
    position = 0
    while position < size:
        n = min(_COPY_CHUNK, size - position)
        try:
            copied = os.copy_file_range(src, dst, n, position)
        except OSError:  # another file system (a fuse mount may refuse): plain reads and writes
            chunk = os.pread(src, n, position)
            copied = os.write(dst, chunk) if chunk else 0
        if copied == 0:
            raise StoreError(f"the segment shrank while it was copied ({position} of {size} bytes)")
        position += copied


_BUILT_IN = {"directory": "kbroker.tiered.store.DirectoryRemoteStorageManager",
             "s3": "kbroker.tiered.s3.S3RemoteStorageManager"}


def store_settings(config: Any) -> dict[str, str]:
    """The store's own settings: keys under remote.log.storage.manager.impl.prefix, prefix removed."""
    prefix = config.get("remote.log.storage.manager.impl.prefix")
    return {k[len(prefix):]: v for k, v in config.unknown.items() if k.startswith(prefix)}


def load_store(config: Any) -> RemoteStorageManager:
    """The store remote.log.storage.manager.class.name names, with its settings."""
    name = config.get("remote.log.storage.manager.class.name")
    path = _BUILT_IN.get(name.lower(), name)
    module_name, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise StoreError(f"cannot load remote.log.storage.manager.class.name={name}: {exc}") from exc
    return cls(store_settings(config))
