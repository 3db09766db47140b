"""Group commit: produce requests that must be on disk before they are acknowledged share fsyncs.

With `flush.messages=1` every acknowledged batch must be fsynced. One fsync runs at a time per
log, in a worker thread so the event loop keeps serving; requests that append while it runs wait
for the next one, which covers all of them at once. Throughput then follows the disk's fsync
rate times the batches that arrive per fsync, not one fsync per request.
"""

from __future__ import annotations

import trio

from kbroker.errors import KafkaStorageError
from kbroker.log.log import Log


class GroupCommit:
    def __init__(self, log: Log) -> None:
        self.log = log
        self._running: trio.Event | None = None  # set when the fsync in flight completes

    async def flush_to(self, offset: int) -> None:
        """Return once everything below `offset` is on disk (recovery point ≥ offset)."""
        while self.log.recovery_point < offset:
            if self._running is not None:
                await self._running.wait()
                continue
            done = self._running = trio.Event()
            plan = self.log.prepare_flush()
            try:
                await trio.to_thread.run_sync(plan.run)
            except OSError as exc:
                self.log.complete_flush(plan, ok=False)
                raise KafkaStorageError(f"fsync of {self.log.topic_partition} failed: {exc}") from exc
            else:
                self.log.complete_flush(plan)
            finally:
                self._running = None
                done.set()
