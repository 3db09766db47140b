"""Read results as file ranges: a fetch returns (fd, position, size) slices of segment files so the
server can `os.sendfile` them without copying through Python; `read_bytes()` is the fallback.

The fds stay valid while the segment is open; deleted segments keep their fds open for
file.delete.delay.ms (as Kafka delays deletion) so an in-flight sendfile never sees a reused fd.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.log._files import pread_upto
from kbroker.wire.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_batch_header

if TYPE_CHECKING:
    from kbroker.log.log_txn import AbortedTransaction

__all__ = ["FileRecords", "FetchDataInfo"]

_SCAN_CHUNK = 16 * 1024  # header scans of small batches: a few batches per pread


@dataclass(frozen=True, slots=True)
class FileRecords:
    """`size` bytes at `position` of the open file `fd`: whole record batches."""

    fd: int
    position: int
    size: int

    def read(self) -> bytes:
        return pread_upto(self.fd, self.size, self.position)

    def batch_headers(self) -> Iterator[tuple[int, BatchHeader]]:
        """(position within the range, header) of each complete batch, reading headers only:
        small batches a chunk at a time, large ones one header per pread, so a scan never copies
        the records of large batches (a share fetch keeps them as ranges for sendfile)."""
        pos, buf, buf_at, large = 0, b"", 0, False
        while self.size - pos >= BATCH_HEADER_SIZE:
            off = pos - buf_at
            if off + BATCH_HEADER_SIZE > len(buf):
                want = BATCH_HEADER_SIZE if large else min(_SCAN_CHUNK, self.size - pos)
                buf, buf_at, off = pread_upto(self.fd, want, self.position + pos), pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            header = parse_batch_header(buf, off)
            size = header.batch_length + LOG_OVERHEAD
            if pos + size > self.size:
                return
            yield pos, header
            large = size > _SCAN_CHUNK // 4
            pos += size


@dataclass(slots=True)
class FetchDataInfo:
    """What a Log.read returns. `records` are consecutive file ranges (one per segment touched);
    `first_entry_incomplete` is Kafka's flag for "the first batch did not fit max_bytes" (then
    `records` is empty); `aborted_transactions` are those overlapping `records` when the read
    asked for them (read_committed), else None."""

    fetch_offset: int
    records: list[FileRecords] = field(default_factory=list)
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTransaction] | None = None

    @property
    def size(self) -> int:
        return sum(r.size for r in self.records)

    def read_bytes(self) -> bytes:
        if len(self.records) == 1:
            return self.records[0].read()
        return b"".join(r.read() for r in self.records)
