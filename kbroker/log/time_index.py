"""TimeIndex: the sparse `{base_offset:020d}.timeindex` file mapping max timestamps to offsets.

Entries are Kafka's: timestamp i64 + relative offset u32, big-endian, 12 bytes. An entry (t, o)
means "the largest timestamp up to offset o's batch is t"; only strictly increasing timestamps are
appended. As in Kafka, one slot is kept free so the final entry can always be written on roll and
close. Exactly-sized file and lazy in-memory entries, as for OffsetIndex.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from kbroker.log._files import write_all
from kbroker.log.offset_index import CorruptIndexError

__all__ = ["TimeIndex", "TimestampOffset", "NO_TIMESTAMP"]

NO_TIMESTAMP = -1
_ENTRY = struct.Struct(">qI")


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex:
    ENTRY_SIZE = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.max_entries = max(max_index_size // self.ENTRY_SIZE, 2)
        self._ts: array | None = None
        self._rel: array | None = None
        self._fd: int | None = None

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        # Like Kafka, a torn tail entry is dropped (size rounded down to whole entries).
        if len(data) % self.ENTRY_SIZE:
            data = data[: len(data) - len(data) % self.ENTRY_SIZE]
            os.truncate(self.path, len(data))
        ts = array("q")
        rel = array("I")
        for t, r in _ENTRY.iter_unpack(data):
            ts.append(t)
            rel.append(r)
        self._ts, self._rel = ts, rel

    def _entries(self) -> tuple[array, array]:
        if self._ts is None:
            self._load()
        return self._ts, self._rel  # type: ignore[return-value]

    def sanity_check(self) -> None:
        ts, rel = self._entries()
        if any(ts[i] >= ts[i + 1] or rel[i] > rel[i + 1] for i in range(len(ts) - 1)):
            raise CorruptIndexError(f"{self.path}: entries not increasing")

    @property
    def entries(self) -> int:
        return len(self._entries()[0])

    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    def last_entry(self) -> TimestampOffset:
        ts, rel = self._entries()
        if not ts:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(ts[-1], self.base_offset + rel[-1])

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (NO_TIMESTAMP, base_offset)."""
        ts, rel = self._entries()
        i = bisect_right(ts, target_timestamp) - 1
        if i < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(ts[i], self.base_offset + rel[i])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        ts, rel = self._entries()
        if not skip_full_check and len(ts) >= self.max_entries - 1:
            raise ValueError(f"attempt to append to a full time index (size = {len(ts)})")
        last = self.last_entry()
        if ts and offset < last.offset:
            raise ValueError(f"attempt to append offset {offset} below the last offset {last.offset} to {self.path}")
        if ts and timestamp < last.timestamp:
            raise ValueError(f"attempt to append timestamp {timestamp} below the last {last.timestamp} to {self.path}")
        if timestamp > last.timestamp and len(ts) < self.max_entries:
            relative = offset - self.base_offset
            if not 0 <= relative <= 0xFFFFFFFF:
                raise ValueError(f"offset {offset} does not fit time index {self.path}")
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            write_all(self._fd, _ENTRY.pack(timestamp, relative))
            ts.append(timestamp)
            rel.append(relative)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        ts, rel = self._entries()
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_right(rel, relative - 1)
        self._truncate_to_entries(keep)

    def reset(self) -> None:
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, n: int) -> None:
        ts, rel = self._entries()
        if n >= len(ts) and self.path.exists():
            return
        del ts[n:]
        del rel[n:]
        if self._fd is not None:
            os.ftruncate(self._fd, n * self.ENTRY_SIZE)
        else:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, n * self.ENTRY_SIZE)
            finally:
                os.close(fd)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close_writer(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    close = close_writer

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = Path(path)

    def delete(self) -> None:
        self.close_writer()
        self.path.unlink(missing_ok=True)
