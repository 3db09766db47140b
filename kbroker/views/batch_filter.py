"""A view's filtered read, on bytes: which batches of a source read go out as they are, which are
rebuilt with their matching records only, which collapse into an empty batch. Pure.

For each batch only the record headers are read: an uncompressed batch is walked by its varint
lengths, skipping keys and values; a compressed one must be decompressed first (its headers are
inside the compressed section). Verdicts:

- every record matches (and every control batch): the batch's bytes are kept, so consecutive such
  batches stay one file range the server sends with sendfile;
- some match: the batch is rebuilt from the matching records' bytes, unchanged (their offset and
  timestamp deltas still count from the original base offset and timestamp), under the original
  header with a new record count, length and CRC (compressed again with the batch's codec);
- none match: consecutive such batches become one empty batch (no records; base offset and last
  offset delta spanning the run), as a compacted log's retained empty batch, so a consumer's
  position moves past them.
"""

from __future__ import annotations

from array import array
from typing import Callable, Union

from kbroker.errors import CorruptRecordError
from kbroker.views.expression import Matcher
from kbroker.wire.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_NONE,
    BatchHeader,
    build_batch,
    compress,
    decompress,
    iter_batch_headers,
    with_records,
)

__all__ = ["ALL", "NONE", "Kept", "Verdict", "Piece", "batch_verdict", "filter_batches", "empty_batch"]


class _Whole:
    """Every record of the batch matches (or it is a control batch): keep its bytes."""

    def __repr__(self) -> str:
        return "ALL"


class _Nothing:
    """No record of the batch matches."""

    def __repr__(self) -> str:
        return "NONE"


class Kept:
    """Some records of an uncompressed batch match: the byte ranges of those records (adjacent ones
    merged) in its records section. Small to cache; the batch is rebuilt from them on each read."""

    __slots__ = ("bounds", "count")

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.count = len(spans)
        merged: list[int] = []
        for start, end in spans:
            if merged and merged[-1] == start:
                merged[-1] = end
            else:
                merged += (start, end)
        self.bounds = array("q", merged)

    @property
    def nbytes(self) -> int:
        return len(self.bounds) * self.bounds.itemsize

    def rebuild(self, data: memoryview, pos: int, header: BatchHeader) -> bytes:
        section = data[pos + BATCH_HEADER_SIZE:pos + header.size_in_bytes]
        b = self.bounds
        return with_records(header, b"".join(section[b[i]:b[i + 1]] for i in range(0, len(b), 2)), self.count)


ALL = _Whole()
NONE = _Nothing()
Verdict = Union[_Whole, _Nothing, Kept, bytes]  # bytes: a compressed batch rebuilt with its matching records
Piece = Union[tuple[int, int], bytes]  # (start, end) of the input kept as it is, or bytes sent instead
VerdictOf = Callable[[memoryview, int, BatchHeader], Verdict]


def _varint(data: bytes, p: int, end: int) -> tuple[int, int]:
    """Zigzag varint at data[p] (at most 10 bytes, within `end`)."""
    if p < end:
        b = data[p]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), p + 1
    result = shift = 0
    limit = min(end, p + 10)
    while p < limit:
        b = data[p]
        p += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), p
        shift += 7
    raise CorruptRecordError("malformed or truncated varint in a record")


MEMO_LIMIT = 4096  # distinct header sections remembered per batch walk


def _headers_of(section: bytes, wanted: frozenset[bytes]) -> dict[bytes, list[bytes | None]]:
    """The wanted headers of one record's header section (count, then key/value pairs)."""
    n = len(section)
    count, p = _varint(section, 0, n)
    if count < 0 or count > n:
        raise CorruptRecordError(f"invalid header count {count}")
    headers: dict[bytes, list[bytes | None]] = {}
    for _ in range(count):
        size, p = _varint(section, p, n)
        if size < 0 or p + size > n:
            raise CorruptRecordError("invalid header key size")
        key = section[p:p + size]
        p += size
        size, p = _varint(section, p, n)
        if size > 0 and p + size > n:
            raise CorruptRecordError("header value exceeds its record")
        if key in wanted:
            headers.setdefault(key, []).append(None if size < 0 else section[p:p + size])
        if size > 0:
            p += size
    if p != n:
        raise CorruptRecordError("a record's headers do not fill its remaining bytes")
    return headers


