"""Leader epoch cache: Kafka's LeaderEpochFileCache rules, the `leader-epoch-checkpoint` format,
and how a Log keeps it in step with appends, truncation, log start moves and reopening."""

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_test_helpers import PROFILE, Clock, append, make_batch

from kbroker.errors import MessageTooLargeError
from kbroker.log.checkpoint import CheckpointError
from kbroker.log.config import LogConfig
from kbroker.log.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from kbroker.log.log import Log
from kbroker.log.segment import LogSegment
from kbroker.wire.records import validate_batches

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128, file_delete_delay_ms=0)


@pytest.fixture
def cache(tmp_path):
    return LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT)


def entries(cache):
    return [tuple(e) for e in cache.epoch_entries()]


def on_disk(cache):
    return entries(LeaderEpochCache.read(cache.path))


def filled(cache, *pairs):
    for epoch, offset in pairs:
        cache.assign(epoch, offset)
    return cache


# --- assign -----------------------------------------------------------------------------------------


def test_assign_adds_entry_and_latest_epoch_ends_at_log_end(cache):
    assert cache.latest_epoch is None
    assert cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.epoch_entries() == [EpochEntry(2, 10)]
    assert cache.end_offset_for(2, 11) == (2, 11)


def test_same_epoch_never_moves_its_start_up(cache):
    filled(cache, (2, 9))
    assert not cache.assign(2, 10)
    assert not cache.assign(2, 9)
    assert entries(cache) == [(2, 9)]
    filled(cache, (3, 11), (3, 12))
    assert cache.end_offset_for(3, 14) == (3, 14)


def test_new_epoch_at_same_offset_replaces_the_old_one(cache):
    filled(cache, (2, 9), (3, 9))
    assert entries(cache) == [(3, 9)]


def test_offset_going_back_drops_the_conflicting_entries(cache):
    filled(cache, (2, 6), (3, 5))
    assert entries(cache) == [(3, 5)]


def test_latest_epoch_at_an_earlier_offset_truncates(cache):
    filled(cache, (5, 11), (6, 12), (7, 13))
    assert cache.assign(7, 12)
    assert entries(cache) == [(5, 11), (7, 12)]
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_older_epoch_drops_every_later_epoch(cache):
    filled(cache, (1, 5), (2, 6), (1, 7))
    assert cache.latest_epoch == 1
    assert entries(cache) == [(1, 7)]
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED


def test_negative_entries_are_refused(cache):
    for epoch, offset in ((-1, 0), (0, -1)):
        with pytest.raises(ValueError):
            cache.assign(epoch, offset)
    assert not cache.path.exists()


def test_constructor_refuses_entries_out_of_order(tmp_path):
    for bad in ([(1, 5), (1, 6)], [(1, 5), (2, 5)], [(2, 5), (1, 6)], [(-1, 0)]):
        with pytest.raises(ValueError):
            LeaderEpochCache(tmp_path / "f", bad)


def test_tracks_epochs_as_leaders_change_many_times(cache):
    filled(cache, (0, 0), (1, 0))
    assert entries(cache) == [(1, 0)]
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)  # below the first epoch: its start offset
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_tracks_epochs_as_a_follower_receives_batches(cache):
    for offset, epoch in enumerate([0, 0, 0, 1, 1, 1, 2, 2, 2]):
        cache.assign(epoch, offset)
        assert cache.end_offset_for(epoch, offset + 1) == (epoch, offset + 1)
    assert entries(cache) == [(0, 0), (1, 3), (2, 6)]
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


# --- end_offset_for / epoch_for_offset --------------------------------------------------------------


