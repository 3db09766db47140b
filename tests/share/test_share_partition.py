"""Example tests for kbroker.share.partition, one of Kafka's share-partition rules (KIP-932,
SharePartition.java) per test, plus kbroker's redelivery backoff. The clock is an argument:
every event gets its `now_ms`. The model-based property tests are in test_share_partition_model.py.
"""

from __future__ import annotations

import pytest

from kbroker.errors import ErrorCode
from kbroker.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    ArchivedRecords,
    ArchiveReason,
    InFlightCounts,
    LockRelease,
    PersisterStateBatch,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareSnapshot,
)

GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
LOCK = 30_000


def fresh(**config: int) -> SharePartition:
    return SharePartition.initial(0, ShareConfig(**config))


def states(sp: SharePartition) -> dict[int, tuple]:
    """offset -> (state, delivery count, holder) over the window."""
    out = {}
    for b in sp.batches:
        for o in range(b.first_offset, b.last_offset + 1):
            out[o] = (b.state, b.delivery_count, b.member_id)
    return out


def test_acquire_locks_new_records_for_the_member_with_delivery_count_1() -> None:
    sp, out = fresh().acquire("m1", 0, 9, 500, now_ms=1000)
    assert out.ok and out.acquired == (AcquiredRecords(0, 9, 1),)
    assert (sp.start_offset, sp.end_offset) == (0, 9)
    assert sp.batches[0].lock_deadline_ms == 1000 + LOCK
    assert states(sp) == {o: (RecordState.ACQUIRED, 1, "m1") for o in range(10)}
    assert sp.next_fetch_offset(1000) == 10


def test_acquire_takes_at_most_max_records_and_never_a_locked_record() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 4, 0)
    sp, out = sp.acquire("m2", 0, 9, 100, 0)  # the log read again from 0: 0..3 are m1's
    assert out.acquired == (AcquiredRecords(4, 9, 1),)
    _, out = sp.acquire("m3", 0, 9, 100, 0)
    assert out.acquired == ()


def test_lock_expiry_makes_records_available_and_redelivers_them_with_count_2() -> None:
    sp, _ = fresh().acquire("m1", 0, 4, 500, 0)
    sp, out = sp.expire(LOCK - 1)
    assert out.expired == () and sp.acquired_count == 5
    sp, out = sp.expire(LOCK)
    assert out.expired == (LockRelease(0, 4, "m1", 1),)
    assert states(sp) == {o: (RecordState.AVAILABLE, 1, None) for o in range(5)}
    assert sp.next_fetch_offset(LOCK) == 0
    sp, out = sp.acquire("m2", 0, 4, 500, LOCK + 5)
    assert out.acquired == (AcquiredRecords(0, 4, 2),)


def test_an_event_expires_due_locks_first_whoever_calls_expire() -> None:
    sp, _ = fresh().acquire("m1", 0, 4, 500, 0)
    sp, out = sp.acquire("m2", 0, 4, 500, LOCK)  # nobody called expire: the acquire does
    assert out.expired == (LockRelease(0, 4, "m1", 1),)
    assert out.acquired == (AcquiredRecords(0, 4, 2),)


def test_release_makes_records_available_for_redelivery() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, out = sp.acknowledge("m1", [(3, 5, [RELEASE])], 10)
    assert out.ok and out.archived == ()
    assert sp.next_fetch_offset(10) == 3
    sp, out = sp.acquire("m2", 3, 9, 500, 20)
    assert out.acquired == (AcquiredRecords(3, 5, 2),)
    assert states(sp)[4] == (RecordState.ACQUIRED, 2, "m2")


def test_reject_archives_for_good_and_reports_for_the_dead_letter_topic() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, out = sp.acknowledge("m1", [(0, 2, [REJECT])], 10)
    assert out.archived == (ArchivedRecords(0, 2, 1, ArchiveReason.REJECTED),)
    assert sp.start_offset == 3  # archived records are delivery-complete
    _, out = sp.acquire("m2", 0, 9, 500, 20)
    assert out.acquired == ()


