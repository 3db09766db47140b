"""Log compaction (kbroker/log/cleaner.py and the Log/LogManager hooks): what survives a clean,
tombstone horizons, producer state, the swap and its crash recovery, the cleaner checkpoint, and
a property over arbitrary keyed appends."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_test_helpers import PROFILE, Clock, read_all_records

from kbroker.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from kbroker.log.cleaner import Cleaner, LogToClean, group_segments_by_size
from kbroker.log.config import LogConfig
from kbroker.log.log import Log, wall_clock_ms
from kbroker.log.log_manager import LogManager
from kbroker.log.segment import CLEANED_SUFFIX, SWAP_SUFFIX
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import Record, build_batch, iter_batch_headers, validate_batches

DAY = 86_400_000
COMPACT = LogConfig(segment_bytes=400, cleanup_policy="compact", file_delete_delay_ms=0, index_interval_bytes=50)


def append_kv(log: Log, pairs, *, ts: int = 1000, compression: int = 0, pid: int = -1, epoch: int = -1,
              seq: int = -1, txn: bool = False):
    records = [Record(i, ts + i, k, v, [("h", b"x")]) for i, (k, v) in enumerate(pairs)]
    buf = bytearray(build_batch(records, compression=compression, producer_id=pid, producer_epoch=epoch,
                                base_sequence=seq, is_transactional=txn))
    # keyless records reach a compacted log only from before it was compacted (or by replication):
    # appended past the client check, which refuses them
    keyless = any(k is None for k, _ in pairs)
    info = log.append_as_leader(buf, validate_batches(buf), leader_epoch=0, from_client=not keyless)
    log.update_high_watermark(log.log_end_offset)
    return info


def open_log(tmp_path, cfg: LogConfig = COMPACT, clock: Clock | None = None, **kw) -> Log:
    return Log.open(tmp_path / "t-0", cfg, now_ms=clock or Clock(), **kw)


def clean(log: Log, now_ms: int, checkpoint: int | None = None) -> int:
    end, _stats = Cleaner().clean(LogToClean.of(log, checkpoint, now_ms), now_ms)
    return end


def kv(log: Log, start: int | None = None):
    return [(r.offset, r.key, r.value) for r in read_all_records(log, start)]


def all_batches(log: Log):
    return [h for seg in log.segments for _pos, h in seg.iter_batches()]


def crash(log: Log) -> None:
    for seg in log.segments:
        seg.close_handlers()


def test_latest_value_per_key_survives_across_segments(tmp_path):
    log = open_log(tmp_path)
    for i in range(40):
        append_kv(log, [(b"k%d" % (i % 4), b"v%d" % i)], ts=1000 + i)
    log.roll()
    assert len(log.segments) > 3
    end = clean(log, 10_000)
    assert end == log.active_segment.base_offset == 40
    assert kv(log) == [(36, b"k0", b"v36"), (37, b"k1", b"v37"), (38, b"k2", b"v38"), (39, b"k3", b"v39")]
    assert log.log_start_offset == 0 and log.log_end_offset == 40
    # appends continue after the log end, and a second clean keeps only the newest again
    append_kv(log, [(b"k0", b"new")])
    log.roll()
    clean(log, 10_000, end)
    assert kv(log) == [(37, b"k1", b"v37"), (38, b"k2", b"v38"), (39, b"k3", b"v39"), (40, b"k0", b"new")]


def test_active_segment_is_never_touched(tmp_path):
    log = open_log(tmp_path)
    for i in range(20):
        append_kv(log, [(b"k", b"v%d" % i)])
    active = log.active_segment
    before = active.log_path.read_bytes()
    assert before  # the active segment holds superseded values of k too
    clean(log, 10_000)
    assert log.active_segment is active and active.log_path.read_bytes() == before
    assert [v for _o, _k, v in kv(log)][-1] == b"v19"
    offsets = [o for o, _k, _v in kv(log)]
    assert offsets == sorted(offsets) and offsets[-1] == 19


def test_offsets_are_preserved_and_reads_skip_gaps(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        append_kv(log, [(b"a", b"%d" % i), (b"k%d" % i, b"x")])  # 2 records per batch
    log.roll()
    clean(log, 10_000)
    records = kv(log)
    assert [o for o, _k, _v in records] == [1 + 2 * i for i in range(29)] + [58, 59]
    for offset, key, _value in records:
        assert key == b"k%d" % (offset // 2) or (key == b"a" and offset == 58)
    # Fetch at an offset that was compacted away returns the next surviving batch
    data = log.read(0, 1 << 20).read_bytes()
    first = next(iter_batch_headers(data, check_crc=True))[1]
    assert first.base_offset == 0 and first.last_offset == 1  # batch keeps its base offset and range
    data = log.read(10, 100).read_bytes()
    assert next(iter_batch_headers(data, check_crc=True))[1].base_offset == 10
    # every batch still covers its original offset range
    assert [(h.base_offset, h.last_offset) for h in all_batches(log)] == [(2 * i, 2 * i + 1) for i in range(30)]


def test_null_keys_are_dropped(tmp_path):
    log = open_log(tmp_path)
    append_kv(log, [(None, b"no key"), (b"k", b"v"), (None, b"again")])
    append_kv(log, [(None, b"only null keys")])
    log.roll()
    clean(log, 10_000)
    assert kv(log) == [(1, b"k", b"v")]


def test_tombstones_kept_until_delete_retention_passes(tmp_path):
    cfg = COMPACT.with_(delete_retention_ms=DAY)
    log = open_log(tmp_path, cfg)
    append_kv(log, [(b"a", b"1"), (b"b", b"1")])
    append_kv(log, [(b"a", None)])  # tombstone for a
    log.roll()
    t0 = 5_000_000
    end = clean(log, t0)
    assert kv(log) == [(1, b"b", b"1"), (2, b"a", None)]
    tomb = [h for h in all_batches(log) if h.base_offset == 2][0]
    assert tomb.delete_horizon_ms == t0 + DAY  # KIP-534: stamped by the first clean
    assert kv(log)[-1] == (2, b"a", None) and [r.timestamp for r in read_all_records(log)] == [1001, 1000]
    clean(log, t0 + DAY - 1, end)
    assert kv(log) == [(1, b"b", b"1"), (2, b"a", None)]
    clean(log, t0 + DAY, end)
    assert kv(log) == [(1, b"b", b"1")]


def test_tombstone_horizon_drives_a_later_clean_through_the_log_manager(tmp_path):
    clock = Clock(5_000_000)
    lm = LogManager([tmp_path], COMPACT.with_(delete_retention_ms=1000), now_ms=clock)
    lm.startup()
    log = lm.get_or_create_log(TopicPartition("c", 0))
    append_kv(log, [(b"a", b"1")])
    append_kv(log, [(b"a", None)])
    log.roll()
    assert lm.clean_compacted_logs() == 1
    assert kv(log) == [(1, b"a", None)]
    assert lm.clean_compacted_logs() == 0  # nothing dirty, horizon not reached
    clock.ms += 1000
    assert lm.clean_compacted_logs() == 1
    assert kv(log) == []
    assert lm.clean_compacted_logs() == 0
    lm.shutdown()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_cleaned_with_their_codec(tmp_path, codec):
    log = open_log(tmp_path, COMPACT.with_(segment_bytes=4000))
    for i in range(6):
        append_kv(log, [(b"k%d" % j, b"v%d-%d" % (i, j) * 5) for j in range(i, i + 4)], compression=codec)
    log.roll()
    clean(log, 10_000)
    for seg in log.segments:
        data = seg.log_path.read_bytes()
        for _pos, h in iter_batch_headers(data, check_crc=True):
            assert h.compression == codec
    latest = {}
    for i in range(6):
        for j in range(i, i + 4):
            latest[b"k%d" % j] = (4 * i + j - i, b"v%d-%d" % (i, j) * 5)
    assert kv(log) == sorted((o, k, v) for k, (o, v) in latest.items())


def test_idempotent_producer_keeps_its_last_batch(tmp_path):
    pid = 7
    log = open_log(tmp_path)
    append_kv(log, [(b"k", b"from producer")], pid=pid, epoch=3, seq=0)
    append_kv(log, [(b"k", b"newer, not idempotent")])
    log.roll()
    clean(log, 10_000)
    assert kv(log) == [(1, b"k", b"newer, not idempotent")]
    empty = [h for h in all_batches(log) if h.producer_id == pid]
    assert len(empty) == 1
    h = empty[0]
    assert (h.records_count, h.base_offset, h.last_offset, h.base_sequence, h.producer_epoch) == (0, 0, 0, 0, 3)
    # the producer state is rebuilt from the log alone (no snapshot): the sequence continues
    log.close()
    for p in (tmp_path / "t-0").glob("*.snapshot"):
        p.unlink()
    log = open_log(tmp_path, recovery_point=0)
    entry = log.producer_state.last_entry(pid)
    assert entry is not None and entry.last_seq == 0 and entry.producer_epoch == 3
    info = append_kv(log, [(b"k", b"seq 1")], pid=pid, epoch=3, seq=1)
    assert not info.duplicate and info.first_offset == 2


def test_superseded_batches_of_an_older_producer_batch_go(tmp_path):
    pid = 7
    log = open_log(tmp_path)
    append_kv(log, [(b"k", b"1")], pid=pid, epoch=0, seq=0)
    append_kv(log, [(b"k", b"2")], pid=pid, epoch=0, seq=1)
    log.roll()
    clean(log, 10_000)
    assert [(h.base_offset, h.records_count) for h in all_batches(log)] == [(1, 1)]


def test_control_and_transactional_batches_are_kept_as_they_are(tmp_path):
    log = open_log(tmp_path)
    append_kv(log, [(b"k", b"txn")], pid=9, epoch=0, seq=0, txn=True)
    append_kv(log, [(b"k", b"plain")])
    # an open transaction holds cleaning back at its first offset (the last stable offset)
    log.roll()
    assert LogToClean.of(log, None, 0).first_uncleanable_offset == 0
    marker = build_batch([Record(2, 1000, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=2,
                         producer_id=9, producer_epoch=0, is_transactional=True, is_control=True)
    log.append_as_follower(marker, validate_batches(marker, from_client=False))
    append_kv(log, [(b"k", b"plain"), (b"k", b"plain2")])
    log.roll()
    txn_batches = [h for h in all_batches(log) if h.is_transactional]
    clean(log, 10_000)
    assert [(r[0], r[2]) for r in kv(log)] == [(0, b"txn"), (2, b"\x00" * 6), (4, b"plain2")]
    assert [h for h in all_batches(log) if h.is_transactional] == txn_batches


def test_segments_are_grouped_by_size(tmp_path):
    log = open_log(tmp_path, COMPACT.with_(segment_bytes=300))
    for i in range(40):
        append_kv(log, [(b"k", b"v%d" % i)])
    log.roll()
    n = len(log.segments)
    clean(log, 10_000)
    assert len(log.segments) == n  # each segment is full: nothing to merge yet
    end = clean(log, 10_000)
    # the cleaned segments are tiny (mostly empty) now: one group
    groups = group_segments_by_size(log.segments[:-1], 300, COMPACT.segment_index_bytes, end)
    assert len(groups) == 1
    clean(log, 10_000, None)
    assert len(log.segments) == 2 and kv(log) == [(39, b"k", b"v39")]


def test_unclean_reopen_reads_offset_gaps_as_compaction(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        append_kv(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    log.roll()
    clean(log, 10_000)
    expected = kv(log)
    crash(log)
    log = open_log(tmp_path, recovery_point=0, cleaned=True)
    assert kv(log) == expected and log.log_end_offset == 30
    crash(log)
    # a compacted topic config implies the same
    log = open_log(tmp_path, recovery_point=0)
    assert kv(log) == expected


def test_in_flight_reads_of_a_replaced_segment_finish(tmp_path):
    clock = Clock()
    log = open_log(tmp_path, COMPACT.with_(file_delete_delay_ms=1000), clock)
    for i in range(30):
        append_kv(log, [(b"k", b"v%d" % i)])
    log.roll()
    fetch = log.read(0, 1 << 20)
    expected = fetch.read_bytes()
    clean(log, clock.ms)
    assert fetch.read_bytes() == expected  # old fds stay open until file.delete.delay.ms
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert any(n.endswith(".deleted") for n in names)
    assert not any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in names)
    clock.ms += 1000
    log.delete_old_segments()
    assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())


def _interrupted_clean(tmp_path, monkeypatch, stop_after: str):
    """Clean, but crash inside Log.replace_segments after step `stop_after`."""
    log = open_log(tmp_path, COMPACT.with_(segment_bytes=4000))
    for i in range(12):
        append_kv(log, [(b"k%d" % (i % 3), b"v%d" % i)])
        if i % 4 == 3:
            log.roll()
    append_kv(log, [(b"k0", b"active")])
    log.flush()
    before = kv(log)

    def replace(self, new, old):
        new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        if stop_after == "deleted":
            for seg in old:
                seg.rename_to_deleted()
        raise KeyboardInterrupt

    monkeypatch.setattr(Log, "replace_segments", replace)
    with pytest.raises(KeyboardInterrupt):
        clean(log, 10_000)
    monkeypatch.undo()
    crash(log)
    return before


@pytest.mark.parametrize("stop_after", ["swap", "deleted"])
def test_interrupted_swap_is_completed_at_load(tmp_path, monkeypatch, stop_after):
    before = _interrupted_clean(tmp_path, monkeypatch, stop_after)
    names = [p.name for p in (tmp_path / "t-0").iterdir()]
    assert any(n.endswith(".log" + SWAP_SUFFIX) for n in names)
    log = open_log(tmp_path, recovery_point=0, cleaned=True)
    names = [p.name for p in (tmp_path / "t-0").iterdir()]
    assert not any(n.endswith((SWAP_SUFFIX, CLEANED_SUFFIX, ".deleted")) for n in names)
    latest = {}
    for o, k, v in before:
        latest[k] = (o, k, v)
    after = kv(log)
    # the first group was swapped in (compacted); later ones are as before; the newest of each key is there
    assert set(latest.values()) <= set(after) and set(after) <= set(before)
    assert len(after) < len(before)
    assert [o for o, _k, _v in after] == sorted(o for o, _k, _v in after)
    assert log.log_end_offset == 13
    append_kv(log, [(b"k9", b"after")])
    assert kv(log)[-1] == (13, b"k9", b"after")


def test_leftover_cleaned_files_are_discarded(tmp_path):
    log = open_log(tmp_path)
    for i in range(10):
        append_kv(log, [(b"k", b"v%d" % i)])
    log.roll()
    before = kv(log)
    log.close()
    d = tmp_path / "t-0"
    (d / ("00000000000000000000.log" + CLEANED_SUFFIX)).write_bytes(b"partial")
    (d / ("00000000000000000000.index" + CLEANED_SUFFIX)).write_bytes(b"")
    (d / ("00000000000000000000.index" + SWAP_SUFFIX)).write_bytes(b"")
    log = open_log(tmp_path, recovery_point=0)
    assert kv(log) == before
    assert not any(p.name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for p in d.iterdir())


def test_damaged_swap_is_discarded(tmp_path):
    log = open_log(tmp_path)
    for i in range(10):
        append_kv(log, [(b"k", b"v%d" % i)])
    log.roll()
    before = kv(log)
    log.close()
    d = tmp_path / "t-0"
    seg0 = (d / "00000000000000000000.log").read_bytes()
    (d / ("00000000000000000000.log" + SWAP_SUFFIX)).write_bytes(seg0[:-3])
    log = open_log(tmp_path, recovery_point=0)
    assert kv(log) == before


def test_cleaner_checkpoint_survives_restart_and_drives_the_dirty_ratio(tmp_path):
    clock = Clock()
    tp = TopicPartition("compacted", 0)
    lm = LogManager([tmp_path], COMPACT, now_ms=clock)
    lm.startup()
    log = lm.get_or_create_log(tp)
    plain = lm.get_or_create_log(TopicPartition("plain", 0), COMPACT.with_(cleanup_policy="delete"))
    for i in range(20):
        append_kv(log, [(b"k%d" % (i % 2), b"v%d" % i)])
        append_kv(plain, [(b"k", b"v")])
    log.roll()
    plain.roll()
    assert lm.clean_compacted_logs() == 1
    assert lm.cleaner_offsets == {tp: 20}
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {tp: 20}
    assert lm.clean_compacted_logs() == 0  # clean now: ratio 0
    lm.shutdown()

    lm = LogManager([tmp_path], COMPACT, now_ms=clock)
    lm.startup({"plain": COMPACT.with_(cleanup_policy="delete")})
    assert lm.cleaner_offsets == {tp: 20}
    log = lm.get_log(tp)
    assert LogToClean.of(log, 20, clock.ms).cleanable_bytes == 0
    assert lm.clean_compacted_logs() == 0
    # a little dirt stays below min.cleanable.dirty.ratio; more crosses it
    append_kv(log, [(b"k0", b"x")])
    log.roll()
    ltc = LogToClean.of(log, 20, clock.ms)
    assert ltc.first_dirty_offset == 20 and ltc.first_uncleanable_offset == 21
    assert 0 < ltc.cleanable_ratio < 0.5
    assert lm.clean_compacted_logs() == 0
    for i in range(5):
        append_kv(log, [(b"k1", b"y%d" % i)])
    log.roll()
    assert lm.clean_compacted_logs() == 1 and lm.cleaner_offsets[tp] == 26
    assert kv(log) == [(20, b"k0", b"x"), (25, b"k1", b"y4")]
    lm.delete_log(tp)
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {}
    lm.shutdown()


def test_min_compaction_lag_holds_young_segments_back(tmp_path):
    clock = Clock(100_000)
    log = open_log(tmp_path, COMPACT.with_(min_compaction_lag_ms=50_000), clock)
    for i in range(10):
        append_kv(log, [(b"k", b"old%d" % i)], ts=10_000)
    log.roll()
    for i in range(10):
        append_kv(log, [(b"k", b"young%d" % i)], ts=90_000)
    log.roll()
    ltc = LogToClean.of(log, None, clock.ms)
    young = [s for s in log.segments if s.max_timestamp_so_far >= 90_000][0]
    assert ltc.first_uncleanable_offset == young.base_offset
    Cleaner().clean(ltc, clock.ms)
    values = [v for _o, _k, v in kv(log)]
    assert values[0] == b"old9" and values[1:] == [b"young%d" % i for i in range(10)]


def test_clean_stops_at_the_high_watermark(tmp_path):
    log = open_log(tmp_path)
    for i in range(10):
        append_kv(log, [(b"k", b"v%d" % i)])
    log.roll()
    log.update_high_watermark(0)
    log.high_watermark = 4
    ltc = LogToClean.of(log, None, 0)
    assert ltc.first_uncleanable_offset == 4


def test_retention_never_deletes_compact_only_logs(tmp_path):
    clock = Clock(10 * DAY)
    for policy, survives in (("compact", True), ("compact,delete", False), ("delete", False)):
        log = Log.open(tmp_path / f"{policy.replace(',', '_')}-0",
                       COMPACT.with_(cleanup_policy=policy, retention_ms=DAY, retention_bytes=100), now_ms=clock)
        for i in range(20):
            append_kv(log, [(b"k%d" % i, b"v")], ts=1000)
        log.roll()
        deleted = log.delete_old_segments()
        assert (deleted == 0) is survives, policy
        assert (log.log_start_offset == 0) is survives
    # "compact,delete" is also compacted
    assert COMPACT.with_(cleanup_policy="compact,delete").compact_enabled
    assert not COMPACT.with_(cleanup_policy="delete").compact_enabled


def test_compact_delete_gets_both(tmp_path):
    now = wall_clock_ms()
    clock = Clock(now)
    lm = LogManager([tmp_path], COMPACT.with_(cleanup_policy="compact,delete", retention_ms=DAY), now_ms=clock)
    lm.startup()
    log = lm.get_or_create_log(TopicPartition("both", 0))
    for i in range(10):
        append_kv(log, [(b"old", b"v%d" % i)], ts=now - 5 * DAY)
    log.roll()
    for seg in log.segments[:-1]:
        # written days ago: a segment the cleaner empties ages by its file time, as in Kafka
        os.utime(seg.log_path, ns=((now - 5 * DAY) * 1_000_000,) * 2)
    for i in range(10):
        append_kv(log, [(b"k", b"v%d" % i)], ts=now)
    log.roll()
    assert lm.clean_compacted_logs() == 1
    assert kv(log)[0] == (9, b"old", b"v9")
    lm.cleanup_logs()
    assert kv(log) == [(19, b"k", b"v9")]
    lm.shutdown()


# --- property --------------------------------------------------------------------------------------


@PROFILE
@given(data=st.data())
def test_property_clean_keeps_exactly_the_latest_value_per_key(tmp_path_factory, data):
    tmp_path = tmp_path_factory.mktemp("clean")
    retention = 1000
    cfg = COMPACT.with_(
        segment_bytes=data.draw(st.sampled_from([200, 600, 4000]), label="segment_bytes"),
        delete_retention_ms=retention,
    )
    log = open_log(tmp_path, cfg)
    keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", None])
    written: list[tuple[int, bytes | None, bytes | None]] = []
    for _ in range(data.draw(st.integers(1, 25), label="batches")):
        pairs = data.draw(st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=20))), min_size=1,
                                   max_size=4))
        info = append_kv(log, pairs, compression=data.draw(st.sampled_from([0, 1, 3])))
        written.extend((info.first_offset + i, k, v) for i, (k, v) in enumerate(pairs))
        if data.draw(st.booleans()):
            log.roll()
    cleanable_end = log.active_segment.base_offset
    now = 10_000
    checkpoint = None
    for _ in range(data.draw(st.integers(1, 2), label="cleans")):
        checkpoint = clean(log, now, checkpoint)
    second_late = data.draw(st.booleans(), label="late clean")
    if second_late:
        clean(log, now + retention, checkpoint)

    latest: dict[bytes, tuple[int, bytes | None, bytes | None]] = {}
    for offset, key, value in written:
        if offset < cleanable_end and key is not None:
            latest[key] = (offset, key, value)
    expected = [r for r in latest.values() if r[2] is not None or not second_late]
    expected += [r for r in written if r[0] >= cleanable_end]
    expected.sort()
    assert kv(log) == expected
    assert log.log_end_offset == len(written)
    for seg in log.segments:
        list(iter_batch_headers(seg.log_path.read_bytes(), check_crc=True))
    # and the same after an unclean reopen that recovers every segment
    crash(log)
    log = open_log(tmp_path, cfg, recovery_point=0)
    assert kv(log) == expected
    log.close()


def test_a_log_that_fails_to_clean_is_skipped_and_left_intact(tmp_path, caplog):
    import struct

    from crc32c import crc32c

    lm = LogManager([tmp_path], COMPACT, now_ms=Clock())
    lm.startup()
    bad = lm.get_or_create_log(TopicPartition("bad", 0))
    good = lm.get_or_create_log(TopicPartition("good", 0))
    for lg in (bad, good):
        for i in range(5):
            append_kv(lg, [(b"k", b"v%d" % i)])
    # a batch whose CRC is right but whose record count lies: only reading its records shows it
    raw = bytearray(build_batch([Record(5, 1000, b"k", b"v")], base_offset=5))
    struct.pack_into(">i", raw, 57, 3)
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    bad.append_as_follower(raw, validate_batches(raw, from_client=False))
    for lg in (bad, good):
        lg.update_high_watermark(lg.log_end_offset)
        lg.roll()
    before = bad.segments[0].log_path.read_bytes()
    assert lm.clean_compacted_logs() == 1
    assert "cleaning bad-0 failed" in caplog.text
    assert kv(good) == [(4, b"k", b"v4")]
    assert bad.segments[0].log_path.read_bytes() == before
    assert not any(p.name.endswith(CLEANED_SUFFIX) for p in (tmp_path / "bad-0").iterdir())
    assert lm.clean_compacted_logs() == 0
    lm.shutdown()
