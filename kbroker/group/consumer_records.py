"""Kafka's `__consumer_offsets` records of consumer-protocol groups, byte for byte: key versions
3 (group epoch), 4 (subscription metadata), 5 (member subscription), 6 (target assignment epoch),
7 (a member's target assignment), 8 (a member's current assignment); every value is version 0,
flexible (compact strings and arrays, tagged fields). A null value is a tombstone.

Assignments are by topic name in kbroker's state (consumer_state) and by topic id in the records:
`encode` takes name -> id, `decode` id -> name (a partition of a topic that no longer exists is
dropped as it is read).
"""

from __future__ import annotations

import uuid
from typing import Callable

from kbroker.group.consumer_state import (Assignment, ClassicMeta, CurrentAssignment, GroupEpoch, MemberAssignment,
                                          MemberState, MemberSubscription, Record, Subscription,
                                          SubscriptionMetadata, TargetEpoch, TargetMember)
from kbroker.wire.internal_records import required_string, short_string
from kbroker.wire.primitives import I8, I16, I32, DecodeError, Reader, length, string, tagged_field

KEY_TYPES = range(3, 9)
MAX_ARRAY = 1 << 20

TopicIds = Callable[[str], "uuid.UUID | None"]  # name -> id (None: the topic is gone)
TopicNames = Callable[[uuid.UUID], "str | None"]  # id -> name


def is_consumer_key(key_bytes: bytes | memoryview) -> bool:
    return len(key_bytes) >= 2 and I16.unpack_from(key_bytes, 0)[0] in KEY_TYPES


# -- encoding ------------------------------------------------------------------------------------------

def key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    out = I16.pack(version) + short_string(group_id)
    return out + short_string(member_id) if member_id is not None else out


def _array(items: list[bytes]) -> bytes:
    return length(len(items), True) + b"".join(items)


def _partitions(assignment: Assignment, ids: TopicIds) -> bytes:
    items = []
    for topic in sorted(assignment):
        topic_id = ids(topic)
        if topic_id is None:
            continue
        parts = sorted(assignment[topic])
        items.append(topic_id.bytes + _array([I32.pack(p) for p in parts]) + b"\x00")
    return _array(items)


def _classic(meta: ClassicMeta) -> bytes:
    """ClassicMemberMetadata, the tagged field 0 of the member's value."""
    protocols = [string(name, True) + length(len(data), True) + bytes(data) + b"\x00" for name, data in meta.protocols]
    return I32.pack(meta.session_timeout_ms) + _array(protocols) + b"\x00"


def _subscription(sub: Subscription) -> bytes:
    tags = b"\x00"
    if sub.classic is not None:
        tags = tagged_field(0, _classic(sub.classic))
    return b"".join((
        I16.pack(0), string(sub.instance_id, True), string(sub.rack_id, True), string(sub.client_id, True),
        string(sub.client_host, True), _array([string(t, True) for t in sub.topic_names]),
        string(sub.topic_regex, True), I32.pack(sub.rebalance_timeout_ms), string(sub.server_assignor, True),
        tags))


def encode(group_id: str, record: Record, ids: TopicIds) -> tuple[bytes, bytes | None]:
    """One record as the (key, value) Kafka writes; value None is a tombstone."""
    if isinstance(record, GroupEpoch):
        value = None if record.epoch is None else I16.pack(0) + I32.pack(record.epoch) + b"\x00"
        return key(3, group_id), value
    if isinstance(record, SubscriptionMetadata):
        topics = []
        for name in sorted(record.topics):
            topic_id = ids(name)
            if topic_id is not None:
                topics.append(topic_id.bytes + string(name, True) + I32.pack(record.topics[name]) + _array([]) + b"\x00")
        return key(4, group_id), I16.pack(0) + _array(topics) + b"\x00"
    if isinstance(record, MemberSubscription):
        value = None if record.subscription is None else _subscription(record.subscription)
        return key(5, group_id, record.member_id), value
    if isinstance(record, TargetEpoch):
        return key(6, group_id), I16.pack(0) + I32.pack(record.epoch) + b"\x00"
    if isinstance(record, TargetMember):
        value = None if record.assignment is None else I16.pack(0) + _partitions(record.assignment, ids) + b"\x00"
        return key(7, group_id, record.member_id), value
    if isinstance(record, MemberAssignment):
        c = record.current
        value = None if c is None else b"".join((
            I16.pack(0), I32.pack(c.member_epoch), I32.pack(c.previous_member_epoch), I8.pack(int(c.state)),
            _partitions(c.assigned, ids), _partitions(c.pending_revocation, ids), b"\x00"))
        return key(8, group_id, record.member_id), value
    raise TypeError(f"not a consumer group record: {record!r}")


