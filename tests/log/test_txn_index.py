"""TransactionIndex: Kafka's 34-byte AbortedTxn entries, appends, truncation, search."""

import struct

import pytest

from kbroker.log.txn_index import AbortedTxn, CorruptTxnIndexError, TransactionIndex


def test_entry_layout_is_kafkas(tmp_path):
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert not idx.path.exists()  # created on the first entry, as in Kafka
    idx.append(AbortedTxn(7, 3, 10, 4))
    idx.close()
    data = idx.path.read_bytes()
    assert len(data) == 34 == TransactionIndex.ENTRY_SIZE
    assert struct.unpack(">hqqqq", data) == (0, 7, 3, 10, 4)


def test_append_search_truncate(tmp_path):
    idx = TransactionIndex(tmp_path / "x.txnindex", 0)
    txns = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 20, 21)]
    for t in txns:
        idx.append(t)
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(4, 1, 20, 21))  # last offsets must increase
    assert idx.all_aborted_txns() == txns
    assert idx.collect_aborted_txns(6, 12) == ([txns[1]], True)  # entry 2's LSO reaches the bound
    assert idx.collect_aborted_txns(0, 100) == (txns, False)
    idx.truncate_to(9)
    assert idx.all_aborted_txns() == txns[:1]
    idx.append(AbortedTxn(5, 7, 8, 9))  # the newest last offset is 5 again
    idx.reset()
    assert idx.all_aborted_txns() == []


def test_torn_tail_and_sanity(tmp_path):
    path = tmp_path / "00000000000000000010.txnindex"
    path.write_bytes(AbortedTxn(1, 10, 12, 13).pack() + b"\x00\x01")
    idx = TransactionIndex(path, 10)
    assert idx.all_aborted_txns() == [AbortedTxn(1, 10, 12, 13)]
    with pytest.raises(CorruptTxnIndexError):
        idx.sanity_check()
    idx.truncate_to(100)  # drops the torn tail
    idx.sanity_check()
    path.write_bytes(AbortedTxn(1, 0, 5, 6).pack())  # ends below the segment
    with pytest.raises(CorruptTxnIndexError):
        TransactionIndex(path, 10).sanity_check()


def test_an_empty_index_is_searched_without_file_access(tmp_path, monkeypatch):
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert idx.collect_aborted_txns(0, 100) == ([], False)  # learns the file is missing
    reads = []
    real_read = TransactionIndex._read
    monkeypatch.setattr(TransactionIndex, "_read", lambda self: reads.append(1) or real_read(self))
    for _ in range(3):
        assert idx.collect_aborted_txns(0, 100) == ([], False)
    assert reads == []
    idx.append(AbortedTxn(1, 2, 3, 4))  # entries go through the index, so it knows it is no longer empty
    assert idx.collect_aborted_txns(0, 100) == ([AbortedTxn(1, 2, 3, 4)], False)
    idx.truncate_to(0)
    assert idx.collect_aborted_txns(0, 100) == ([], False)
    idx.close()
