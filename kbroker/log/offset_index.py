"""OffsetIndex: the sparse `{base_offset:020d}.index` file mapping offsets to log file positions.

Entries are Kafka's: relative offset u32 + position u32, big-endian, 8 bytes, both increasing.
The file handling (exactly-sized file, lazy in-memory entries) is IndexFile's.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from typing import NamedTuple

from kbroker.log._index_file import CorruptIndexError, IndexFile

__all__ = ["OffsetIndex", "OffsetPosition", "CorruptIndexError"]


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    ENTRY_SIZE = 8
    _ENTRY = struct.Struct(">II")
    _MIN_ENTRIES = 1
    _REL_COLUMN = 0  # columns: relative offsets, positions

    def _decode(self, data: bytes) -> tuple[array, array]:
        raw = array("I")
        raw.frombytes(data)
        if sys.byteorder == "little":
            raw.byteswap()
        return raw[0::2], raw[1::2]

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
        self._write_entry(relative, position)
