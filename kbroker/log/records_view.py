"""Read results as file ranges: a fetch returns (fd, position, size) slices of segment files so the
server can `os.sendfile` them without copying through Python; `read_bytes()` is the fallback.

The fds stay valid while the segment is open; deleted segments keep their fds open for
file.delete.delay.ms (as Kafka delays deletion) so an in-flight sendfile never sees a reused fd.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.log._files import pread_upto

if TYPE_CHECKING:
    from kbroker.log.log_txn import AbortedTransaction

__all__ = ["FileRecords", "FetchDataInfo"]


@dataclass(frozen=True, slots=True)
class FileRecords:
    """`size` bytes at `position` of the open file `fd`: whole record batches."""

    fd: int
    position: int
    size: int

    def read(self) -> bytes:
        return pread_upto(self.fd, self.size, self.position)


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