@pytest.mark.parametrize("pairs, requested, log_end, expected", [
    ([], 0, 0, UNDEFINED),                                          # nothing recorded
    ([], UNDEFINED_EPOCH, 73, UNDEFINED),
    ([(2, 11), (3, 12)], UNDEFINED_EPOCH, 0, UNDEFINED),            # a bootstrapping follower
    ([(5, 11), (6, 12), (7, 13)], 4, 0, (4, 11)),                   # below the first epoch
    ([(1, 11), (2, 13), (3, 15)], 2, 17, (2, 15)),                  # the next epoch's start
    ([(0, 10), (2, 13), (4, 17)], 1, 0, (0, 13)),                   # no exact epoch: the floor
    ([(0, 10), (2, 13), (4, 17)], 2, 0, (2, 17)),
    ([(0, 10), (2, 13), (4, 17)], 3, 0, (2, 17)),
    ([(0, 10), (2, 13), (4, 17)], 4, 20, (4, 20)),                  # the latest: the log end
    ([(2, 100)], 3, 100, UNDEFINED),                                # above the latest
    ([(2, 6)], 2, 7, (2, 7)),                                       # epochs need not start at 0
])
def test_end_offset_for(cache, pairs, requested, log_end, expected):
    filled(cache, *pairs)
    assert cache.end_offset_for(requested, log_end) == expected


def test_epoch_for_offset(cache):
    assert cache.epoch_for_offset(0) is None
    filled(cache, (0, 10), (1, 20), (5, 30))
    assert [cache.epoch_for_offset(o) for o in (5, 10, 19, 20, 25, 30, 50)] == [None, 0, 0, 1, 1, 5, 5]


# --- truncation -------------------------------------------------------------------------------------

THREE = [(2, 6), (3, 8), (4, 11)]


@pytest.mark.parametrize("end, expected", [
    (8, [(2, 6)]),                    # on an epoch boundary: the entry starting there goes
    (9, [(2, 6), (3, 8)]),            # between boundaries
    (11, [(2, 6), (3, 8)]),
    (12, THREE),                      # past every start: nothing changes
    (6, []),
    (0, []),
    (UNDEFINED_EPOCH_OFFSET, THREE),  # undefined: nothing changes
])
def test_truncate_from_end(cache, end, expected):
    filled(cache, *THREE)
    assert cache.truncate_from_end(end) == (expected != THREE)
    assert entries(cache) == expected == on_disk(cache)


@pytest.mark.parametrize("start, expected", [
    (8, [(3, 8), (4, 11)]),           # on a boundary: that entry stays
    (9, [(3, 9), (4, 11)]),           # between boundaries: its epoch now starts there
    (1, THREE),                       # before the first entry: nothing changes
    (6, THREE),                       # at the first entry: nothing changes
    (11, [(4, 11)]),
    (15, [(4, 15)]),                  # past every entry: the latest epoch is kept, moved up
    (UNDEFINED_EPOCH_OFFSET, THREE),
])
def test_truncate_from_start(cache, start, expected):
    filled(cache, *THREE)
    assert cache.truncate_from_start(start) == (expected != THREE)
    assert entries(cache) == expected == on_disk(cache)


def test_truncate_from_start_between_the_first_two(cache):
    filled(cache, (0, 0), (1, 7), (2, 10))
    cache.truncate_from_start(5)
    assert entries(cache) == [(0, 5), (1, 7), (2, 10)]


def test_truncation_of_an_empty_cache_does_nothing(cache):
    assert not cache.truncate_from_start(7)
    assert not cache.truncate_from_end(7)
    assert not cache.path.exists()


def test_clear_and_flush(cache):
    filled(cache, *THREE)
    cache.clear_and_flush()
    assert entries(cache) == [] and cache.path.read_bytes() == b"0\n0\n"


def test_checkpoint_written_on_truncation(cache):
    filled(cache, *THREE)
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert on_disk(cache) == [(3, 8)]


# --- the file ---------------------------------------------------------------------------------------


def test_file_format_byte_for_byte(cache):
    filled(cache, *THREE)
    assert cache.path.read_bytes() == b"0\n3\n2 6\n3 8\n4 11\n"
    cache.assign(2**31 - 1, 2**63 - 1)
    assert cache.path.read_bytes() == b"0\n4\n2 6\n3 8\n4 11\n2147483647 9223372036854775807\n"
    assert [p.name for p in cache.path.parent.iterdir()] == [LEADER_EPOCH_CHECKPOINT]  # no .tmp left


