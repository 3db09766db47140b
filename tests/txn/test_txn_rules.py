"""Tests for kbroker.txn.coordinator_rules: each request's answers and writes as Kafka 3.9 gives them,
driven through a small in-memory shell with a fake clock."""

from __future__ import annotations

import pytest
from txn_shell import Shell

from kbroker.errors import ErrorCode as E
from kbroker.errors import KafkaError
from kbroker.group.coordinator import partition_for as group_partition_for
from kbroker.txn import coordinator_rules as rules
from kbroker.txn.log_format import decode_value
from kbroker.txn.metadata import TransactionMetadata
from kbroker.txn.state import TransactionState as S

TP = ("orders", 0)


def init(sh: Shell, tid: str = "t", timeout: int = 60_000, expected=None) -> tuple[E, int, int]:
    d = rules.init_producer_id(sh.cache.get(tid), tid, timeout, expected, allocate_producer_id=sh.allocate,
                               config=sh.config, coordinator_epoch=sh.coordinator_epoch, now_ms=sh.now)
    err = sh.run(tid, d)
    return (err, d.producer_id, d.producer_epoch) if err is E.none else (err, -1, -1)


def add(sh: Shell, pid: int, epoch: int, parts=(TP,), tid: str = "t") -> E:
    return sh.run(tid, rules.add_partitions(sh.cache.get(tid), tid, pid, epoch, parts, now_ms=sh.now))


def end(sh: Shell, pid: int, epoch: int, commit: bool, tid: str = "t") -> E:
    return sh.run(tid, rules.end_txn(sh.cache.get(tid), tid, pid, epoch, commit, now_ms=sh.now))


def test_new_id_gets_a_producer_id_and_epoch_0_written_empty() -> None:
    sh = Shell()
    assert init(sh) == (E.none, 1001, 0)
    md = sh.cache["t"]
    assert (md.state, md.producer_epoch, md.pending_state, md.coordinator_epoch) == (S.EMPTY, 0, None, 5)
    value = decode_value(sh.log[-1][1])
    assert (value.producer_id, value.producer_epoch, value.state, value.partitions) == (1001, 0, S.EMPTY, None)
    assert init(sh) == (E.none, 1001, 1)
    assert sh.cache["t"].last_producer_epoch == -1  # no expected epoch: a new producer instance


def test_init_request_checks() -> None:
    sh = Shell()
    assert init(sh, timeout=0)[0] is E.invalid_transaction_timeout
    assert init(sh, timeout=sh.config.transaction_max_timeout_ms + 1)[0] is E.invalid_transaction_timeout
    assert init(sh, timeout=sh.config.transaction_max_timeout_ms)[0] is E.none
    assert init(sh, tid="")[0] is E.invalid_request
    assert init(sh, expected=(-1, 3))[0] is E.invalid_request
    d = rules.init_producer_id(None, None, 0, None, allocate_producer_id=sh.allocate, config=sh.config,
                               coordinator_epoch=0, now_ms=0)
    assert (d.error, d.producer_epoch, d.write) == (E.none, 0, None)  # idempotent producer

    def broken() -> int:
        raise KafkaError("no ids", E.coordinator_load_in_progress)

    d = rules.init_producer_id(None, "x", 1000, None, allocate_producer_id=broken, config=sh.config,
                               coordinator_epoch=0, now_ms=0)
    assert d.error is E.coordinator_load_in_progress


def test_a_failed_first_write_keeps_the_created_id_at_epoch_minus_1() -> None:
    sh = Shell()
    sh.fail_next = E.not_enough_replicas
    assert init(sh)[0] is E.coordinator_not_available
    assert (sh.cache["t"].producer_epoch, sh.cache["t"].pending_state) == (-1, None)
    assert init(sh) == (E.none, 1001, 0)


