"""LogSegment: one `{base_offset:020d}.log` file with its `.index`, `.timeindex` and `.txnindex`
(Kafka's LogSegment).

The log file is held open on one fd (O_APPEND) for the segment's life: appends are os.write of
already-framed batches, reads are os.pread or returned as file ranges for sendfile. Offsets in a
segment lie in [base_offset, base_offset + 2**31 - 1] so the indexes can store them relative.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from kbroker.errors import CorruptRecordError
from kbroker.log._files import as_path, pread_exact, pread_upto, write_all
from kbroker.log.offset_index import OffsetIndex
from kbroker.log.records_view import FetchDataInfo, FileRecords
from kbroker.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from kbroker.log.txn_index import TransactionIndex, txn_index_file_name
from kbroker.wire.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    decode_records,
    parse_batch_header,
)

__all__ = [
    "LogSegment",
    "LogOffsetPosition",
    "log_file_name",
    "index_file_name",
    "time_index_file_name",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "DELETED_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"  # a segment being written by the log cleaner
SWAP_SUFFIX = ".swap"  # a cleaned segment about to replace the segments it was cleaned from

_INT32_MAX = 2**31 - 1
_SCAN_CHUNK = 16 * 1024  # header scans: a few batches of small records per pread
_RECOVER_CHUNK = 1024 * 1024  # recovery: sequential reads of this size
_CRC_START = 21  # CRC-32C covers attributes..end


def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def time_index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{TIME_INDEX_SUFFIX}"


class LogOffsetPosition(NamedTuple):
    """A batch found by offset: its last offset, file position and size."""

    offset: int
    position: int
    size: int


def _create_if_missing(path: Path) -> bool:
    """Create an empty file at `path` unless there is one; whether there was (one syscall)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return True
    return False


