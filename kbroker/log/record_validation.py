"""Per-record checks of client batches (Kafka's LogValidator, KIP-467): a compacted topic's records
must have keys; a CreateTime topic's record timestamps must lie within
`message.timestamp.before.max.ms` / `.after.max.ms` of the broker's clock.

A rejected batch raises `RecordValidationError`: INVALID_TIMESTAMP if any timestamp is out of
bounds, else INVALID_RECORD, with each offending record's index in its batch and the reason, so
clients fail exactly those records. Only called when the topic's LogConfig asks for it
(`validates_records`); the default produce path never opens records.
"""

from __future__ import annotations

from collections.abc import Sequence

from kbroker.errors import ErrorCode, KafkaError
from kbroker.log.config import LONG_MAX, LogConfig
from kbroker.wire.records import NO_TIMESTAMP, BatchHeader, Buffer, decode_records

__all__ = ["RecordValidationError", "validate_records"]


class RecordValidationError(KafkaError):
    """A batch rejected for some of its records: `record_errors` is [(index in batch, message)]."""

    def __init__(self, message: str, code: ErrorCode, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message, code)
        self.record_errors = record_errors


def _java_long(value: int) -> int:
    """Kafka prints its bounds with Java's long arithmetic (now + Long.MAX wraps)."""
    return (value + 2**63) % 2**64 - 2**63


def _timestamp_error(ts: int, offset: int, now: int, before: int, after: int) -> str | None:
    if ts == NO_TIMESTAMP or (now - ts <= before and ts - now <= after):
        return None
    return (f"Timestamp {ts} of message with offset {offset} is out of range. The timestamp should be within "
            f"[{_java_long(now - before)}, {_java_long(now + after)}]")


def validate_records(buf: Buffer, batches: Sequence[tuple[int, BatchHeader]], config: LogConfig, now_ms: int,
                     topic_partition: object) -> None:
    """Raise RecordValidationError naming every offending record of `batches` (client batches,
    already checked by `validate_batches`); the caller checks `config.validates_records` first."""
    compacted = config.compact_enabled
    check_timestamps = not config.log_append_time
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    for pos, h in batches:
        # The header's max timestamp bounds the batch from above: with no lower bound set and the
        # batch not too far ahead, its records need no look (Kafka's bounds are both Long.MAX by default).
        timestamps = check_timestamps and (before != LONG_MAX or h.max_timestamp - now_ms > after)
        if not (compacted or timestamps):
            continue
        for index, record in enumerate(decode_records(buf, pos, h)):
            if compacted and record.key is None:
                errors.append((index, f"Compacted topic cannot accept message without key in topic partition "
                                      f"{topic_partition}."))
                continue
            if timestamps:
                message = _timestamp_error(record.timestamp, record.offset, now_ms, before, after)
                if message is not None:
                    errors.append((index, message))
                    bad_timestamp = True
    if not errors:
        return
    if bad_timestamp:
        raise RecordValidationError("One or more records have been rejected due to invalid timestamp",
                                    ErrorCode.invalid_timestamp, errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(f"One or more records have been rejected due to {len(errors)} record errors in "
                                f"total, and only showing the first three errors at most: [{shown}]",
                                ErrorCode.invalid_record, errors)
