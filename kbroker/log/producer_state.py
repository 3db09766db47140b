"""ProducerStateManager: per-partition idempotent/transactional producer state (Kafka's
ProducerStateManager, ProducerAppendInfo and ProducerStateEntry) and its `.snapshot` files.

Per producer id: epoch, the metadata of the last 5 batches (for duplicate detection), the last
timestamp, coordinator epoch and the first offset of an ongoing transaction. Appends first build
a `ProducerAppendInfo` per producer (validation against a copy), and the manager commits them
only after the batches are written, so a failed append leaves the state untouched.

Transactions (KIP-98): a producer's first transactional batch starts its transaction, its
COMMIT/ABORT marker ends it (a `CompletedTxn`). Like Kafka, the manager keeps the ongoing
transactions by first offset, and completed ones whose marker the high watermark has not passed
yet ("unreplicated"): both hold the first unstable offset, hence the last stable offset.

Snapshot files `{offset:020d}.snapshot` use Kafka's format (version 1): version i16, crc u32
(CRC-32C of everything after it), then an i32-counted array of entries
(producer_id i64, epoch i16, last_sequence i32, last_offset i64, offset_delta i32, timestamp i64,
coordinator_epoch i32, current_txn_first_offset i64). As in Kafka only the last batch of each
producer survives a snapshot.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c

from kbroker.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kbroker.log._files import as_path, write_all
from kbroker.wire.control import EndTransactionMarker
from kbroker.wire.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

__all__ = [
    "ActiveProducer",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerStateEntry",
    "ProducerAppendInfo",
    "ProducerStateManager",
    "SNAPSHOT_SUFFIX",
    "snapshot_file_name",
    "NUM_BATCHES_TO_RETAIN",
]

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
_SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hI")
_SNAP_COUNT = struct.Struct(">i")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
_INT32_MAX = 2**31 - 1


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True, frozen=True)
class CompletedTxn:
    """A transaction ended by a marker: `last_offset` is the marker's offset (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # -1: no ongoing transaction

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for b in self.batches:
            if b.first_seq == first and b.last_seq == last:
                return b
        return None

    def _maybe_update_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch


