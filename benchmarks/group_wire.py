"""Owns the raw-wire classic group requests of the group-commits phase: FindCoordinator v2,
JoinGroup v5, SyncGroup v3, Heartbeat v3, OffsetCommit v7 and OffsetFetch v5 bodies and their answers'
parsers, struct-based like kwire.py and with no kbroker code, so the phase loads Kafka or any other
broker the same way."""

from __future__ import annotations

import struct

SESSION_MS = 45_000          # session.timeout.ms default
REBALANCE_MS = 300_000       # max.poll.interval.ms default: the JoinGroup's rebalance timeout
PROTOCOL_TYPE, PROTOCOL = "consumer", "range"

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP, OFFSET_COMMIT, OFFSET_FETCH = 10, 11, 12, 14, 8, 9
VERSIONS = {FIND_COORDINATOR: 2, JOIN_GROUP: 5, SYNC_GROUP: 3, HEARTBEAT: 3, OFFSET_COMMIT: 7, OFFSET_FETCH: 5}
API_NAMES = {FIND_COORDINATOR: "FindCoordinator", JOIN_GROUP: "JoinGroup", SYNC_GROUP: "SyncGroup",
             HEARTBEAT: "Heartbeat", OFFSET_COMMIT: "OffsetCommit", OFFSET_FETCH: "OffsetFetch"}
ERROR_NAMES = {3: "UNKNOWN_TOPIC_OR_PARTITION", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
               16: "NOT_COORDINATOR", 22: "ILLEGAL_GENERATION", 23: "INCONSISTENT_GROUP_PROTOCOL",
               25: "UNKNOWN_MEMBER_ID", 26: "INVALID_SESSION_TIMEOUT", 27: "REBALANCE_IN_PROGRESS",
               28: "INVALID_COMMIT_OFFSET_SIZE", 30: "GROUP_AUTHORIZATION_FAILED", 79: "MEMBER_ID_REQUIRED"}
MEMBER_ID_REQUIRED = 79
RETRIABLE_COORDINATOR = (14, 15)  # the warm-up FindCoordinator retries these while the topic is created


# -- encoders: request bodies (non-flexible versions; kwire.request_bytes adds the v1 header) -------
def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _nstr(s: str | None) -> bytes:
    return b"\xff\xff" if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def subscription_v3(topic: str) -> bytes:
    """ConsumerProtocolSubscription v3 (what the Java consumer sends): topics, user data (null),
    owned partitions (none), generation id (-1), rack id (null)."""
    return struct.pack(">hi", 3, 1) + _str(topic) + struct.pack(">iii", -1, 0, -1) + _nstr(None)


def assignment_v3(topic: str, partition: int) -> bytes:
    """ConsumerProtocolAssignment v3: one topic, one partition, user data null."""
    return struct.pack(">hi", 3, 1) + _str(topic) + struct.pack(">iii", 1, partition, -1)


def find_coordinator_v2(group: str) -> bytes:
    return _str(group) + b"\x00"  # key type 0: group


def join_group_v5(group: str, member_id: str, metadata: bytes) -> bytes:
    return (_str(group) + struct.pack(">ii", SESSION_MS, REBALANCE_MS) + _str(member_id) + _nstr(None)
            + _str(PROTOCOL_TYPE) + struct.pack(">i", 1) + _str(PROTOCOL) + _bytes(metadata))


def sync_group_v3(group: str, generation: int, member_id: str, assignment: bytes) -> bytes:
    return (_str(group) + struct.pack(">i", generation) + _str(member_id) + _nstr(None)
            + struct.pack(">i", 1) + _str(member_id) + _bytes(assignment))


def heartbeat_v3(group: str, generation: int, member_id: str) -> bytes:
    return _str(group) + struct.pack(">i", generation) + _str(member_id) + _nstr(None)


def offset_commit_v7(group: str, generation: int, member_id: str, topic: str, partition: int, offset: int) -> bytes:
    return (_str(group) + struct.pack(">i", generation) + _str(member_id) + _nstr(None)
            + struct.pack(">i", 1) + _str(topic) + struct.pack(">iiqi", 1, partition, offset, -1) + _str(""))


def offset_fetch_v5(group: str, topic: str, partition: int) -> bytes:
    return _str(group) + struct.pack(">i", 1) + _str(topic) + struct.pack(">ii", 1, partition)


# -- decoders: response bodies (after the v0 response header, the correlation id) -------------------
class Reader:
    __slots__ = ("buf", "off")

    def __init__(self, buf: bytes, off: int = 0):
        self.buf, self.off = buf, off

    def _take(self, fmt: str, size: int):
        (v,) = struct.unpack_from(fmt, self.buf, self.off)
        self.off += size
        return v

    def i16(self) -> int:
        return self._take(">h", 2)

    def i32(self) -> int:
        return self._take(">i", 4)

    def i64(self) -> int:
        return self._take(">q", 8)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.buf[self.off:self.off + n].decode()
        self.off += n
        return s

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        b = bytes(self.buf[self.off:self.off + n])
        self.off += n
        return b

    def array(self) -> int:
        return max(0, self.i32())


def parse_find_coordinator_v2(r: Reader) -> dict:
    r.i32()  # throttle
    return {"error": r.i16(), "message": r.string(), "node_id": r.i32(), "host": r.string(), "port": r.i32()}


def parse_join_group_v5(r: Reader) -> dict:
    r.i32()
    out = {"error": r.i16(), "generation": r.i32(), "protocol": r.string(), "leader": r.string(),
           "member_id": r.string()}
    out["members"] = [(r.string(), r.string(), r.bytes_()) for _ in range(r.array())]
    return out


def parse_sync_group_v3(r: Reader) -> dict:
    r.i32()
    return {"error": r.i16(), "assignment": r.bytes_()}


def parse_heartbeat_v3(r: Reader) -> dict:
    r.i32()
    return {"error": r.i16()}


def parse_offset_commit_v7(r: Reader) -> dict:
    r.i32()
    parts = []
    for _ in range(r.array()):
        topic = r.string()
        parts += [(topic, r.i32(), r.i16()) for _ in range(r.array())]
    return {"partitions": parts}  # [(topic, partition, error)]


def parse_offset_fetch_v5(r: Reader) -> dict:
    r.i32()
    parts = []
    for _ in range(r.array()):
        topic = r.string()
        for _ in range(r.array()):
            partition, offset, _epoch, _meta, error = r.i32(), r.i64(), r.i32(), r.string(), r.i16()
            parts.append((topic, partition, offset, error))
    return {"partitions": parts, "error": r.i16()}  # [(topic, partition, offset, error)]


PARSERS = {FIND_COORDINATOR: parse_find_coordinator_v2, JOIN_GROUP: parse_join_group_v5,
           SYNC_GROUP: parse_sync_group_v3, HEARTBEAT: parse_heartbeat_v3, OFFSET_COMMIT: parse_offset_commit_v7,
           OFFSET_FETCH: parse_offset_fetch_v5}


class GroupError(RuntimeError):
    pass


def error_text(code: int) -> str:
    return f"{code} ({ERROR_NAMES.get(code, 'see Kafka error codes')})"
