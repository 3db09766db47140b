"""The log's transaction bookkeeping (Kafka's UnifiedLog/LocalLog/LogSegment parts of KIP-98): markers
read back from segments, aborted transactions written into and searched in the segments'
`.txnindex` files, and the rebuild of those indexes after segment recovery.

Functions over a `Log`'s segments, kept apart so that log.py stays about offsets and files.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from kbroker.errors import CorruptRecordError
from kbroker.log.producer_state import CompletedTxn, ProducerStateManager
from kbroker.log.txn_index import AbortedTxn
from kbroker.wire.control import EndTransactionMarker, read_end_txn_marker
from kbroker.wire.records import BatchHeader

if TYPE_CHECKING:
    from kbroker.log.segment import LogSegment

__all__ = ["AbortedTransaction", "marker_of", "with_markers", "complete_txns", "collect_aborted_transactions",
           "rebuild_txn_indexes"]

_logger = logging.getLogger(__name__)


class AbortedTransaction(NamedTuple):
    """What a read_committed Fetch returns per aborted transaction."""

    producer_id: int
    first_offset: int


def marker_of(buf, pos: int, header: BatchHeader) -> EndTransactionMarker | None:
    """The end transaction marker of the control batch at `buf[pos]`; None for an emptied batch, or
    a record that is no marker (logged: Kafka would refuse such a batch)."""
    try:
        return read_end_txn_marker(buf, pos, header)
    except CorruptRecordError as e:
        _logger.warning("control batch at offset %d holds no valid marker: %s", header.base_offset, e)
        return None


def with_markers(batches: Iterable[tuple[LogSegment, int, BatchHeader]]) -> Iterator[tuple[BatchHeader, EndTransactionMarker | None]]:
    """(header, marker) per batch; only control batches are read beyond their header."""
    for seg, pos, h in batches:
        yield h, (marker_of(seg.read_batch(pos, h), 0, h) if h.is_control else None)


def complete_txns(psm: ProducerStateManager, segment: LogSegment, completed: Iterable[CompletedTxn]) -> bool:
    """Kafka's order: the LSO an abort leaves is computed before the transaction completes and goes
    into the index of the segment holding the marker. True when an index file was created."""
    created = False
    for txn in completed:
        if txn.is_aborted:
            created |= not segment.txn_index.path.exists()
            segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                psm.last_stable_offset(txn)))
        psm.complete_txn(txn)
    return created


def collect_aborted_transactions(segments: list[LogSegment], bases: list[int], start_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTransaction]:
    """Aborted transactions overlapping [start_offset, upper_bound_offset) (Kafka's
    LocalLog.collectAbortedTransactions): from the segment holding `start_offset` on, until an entry's
    LSO reaches the bound, since no later entry can then overlap the range."""
    out: list[AbortedTransaction] = []
    for seg in segments[max(bisect_right(bases, start_offset) - 1, 0):]:
        found, complete = seg.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
        out.extend(AbortedTransaction(t.producer_id, t.first_offset) for t in found)
        if complete:
            break
    return out


def rebuild_txn_indexes(dir, segments: list[LogSegment], rebuild: set[int], log_start_offset: int) -> None:
    """Refill the (emptied) transaction indexes of the segments whose base offset is in `rebuild`:
    producer state at the first of them comes from the newest snapshot at or below it and a replay,
    then every batch from there to the last of them is applied, as Kafka's segment recovery does."""
    if not rebuild:
        return
    first, last = min(rebuild), max(rebuild)
    psm = ProducerStateManager(dir)  # a scratch state: the log's own is rebuilt after this
    psm.load_state_at_or_below(first, log_start_offset)
    start = max(psm.map_end_offset, log_start_offset, segments[0].base_offset)
    for seg in segments:
        if seg.base_offset > last:
            break
        nxt_pos = 0
        if start > seg.base_offset:
            m = seg.translate_offset(start)
            if m is None:
                continue
            nxt_pos = m.position
        index_it = seg.base_offset in rebuild
        for pos, h in seg.iter_batches(nxt_pos):
            marker = marker_of(seg.read_batch(pos, h), 0, h) if h.is_control else None
            completed = psm.apply_batch(h, marker)
            if completed is None:
                continue
            if index_it:
                complete_txns(psm, seg, [completed])
            else:
                psm.complete_txn(completed)
