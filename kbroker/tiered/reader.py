"""Finding batches and timestamps in an archived segment, through a byte-range reader.

What `LogSegment.read` and `find_offset_by_timestamp` do for a local segment, over an archived
copy: the segment's own offset and time indexes (read whole: they are small) say where to start,
and `read_range(position, size)` fetches bytes — a pread on the directory store, a ranged GET on
S3 — in a few large windows rather than one call per batch header. Only whole batches are
returned, within `max_bytes` unless the first batch alone is larger and `min_one_message` lets it
through (KIP-74), as for local reads. No I/O of its own: the caller runs this in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kbroker.log.offset_index import OffsetIndex
from kbroker.log.time_index import TimeIndex
from kbroker.wire.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, decode_records, parse_batch_header

__all__ = ["BatchRange", "ReadRange", "read_batches", "find_offset_by_timestamp", "MIN_WINDOW"]

ReadRange = Callable[[int, int], bytes]  # (position, size) -> up to size bytes (fewer only at the end)
MIN_WINDOW = 64 * 1024  # a header scan past the current window fetches at least this much
MAX_WINDOW = 8 * 1024 * 1024  # a longer scan moves the window instead of growing it


@dataclass(frozen=True, slots=True)
class BatchRange:
    """Whole batches at [position, position + size) of the segment file; `next_offset` is the
    offset after the last of them (the read's upper bound for aborted transactions); `data` holds
    their bytes when the window read them already (else None)."""

    position: int
    size: int
    next_offset: int
    first_entry_incomplete: bool = False
    data: bytes | None = None


class _Window:
    """Bytes of the segment fetched so far: one contiguous window, extended or moved as needed."""

    def __init__(self, read_range: ReadRange, segment_size: int) -> None:
        self.read_range = read_range
        self.segment_size = segment_size
        self.start = 0
        self.data = b""

    def ensure(self, position: int, size: int, prefetch: int = 0) -> bool:
        """Make [position, position + size) available; False past the segment's end."""
        if position + size > self.segment_size:
            return False
        end = self.start + len(self.data)
        if self.start <= position and position + size <= end:
            return True
        want = min(max(size, prefetch, MIN_WINDOW), self.segment_size - position)
        if self.start <= position <= end and position + want - self.start <= max(MAX_WINDOW, want + prefetch):
            more = self.read_range(end, position + want - end)
            self.data += more
        else:
            self.start, self.data = position, self.read_range(position, want)
        return position + size <= self.start + len(self.data)

    def header(self, position: int, prefetch: int = 0) -> BatchHeader | None:
        if not self.ensure(position, BATCH_HEADER_SIZE, prefetch):
            return None
        return parse_batch_header(self.data, position - self.start)

    def bytes(self, position: int, size: int) -> bytes | None:
        end = self.start + len(self.data)
        if self.start <= position and position + size <= end:
            return self.data[position - self.start:position - self.start + size]
        return None


def _first_batch_at_or_after(window: _Window, index: OffsetIndex, offset: int,
                             prefetch: int) -> tuple[int, BatchHeader] | None:
    position = index.lookup(offset).position
    while True:
        h = window.header(position, prefetch)
        if h is None:
            return None
        if h.base_offset + h.last_offset_delta >= offset:
            return position, h
        position += h.batch_length + LOG_OVERHEAD


def read_batches(index: OffsetIndex, read_range: ReadRange, segment_size: int, end_offset: int, fetch_offset: int,
                 max_bytes: int, min_one_message: bool) -> BatchRange | None:
    """Whole batches from the one holding `fetch_offset`; None when the segment holds no batch at
    or past it. `end_offset` is the segment's last offset."""
    window = _Window(read_range, segment_size)
    found = _first_batch_at_or_after(window, index, fetch_offset, max_bytes + LOG_OVERHEAD)
    if found is None:
        return None
    start, h = found
    first_size = h.batch_length + LOG_OVERHEAD
    limit = max(max_bytes, first_size) if min_one_message else max_bytes
    if first_size > limit:
        return BatchRange(start, 0, h.base_offset, first_entry_incomplete=True)
    end = start + first_size
    next_offset = h.base_offset + h.last_offset_delta + 1
    while True:
        nh = window.header(end, limit - (end - start))
        if nh is None:
            break
        size = nh.batch_length + LOG_OVERHEAD
        if end + size - start > limit:
            next_offset = nh.base_offset
            break
        end += size
        next_offset = nh.base_offset + nh.last_offset_delta + 1
    if end >= segment_size:
        next_offset = max(next_offset, end_offset + 1)
    return BatchRange(start, end - start, next_offset, data=window.bytes(start, end - start))


def find_offset_by_timestamp(offset_index: OffsetIndex, time_index: TimeIndex, read_range: ReadRange,
                             segment_size: int, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= `timestamp` and offset >=
    `starting_offset` (Kafka's findOffsetByTimestamp over the archived indexes), or None."""
    window = _Window(read_range, segment_size)
    entry = time_index.lookup(timestamp)
    position = offset_index.lookup(max(entry.offset, starting_offset)).position
    while True:
        h = window.header(position)
        if h is None:
            return None
        size = h.batch_length + LOG_OVERHEAD
        if h.max_timestamp >= timestamp and h.base_offset + h.last_offset_delta >= starting_offset:
            if not window.ensure(position, size):
                return None
            for rec in decode_records(window.bytes(position, size), 0, h):
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    return rec.offset, rec.timestamp
        position += size
