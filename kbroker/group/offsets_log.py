"""The coordinator's records in `__consumer_offsets`, appended and replayed through the replica layer.

Appends go to the partition's leader with acks=all semantics, so once the cluster replicates,
a commit is acknowledged only when the ISR has it — as for any produce.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kbroker.group.offsets_format import build_offsets_batch, iter_offsets_records
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import iter_batch_headers, validate_batches

OFFSETS_TOPIC = "__consumer_offsets"
READ_CHUNK = 1 << 20


class PartitionOffsetsLog:
    def __init__(self, replica_manager, now_ms: Callable[[], int]) -> None:
        self.replicas = replica_manager
        self.now_ms = now_ms

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> None:
        leader = self.replicas.get_leader_partition(TopicPartition(OFFSETS_TOPIC, partition))
        buf = bytearray(build_offsets_batch(entries, self.now_ms()))
        leader.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1)

    def read(self, partition: int) -> Iterator[tuple[bytes | None, bytes | None]]:
        log = self.replicas.get_leader_partition(TopicPartition(OFFSETS_TOPIC, partition)).log
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            data = log.read(offset, READ_CHUNK, max_offset=end).read_bytes()
            next_offset = offset
            for _pos, header in iter_batch_headers(data):
                next_offset = header.next_offset
            if next_offset <= offset:
                break  # nothing readable past here (a torn tail is cut at recovery)
            for _offset, key, value in iter_offsets_records(data):
                yield key, value
            offset = next_offset
