"""LogDirs (LogManager's several log dirs): future logs and the swap that makes one current, with a
restart after a crash at each step finding exactly one live log holding everything; log dirs taken
offline after an I/O error."""

import os

import pytest
from log_test_helpers import Clock, append, read_all_records

from kbroker.errors import KafkaStorageError
from kbroker.log.config import LogConfig
from kbroker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import validate_batches

CFG = LogConfig(segment_bytes=1024, file_delete_delay_ms=0)
TP = TopicPartition("moving-topic", 0)


def manager(dirs):
    m = LogManager(dirs, CFG, now_ms=Clock())
    m.startup()
    return m


def copy_all(current, future):
    """What the mover does, without trio: the current log's batches, as they are."""
    while future.log_end_offset < current.log_end_offset:
        data = bytearray(current.read(future.log_end_offset, 4096).read_bytes())
        future.append_as_follower(data, validate_batches(data, from_client=False))


def values(log):
    return [(r.offset, r.value) for r in read_all_records(log)]


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


def with_records(m, batches=12):
    log = m.get_or_create_log(TP)
    for i in range(batches):
        append(log, 3, leader_epoch=i // 4)
    log.update_high_watermark(log.log_end_offset)
    return log


def test_future_log_named_as_kafka_and_swapped_in(dirs):
    m = manager(dirs)
    current = with_records(m)
    src = m.dir_of(TP)
    dest = next(d for d in dirs if d != src)
    future = m.create_future_log(TP, dest)
    assert future.dir.parent == dest and future.dir.name.startswith("moving-topic-0.")
    assert future.dir.name.endswith("-future") and future.topic_partition == TP
    assert m.create_future_log(TP, dest) is future  # asking again changes nothing
    copy_all(current, future)
    expected = values(current)
    epochs = current.leader_epoch_cache.epoch_entries()
    swapped = m.replace_current_with_future_log(TP)
    assert swapped is future and m.get_log(TP) is future and m.get_future_log(TP) is None
    assert m.dir_of(TP) == dest and future.dir == dest / "moving-topic-0"
    assert values(future) == expected and future.high_watermark == future.log_end_offset
    assert future.leader_epoch_cache.epoch_entries() == epochs
    assert not (src / "moving-topic-0").exists()
    assert not [p for p in src.iterdir() if p.name.startswith("moving-topic")]  # removed (no delete delay)
    m.shutdown()
    again = manager(dirs)
    assert values(again.get_log(TP)) == expected and again.dir_of(TP) == dest


def test_a_swap_needs_the_copy_caught_up(dirs):
    m = manager(dirs)
    current = with_records(m)
    future = m.create_future_log(TP, next(d for d in dirs if d != m.dir_of(TP)))
    with pytest.raises(ValueError):
        m.replace_current_with_future_log(TP)
    copy_all(current, future)
    append(current, 1)
    with pytest.raises(ValueError):
        m.replace_current_with_future_log(TP)


def test_crash_before_the_swap_resumes_the_move(dirs):
    m = manager(dirs)
    current = with_records(m)
    dest = next(d for d in dirs if d != m.dir_of(TP))
    future = m.create_future_log(TP, dest)
    data = bytearray(current.read(0, 200).read_bytes())  # a part copied, then kill -9 (no shutdown)
    future.append_as_follower(data, validate_batches(data, from_client=False))
    expected = values(current)
    m2 = manager(dirs)
    assert values(m2.get_log(TP)) == expected  # the current log serves
    resumed = m2.get_future_log(TP)
    assert resumed is not None and m2.future_dir_of(TP) == dest and 0 < resumed.log_end_offset < len(expected)
    copy_all(m2.get_log(TP), resumed)
    m2.replace_current_with_future_log(TP)
    assert values(m2.get_log(TP)) == expected


def test_crash_between_the_renames_keeps_the_copy(dirs):
    """Kill -9 after the current log was retired (`-delete`) and before the copy took its name."""
    m = manager(dirs)
    current = with_records(m)
    src = m.dir_of(TP)
    future = m.create_future_log(TP, next(d for d in dirs if d != src))
    copy_all(current, future)
    future.flush()
    expected = values(current)
    os.replace(current.dir, src / TP.suffixed_dir_name("-delete"))  # step 2 of the swap, then the crash
    m2 = manager(dirs)
    assert m2.get_future_log(TP) is None
    assert values(m2.get_log(TP)) == expected and m2.dir_of(TP) != src
    assert not [p for p in src.iterdir() if p.name.startswith("moving-topic")]


def test_abandoned_and_deleted_future_logs_leave_nothing(dirs):
    m = manager(dirs)
    with_records(m)
    dest = next(d for d in dirs if d != m.dir_of(TP))
    m.create_future_log(TP, dest)
    assert m.abandon_future_log(TP) and m.get_future_log(TP) is None
    assert not [p for p in dest.iterdir() if p.name.startswith("moving-topic")]
    m.create_future_log(TP, dest)
    m.delete_log(TP)
    assert m.get_future_log(TP) is None
    assert not [p for p in dest.iterdir() if p.name.startswith("moving-topic")]


def test_an_offline_dir_closes_its_logs_and_is_never_used_again(dirs):
    m = manager(dirs)
    told = []
    m.dir_failure_listener = lambda d, tps: told.append((d, tps))
    tps = [TopicPartition("t", p) for p in range(4)]
    for tp in tps:
        append(m.get_or_create_log(tp), 2)
    failed = m.dir_of(tps[1])
    in_failed = sorted(tp for tp in tps if m.dir_of(tp) == failed)
    log = m.get_log(tps[1])
    assert m.fail_dir_of(log, OSError(5, "Input/output error")) == in_failed
    assert told == [(failed, in_failed)] and log.closed
    assert m.fail_dir_of(log, OSError(5, "again")) == [] and len(told) == 1  # once
    assert m.live_log_dirs == [d for d in dirs if d != failed] and all(m.get_log(tp) is None for tp in in_failed)
    with pytest.raises(KafkaStorageError):
        m.get_or_create_log(in_failed[0])
    for p in range(4, 8):  # new partitions go to the live dir
        assert m.get_or_create_log(TopicPartition("t", p)).dir.parent != failed
    m.shutdown()
    assert not (failed / CLEAN_SHUTDOWN_FILE).exists()  # its next start recovers it
    again = manager(dirs)
    assert all(again.get_log(tp) is not None for tp in tps)


def test_a_periodic_job_failing_in_one_dir_takes_only_that_dir_offline(dirs):
    m = manager(dirs)
    tps = [TopicPartition("t", p) for p in range(2)]
    for tp in tps:
        append(m.get_or_create_log(tp), 2)
    broken = m.dir_of(tps[0])
    (broken / "recovery-point-offset-checkpoint").mkdir()  # the checkpoint's rename fails
    m.checkpoint_recovery_points()
    assert m.offline_dirs == {broken} and m.get_log(tps[1]) is not None
    m.shutdown()


def test_log_dir_named_by_absolute_path(dirs, monkeypatch):
    monkeypatch.chdir(dirs[0].parent)
    m = manager([dirs[0].relative_to(dirs[0].parent), dirs[1]])
    assert m.log_dir_named(str(dirs[0])) == m.log_dirs[0]
    assert m.log_dir_named(str(dirs[1]) + "/") == dirs[1]
    assert m.log_dir_named(str(dirs[0].parent / "elsewhere")) is None
