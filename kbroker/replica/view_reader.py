"""A consumer's read of a filtered view: the source partition's read (same offsets, high watermark,
last stable offset, aborted transactions, leader epoch checks) with its file ranges filtered by
the view's expression (`views/batch_filter.py`).

Batches that match whole stay file ranges (sent with sendfile); rebuilt and empty batches are
bytes among them. Verdicts are cached per batch (`views/match_cache.py`), so a second consumer
of the same view reads each batch's bytes once but walks no record.
"""

from __future__ import annotations

import logging
import uuid

from kbroker.errors import CorruptRecordError
from kbroker.log.records_view import FileRecords
from kbroker.metadata.views import ViewInfo
from kbroker.replica.manager import FetchPartitionResult, ReplicaManager
from kbroker.views.batch_filter import NONE, Verdict, batch_verdict, filter_batches
from kbroker.views.expression import Matcher
from kbroker.views.match_cache import MatchCache
from kbroker.wire.fetch_response import RecordBytes
from kbroker.wire.records import BatchHeader

logger = logging.getLogger(__name__)

MATCH_CACHE_BYTES = 32 * 1024 * 1024


class ViewReader:
    def __init__(self, replica_manager: ReplicaManager, cache_bytes: int = MATCH_CACHE_BYTES) -> None:
        self.replica_manager = replica_manager
        self.cache = MatchCache(cache_bytes)
        self._matchers: dict[uuid.UUID, tuple[ViewInfo, Matcher, frozenset[bytes]]] = {}

    def _matcher(self, view: ViewInfo) -> tuple[Matcher, frozenset[bytes]]:
        known = self._matchers.get(view.topic_id)
        if known is None or known[0] is not view:
            if len(self._matchers) > 1024:  # views deleted long ago
                self._matchers.clear()
            known = self._matchers[view.topic_id] = (view, view.spec.matcher(), view.spec.wanted_headers())
        return known[1], known[2]

    def filter(self, view: ViewInfo, partition: int, result: FetchPartitionResult) -> FetchPartitionResult:
        """What a consumer of `view` is sent for `partition`, from the source partition's read (same
        offsets, high watermark, LSO, aborted transactions): never more than the source read's bytes."""
        if result.error is None and result.records:
            result.records = self._filtered(view, partition, result.records)
        return result

    def _filtered(self, view: ViewInfo, partition: int, ranges: list[FileRecords]) -> list:
        matcher, wanted = self._matcher(view)
        cache = self.cache

        def verdict_of(data: memoryview, pos: int, header: BatchHeader) -> Verdict:
            key = (view.topic_id, partition, header.base_offset, header.crc, header.batch_length)
            verdict = cache.get(key)
            if verdict is None:
                try:
                    verdict = batch_verdict(data, pos, header, wanted, matcher)
                except CorruptRecordError as exc:  # a valid CRC over malformed records: nothing to match
                    logger.warning("view %s: batch at offset %d of %s-%d skipped: %s", view.name,
                                   header.base_offset, view.source, partition, exc)
                    verdict = NONE
                cache.put(key, verdict)
            return verdict

        out: list = []
        for file_range in ranges:
            data = file_range.read()  # headers are read; whole-matching batches still go out by sendfile
            for piece in filter_batches(data, verdict_of):
                if isinstance(piece, bytes):
                    out.append(RecordBytes(piece))
                elif isinstance(file_range, FileRecords):
                    start, end = piece
                    out.append(FileRecords(file_range.fd, file_range.position + start, end - start))
                else:  # batches in memory (an archive read from an object store)
                    start, end = piece
                    out.append(RecordBytes(data[start:end]))
        return out