def test_every_change_is_persisted_and_no_change_writes_nothing(cache):
    ops = [("assign", 1, 0), ("assign", 1, 5), ("assign", 3, 7), ("assign", 2, 9), ("assign", 4, 12),
           ("truncate_from_start", 10), ("truncate_from_end", 12), ("truncate_from_end", 100),
           ("truncate_from_start", 3)]
    for name, *args in ops:
        before = entries(cache)
        mtime = cache.path.stat().st_mtime_ns if cache.path.exists() else None
        if mtime is not None:
            os.utime(cache.path, ns=(0, 0))
        getattr(cache, name)(*args)
        if entries(cache) != before:
            assert on_disk(cache) == entries(cache)
        elif mtime is not None:
            assert cache.path.stat().st_mtime_ns == 0, (name, args)
    assert entries(cache) == [(2, 10)]


def test_persists_between_instances(cache):
    filled(cache, (2, 6))
    again = LeaderEpochCache.read(cache.path)
    assert again.epoch_entries() == [EpochEntry(2, 6)]
    assert again.path == cache.path


def test_reads_what_kafka_writes(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"0\n2\n0  1\n1 2")  # Kafka splits on any whitespace; no final newline needed
    assert entries(LeaderEpochCache.read(path)) == [(0, 1), (1, 2)]
    path.write_bytes(b"0\n0\n")
    assert entries(LeaderEpochCache.read(path)) == []


