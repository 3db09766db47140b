"""The manifest of one partition's archive: which segments it holds, and from which offset on it
serves (Kafka keeps this as RemoteLogSegmentMetadata in its __remote_log_metadata topic).

The manifest lives in the archive itself, next to the segments (`manifest.json`), so every broker
sharing the archive (a cluster's new leader, a follower deciding what it may delete locally) reads
the same one. It is the commit point of every change: a segment's files are in place before the
manifest names it, and a segment leaves the manifest before its files are deleted; files the
manifest does not name are leftovers of an interrupted copy or delete, never served.

Format: one JSON object, with a CRC-32C of its canonical form, so a torn or damaged manifest is
recognised (ManifestError) rather than misread. Pure: no I/O.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import dataclass, field, replace

from crc32c import crc32c

__all__ = ["RemoteSegment", "Manifest", "ManifestError", "MANIFEST_VERSION"]

MANIFEST_VERSION = 1


class ManifestError(ValueError):
    """A manifest that cannot be read: damaged, torn, or of an unknown version."""


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    """One archived segment: offsets [base_offset, end_offset], its largest record timestamp, its
    size in bytes, the leader epochs that wrote it ((epoch, start offset) pairs from the
    leader-epoch checkpoint), and the size of its transaction index (0: no aborted transactions)."""

    segment_id: str  # a uuid's hex: a segment copied twice (after a crash, by another leader) never collides
    base_offset: int
    end_offset: int
    max_timestamp: int
    size: int
    leader_epochs: tuple[tuple[int, int], ...] = ()
    txn_index_size: int = 0
    created_ms: int = 0

    @property
    def name(self) -> str:
        """The file name stem of its objects: `<base offset, 20 digits>-<segment id>`."""
        return f"{self.base_offset:020d}-{self.segment_id}"

    def to_json(self) -> dict:
        return {"id": self.segment_id, "base_offset": self.base_offset, "end_offset": self.end_offset,
                "max_timestamp": self.max_timestamp, "size": self.size,
                "leader_epochs": [list(e) for e in self.leader_epochs], "txn_index_size": self.txn_index_size,
                "created_ms": self.created_ms}

    @classmethod
    def from_json(cls, d: dict) -> "RemoteSegment":
        seg = cls(str(d["id"]), int(d["base_offset"]), int(d["end_offset"]), int(d["max_timestamp"]),
                  int(d["size"]), tuple((int(e), int(o)) for e, o in d.get("leader_epochs", ())),
                  int(d.get("txn_index_size", 0)), int(d.get("created_ms", 0)))
        if seg.end_offset < seg.base_offset or seg.size < 0 or not seg.segment_id.isalnum():
            raise ManifestError(f"invalid segment entry {d!r}")
        return seg


@dataclass(frozen=True)
class Manifest:
    """Immutable: every change returns a new manifest. `segments` are in base offset order and
    each ends past the one before (a new leader may archive a segment overlapping the last one
    when its own segments are cut at other offsets; the overlapping offsets hold the same records,
    which lie below the high watermark). `log_start_offset` is the first offset served: at or past
    the first segment's base (DeleteRecords may move it inside a segment). `leader_epoch` is the
    epoch of the leader that wrote it last: an older leader stops writing."""

    topic: str
    topic_id: str
    partition: int
    leader_epoch: int = -1
    log_start_offset: int = 0
    segments: tuple[RemoteSegment, ...] = field(default_factory=tuple)

    # --- queries ----------------------------------------------------------------------------------

    @property
    def highest_offset(self) -> int:
        """The last offset archived (Kafka's highestOffsetInRemoteStorage): -1 for a new archive.
        An archive whose segments all expired keeps the mark (its start is then one past it), so
        what was archived once is never copied again."""
        return self.segments[-1].end_offset if self.segments else self.log_start_offset - 1

    @property
    def start_offset(self) -> int | None:
        """The first offset the archive serves, or None when it holds nothing."""
        return self.log_start_offset if self.segments else None

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_for(self, offset: int) -> RemoteSegment | None:
        """The archived segment holding `offset`, within [start, highest]; None outside or in a gap.
        With overlaps the latest-based segment holding it is the one that reaches furthest."""
        if not self.segments or offset < self.log_start_offset:
            return None
        i = bisect_right([s.base_offset for s in self.segments], offset) - 1
        if i < 0 or self.segments[i].end_offset < offset:
            return None
        return self.segments[i]

    def segments_from(self, segment: RemoteSegment) -> tuple[RemoteSegment, ...]:
        """`segment` and every later one."""
        return self.segments[self.segments.index(segment):]

    # --- changes ----------------------------------------------------------------------------------

    def with_segment(self, segment: RemoteSegment, leader_epoch: int, log_start_offset: int = 0) -> "Manifest":
        """The manifest with `segment` archived after the others by the leader of `leader_epoch`.
        The first segment of an empty archive starts serving at max(its base, `log_start_offset`,
        the manifest's own start: a DeleteRecords before the first copy)."""
        if segment.end_offset <= self.highest_offset:
            raise ValueError(f"segment {segment.name} ends at {segment.end_offset}, "
                             f"not past the archive's {self.highest_offset}")
        start = self.log_start_offset
        if not self.segments:
            start = max(start, segment.base_offset, log_start_offset)
        return replace(self, segments=self.segments + (segment,), leader_epoch=max(self.leader_epoch, leader_epoch),
                       log_start_offset=start)

    def without(self, segments: list[RemoteSegment] | tuple[RemoteSegment, ...], leader_epoch: int) -> "Manifest":
        """The manifest without `segments`: the start moves to the first remaining segment's base
        when it lay below it."""
        gone = {s.segment_id for s in segments}
        kept = tuple(s for s in self.segments if s.segment_id not in gone)
        start = self.log_start_offset
        if kept:
            start = max(start, kept[0].base_offset)
        elif self.segments:
            start = max(start, self.highest_offset + 1)
        return replace(self, segments=kept, log_start_offset=start, leader_epoch=max(self.leader_epoch, leader_epoch))

    def with_log_start_offset(self, offset: int, leader_epoch: int) -> "Manifest":
        """DeleteRecords: serve nothing below `offset` (segments wholly below it expire later)."""
        if offset <= self.log_start_offset:
            return self
        return replace(self, log_start_offset=offset, leader_epoch=max(self.leader_epoch, leader_epoch))

    # --- format -----------------------------------------------------------------------------------

    def _body(self) -> dict:
        return {"version": MANIFEST_VERSION, "topic": self.topic, "topic_id": self.topic_id,
                "partition": self.partition, "leader_epoch": self.leader_epoch,
                "log_start_offset": self.log_start_offset, "segments": [s.to_json() for s in self.segments]}

    def encode(self) -> bytes:
        body = self._body()
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return json.dumps({"crc32c": crc32c(canonical), "manifest": body}, sort_keys=True, indent=1).encode() + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> "Manifest":
        try:
            outer = json.loads(data)
            body = outer["manifest"]
            canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
            if crc32c(canonical) != outer["crc32c"]:
                raise ManifestError("manifest checksum mismatch")
            if body["version"] != MANIFEST_VERSION:
                raise ManifestError(f"unknown manifest version {body['version']}")
            segments = tuple(RemoteSegment.from_json(s) for s in body["segments"])
            manifest = cls(str(body["topic"]), str(body["topic_id"]), int(body["partition"]),
                           int(body["leader_epoch"]), int(body["log_start_offset"]), segments)
        except ManifestError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise ManifestError(f"unreadable manifest: {exc}") from None
        for prev, cur in zip(segments, segments[1:]):
            if cur.base_offset < prev.base_offset or cur.end_offset <= prev.end_offset:
                raise ManifestError(f"segments out of order: {prev.name} then {cur.name}")
        if segments and manifest.log_start_offset < segments[0].base_offset:
            raise ManifestError("log start offset below the first segment")
        return manifest
