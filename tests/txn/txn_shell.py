"""A minimal in-memory coordinator shell for the rules' tests: a cache, a log of records, a fake
clock and producer id allocator, and the append/marker steps the real shell will perform."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.errors import ErrorCode as E
from kbroker.txn.coordinator_rules import Decision, TransactionConfig, TxnMarkers, after_append, marker_written
from kbroker.txn.log_format import encode_key, encode_value
from kbroker.txn.metadata import TransactionMetadata, TxnTransitMetadata


@dataclass
class Shell:
    config: TransactionConfig = field(default_factory=TransactionConfig)
    now: int = 1_000_000
    next_pid: int = 1000
    coordinator_epoch: int = 5
    cache: dict[str, TransactionMetadata] = field(default_factory=dict)
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    in_flight: dict[str, tuple[TxnMarkers, TxnTransitMetadata]] = field(default_factory=dict)
    fail_next: E | None = None  # the next append fails with this

    def allocate(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def run(self, tid: str, decision: Decision) -> E:
        """Keep the decision's metadata, append its record, complete; the client's answer."""
        if decision.metadata is not None:
            self.cache[tid] = decision.metadata
        if decision.write is None:
            return decision.error
        error, self.fail_next = (self.fail_next or E.none), None
        if error is E.none:
            value = decision.write.to_log_value()
            self.log.append((encode_key(tid), None if value is None else encode_value(value)))
        out = after_append(self.cache.get(tid), decision.write, self.coordinator_epoch, error,
                           now_ms=self.now, is_epoch_fence=decision.is_epoch_fence)
        if out.metadata is None:
            self.cache.pop(tid, None)
        else:
            self.cache[tid] = out.metadata
        if out.markers is not None:
            assert out.complete is not None
            self.in_flight[tid] = (out.markers, out.complete)
        return decision.error if out.error is E.none else out.error

    def write_markers(self, tid: str) -> E:
        """Every partition acknowledges its marker; the Complete record is appended."""
        markers, complete = self.in_flight.pop(tid)
        md = self.cache[tid]
        for tp in markers.partitions:
            md = marker_written(md, tp)
        self.cache[tid] = md
        return self.run(tid, Decision(write=complete))
