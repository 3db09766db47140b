"""IndexFile: what OffsetIndex and TimeIndex share, the file of fixed-size big-endian entries.

Kafka preallocates an index file to segment.index.bytes and mmaps it, trimming it on roll/close;
kbroker keeps the file exactly as long as its entries (what Kafka itself leaves after a clean close,
and what it reads back as "all entries"), holds the entries in memory as two parallel `array`
columns, loaded lazily on first use so idle segments cost nothing at startup, and writes new entries
to the file in groups (at flush, close, truncation, or every `WRITE_BEHIND` bytes): Kafka's mmap'd
index costs no syscall per entry either. Entries lost in a crash only make the index sparser, which
lookups tolerate, and recovery rebuilds the indexes of every segment past the recovery point.
A subclass gives the entry layout (`ENTRY_SIZE`, `_ENTRY`, `_decode`), which column holds the
offset relative to the base offset (`_REL_COLUMN`), and its own lookups and append rules.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from kbroker.log._files import as_path, write_all

__all__ = ["IndexFile", "CorruptIndexError"]


class CorruptIndexError(Exception):
    """An index file fails its sanity check; the segment rebuilds it from the log."""


class IndexFile:
    ENTRY_SIZE: int
    _ENTRY: struct.Struct
    _MIN_ENTRIES: int  # max_entries never drops below this, however small max_index_size is
    _REL_COLUMN: int  # the column of offsets relative to base_offset (0 or 1)

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = as_path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.max_entries = max(max_index_size // self.ENTRY_SIZE, self._MIN_ENTRIES)
        self._columns: tuple[array, array] | None = None  # loaded lazily
        self._fd: int | None = None
        self._pending = bytearray()  # entries in the columns, not yet in the file

    @classmethod
    def from_bytes(cls, data: bytes, base_offset: int):
        """A read-only index over `data`, an index file's content (an archived copy): lookups only."""
        index = cls(Path(f"<archived {base_offset}>"), base_offset, max(len(data), cls.ENTRY_SIZE * cls._MIN_ENTRIES))
        index._columns = index._decode(data[: len(data) - len(data) % cls.ENTRY_SIZE])
        return index

    def to_bytes(self) -> bytes:
        """The entries as the file holds them (including those not written yet)."""
        a, b = self._entries()
        pack = self._ENTRY.pack
        return b"".join(pack(x, y) for x, y in zip(a, b))

    # --- loading -------------------------------------------------------------------------------

    def _decode(self, data: bytes) -> tuple[array, array]:
        """Whole big-endian entries -> the two columns."""
        raise NotImplementedError

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        # Like Kafka, a torn tail entry is dropped (size rounded down to whole entries).
        if len(data) % self.ENTRY_SIZE:
            data = data[: len(data) - len(data) % self.ENTRY_SIZE]
            os.truncate(self.path, len(data))
        self._columns = self._decode(data)

    def _entries(self) -> tuple[array, array]:
        if self._columns is None:
            self._load()
        return self._columns  # type: ignore[return-value]

    @property
    def entries(self) -> int:
        return len(self._entries()[0])

    # --- mutation -------------------------------------------------------------------------------

    WRITE_BEHIND = 4096

    def _write_entry(self, first: int, second: int) -> None:
        """Append one entry to the columns and, soon, to the file (the caller has checked it)."""
        a, b = self._entries()
        self._pending += self._ENTRY.pack(first, second)
        a.append(first)
        b.append(second)
        if len(self._pending) >= self.WRITE_BEHIND:
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        write_all(self._fd, self._pending)
        self._pending = bytearray()

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        rel = self._entries()[self._REL_COLUMN]
        relative = offset - self.base_offset
        keep = 0 if relative <= 0 else bisect_right(rel, relative - 1)
        self._truncate_to_entries(keep)

    def reset(self) -> None:
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, n: int) -> None:
        self._write_pending()
        a, b = self._entries()
        if n >= len(a) and self.path.exists():
            return
        del a[n:]
        del b[n:]
        if self._fd is not None:
            os.ftruncate(self._fd, n * self.ENTRY_SIZE)
        else:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, n * self.ENTRY_SIZE)
            finally:
                os.close(fd)

    def flush(self) -> None:
        self._write_pending()
        if self._fd is not None:
            os.fsync(self._fd)

    def close_writer(self) -> None:
        """Release the append fd (inactive segments never append again)."""
        self._write_pending()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    close = close_writer

    def rename(self, path: Path) -> None:
        self._write_pending()
        if self.path.exists():
            os.replace(self.path, path)
        self.path = as_path(path)

    def delete(self) -> None:
        self._pending = bytearray()
        self.close_writer()
        self.path.unlink(missing_ok=True)
