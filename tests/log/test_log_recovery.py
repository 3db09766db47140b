"""Crash recovery: after cutting a segment file at any byte or flipping any byte, reopening keeps
exactly the valid prefix of batches (offsets and contents), rebuilds consistent indexes and
producer state, and appends continue at the right offset."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st
from log_test_helpers import PROFILE, Clock, read_all_records

from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.wire.records import Record, build_batch, validate_batches

CODECS = [0, 1, 2, 3, 4]
PID = 11
LEADER_EPOCH_FIELD = range(12, 16)  # not covered by the CRC: a flip there is undetectable, as in Kafka


def crash(log: Log) -> None:
    """Drop the process's view of the log without any orderly close."""
    for seg in log.segments:
        seg.close_handlers()


def build_log(d, data):
    cfg = LogConfig(
        segment_bytes=data.draw(st.sampled_from([700, 2500, 1 << 20]), label="segment_bytes"),
        index_interval_bytes=data.draw(st.sampled_from([0, 150, 4096]), label="index_interval"),
        file_delete_delay_ms=0,
    )
    log = Log.open(d, cfg, now_ms=Clock())
    seq = 0
    for i in range(data.draw(st.integers(1, 20), label="batches")):
        n = data.draw(st.integers(1, 4))
        values = [data.draw(st.binary(max_size=60)) for _ in range(n)]
        idempotent = data.draw(st.booleans())
        records = [Record(j, 1000 + 7 * i + j, b"%d" % i, v) for j, v in enumerate(values)]
        buf = bytearray(build_batch(records, compression=data.draw(st.sampled_from(CODECS)),
                                    producer_id=PID if idempotent else -1, producer_epoch=0 if idempotent else -1,
                                    base_sequence=seq if idempotent else -1))
        if idempotent:
            seq += n
        log.append_as_leader(buf, validate_batches(buf), leader_epoch=1)
        if data.draw(st.booleans()):
            log.flush()
    return cfg, log


def layout(log: Log):
    """[(segment index, position, header)] of every batch."""
    return [(i, pos, h) for i, seg in enumerate(log.segments) for pos, h in seg.iter_batches()]


def check_indexes(log: Log) -> None:
    for seg in log.segments:
        batches = {pos: h for pos, h in seg.iter_batches()}
        assert sum(h.size_in_bytes for h in batches.values()) == seg.size
        rel, pos = seg.offset_index._entries()
        for r, p in zip(rel, pos):
            assert p in batches and batches[p].last_offset == seg.base_offset + r
        ts, trel = seg.time_index._entries()
        assert list(ts) == sorted(set(ts))
        for t, r in zip(ts, trel):
            assert any(h.last_offset == seg.base_offset + r and h.max_timestamp == t for h in batches.values())
        if batches:
            assert seg.max_timestamp_so_far == max(h.max_timestamp for h in batches.values())


@PROFILE
@given(data=st.data())
def test_recovery_keeps_exactly_the_valid_prefix(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("recovery") / "topic-0"
    cfg, log = build_log(d, data)
    records = read_all_records(log)
    batches = layout(log)
    use_recovery_point = data.draw(st.booleans(), label="use_recovery_point")
    recovery_point = log.recovery_point if use_recovery_point else 0
    first_damageable = max(i for i, s in enumerate(log.segments) if s.base_offset <= recovery_point) \
        if use_recovery_point else 0
    crash(log)

    seg_index = data.draw(st.integers(first_damageable, len(log.segments) - 1), label="segment")
    seg = log.segments[seg_index]
    path = seg.log_path
    size = os.path.getsize(path)
    mode = data.draw(st.sampled_from(["cut", "flip"]), label="mode")
    kept_batches = [b for b in batches if b[0] < seg_index]
    if mode == "cut" or size == 0:
        cut = data.draw(st.integers(0, size), label="cut")
        os.truncate(path, cut)
        in_seg = [b for b in batches if b[0] == seg_index]
        kept_batches += [b for b in in_seg if b[1] + b[2].size_in_bytes <= cut]
        if cut == size:
            kept_batches = batches
    else:
        in_seg = [b for b in batches if b[0] == seg_index]
        target = data.draw(st.sampled_from(in_seg), label="batch")
        # Headers get most flips: base offset and length are checked by something other than the CRC.
        within = data.draw(st.one_of(st.integers(4, 11), st.integers(0, 60),
                                     st.integers(0, target[2].size_in_bytes - 1)), label="at")
        pos = target[1] + within
        with open(path, "r+b") as f:
            f.seek(pos)
            byte = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([byte ^ data.draw(st.integers(1, 255), label="xor")]))
        hit = next(b for b in in_seg if b[1] <= pos < b[1] + b[2].size_in_bytes)
        if pos - hit[1] in LEADER_EPOCH_FIELD:
            kept_batches = batches
        else:
            kept_batches += [b for b in in_seg if b[1] < hit[1]]

    log = Log.open(d, cfg, recovery_point=recovery_point, now_ms=Clock())
    expected_end = kept_batches[-1][2].next_offset if kept_batches else 0
    assert log.log_end_offset == expected_end
    assert read_all_records(log) == records[:expected_end]
    check_indexes(log)
    for offset in range(0, expected_end, 3):  # every offset is reachable through the indexes
        m = log.segments[max(i for i, s in enumerate(log.segments) if s.base_offset <= offset)].translate_offset(offset)
        assert m is not None and m.offset >= offset
    surviving = [h for _, _, h in kept_batches if h.producer_id == PID]
    entry = log.producer_state.last_entry(PID)
    if surviving:
        assert entry is not None and entry.last_seq == surviving[-1].last_sequence
        next_seq = surviving[-1].last_sequence + 1
    else:
        assert entry is None
        next_seq = 0
    buf = bytearray(build_batch([Record(0, 5, None, b"after")], producer_id=PID, producer_epoch=0,
                                base_sequence=next_seq))
    info = log.append_as_leader(buf, validate_batches(buf), leader_epoch=2)
    assert info.first_offset == expected_end and not info.duplicate
    assert read_all_records(log, expected_end)[0].value == b"after"
    log.close()
    again = Log.open(d, cfg, had_clean_shutdown=True, now_ms=Clock())
    assert again.log_end_offset == expected_end + 1
    again.close()


@PROFILE
@given(data=st.data())
def test_clean_reopen_keeps_everything(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("clean") / "topic-0"
    cfg, log = build_log(d, data)
    records = read_all_records(log)
    end = log.log_end_offset
    log.flush()
    log.close()
    log = Log.open(d, cfg, had_clean_shutdown=True, now_ms=Clock())
    assert log.log_end_offset == end and log.recovery_point == end
    assert read_all_records(log) == records
    check_indexes(log)
    log.close()
