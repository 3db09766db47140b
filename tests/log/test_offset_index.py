"""OffsetIndex: Kafka's 8-byte big-endian entries, lookups, truncation, limits, reload."""

import struct

import pytest

from kbroker.log.offset_index import OffsetIndex, OffsetPosition


def test_append_lookup_and_file_format(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    assert idx.lookup(150) == OffsetPosition(100, 0)
    idx.append(110, 4000)
    idx.append(120, 8000)
    idx.append(135, 12000)
    assert idx.entries == 3 and idx.last_offset == 135
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 4000)
    assert idx.lookup(119) == (110, 4000)
    assert idx.lookup(10_000) == (135, 12000)
    assert idx.lookup_by_position(8000) == (120, 8000)
    assert idx.lookup_by_position(7999) == (110, 4000)
    idx.close()
    raw = idx.path.read_bytes()
    assert raw == struct.pack(">IIIIII", 10, 4000, 20, 8000, 35, 12000)
    again = OffsetIndex(idx.path, 100, 1024)
    assert again.lookup(125) == (120, 8000)


def test_append_rules_and_full(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 0, 16)  # two entries
    assert idx.max_entries == 2
    idx.append(5, 100)
    with pytest.raises(ValueError):
        idx.append(5, 200)  # offsets must increase
    with pytest.raises(ValueError):
        idx.append(6, 50)  # positions must not go back
    idx.append(9, 300)
    assert idx.is_full()
    with pytest.raises(ValueError):
        idx.append(10, 400)
    with pytest.raises(ValueError):
        OffsetIndex(tmp_path / "1.index", 0, 1024).append(2**32, 0)


def test_truncate_and_reset(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 0, 1024)
    for i in range(1, 6):
        idx.append(i * 10, i * 100)
    idx.truncate_to(30)  # removes entries >= 30
    assert idx.entries == 2 and idx.last_offset == 20
    assert idx.path.stat().st_size == 16
    idx.truncate_to(21)
    assert idx.entries == 2
    idx.append(25, 250)
    idx.flush()
    assert OffsetIndex(idx.path, 0, 1024).entries == 3
    idx.reset()
    assert idx.entries == 0 and idx.path.stat().st_size == 0


def test_torn_tail_entry_is_dropped(tmp_path):
    p = tmp_path / "0.index"
    p.write_bytes(struct.pack(">II", 1, 10) + b"\x00\x00\x00")
    idx = OffsetIndex(p, 0, 1024)
    assert idx.entries == 1
    assert p.stat().st_size == 8
    idx.append(2, 20)
    idx.close()
    assert OffsetIndex(p, 0, 1024).entries == 2


def test_entries_are_written_behind_and_reach_the_file_on_flush_and_close(tmp_path):
    p = tmp_path / "0.index"
    idx = OffsetIndex(p, 0, 1 << 20)
    idx.append(1, 10)
    assert idx.entries == 1 and idx.lookup(5).offset == 1  # served from memory at once
    assert not p.exists() or p.stat().st_size == 0  # no syscall per entry
    idx.flush()
    assert p.stat().st_size == 8
    for i in range(2, 2 + OffsetIndex.WRITE_BEHIND // 8):
        idx.append(i, i * 10)
    assert p.stat().st_size == 8 + OffsetIndex.WRITE_BEHIND  # a full group went out by itself
    idx.append(10_000, 100_000)
    idx.close()
    assert OffsetIndex(p, 0, 1 << 20).entries == idx.entries
