"""What delayed delivery writes and reads, pure: the record headers a producer sets, and the keys and
values of the `__delayed_messages` records.

Headers (values are ASCII decimal integers): `delay.ms` (deliver that many ms after the broker
received the record) and `deliver.at` (epoch ms; wins over `delay.ms`); a topic's
`delivery.delay.ms` applies to records that carry neither. The delivered record loses both and
gains `scheduled.at` (the due time it was scheduled for, epoch ms).

Records of `__delayed_messages` (compacted), keys and values versioned like Kafka's coordinator
records (an int16 version first):

    schedule  key  v0 | kind 0 | id (16 bytes)
              value v0 | target topic (int16 string) | partition i32 | due ms i64 | CreateTime i64 |
                        key (int32 bytes, -1 null) | value (same) | header count i32 |
                        per header: name (int16 string), value (int32 bytes)
    intent    key  v0 | kind 1 | target topic | partition i32
              value v0 | producer id i64 | producer epoch i16 | base sequence i32 | count i32 |
                        per record: id (16 bytes), offset of its schedule record i64

A schedule record with a null value (a tombstone) means delivered or cancelled. An intent says
which producer id, epoch and sequence the next delivery to a target uses and which records it
carries: written before that delivery is sent, so after a crash or failover the new leader sends
the same batch again with the same sequence and the target's producer state drops the duplicate.
Compaction keeps the last intent per target.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

from kbroker.group.coordinator import partition_for as _hash_partition
from kbroker.wire.internal_records import checked_pack, required_string, short_string
from kbroker.wire.primitives import I16, I32, I64, DecodeError, Reader

DELAYED_TOPIC = "__delayed_messages"
DELAY_MS_HEADER = "delay.ms"
DELIVER_AT_HEADER = "deliver.at"
SCHEDULED_AT_HEADER = "scheduled.at"
DELAY_HEADERS = frozenset({DELAY_MS_HEADER, DELIVER_AT_HEADER})
# Kafka lets clients with this id write internal topics (AdminUtils.ADMIN_CLIENT_ID); kbroker lets
# it write `__delayed_messages` only: brokers forwarding schedules, and `kbroker delayed cancel`
ADMIN_CLIENT_ID = "__admin_client"

VERSION = 0
KIND_SCHEDULE, KIND_INTENT = 0, 1
ID_BYTES = 16
_HEADER_COUNT_MAX = 10_000

Header = tuple[str, bytes | None]
Target = tuple[str, int]


class DelayHeaderError(ValueError):
    """A delay header whose value is not a usable time (answered INVALID_RECORD)."""


@dataclass(frozen=True, slots=True)
class DelayedRecord:
    """One record waiting for its due time: what its target will receive."""

    id: bytes
    target: Target
    due_ms: int
    timestamp: int  # the producer's CreateTime, kept on delivery
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


@dataclass(frozen=True, slots=True)
class Intent:
    target: Target
    producer_id: int
    producer_epoch: int
    base_sequence: int
    items: tuple[tuple[bytes, int], ...]  # (id, offset of its schedule record)


# -- headers --------------------------------------------------------------------------------------

def _header_int(name: str, raw: bytes | None) -> int:
    try:
        return int((raw or b"").decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise DelayHeaderError(f"header {name} must be a decimal integer, got {raw!r:.40}") from None


def due_time(headers, now_ms: int, topic_delay_ms: int, max_delay_ms: int) -> int | None:
    """When a record with `headers` is due; None when it is not delayed (no delay asked, or a due
    time already past). DelayHeaderError for a malformed value, a negative delay or one beyond
    `max_delay_ms`."""
    deliver_at = delay = None
    for name, raw in headers:
        if name == DELIVER_AT_HEADER:
            deliver_at = _header_int(name, raw)
        elif name == DELAY_MS_HEADER:
            delay = _header_int(name, raw)
    if deliver_at is not None:
        due = deliver_at
    elif delay is not None:
        if delay < 0:
            raise DelayHeaderError(f"header {DELAY_MS_HEADER} must not be negative, got {delay}")
        due = now_ms + delay
    elif topic_delay_ms > 0:
        due = now_ms + topic_delay_ms
    else:
        return None
    if due <= now_ms:
        return None
    if due - now_ms > max_delay_ms:
        raise DelayHeaderError(f"a delay of {due - now_ms} ms is beyond delayed.delivery.max.delay.ms={max_delay_ms}")
    return due


def delivered_headers(headers, due_ms: int) -> tuple[Header, ...]:
    """The headers a delivered record carries: the delay headers dropped, `scheduled.at` set."""
    kept = tuple(h for h in headers if h[0] not in DELAY_HEADERS and h[0] != SCHEDULED_AT_HEADER)
    return kept + ((SCHEDULED_AT_HEADER, str(due_ms).encode()),)


# -- placement and ids ----------------------------------------------------------------------------

def partition_for(target: Target, num_partitions: int) -> int:
    """The delay-log partition of a target partition (Kafka's coordinator hash over "topic-p"), so
    one partition's delayed records are delivered by one leader, in order."""
    return _hash_partition(f"{target[0]}-{target[1]}", num_partitions)


def idempotent_id(target: Target, producer_id: int, producer_epoch: int, sequence: int) -> bytes:
    """An idempotent producer's record always gets the same id, so a retried produce that reaches
    the delay log twice schedules it once."""
    seed = f"{target[0]}\x00{target[1]}\x00{producer_id}\x00{producer_epoch}\x00{sequence}".encode()
    return hashlib.blake2b(seed, digest_size=ID_BYTES).digest()


def random_id() -> bytes:
    return uuid.uuid4().bytes


def format_id(delay_partition: int, record_id: bytes) -> str:
    """How `kbroker delayed` names a pending record: its delay-log partition and id."""
    return f"{delay_partition}:{record_id.hex()}"


def parse_id(text: str) -> tuple[int, bytes]:
    partition, sep, hexid = text.partition(":")
    try:
        record_id = bytes.fromhex(hexid)
        if not sep or len(record_id) != ID_BYTES:
            raise ValueError
        return int(partition), record_id
    except ValueError:
        raise ValueError(f"{text!r} is not a delayed record id (PARTITION:{2 * ID_BYTES} hex digits)") from None


# -- records --------------------------------------------------------------------------------------

def _nullable_bytes(value: bytes | None) -> bytes:
    return I32.pack(-1) if value is None else I32.pack(len(value)) + bytes(value)


def _read_nullable_bytes(r: Reader) -> bytes | None:
    view = r.bytes_view()
    return None if view is None else bytes(view)


def schedule_key(record_id: bytes) -> bytes:
    if len(record_id) != ID_BYTES:
        raise ValueError("a delayed record id has 16 bytes")
    return I16.pack(VERSION) + bytes([KIND_SCHEDULE]) + record_id


def intent_key(target: Target) -> bytes:
    return I16.pack(VERSION) + bytes([KIND_INTENT]) + short_string(target[0]) + checked_pack(I32, target[1], "partition")


def encode_schedule(rec: DelayedRecord) -> tuple[bytes, bytes]:
    out = bytearray(I16.pack(VERSION))
    out += short_string(rec.target[0]) + checked_pack(I32, rec.target[1], "partition")
    out += checked_pack(I64, rec.due_ms, "due time") + checked_pack(I64, rec.timestamp, "timestamp")
    out += _nullable_bytes(rec.key) + _nullable_bytes(rec.value)
    out += I32.pack(len(rec.headers))
    for name, value in rec.headers:
        out += short_string(name) + _nullable_bytes(value)
    return schedule_key(rec.id), bytes(out)


def encode_intent(intent: Intent) -> tuple[bytes, bytes]:
    out = bytearray(I16.pack(VERSION))
    out += I64.pack(intent.producer_id) + I16.pack(intent.producer_epoch) + I32.pack(intent.base_sequence)
    out += I32.pack(len(intent.items))
    for record_id, offset in intent.items:
        if len(record_id) != ID_BYTES:
            raise ValueError("a delayed record id has 16 bytes")
        out += record_id + I64.pack(offset)
    return intent_key(intent.target), bytes(out)


@dataclass(frozen=True, slots=True)
class DecodedKey:
    kind: int
    record_id: bytes | None = None  # schedule
    target: Target | None = None  # intent


def decode_key(key: bytes | None) -> DecodedKey:
    if key is None:
        raise DecodeError("a __delayed_messages record needs a key")
    r = Reader(key, 0, flexible=False)
    if r.i16() != VERSION:
        raise DecodeError("unknown __delayed_messages key version")
    kind = r.i8()
    if kind == KIND_SCHEDULE:
        r.need(ID_BYTES)
        record_id = bytes(r.view[r.pos:r.pos + ID_BYTES])
        r.pos += ID_BYTES
        out = DecodedKey(kind, record_id=record_id)
    elif kind == KIND_INTENT:
        out = DecodedKey(kind, target=(required_string(r), r.i32()))
    else:
        raise DecodeError(f"unknown __delayed_messages key kind {kind}")
    if not r.at_end():
        raise DecodeError("trailing bytes in a __delayed_messages key")
    return out


def decode_schedule(record_id: bytes, value: bytes) -> DelayedRecord:
    r = Reader(value, 0, flexible=False)
    if r.i16() != VERSION:
        raise DecodeError("unknown __delayed_messages value version")
    target = (required_string(r), r.i32())
    due, timestamp = r.i64(), r.i64()
    key, val = _read_nullable_bytes(r), _read_nullable_bytes(r)
    count = r.i32()
    if not 0 <= count <= _HEADER_COUNT_MAX:
        raise DecodeError(f"invalid header count {count}")
    headers = tuple((required_string(r), _read_nullable_bytes(r)) for _ in range(count))
    if not r.at_end():
        raise DecodeError("trailing bytes in a __delayed_messages value")
    return DelayedRecord(record_id, target, due, timestamp, key, val, headers)


def decode_intent(target: Target, value: bytes) -> Intent:
    r = Reader(value, 0, flexible=False)
    if r.i16() != VERSION:
        raise DecodeError("unknown __delayed_messages value version")
    producer_id, epoch, sequence = r.i64(), r.i16(), r.i32()
    count = r.i32()
    if not 0 <= count <= (len(value) - r.pos) // (ID_BYTES + 8):
        raise DecodeError(f"invalid intent record count {count}")
    items = []
    for _ in range(count):
        record_id = bytes(r.view[r.pos:r.pos + ID_BYTES])
        r.pos += ID_BYTES
        items.append((record_id, r.i64()))
    if not r.at_end():
        raise DecodeError("trailing bytes in a __delayed_messages intent")
    return Intent(target, producer_id, epoch, sequence, tuple(items))


def decode_schedule_head(value: bytes) -> tuple[Target, int]:
    """(target, due ms) of a schedule value, without copying its payload (scans read millions)."""
    r = Reader(value, 0, flexible=False)
    if r.i16() != VERSION:
        raise DecodeError("unknown __delayed_messages value version")
    target = (required_string(r), r.i32())
    return target, r.i64()
