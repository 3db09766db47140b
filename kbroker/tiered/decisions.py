"""What the remote log manager does next for one partition, as functions of the local log's
segments, the archive's manifest, the configs and a clock (Kafka's RLMTask rules). Pure.

- Copy: every closed segment past what the archive holds, in order, as long as it lies wholly
  below the last stable offset (so the archive never holds an offset a consumer may not read yet,
  nor one a truncation could take back). The active segment is never copied.
- Expire (the archive's retention): in order from the oldest, segments wholly below the log
  start offset (DeleteRecords), then those over retention.bytes (the archive's bytes plus the
  local bytes not archived yet count against it) or whose largest timestamp is older than
  retention.ms; the first segment that stays ends the pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.tiered.manifest import Manifest, RemoteSegment

__all__ = ["LocalSegment", "segments_to_copy", "segments_to_expire", "local_only_bytes"]


@dataclass(frozen=True, slots=True)
class LocalSegment:
    """What the decisions need of a local segment: offsets [base_offset, next_offset), bytes, and
    its largest record timestamp."""

    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int

    @property
    def end_offset(self) -> int:
        return self.next_offset - 1


def segments_to_copy(closed: list[LocalSegment], highest_archived: int, local_log_start: int,
                     last_stable_offset: int) -> list[LocalSegment]:
    """The closed segments to archive now, in offset order (Kafka's candidateLogSegments: from
    max(archived + 1, local start), below the LSO). Empty segments hold nothing to archive."""
    from_offset = max(highest_archived + 1, local_log_start)
    out = []
    for seg in closed:
        if seg.end_offset < from_offset or seg.size == 0:
            continue
        if seg.next_offset > last_stable_offset:
            break
        out.append(seg)
    return out


def local_only_bytes(local: list[LocalSegment], highest_archived: int) -> int:
    """Bytes of the local segments that start past the archive's end (Kafka's onlyLocalLogSegmentsSize)."""
    return sum(s.size for s in local if s.base_offset > highest_archived)


def segments_to_expire(manifest: Manifest, *, retention_ms: int, retention_bytes: int, local_only: int,
                       now_ms: int) -> list[RemoteSegment]:
    """The archived segments the archive's retention deletes now, oldest first."""
    expired: list[RemoteSegment] = []
    breached = manifest.size_in_bytes + local_only - retention_bytes if retention_bytes >= 0 else -1
    for seg in manifest.segments:
        below_start = seg.end_offset < manifest.log_start_offset
        over_size = retention_bytes >= 0 and breached - seg.size >= 0
        too_old = retention_ms >= 0 and now_ms - seg.max_timestamp > retention_ms
        if not (below_start or over_size or too_old):
            break
        breached -= seg.size  # gone whatever the reason: the bytes no longer count
        expired.append(seg)
    return expired
