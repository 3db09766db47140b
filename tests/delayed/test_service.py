"""DelayService's supervision of its partition runners, on trio's MockClock: a runner that fails is
replaced by a fresh one after a growing backoff (the failure logged), stops being restarted once
leadership moves, cancels wait for a runner to have loaded (which records are in flight is
not known before), and a large schedule is appended earliest due first and indexed batch by batch. The runners are real; the delay log they scan is an empty fake partition."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from kbroker.config import BrokerConfig
from kbroker.delayed.format import DelayedRecord, schedule_key
from kbroker.delayed.service import RESTART_MIN_S, DelayService
from kbroker.errors import NotLeaderOrFollowerError
from kbroker.wire.internal_records import build_internal_batch


class EmptyPartition:
    """A `__delayed_messages` partition led here, empty when scanned; appends are counted."""

    def __init__(self) -> None:
        self.log = SimpleNamespace(log_start_offset=0, log_end_offset=0)
        self.leader_epoch = 1
        self.appended = 0  # batches
        self.next_offset = 0

    def append_records_to_leader(self, _buf, batches, _acks, from_client=True):
        self.appended += 1
        first = self.next_offset
        self.next_offset += sum(header.records_count for _pos, header in batches)
        return SimpleNamespace(first_offset=first)

    async def maybe_flush(self) -> None:
        pass


class EmptyPartitions:
    def __init__(self) -> None:
        self.partition = EmptyPartition()

    def get_leader_partition(self, _tp):
        return self.partition


def make_service(allocate) -> DelayService:
    async def ensure_topic() -> None:
        pass

    return DelayService(1, BrokerConfig(), EmptyPartitions(), None, ensure_topic, allocate, lambda _t: 1,
                        lambda: int(trio.current_time() * 1000), cluster=False)


def run(test) -> None:
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_failed_runner_is_restarted_with_backoff(caplog):
    attempts: list[float] = []

    async def allocate() -> int:
        attempts.append(trio.current_time())
        if len(attempts) <= 3:
            raise RuntimeError(f"failure {len(attempts)}")
        return 7

    async def test() -> None:
        service = make_service(allocate)
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            service.become_leader(0, 1)
            with trio.fail_after(60):
                while not (0 in service.runners and service.runners[0].loaded.is_set()):
                    await trio.sleep(0.01)
            assert service.runners[0].producer_id == 7
            nursery.cancel_scope.cancel()
        gaps = [b - a for a, b in zip(attempts, attempts[1:])]
        assert gaps == pytest.approx([RESTART_MIN_S, 2 * RESTART_MIN_S, 4 * RESTART_MIN_S], abs=0.02)

    with caplog.at_level(logging.ERROR, logger="kbroker.delayed.service"):
        run(test)
    failures = [r for r in caplog.records if "__delayed_messages-0 failed; restarting" in r.getMessage()]
    assert len(failures) == 3 and all(r.exc_info for r in failures)


def test_no_restart_once_leadership_moved():
    attempts: list[float] = []

    async def allocate() -> int:
        attempts.append(trio.current_time())
        raise RuntimeError("always")

    async def test() -> None:
        service = make_service(allocate)
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            service.become_leader(0, 1)
            await trio.sleep(RESTART_MIN_S / 2)  # failed once, waiting to restart
            service.resign(0)
            await trio.sleep(60)
            assert 0 not in service.runners
            nursery.cancel_scope.cancel()
        assert len(attempts) == 1

    run(test)


def test_cancel_waits_for_the_runner_to_load():
    release = trio.Event()

    async def allocate() -> int:
        await release.wait()
        return 7

    async def test() -> None:
        service = make_service(allocate)
        tombstone = build_internal_batch([(schedule_key(bytes(16)), None)], 0)
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            service.become_leader(0, 1)
            with pytest.raises(NotLeaderOrFollowerError):  # never loaded within the request timeout
                await service.append_request(0, tombstone)
            started = trio.current_time()

            async def load_later() -> None:
                await trio.sleep(1)
                release.set()
            nursery.start_soon(load_later)
            code, _ = await service.append_request(0, tombstone)  # loaded after 1 s, then written
            assert trio.current_time() - started == pytest.approx(1, abs=0.05)
            assert code == 0 and service.replicas.partition.appended == 1
            nursery.cancel_scope.cancel()

    run(test)


def test_schedules_are_appended_earliest_first_and_indexed_batch_by_batch():
    async def allocate() -> int:
        return 7

    async def test() -> None:
        service = make_service(allocate)
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            service.become_leader(0, 1)
            runner = service.runners[0]
            await runner.loaded.wait()
            now = int(trio.current_time() * 1000)
            dues = [now + 60_000 - (i // 2) * 10 for i in range(1200)]  # later first, pairs due together
            records = [DelayedRecord(i.to_bytes(16, "big"), ("t", 0), due, 0, None, b"v", ())
                       for i, due in enumerate(dues)]
            indexed_after_first_batch = []
            real_append = service.log.append

            async def watch(partition, entries, appended):
                def spy(first, offsets):
                    appended(first, offsets)
                    indexed_after_first_batch.append(len(runner.index))
                return await real_append(partition, entries, spy)
            service.log.append = watch
            assert await runner.append_schedules(records) == 0
            assert service.replicas.partition.appended == 3  # batches of at most 500 records
            assert indexed_after_first_batch == [500, 1000, 1200]
            in_offset_order = sorted(runner.index.items.values(), key=lambda p: p.offset)
            assert [p.due_ms for p in in_offset_order] == sorted(dues)
            ties = [int.from_bytes(p.id, "big") for p in in_offset_order[:2]]
            assert ties == [1198, 1199]  # equal due times keep the order they came in
            nursery.cancel_scope.cancel()

    run(test)
