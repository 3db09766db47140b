"""The internal topics' batches: a transactional offset commit laid out as Kafka's
GroupMetadataManager writes it, and batches read back with what a loader needs of them (producer,
transactional bit, the marker of a control batch)."""

from kbroker.wire.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.internal_records import InternalBatch, build_internal_batch, iter_internal_batches
from kbroker.wire.records import NO_SEQUENCE, build_batch, parse_batch_header, set_base_offset, validate_batches


def test_a_plain_batch_belongs_to_no_producer():
    h = parse_batch_header(build_internal_batch([(b"k", b"v")], 5))
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (-1, -1, NO_SEQUENCE, False)


def test_a_transactional_batch_is_the_producers_at_sequence_zero():
    data = build_internal_batch([(b"k0", b"v0"), (b"k1", None)], 5, producer_id=42, producer_epoch=3)
    h = parse_batch_header(data)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 0)
    assert h.is_transactional and not h.is_control and h.records_count == 2
    assert validate_batches(data, from_client=False)


def test_batches_read_back_with_their_producer_and_markers():
    plain = bytearray(build_internal_batch([(b"a", b"1")], 1))
    txn = bytearray(build_internal_batch([(b"b", b"2"), (b"c", None)], 1, producer_id=7, producer_epoch=0))
    set_base_offset(txn, 0, 1)
    commit = build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 4), producer_id=7, producer_epoch=0,
                                        timestamp=2, base_offset=3)
    abort = build_end_txn_marker_batch(EndTransactionMarker(ABORT, 4), producer_id=8, producer_epoch=1,
                                       timestamp=2, base_offset=4)
    # the cleaner keeps an emptied control batch for the producer state: it ends no transaction
    emptied = build_batch([], base_offset=5, producer_id=9, producer_epoch=0, is_transactional=True,
                          is_control=True, last_offset_delta=0, max_timestamp=2)
    log = bytes(plain + txn) + commit + abort + emptied + commit[:30]
    assert list(iter_internal_batches(log)) == [
        InternalBatch(-1, False, False, None, [(0, b"a", b"1")]),
        InternalBatch(7, True, False, None, [(1, b"b", b"2"), (2, b"c", None)]),
        InternalBatch(7, True, True, EndTransactionMarker(COMMIT, 4), []),
        InternalBatch(8, True, True, EndTransactionMarker(ABORT, 4), []),
        InternalBatch(9, True, True, None, []),
    ]