def test_add_partitions_and_its_errors() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    assert add(sh, pid, epoch, tid="other") is E.invalid_producer_id_mapping
    assert add(sh, pid + 1, epoch) is E.invalid_producer_id_mapping
    assert add(sh, pid, epoch + 1) is E.producer_fenced
    assert rules.error_for_version(24, 1, E.producer_fenced) is E.invalid_producer_epoch
    assert rules.error_for_version(24, 2, E.producer_fenced) is E.producer_fenced
    sh.now += 10
    assert add(sh, pid, epoch) is E.none
    md = sh.cache["t"]
    assert (md.state, md.partitions, md.txn_start_timestamp) == (S.ONGOING, {TP}, sh.now)
    n = len(sh.log)
    assert add(sh, pid, epoch) is E.none and len(sh.log) == n  # already in: no write
    sh.now += 10
    assert add(sh, pid, epoch, [("orders", 1)]) is E.none
    assert sh.cache["t"].partitions == {TP, ("orders", 1)}
    assert sh.cache["t"].txn_start_timestamp == sh.now - 10  # the transaction started with the first


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    d = rules.add_offsets(sh.cache["t"], "t", pid, epoch, "my-group", config=sh.config, now_ms=sh.now)
    assert sh.run("t", d) is E.none
    assert sh.cache["t"].partitions == {("__consumer_offsets", group_partition_for("my-group", 50))}


def test_commit_prepares_sends_markers_then_completes_and_retries_are_idempotent() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    add(sh, pid, epoch, [TP, ("orders", 3)])
    assert end(sh, pid, epoch, commit=True) is E.none
    assert sh.cache["t"].state is S.PREPARE_COMMIT
    assert sh.cache["t"].pending_state is S.COMPLETE_COMMIT  # while markers are out
    markers, complete = sh.in_flight["t"]
    assert (markers.producer_id, markers.producer_epoch, markers.coordinator_epoch, markers.commit) == (
        pid, epoch, 5, True)
    assert markers.partitions == {TP, ("orders", 3)}
    assert add(sh, pid, epoch) is E.concurrent_transactions
    assert end(sh, pid, epoch, commit=True) is E.concurrent_transactions
    assert init(sh)[0] is E.concurrent_transactions
    assert decode_value(sh.log[-1][1]).state is S.PREPARE_COMMIT
    assert sh.write_markers("t") is E.none
    md = sh.cache["t"]
    assert (md.state, md.partitions, md.pending_state) == (S.COMPLETE_COMMIT, frozenset(), None)
    n = len(sh.log)
    assert end(sh, pid, epoch, commit=True) is E.none and len(sh.log) == n
    assert end(sh, pid, epoch, commit=False) is E.invalid_txn_state
    assert sh.cache["t"] == md


def test_end_txn_errors() -> None:
    sh = Shell()
    assert end(sh, 1, 0, True) is E.invalid_producer_id_mapping
    _, pid, epoch = init(sh)
    assert end(sh, pid, epoch, True) is E.invalid_txn_state  # Empty
    assert end(sh, pid, epoch - 1, True) is E.producer_fenced
    assert end(sh, pid + 5, epoch, True) is E.invalid_producer_id_mapping
    add(sh, pid, epoch)
    assert end(sh, pid, epoch, commit=False) is E.none
    # markers are out (Complete pending): any EndTxn waits, whichever its direction
    assert end(sh, pid, epoch, commit=True) is E.concurrent_transactions
    assert end(sh, pid, epoch, commit=False) is E.concurrent_transactions
    # a Prepare state with nothing pending (just loaded): the other direction is refused
    loaded = rules.load_transactions(sh.log, coordinator_epoch=5)["t"]
    assert rules.end_txn(loaded, "t", pid, epoch, True, now_ms=sh.now).error is E.invalid_txn_state
    assert rules.end_txn(loaded, "t", pid, epoch, False, now_ms=sh.now).error is E.concurrent_transactions
    sh.write_markers("t")
    assert sh.cache["t"].state is S.COMPLETE_ABORT
    assert end(sh, pid, epoch, commit=True) is E.invalid_txn_state
    assert end(sh, pid, epoch, commit=False) is E.none


