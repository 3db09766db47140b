"""Shared helpers for the storage tests (imported by tests/log/test_*.py)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from kbroker.log.log import Log
from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers, validate_batches

settings.register_profile("kbroker-storage", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("kbroker-storage-ci", max_examples=120, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
PROFILE = settings.get_profile(
    "kbroker-storage-ci" if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else "kbroker-storage"
)


class Clock:
    """A settable millisecond clock for now_ms."""

    def __init__(self, ms: int = 1_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def make_batch(n: int = 3, *, ts: int = 1_000, value: bytes = b"value", compression: int = 0, pid: int = -1,
               epoch: int = -1, seq: int = -1, txn: bool = False, tag: bytes = b"") -> bytearray:
    records = [Record(i, ts + i, tag + b"k%d" % i, value, []) for i in range(n)]
    return bytearray(build_batch(records, compression=compression, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=txn))


def append(log: Log, n: int = 3, *, leader_epoch: int = 0, now_ms: int | None = None, **kw):
    buf = make_batch(n, **kw)
    return log.append_as_leader(buf, validate_batches(buf), leader_epoch=leader_epoch, now_ms=now_ms)


def batches_of(data: bytes):
    return list(iter_batch_headers(data, check_crc=True))


def read_all_records(log: Log, start: int | None = None, max_bytes: int = 1 << 20) -> list[Record]:
    """Read the whole log through Log.read, as a consumer would (skipping records before start)."""
    offset = log.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).read_bytes()
        if not data:
            break
        next_offset = offset
        for pos, h in iter_batch_headers(data, check_crc=True):
            out.extend(r for r in decode_records(data, pos, h) if r.offset >= offset)
            next_offset = h.last_offset + 1  # as consumers do: compaction may leave a batch's tail empty
        offset = next_offset
    return out
