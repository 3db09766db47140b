"""TimeIndex: Kafka's 12-byte big-endian entries, monotonic timestamps, spare slot, truncation."""

import struct

import pytest

from kbroker.log.time_index import NO_TIMESTAMP, TimeIndex


def test_maybe_append_only_increasing_timestamps(tmp_path):
    idx = TimeIndex(tmp_path / "00000000000000000050.timeindex", 50, 1200)
    assert idx.last_entry() == (NO_TIMESTAMP, 50)
    idx.maybe_append(1000, 55)
    idx.maybe_append(1000, 57)  # same timestamp: ignored
    idx.maybe_append(2000, 60)
    assert idx.entries == 2
    with pytest.raises(ValueError):
        idx.maybe_append(3000, 59)  # offset going back
    with pytest.raises(ValueError):
        idx.maybe_append(1500, 70)  # timestamp going back
    assert idx.lookup(999) == (NO_TIMESTAMP, 50)
    assert idx.lookup(1000) == (1000, 55)
    assert idx.lookup(1999) == (1000, 55)
    assert idx.lookup(10**12) == (2000, 60)
    idx.close()
    assert idx.path.read_bytes() == struct.pack(">qIqI", 1000, 5, 2000, 10)
    assert TimeIndex(idx.path, 50, 1200).last_entry() == (2000, 60)


def test_full_keeps_a_slot_for_the_final_entry(tmp_path):
    idx = TimeIndex(tmp_path / "0.timeindex", 0, 36)  # 3 entries
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full()
    with pytest.raises(ValueError):
        idx.maybe_append(3, 3)
    idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.entries == 3


def test_truncate(tmp_path):
    idx = TimeIndex(tmp_path / "0.timeindex", 0, 1200)
    for i in range(1, 6):
        idx.maybe_append(i * 100, i * 10)
    idx.truncate_to(30)
    assert idx.last_entry() == (200, 20)
    assert idx.path.stat().st_size == 24
    idx.reset()
    assert idx.entries == 0