def test_delivery_count_limit_archives_on_expiry_with_its_reason() -> None:
    sp = fresh(delivery_count_limit=2)
    sp, _ = sp.acquire("m1", 0, 1, 500, 0)
    sp, _ = sp.expire(LOCK)
    sp, out = sp.acquire("m2", 0, 1, 500, LOCK)
    assert out.acquired == (AcquiredRecords(0, 1, 2),)
    sp, out = sp.expire(2 * LOCK)
    assert out.expired == (LockRelease(0, 1, "m2", 2),)
    assert out.archived == (ArchivedRecords(0, 1, 2, ArchiveReason.DELIVERY_LIMIT),)
    assert sp.start_offset == 2 and sp.batches == ()
    _, out = sp.acquire("m3", 0, 1, 500, 2 * LOCK)
    assert out.acquired == ()  # never a third delivery


def test_release_at_the_delivery_limit_archives_instead() -> None:
    sp = fresh(delivery_count_limit=1)
    sp, _ = sp.acquire("m1", 0, 0, 500, 0)
    sp, out = sp.acknowledge("m1", [AcknowledgementBatch(0, 0, (RELEASE,))], 1)
    assert out.archived == (ArchivedRecords(0, 0, 1, ArchiveReason.DELIVERY_LIMIT),)
    assert sp.start_offset == 1


def test_renew_extends_the_lock_and_keeps_the_delivery_count() -> None:
    sp, _ = fresh().acquire("m1", 0, 4, 500, 0)
    sp, out = sp.acknowledge("m1", [(0, 4, [RENEW])], 20_000)
    assert out.ok and out.acquired == () and out.archived == ()
    assert sp.batches[0].lock_deadline_ms == 20_000 + LOCK
    sp, out = sp.expire(LOCK)
    assert out.expired == () and states(sp)[0] == (RecordState.ACQUIRED, 1, "m1")
    sp, out = sp.expire(20_000 + LOCK)
    assert out.expired == (LockRelease(0, 4, "m1", 1),)


def test_renew_of_a_lock_that_ran_out_is_invalid_record_state() -> None:
    sp, _ = fresh().acquire("m1", 0, 4, 500, 0)
    after, out = sp.acknowledge("m1", [(0, 4, [RENEW])], LOCK)
    assert out.error == ErrorCode.invalid_record_state and after is sp


def test_acknowledging_another_members_records_is_invalid_record_state_and_changes_nothing() -> None:
    sp, _ = fresh().acquire("m1", 0, 4, 500, 0)
    sp, _ = sp.acquire("m2", 0, 9, 500, 0)
    # the first batch alone would be fine: the request is all or nothing
    after, out = sp.acknowledge("m1", [(0, 4, [ACCEPT]), (5, 5, [ACCEPT])], 10)
    assert out.error == ErrorCode.invalid_record_state
    assert after is sp and out.acquired == out.archived == ()


@pytest.mark.parametrize(
    "batches",
    [
        [(5, 5, [ACCEPT])],  # AVAILABLE (released below)
        [(6, 6, [ACCEPT])],  # ARCHIVED (rejected below)
        [(8, 12, [ACCEPT])],  # past the end of the window
        [(20, 21, [ACCEPT])],  # never fetched
    ],
)
def test_acknowledging_records_not_acquired_is_invalid_record_state(batches) -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, _ = sp.acknowledge("m1", [(5, 5, [RELEASE]), (6, 6, [REJECT])], 1)
    after, out = sp.acknowledge("m1", batches, 2)
    assert out.error == ErrorCode.invalid_record_state and after is sp


@pytest.mark.parametrize(
    "batches",
    [
        [(4, 3, [ACCEPT])],  # first > last
        [(0, 3, [ACCEPT]), (3, 5, [ACCEPT])],  # overlapping
        [(4, 5, [ACCEPT]), (0, 1, [ACCEPT])],  # unordered
        [(0, 3, [ACCEPT, ACCEPT])],  # one type per offset, but not for every offset
        [(0, 3, [])],  # no type
        [(0, 0, [5])],  # no such type
        [(0, 1, [ACCEPT, -1])],
    ],
)
def test_malformed_acknowledgements_are_invalid_request(batches) -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    after, out = sp.acknowledge("m1", batches, 1)
    assert out.error == ErrorCode.invalid_request and after is sp


def test_shape_errors_are_reported_before_record_state_errors() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    _, out = sp.acknowledge("m2", [(0, 0, [ACCEPT]), (1, 1, [9])], 1)
    assert out.error == ErrorCode.invalid_request


