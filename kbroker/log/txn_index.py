"""TransactionIndex: a segment's `.txnindex` of aborted transactions (Kafka's TransactionIndex and
AbortedTxn).

Entries are 34 bytes, big-endian: version i16 (0), producer id i64, first offset i64, last offset
i64 (the ABORT marker's offset), last stable offset i64 (the LSO right after the abort, so a read
knows where later segments may still hold an overlapping transaction). Entries are appended in
increasing last offset. Like Kafka the file is created on the first entry; a missing file is an
empty index. Entries are few (one per aborted transaction), so the index is read whole when
searched instead of being kept in memory; only whether it is empty is remembered, since every
entry is written through this object.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kbroker.log._files import as_path, pread_upto, write_all

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_INDEX_SUFFIX", "txn_index_file_name", "parse_aborted_txns"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


def txn_index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


class CorruptTxnIndexError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def parse_aborted_txns(data: bytes, source: object = "transaction index") -> list[AbortedTxn]:
    """The whole entries of a `.txnindex` file's content (a torn tail entry is ignored)."""
    usable = len(data) - len(data) % _ENTRY.size
    out = []
    for version, pid, first, last, lso in _ENTRY.iter_unpack(memoryview(data)[:usable]):
        if version > _VERSION:
            raise CorruptTxnIndexError(f"unexpected aborted transaction version {version} in {source}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    ENTRY_SIZE = _ENTRY.size  # 34

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = as_path(path)
        self.start_offset = start_offset
        self._fd: int | None = None
        self._last_offset: int | None = None  # of the newest entry, once known
        self._last_loaded = False

    # --- reading ----------------------------------------------------------------------------------

    def _read(self) -> bytes:
        if self._fd is not None:
            size = os.fstat(self._fd).st_size
            return pread_upto(self._fd, size, 0) if size else b""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every whole entry (a torn tail entry is ignored, as Kafka's iterator does)."""
        return parse_aborted_txns(self._read(), self.path)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether the
        search is complete (an entry's LSO reached the bound: no later segment can overlap)."""
        if self._newest_last_offset() is None:
            # Empty, as most indexes are: a read_committed fetch searches every segment from the one
            # it read to the end, so an empty one must cost no file access once known.
            return [], False
        out = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def sanity_check(self) -> None:
        """Kafka's check (no entry ends below the segment) plus whole entries: CorruptTxnIndexError."""
        if self.path.exists() and self.path.stat().st_size % _ENTRY.size:
            raise CorruptTxnIndexError(f"{self.path} does not hold whole entries")
        for txn in self.all_aborted_txns():
            if txn.last_offset < self.start_offset:
                raise CorruptTxnIndexError(
                    f"last offset of aborted transaction {txn} in {self.path} is below start offset {self.start_offset}"
                )

    # --- writing ----------------------------------------------------------------------------------

    def _writer(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _newest_last_offset(self) -> int | None:
        if not self._last_loaded:
            txns = self.all_aborted_txns()
            self._last_offset = txns[-1].last_offset if txns else None
            self._last_loaded = True
        return self._last_offset

    def append(self, txn: AbortedTxn) -> None:
        last = self._newest_last_offset()
        if last is not None and last >= txn.last_offset:
            raise ValueError(
                f"the last offset of appended transactions must increase: {txn.last_offset} is not above {last} "
                f"in {self.path}"
            )
        write_all(self._writer(), txn.pack())
        self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose last offset >= `offset` (and a torn tail)."""
        txns = self.all_aborted_txns()
        keep = 0
        while keep < len(txns) and txns[keep].last_offset < offset:
            keep += 1
        size = keep * _ENTRY.size
        if self._fd is not None:
            if os.fstat(self._fd).st_size != size:
                os.ftruncate(self._fd, size)
        elif self.path.exists() and self.path.stat().st_size != size:
            os.truncate(self.path, size)
        self._last_offset = txns[keep - 1].last_offset if keep else None
        self._last_loaded = True

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them from the log)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        elif self.path.exists():
            os.truncate(self.path, 0)
        self._last_offset = None
        self._last_loaded = True

    def replace_with(self, txns: list[AbortedTxn]) -> None:
        """Write exactly `txns` (the cleaner's new segment, from the segments it replaces)."""
        self.reset()
        if txns:
            write_all(self._writer(), b"".join(t.pack() for t in txns))
            self._last_offset = txns[-1].last_offset

    def fileno(self) -> int | None:
        """The open write fd, if entries were written since the index was opened."""
        return self._fd

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = Path(new_path)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._last_offset = None
        self._last_loaded = True
