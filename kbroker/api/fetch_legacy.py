"""What a Fetch below v10 gets that a newer one does not, as Kafka 3.9 answers it
(KafkaApis.handleFetchRequest, maybeConvertFetchedData):

- below v10 a partition of a topic whose `compression.type` is zstd answers
  UNSUPPORTED_COMPRESSION_TYPE (such a client cannot read zstd);
- up to v5 a KAFKA_STORAGE_ERROR is answered NOT_LEADER_OR_FOLLOWER, which those clients retry;
- up to v3 the records are down-converted to message sets (magic 0 for v0–1, magic 1 for v2–3,
  wire/down_convert.py), or UNSUPPORTED_VERSION when the topic's `message.downconversion.enable`
  is false (followers are not refused), or UNSUPPORTED_COMPRESSION_TYPE when the first batch to
  convert is zstd.

Kafka converts lazily while it sends (KIP-283), so its memory holds 128 KB of converted records at
a time. kbroker converts before it answers, and bounds what one answer converts instead:
`CONVERTED_BYTES_PER_RESPONSE` over the partitions in request order (only what that needs is read
from the log), beyond it a partition answers no records this time and the consumer asks again;
the first partition with records always gets its first batch whole, so every fetch progresses.

`fetch.handle` calls `adjust` only for those versions, so the path of current clients — file
ranges sent with sendfile — never reaches this module.
"""

from __future__ import annotations

import dataclasses

from kbroker.api import views
from kbroker.api.context import RequestContext
from kbroker.config import effective_topic_value
from kbroker.errors import ErrorCode, KafkaError, NotLeaderOrFollowerError, error_code_of
from kbroker.replica.manager import FetchPartitionResult
from kbroker.wire.down_convert import down_convert, magic_for_fetch_version
from kbroker.wire.fetch_response import RecordBytes
from kbroker.wire.records import LOG_OVERHEAD

CONVERTED_BYTES_PER_RESPONSE = 4 << 20
ZSTD_MIN_FETCH_VERSION = 10  # KIP-110: the first Fetch version whose clients may read zstd
STORAGE_ERROR_MIN_FETCH_VERSION = 6  # below it, KAFKA_STORAGE_ERROR is answered NOT_LEADER_OR_FOLLOWER


def adjust(ctx: RequestContext, results, replica_id: int) -> None:
    """Apply the rules above to the read `results` ((name, topic id, [(request partition,
    FetchPartitionResult)]) per topic) of a Fetch of version `ctx.version` < 10, in place."""
    magic = magic_for_fetch_version(ctx.version)
    budget = CONVERTED_BYTES_PER_RESPONSE
    for name, _topic_id, parts in results:
        for i, (p, result) in enumerate(parts):
            if result.error is not None:
                if ctx.version < STORAGE_ERROR_MIN_FETCH_VERSION and \
                        error_code_of(result.error) == ErrorCode.kafka_storage_error:
                    result.error = NotLeaderOrFollowerError(str(result.error))
                continue
            configs = _topic_configs(ctx, name)
            if str(_value(ctx, configs, "compression.type")) == "zstd":
                parts[i] = (p, _refused(result, ErrorCode.unsupported_compression_type))
                continue
            if magic is None:
                continue
            if replica_id < 0 and not _value(ctx, configs, "message.downconversion.enable"):
                parts[i] = (p, _refused(result, ErrorCode.unsupported_version))
                continue
            if not result.records:
                continue
            if budget <= 0:  # this answer converted enough: the consumer asks again for this one
                result.records = []
                continue
            try:
                converted = down_convert(_read(result.records, budget), magic, p.fetch_offset)
            except KafkaError as exc:  # zstd first, or a batch that cannot be decoded
                parts[i] = (p, _refused(result, error_code_of(exc)))
                continue
            budget -= len(converted)
            result.records = [RecordBytes(converted)] if converted else []


def _topic_configs(ctx: RequestContext, name: str) -> dict[str, str]:
    info = ctx.broker.metadata.topic(views.source_of(ctx, name))  # a view's records are its source's
    return info.configs if info is not None else {}


def _value(ctx: RequestContext, configs: dict[str, str], key: str):
    return effective_topic_value(ctx.broker.config, configs, key)


def _refused(result: FetchPartitionResult, code: ErrorCode) -> FetchPartitionResult:
    """Kafka's FetchResponse.partitionResponse: the error, no records, the offsets unknown (-1)."""
    return FetchPartitionResult(result.topic_partition, error=KafkaError(code.name, code=code))


def _read(records, limit: int) -> bytes:
    """About `limit` bytes of the partition's records from their start (file ranges read, in-memory
    batches as they are), at least the first batch whole; a batch cut at the end is left out by
    the converter."""
    head = _head(records[0], LOG_OVERHEAD)
    if len(head) == LOG_OVERHEAD:
        limit = max(limit, LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True))
    pieces, total = [], 0
    for r in records:
        if total >= limit:
            break
        n = min(r.size, limit - total)
        pieces.append(r.read() if n == r.size else _head(r, n))
        total += n
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _head(r, n: int) -> bytes:
    """The first `n` bytes of a file range or of in-memory batches."""
    if isinstance(r, bytes):
        return bytes(r[:n])
    return dataclasses.replace(r, size=min(n, r.size)).read()