class LogSegment:
    def __init__(
        self,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        now_ms: int,
        file_suffix: str = "",
    ) -> None:
        self.dir = as_path(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = self.dir / (log_file_name(base_offset) + file_suffix)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(
            self.dir / (index_file_name(base_offset) + file_suffix), base_offset, max_index_size
        )
        self.time_index = TimeIndex(
            self.dir / (time_index_file_name(base_offset) + file_suffix), base_offset, max_index_size
        )
        # Created on its first entry, as in Kafka: a missing file is an empty index.
        self.txn_index = TransactionIndex(self.dir / (txn_index_file_name(base_offset) + file_suffix), base_offset)
        # Kafka creates both index files with the segment and treats a missing one as damage.
        self._indexes_existed = _create_if_missing(self.offset_index.path) & _create_if_missing(self.time_index.path)
        self.created_ms = now_ms
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset: TimestampOffset | None = None  # lazily read from the indexes + tail
        self._rolling_based_timestamp: int | None = None  # first batch's max timestamp
        self._rolling_loaded = False
        self.closed = False

    @classmethod
    def open(cls, dir: Path, base_offset: int, *, index_interval_bytes: int, max_index_size: int, now_ms: int,
             file_suffix: str = ""):
        return cls(
            dir, base_offset, index_interval_bytes=index_interval_bytes, max_index_size=max_index_size, now_ms=now_ms,
            file_suffix=file_suffix,
        )

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size})"

    # --- basic properties -------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    def indexes_exist(self) -> bool:
        """Whether both index files were there when the segment was opened."""
        return self._indexes_existed

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset().offset

    def _max_timestamp_and_offset(self) -> TimestampOffset:
        if self._max_ts_and_offset is None:
            self._max_ts_and_offset = self._read_largest_timestamp()
        return self._max_ts_and_offset

    @property
    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    @property
    def largest_timestamp(self) -> int:
        """Kafka: the max timestamp of the segment, or the log file's mtime when it has none."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return int(os.fstat(self.fd).st_mtime * 1000)

    def _read_largest_timestamp(self) -> TimestampOffset:
        # The last time-index entry is the max up to its offset; scan only the batches after it.
        last = self.time_index.last_entry()
        best = last
        start = self.offset_index.lookup(last.offset).position
        for _pos, h in self.iter_batches(start):
            if h.max_timestamp > best.timestamp:
                best = TimestampOffset(h.max_timestamp, h.last_offset)
        return best

    @property
    def rolling_based_timestamp(self) -> int | None:
        if not self._rolling_loaded:
            self._rolling_loaded = True
            if self._size > 0:
                for _pos, h in self.iter_batches(0):
                    self._rolling_based_timestamp = h.max_timestamp
                    break
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka: the age of the segment by record time (first batch vs. incoming), else wall time."""
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def should_roll(
        self,
        *,
        max_segment_ms: int,
        max_segment_bytes: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now_ms: int,
    ) -> bool:
        reached_roll_ms = self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > max_segment_ms
        size = self._size
        return (
            size > max_segment_bytes - messages_size
            or (size > 0 and reached_roll_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    # --- batch scanning ---------------------------------------------------------------------------

    def iter_batches(self, start_position: int = 0, end_position: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the complete batches from `start_position` (a batch boundary) to the end.

        Reads chunks, so scanning small batches costs one pread per ~16 KiB. A malformed header
        raises CorruptRecordError (segments are recovered before use, so this means disk damage).
        """
        end = self._size if end_position is None else min(end_position, self._size)
        pos = start_position
        buf = b""
        buf_start = pos
        fd = self.fd
        while end - pos >= BATCH_HEADER_SIZE:
            off = pos - buf_start
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = pread_upto(fd, min(_SCAN_CHUNK, end - pos), pos)
                buf_start = pos
                off = 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            h = parse_batch_header(buf, off)
            nxt = pos + h.batch_length + LOG_OVERHEAD
            if nxt > end:
                return
            yield pos, h
            pos = nxt

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset >= `offset` (Kafka's translateOffset), or None."""
        mapping = self.offset_index.lookup(offset)
        for pos, h in self.iter_batches(max(mapping.position, starting_position)):
            last = h.base_offset + h.last_offset_delta
            if last >= offset:
                return LogOffsetPosition(last, pos, h.batch_length + LOG_OVERHEAD)
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch in the segment, or base_offset when empty."""
        return self.scan_tail()[0]

    def scan_tail(self) -> tuple[int, int]:
        """(next offset, end position of the last complete batch), scanning from the last index entry."""
        last = self.offset_index.last_entry()
        next_offset = self.base_offset
        end = last.position
        for pos, h in self.iter_batches(last.position):
            next_offset = h.base_offset + h.last_offset_delta + 1
            end = pos + h.batch_length + LOG_OVERHEAD
        if end == 0 and last.position == 0:
            return self.base_offset, 0
        return next_offset, end

    def base_offset_at(self, position: int) -> int | None:
        """The base offset of the batch starting at `position` (a batch boundary), or None when
        no batch does (the segment's end)."""
        if position >= self._size:
            return None
        return int.from_bytes(pread_exact(self.fd, 8, position), "big", signed=True)

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        try:
            return pread_exact(self.fd, header.batch_length + LOG_OVERHEAD, position)
        except EOFError as e:
            raise CorruptRecordError(f"{self.log_path}: {e}") from None

    # --- append / read ----------------------------------------------------------------------------

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int, records) -> None:
        """Append already-validated batches (bytes-like) whose last offset is `largest_offset`.

        One os.write; an index entry when more than index_interval_bytes were appended since the
        last one (mapping `largest_offset` to the position where `records` start, as Kafka does).
        """
        n = len(records)
        if n == 0:
            return
        if not self.can_convert_to_relative_offset(largest_offset):
            raise ValueError(
                f"offset {largest_offset} cannot be stored relative to segment base offset {self.base_offset}"
            )
        position = self._size
        if position == 0:
            self._rolling_based_timestamp = largest_timestamp
            self._rolling_loaded = True
        try:
            write_all(self.fd, records)
        except BaseException:
            # Whatever reached the file is a torn tail; cut it so the segment stays consistent.
            os.ftruncate(self.fd, position)
            raise
        self._size = position + n
        current = self._max_timestamp_and_offset()
        if largest_timestamp > current.timestamp:
            current = self._max_ts_and_offset = TimestampOffset(largest_timestamp, offset_of_max_timestamp)
        # The full check only matters for cleaned segments: an active segment rolls before its index fills.
        if (
            self._bytes_since_last_index_entry > self.index_interval_bytes
            and not self.offset_index.is_full()
            and not self.time_index.is_full()
        ):
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(current.timestamp, current.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += n

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Whole batches from the one containing `start_offset`, within `max_size` bytes and before
        file position `max_position` (default: the segment end). None when `start_offset` is past
        the last batch. KIP-74: with `min_one_message` the first batch is returned even if larger
        than `max_size`. Unlike Kafka (which may end in a partial batch) only whole batches return.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size}")
        mapping = self.translate_offset(start_offset)
        if mapping is None:
            return None
        start = mapping.position
        first_size = mapping.size
        adjusted = max(max_size, first_size) if min_one_message else max_size
        limit_pos = self._size if max_position is None else min(max_position, self._size)
        fetch_size = min(limit_pos - start, adjusted)
        info = FetchDataInfo(start_offset, [], adjusted < first_size)
        if fetch_size < first_size:
            return info
        end = self._last_batch_boundary(start, start + fetch_size)
        info.records.append(FileRecords(self.fd, start, end - start))
        return info

    def _last_batch_boundary(self, start: int, limit: int) -> int:
        """The largest batch end <= `limit`, scanning from `start` (a boundary, first batch fits)."""
        if limit >= self._size:
            return self._size
        # Index entries sit on batch boundaries: start the walk from the nearest one below limit.
        pos = max(start, self.offset_index.lookup_by_position(limit).position)
        end = pos
        for p, h in self.iter_batches(pos, limit):
            end = p + h.batch_length + LOG_OVERHEAD
        return end

    # --- timestamps -------------------------------------------------------------------------------

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp` and offset >=
        `starting_offset` (Kafka's findOffsetByTimestamp), or None."""
        ts_entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_entry.offset, starting_offset)).position
        for pos, h in self.iter_batches(position):
            if h.max_timestamp >= timestamp:
                for rec in decode_records(self.read_batch(pos, h), 0, h):
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.offset, rec.timestamp
        return None

    # --- recovery / truncation --------------------------------------------------------------------

    def recover(self, allow_offset_gaps: bool = False) -> int:
        """Rebuild both indexes from the log, keeping the longest valid prefix of batches (size,
        CRC, magic, offsets contiguous from base_offset and storable relative to it); truncate the
        rest. Returns the number of bytes truncated. The transaction index is emptied: it needs
        the producer state, so the log rebuilds it (Kafka's recover does it here, given that state).

        With `allow_offset_gaps` (a compacted log) offsets need only increase: the cleaner removes
        records, so a batch may start past the previous one's end or the segment's base offset."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        file_size = os.fstat(self.fd).st_size
        valid = 0
        last_index_entry = 0
        max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        expected_offset = self.base_offset
        first_ts: int | None = None
        buf = b""
        buf_start = 0
        fd = self.fd
        while file_size - valid >= BATCH_HEADER_SIZE:
            off = valid - buf_start
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = pread_upto(fd, min(_RECOVER_CHUNK, file_size - valid), valid)
                buf_start, off = valid, 0
            try:
                h = parse_batch_header(buf, off)
            except CorruptRecordError:
                break
            size = h.batch_length + LOG_OVERHEAD
            end = valid + size
            if (
                end > file_size
                or (h.base_offset < expected_offset if allow_offset_gaps else h.base_offset != expected_offset)
                or h.last_offset_delta < 0
                or not self.can_convert_to_relative_offset(h.base_offset + h.last_offset_delta)
            ):
                break
            if off + size <= len(buf):
                crc = crc32c(memoryview(buf)[off + _CRC_START : off + size])
            elif size <= _RECOVER_CHUNK * 16:
                buf = pread_upto(fd, max(size, min(_RECOVER_CHUNK, file_size - valid)), valid)
                buf_start, off = valid, 0
                crc = crc32c(memoryview(buf)[_CRC_START:size])
            else:  # a huge batch: checksum it in chunks rather than holding it whole
                crc = 0
                p = valid + _CRC_START
                while p < end:
                    chunk = pread_upto(fd, min(_RECOVER_CHUNK, end - p), p)
                    if not chunk:
                        break
                    crc = crc32c(chunk, crc)
                    p += len(chunk)
            if crc != h.crc:
                break
            last_offset = h.base_offset + h.last_offset_delta
            if first_ts is None:
                first_ts = h.max_timestamp
            if h.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(h.max_timestamp, last_offset)
            if valid - last_index_entry > self.index_interval_bytes:
                self.offset_index.append(last_offset, valid)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                last_index_entry = valid
            valid = end
            expected_offset = last_offset + 1
        truncated = file_size - valid
        if truncated:
            os.ftruncate(fd, valid)
        self._size = valid
        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self._max_ts_and_offset = max_ts
        self._rolling_based_timestamp = first_ts
        self._rolling_loaded = True
        self._bytes_since_last_index_entry = valid - last_index_entry
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove the batch containing `offset` and everything after; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        truncated = 0
        if mapping is not None:
            truncated = self._size - mapping.position
            os.ftruncate(self.fd, mapping.position)
            self._size = mapping.position
        if self._size == 0:
            self._rolling_based_timestamp = None
            self._rolling_loaded = True
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset = None
        return truncated

    # --- lifecycle --------------------------------------------------------------------------------

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def on_become_inactive(self) -> None:
        """At roll: write the final time-index entry (Kafka does too) and drop index write fds."""
        ts = self._max_timestamp_and_offset()
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self.offset_index.close_writer()
        self.time_index.close_writer()

    def close(self) -> None:
        if self.closed:
            return
        ts = self._max_timestamp_and_offset()
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self.close_handlers()

    def close_handlers(self) -> None:
        """Close fds without writing anything (used on already-deleted files)."""
        if self.closed:
            return
        self.closed = True
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        os.close(self.fd)

    def rename_to_deleted(self) -> None:
        """Kafka's first step of async deletion: files get the `.deleted` suffix; fds stay open."""
        new = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        if self.log_path.exists():
            os.replace(self.log_path, new)
        self.log_path = new
        self.offset_index.close_writer()
        self.time_index.close_writer()
        self.offset_index.rename(self.offset_index.path.with_name(self.offset_index.path.name + DELETED_SUFFIX))
        self.time_index.rename(self.time_index.path.with_name(self.time_index.path.name + DELETED_SUFFIX))
        self.txn_index.rename(self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX))

    def change_file_suffixes(self, old: str, new: str) -> None:
        """Rename the segment's files from suffix `old` to `new` (Kafka's cleaned -> swap -> live
        steps); open fds are unaffected."""
        for index in (self.offset_index, self.time_index, self.txn_index):
            name = index.path.name
            if name.endswith(old):
                index.rename(index.path.with_name(name[: len(name) - len(old)] + new))
        name = self.log_path.name
        if name.endswith(old):
            new_path = self.log_path.with_name(name[: len(name) - len(old)] + new)
            os.replace(self.log_path, new_path)
            self.log_path = new_path

    def move_to_dir(self, dir: Path) -> None:
        """Follow a rename of the partition directory (fds are unaffected)."""
        self.dir = as_path(dir)
        self.log_path = self.dir / self.log_path.name
        self.offset_index.path = self.dir / self.offset_index.path.name
        self.time_index.path = self.dir / self.time_index.path.name
        self.txn_index.path = self.dir / self.txn_index.path.name

    def delete(self) -> None:
        self.close_handlers()
        for p in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            p.unlink(missing_ok=True)
