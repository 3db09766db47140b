"""Filtering a source read batch by batch: kept ranges, rebuilt batches, empty batches for runs
of non-matching ones; record offsets, timestamps and producer fields survive."""

import pytest
from hypothesis import given, settings, strategies as st

from kbroker.errors import CorruptRecordError
from kbroker.views.batch_filter import ALL, NONE, batch_verdict, filter_batches
from kbroker.views.spec import view_spec
from kbroker.wire.control import COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
    parse_batch_header,
    validate_batches,
)

SPEC = view_spec({"view.source": "s", "view.filter": 'any(eu) or header.region == "eu"'})
MATCHER, WANTED = SPEC.matcher(), SPEC.wanted_headers()


def rec(offset: int, tags: str | None = None, **headers: str) -> Record:
    hs = ([("tags", tags.encode())] if tags is not None else []) + [(k, v.encode()) for k, v in headers.items()]
    return Record(offset, 1_000 + offset, b"k%d" % offset, b"value-%d" % offset * 3, hs)


def batch(records, codec=COMPRESSION_NONE, **kw) -> bytes:
    return build_batch(records, base_offset=records[0].offset, compression=codec, **kw)


def verdict_of(data, pos, header):
    return batch_verdict(data, pos, header, WANTED, MATCHER)


def decode_pieces(data: bytes, pieces) -> list:
    """The batches a consumer receives, as (header, records)."""
    out = []
    for piece in pieces:
        raw = piece if isinstance(piece, bytes) else data[piece[0]:piece[1]]
        validate_batches(raw, from_client=False)  # sizes and CRCs hold
        for pos, h in iter_batch_headers(raw):
            out.append((h, decode_records(raw, pos, h)))
    return out


def test_batches_matching_whole_are_one_kept_range():
    data = batch([rec(0, "eu"), rec(1, "eu,x")]) + batch([rec(2, region="eu")])
    assert filter_batches(data, verdict_of) == [(0, len(data))]


def test_a_run_of_batches_matching_nothing_is_one_empty_batch_spanning_it():
    data = batch([rec(0, "us"), rec(1)]) + batch([rec(5, "us")])
    pieces = filter_batches(data, verdict_of)
    assert len(pieces) == 1 and isinstance(pieces[0], bytes)
    [(h, records)] = decode_pieces(data, pieces)
    assert (h.base_offset, h.last_offset, h.records_count, records) == (0, 5, 0, [])


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4,
                                   COMPRESSION_ZSTD])
def test_a_partial_batch_keeps_its_matching_records_offsets_timestamps_and_producer(codec):
    records = [rec(10, "us"), rec(11, "eu"), rec(12), rec(13, "x,eu", region="us"), rec(14, "us")]
    original = batch(records, codec, producer_id=7, producer_epoch=2, base_sequence=40, is_transactional=True,
                     partition_leader_epoch=3)
    [(h, got)] = decode_pieces(original, filter_batches(original, verdict_of))
    assert got == [records[1], records[3]]
    before = parse_batch_header(original)
    assert (h.base_offset, h.last_offset_delta, h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
            h.base_sequence, h.attributes, h.partition_leader_epoch, h.records_count) == (
        before.base_offset, before.last_offset_delta, before.base_timestamp, before.max_timestamp, 7, 2, 40,
        before.attributes, 3, 2)


def test_control_batches_pass_and_split_runs():
    marker = build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 0), producer_id=7,
                                        producer_epoch=0, base_offset=2, timestamp=5)
    data = batch([rec(0, "us"), rec(1, "us")]) + marker + batch([rec(3, "us")])
    pieces = filter_batches(data, verdict_of)
    got = decode_pieces(data, pieces)
    assert [(h.base_offset, h.last_offset, h.is_control) for h, _ in got] == [(0, 1, False), (2, 2, True), (3, 3, False)]


def test_malformed_records_behind_a_valid_crc_are_a_corrupt_record_error():
    good = bytearray(batch([rec(0, "eu")]))
    good[61] = 0x7F  # the record's length varint now claims more than there is
    from kbroker.wire.records import with_records
    bad = with_records(parse_batch_header(bytes(good)), bytes(good[61:]), 1)
    with pytest.raises(CorruptRecordError):
        batch_verdict(bad, 0, parse_batch_header(bad), WANTED, MATCHER)


def test_a_trailing_partial_batch_is_left_out():
    data = batch([rec(0, "eu")]) + batch([rec(1, "eu")])[:40]
    assert filter_batches(data, verdict_of) == [(0, len(data) - 40)]


tagging = st.one_of(st.none(), st.sampled_from(["eu", "us", "eu,us", "x"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(tagging, min_size=1, max_size=5),
                          st.sampled_from([COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_LZ4])), min_size=1,
                max_size=6))
def test_a_consumer_gets_exactly_the_matching_records_and_reaches_the_end(batches):
    data = b""
    offset = 0
    wanted = []
    for tags, codec in batches:
        records = [rec(offset + i, t) for i, t in enumerate(tags)]
        offset += len(records)
        data += batch(records, codec)
        wanted += [r for r in records if r.headers and b"eu" in r.headers[0][1].split(b",")]
    got = decode_pieces(data, filter_batches(data, verdict_of))
    assert [r for _, records in got for r in records] == wanted
    assert got[-1][0].last_offset == offset - 1  # the consumer's next fetch starts after the source's last record
    assert all(got[i][0].last_offset < got[i + 1][0].base_offset for i in range(len(got) - 1))


def test_verdicts_all_and_none():
    data = batch([rec(0, "eu")])
    assert batch_verdict(data, 0, parse_batch_header(data), WANTED, MATCHER) is ALL
    data = batch([rec(0, "us")])
    assert batch_verdict(data, 0, parse_batch_header(data), WANTED, MATCHER) is NONE
