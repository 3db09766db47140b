"""Moving a partition log's ends, mixed into `Log`: the log start offset (DeleteRecords, the
start of the first segment kept), retention (Kafka's deleteOldSegments: by size and by time,
only below the high watermark), producer expiry, and truncation (a follower's, to a divergence
point, or all of it).

With tiered storage on (`remote.storage.enable`), retention keeps local copies by
local.retention.ms/bytes and never deletes a segment the archive does not hold yet: the remote log
manager sets `highest_offset_in_remote_storage` (Kafka's name) once a copy is in the archive's
manifest, and this is the only thing the log knows of the archive.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from kbroker.errors import OffsetOutOfRangeError
from kbroker.log.segment import LogSegment

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000  # Kafka's producer.id.expiration.ms

class LogRetention:
    """Needs the Log's fields and segment helpers (segments, offsets, roll, _schedule_delete, ...)."""


    def maybe_increment_log_start_offset(self, new_offset: int) -> bool:
        """DeleteRecords: move the log start forward (never past the high watermark: Kafka's
        OFFSET_OUT_OF_RANGE). Whole segments below it go at the next delete_old_segments."""
        if new_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset to {new_offset} of partition {self.topic_partition} "
                f"since it is larger than the high watermark {self.high_watermark}"
            )
        if new_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_offset
        if self.recovery_point < new_offset:
            self.recovery_point = new_offset
        self.leader_epoch_cache.truncate_from_start(new_offset)
        self.producer_state.on_log_start_offset_incremented(new_offset)
        return True

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Kafka's retention pass: segments wholly below the log start offset, then (cleanup.policy
        delete) by retention.bytes and retention.ms (by each segment's largest timestamp). Only
        segments wholly below the high watermark go; an empty active segment never goes; when
        every segment must go a new one is rolled first. Returns the number deleted."""
        now = self._now_ms() if now_ms is None else now_ms
        self.delete_pending_segments(now)
        deleted = self._delete_matching(lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset)
        cfg = self.config
        if cfg.delete_enabled:
            tiered = cfg.remote_storage_enable
            retention_bytes = cfg.local_retention_bytes_effective if tiered else cfg.retention_bytes
            retention_ms = cfg.local_retention_ms_effective if tiered else cfg.retention_ms
            if retention_bytes >= 0 and self.size_in_bytes >= retention_bytes:
                diff = self.size_in_bytes - retention_bytes

                def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    nonlocal diff
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        return True
                    return False

                deleted += self._delete_matching(over_size, archived_only=tiered)
            if retention_ms >= 0:
                deleted += self._delete_matching(lambda seg, nxt: now - seg.largest_timestamp > retention_ms,
                                                 archived_only=tiered)
        return deleted

    def _delete_matching(self, predicate: Callable[[LogSegment, LogSegment | None], bool],
                         archived_only: bool = False) -> int:
        """Delete segments from the oldest while `predicate` holds; with `archived_only`, only those
        the archive already holds whole (Kafka's isSegmentEligibleForDeletion)."""
        deletable: list[LogSegment] = []
        n = len(self.segments)
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < n else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if nxt is None and seg.size == 0:
                break
            if archived_only and upper - 1 > self.highest_offset_in_remote_storage:
                break
            if not (self.high_watermark >= upper and predicate(seg, nxt)):
                break
            deletable.append(seg)
        if not deletable:
            return 0
        count = len(deletable)
        if count == len(self.segments):
            new = self.roll()
            if deletable[-1] is new:
                deletable.pop()
        if deletable:
            k = len(deletable)
            new_start = self.segments[k].base_offset
            if new_start > self.log_start_offset:
                self.log_start_offset = new_start
                self.recovery_point = max(self.recovery_point, new_start)
                self.leader_epoch_cache.truncate_from_start(new_start)
                self.producer_state.on_log_start_offset_incremented(new_start)
            removed = self.segments[:k]
            del self.segments[:k]
            del self._bases[:k]
            self._schedule_delete(removed)
            self.producer_state.delete_snapshots_below(self._bases[0])
        return count

    def remove_expired_producers(self, now_ms: int | None = None,
                                 expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> int:
        now = self._now_ms() if now_ms is None else now_ms
        return self.producer_state.remove_expired_producers(now, expiration_ms)

    # --- truncation -------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything from `offset` on (the whole batch containing it). False if nothing to do."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            # As Kafka: an epoch assigned just before a failed append would otherwise linger.
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if self._bases[0] > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        if self.truncation_listener is not None:
            self.truncation_listener(offset)
        i = bisect_right(self._bases, offset)  # segments with base > offset go entirely
        removed = self._remove_segments_from(i)
        self._schedule_delete(removed)
        active = self.segments[-1]
        active.truncate_to(offset)
        self.log_end_offset = active.read_next_offset()
        # The new end, not `offset`: the batch holding `offset` went too.
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._rebuild_producer_state()
        if self.high_watermark >= self.log_end_offset:
            self.high_watermark = self.log_end_offset
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at `offset` (all offsets become `offset`)."""
        if self.truncation_listener is not None:
            self.truncation_listener(None)
        removed = self._remove_segments_from(0)
        self._schedule_delete(removed)
        self.producer_state.delete_all_snapshots()
        self.producer_state.clear()
        self.leader_epoch_cache.clear_and_flush()
        self._add_empty_segment(offset)
        self.log_end_offset = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.producer_state.update_map_end_offset(offset)
        self.producer_state.take_snapshot(sync=False)