def test_one_acknowledge_type_per_offset() -> None:
    sp, _ = fresh().acquire("m1", 10, 15, 500, 0)
    sp, out = sp.acknowledge("m1", [(10, 15, [ACCEPT, RELEASE, REJECT, GAP, RENEW, ACCEPT])], 7)
    assert out.archived == (ArchivedRecords(12, 12, 1, ArchiveReason.REJECTED),)
    assert sp.start_offset == 11
    assert states(sp) == {
        11: (RecordState.AVAILABLE, 1, None),
        12: (RecordState.ARCHIVED, 1, None),
        13: (RecordState.ARCHIVED, 1, None),
        14: (RecordState.ACQUIRED, 1, "m1"),
        15: (RecordState.ACKNOWLEDGED, 1, None),
    }
    assert sp.batch_at(14).lock_deadline_ms == 7 + LOCK


def test_gap_acknowledgements_archive_without_dead_lettering() -> None:
    sp, _ = fresh().acquire("m1", 0, 4, 500, 0)
    sp, out = sp.acknowledge("m1", [(0, 1, [GAP]), (2, 4, [ACCEPT])], 1)
    assert out.ok and out.archived == ()
    assert sp.start_offset == 5 and sp.batches == ()


def test_start_offset_advances_over_the_leading_acknowledged_and_archived_records() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, _ = sp.acknowledge("m1", [(3, 5, [ACCEPT])], 1)
    assert sp.start_offset == 0  # 0..2 are still in flight
    sp, _ = sp.acknowledge("m1", [(0, 1, [ACCEPT]), (2, 2, [REJECT])], 2)
    assert sp.start_offset == 6
    assert sp.lag(log_end_offset=10) == 4
    sp, _ = sp.acknowledge("m1", [(6, 9, [ACCEPT])], 3)
    assert (sp.start_offset, sp.end_offset, sp.batches) == (10, 9, ())
    assert sp.snapshot() == ShareSnapshot(10, ())


def test_acknowledgements_below_the_start_offset_are_skipped() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, _ = sp.acknowledge("m1", [(0, 4, [ACCEPT])], 1)
    after, out = sp.acknowledge("m1", [(0, 4, [REJECT])], 2)  # a retried request
    assert out.ok and after is sp
    sp, out = sp.acknowledge("m1", [(3, 6, [REJECT])], 3)  # straddling the start offset
    assert out.archived == (ArchivedRecords(5, 6, 1, ArchiveReason.REJECTED),)


def test_redelivery_backoff_doubles_per_delivery_up_to_the_maximum() -> None:
    cfg = ShareConfig(redelivery_backoff_ms=100, redelivery_backoff_max_ms=350, delivery_count_limit=10)
    assert [cfg.backoff_ms(n) for n in range(1, 6)] == [100, 200, 350, 350, 350]
    sp = SharePartition.initial(0, cfg)
    now = 0
    for count, backoff in [(1, 100), (2, 200), (3, 350), (4, 350)]:
        sp, out = sp.acquire("m1", 0, 0, 10, now)
        assert out.acquired == (AcquiredRecords(0, 0, count),)
        now += 10
        sp, _ = sp.acknowledge("m1", [(0, 0, [RELEASE])], now)
        assert sp.batches[0].available_at_ms == now + backoff
        assert sp.next_event_ms(now) == now + backoff
        _, out = sp.acquire("m2", 0, 0, 10, now + backoff - 1)
        assert out.acquired == ()  # still backing off
        assert sp.next_fetch_offset(now + backoff - 1) == 1
        now += backoff


def test_backoff_after_lock_expiry_counts_from_the_deadline() -> None:
    sp = SharePartition.initial(0, ShareConfig(record_lock_duration_ms=1000, redelivery_backoff_ms=500))
    sp, _ = sp.acquire("m1", 0, 0, 10, 0)
    sp, out = sp.expire(1200)  # noticed late
    assert out.expired and sp.batches[0].available_at_ms == 1500
    assert not sp.acquire("m2", 0, 0, 10, 1499)[1].acquired
    assert sp.acquire("m2", 0, 0, 10, 1500)[1].acquired == (AcquiredRecords(0, 0, 2),)


