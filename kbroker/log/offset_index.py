"""OffsetIndex: the sparse `{base_offset:020d}.index` file mapping offsets to log file positions.

Entries are Kafka's: relative offset u32 + position u32, big-endian, 8 bytes, both increasing.
Kafka preallocates the file to segment.index.bytes and mmaps it, trimming on roll/close; kbroker
keeps the file exactly as long as its entries (what Kafka itself leaves after a clean close, and
what it reads back as "all entries"), appends with os.write and holds the entries in memory,
loaded lazily on first use so idle segments cost nothing at startup.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from kbroker.log._files import write_all

__all__ = ["OffsetIndex", "OffsetPosition", "CorruptIndexError"]

_ENTRY = struct.Struct(">II")


class CorruptIndexError(Exception):
    """An index file fails its sanity check; the segment rebuilds it from the log."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex:
    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.max_entries = max(max_index_size // self.ENTRY_SIZE, 1)
        self._rel: array | None = None  # relative offsets, loaded lazily
        self._pos: array | None = None
        self._fd: int | None = None

    # --- loading -------------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        # Like Kafka, a torn tail entry is dropped (size rounded down to whole entries).
        if len(data) % self.ENTRY_SIZE:
            data = data[: len(data) - len(data) % self.ENTRY_SIZE]
            os.truncate(self.path, len(data))
        raw = array("I")
        raw.frombytes(data)
        if sys.byteorder == "little":
            raw.byteswap()
        self._rel = raw[0::2]
        self._pos = raw[1::2]

    def _entries(self) -> tuple[array, array]:
        if self._rel is None:
            self._load()
        return self._rel, self._pos  # type: ignore[return-value]

    def sanity_check(self, log_size: int) -> None:
        """Kafka's checks plus bounds on the log: raises CorruptIndexError."""
        rel, pos = self._entries()
        if rel:
            if rel[-1] < rel[0] or pos[-1] < pos[0] or pos[-1] > log_size:
                raise CorruptIndexError(f"{self.path}: last entry out of order or beyond the log")
            # Kafka rejects a last offset <= base for a non-empty index; entries must increase.
            if any(rel[i] >= rel[i + 1] or pos[i] > pos[i + 1] for i in range(len(rel) - 1)):
                raise CorruptIndexError(f"{self.path}: entries not increasing")

    # --- queries --------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._entries()[0])

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def last_offset(self) -> int:
        rel, _ = self._entries()
        return self.base_offset + rel[-1] if rel else self.base_offset

    def last_entry(self) -> OffsetPosition:
        rel, pos = self._entries()
        if not rel:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + rel[-1], pos[-1])

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target, or (base_offset, 0)."""
        rel, pos = self._entries()
        i = bisect_right(rel, target_offset - self.base_offset) - 1 if target_offset >= self.base_offset else -1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + rel[i], pos[i])

    def lookup_by_position(self, position: int) -> OffsetPosition:
        """The largest entry with position <= `position`, or (base_offset, 0)."""
        rel, pos = self._entries()
        i = bisect_right(pos, position) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + rel[i], pos[i])

    # --- mutation -------------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        rel, pos = self._entries()
        relative = offset - self.base_offset
        if not 0 <= relative <= 0xFFFFFFFF or not 0 <= position <= 0xFFFFFFFF:
            raise ValueError(f"offset {offset} / position {position} do not fit index {self.path}")
        if rel and (relative <= rel[-1] or position < pos[-1]):
            raise ValueError(
                f"attempt to append an offset ({offset}) <= the last offset ({self.last_offset}) to {self.path}"
            )
        if len(rel) >= self.max_entries:
            raise ValueError(f"attempt to append to a full index (size = {len(rel)})")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        write_all(self._fd, _ENTRY.pack(relative, position))
        rel.append(relative)
        pos.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        rel, _ = self._entries()
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_right(rel, relative - 1)
        self._truncate_to_entries(keep)

    def reset(self) -> None:
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, n: int) -> None:
        rel, pos = self._entries()
        if n >= len(rel) and self.path.exists():
            return
        del rel[n:]
        del pos[n:]
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
        """Release the append fd (inactive segments never append again)."""
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