# -- decoding ------------------------------------------------------------------------------------------

def decode_key(key_bytes: bytes | memoryview) -> tuple[int, str, str | None]:
    """(record type, group id, member id or None)."""
    r = Reader(key_bytes, 0, False)
    version = r.i16()
    if version not in KEY_TYPES:
        raise DecodeError(f"not a consumer group key version: {version}")
    group_id = required_string(r)
    member_id = required_string(r) if version in (5, 7, 8) else None
    if not r.at_end():
        raise DecodeError("trailing bytes after a consumer group key")
    return version, group_id, member_id


def _value_reader(value: bytes | memoryview) -> Reader:
    r = Reader(value, 0, True)
    if r.i16() != 0:
        raise DecodeError("unknown consumer group value version")
    return r


def _count(r: Reader) -> int:
    n = r.array_length()
    if n > MAX_ARRAY:
        raise DecodeError(f"array of {n} elements")
    return n


def _uuid(r: Reader) -> uuid.UUID:
    r.need(16)
    value = uuid.UUID(bytes=bytes(r.view[r.pos:r.pos + 16]))
    r.pos += 16
    return value


def _read_partitions(r: Reader, names: TopicNames) -> Assignment:
    out: dict[str, frozenset[int]] = {}
    for _ in range(_count(r)):
        topic_id = _uuid(r)
        parts = frozenset(r.i32() for _ in range(_count(r)))
        r.skip_tags()
        name = names(topic_id)
        if name is not None and parts:
            out[name] = out.get(name, frozenset()) | parts
    return out


def _read_classic_tag(r: Reader) -> ClassicMeta | None:
    """The member value's tagged fields: tag 0 is ClassicMemberMetadata; others are skipped."""
    meta = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        r.need(size)
        if tag == 0:
            sub = Reader(r.view[r.pos:end], 0, True)
            timeout = sub.i32()
            protocols = []
            for _ in range(_count(sub)):
                name = required_string(sub)
                data = sub.bytes_view()
                sub.skip_tags()
                protocols.append((name, bytes(data or b"")))
            meta = ClassicMeta(timeout, tuple(protocols))
        r.pos = end
    return meta


def decode(key: tuple[int, str, str | None], value: bytes | memoryview | None, names: TopicNames,
           ) -> Record | None:
    """The record of a decoded key and its value (None: a tombstone), or None for one kbroker keeps
    no state for."""
    version, _group_id, member_id = key
    if version == 3:
        return GroupEpoch(None if value is None else _value_reader(value).i32())
    if value is None:
        if version == 5:
            return MemberSubscription(member_id or "", None)
        if version == 7:
            return TargetMember(member_id or "", None)
        if version == 8:
            return MemberAssignment(member_id or "", None)
        return None
    r = _value_reader(value)
    if version == 4:
        topics = {}
        for _ in range(_count(r)):
            _uuid(r)
            name = required_string(r)
            partitions = r.i32()
            for _ in range(_count(r)):  # partition racks
                r.i32()
                for _ in range(_count(r)):
                    r.string()
                r.skip_tags()
            r.skip_tags()
            topics[name] = partitions
        return SubscriptionMetadata(topics)
    if version == 5:
        sub = Subscription(instance_id=r.string(True), rack_id=r.string(True), client_id=required_string(r),
                           client_host=required_string(r),
                           topic_names=tuple(required_string(r) for _ in range(_count(r))),
                           topic_regex=r.string(True), rebalance_timeout_ms=r.i32(), server_assignor=r.string(True),
                           classic=_read_classic_tag(r))
        return MemberSubscription(member_id or "", sub)
    if version == 6:
        return TargetEpoch(r.i32())
    if version == 7:
        return TargetMember(member_id or "", _read_partitions(r, names))
    epoch, previous, state = r.i32(), r.i32(), r.i8()
    try:
        member_state = MemberState(state)
    except ValueError:
        member_state = MemberState.UNKNOWN
    assigned = _read_partitions(r, names)
    pending = _read_partitions(r, names)
    return MemberAssignment(member_id or "", CurrentAssignment(epoch, previous, member_state, assigned, pending))


def encode_all(group_id: str, records: list[Record], ids: TopicIds) -> list[tuple[bytes, bytes | None]]:
    return [encode(group_id, record, ids) for record in records]
