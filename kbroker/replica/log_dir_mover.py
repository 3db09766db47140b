"""Moving a replica's log to another log dir of this broker while it keeps serving (Kafka's
ReplicaAlterLogDirsThread, for AlterReplicaLogDirs).

The future log (log/log_dirs.py) is filled from the current log: its batches copied as they are
(offsets, epochs, producer fields), chunk by chunk, then whatever was appended meanwhile, until it
reaches the log end. The check that it did and the swap run in one synchronous step, so no append
lands between the last copy and the switch: every acknowledged record is in the log that stays.
A truncation of the current log (a follower's) is repeated on the copy; a log start moved past the
copy (retention, DeleteRecords) restarts the copy there. The copy is bounded by
`replica.alter.log.dirs.io.max.bytes.per.second` and yields to other tasks between chunks.

One task per move; `start_move` queues one (an AlterReplicaLogDirs, or a future log found at
start-up), `cancel_move` stops it. An OSError reading the current log or writing the copy takes
that log's dir offline (ReplicaManager.handle_log_failure), which ends the move.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import trio

from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import validate_batches

if TYPE_CHECKING:
    from kbroker.replica.manager import ReplicaManager

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20  # per read of the current log (a larger first batch still comes whole)


class LogDirMover:
    def __init__(self, replica_manager: ReplicaManager, max_bytes_per_s: Callable[[], int]) -> None:
        self._rm = replica_manager
        self._max_bytes_per_s = max_bytes_per_s  # read per chunk: a dynamic broker config
        self._pending: set[TopicPartition] = set()
        self._moving: dict[TopicPartition, trio.CancelScope] = {}
        self._wake = trio.Event()
        self.moves_completed = 0

    def start_move(self, tp: TopicPartition) -> None:
        self._pending.add(tp)
        self._wake.set()

    def cancel_move(self, tp: TopicPartition) -> None:
        self._pending.discard(tp)
        scope = self._moving.get(tp)
        if scope is not None:
            scope.cancel()

    def is_moving(self, tp: TopicPartition) -> bool:
        return tp in self._pending or tp in self._moving

    def statistics(self) -> dict[str, Any]:
        return {"pending": len(self._pending), "moving": len(self._moving), "completed": self.moves_completed}

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                if not self._pending:
                    await self._wake.wait()
                self._wake = trio.Event()
                for tp in sorted(self._pending - set(self._moving)):
                    scope = self._moving[tp] = trio.CancelScope()
                    nursery.start_soon(self._move, tp, scope)
                self._pending.clear()

    async def _move(self, tp: TopicPartition, scope: trio.CancelScope) -> None:
        try:
            with scope:
                await self._copy_and_swap(tp)
        except Exception:  # noqa: BLE001 - one move failing leaves the others and the broker serving
            logger.exception("moving the log of %s to another log dir failed", tp)
        finally:
            if self._moving.get(tp) is scope:
                del self._moving[tp]

    async def _copy_and_swap(self, tp: TopicPartition) -> None:
        rm, lm = self._rm, self._rm.log_manager
        future = lm.get_future_log(tp)
        if future is None:
            return
        truncations: list[int | None] = []
        listener = truncations.append
        watched: Log | None = None
        try:
            while True:
                partition = rm.partitions.get(tp)
                if partition is None or lm.get_future_log(tp) is not future or future.closed:
                    return  # deleted, offline, cancelled or moved elsewhere meanwhile
                current = partition.log
                if watched is not current:
                    if watched is not None:
                        watched.truncation_listener = None
                    current.truncation_listener = listener
                    watched = current
                try:
                    _follow(current, future, truncations)
                except OSError as exc:
                    rm.handle_log_failure(future, exc)
                    return
                if future.log_end_offset == current.log_end_offset:
                    rm.complete_log_dir_move(partition)
                    self.moves_completed += 1
                    return
                try:
                    chunk = current.read(future.log_end_offset, CHUNK_BYTES, max_offset=current.log_end_offset)
                    data = bytearray(chunk.read_bytes())
                except OSError as exc:
                    rm.handle_log_failure(current, exc)
                    return
                if not data:
                    raise RuntimeError(f"{tp}: nothing to copy from {future.log_end_offset} below the log end "
                                       f"{current.log_end_offset}")
                try:
                    _append(future, data)
                except OSError as exc:
                    rm.handle_log_failure(future, exc)
                    return
                await self._pace(len(data))
        finally:
            if watched is not None and watched.truncation_listener is listener:
                watched.truncation_listener = None

    async def _pace(self, copied: int) -> None:
        """Within the rate: a chunk of n bytes is followed by n / rate seconds (at least a yield)."""
        rate = self._max_bytes_per_s()
        await trio.sleep(copied / rate if rate > 0 else 0)


def _follow(current: Log, future: Log, truncations: list[int | None]) -> None:
    """Bring the copy in line with what happened to the current log since the last chunk."""
    if truncations:
        restarted = None in truncations
        lowest = min((t for t in truncations if t is not None), default=None)
        truncations.clear()
        if restarted:
            future.truncate_fully_and_start_at(current.log_start_offset)
        elif lowest is not None:
            future.truncate_to(lowest)  # the same whole batch goes as in the current log
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)
    if current.log_start_offset > future.log_end_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)


def _append(future: Log, data: bytearray) -> None:
    batches = validate_batches(data, from_client=False)
    first = batches[0][1].base_offset
    if first < future.log_end_offset:
        # the current log starts inside this batch (DeleteRecords): the copy starts at the batch,
        # as a Kafka follower does; the swap moves its log start up to the current one's
        future.truncate_fully_and_start_at(first)
    future.append_as_follower(data, batches)
