"""`__delayed_messages` partitions led here, appended and read through the replica layer.

Appends are the leader's (a partition this broker leads): acks=all semantics, so in a cluster an
append counts only once the partition's ISR has it (bounded by its min.insync.replicas), as the
transaction coordinator's state log does. A long list of records is cut into batches of about
`BATCH_BYTES` (at most `BATCH_RECORDS`), each appended on its own, yielding between them. Reads
fetch the schedule records a delivery sends (by offset) and feed a scan every record in offset
order, a chunk at a time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

import trio

from kbroker.delayed.format import DELAYED_TOPIC
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.internal_records import build_internal_batch, iter_internal_batches
from kbroker.wire.records import iter_batch_headers, validate_batches

BATCH_BYTES = 512 * 1024
BATCH_RECORDS = 500
READ_BYTES = 64 * 1024
SCAN_CHUNK = 1 << 20
CACHE_BYTES = 16 * 1024 * 1024  # decoded batches kept for deliveries, per partition

Entry = tuple[bytes, bytes | None]


class DelayLog:
    def __init__(self, replica_manager, now_ms: Callable[[], int], *, cluster: bool, timeout_s: float) -> None:
        self.replicas = replica_manager
        self.now_ms = now_ms
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._cache: dict[int, _BatchCache] = {}

    def forget(self, partition: int) -> None:
        self._cache.pop(partition, None)

    def leader(self, partition: int):
        return self.replicas.get_leader_partition(TopicPartition(DELAYED_TOPIC, partition))

    async def append(self, partition: int, entries: Iterable[Entry],
                     appended: Callable[[int, list[int]], None] | None = None) -> tuple[ErrorCode, list[int]]:
        """Append the records; (error, the offset of each record appended). The offsets are known
        at once (`appended(index of the first, offsets)` hears of each batch as it is appended); the
        error comes after replication."""
        offsets: list[int] = []
        try:
            leader = self.leader(partition)
            for n, chunk in enumerate(_chunks(entries)):
                if n:  # a long list: deliveries due meanwhile get their turn
                    await trio.lowlevel.checkpoint()
                    leader = self.leader(partition)
                buf = bytearray(build_internal_batch(chunk, self.now_ms()))
                info = leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1,
                                                       from_client=False)
                chunk_offsets = list(range(info.first_offset, info.first_offset + len(chunk)))
                if appended is not None:
                    appended(len(offsets), chunk_offsets)
                offsets += chunk_offsets
            await leader.maybe_flush()
        except KafkaError as exc:
            return error_code_of(exc), offsets
        if not self.cluster or not offsets:
            return ErrorCode.none, offsets
        return await self.replicas.wait_for_replication(leader, offsets[-1] + 1, self.timeout_s), offsets

    def read_at(self, partition: int, offsets: list[int]) -> dict[int, Entry]:
        """The (key, value) of the records at `offsets` still in the log (compaction may have
        removed superseded ones). Delivering in due order reads the same produce batches again and
        again, so decoded batches are kept (boundedly); compaction never changes a record, only
        removes superseded ones, so a kept batch stays right for the records still pending."""
        log = self.leader(partition).log
        cache = self._cache.setdefault(partition, _BatchCache(CACHE_BYTES))
        found: dict[int, Entry] = {}
        end = log.log_end_offset
        for offset in sorted(set(offsets)):
            if offset in found or not log.log_start_offset <= offset < end:
                continue
            batch = cache.get(offset)
            if batch is None:
                data = log.read(offset, READ_BYTES, max_offset=end).read_bytes()
                for pos, header in iter_batch_headers(data):
                    records = {o: (k, v) for b in iter_internal_batches(data[pos:pos + header.size_in_bytes])
                               for o, k, v in b.records}
                    cache.put(header.base_offset, header.last_offset, records, header.size_in_bytes)
                batch = cache.get(offset)
                if batch is None:
                    continue
            if offset in batch:
                found[offset] = batch[offset]
        return {o: found[o] for o in offsets if o in found}

    def scan(self, partition: int) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """Every (offset, key, value) from the log start to the log end as of the call (a chunk at
        a time: the caller may yield between records; appends after the call are not seen)."""
        log = self.leader(partition).log
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            data = log.read(max(offset, log.log_start_offset), SCAN_CHUNK, max_offset=end).read_bytes()
            next_offset = offset
            for _pos, header in iter_batch_headers(data):
                next_offset = header.next_offset
            if next_offset <= offset:
                return
            for batch in iter_internal_batches(data):
                if batch.is_control:
                    continue
                for record_offset, key, value in batch.records:
                    if offset <= record_offset < end:
                        yield record_offset, key, value
            offset = next_offset


def _chunks(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    chunk: list[Entry] = []
    size = 0
    for key, value in entries:
        chunk.append((key, value))
        size += len(key) + (len(value) if value is not None else 0) + 16
        if size >= BATCH_BYTES or len(chunk) >= BATCH_RECORDS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


class _BatchCache:
    """Decoded batches by offset range, least recently used out first, bounded by their size."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.size = 0
        self._bases: list[int] = []
        self._batches: OrderedDict[int, tuple[int, dict[int, Entry], int]] = OrderedDict()

    def get(self, offset: int) -> dict[int, Entry] | None:
        i = bisect_right(self._bases, offset) - 1
        if i < 0:
            return None
        base = self._bases[i]
        last, records, _size = self._batches[base]
        if offset > last:
            return None
        self._batches.move_to_end(base)
        return records

    def put(self, base: int, last: int, records: dict[int, Entry], size: int) -> None:
        if base in self._batches:
            return
        self._batches[base] = (last, records, size)
        self._bases.insert(bisect_right(self._bases, base), base)
        self.size += size
        while self.size > self.limit and len(self._batches) > 1:
            old, (_last, _records, old_size) = self._batches.popitem(last=False)
            self._bases.remove(old)
            self.size -= old_size