def test_a_backed_off_record_is_skipped_and_newer_records_are_acquired() -> None:
    sp = SharePartition.initial(0, ShareConfig(redelivery_backoff_ms=1000))
    sp, _ = sp.acquire("m1", 0, 2, 10, 0)
    sp, _ = sp.acknowledge("m1", [(0, 0, [RELEASE]), (1, 2, [ACCEPT])], 1)
    assert sp.next_fetch_offset(1) == 3
    sp, out = sp.acquire("m1", 0, 5, 10, 1)
    assert out.acquired == (AcquiredRecords(3, 5, 1),)
    assert sp.start_offset == 0  # the backed-off record holds the start


def test_the_window_never_grows_past_max_record_locks() -> None:
    sp, out = fresh(max_record_locks=5).acquire("m1", 0, 9, 500, 0)
    assert out.acquired == (AcquiredRecords(0, 4, 1),)
    assert not sp.can_acquire(0)
    _, out = sp.acquire("m2", 5, 9, 500, 0)
    assert out.acquired == ()
    sp, _ = sp.acknowledge("m1", [(1, 4, [ACCEPT])], 1)
    _, out = sp.acquire("m2", 5, 9, 500, 1)
    assert out.acquired == ()  # offset 0 is still in flight: the window is 0..4 already
    sp, _ = sp.acknowledge("m1", [(0, 0, [ACCEPT])], 2)
    assert sp.can_acquire(2)
    _, out = sp.acquire("m2", 5, 20, 500, 2)
    assert out.acquired == (AcquiredRecords(5, 9, 1),)


def test_available_records_inside_the_window_go_first_then_new_ones() -> None:
    sp, _ = fresh().acquire("m1", 0, 5, 500, 0)
    sp, _ = sp.acknowledge("m1", [(1, 1, [RELEASE]), (3, 4, [RELEASE])], 1)
    _, out = sp.acquire("m2", 0, 9, 2, 2)
    assert out.acquired == (AcquiredRecords(1, 1, 2), AcquiredRecords(3, 3, 2))
    sp, out = sp.acquire("m2", 0, 9, 4, 2)
    assert out.acquired == (AcquiredRecords(1, 1, 2), AcquiredRecords(3, 4, 2), AcquiredRecords(6, 6, 1))


def test_offsets_missing_from_the_log_between_the_window_and_new_records_are_archived() -> None:
    sp, _ = fresh().acquire("m1", 0, 4, 500, 0)
    sp, out = sp.acquire("m2", 8, 9, 500, 0)  # 5..7 compacted away
    assert out.acquired == (AcquiredRecords(8, 9, 1),) and out.archived == ()
    assert states(sp)[5] == (RecordState.ARCHIVED, 0, None)
    sp, _ = sp.acknowledge("m1", [(0, 4, [ACCEPT])], 1)
    assert sp.start_offset == 8


def test_an_empty_window_restarts_at_the_first_record_the_log_returns() -> None:
    sp, out = SharePartition.initial(100).acquire("m1", 130, 131, 500, 0)
    assert out.acquired == (AcquiredRecords(130, 131, 1),)
    assert sp.start_offset == 130


def test_release_member_frees_only_that_members_locks() -> None:
    sp, _ = fresh(redelivery_backoff_ms=50).acquire("m1", 0, 2, 500, 0)
    sp, _ = sp.acquire("m2", 0, 5, 500, 0)
    sp, out = sp.release_member("m1", 10)
    assert out.released == (LockRelease(0, 2, "m1", 1),)
    assert states(sp)[0] == (RecordState.AVAILABLE, 1, None) and sp.batches[0].available_at_ms == 60
    assert states(sp)[3] == (RecordState.ACQUIRED, 1, "m2")
    after, out = sp.release_member("m9", 10)
    assert after is sp and out.released == ()


def test_snapshot_writes_acquired_records_as_available_and_restore_drops_locks() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, _ = sp.acknowledge("m1", [(2, 3, [ACCEPT]), (4, 4, [REJECT]), (5, 5, [RELEASE])], 1)
    snap = sp.snapshot()
    assert snap == ShareSnapshot(
        0,
        (PersisterStateBatch(0, 1, 0, 1), PersisterStateBatch(2, 3, 2, 1), PersisterStateBatch(4, 4, 4, 1),
         PersisterStateBatch(5, 9, 0, 1)),
    )
    restored = SharePartition.restore(snap, sp.config)
    assert restored.acquired_count == 0 and restored.snapshot() == snap
    _, out = restored.acquire("m2", 0, 9, 500, 5)
    assert out.acquired == (AcquiredRecords(0, 1, 2), AcquiredRecords(5, 9, 2))


