"""`__delayed_messages` partitions led here, appended and read through the replica layer.

Appends are the leader's (a partition this broker leads): acks=all semantics, so in a cluster an
append counts only once the partition's ISR has it (bounded by its min.insync.replicas), as the
transaction coordinator's state log does. A long list of records is cut into batches of about
`BATCH_BYTES`, each appended on its own. Reads fetch the schedule records a delivery sends (by
offset) and feed a scan every record in offset order, a chunk at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kbroker.delayed.format import DELAYED_TOPIC
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.internal_records import build_internal_batch, iter_internal_batches
from kbroker.wire.records import iter_batch_headers, validate_batches

BATCH_BYTES = 512 * 1024
READ_BYTES = 64 * 1024
SCAN_CHUNK = 1 << 20

Entry = tuple[bytes, bytes | None]


class DelayLog:
    def __init__(self, replica_manager, now_ms: Callable[[], int], *, cluster: bool, timeout_s: float) -> None:
        self.replicas = replica_manager
        self.now_ms = now_ms
        self.cluster = cluster
        self.timeout_s = timeout_s

    def leader(self, partition: int):
        return self.replicas.get_leader_partition(TopicPartition(DELAYED_TOPIC, partition))

    async def append(self, partition: int, entries: list[Entry]) -> tuple[ErrorCode, list[int]]:
        """Append the records; (error, the offset of each record appended). The offsets are known
        at once; the error comes after replication."""
        offsets: list[int] = []
        try:
            leader = self.leader(partition)
            for chunk in _chunks(entries):
                buf = bytearray(build_internal_batch(chunk, self.now_ms()))
                info = leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1,
                                                       from_client=False)
                offsets.extend(range(info.first_offset, info.first_offset + len(chunk)))
            await leader.maybe_flush()
        except KafkaError as exc:
            return error_code_of(exc), offsets
        if not self.cluster or not offsets:
            return ErrorCode.none, offsets
        return await self.replicas.wait_for_replication(leader, offsets[-1] + 1, self.timeout_s), offsets

    def read_at(self, partition: int, offsets: list[int]) -> dict[int, Entry]:
        """The (key, value) of the records at `offsets` still in the log (compaction may have
        removed superseded ones)."""
        log = self.leader(partition).log
        wanted = sorted(set(offsets))
        found: dict[int, Entry] = {}
        end = log.log_end_offset
        i = 0
        while i < len(wanted):
            offset = wanted[i]
            if offset < log.log_start_offset or offset >= end:
                i += 1
                continue
            data = log.read(offset, READ_BYTES, max_offset=end).read_bytes()
            last = offset
            for batch in iter_internal_batches(data):
                for record_offset, key, value in batch.records:
                    last = max(last, record_offset)
                    found[record_offset] = (key, value)
            for _pos, header in iter_batch_headers(data):
                last = max(last, header.last_offset)
            while i < len(wanted) and wanted[i] <= last:
                i += 1
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


def _chunks(entries: list[Entry]) -> Iterator[list[Entry]]:
    chunk: list[Entry] = []
    size = 0
    for key, value in entries:
        chunk.append((key, value))
        size += len(key) + (len(value) if value is not None else 0) + 16
        if size >= BATCH_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk
