"""The file handling OffsetIndex and TimeIndex share (IndexFile): torn tails, rename, reset, delete."""

import pytest

from kbroker.log.offset_index import OffsetIndex
from kbroker.log.time_index import TimeIndex


def _add(idx, i: int) -> None:
    if isinstance(idx, OffsetIndex):
        idx.append(100 + i, i * 10)
    else:
        idx.maybe_append(1000 + i, 100 + i)


@pytest.fixture(params=[OffsetIndex, TimeIndex], ids=["offset", "time"])
def kind(request):
    return request.param


def test_torn_tail_rename_reopen_and_delete(tmp_path, kind):
    p = tmp_path / "a"
    idx = kind(p, 100, 1024)
    for i in range(1, 4):
        _add(idx, i)
    idx.flush()
    with p.open("ab") as f:
        f.write(b"\x01\x02\x03")  # torn tail entry
    again = kind(p, 100, 1024)
    assert again.entries == 3 and p.stat().st_size == 3 * kind.ENTRY_SIZE
    idx.rename(tmp_path / "b")  # the open append fd follows the file
    _add(idx, 4)
    idx.close()
    assert not p.exists() and kind(tmp_path / "b", 100, 1024).entries == 4
    _add(idx, 5)  # a closed writer reopens on the next append
    idx.truncate_to(103)
    assert idx.entries == 2 and idx.path.stat().st_size == 2 * kind.ENTRY_SIZE
    idx.delete()
    assert not idx.path.exists()


def test_reset_creates_a_missing_file(tmp_path, kind):
    idx = kind(tmp_path / "a", 0, 1024)
    idx.reset()
    assert idx.path.exists() and idx.path.stat().st_size == 0 and idx.entries == 0
    idx.rename(tmp_path / "b")
    assert idx.path == tmp_path / "b" and idx.path.exists()
