"""LogSegment: appends and index entries, reads as whole-batch file ranges, recovery, truncation,
timestamp lookup and roll conditions."""

import os

from log_test_helpers import batches_of, make_batch

from kbroker.log.segment import LogSegment
from kbroker.wire.records import set_base_offset, validate_batches


def new_segment(tmp_path, base=0, interval=100, index_size=1024, now=0):
    return LogSegment.open(tmp_path, base, index_interval_bytes=interval, max_index_size=index_size, now_ms=now)


def fill(seg, count, start_offset=None, n=3, ts=1000, ts_step=10):
    """Append `count` batches of n records; returns [(base_offset, position, size)]."""
    offset = seg.base_offset if start_offset is None else start_offset
    out = []
    for i in range(count):
        buf = make_batch(n, ts=ts + i * ts_step)
        set_base_offset(buf, 0, offset)
        [(_, h)] = validate_batches(buf, from_client=False)
        out.append((offset, seg.size, len(buf)))
        seg.append(offset + n - 1, h.max_timestamp, offset + n - 1, buf)
        offset += n
    return out


def test_file_names_and_append(tmp_path):
    seg = new_segment(tmp_path, base=42)
    assert seg.log_path.name == "00000000000000000042.log"
    written = fill(seg, 10)
    assert seg.size == sum(s for _, _, s in written) == os.path.getsize(seg.log_path)
    assert seg.read_next_offset() == 42 + 30
    assert seg.offset_index.entries > 0
    # every index entry points at a batch start whose batch holds an offset <= entry offset
    starts = {p: o for o, p, _ in written}
    rel, pos = seg.offset_index._entries()
    for r, p in zip(rel, pos):
        assert p in starts and starts[p] <= 42 + r
    seg.close()
    assert (tmp_path / "00000000000000000042.index").exists()
    assert (tmp_path / "00000000000000000042.timeindex").exists()


def test_index_entries_every_interval_bytes(tmp_path):
    seg = new_segment(tmp_path, interval=4096)
    written = fill(seg, 200)
    batch = written[0][2]
    entries = seg.offset_index.entries
    # Kafka adds an entry once more than interval bytes were appended since the last one.
    assert abs(entries - seg.size // (4096 + batch)) <= 2


def test_read_whole_batches_and_limits(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, 20)
    size = written[0][2]
    # start inside a batch: from that batch's start
    info = seg.read(4, 10 * size)
    [fr] = info.records
    assert fr.position == written[1][1]
    assert fr.size == 10 * size
    assert [h.base_offset for _, h in batches_of(fr.read())] == list(range(3, 33, 3))
    # max_size not a multiple: whole batches only
    info = seg.read(0, int(2.5 * size))
    assert info.size == 2 * size
    # first batch larger than max_size: min_one_message returns it whole, otherwise nothing
    info = seg.read(0, 10, min_one_message=True)
    assert info.size == size and info.first_entry_incomplete is False
    info = seg.read(0, 10, min_one_message=False)
    assert info.size == 0 and info.records == [] and info.first_entry_incomplete
    # max_position caps at a batch boundary
    info = seg.read(0, 10**6, max_position=written[5][1])
    assert info.size == 5 * size
    # beyond the end: None
    assert seg.read(60, 100) is None


def test_translate_offset(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, 20)
    m = seg.translate_offset(31)
    assert (m.offset, m.position, m.size) == (32, written[10][1], written[10][2])
    assert seg.translate_offset(0).position == 0
    assert seg.translate_offset(1000) is None


def test_recover_rebuilds_indexes_and_truncates_torn_tail(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, 30)
    before = seg.offset_index._entries()
    before = (list(before[0]), list(before[1]))
    seg.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00" * 30)
    (tmp_path / "00000000000000000000.index").unlink()
    seg = new_segment(tmp_path)
    assert seg.recover() == 30
    assert seg.size == sum(s for _, _, s in written)
    after = seg.offset_index._entries()
    assert (list(after[0]), list(after[1])) == before
    assert seg.max_timestamp_so_far == 1000 + 29 * 10 + 2
    assert seg.read_next_offset() == 90


def test_recover_stops_at_crc_error_and_offset_gap(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, 10)
    seg.close()
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[written[6][1] + 70] ^= 0xFF
    path.write_bytes(data)
    seg = new_segment(tmp_path)
    assert seg.recover() == sum(s for _, _, s in written[6:])
    assert seg.read_next_offset() == 18
    seg.close()
    # an offset gap (base offset not continuing the previous batch) ends the valid prefix
    data = bytearray(path.read_bytes())
    data[written[3][1] + 7] += 1
    path.write_bytes(data)
    seg = new_segment(tmp_path)
    seg.recover()
    assert seg.read_next_offset() == 9


def test_truncate_to(tmp_path):
    seg = new_segment(tmp_path)
    written = fill(seg, 20)
    total = seg.size
    removed = seg.truncate_to(31)  # inside batch 30..32: the batch goes
    assert seg.size == written[10][1] and removed == total - written[10][1]
    assert seg.read_next_offset() == 30
    assert seg.offset_index.last_offset < 30
    assert seg.max_timestamp_so_far == 1000 + 9 * 10 + 2
    fill(seg, 1, start_offset=30)
    assert seg.read_next_offset() == 33
    assert seg.truncate_to(0) > 0 and seg.size == 0


def test_find_offset_by_timestamp(tmp_path):
    seg = new_segment(tmp_path)
    fill(seg, 20, ts=1000, ts_step=10)  # batch i: timestamps 1000+10i .. +2
    assert seg.find_offset_by_timestamp(0) == (0, 1000)
    assert seg.find_offset_by_timestamp(1051) == (16, 1051)
    assert seg.find_offset_by_timestamp(1053) == (18, 1060)
    assert seg.find_offset_by_timestamp(1050, starting_offset=17) == (17, 1052)
    assert seg.find_offset_by_timestamp(5000) is None


def test_should_roll_conditions(tmp_path):
    seg = new_segment(tmp_path, now=0)
    kw = dict(max_segment_ms=1000, max_segment_bytes=1000, max_timestamp_in_messages=0,
              max_offset_in_messages=0, messages_size=100, now_ms=0)
    assert not seg.should_roll(**kw)
    assert not seg.should_roll(**{**kw, "now_ms": 5000})  # empty segments never roll by time
    fill(seg, 1, ts=10_000)
    assert not seg.should_roll(**{**kw, "max_timestamp_in_messages": 10_500})
    assert seg.should_roll(**{**kw, "max_timestamp_in_messages": 11_003})  # vs first batch max ts 10_002
    assert seg.should_roll(**{**kw, "messages_size": 1000 - seg.size + 1})
    assert seg.should_roll(**{**kw, "max_offset_in_messages": 2**31})


def test_largest_timestamp_falls_back_to_mtime(tmp_path):
    seg = new_segment(tmp_path)
    assert seg.max_timestamp_so_far == -1
    assert abs(seg.largest_timestamp - int(os.path.getmtime(seg.log_path) * 1000)) < 2


def test_rename_to_deleted_keeps_fd_readable(tmp_path):
    seg = new_segment(tmp_path)
    fill(seg, 3)
    info = seg.read(0, 10**6)
    seg.rename_to_deleted()
    assert (tmp_path / "00000000000000000000.log.deleted").exists()
    assert not (tmp_path / "00000000000000000000.log").exists()
    assert len(batches_of(info.read_bytes())) == 3
    seg.delete()
    assert list(tmp_path.iterdir()) == []