def _matching_spans(data: bytes, count: int, wanted: frozenset[bytes], matcher: Matcher) -> list[tuple[int, int]]:
    """(start, end) of each record of the records section `data` the matcher accepts. Keys and
    values are skipped by their lengths; a record's header section is parsed (wanted headers only)
    and matched once per distinct content: records mostly repeat a few tag combinations."""
    n = len(data)
    if count < 0 or count > n:
        raise CorruptRecordError(f"invalid record count {count} for {n} bytes of records")
    spans = []
    memo: dict[bytes, bool] = {}
    p = 0
    try:
        for _ in range(count):
            start = p
            b = data[p]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                length, p = _varint(data, p, n)
            end = p + length
            if length <= 0 or end > n:
                raise CorruptRecordError(f"invalid record size {length}")
            p += 1  # attributes
            while data[p] & 0x80:  # timestamp delta
                p += 1
            p += 1
            while data[p] & 0x80:  # offset delta
                p += 1
            p += 1
            for _field in (0, 1):  # key, value
                b = data[p]
                if b < 0x80:
                    size, p = (b >> 1) ^ -(b & 1), p + 1
                else:
                    size, p = _varint(data, p, end)
                if size > 0:
                    p += size
            if p > end:
                raise CorruptRecordError("a record's key or value exceeds the record")
            section = data[p:end]
            matched = memo.get(section)
            if matched is None:
                matched = matcher(_headers_of(section, wanted))
                if len(memo) >= MEMO_LIMIT:
                    memo.clear()
                memo[section] = matched
            if matched:
                spans.append((start, end))
            p = end
    except IndexError:
        raise CorruptRecordError("a record is truncated") from None
    if p != n:
        raise CorruptRecordError(f"{n - p} bytes remain after the declared {count} records")
    return spans


def batch_verdict(data: memoryview | bytes, pos: int, header: BatchHeader, wanted: frozenset[bytes],
                  matcher: Matcher) -> Verdict:
    """ALL, NONE, or the batch at `data[pos]` rebuilt with its matching records. A batch whose
    records cannot be walked (malformed past a valid CRC) raises CorruptRecordError."""
    if header.is_control:
        return ALL
    section = memoryview(data)[pos + BATCH_HEADER_SIZE:pos + header.size_in_bytes]
    codec = header.compression
    records = decompress(codec, section) if codec != COMPRESSION_NONE else bytes(section)
    spans = _matching_spans(records, header.records_count, wanted, matcher)
    if len(spans) == header.records_count:
        return ALL
    if not spans:
        return NONE
    if codec == COMPRESSION_NONE:
        return Kept(spans)
    return with_records(header, compress(codec, b"".join(records[s:e] for s, e in spans)), len(spans))


def empty_batch(first: BatchHeader, last: BatchHeader) -> bytes:
    """One batch without records covering the offsets of `first` to `last` (a run in which
    nothing matched): the consumer's next fetch starts after `last`."""
    return build_batch([], base_offset=first.base_offset, last_offset_delta=last.last_offset - first.base_offset,
                       max_timestamp=last.max_timestamp, partition_leader_epoch=last.partition_leader_epoch)


def filter_batches(data: bytes | memoryview, verdict_of: VerdictOf) -> list[Piece]:
    """The pieces a view sends for the consecutive batches in `data` (a source read), in order.
    A trailing partial batch is left out, as the log's reads never end in one."""
    mv = memoryview(data)
    pieces: list[Piece] = []
    kept_from: int | None = None  # start of a run of batches kept as they are
    skipped: list[BatchHeader] = []  # a run of batches in which nothing matches
    end = 0

    def close_skipped() -> None:
        if skipped:
            pieces.append(empty_batch(skipped[0], skipped[-1]))
            skipped.clear()

    for pos, header in iter_batch_headers(mv):
        verdict = ALL if header.is_control else verdict_of(mv, pos, header)
        if verdict is ALL:
            close_skipped()
            if kept_from is None:
                kept_from = pos
        else:
            if kept_from is not None:
                pieces.append((kept_from, pos))
                kept_from = None
            if verdict is NONE:
                skipped.append(header)
            else:
                close_skipped()
                pieces.append(verdict.rebuild(mv, pos, header) if isinstance(verdict, Kept) else verdict)
        end = pos + header.size_in_bytes
    if kept_from is not None:
        pieces.append((kept_from, end))
    close_skipped()
    return pieces
