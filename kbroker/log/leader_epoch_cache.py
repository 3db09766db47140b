"""LeaderEpochCache: the leader epoch history of one partition log (Kafka's LeaderEpochFileCache).

Owns the partition directory's `leader-epoch-checkpoint`: which leader epoch started at which
offset, in Kafka's format "0\\n<count>\\n<epoch> <start offset>\\n...". OffsetForLeaderEpoch is
answered from it (`end_offset_for`), so a returning replica can find where its log diverged from
the leader's. Epochs and start offsets both strictly increase. Every change is written at once,
atomically. `Log` keeps the cache in step with its appends, truncations and log start offset.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kbroker.log._files import as_path
from kbroker.log.checkpoint import CheckpointError, write_atomically

__all__ = [
    "EpochEntry",
    "LeaderEpochCache",
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1  # OffsetForLeaderEpoch's "no such epoch"
UNDEFINED_EPOCH_OFFSET = -1

_VERSION = 0
_NUMBER = re.compile(r"[0-9]+")
_MAX_EPOCH = 2**31 - 1
_MAX_OFFSET = 2**63 - 1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _by_epoch(e: EpochEntry) -> int:
    return e.epoch


def _by_start(e: EpochEntry) -> int:
    return e.start_offset


def _number(text: str, limit: int) -> int:
    if not _NUMBER.fullmatch(text) or int(text) > limit:
        raise ValueError(f"not a valid number: {text!r}")
    return int(text)


class LeaderEpochCache:
    # How many times any cache became unwritten: the server's epoch writer scans the logs only
    # when this moved since its last scan, so an idle broker's thousands of logs are not visited.
    marks = 0

    def __init__(self, path: Path, entries: Iterable[tuple[int, int]] = ()) -> None:
        """A cache backed by `path` holding `entries` (nothing is read or written here)."""
        self.path = as_path(path)
        self._entries = [EpochEntry(*e) for e in entries]
        self.unsynced = False  # written without fsync since the last durable write
        self.unwritten = False  # changed in memory only (assign(..., write=False)): the file lags
        for prev, cur in zip(self._entries, self._entries[1:]):
            if cur.epoch <= prev.epoch or cur.start_offset <= prev.start_offset:
                raise ValueError(f"epoch entries must strictly increase: {prev} then {cur}")
        if self._entries and min(self._entries[0]) < 0:
            raise ValueError(f"negative epoch entry {self._entries[0]}")

    @classmethod
    def read(cls, path: Path) -> LeaderEpochCache:
        """The cache stored at `path`. FileNotFoundError when there is none; CheckpointError when
        it is malformed or out of order. An empty file, which Kafka creates before any entry, is
        malformed too: the caller then rebuilds the cache from the log, which is never wrong."""
        path = as_path(path)
        try:
            lines = path.read_bytes().decode("utf-8").split("\n")
            if lines[-1] == "":
                lines.pop()
            if len(lines) < 2:
                raise ValueError("missing header")
            if _number(lines[0], _MAX_EPOCH) != _VERSION:
                raise ValueError(f"unrecognised version {lines[0]}")
            count = _number(lines[1], _MAX_OFFSET)
            if len(lines) != count + 2:
                raise ValueError(f"expected {count} entries, found {len(lines) - 2}")
            entries = []
            for line in lines[2:]:
                fields = line.split()
                if len(fields) != 2:
                    raise ValueError(f"malformed line {line!r}")
                entries.append((_number(fields[0], _MAX_EPOCH), _number(fields[1], _MAX_OFFSET)))
            return cls(path, entries)
        except ValueError as e:  # UnicodeDecodeError included
            raise CheckpointError(f"malformed leader epoch checkpoint {path}: {e}") from None

    # --- queries ----------------------------------------------------------------------------------

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at `offset` was written in: the last entry starting at or below it."""
        i = bisect_right(self._entries, offset, key=_by_start)
        return self._entries[i - 1].epoch if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= `requested_epoch`, the start offset of the
        first epoch above it). The latest epoch ends at the log end. An epoch below every cached
        one gets the first start offset: older data is gone, so the replica replicates from the
        leader's start. (-1, -1) for UNDEFINED_EPOCH, an empty cache, or an epoch above the latest."""
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == entries[-1].epoch:
            # The leader is still writing its epoch (consumers verifying offsets ask for it too).
            return requested_epoch, log_end_offset
        i = bisect_right(entries, requested_epoch, key=_by_epoch)
        if i == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if i == 0:
            return requested_epoch, entries[0].start_offset
        return entries[i - 1].epoch, entries[i].start_offset

    # --- changes ----------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, sync: bool = True, write: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed.

        The latest epoch again, at or after its start, changes nothing: an epoch's start never
        moves up. Anything else is appended after dropping the entries it conflicts with (an epoch
        at or above `epoch`, or a start at or above `start_offset`), as Kafka does, so both stay
        strictly increasing whatever the log went through."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries
        if entries and entries[-1].epoch == epoch and start_offset >= entries[-1].start_offset:
            return False
        while entries and (entries[-1].epoch >= epoch or entries[-1].start_offset >= start_offset):
            entries.pop()
        entries.append(EpochEntry(epoch, start_offset))
        if write:
            self.flush(sync)
        else:  # written by the next `write_if_changed` or `sync` (the server's epoch writer, the log's flush, close)
            self._mark_unwritten()
        return True

    def truncate_from_end(self, end_offset: int, write: bool = True) -> bool:
        """After the log was truncated to `end_offset`: drop entries starting at or after it.
        `write` False: the file is rewritten later (`write_if_changed`, `sync`), as Kafka flushes
        truncations in the background; until then it may still hold the dropped entries, which
        the next load drops again."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return False
        while entries and entries[-1].start_offset >= end_offset:
            entries.pop()
        if write:
            self.flush()
        else:
            self._mark_unwritten()
        return True

    def _mark_unwritten(self) -> None:
        self.unwritten = True
        LeaderEpochCache.marks += 1

    def truncate_from_start(self, start_offset: int) -> bool:
        """After the log start moved to `start_offset`: the epoch holding it now starts there and
        the entries before it go (an entry starting exactly there stays)."""
        entries = self._entries
        i = bisect_right(entries, start_offset, key=_by_start)
        if i == 0 or (i == 1 and entries[0].start_offset == start_offset):
            return False
        entries[:i] = [EpochEntry(entries[i - 1].epoch, start_offset)]
        self.flush()
        return True

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self.flush()

    def flush(self, sync: bool = True) -> None:
        lines = [str(_VERSION), str(len(self._entries))]
        lines.extend(f"{e.epoch} {e.start_offset}" for e in self._entries)
        write_atomically(self.path, ("\n".join(lines) + "\n").encode("ascii"), sync)
        self.unsynced = not sync
        self.unwritten = False

    def sync(self) -> None:
        """Make a checkpoint written without fsync durable (the log calls this when it flushes)."""
        if self.unsynced or self.unwritten:
            self.flush()

    def write_if_changed(self) -> None:
        """Write a change made in memory only, without fsync (the server's epoch writer, each second)."""
        if self.unwritten:
            self.flush(sync=False)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path.parent.name}, {[tuple(e) for e in self._entries]})"
