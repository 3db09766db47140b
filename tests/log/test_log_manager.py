"""LogManager: startup with checkpoints and the clean shutdown marker, creation across log dirs,
deletion, retention, interval flushes, shutdown."""

import pytest
from log_test_helpers import Clock, append, read_all_records

from kbroker.log.checkpoint import OffsetCheckpointFile
from kbroker.log.config import LogConfig
from kbroker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kbroker.log.topic_partition import TopicPartition

CFG = LogConfig(segment_bytes=1024, file_delete_delay_ms=0)
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b-x", 0)


def manager(dirs, clock=None, cfg=CFG):
    m = LogManager(dirs, cfg, now_ms=clock or Clock())
    m.startup()
    return m


def test_create_spreads_over_log_dirs_and_shutdown_writes_everything(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    m = manager(dirs)
    for tp in (A0, A1, B0):
        log = m.get_or_create_log(tp)
        for _ in range(10):
            append(log, 3)
        log.update_high_watermark(log.log_end_offset - 3)
    assert m.get_or_create_log(A0) is m.get_log(A0)
    assert {m._dir_of[tp] for tp in (A0, A1, B0)} == set(dirs)
    assert m.get_log(TopicPartition("nope", 0)) is None
    m.get_log(A1).maybe_increment_log_start_offset(6)
    m.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
    rp, hw, lso = {}, {}, {}
    for d in dirs:
        rp |= OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read()
        hw |= OffsetCheckpointFile(d / "replication-offset-checkpoint").read()
        lso |= OffsetCheckpointFile(d / "log-start-offset-checkpoint").read()
    assert rp == {A0: 30, A1: 30, B0: 30}
    assert hw == {A0: 27, A1: 27, B0: 27}
    assert lso == {A1: 6}  # only logs whose start is past their first segment


def test_restart_restores_offsets_and_removes_marker(tmp_path):
    dirs = [tmp_path / "d1"]
    m = manager(dirs)
    log = m.get_or_create_log(A0)
    for _ in range(20):
        append(log, 3, pid=9, epoch=0, seq=3 * _)
    log.update_high_watermark(60)
    log.maybe_increment_log_start_offset(7)
    records = read_all_records(log)
    m.shutdown()
    m = manager(dirs)
    assert m.had_clean_shutdown[dirs[0]]
    assert not (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    log = m.get_log(A0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (7, 60, 60, 60)
    assert read_all_records(log) == records
    assert log.producer_state.last_entry(9).last_seq == 59
    m.shutdown()


def test_unclean_restart_recovers_from_recovery_point(tmp_path):
    dirs = [tmp_path / "d1"]
    m = manager(dirs)
    log = m.get_or_create_log(A0)
    for _ in range(20):
        append(log, 3)
    log.flush()
    m.checkpoint_recovery_points()
    for _ in range(5):
        append(log, 3)
    # crash: a torn write at the end of the active segment, no shutdown
    active = log.active_segment
    with open(active.log_path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x4b\x00\x00\x01\x00garbage")
    for seg in log.segments:
        seg.close_handlers()
    m = manager(dirs)
    assert not m.had_clean_shutdown[dirs[0]]
    log = m.get_log(A0)
    assert log.log_end_offset == 75 and log.recovery_point == 60
    assert append(log, 1).first_offset == 75


def test_corrupt_checkpoint_is_ignored(tmp_path):
    dirs = [tmp_path / "d1"]
    m = manager(dirs)
    append(m.get_or_create_log(A0), 3)
    m.shutdown()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("garbage")
    m = manager(dirs)
    assert m.get_log(A0).log_end_offset == 3


def test_startup_skips_foreign_dirs_and_removes_pending_deletes(tmp_path):
    d = tmp_path / "d1"
    (d / "a-0.0123abcd-delete").mkdir(parents=True)
    (d / "a-1-future").mkdir()
    (d / "not_a_partition").mkdir()
    (d / "meta.properties").write_text("x")
    m = manager([d])
    assert m.all_logs() == []
    assert not (d / "a-0.0123abcd-delete").exists()
    assert (d / "a-1-future").exists()


def test_duplicate_partition_dirs_fail(tmp_path):
    (tmp_path / "d1" / "a-0").mkdir(parents=True)
    (tmp_path / "d2" / "a-0").mkdir(parents=True)
    with pytest.raises(RuntimeError):
        manager([tmp_path / "d1", tmp_path / "d2"])


def test_delete_log_renames_then_removes(tmp_path):
    clock = Clock(0)
    d = tmp_path / "d1"
    m = manager([d], clock, cfg=CFG.with_(file_delete_delay_ms=500))
    log = m.get_or_create_log(A0)
    append(log, 3)
    info = log.read(0, 1000)
    assert m.delete_log(A0) is log
    assert m.get_log(A0) is None and not (d / "a-0").exists()
    [pending] = [p for p in d.iterdir() if p.is_dir()]
    assert pending.name.startswith("a-0.") and pending.name.endswith("-delete")
    assert info.read_bytes()  # in-flight reads still served
    assert OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read() == {}
    clock.ms = 1000
    m.cleanup_logs()
    assert not pending.exists()
    assert m.delete_log(A0) is None


def test_cleanup_logs_applies_retention(tmp_path):
    clock = Clock(10**7)
    m = manager([tmp_path / "d1"], clock)
    log = m.get_or_create_log(A0, CFG.with_(retention_ms=1000))
    for _ in range(30):
        append(log, 3, ts=1000)
    log.update_high_watermark(log.log_end_offset)
    other = m.get_or_create_log(A1)  # default 2-week retention: untouched
    for _ in range(30):
        append(other, 3, ts=1000)
    other.update_high_watermark(other.log_end_offset)
    n_other = len(other.segments)
    assert m.cleanup_logs() > 0
    assert log.size_in_bytes == 0 and log.log_start_offset == 90
    assert len(other.segments) == n_other


def test_flush_dirty_logs(tmp_path):
    clock = Clock(0)
    m = manager([tmp_path / "d1"], clock)
    timed = m.get_or_create_log(A0, CFG.with_(flush_interval_ms=1000, segment_bytes=10**6))
    rolled = m.get_or_create_log(A1)
    append(timed, 3)
    for _ in range(30):
        append(rolled, 3)
    assert m.flush_dirty_logs(0) == 1  # only the rolled segments of A1
    assert rolled.recovery_point == rolled.active_segment.base_offset
    assert timed.recovery_point == 0
    assert m.flush_dirty_logs(2000) == 1
    assert timed.recovery_point == 3


def test_leader_epochs_changed_in_memory_are_listed_and_written_one_log_at_a_time(tmp_path):
    """Thousands of partitions become leaders at once: their leader-epoch checkpoints are listed
    for the server, which writes them one log at a time; every file ends up holding its new epoch
    (what a restart reads), and a log written meanwhile (its flush) is not written again."""
    m = manager([tmp_path / "d1"], Clock(0))
    logs = [m.get_or_create_log(TopicPartition("t", p)) for p in range(10)]
    for lg in logs:
        lg.leader_epoch_cache.assign(3, 0, sync=False, write=False)  # what make_leader does
    marks, pending = m.unwritten_leader_epochs()
    assert sorted(lg.dir.name for _, lg in pending) == sorted(lg.dir.name for lg in logs)
    logs[0].flush()  # the log's flush writes its own first
    before = logs[0].leader_epoch_cache.path.stat().st_mtime_ns
    for d, lg in pending:
        m.write_leader_epochs(d, lg)
    assert logs[0].leader_epoch_cache.path.stat().st_mtime_ns == before
    assert m.unwritten_leader_epochs() == (marks, [])
    for lg in logs:
        assert lg.leader_epoch_cache.path.read_text().split("\n")[2] == "3 0"


def test_the_epoch_writer_looks_for_unwritten_epochs_only_after_a_change(tmp_path):
    """An idle broker's thousands of logs are not visited each second: with the count of the last
    look and nothing changed since, no log is listed, even one still unwritten; a change made in
    memory afterwards (a follower's new epoch, a truncation at load) is listed again."""
    m = manager([tmp_path / "d1"], Clock(0))
    a, b = (m.get_or_create_log(TopicPartition("t", p)) for p in range(2))
    a.leader_epoch_cache.assign(1, 0, write=False)
    marks, pending = m.unwritten_leader_epochs()
    assert [lg for _, lg in pending] == [a]
    assert m.unwritten_leader_epochs(marks) == (marks, [])  # not written, but nothing new: not looked at
    b.leader_epoch_cache.assign(2, 0, write=False)
    marks2, pending = m.unwritten_leader_epochs(marks)
    assert marks2 != marks and sorted(lg.dir.name for _, lg in pending) == sorted([a.dir.name, b.dir.name])
    b.leader_epoch_cache.truncate_from_end(0, write=False)
    assert [lg for _, lg in m.unwritten_leader_epochs(marks2)[1]] != []