def test_a_restored_record_at_the_delivery_limit_is_archived_not_delivered() -> None:
    snap = ShareSnapshot(0, (PersisterStateBatch(0, 1, 0, 3), PersisterStateBatch(2, 3, 0, 1)))
    sp = SharePartition.restore(snap, ShareConfig(delivery_count_limit=3))
    sp, out = sp.acquire("m1", 0, 3, 500, 0)
    assert out.archived == (ArchivedRecords(0, 1, 3, ArchiveReason.DELIVERY_LIMIT),)
    assert out.acquired == (AcquiredRecords(2, 3, 2),)
    assert sp.start_offset == 2


def test_restore_refuses_a_batch_below_the_start_offset_or_out_of_order() -> None:
    with pytest.raises(ValueError):
        SharePartition.restore(ShareSnapshot(5, (PersisterStateBatch(3, 6, 0, 1),)))
    with pytest.raises(ValueError):
        SharePartition.restore(ShareSnapshot(0, (PersisterStateBatch(4, 6, 0, 1), PersisterStateBatch(2, 3, 0, 1))))
    with pytest.raises(ValueError):
        SharePartition.restore(ShareSnapshot(0, (PersisterStateBatch(0, 0, 3, 1),)))


def test_restore_moves_the_start_over_a_delivery_complete_head() -> None:
    snap = ShareSnapshot(0, (PersisterStateBatch(0, 4, 2, 1), PersisterStateBatch(5, 6, 0, 1)))
    sp = SharePartition.restore(snap)
    assert (sp.start_offset, sp.end_offset) == (5, 6)


def test_reset_start_needs_every_lock_released() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    after, out = sp.reset_start(100, 1)
    assert out.error == ErrorCode.non_empty_group and after is sp
    sp, _ = sp.release_member("m1", 2)
    sp, out = sp.reset_start(3, 2)
    assert out.ok and (sp.start_offset, sp.end_offset, sp.batches) == (3, 2, ())
    sp, out = sp.acquire("m1", 0, 5, 500, 3)  # rewinding re-delivers from the new start
    assert out.acquired == (AcquiredRecords(3, 5, 1),)


def test_log_start_moving_archives_what_retention_deleted() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, _ = sp.acknowledge("m1", [(0, 3, [RELEASE])], 1)
    sp, out = sp.advance_log_start(6, 2)
    assert out.ok and out.archived == ()
    assert (sp.start_offset, sp.end_offset) == (6, 9)
    sp, out = sp.acknowledge("m1", [(4, 7, [ACCEPT])], 3)  # 4..5 are gone: skipped
    assert out.ok and sp.start_offset == 8
    sp, _ = sp.advance_log_start(50, 4)
    assert (sp.start_offset, sp.end_offset, sp.batches) == (50, 49, ())


def test_lag_counts_and_next_event() -> None:
    sp, _ = fresh().acquire("m1", 0, 9, 500, 0)
    sp, _ = sp.acknowledge("m1", [(2, 3, [ACCEPT]), (4, 4, [REJECT]), (5, 5, [RELEASE])], 100)
    assert sp.counts() == InFlightCounts(available=1, acquired=6, acknowledged=2, archived=1)
    assert sp.lag(log_end_offset=15) == 15 - 3
    assert sp.lag(log_end_offset=0) == 0
    assert sp.next_event_ms(100) == LOCK
    assert SharePartition.initial(0).next_event_ms(0) is None


def test_config_from_kafka_keys() -> None:
    cfg = ShareConfig.from_configs({
        "group.share.record.lock.duration.ms": "15000",
        "group.share.partition.max.record.locks": 200,
        "share.redelivery.backoff.ms": "10",
        "unrelated": "x",
    })
    assert cfg == ShareConfig(record_lock_duration_ms=15000, max_record_locks=200, redelivery_backoff_ms=10)
    with pytest.raises(ValueError):
        ShareConfig(delivery_count_limit=0)


def test_acknowledge_types_carry_kafkas_codes() -> None:
    assert [int(t) for t in AcknowledgeType] == [0, 1, 2, 3, 4]
    assert [int(s) for s in RecordState] == [0, 1, 2, 4]