class ActiveProducer(NamedTuple):
    """A copy of what DescribeProducers reports of one producer (Kafka's UnifiedLog.activeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1 before its first batch
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no ongoing transaction


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerAppendInfo:
    """Pending changes for one producer during one append (Kafka's ProducerAppendInfo).

    `validate` is the client-origin path: epoch and sequence checks raise Kafka's errors.
    Replication and log replay apply batches as they are.
    """

    def __init__(self, producer_id: int, current: ProducerStateEntry | None, *, validate: bool,
                 check_sequence: bool = True) -> None:
        self.producer_id = producer_id
        self.validate = validate
        # the coordinators' own appends (transactional offset commits) carry no client sequence
        self.check_sequence = check_sequence
        self._current_epoch = current.producer_epoch if current else NO_PRODUCER_EPOCH
        self.entry = current.copy() if current else ProducerStateEntry(producer_id)
        self.started_txns: list[int] = []  # first offsets of transactions begun by this append

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        entry = self.entry
        if self.validate:
            if epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"epoch of producer {self.producer_id} at offset {first_offset} is {epoch}, "
                    f"which is smaller than the last seen epoch {entry.producer_epoch}"
                )
            if not self.check_sequence:
                pass
            elif epoch != entry.producer_epoch:
                if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"invalid sequence number for new epoch of producer {self.producer_id} at offset "
                        f"{first_offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                        f"{entry.producer_epoch} (current producer epoch)"
                    )
            elif not (self._current_epoch == NO_PRODUCER_EPOCH or _in_sequence(entry.last_seq, first_seq)):
                # An unknown producer (e.g. its batches were deleted, KIP-360) may start anywhere.
                raise OutOfOrderSequenceError(
                    f"out of order sequence number for producer {self.producer_id} at offset {first_offset}: "
                    f"{first_seq} (incoming seq. number), {entry.last_seq} (current end sequence number)"
                )
            if entry.current_txn_first_offset >= 0 and not is_transactional:
                raise InvalidTxnStateError(
                    f"expected transactional write from producer {self.producer_id} at offset {first_offset}"
                )
        entry._maybe_update_epoch(epoch)
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, last_timestamp))
        entry.last_timestamp = last_timestamp
        if is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.started_txns.append(first_offset)

    def append_end_txn_marker(
        self, marker: EndTransactionMarker, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """A COMMIT/ABORT marker at `offset` ends the ongoing transaction (Kafka's
        appendEndTxnMarker). Validated appends (the coordinator's WriteTxnMarkers) fail on an older
        producer epoch (INVALID_PRODUCER_EPOCH) or an older coordinator epoch
        (TRANSACTION_COORDINATOR_FENCED). A marker without data before it completes nothing."""
        entry = self.entry
        if self.validate:
            if epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"epoch of producer {self.producer_id} at offset {offset} is {epoch}, "
                    f"which is smaller than the last seen epoch {entry.producer_epoch}"
                )
            if entry.coordinator_epoch > marker.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                    f"{marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)"
                )
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, entry.current_txn_first_offset, offset, marker.is_abort)
        entry._maybe_update_epoch(epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = timestamp
        entry.current_txn_first_offset = -1
        return completed

    def append_batch(
        self, header: BatchHeader, first_offset: int | None = None, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Apply one batch; `first_offset` overrides header.base_offset (leader appends decide
        offsets before patching the buffer). A control batch needs its decoded `marker`; without
        one (an emptied control batch, or another control type) it changes nothing, as in Kafka."""
        base = header.base_offset if first_offset is None else first_offset
        if header.is_control:
            if marker is None:
                return None
            return self.append_end_txn_marker(marker, header.producer_epoch, base, header.max_timestamp)
        else:
            self.append_data_batch(
                header.producer_epoch,
                header.base_sequence,
                header.last_sequence,
                header.max_timestamp,
                base,
                base + header.last_offset_delta,
                header.is_transactional,
            )
            return None


def _snapshot_offsets(names: Iterable[str]) -> list[int]:
    return sorted(int(name[: -len(SNAPSHOT_SUFFIX)]) for name in names
                  if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit())


class ProducerStateManager:
    def __init__(self, dir: Path) -> None:
        self.dir = as_path(dir)
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # state covers the log up to (excluding) this offset
        self._snapshot_offsets: list[int] | None = None  # listed on first use (or given by `known_files`)
        self.ongoing_txns: dict[int, int] = {}  # first offset -> producer id
        # Completed transactions whose marker is not below the high watermark yet:
        # first offset -> (producer id, marker offset). They stay unstable until it passes.
        self.unreplicated_txns: dict[int, tuple[int, int]] = {}

    # --- state ------------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def is_empty(self) -> bool:
        return not self.producers

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer the state holds (until producer.id.expiration.ms drops it), by id."""
        return [ActiveProducer(pid, e.producer_epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                               e.current_txn_first_offset)
                for pid, e in sorted(self.producers.items())]

    def prepare_update(self, producer_id: int, *, validate: bool, check_sequence: bool = True) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self.producers.get(producer_id), validate=validate,
                                  check_sequence=check_sequence)

    def update(self, info: ProducerAppendInfo) -> None:
        self.producers[info.producer_id] = info.entry
        for first in info.started_txns:
            self.ongoing_txns[first] = info.producer_id
        info.started_txns = []

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once `completed` is done (Kafka: computed before `complete_txn`, written into the
        transaction index): the first offset of the earliest other ongoing transaction, else the
        offset after the marker."""
        others = [first for first, pid in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        if self.ongoing_txns.pop(completed.first_offset, None) is None:
            raise ValueError(f"attempted to complete transaction {completed}, which was not started")
        self.unreplicated_txns[completed.first_offset] = (completed.producer_id, completed.last_offset)

    def apply_batch(self, header: BatchHeader, marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Apply one batch read back from the log (no validation) and return the transaction it
        completes; the caller indexes an abort, then calls `complete_txn`."""
        completed = None
        if header.producer_id >= 0:
            info = self.prepare_update(header.producer_id, validate=False)
            completed = info.append_batch(header, marker=marker)
            self.update(info)
        self.map_end_offset = header.base_offset + header.last_offset_delta + 1
        return completed

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_txns(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_txns(log_start_offset)
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset

    def _remove_unreplicated_txns(self, offset: int) -> None:
        for first in [f for f, (_pid, last) in self.unreplicated_txns.items() if last < offset]:
            del self.unreplicated_txns[first]

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def replay(self, batches, *, end_offset: int | None = None) -> None:
        """Apply (header, marker or None) pairs read back from the log (no validation)."""
        for h, marker in batches:
            if end_offset is not None and h.base_offset >= end_offset:
                break
            completed = self.apply_batch(h, marker)
            if completed is not None:
                self.complete_txn(completed)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest ongoing or unreplicated transaction (Kafka's
        firstUnstableOffset), None when there is none."""
        if not self.ongoing_txns:
            return min(self.unreplicated_txns) if self.unreplicated_txns else None
        first = min(self.ongoing_txns)
        return min(first, min(self.unreplicated_txns)) if self.unreplicated_txns else first

    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest transaction without a marker."""
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's producer.id.expiration.ms: forget idle producers without an ongoing transaction."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()

    def _load_entries(self, entries: dict[int, ProducerStateEntry]) -> None:
        self.producers = entries
        self.ongoing_txns = {
            e.current_txn_first_offset: pid for pid, e in entries.items() if e.current_txn_first_offset >= 0
        }

    # --- snapshots --------------------------------------------------------------------------------

    @property
    def _snapshots(self) -> list[int]:
        """The snapshot files' offsets, ascending (the list is kept current as files come and go)."""
        if self._snapshot_offsets is None:
            self._snapshot_offsets = _snapshot_offsets(os.listdir(self.dir) if self.dir.exists() else ())
        return self._snapshot_offsets

    def known_files(self, names: Iterable[str]) -> None:
        """The log dir's file names, just listed by the log's load: the snapshots are not listed again."""
        self._snapshot_offsets = _snapshot_offsets(names)

    def snapshot_path(self, offset: int) -> Path:
        return self.dir / snapshot_file_name(offset)

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write the state at map_end_offset, unless a snapshot at that offset exists already."""
        offset = self.map_end_offset
        if offset in self._snapshots:
            return None
        path = self.snapshot_path(offset)
        body = bytearray(_SNAP_COUNT.pack(len(self.producers)))
        for e in self.producers.values():
            if e.batches:
                last = e.batches[-1]
                last_seq, last_offset = last.last_seq, last.last_offset
                offset_delta = last.last_offset - last.first_offset
            else:
                last_seq, last_offset, offset_delta = NO_SEQUENCE, -1, 0
            body += _SNAP_ENTRY.pack(
                e.producer_id, e.producer_epoch, last_seq, last_offset, offset_delta, e.last_timestamp,
                e.coordinator_epoch, e.current_txn_first_offset,
            )
        data = _SNAP_HEADER.pack(_SNAPSHOT_VERSION, crc32c(body)) + body
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if offset not in self._snapshots:
            self._snapshots.append(offset)
            self._snapshots.sort()
        return path

    @staticmethod
    def read_snapshot(path: Path) -> dict[int, ProducerStateEntry]:
        """Parse a snapshot file; ValueError when it is corrupt."""
        data = path.read_bytes()
        if len(data) < _SNAP_HEADER.size + _SNAP_COUNT.size:
            raise ValueError(f"snapshot {path} too short")
        version, crc = _SNAP_HEADER.unpack_from(data, 0)
        if version != _SNAPSHOT_VERSION:
            raise ValueError(f"snapshot {path}: unknown version {version}")
        body = memoryview(data)[_SNAP_HEADER.size :]
        if crc32c(body) != crc:
            raise ValueError(f"snapshot {path}: CRC mismatch")
        (count,) = _SNAP_COUNT.unpack_from(body, 0)
        if count < 0 or len(body) != _SNAP_COUNT.size + count * _SNAP_ENTRY.size:
            raise ValueError(f"snapshot {path}: {count} entries do not match its size")
        out: dict[int, ProducerStateEntry] = {}
        for pid, epoch, last_seq, last_offset, offset_delta, ts, coord_epoch, txn_first in _SNAP_ENTRY.iter_unpack(
            body[_SNAP_COUNT.size :]
        ):
            e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=ts,
                                   current_txn_first_offset=txn_first)
            if last_offset >= 0:
                if last_seq < 0:
                    first_seq = NO_SEQUENCE
                elif last_seq < offset_delta:  # the batch wrapped the sequence space
                    first_seq = _INT32_MAX - (offset_delta - last_seq) + 1
                else:
                    first_seq = last_seq - offset_delta
                e.batches.append(BatchMetadata(first_seq, last_seq, last_offset - offset_delta, last_offset, ts))
            out[pid] = e
        return out

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Drop snapshots outside [log_start_offset, log_end_offset], then load the newest valid one
        (deleting corrupt ones). Afterwards map_end_offset says where replay must start."""
        for off in list(self._snapshots):
            if off > log_end_offset or off < log_start_offset:
                self.delete_snapshot(off)
        self.clear()
        self.map_end_offset = log_start_offset
        while self._snapshots:
            off = self._snapshots[-1]
            try:
                self._load_entries(self.read_snapshot(self.snapshot_path(off)))
            except (OSError, ValueError, struct.error):
                self.delete_snapshot(off)
                continue
            self.map_end_offset = off
            break

    def load_state_at_or_below(self, offset: int, log_start_offset: int) -> None:
        """Load the newest readable snapshot in [log_start_offset, offset] without deleting any
        (recovery of a segment's transaction index replays from there); the log start without one."""
        self.clear()
        self.map_end_offset = log_start_offset
        for off in reversed(self._snapshots):
            if off > offset or off < log_start_offset:
                continue
            try:
                self._load_entries(self.read_snapshot(self.snapshot_path(off)))
            except (OSError, ValueError, struct.error):
                self.clear()
                continue
            self.map_end_offset = off
            return

    def delete_snapshot(self, offset: int) -> None:
        self.snapshot_path(offset).unlink(missing_ok=True)
        if offset in self._snapshots:
            self._snapshots.remove(offset)

    def delete_snapshots_below(self, offset: int) -> None:
        for off in [o for o in self._snapshots if o < offset]:
            self.delete_snapshot(off)

    def delete_all_snapshots(self) -> None:
        for off in list(self._snapshots):
            self.delete_snapshot(off)
        for p in self.dir.glob(f"*{SNAPSHOT_SUFFIX}.tmp"):
            p.unlink(missing_ok=True)