def test_init_fences_an_ongoing_transaction_by_aborting_it_under_a_bumped_epoch() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    add(sh, pid, epoch)
    assert init(sh) == (E.concurrent_transactions, -1, -1)
    md = sh.cache["t"]
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (S.PREPARE_ABORT, epoch + 1, -1)
    assert decode_value(sh.log[-1][1]).producer_epoch == epoch + 1
    assert sh.in_flight["t"][0].producer_epoch == epoch + 1 and not sh.in_flight["t"][0].commit
    assert end(sh, pid, epoch, commit=True) is E.producer_fenced  # the zombie
    assert init(sh)[0] is E.concurrent_transactions  # still completing
    sh.write_markers("t")
    assert init(sh) == (E.none, pid, epoch + 2)


def test_a_failed_fence_is_not_bumped_twice() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    add(sh, pid, epoch)
    sh.fail_next = E.not_leader_or_follower
    assert init(sh)[0] is E.not_coordinator
    md = sh.cache["t"]
    assert (md.state, md.producer_epoch, md.has_failed_epoch_fence, md.pending_state) == (
        S.ONGOING, epoch + 1, True, None)
    assert add(sh, pid, epoch) is E.producer_fenced  # the bumped epoch fences even unwritten
    assert init(sh)[0] is E.concurrent_transactions
    assert sh.cache["t"].producer_epoch == epoch + 1
    sh.write_markers("t")
    assert not sh.cache["t"].has_failed_epoch_fence


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    sh = Shell()
    sh.cache["t"] = TransactionMetadata("t", 77, 60_000, 0, producer_epoch=32766, state=S.COMPLETE_COMMIT,
                                     coordinator_epoch=5)
    assert init(sh) == (E.none, 1001, 0)
    md = sh.cache["t"]
    assert (md.last_producer_id, md.last_producer_epoch) == (77, -1)


def test_kip360_retries() -> None:
    sh = Shell()
    sh.cache["t"] = TransactionMetadata("t", 77, 60_000, 0, producer_epoch=32766, state=S.EMPTY, coordinator_epoch=5)
    assert init(sh, expected=(77, 32766)) == (E.none, 1001, 0)
    assert sh.cache["t"].last_producer_epoch == 32766
    # the producer missed the answer and retries with the old id: it gets the new one again
    assert init(sh, expected=(77, 32766)) == (E.none, 1001, 0)
    assert init(sh, expected=(1001, 0)) == (E.none, 1001, 1)
    assert sh.cache["t"].last_producer_epoch == 0
    assert init(sh, expected=(1001, 0)) == (E.none, 1001, 1)  # a retry: no second bump
    assert init(sh, expected=(1001, 7))[0] is E.producer_fenced
    assert init(sh, expected=(555, 1))[0] is E.producer_fenced
    assert rules.error_for_version(22, 3, E.producer_fenced) is E.invalid_producer_epoch
    assert rules.error_for_version(22, 4, E.producer_fenced) is E.producer_fenced


