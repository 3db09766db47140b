"""The transaction coordinator's shell (kbroker/txn/coordinator.py) over an in-memory
`__transaction_state` and marker writer: appends, markers in the background, failover reloads,
timeouts. trio's MockClock: retries and scans take no real time."""

from __future__ import annotations

import trio
import trio.testing

from kbroker.errors import ErrorCode as E
from kbroker.txn import coordinator_rules as rules
from kbroker.txn.coordinator import TransactionCoordinator
from kbroker.txn.coordinator_rules import TransactionConfig
from kbroker.txn.log_format import decode_value
from kbroker.txn.state import TransactionState as S

CONFIG = TransactionConfig(transaction_state_partitions=1, abort_timed_out_transactions_interval_ms=1000)
TP1, TP2 = ("orders", 0), ("orders", 1)


class MemoryStateLog:
    """One partition's records; `fail` makes the next appends answer that code."""

    def __init__(self, epoch: int = 3) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.epoch: int | None = epoch
        self.fail: list[E] = []

    def leader_epoch(self, partition: int) -> int | None:
        return self.epoch

    async def append(self, partition: int, key: bytes, value: bytes | None) -> E:
        await trio.sleep(0.001)
        if self.fail:
            return self.fail.pop(0)
        self.records.append((key, value))
        return E.none

    def read(self, partition: int):
        return iter(list(self.records))


class MemoryMarkers:
    """Markers 'written' per partition; `refuse` answers a code for a partition a number of times."""

    def __init__(self) -> None:
        self.written: list[tuple[tuple[str, int], bool, int, int]] = []
        self.refuse: dict[tuple[str, int], list[E]] = {}

    async def write(self, markers, partitions):
        await trio.sleep(0.001)
        out = {}
        for tp in partitions:
            if self.refuse.get(tp):
                out[tp] = self.refuse[tp].pop(0)
            else:
                out[tp] = E.none
                self.written.append((tp, markers.commit, markers.producer_epoch, markers.coordinator_epoch))
        return out


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def make(log=None, markers=None, clock=None):
    ids = iter(range(500, 10_000))

    async def allocate() -> int:
        return next(ids)

    return TransactionCoordinator(CONFIG, log or MemoryStateLog(), markers or MemoryMarkers(), allocate,
                                  clock or Clock(), cluster=False)


def run(test):
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


async def settle() -> None:
    await trio.sleep(5)  # background marker rounds finish (mock time)


def test_commit_writes_markers_to_every_partition_then_complete() -> None:
    async def main():
        markers = MemoryMarkers()
        tc = make(markers=markers)
        async with trio.open_nursery() as nursery:
            await nursery.start(tc.run)
            assert await tc.init_producer_id("t", 60_000, None) == (E.none, 500, 0)
            assert await tc.add_partitions("t", 500, 0, [TP1, TP2]) is E.none
            assert await tc.end_txn("t", 500, 0, True) is E.none
            # answered once PrepareCommit is written; the next transaction waits for Complete
            assert await tc.add_partitions("t", 500, 0, [TP1]) is E.concurrent_transactions
            await settle()
            assert sorted(markers.written) == [(TP1, True, 0, 3), (TP2, True, 0, 3)]
            assert tc.describe("t")[1].state is S.COMPLETE_COMMIT
            assert await tc.add_partitions("t", 500, 0, [TP1]) is E.none
            nursery.cancel_scope.cancel()
    run(main)


def test_markers_refused_are_retried_and_a_deleted_topic_is_skipped() -> None:
    async def main():
        markers = MemoryMarkers()
        markers.refuse[TP1] = [E.not_leader_or_follower, E.not_enough_replicas]
        markers.refuse[TP2] = [E.unknown_topic_or_partition]
        tc = make(markers=markers)
        async with trio.open_nursery() as nursery:
            await nursery.start(tc.run)
            await tc.init_producer_id("t", 60_000, None)
            await tc.add_partitions("t", 500, 0, [TP1, TP2])
            assert await tc.end_txn("t", 500, 0, False) is E.none
            await settle()
            assert markers.written == [(TP1, False, 0, 3)]  # third try; TP2's topic is gone
            assert tc.describe("t")[1].state is S.COMPLETE_ABORT
            nursery.cancel_scope.cancel()
    run(main)


def test_a_new_coordinator_finishes_what_the_old_one_prepared() -> None:
    async def main():
        log = MemoryStateLog()
        markers = MemoryMarkers()
        markers.refuse[TP1] = [E.not_leader_or_follower] * 1000  # the old coordinator never gets through
        old = make(log=log, markers=markers)
        async with trio.open_nursery() as nursery:
            await nursery.start(old.run)
            await old.init_producer_id("t", 60_000, None)
            await old.add_partitions("t", 500, 0, [TP1])
            assert await old.end_txn("t", 500, 0, True) is E.none
            await trio.sleep(1)
            old.resign(0)  # its partition moved away: its marker rounds stop
            nursery.cancel_scope.cancel()
        assert [decode_value(v).state for _k, v in log.records][-1] is S.PREPARE_COMMIT
        markers.refuse.clear()
        log.epoch = 4
        new = make(log=log, markers=markers)
        async with trio.open_nursery() as nursery:
            await nursery.start(new.run)
            assert new.load_led_partitions() == 1
            await settle()
            assert markers.written == [(TP1, True, 0, 4)]  # the new coordinator epoch
            assert new.describe("t")[1].state is S.COMPLETE_COMMIT
            nursery.cancel_scope.cancel()
    run(main)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    async def main():
        clock = Clock()
        markers = MemoryMarkers()
        tc = make(markers=markers, clock=clock)
        async with trio.open_nursery() as nursery:
            await nursery.start(tc.run)
            await tc.init_producer_id("t", 2_000, None)
            await tc.add_partitions("t", 500, 0, [TP1])
            clock.ms += 2_500
            await trio.sleep(1.5)  # the scan runs every second
            await settle()
            assert markers.written == [(TP1, False, 1, 3)]  # aborted under the bumped epoch
            md = tc.describe("t")[1]
            assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, 1)
            assert await tc.end_txn("t", 500, 0, True) is E.producer_fenced
            nursery.cancel_scope.cancel()
    run(main)


def test_a_failed_append_answers_the_coordinator_error_and_changes_nothing() -> None:
    async def main():
        log = MemoryStateLog()
        tc = make(log=log)
        async with trio.open_nursery() as nursery:
            await nursery.start(tc.run)
            await tc.init_producer_id("t", 60_000, None)
            log.fail = [E.not_enough_replicas]
            assert await tc.add_partitions("t", 500, 0, [TP1]) is E.coordinator_not_available
            md = tc.describe("t")[1]
            assert (md.state, md.pending_state, md.partitions) == (S.EMPTY, None, frozenset())
            log.fail = [E.not_leader_or_follower]
            assert await tc.add_partitions("t", 500, 0, [TP1]) is E.not_coordinator
            assert await tc.add_partitions("t", 500, 0, [TP1]) is E.none
            nursery.cancel_scope.cancel()
    run(main)


def test_ids_of_a_partition_not_led_here_are_not_coordinated() -> None:
    async def main():
        log = MemoryStateLog()
        log.epoch = None
        tc = make(log=log)
        assert await tc.init_producer_id("t", 60_000, None) == (E.not_coordinator, -1, -1)
        assert tc.describe("t") == (E.not_coordinator, None)
    run(main)
