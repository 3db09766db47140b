"""FileRecords.batch_headers: the headers of the whole batches in a file range, read without the
records of large batches, positions relative to the range, a trailing partial batch left out."""

import os

from hypothesis import given, settings, strategies as st

from kbroker.log.records_view import FileRecords
from kbroker.wire.records import Record, build_batch, iter_batch_headers


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40_000), min_size=1, max_size=12), st.integers(0, 3), st.integers(0, 60))
def test_headers_match_a_parse_of_the_bytes(tmp_path_factory, sizes, skip, cut):
    batches = [build_batch([Record(i, 1, None, b"x" * n, [])], base_offset=i) for i, n in enumerate(sizes)]
    data = b"".join(batches)
    path = tmp_path_factory.mktemp("fr") / "seg"
    path.write_bytes(b"\0" * 7 + data)
    start = 7 + sum(len(b) for b in batches[:min(skip, len(batches))])
    size = 7 + len(data) - start - cut  # a cut > 0 leaves the last batch partial
    fd = os.open(path, os.O_RDONLY)
    try:
        got = [(pos, h.base_offset, h.size_in_bytes) for pos, h in FileRecords(fd, start, size).batch_headers()]
    finally:
        os.close(fd)
    view = data[start - 7:start - 7 + size]
    expected = [(pos, h.base_offset, h.size_in_bytes) for pos, h in iter_batch_headers(view)
                if pos + h.size_in_bytes <= size]
    assert got == expected