def test_timed_out_transactions_are_aborted_with_a_bumped_epoch() -> None:
    sh = Shell()
    _, pid, epoch = init(sh, timeout=1000)
    add(sh, pid, epoch)
    start = sh.now
    assert rules.timed_out_transactions(sh.cache.values(), start + 1000) == []
    sh.now = start + 1001
    [md] = rules.timed_out_transactions(sh.cache.values(), sh.now)
    d = rules.abort_timed_out(sh.cache["t"], md.producer_id, now_ms=sh.now)
    assert rules.abort_timed_out(sh.cache["t"], md.producer_id + 1, now_ms=sh.now) is None
    assert sh.run("t", d) is E.none
    assert (sh.cache["t"].state, sh.cache["t"].producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert rules.timed_out_transactions(sh.cache.values(), sh.now + 10**6) == []
    assert end(sh, pid, epoch, commit=True) is E.producer_fenced
    sh.write_markers("t")
    assert sh.cache["t"].state is S.COMPLETE_ABORT


def test_idle_ids_expire_with_a_tombstone() -> None:
    sh = Shell()
    _, pid, epoch = init(sh, tid="idle")
    _, pid2, epoch2 = init(sh, tid="busy")
    add(sh, pid2, epoch2, tid="busy")
    exp = sh.config.transactional_id_expiration_ms
    assert rules.expired_transactional_ids(sh.cache.values(), sh.now + exp - 1, sh.config) == []
    [md] = rules.expired_transactional_ids(sh.cache.values(), sh.now + exp, sh.config)
    assert md.transactional_id == "idle"
    d = rules.expire(md)
    assert d.write.to_log_value() is None
    assert sh.run("idle", d) is E.none
    assert "idle" not in sh.cache and sh.log[-1][1] is None
    loaded = rules.load_transactions(sh.log, coordinator_epoch=6)
    assert set(loaded) == {"busy"}


def test_a_failed_tombstone_keeps_the_id() -> None:
    sh = Shell()
    init(sh)
    sh.fail_next = E.request_timed_out
    assert sh.run("t", rules.expire(sh.cache["t"])) is E.coordinator_not_available
    assert (sh.cache["t"].state, sh.cache["t"].pending_state) == (S.EMPTY, None)


def test_coordinator_epoch_change_during_the_append_answers_not_coordinator() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    d = rules.add_partitions(sh.cache["t"], "t", pid, epoch, [TP], now_ms=sh.now)
    sh.coordinator_epoch = 6  # the partition was reloaded under a new leader epoch
    assert sh.run("t", d) is E.not_coordinator


def test_load_resumes_prepared_transactions() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    add(sh, pid, epoch)
    end(sh, pid, epoch, commit=True)
    loaded = rules.load_transactions(sh.log + [(b"\x00\x05junk", b"")], coordinator_epoch=9)
    md = loaded["t"]
    assert (md.state, md.partitions, md.coordinator_epoch, md.pending_state) == (S.PREPARE_COMMIT, {TP}, 9, None)
    [out] = rules.completions_after_load(loaded.values(), sh.now)
    assert out.markers.partitions == {TP} and out.markers.coordinator_epoch == 9 and out.markers.commit
    assert out.complete.state is S.COMPLETE_COMMIT


def test_verify_only_answers_without_change() -> None:
    sh = Shell()
    _, pid, epoch = init(sh)
    add(sh, pid, epoch)
    before = dict(sh.cache)
    assert rules.verify_partitions(sh.cache["t"], "t", pid, epoch, [TP, ("x", 1)]) == {
        TP: E.none, ("x", 1): E.transaction_abortable}
    assert rules.verify_partitions(sh.cache["t"], "t", pid, epoch + 1, [TP]) == {TP: E.producer_fenced}
    assert rules.verify_partitions(None, "t", pid, epoch, [TP]) == {TP: E.invalid_producer_id_mapping}
    assert rules.verify_partitions(sh.cache["t"], "", pid, epoch, [TP]) == {TP: E.invalid_request}
    end(sh, pid, epoch, commit=True)
    assert rules.verify_partitions(sh.cache["t"], "t", pid, epoch, [TP]) == {TP: E.concurrent_transactions}
    assert sh.cache.keys() == before.keys()


@pytest.mark.parametrize(("append", "answer"), [
    (E.not_enough_replicas_after_append, E.coordinator_not_available),
    (E.kafka_storage_error, E.not_coordinator),
    (E.record_list_too_large, E.unknown_server_error),
    (E.invalid_record, E.invalid_record),
])
def test_append_errors_map_as_kafkas(append: E, answer: E) -> None:
    assert rules.coordinator_error_for_append(append) is answer


def test_partition_for_is_javas_hash() -> None:
    assert rules.partition_for("my-txn", 50) == group_partition_for("my-txn", 50)
