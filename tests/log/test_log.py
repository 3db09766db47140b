"""Log: appends (offsets, limits, LogAppendTime, rolls, flushes), reads, timestamps, producer state,
retention, DeleteRecords, truncation and reopening."""

import os

import pytest
from log_test_helpers import Clock, append, batches_of, make_batch, read_all_records

from kbroker.errors import (
    InvalidProducerEpochError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
)
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import Record, build_batch, decode_records, parse_batch_header, validate_batches

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=0)


def open_log(tmp_path, config=SMALL, clock=None, **kw):
    return Log.open(tmp_path / "topic-0", config, now_ms=clock or Clock(), **kw)


def test_append_assigns_offsets_epoch_and_reads_back(tmp_path):
    log = open_log(tmp_path)
    assert log.topic_partition == TopicPartition("topic", 0)
    info = append(log, 3, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_messages, info.duplicate) == (0, 2, 3, False)
    assert info.log_append_time_ms == -1 and info.max_timestamp == 1002 and info.offset_of_max_timestamp == 2
    info = append(log, 2, leader_epoch=8)
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    data = log.read(0, 10_000).read_bytes()
    hs = [h for _, h in batches_of(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 7), (3, 8)]
    assert [r.offset for r in read_all_records(log)] == [0, 1, 2, 3, 4]


def test_append_multiple_batches_in_one_buffer(tmp_path):
    log = open_log(tmp_path)
    append(log, 1)
    buf = make_batch(2) + make_batch(3, compression=4)
    info = log.append_as_leader(buf, validate_batches(buf), leader_epoch=0)
    assert (info.first_offset, info.last_offset, info.num_messages) == (1, 5, 5)
    assert [r.offset for r in read_all_records(log)] == list(range(6))


def test_append_is_one_write_of_the_buffer(tmp_path, monkeypatch):
    log = open_log(tmp_path, LogConfig())
    buf = bytearray(build_batch([Record(0, 1, None, os.urandom(1_000_000))]))
    batches = validate_batches(buf)
    writes = []
    real_write = os.write

    def counting_write(fd, data):
        writes.append(data)
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting_write)
    log.append_as_leader(buf, batches, leader_epoch=0)
    monkeypatch.undo()
    big = [w for w in writes if len(w) >= 1_000_000]
    assert len(big) == 1
    assert (big[0].obj if isinstance(big[0], memoryview) else big[0]) is buf  # the request buffer, not a copy
    assert len(writes) <= 3  # the batch, and at most an index entry per index


