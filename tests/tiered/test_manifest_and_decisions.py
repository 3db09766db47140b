"""The pure core of tiered storage: the manifest (its changes and its file format) and the
decisions of what to copy and what to expire, with explicit clocks."""

from __future__ import annotations

import json

import pytest

from kbroker.tiered.decisions import LocalSegment, local_only_bytes, segments_to_copy, segments_to_expire
from kbroker.tiered.manifest import Manifest, ManifestError, RemoteSegment


def seg(base: int, end: int, size: int = 100, ts: int = 1000, sid: str | None = None) -> RemoteSegment:
    return RemoteSegment(sid or f"{base:04x}{end:04x}", base, end, ts, size, ((0, base),))


def manifest(*segments: RemoteSegment) -> Manifest:
    m = Manifest("t", "id", 0)
    for s in segments:
        m = m.with_segment(s, 0)
    return m


def test_the_format_round_trips_and_refuses_damage():
    m = manifest(seg(0, 9), seg(10, 19, ts=2000)).with_log_start_offset(3, 2)
    data = m.encode()
    assert Manifest.decode(data) == m
    assert m.leader_epoch == 2 and m.log_start_offset == 3
    body = json.loads(data)
    body["manifest"]["segments"][0]["end_offset"] = 8  # a bit flip the checksum catches
    with pytest.raises(ManifestError, match="checksum"):
        Manifest.decode(json.dumps(body).encode())
    for torn in (data[: len(data) // 2], b"", b"\x00" * 10):
        with pytest.raises(ManifestError):
            Manifest.decode(torn)


def test_segments_are_found_by_offset_with_overlaps_and_gaps():
    # a new leader's segment overlaps the last archived one; then a gap
    m = manifest(seg(0, 9), seg(5, 19), seg(30, 39))
    assert m.segment_for(0).base_offset == 0
    assert m.segment_for(7).base_offset == 5  # the one reaching furthest
    assert m.segment_for(19).base_offset == 5
    assert m.segment_for(25) is None and m.segment_for(40) is None
    assert m.highest_offset == 39 and m.start_offset == 0
    with pytest.raises(ValueError):
        m.with_segment(seg(35, 39, sid="dup"), 0)  # nothing past the archive's end


def test_removing_segments_moves_the_start_and_keeps_the_mark():
    m = manifest(seg(0, 9), seg(10, 19))
    assert Manifest("t", "id", 0).highest_offset == -1 and Manifest("t", "id", 0).start_offset is None
    first_gone = m.without([m.segments[0]], 0)
    assert first_gone.start_offset == 10 and first_gone.highest_offset == 19
    empty = first_gone.without(first_gone.segments, 0)
    assert empty.start_offset is None and empty.highest_offset == 19  # archived once, never copied again
    assert empty.with_segment(seg(20, 29), 0).start_offset == 20
    # the first segment of an archive serves from the local log start when DeleteRecords moved it
    assert Manifest("t", "id", 0).with_segment(seg(0, 9), 0, log_start_offset=4).start_offset == 4


def test_closed_segments_below_the_lso_are_copied_in_order():
    local = [LocalSegment(0, 10, 100, 1), LocalSegment(10, 20, 100, 2), LocalSegment(20, 20, 0, -1),
             LocalSegment(20, 30, 100, 3), LocalSegment(30, 40, 100, 4)]
    assert [s.base_offset for s in segments_to_copy(local, -1, 0, 40)] == [0, 10, 20, 30]
    assert [s.base_offset for s in segments_to_copy(local, 9, 0, 40)] == [10, 20, 30]
    assert [s.base_offset for s in segments_to_copy(local, 14, 0, 40)] == [10, 20, 30]  # overlap: same records
    assert [s.base_offset for s in segments_to_copy(local, -1, 0, 25)] == [0, 10]  # an open transaction at 25
    assert segments_to_copy(local, 39, 0, 40) == []
    assert [s.base_offset for s in segments_to_copy(local, -1, 22, 40)] == [20, 30]  # DeleteRecords moved it
    assert local_only_bytes(local, 19) == 200


def test_expiry_by_log_start_time_and_size_stops_at_the_first_kept():
    now = 100_000
    m = manifest(seg(0, 9, ts=10_000), seg(10, 19, ts=50_000), seg(20, 29, ts=90_000))
    assert segments_to_expire(m, retention_ms=-1, retention_bytes=-1, local_only=0, now_ms=now) == []
    assert [s.base_offset for s in segments_to_expire(m, retention_ms=60_000, retention_bytes=-1, local_only=0,
                                                      now_ms=now)] == [0]
    assert [s.base_offset for s in segments_to_expire(m, retention_ms=5_000, retention_bytes=-1, local_only=0,
                                                      now_ms=now)] == [0, 10, 20]
    # 300 archived + 150 local-only bytes against 250: the two oldest go
    assert [s.base_offset for s in segments_to_expire(m, retention_ms=-1, retention_bytes=250, local_only=150,
                                                      now_ms=now)] == [0, 10]
    moved = m.with_log_start_offset(12, 0)  # DeleteRecords inside the second segment
    assert [s.base_offset for s in segments_to_expire(moved, retention_ms=-1, retention_bytes=-1, local_only=0,
                                                      now_ms=now)] == [0]
    young_first = manifest(seg(0, 9, ts=95_000), seg(10, 19, ts=10_000))
    assert segments_to_expire(young_first, retention_ms=60_000, retention_bytes=-1, local_only=0, now_ms=now) == []
