"""Replaying one `__consumer_offsets` partition into what its groups were: Kafka's
GroupMetadataManager.doLoadGroupsAndOffsets.

The last record per key wins and tombstones delete. Offsets in a transactional batch pend per
producer id until that producer's control batch: a COMMIT makes them committed by the order rule
(see txn_offsets), an ABORT drops them; those still pending at the log end stay pending, their
marker comes later. Each offset keeps the offset of its batch's first record, which orders it
against the others as its append did. Beyond Kafka, a group's tombstone also drops its offsets,
committed and pending: the coordinator deletes a group with everything it holds.
"""

from __future__ import annotations

import logging

from kbroker.group import consumer_records
from kbroker.group import offsets_format as fmt
from kbroker.group.consumer_state import ConsumerGroupState, apply
from kbroker.group.metadata import OffsetAndMetadata
from kbroker.group.txn_offsets import materialize
from kbroker.wire.internal_records import InternalBatch
from kbroker.wire.records import NO_PRODUCER_ID

logger = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]
GroupOffsets = dict[str, dict[TopicPartitionKey, OffsetAndMetadata]]  # group -> its offsets


class OffsetsReplay:
    def __init__(self, partition: int, topic_names: consumer_records.TopicNames = lambda _id: None) -> None:
        self.partition = partition
        self.topic_names = topic_names
        self.consumer: dict[str, ConsumerGroupState] = {}  # consumer-protocol groups, records applied
        self.committed: GroupOffsets = {}
        self.pending: dict[int, GroupOffsets] = {}  # by producer id
        self.metadata: dict[str, fmt.GroupMetadataValue | None] = {}  # None: deleted

    def apply(self, batch: InternalBatch) -> None:
        if batch.is_control:
            if batch.marker is not None:  # an empty control batch (cleaned) ends nothing
                ended = self.pending.pop(batch.producer_id, {})
                if not batch.marker.is_abort:
                    for group_id, offsets in ended.items():
                        materialize(self.committed.setdefault(group_id, {}), offsets)
            return
        producer_id = batch.producer_id if batch.is_transactional else NO_PRODUCER_ID
        record_offset = batch.records[0][0] if batch.records else -1
        for _offset, key_bytes, value_bytes in batch.records:
            if key_bytes is None:
                continue
            if consumer_records.is_consumer_key(key_bytes):
                self._apply_consumer_record(key_bytes, value_bytes)
                continue
            try:
                self._apply_record(fmt.decode_key(key_bytes), value_bytes, producer_id, record_offset)
            except fmt.DecodeError as exc:
                logger.warning("skipping an unreadable record in __consumer_offsets-%d: %s", self.partition, exc)

    def _apply_record(self, key, value_bytes: bytes | None, producer_id: int, record_offset: int) -> None:
        if isinstance(key, fmt.OffsetKey):
            value = fmt.decode_offset_value(value_bytes)
            by_group = self.committed if producer_id == NO_PRODUCER_ID else self.pending.setdefault(producer_id, {})
            offsets = by_group.setdefault(key.group, {})
            if value is None:
                offsets.pop((key.topic, key.partition), None)
            else:
                offsets[(key.topic, key.partition)] = OffsetAndMetadata(
                    value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                    value.expire_timestamp, record_offset)
            return
        value = fmt.decode_group_metadata_value(value_bytes)
        self.metadata[key.group] = value
        if value is None:
            self.committed.pop(key.group, None)
            for by_group in self.pending.values():
                by_group.pop(key.group, None)

    def _apply_consumer_record(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        try:
            key = consumer_records.decode_key(key_bytes)
            record = consumer_records.decode(key, value_bytes, self.topic_names)
        except fmt.DecodeError as exc:
            logger.warning("skipping an unreadable consumer group record in __consumer_offsets-%d: %s",
                           self.partition, exc)
            return
        if record is not None:
            group_id = key[1]
            apply(self.consumer.setdefault(group_id, ConsumerGroupState(group_id)), record)

    # -- the result, per group ------------------------------------------------------------------------
    def group_ids(self) -> set[str]:
        ids = set(self.metadata) | set(self.committed) | set(self.consumer)
        for by_group in self.pending.values():
            ids |= by_group.keys()
        return ids

    def committed_of(self, group_id: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return self.committed.get(group_id, {})

    def pending_of(self, group_id: str) -> dict[int, dict[TopicPartitionKey, OffsetAndMetadata]]:
        return {producer_id: by_group[group_id] for producer_id, by_group in self.pending.items()
                if by_group.get(group_id)}