def test_message_size_limits(tmp_path):
    log = open_log(tmp_path, LogConfig(max_message_bytes=200, segment_bytes=400))
    with pytest.raises(MessageTooLargeError):
        append(log, 1, value=b"x" * 300)
    buf = make_batch(1, value=b"x" * 80) + make_batch(1, value=b"y" * 80) + make_batch(1, value=b"z" * 80)
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(buf, validate_batches(buf), leader_epoch=0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_log_append_time(tmp_path):
    clock = Clock(5_000_000)
    log = open_log(tmp_path, SMALL.with_(message_timestamp_type="LogAppendTime"), clock)
    info = append(log, 3, ts=10)
    assert info.log_append_time_ms == 5_000_000 and info.max_timestamp == 5_000_000
    data = log.read(0, 10_000).read_bytes()
    [(pos, h)] = validate_batches(data, from_client=False)  # CRC recomputed
    assert h.timestamp_type == 1
    assert [r.timestamp for r in decode_records(data, pos, h)] == [5_000_000] * 3
    info = append(log, 1, now_ms=6_000_000)
    assert info.log_append_time_ms == 6_000_000


def test_roll_by_size_and_restart_keeps_everything(tmp_path):
    log = open_log(tmp_path)
    for i in range(40):
        append(log, 3, ts=1000 + i, tag=b"%d-" % i)
    assert len(log.segments) > 3
    assert all(s.size <= SMALL.segment_bytes for s in log.segments)
    assert [s.base_offset for s in log.segments] == log._bases
    before = read_all_records(log)
    assert [r.offset for r in before] == list(range(120))
    log.flush()
    log.close()
    names = {p.name for p in (tmp_path / "topic-0").iterdir()}
    for s in log.segments:
        for suffix in (".log", ".index", ".timeindex"):
            assert f"{s.base_offset:020d}{suffix}" in names
    for reopen_kw in ({"had_clean_shutdown": True}, {"recovery_point": 0}):
        log = open_log(tmp_path, **reopen_kw)
        assert log.log_end_offset == 120
        assert read_all_records(log) == before
        log.close()
    log = open_log(tmp_path)
    assert append(log, 1).first_offset == 120


def test_roll_by_time_uses_record_timestamps(tmp_path):
    cfg = LogConfig(segment_ms=1000)
    log = open_log(tmp_path, cfg)
    append(log, 1, ts=10_000)
    append(log, 1, ts=10_900)
    assert len(log.segments) == 1
    append(log, 1, ts=11_100)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_creates_producer_snapshot(tmp_path):
    log = open_log(tmp_path)
    append(log, 1, pid=5, epoch=0, seq=0)
    seg = log.roll()
    assert seg.base_offset == 1 and len(log.segments) == 2
    assert (tmp_path / "topic-0" / "00000000000000000001.snapshot").exists()
    assert log.roll() is seg  # an empty active segment is reused


def test_flush_interval_messages_advances_recovery_point(tmp_path):
    log = open_log(tmp_path, SMALL.with_(flush_interval_messages=5))
    append(log, 3)
    assert log.recovery_point == 0
    append(log, 3)
    assert log.recovery_point == 6
    log.flush(6)
    append(log, 1)
    log.flush()
    assert log.recovery_point == 7


# --- reads ------------------------------------------------------------------------------------------


def filled(tmp_path, batches=30, config=SMALL):
    log = open_log(tmp_path, config)
    for i in range(batches):
        append(log, 3, ts=1000 + 10 * i)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_read_out_of_range(tmp_path):
    log = filled(tmp_path, 3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    assert log.read(9, 100).size == 0  # the log end is a valid, empty position


def test_read_inside_batch_starts_at_the_batch(tmp_path):
    log = filled(tmp_path)
    data = log.read(4, 100_000).read_bytes()
    assert batches_of(data)[0][1].base_offset == 3


def test_read_max_bytes_whole_batches_and_min_one_message(tmp_path):
    log = filled(tmp_path)
    size = log.read(0, 1).size
    info = log.read(0, int(size * 2.5))
    assert info.size == 2 * size
    assert len(batches_of(info.read_bytes())) == 2
    assert log.read(0, 10, min_one_message=True).size == size
    info = log.read(0, 10, min_one_message=False)
    assert info.size == 0 and info.first_entry_incomplete


def test_read_stops_at_segment_end_and_continues_from_next(tmp_path):
    log = filled(tmp_path)
    first = log.segments[0]
    end_offset = log.segments[1].base_offset
    info = log.read(0, 10**6)
    assert info.size == first.size
    last = batches_of(info.read_bytes())[-1][1]
    assert last.next_offset == end_offset
    assert batches_of(log.read(end_offset, 10**6).read_bytes())[0][1].base_offset == end_offset


def test_read_max_offset_is_exclusive_at_batch_boundaries(tmp_path):
    log = filled(tmp_path)
    hs = [h for _, h in batches_of(log.read(0, 10**6, max_offset=9).read_bytes())]
    assert [h.base_offset for h in hs] == [0, 3, 6]
    assert log.read(9, 10**6, max_offset=9).size == 0
    assert log.read(12, 10**6, max_offset=9).size == 0
    # HW inside a batch (never happens with whole-batch HW moves): that batch is not returned
    hs = [h for _, h in batches_of(log.read(0, 10**6, max_offset=8).read_bytes())]
    assert [h.base_offset for h in hs] == [0, 3]
    # max_offset at a later segment's base: the whole first segment is readable
    nxt = log.segments[1].base_offset
    assert log.read(0, 10**6, max_offset=nxt).size == log.segments[0].size


def test_read_from_deleted_start_raises(tmp_path):
    log = filled(tmp_path)
    log.maybe_increment_log_start_offset(10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert batches_of(log.read(10, 100).read_bytes())[0][1].base_offset == 9


# --- timestamps -------------------------------------------------------------------------------------


def test_fetch_offset_by_timestamp_across_segments(tmp_path):
    log = filled(tmp_path)  # batch i holds offsets 3i..3i+2, timestamps 1000+10i .. +2
    assert log.fetch_offset_by_timestamp(0) == (0, 1000)
    assert log.fetch_offset_by_timestamp(1001) == (1, 1001)
    assert log.fetch_offset_by_timestamp(1003) == (3, 1010)
    assert log.fetch_offset_by_timestamp(1000 + 10 * 25 + 2) == (77, 1252)
    assert log.fetch_offset_by_timestamp(10**9) is None
    log.maybe_increment_log_start_offset(5)
    assert log.fetch_offset_by_timestamp(0) == (5, 1012)


def test_max_timestamp_and_offset(tmp_path):
    log = open_log(tmp_path)
    assert log.max_timestamp_and_offset() is None
    append(log, 3, ts=5000)
    append(log, 3, ts=9000)  # 9000..9002
    append(log, 3, ts=100)
    log.roll()
    append(log, 3, ts=7000)
    assert log.max_timestamp_and_offset() == (5, 9002)
    log.close()
    log = open_log(tmp_path, recovery_point=0)
    assert log.max_timestamp_and_offset() == (5, 9002)


# --- idempotent producers ---------------------------------------------------------------------------


def test_duplicate_batch_returns_original_offsets_without_writing(tmp_path):
    log = open_log(tmp_path)
    append(log, 2)
    first = append(log, 3, pid=77, epoch=1, seq=0)
    append(log, 2, pid=77, epoch=1, seq=3)
    size = log.size_in_bytes
    dup = append(log, 3, pid=77, epoch=1, seq=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (first.first_offset, first.last_offset) == (2, 4)
    assert log.size_in_bytes == size and log.log_end_offset == 7
    with pytest.raises(OutOfOrderSequenceError):
        append(log, 1, pid=77, epoch=1, seq=9)
    with pytest.raises(InvalidProducerEpochError):
        append(log, 1, pid=77, epoch=0, seq=5)
    assert log.log_end_offset == 7


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_reopen(tmp_path, clean):
    log = open_log(tmp_path)
    for i in range(20):
        append(log, 3, pid=1, epoch=0, seq=3 * i)
        append(log, 1, pid=2, epoch=4, seq=i)
    if clean:
        log.flush()
        log.close()
        log = open_log(tmp_path, had_clean_shutdown=True)
    else:
        # crash: no close, and the newest snapshots are lost
        for p in (tmp_path / "topic-0").glob("*.snapshot"):
            if int(p.name.split(".")[0]) > 30:
                p.unlink()
        log = open_log(tmp_path, recovery_point=0)
    assert log.log_end_offset == 80
    e1, e2 = log.producer_state.last_entry(1), log.producer_state.last_entry(2)
    assert e1.last_seq == 59 and e2.last_seq == 19 and e2.producer_epoch == 4
    dup = append(log, 3, pid=1, epoch=0, seq=57)
    assert dup.duplicate and dup.first_offset == 76
    with pytest.raises(OutOfOrderSequenceError):
        append(log, 1, pid=2, epoch=4, seq=21)
    assert append(log, 1, pid=2, epoch=4, seq=20).first_offset == 80


def test_follower_append_keeps_offsets(tmp_path):
    leader = open_log(tmp_path)
    for i in range(5):
        append(leader, 2, pid=3, epoch=0, seq=2 * i, leader_epoch=4)
    data = bytearray(leader.read(0, 10**6).read_bytes())
    follower = Log.open(tmp_path / "topic-1", SMALL, now_ms=Clock())
    info = follower.append_as_follower(data, validate_batches(data, from_client=False))
    assert (info.first_offset, info.last_offset) == (0, 9)
    assert follower.log_end_offset == 10
    assert follower.read(0, 10**6).read_bytes() == bytes(data)
    assert follower.producer_state.last_entry(3).last_seq == 9
    with pytest.raises(ValueError):
        follower.append_as_follower(data, validate_batches(data, from_client=False))


# --- retention / log start offset -------------------------------------------------------------------


def test_delete_records_rules(tmp_path):
    log = filled(tmp_path)
    log.update_high_watermark(60)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(61)
    assert log.maybe_increment_log_start_offset(50)
    assert not log.maybe_increment_log_start_offset(10)
    assert log.log_start_offset == 50
    assert log.segments[0].base_offset == 0  # segments go at the next retention pass
    n = log.delete_old_segments()
    assert n >= 1
    assert log.segments[0].base_offset <= 50 < log.segments[1].base_offset
    assert log.log_start_offset == 50
    assert read_all_records(log)[0].offset == 50


def test_retention_by_time_uses_largest_timestamp_and_high_watermark(tmp_path):
    clock = Clock(100_000)
    log = open_log(tmp_path, SMALL.with_(retention_ms=10_000), clock)
    for i in range(30):
        append(log, 3, ts=80_000 + i * 1000)  # later batches are newer
    nsegs = len(log.segments)
    assert log.delete_old_segments() == 0  # high watermark 0: nothing may go
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments()
    assert 0 < deleted < nsegs
    assert all(100_000 - s.largest_timestamp <= 10_000 for s in log.segments[:-1])
    assert log.log_start_offset == log.segments[0].base_offset
    # everything expired: a fresh empty segment remains at the log end
    clock.ms = 10**9
    log.delete_old_segments()
    assert len(log.segments) == 1 and log.segments[0].size == 0
    assert log.segments[0].base_offset == log.log_start_offset == log.log_end_offset == 90
    assert append(log, 1).first_offset == 90
    assert not list((tmp_path / "topic-0").glob("*.deleted"))


def test_retention_by_size(tmp_path):
    log = filled(tmp_path)
    total = log.size_in_bytes
    seg_sizes = [s.size for s in log.segments]
    log.update_config(SMALL.with_(retention_bytes=total - seg_sizes[0] - 1))
    assert log.delete_old_segments() == 1
    log.update_config(SMALL.with_(retention_bytes=0))
    log.delete_old_segments()
    assert log.size_in_bytes == 0 and log.log_start_offset == 90
    log.update_config(SMALL.with_(retention_bytes=-1, cleanup_policy="compact"))
    assert log.delete_old_segments() == 0


def test_deleted_segments_wait_for_file_delete_delay(tmp_path):
    clock = Clock(0)
    log = open_log(tmp_path, SMALL.with_(file_delete_delay_ms=1000, retention_bytes=0), clock)
    for _ in range(30):
        append(log, 3)
    log.update_high_watermark(log.log_end_offset)
    info = log.read(0, 10**6)
    log.delete_old_segments()
    d = tmp_path / "topic-0"
    assert list(d.glob("*.log.deleted"))
    assert len(batches_of(info.read_bytes())) > 0  # the fd still serves in-flight reads
    clock.ms = 2000
    log.delete_pending_segments()
    assert not list(d.glob("*.deleted"))


# --- truncation -------------------------------------------------------------------------------------


def test_truncate_to(tmp_path):
    log = filled(tmp_path)
    log.update_high_watermark(90)
    before = read_all_records(log)
    assert not log.truncate_to(90)
    assert log.truncate_to(40)  # inside batch 39..41: it goes too
    assert log.log_end_offset == 39 and log.high_watermark == 39
    assert read_all_records(log) == before[:39]
    assert log.segments[-1].base_offset <= 39
    assert append(log, 1).first_offset == 39
    log.close()
    log = open_log(tmp_path, recovery_point=0)
    assert log.log_end_offset == 40


def test_truncate_to_restores_producer_state(tmp_path):
    log = open_log(tmp_path)
    for i in range(10):
        append(log, 1, pid=1, epoch=0, seq=i)
    log.roll()
    for i in range(10, 20):
        append(log, 1, pid=1, epoch=0, seq=i)
    log.truncate_to(15)
    assert log.producer_state.last_entry(1).last_seq == 14
    assert append(log, 1, pid=1, epoch=0, seq=15).first_offset == 15


def test_truncate_fully_and_start_at(tmp_path):
    log = filled(tmp_path)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1000, 1000, 1000)
    assert [s.base_offset for s in log.segments] == [1000]
    assert append(log, 2).first_offset == 1000
    log.close()
    log = open_log(tmp_path, recovery_point=0)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1002)


def test_high_watermark_is_clamped(tmp_path):
    log = filled(tmp_path, 2)
    assert log.update_high_watermark(100) == 6
    assert log.update_high_watermark(-5) == 0
    log.close()
    assert open_log(tmp_path, high_watermark=4).high_watermark == 4


def test_open_removes_stray_files(tmp_path):
    log = filled(tmp_path, 3)
    log.close()
    d = tmp_path / "topic-0"
    for name in ["00000000000000000000.log.deleted", "00000000000000000000.log.cleaned",
                 "00000000000000000000.log.swap", "00000000000000000005.snapshot.tmp",
                 "00000000000000000099.index"]:
        (d / name).write_bytes(b"junk")
    log = open_log(tmp_path)
    names = {p.name for p in d.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned", ".swap", ".tmp")) for n in names)
    assert "00000000000000000099.index" not in names
    assert log.log_end_offset == 9


def test_delete_removes_directory(tmp_path):
    log = filled(tmp_path, 3)
    log.delete()
    assert not (tmp_path / "topic-0").exists()


def test_control_batch_ends_transaction(tmp_path):
    log = open_log(tmp_path)
    append(log, 2, pid=4, epoch=0, seq=0, txn=True)
    assert log.producer_state.first_unstable_offset() == 0
    marker = bytearray(build_batch([Record(0, 5, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
                                   producer_id=4, producer_epoch=0, is_control=True, is_transactional=True))
    log.append_as_leader(marker, validate_batches(marker, from_client=False), leader_epoch=0)
    assert log.producer_state.first_undecided_offset() is None
    # As in Kafka the transaction stays unstable until the high watermark passes its marker.
    assert log.producer_state.first_unstable_offset() == 0
    log.update_high_watermark(3)
    assert log.producer_state.first_unstable_offset() is None
    assert parse_batch_header(log.read(2, 1000).read_bytes()).is_control


def test_file_records_can_be_sendfiled(tmp_path):
    log = filled(tmp_path, 5)
    info = log.read(3, 10**6)
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    for fr in info.records:
        sent = 0
        while sent < fr.size:
            sent += os.sendfile(out, fr.fd, fr.position + sent, fr.size - sent)
    os.close(out)
    assert (tmp_path / "out").read_bytes() == info.read_bytes()
    assert [h.base_offset for _, h in batches_of(info.read_bytes())] == [3, 6, 9, 12]


def test_clean_reopen_does_not_recover_and_missing_index_forces_recovery(tmp_path, monkeypatch):
    log = filled(tmp_path, 2)  # small: no index entries at all
    log.flush()
    log.close()
    d = tmp_path / "topic-0"
    assert (d / "00000000000000000000.index").exists() and (d / "00000000000000000000.timeindex").exists()
    from kbroker.log.segment import LogSegment

    recovered = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover",
                        lambda self, *a: recovered.append(self.base_offset) or real(self, *a))
    open_log(tmp_path, had_clean_shutdown=True).close()
    assert recovered == []
    (d / "00000000000000000000.index").unlink()
    log = open_log(tmp_path, had_clean_shutdown=True)
    assert recovered == [0] and log.log_end_offset == 6
