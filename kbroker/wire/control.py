"""Control records: Kafka's transaction markers (ControlRecordType, EndTransactionMarker) and the
control batch that carries one (MemoryRecords.withEndTransactionMarker).

A marker is one record in a batch with the control and transactional attribute bits set, the
producer's id and epoch and no sequence. Its key is version i16 (0) + type i16 (0 ABORT,
1 COMMIT); its value is version i16 (0) + coordinator epoch i32. Like Kafka, newer key or value
versions are read as version 0 (extra bytes ignored) and a negative version is corrupt.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kbroker.errors import CorruptRecordError
from kbroker.wire.records import NO_SEQUENCE, BatchHeader, Record, build_batch, decode_records

__all__ = [
    "ABORT",
    "COMMIT",
    "EndTransactionMarker",
    "build_end_txn_marker_batch",
    "control_record_type",
    "read_end_txn_marker",
]

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_KEY_VERSION = 0
_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    type: int  # ABORT or COMMIT
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.type not in (ABORT, COMMIT):
            raise ValueError(f"invalid control record type for an end transaction marker: {self.type}")

    @property
    def is_abort(self) -> bool:
        return self.type == ABORT

    def key(self) -> bytes:
        return _KEY.pack(_KEY_VERSION, self.type)

    def value(self) -> bytes:
        return _VALUE.pack(_VALUE_VERSION, self.coordinator_epoch)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        """Kafka's EndTransactionMarker.deserialize; CorruptRecordError (INVALID_RECORD in Kafka) when
        the record is no end transaction marker."""
        type_ = control_record_type(key)
        if type_ not in (ABORT, COMMIT):
            raise CorruptRecordError(f"control record type {type_} is no end transaction marker")
        if value is None or len(value) < _VALUE.size:
            raise CorruptRecordError(
                f"end transaction marker value needs {_VALUE.size} bytes, found {0 if value is None else len(value)}"
            )
        version, coordinator_epoch = _VALUE.unpack_from(value, 0)
        if version < 0:
            raise CorruptRecordError(f"invalid end transaction marker version {version}")
        return cls(type_, coordinator_epoch)


def control_record_type(key: bytes | None) -> int:
    """The type id of a control record key (Kafka's ControlRecordType.parseTypeId)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key needs {_KEY.size} bytes, found {0 if key is None else len(key)}")
    version, type_ = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return type_


def build_end_txn_marker_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One control batch holding `marker`, laid out as Kafka's MemoryRecords.withEndTransactionMarker."""
    rec = Record(base_offset, timestamp, marker.key(), marker.value(), [])
    return build_batch(
        [rec],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def read_end_txn_marker(buf, pos: int, header: BatchHeader) -> EndTransactionMarker | None:
    """The marker of the control batch at `buf[pos]`, or None when the batch is empty (the cleaner
    removed it: Kafka then ignores the batch) or holds another kind of control record."""
    records = decode_records(buf, pos, header)
    if not records:
        return None
    first = records[0]
    if control_record_type(first.key) not in (ABORT, COMMIT):
        return None
    return EndTransactionMarker.deserialize(first.key, first.value)
