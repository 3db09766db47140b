"""Reading a partition's records over the Kafka protocol, as a consumer without a group does: Fetch
at the partition's leader, from an offset, with a byte budget. For tools that show records (the
web console's message browser); the records are decoded with `wire.records`, control batches
(transaction markers) skipped. Reads are read_uncommitted: records of open and aborted
transactions are shown too, as on a log dump.

`decode_fetched` is the pure part (bytes of a Fetch answer to records and where to go on), tested
without a broker.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.schema.errors import ErrorCode

from kbroker.admin.client import AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.connection import FETCH
from kbroker.errors import CorruptRecordError
from kbroker.wire.records import Record, decode_records, iter_batch_headers

DEFAULT_FETCH_BYTES = 1024 * 1024
MAX_FETCH_BYTES = 16 * 1024 * 1024


class FetchedRecords(NamedTuple):
    records: list[Record]  # offsets >= the offset asked for, in offset order
    next_offset: int  # where the next read goes on (past the last complete batch)
    high_watermark: int
    log_start_offset: int  # -1 when the broker does not say


def decode_fetched(chunk: bytes, from_offset: int) -> tuple[list[Record], int]:
    """The records at or after `from_offset` in the complete batches of `chunk`, and the offset
    after the last complete batch (`from_offset` when there is none: a partial batch only).
    Magic 0/1 message sets and malformed batches are an AdminError naming the offset."""
    records: list[Record] = []
    next_offset = from_offset
    try:
        for pos, header in iter_batch_headers(chunk):
            next_offset = max(next_offset, header.next_offset)
            if header.is_control or header.next_offset <= from_offset:
                continue
            records.extend(r for r in decode_records(chunk, pos, header) if r.offset >= from_offset)
    except CorruptRecordError as exc:
        raise AdminError(f"cannot read the records after offset {next_offset}: {exc}") from None
    return records, next_offset


def fetch_records(client: AdminClient, topic: str, partition: int, offset: int,
                  max_bytes: int = DEFAULT_FETCH_BYTES) -> FetchedRecords:
    """One Fetch of `topic`-`partition` from `offset` at its leader (no waiting: an empty answer at
    the log end). At least the first batch comes whole even when it exceeds `max_bytes` (KIP-74)."""
    max_bytes = max(1, min(int(max_bytes), MAX_FETCH_BYTES))
    leader = client.leader_of(topic, partition)
    body = client.connection(leader.host, leader.port).call(FETCH, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}]})
    answers = [p for t in body.responses if t.topic == topic for p in t.partitions if p.partition_index == partition]
    if len(answers) != 1:
        raise AdminError(f"Fetch answered nothing for {topic}-{partition}")
    data = answers[0]
    if data.error_code != ErrorCode.none:
        raise KafkaErrorResponse(data.error_code, f"Fetch of {topic}-{partition} at offset {offset}")
    records, next_offset = decode_fetched(bytes(data.records or b""), offset)
    return FetchedRecords(records, next_offset, int(data.high_watermark), int(getattr(data, "log_start_offset", -1)))