@pytest.mark.parametrize("content", [
    b"",                              # Kafka's file before any entry: rebuilt from the log instead
    b"0\n",
    b"1\n0\n",                        # unknown version
    b"0\n2\n0 1\n",                   # fewer entries than counted
    b"0\n1\n0 1\n1 2\n",              # more
    b"0\n1\n0 1 2\n",
    b"0\n1\n0\n",
    b"0\n1\nx 1\n",
    b"0\n1\n-1 1\n",
    b"0\n1\n+1 1\n",
    b"0\n1\n1_0 1\n",
    b"0\n1\n2147483648 1\n",          # not an int32 epoch
    b"0\n2\n1 5\n1 6\n",              # epochs must strictly increase
    b"0\n2\n1 5\n2 5\n",              # and so must start offsets
    b"0\n2\n2 5\n1 6\n",
    b"\xff\xfe\n",
    b"zero\n0\n",
])
def test_malformed_files_are_refused(tmp_path, content):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CheckpointError):
        LeaderEpochCache.read(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        LeaderEpochCache.read(tmp_path / LEADER_EPOCH_CHECKPOINT)


# --- with a Log -------------------------------------------------------------------------------------


def open_log(tmp_path, name="topic-0", config=SMALL, **kw):
    return Log.open(tmp_path / name, config, now_ms=Clock(), **kw)


def checkpoint_of(log):
    path = log.dir / LEADER_EPOCH_CHECKPOINT
    return entries(LeaderEpochCache.read(path)) if path.exists() else []  # not written while empty


def epoch_starts(log):
    """Brute force: (epoch, start) at each rise of the batches' leader epoch, from the log start."""
    out, latest = [], -1
    for _seg, _pos, h in log.batches_from(log.log_start_offset):
        if h.partition_leader_epoch > latest:
            latest = h.partition_leader_epoch
            out.append((latest, max(h.base_offset, log.log_start_offset)))
    return out


def brute_end_offset(log, requested):
    """OffsetForLeaderEpoch computed from the batch headers alone (epochs never fall in these logs)."""
    headers = [h for _s, _p, h in log.batches_from(log.log_start_offset) if h.partition_leader_epoch >= 0]
    known = sorted({h.partition_leader_epoch for h in headers})
    if requested == UNDEFINED_EPOCH or not known or requested > known[-1]:
        return UNDEFINED
    if requested == known[-1]:
        return requested, log.log_end_offset
    end = next(h.base_offset for h in headers if h.partition_leader_epoch > requested)
    if requested < known[0]:
        return requested, max(end, log.log_start_offset)
    return max(k for k in known if k <= requested), end


def test_new_log_writes_its_checkpoint_on_the_first_epoch(tmp_path):
    """Creating thousands of partitions must not cost an fsync each for an empty file."""
    log = open_log(tmp_path)
    assert not (log.dir / LEADER_EPOCH_CHECKPOINT).exists()
    assert log.end_offset_for_epoch(0) == UNDEFINED
    append(log, 1, leader_epoch=0)
    assert (log.dir / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n1\n0 0\n"


def test_leader_appends_assign_only_newer_epochs(tmp_path):
    log = open_log(tmp_path)
    append(log, 3, leader_epoch=1)
    append(log, 2, leader_epoch=1)
    append(log, 2, leader_epoch=3)
    append(log, 2, leader_epoch=2)  # a stale leader epoch does not rewrite history
    append(log, 1, leader_epoch=-1)
    assert entries(log.leader_epoch_cache) == [(1, 0), (3, 5)] == checkpoint_of(log)
    assert (log.dir / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n2\n1 0\n3 5\n"
    assert log.end_offset_for_epoch(1) == (1, 5)
    assert log.end_offset_for_epoch(2) == (1, 5)
    assert log.end_offset_for_epoch(3) == (3, log.log_end_offset) == (3, 10)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(4) == UNDEFINED
    assert log.leader_epoch_cache.epoch_for_offset(6) == 3
    assert [h.partition_leader_epoch for _s, _p, h in log.batches_from(0)] == [1, 1, 3, 2, -1]  # still patched


def test_duplicate_and_failed_appends_assign_nothing(tmp_path):
    log = open_log(tmp_path, config=SMALL.with_(max_message_bytes=300))
    append(log, 2, pid=1, epoch=0, seq=0, leader_epoch=1)
    assert append(log, 2, pid=1, epoch=0, seq=0, leader_epoch=2).duplicate
    with pytest.raises(MessageTooLargeError):
        append(log, 1, value=b"x" * 400, leader_epoch=3)
    assert entries(log.leader_epoch_cache) == [(1, 0)]


def test_follower_appends_assign_the_batches_epochs(tmp_path):
    leader = open_log(tmp_path)
    for epoch in (0, 0, 2, 2, 5):
        append(leader, 2, leader_epoch=epoch)
    data = bytearray(leader.read(0, 10**6).read_bytes())
    follower = open_log(tmp_path, "topic-1")
    follower.append_as_follower(data, validate_batches(data, from_client=False))
    assert entries(follower.leader_epoch_cache) == [(0, 0), (2, 4), (5, 8)]
    assert follower.leader_epoch_cache.unwritten  # in memory at once; the file by the flush scan
    follower.leader_epoch_cache.write_if_changed()
    assert checkpoint_of(follower) == [(0, 0), (2, 4), (5, 8)]
    unstamped = make_batch(2)  # partition leader epoch -1: ignored
    unstamped[0:8] = (10).to_bytes(8, "big")  # its base offset
    follower.append_as_follower(unstamped, validate_batches(unstamped, from_client=False))
    assert entries(follower.leader_epoch_cache) == [(0, 0), (2, 4), (5, 8)]


def test_truncate_to_drops_entries_from_the_new_log_end(tmp_path):
    log = open_log(tmp_path)
    for epoch in (1, 1, 2, 3, 3):
        append(log, 3, leader_epoch=epoch)  # epoch 2 starts at 6, epoch 3 at 9
    assert not log.truncate_to(100)
    assert entries(log.leader_epoch_cache) == [(1, 0), (2, 6), (3, 9)]
    assert log.truncate_to(10)  # inside 9..11: that batch goes, and epoch 3 with it
    assert log.log_end_offset == 9
    assert entries(log.leader_epoch_cache) == [(1, 0), (2, 6)] == checkpoint_of(log)
    assert log.end_offset_for_epoch(3) == UNDEFINED
    assert log.end_offset_for_epoch(2) == (2, 9)
    append(log, 1, leader_epoch=4)
    assert entries(log.leader_epoch_cache) == [(1, 0), (2, 6), (4, 9)]


def test_truncate_to_at_the_end_drops_an_epoch_with_no_data(tmp_path):
    log = open_log(tmp_path)
    append(log, 3, leader_epoch=1)
    log.leader_epoch_cache.assign(2, log.log_end_offset)  # as if the append that follows had failed
    assert not log.truncate_to(log.log_end_offset)
    assert entries(log.leader_epoch_cache) == [(1, 0)] == checkpoint_of(log)


def test_truncate_fully_clears(tmp_path):
    log = open_log(tmp_path)
    append(log, 3, leader_epoch=1)
    log.truncate_fully_and_start_at(1000)
    assert entries(log.leader_epoch_cache) == [] == checkpoint_of(log)
    append(log, 1, leader_epoch=1)
    assert entries(log.leader_epoch_cache) == [(1, 1000)]


def test_log_start_moves_move_the_first_epoch(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        append(log, 3, leader_epoch=i // 10)  # epoch 1 starts at 30, epoch 2 at 60
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(20)
    assert entries(log.leader_epoch_cache) == [(0, 20), (1, 30), (2, 60)] == checkpoint_of(log)
    assert log.maybe_increment_log_start_offset(31)
    assert entries(log.leader_epoch_cache) == [(1, 31), (2, 60)] == checkpoint_of(log)
    assert log.end_offset_for_epoch(0) == (0, 31)
    log.update_config(SMALL.with_(retention_bytes=0))
    log.delete_old_segments()
    assert log.log_start_offset == log.log_end_offset == 90
    assert entries(log.leader_epoch_cache) == [(2, 90)] == checkpoint_of(log)


def test_retention_moves_the_first_epoch(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        append(log, 3, leader_epoch=1 + i // 20)
    log.update_high_watermark(log.log_end_offset)
    log.update_config(SMALL.with_(retention_bytes=log.size_in_bytes - log.segments[0].size))
    assert log.delete_old_segments() == 1
    assert entries(log.leader_epoch_cache) == [(1, log.log_start_offset), (2, 60)] == checkpoint_of(log)
    assert log.log_start_offset > 0


def test_reopen_loads_the_checkpoint(tmp_path):
    log = open_log(tmp_path)
    for epoch in (1, 4, 4, 7):
        append(log, 2, leader_epoch=epoch)
    log.flush()
    log.close()
    reopened = open_log(tmp_path, had_clean_shutdown=True)
    assert entries(reopened.leader_epoch_cache) == [(1, 0), (4, 2), (7, 6)]
    # the checkpoint, not the log, is what a clean reopen uses
    reopened.close()
    reopened.leader_epoch_cache.path.write_bytes(b"0\n1\n9 0\n")
    assert entries(open_log(tmp_path, had_clean_shutdown=True).leader_epoch_cache) == [(9, 0)]


def test_reopen_drops_entries_past_the_recovered_end_and_before_the_start(tmp_path):
    log = open_log(tmp_path)
    for epoch in (1, 2, 3):
        append(log, 5, leader_epoch=epoch)
    log.flush()
    log.close()
    path = log.dir / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"0\n4\n1 0\n2 5\n3 10\n4 15\n")  # epoch 4 was assigned but its data lost
    reopened = open_log(tmp_path, had_clean_shutdown=True, log_start_offset=7)
    assert entries(reopened.leader_epoch_cache) == [(2, 7), (3, 10)] == checkpoint_of(reopened)


def test_crash_that_loses_data_truncates_the_cache(tmp_path):
    log = open_log(tmp_path)
    for epoch in (1, 2, 3):
        append(log, 5, leader_epoch=epoch)
    seg = log.active_segment
    cut = next(pos for pos, h in seg.iter_batches() if h.partition_leader_epoch == 3)
    for s in log.segments:
        s.close_handlers()
    os.truncate(seg.log_path, cut + 10)
    reopened = open_log(tmp_path, recovery_point=0)
    assert reopened.log_end_offset == 10
    assert entries(reopened.leader_epoch_cache) == [(1, 0), (2, 5)]
    reopened.leader_epoch_cache.write_if_changed()  # the flush scan, not one fsync per log at load
    assert checkpoint_of(reopened) == [(1, 0), (2, 5)]


def test_epochs_written_without_fsync_are_synced_by_the_next_log_flush(tmp_path):
    """A new leader's epoch entry is written without fsync (a failover moves thousands at once);
    the log's next flush makes it durable."""
    log = open_log(tmp_path)
    append(log, 2, leader_epoch=1)
    assert not log.leader_epoch_cache.unsynced
    log.leader_epoch_cache.assign(2, log.log_end_offset, sync=False)
    assert log.leader_epoch_cache.unsynced and checkpoint_of(log) == [(1, 0), (2, 2)]
    log.flush()
    assert not log.leader_epoch_cache.unsynced


def test_unsynced_epochs_lost_in_a_machine_crash_come_back_from_the_unflushed_batches(tmp_path):
    """Lost entries can only be of epochs past the recovery point (every flush syncs the cache);
    recovery re-reads those from the batches, as Kafka's segment recovery does."""
    log = open_log(tmp_path)
    append(log, 3, leader_epoch=1)
    log.flush()
    flushed = log.recovery_point
    for epoch in (2, 2, 5):
        log.leader_epoch_cache.assign(epoch, log.log_end_offset, sync=False)
        append(log, 2, leader_epoch=epoch)
    for s in log.segments:
        s.close_handlers()
    (log.dir / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n1\n1 0\n")  # what the disk kept
    reopened = open_log(tmp_path, recovery_point=flushed)
    assert entries(reopened.leader_epoch_cache) == [(1, 0), (2, 3), (5, 7)] == epoch_starts(reopened)
    assert reopened.end_offset_for_epoch(1) == (1, 3)


@pytest.mark.parametrize("damage", ["missing", "corrupt", "empty"])
def test_missing_or_corrupt_checkpoint_is_rebuilt_from_the_log(tmp_path, damage):
    log = open_log(tmp_path)
    epochs = [0] * 12 + [3] * 6 + [4] + [6] * 25 + [9]  # 9 batches a segment
    for epoch in epochs:
        append(log, 3, leader_epoch=epoch)
    assert len(log.segments) > 4
    expected = entries(log.leader_epoch_cache)
    assert expected == epoch_starts(log) == [(0, 0), (3, 36), (4, 54), (6, 57), (9, 132)]
    log.flush()
    log.close()
    path = log.dir / LEADER_EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"0\n3\n1 0\n" if damage == "corrupt" else b"")
    reopened = open_log(tmp_path, had_clean_shutdown=True)
    assert entries(reopened.leader_epoch_cache) == expected == checkpoint_of(reopened)
    reopened.close()
    path.unlink()
    from_mid_batch = open_log(tmp_path, had_clean_shutdown=True, log_start_offset=40)
    assert entries(from_mid_batch.leader_epoch_cache) == [(3, 40), (4, 54), (6, 57), (9, 132)]


def test_rebuild_scans_only_segments_whose_epoch_changes(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    for i in range(60):
        append(log, 3, leader_epoch=i // 25)
    n = len(log.segments)
    log.flush()
    log.close()
    (log.dir / LEADER_EPOCH_CHECKPOINT).unlink()
    scanned = []
    real = LogSegment.iter_batches

    def counting(self, start_position=0, end_position=None):
        for item in real(self, start_position, end_position):
            scanned.append(self.base_offset)
            yield item

    monkeypatch.setattr(LogSegment, "iter_batches", counting)
    reopened = open_log(tmp_path, had_clean_shutdown=True)
    monkeypatch.undo()
    assert entries(reopened.leader_epoch_cache) == [(0, 0), (1, 75), (2, 150)]
    bases = [s.base_offset for s in reopened.segments]
    assert n == len(bases) > 4
    changing = {max(b for b in bases if b <= start) for start in (75, 150)}  # scanned whole
    for b in set(bases[:-1]) - changing:  # the first and the last header, nothing between
        assert scanned.count(b) == 2, b


def test_rename_and_delete_move_the_checkpoint_with_the_directory(tmp_path):
    log = open_log(tmp_path)
    append(log, 2, leader_epoch=1)
    log.rename_dir("topic-0.abc-delete")
    append(log, 2, leader_epoch=2)
    assert checkpoint_of(log) == [(1, 0), (2, 2)]
    assert not (tmp_path / "topic-0").exists()
    log.delete()
    assert not log.dir.exists()


def test_data_loss_below_the_log_start_clears_the_cache(tmp_path):
    log = open_log(tmp_path)
    append(log, 5, leader_epoch=1)
    log.flush()
    log.close()
    reopened = open_log(tmp_path, had_clean_shutdown=True, log_start_offset=50)
    assert reopened.log_end_offset == 50
    assert entries(reopened.leader_epoch_cache) == [] == checkpoint_of(reopened)


# --- property ---------------------------------------------------------------------------------------


OPS = st.one_of(
    st.tuples(st.just("append"), st.sampled_from([0, 0, 0, 1, 2]), st.integers(1, 4)),
    st.tuples(st.just("truncate"), st.floats(0, 1.2)),
    st.tuples(st.just("start"), st.floats(0, 1)),
    st.tuples(st.just("fully"), st.integers(0, 5)),
    st.tuples(st.just("reopen"), st.sampled_from(["keep", "missing", "corrupt"])),
    st.tuples(st.just("crash"), st.floats(0, 1)),
)


def check(log):
    expected = epoch_starts(log)
    assert entries(log.leader_epoch_cache) == expected
    if not log.leader_epoch_cache.unwritten:  # else the flush scan writes it (a crash before is one of the ops)
        assert checkpoint_of(log) == expected
    assert log._leader_epochs_from_log() == expected  # what a reopen without the file would build
    latest = expected[-1][0] if expected else 0
    for requested in range(-1, latest + 2):
        assert log.end_offset_for_epoch(requested) == brute_end_offset(log, requested), requested


@PROFILE
@given(ops=st.lists(OPS, max_size=40))
def test_cache_matches_the_log(tmp_path_factory, ops):
    """Leader appends with non-decreasing epochs, truncations, log start moves, reopening with a
    good, missing or corrupt checkpoint, crashes that cut the log: the cache always equals the one
    rebuilt from the batch headers, and OffsetForLeaderEpoch matches a brute-force answer."""
    root = tmp_path_factory.mktemp("epochs")
    log = open_log(root)
    epoch = 0
    for op in ops:
        kind = op[0]
        end = log.log_end_offset
        if kind == "append":
            epoch += op[1]
            append(log, op[2], leader_epoch=epoch)
        elif kind == "truncate":
            log.truncate_to(int(op[1] * end))
        elif kind == "start" and end > log.log_start_offset:
            # Strictly below the end: an empty log keeps its last epoch at its start, which
            # no batch header can show.
            log.update_high_watermark(end)
            log.maybe_increment_log_start_offset(min(end - 1, log.log_start_offset + int(op[1] * end)))
        elif kind == "fully":
            log.truncate_fully_and_start_at(end + op[1])
        elif kind in ("reopen", "crash"):
            start = log.log_start_offset
            if kind == "reopen":
                log.flush()
                log.close()
            else:
                for seg in log.segments:
                    seg.close_handlers()
                seg = log.active_segment
                os.truncate(seg.log_path, int(op[1] * seg.size))
            path = log.dir / LEADER_EPOCH_CHECKPOINT
            if op[1] == "missing":
                path.unlink(missing_ok=True)  # never written while the cache was empty
            elif op[1] == "corrupt":
                path.write_bytes(b"0\n7\n")
            log = open_log(root, log_start_offset=start, had_clean_shutdown=kind == "reopen")
        check(log)
    # A follower copying the leader's log from its first batch gets the same history.
    first = next(log.batches_from(log.log_start_offset), None)
    if first is not None:
        data = bytearray(log.read(log.log_start_offset, 10**7, min_one_message=True).read_bytes())
        follower = open_log(root, "topic-1")
        follower.truncate_fully_and_start_at(first[2].base_offset)
        while data:
            batches = validate_batches(data, from_client=False)
            follower.append_as_follower(data, batches)
            data = bytearray(log.read(follower.log_end_offset, 10**7).read_bytes())
        check(follower)
        assert [e for e, _ in entries(follower.leader_epoch_cache)] == [e for e, _ in epoch_starts(log)]
