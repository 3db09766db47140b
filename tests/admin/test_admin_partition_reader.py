"""Decoding a Fetch answer's records for tools that show them (no broker): records before the
offset asked for are dropped, control batches skipped, a partial tail waits for the next read,
and a batch that is not v2 or is malformed is an AdminError naming the offset."""

import pytest

from kbroker.admin.client import AdminError
from kbroker.admin.partition_reader import decode_fetched
from kbroker.wire.control import ABORT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import Record, build_batch


def _batch(base, n, ts=1000):
    return build_batch([Record(base + i, ts + i, f"k{base + i}".encode(), b"v", [("h", b"x")]) for i in range(n)],
                       base_offset=base)


def test_records_from_the_offset_asked_for():
    chunk = _batch(0, 3) + _batch(3, 2)
    records, next_offset = decode_fetched(chunk, 2)
    assert [r.offset for r in records] == [2, 3, 4]
    assert records[0].key == b"k2" and records[0].headers == [("h", b"x")]
    assert next_offset == 5


def test_control_batches_are_skipped_but_advance():
    marker = build_end_txn_marker_batch(EndTransactionMarker(ABORT, 0), producer_id=7, producer_epoch=0,
                                        timestamp=5, base_offset=3)
    records, next_offset = decode_fetched(_batch(0, 3) + marker + _batch(4, 1), 0)
    assert [r.offset for r in records] == [0, 1, 2, 4]
    assert next_offset == 5


def test_a_partial_tail_is_left_for_the_next_read():
    whole, second = _batch(0, 2), _batch(2, 2)
    records, next_offset = decode_fetched(whole + second[:-5], 0)
    assert [r.offset for r in records] == [0, 1] and next_offset == 2
    assert decode_fetched(second[:30], 2) == ([], 2)


def test_garbage_is_an_admin_error():
    bad = bytearray(_batch(0, 2))
    bad[16] = 1  # magic 1
    with pytest.raises(AdminError, match="after offset 0"):
        decode_fetched(bytes(bad), 0)
