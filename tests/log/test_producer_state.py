"""ProducerStateManager: Kafka's epoch/sequence rules, duplicates, transactions, snapshots."""

import struct

import pytest

from kbroker.errors import InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError
from kbroker.log.producer_state import ProducerStateManager, snapshot_file_name
from kbroker.wire.control import COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import Record, build_batch, parse_batch_header


def header(pid=1, epoch=0, seq=0, n=1, txn=False, control=False, base_offset=0, ts=100):
    if control:  # a COMMIT marker
        data = build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 0), producer_id=pid, producer_epoch=epoch,
                                          timestamp=ts, base_offset=base_offset)
        return parse_batch_header(data)
    data = build_batch([Record(base_offset + i, ts, None, b"v") for i in range(n)], base_offset=base_offset,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    return parse_batch_header(data)


def apply(psm, h, first_offset, validate=True, marker=EndTransactionMarker(COMMIT, 0)):
    info = psm.prepare_update(h.producer_id, validate=validate)
    completed = info.append_batch(h, first_offset, marker if h.is_control else None)
    psm.update(info)
    if completed is not None:
        psm.complete_txn(completed)
        psm.on_high_watermark_updated(completed.last_offset + 1)
    return info


def test_sequences_in_order_and_gaps(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(seq=0, n=3), 0)
    apply(psm, header(seq=3, n=2), 3)
    e = psm.last_entry(1)
    assert (e.producer_epoch, e.first_seq, e.last_seq, e.last_data_offset) == (0, 0, 4, 4)
    with pytest.raises(OutOfOrderSequenceError):
        apply(psm, header(seq=6), 5)  # gap
    with pytest.raises(OutOfOrderSequenceError):
        apply(psm, header(seq=4), 5)  # not the next one either
    assert psm.last_entry(1).last_seq == 4  # failed validation changed nothing


def test_duplicates_of_last_five_batches(tmp_path):
    psm = ProducerStateManager(tmp_path)
    for i in range(7):
        apply(psm, header(seq=i * 2, n=2), 10 + i * 2)
    e = psm.last_entry(1)
    assert len(e.batches) == 5
    dup = e.find_duplicate_batch(header(seq=8, n=2))
    assert (dup.first_offset, dup.last_offset) == (18, 19)
    assert e.find_duplicate_batch(header(seq=2, n=2)) is None  # fell out of the window
    assert e.find_duplicate_batch(header(seq=8, n=1)) is None  # different range
    assert e.find_duplicate_batch(header(seq=8, n=2, epoch=1)) is None  # different epoch


def test_epochs(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(epoch=2, seq=0, n=2), 0)
    with pytest.raises(InvalidProducerEpochError):
        apply(psm, header(epoch=1, seq=2), 2)
    with pytest.raises(OutOfOrderSequenceError):
        apply(psm, header(epoch=3, seq=5), 2)  # a new epoch starts at 0
    apply(psm, header(epoch=3, seq=0), 2)
    e = psm.last_entry(1)
    assert e.producer_epoch == 3 and len(e.batches) == 1  # batches of the old epoch dropped


def test_unknown_producer_accepts_any_sequence(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(pid=9, epoch=4, seq=1234), 0)
    assert psm.last_entry(9).last_seq == 1234


def test_sequence_wraps(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(seq=2**31 - 2, n=2), 0)
    assert psm.last_entry(1).last_seq == 2**31 - 1
    apply(psm, header(seq=0, n=1), 2)
    assert psm.last_entry(1).last_seq == 0
    psm2 = ProducerStateManager(tmp_path / "x")
    apply(psm2, header(seq=2**31 - 1, n=3), 0)  # wraps inside the batch
    assert psm2.last_entry(1).last_seq == 1


def test_transactions_begin_and_end(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(seq=0, n=2, txn=True), 50)
    assert psm.last_entry(1).current_txn_first_offset == 50
    apply(psm, header(seq=2, n=1, txn=True), 52)
    assert psm.last_entry(1).current_txn_first_offset == 50
    assert psm.first_unstable_offset() == 50
    with pytest.raises(InvalidTxnStateError):
        apply(psm, header(seq=3, n=1, txn=False), 53)
    apply(psm, header(control=True), 53)
    assert psm.last_entry(1).current_txn_first_offset == -1
    assert psm.first_unstable_offset() is None
    apply(psm, header(seq=3, n=1), 54)  # sequences continue after the marker


def test_replay_does_not_validate(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(epoch=5, seq=0), 0)
    apply(psm, header(epoch=1, seq=77), 1, validate=False)
    assert psm.last_entry(1).producer_epoch == 1


def test_snapshot_round_trip_kafka_format(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(pid=1, epoch=2, seq=0, n=3, ts=111), 10)
    apply(psm, header(pid=2, epoch=0, seq=2**31 - 1, n=2, ts=222, txn=True), 13)
    psm.update_map_end_offset(15)
    path = psm.take_snapshot()
    assert path.name == snapshot_file_name(15) == "00000000000000000015.snapshot"
    raw = path.read_bytes()
    version, _crc, count = struct.unpack_from(">hIi", raw)
    assert (version, count) == (1, 2) and len(raw) == 10 + 2 * 46
    loaded = ProducerStateManager(tmp_path)
    assert loaded.snapshot_offsets == [15]
    loaded.truncate_and_reload(0, 15)
    assert loaded.map_end_offset == 15
    e1, e2 = loaded.last_entry(1), loaded.last_entry(2)
    assert (e1.producer_epoch, e1.first_seq, e1.last_seq, e1.last_data_offset, e1.last_timestamp) == (2, 0, 2, 12, 111)
    assert (e2.first_seq, e2.last_seq, e2.current_txn_first_offset) == (2**31 - 1, 0, 13)
    assert e1.find_duplicate_batch(header(pid=1, epoch=2, seq=0, n=3)).first_offset == 10


def test_corrupt_or_out_of_range_snapshots_are_dropped(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(seq=0), 0)
    for off in (5, 10, 20):
        psm.update_map_end_offset(off)
        psm.take_snapshot()
    p10 = tmp_path / snapshot_file_name(10)
    data = bytearray(p10.read_bytes())
    data[-1] ^= 1
    p10.write_bytes(data)
    psm2 = ProducerStateManager(tmp_path)
    psm2.truncate_and_reload(0, 12)  # 20 is beyond the log end, 10 is corrupt: fall back to 5
    assert psm2.map_end_offset == 5
    assert psm2.snapshot_offsets == [5]
    assert not (tmp_path / snapshot_file_name(20)).exists()
    psm2.truncate_and_reload(6, 12)  # nothing usable: empty state from the log start
    assert psm2.map_end_offset == 6 and psm2.is_empty()


def test_expiration(tmp_path):
    psm = ProducerStateManager(tmp_path)
    apply(psm, header(pid=1, seq=0, ts=1000), 0)
    apply(psm, header(pid=2, seq=0, ts=1000, txn=True), 1)
    assert psm.remove_expired_producers(now_ms=10_000, expiration_ms=5_000) == 1
    assert psm.last_entry(1) is None and psm.last_entry(2) is not None  # ongoing txn kept
