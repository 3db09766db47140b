"""Dead letters of share groups (KIP-1191): the records a share group rejected, or archived at the
delivery count limit, copied to the group's `errors.deadletterqueue.topic.name` with headers saying
where they came from and why (`__dlq.errors.*`). The topic must exist with
`errors.deadletterqueue.group.enable=true` (Kafka's opt-in) and its partition (the source
partition modulo its partition count) be led by this broker; otherwise the records are only
archived, and that is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping

from kbroker.errors import KafkaError
from kbroker.group.dynamic_configs import DLQ_TOPIC_NAME
from kbroker.log.topic_partition import TopicPartition
from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers, validate_batches

logger = logging.getLogger(__name__)


class DeadLetters:
    def __init__(self, replica_manager, group_configs: Callable[[str], Mapping[str, str]] | None,
                 topic_configs: Callable[[str], Mapping[str, str] | None], topic_info: Callable[[str], object],
                 read: Callable, count: Callable[[str, TopicPartition, str, int], None]) -> None:
        self.replica_manager = replica_manager
        self.group_configs = group_configs
        self.topic_configs = topic_configs  # a topic's stored configs (None: no such topic)
        self.topic_info = topic_info  # a topic's metadata (num_partitions)
        self.read = read  # (tp, offset, max_bytes, read_committed) -> a read result
        self.count = count  # (group, tp, kind, n): the metrics' counters

    def write(self, group_id: str, tp: TopicPartition, archived) -> None:
        """Copy the archived ranges' records to the group's dead-letter topic, if it has one."""
        name = str((self.group_configs(group_id) if self.group_configs else {}).get(DLQ_TOPIC_NAME, "")).strip()
        if not name:
            return
        target = self.target(name, tp.partition)
        if target is None:
            logger.warning("share group %s: dead-letter topic %s cannot take records (missing, not "
                           "errors.deadletterqueue.group.enable=true, or not led here); %d range(s) archived only",
                           group_id, name, len(archived))
            return
        records = []
        for item in archived:
            for record in self.records(tp, item.first_offset, item.last_offset):
                headers = [*record.headers,
                           ("__dlq.errors.group.id", group_id.encode()),
                           ("__dlq.errors.topic", tp.topic.encode()),
                           ("__dlq.errors.partition", str(tp.partition).encode()),
                           ("__dlq.errors.offset", str(record.offset).encode()),
                           ("__dlq.errors.delivery.count", str(item.delivery_count).encode()),
                           ("__dlq.errors.reason", str(item.reason).encode())]
                records.append(Record(len(records), record.timestamp, record.key, record.value, headers))
        if not records:
            return
        buf = bytearray(build_batch(records))
        try:
            target.append_records_to_leader(buf, validate_batches(buf, from_client=False), -1, from_client=False)
        except KafkaError as exc:
            logger.warning("share group %s: could not write to dead-letter topic %s: %s", group_id, name, exc)
            return
        self.count(group_id, tp, "dead_lettered", len(records))

    def target(self, name: str, source_partition: int):
        """The local leader of the dead-letter topic's partition for records of `source_partition`."""
        configs = self.topic_configs(name)
        if configs is None or str(configs.get("errors.deadletterqueue.group.enable", "false")).lower() != "true":
            return None
        info = self.topic_info(name)
        if info is None or not info.num_partitions:
            return None
        try:
            return self.replica_manager.get_leader_partition(TopicPartition(name, source_partition % info.num_partitions))
        except KafkaError:
            return None

    def records(self, tp: TopicPartition, first: int, last: int) -> Iterator[Record]:
        """The records of [first, last] in the log (what remains of them)."""
        offset = first
        while offset <= last:
            read = self.read(tp, offset, 1 << 20, False)
            if read.error is not None or not read.records:
                return
            data = b"".join(r.read() if not isinstance(r, (bytes, bytearray)) else bytes(r) for r in read.records)
            progressed = False
            for pos, header in iter_batch_headers(data):
                if header.is_control:
                    offset = max(offset, header.next_offset)
                    continue
                for record in decode_records(data, pos, header):
                    if first <= record.offset <= last and record.offset >= offset:
                        yield record
                offset = max(offset, header.next_offset)
                progressed = True
            if not progressed:
                return
