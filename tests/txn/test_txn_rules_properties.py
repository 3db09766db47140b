"""Property tests for the transaction coordinator's rules: random request sequences from current,
stale and foreign producers, with failing appends, timeouts and expiration, through the
in-memory shell. Every transition is checked by the metadata itself (an illegal one raises)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from txn_shell import Shell

from kbroker.errors import ErrorCode as E
from kbroker.txn import coordinator_rules as rules
from kbroker.txn.metadata import MAX_EPOCH, TransactionMetadata
from kbroker.txn.state import TransactionState as S

TIDS = ["a", "a", "a", "b"]  # mostly one id, so its transactions go far
PARTS = [("t", 0), ("t", 1), ("u", 0)]
WHO = st.sampled_from(["current"] * 6 + ["stale", "foreign"])

ops = st.one_of(
    st.tuples(st.just("init"), st.sampled_from(TIDS), st.sampled_from(["none", "current", "stale"]),
              st.sampled_from([1000, 60_000, 60_000, 0])),
    st.tuples(st.just("add"), st.sampled_from(TIDS), WHO, st.sets(st.sampled_from(PARTS), min_size=1)),
    st.tuples(st.just("offsets"), st.sampled_from(TIDS), WHO, st.sampled_from(["g1", "g2"])),
    st.tuples(st.just("end"), st.sampled_from(TIDS), WHO, st.booleans()),
    st.tuples(st.just("add"), st.sampled_from(TIDS), WHO, st.sets(st.sampled_from(PARTS), min_size=1)),
    st.tuples(st.just("end"), st.sampled_from(TIDS), WHO, st.booleans()),
    st.tuples(st.just("markers"), st.sampled_from(TIDS)),
    st.tuples(st.just("cycle"), st.sampled_from(TIDS), st.booleans()),
    st.tuples(st.just("tick"), st.sampled_from([1, 999, 5000, 8 * 24 * 3600 * 1000])),
    st.tuples(st.just("timeouts")),
    st.tuples(st.just("expire")),
    st.tuples(st.just("fail"), st.sampled_from([E.not_enough_replicas, E.not_leader_or_follower])),
)

persisted = ("producer_id", "producer_epoch", "state", "partitions", "txn_timeout_ms",
             "txn_start_timestamp", "txn_last_update_timestamp")


def _client_id(known: dict, tid: str, who: str) -> tuple[int, int]:
    pid, epoch = known.get(tid, (1, 0))
    if who == "stale":
        return pid, epoch - 1
    if who == "foreign":
        return pid + 100_000, epoch
    return pid, epoch


def _run(sh: Shell, known: dict, op: tuple, fail_ok: bool) -> None:
    kind, before = op[0], dict(sh.cache)
    if kind == "cycle":  # a whole transaction by the current producer, so many complete
        _, tid, commit = op
        for step in (("init", tid, "current", 60_000), ("add", tid, "current", {PARTS[0]}),
                     ("end", tid, "current", commit), ("markers", tid)):
            _run(sh, known, step, fail_ok)
        return
    if kind == "init":
        _, tid, exp, timeout = op
        expected = None if exp == "none" or tid not in known else _client_id(known, tid, exp)
        d = rules.init_producer_id(sh.cache.get(tid), tid, timeout, expected, allocate_producer_id=sh.allocate,
                                   config=sh.config, coordinator_epoch=sh.coordinator_epoch, now_ms=sh.now)
        old = sh.cache.get(tid)
        if d.is_epoch_fence:
            # fencing always bumps the epoch past every epoch a client was given
            assert d.write.producer_epoch > known.get(tid, (0, -1))[1]
            assert d.write.producer_epoch >= old.producer_epoch
            assert d.write.state is S.PREPARE_ABORT and d.error is E.concurrent_transactions
        if sh.run(tid, d) is E.none:
            assert 0 <= d.producer_epoch < MAX_EPOCH
            if old is not None and old.producer_id == d.producer_id:
                assert d.producer_epoch >= old.producer_epoch
            elif old is not None and old.producer_epoch >= 0:
                assert d.producer_epoch == 0  # a rotated id starts again at 0
            known[tid] = (d.producer_id, d.producer_epoch)
    elif kind in ("add", "offsets"):
        _, tid, who, what = op
        pid, epoch = _client_id(known, tid, who)
        if kind == "add":
            d = rules.add_partitions(sh.cache.get(tid), tid, pid, epoch, what, now_ms=sh.now)
        else:
            d = rules.add_offsets(sh.cache.get(tid), tid, pid, epoch, what, config=sh.config, now_ms=sh.now)
        err = sh.run(tid, d)
        if who != "current":
            assert err in (E.producer_fenced, E.invalid_producer_id_mapping)
    elif kind == "end":
        _, tid, who, commit = op
        pid, epoch = _client_id(known, tid, who)
        err = sh.run(tid, rules.end_txn(sh.cache.get(tid), tid, pid, epoch, commit, now_ms=sh.now))
        if err is E.none and tid not in sh.in_flight:
            # a completed EndTxn answered again: same answer, nothing written, nothing changed
            state = sh.cache[tid]
            n = len(sh.log)
            again = rules.end_txn(state, tid, pid, epoch, commit, now_ms=sh.now)
            assert (again.error, again.write, again.metadata) == (E.none, None, None) and len(sh.log) == n
    elif kind == "markers":
        if op[1] in sh.in_flight:
            sh.write_markers(op[1])
    elif kind == "tick":
        sh.now += op[1]
    elif kind == "timeouts":
        for md in rules.timed_out_transactions(sh.cache.values(), sh.now):
            d = rules.abort_timed_out(sh.cache[md.transactional_id], md.producer_id, now_ms=sh.now)
            if d is None:  # only at epoch Short.MaxValue, where Kafka cannot fence either
                assert md.producer_epoch == MAX_EPOCH
                continue
            assert d.write.producer_epoch > md.producer_epoch or md.has_failed_epoch_fence
            sh.run(md.transactional_id, d)
    elif kind == "expire":
        for md in rules.expired_transactional_ids(sh.cache.values(), sh.now, sh.config):
            assert md.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
            sh.run(md.transactional_id, rules.expire(md))
            known.pop(md.transactional_id, None)
    elif kind == "fail" and fail_ok:
        sh.fail_next = op[1]
    for tid, md in sh.cache.items():
        if tid in before and before[tid].producer_id == md.producer_id:
            assert md.producer_epoch >= before[tid].producer_epoch  # epochs never go back
        if md.state is S.ONGOING:
            assert md.partitions and md.txn_start_timestamp >= 0
        if md.state is S.EMPTY:
            assert not md.partitions
        assert md.state not in (S.DEAD, S.PREPARE_EPOCH_FENCE)


def _start(first_epoch: int) -> Shell:
    sh = Shell()
    if first_epoch >= 0:  # an id loaded near epoch exhaustion, so rotations happen
        sh.cache["a"] = TransactionMetadata("a", 500, 60_000, sh.now, producer_epoch=first_epoch,
                                            state=S.COMPLETE_COMMIT, coordinator_epoch=sh.coordinator_epoch)
    return sh


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=60), st.sampled_from([-1, 0, MAX_EPOCH - 3, MAX_EPOCH - 2]))
def test_random_requests_keep_kafkas_invariants(script: list, first_epoch: int) -> None:
    sh, known = _start(first_epoch), {}
    for op in script:
        _run(sh, known, op, fail_ok=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(ops, max_size=60))
def test_the_log_replays_to_the_cache(script: list) -> None:
    """Without failed appends, replaying `__transaction_state` gives back every cached id."""
    sh, known = Shell(), {}
    for op in script:
        _run(sh, known, op, fail_ok=False)
    for tid in list(sh.in_flight):
        sh.write_markers(tid)
    loaded = rules.load_transactions(sh.log, coordinator_epoch=sh.coordinator_epoch)
    assert loaded.keys() == sh.cache.keys()
    for tid, md in loaded.items():
        fields = persisted
        if md.state is S.EMPTY:
            # Kafka writes -1 for an Empty id's start but keeps the last transaction's in memory
            fields = tuple(f for f in persisted if f != "txn_start_timestamp")
        assert [getattr(md, f) for f in fields] == [getattr(sh.cache[tid], f) for f in fields]
