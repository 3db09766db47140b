"""TimeIndex: the sparse `{base_offset:020d}.timeindex` file mapping max timestamps to offsets.

Entries are Kafka's: timestamp i64 + relative offset u32, big-endian, 12 bytes. An entry (t, o)
means "the largest timestamp up to offset o's batch is t"; only strictly increasing timestamps are
appended. As in Kafka, one slot is kept free so the final entry can always be written on roll and
close. The file handling (exactly-sized file, lazy in-memory entries) is IndexFile's.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from typing import NamedTuple

from kbroker.log._index_file import CorruptIndexError, IndexFile

__all__ = ["TimeIndex", "TimestampOffset", "NO_TIMESTAMP"]

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    ENTRY_SIZE = 12
    _ENTRY = struct.Struct(">qI")
    _MIN_ENTRIES = 2
    _REL_COLUMN = 1  # columns: timestamps, relative offsets

    def _decode(self, data: bytes) -> tuple[array, array]:
        ts = array("q")
        rel = array("I")
        for t, r in self._ENTRY.iter_unpack(data):
            ts.append(t)
            rel.append(r)
        return ts, rel

    def sanity_check(self) -> None:
        ts, rel = self._entries()
        if any(ts[i] >= ts[i + 1] or rel[i] > rel[i + 1] for i in range(len(ts) - 1)):
            raise CorruptIndexError(f"{self.path}: entries not increasing")

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
            self._write_entry(timestamp, relative)
