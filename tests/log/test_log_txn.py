"""Transactions in the log: LSO, the `.txnindex` of aborted transactions, markers' validation,
truncation and recovery (Kafka's UnifiedLog, ProducerStateManager and LogSegment behaviour)."""

import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_test_helpers import PROFILE, Clock, make_batch

from kbroker.errors import InvalidProducerEpochError, InvalidTxnStateError, TransactionCoordinatorFencedError
from kbroker.log.config import LogConfig
from kbroker.log.log import Log
from kbroker.log.txn_index import AbortedTxn
from kbroker.wire.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.records import iter_batch_headers, validate_batches

SMALL = LogConfig(segment_bytes=700, index_interval_bytes=128, file_delete_delay_ms=0)


def open_log(tmp_path, **kw):
    return Log.open(tmp_path / "topic-0", SMALL, now_ms=Clock(), **kw)


class Producer:
    def __init__(self, pid, epoch=0):
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def data(self, log, n=2, txn=True):
        buf = make_batch(n, pid=self.pid, epoch=self.epoch, seq=self.seq, txn=txn)
        info = log.append_as_leader(buf, validate_batches(buf), leader_epoch=0)
        self.seq += n
        return info

    def marker(self, log, type_, coordinator_epoch=0, epoch=None):
        buf = bytearray(build_end_txn_marker_batch(EndTransactionMarker(type_, coordinator_epoch), producer_id=self.pid,
                                                   producer_epoch=self.epoch if epoch is None else epoch,
                                                   timestamp=1_000))
        return log.append_as_leader(buf, validate_batches(buf, from_client=False), leader_epoch=0)


def hw_to_end(log):
    log.update_high_watermark(log.log_end_offset)


def test_lso_follows_open_transactions_and_the_high_watermark(tmp_path):
    log = open_log(tmp_path)
    a, b = Producer(1), Producer(2)
    Producer(3).data(log, txn=False)  # 0-1: idempotent, no transaction
    a.data(log)  # 2-3
    b.data(log)  # 4-5
    hw_to_end(log)
    assert log.last_stable_offset == 2
    a.marker(log, COMMIT)  # 6
    assert log.last_stable_offset == 2  # the marker is above the high watermark: still unstable
    hw_to_end(log)
    assert log.last_stable_offset == 4
    b.marker(log, ABORT)  # 7
    hw_to_end(log)
    assert log.last_stable_offset == log.log_end_offset == 8
    assert log.collect_aborted_transactions(0, 8) == [(2, 4)]
    assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(2, 4, 7, 8)]


def test_abort_entry_records_the_lso_of_other_open_transactions(tmp_path):
    log = open_log(tmp_path)
    a, b = Producer(1), Producer(2)
    a.data(log)  # 0-1
    b.data(log)  # 2-3
    a.marker(log, ABORT)  # 4
    assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 4, 2)]
    hw_to_end(log)
    assert log.last_stable_offset == 2


def test_marker_validation(tmp_path):
    log = open_log(tmp_path)
    a = Producer(1, epoch=3)
    a.data(log)
    with pytest.raises(InvalidProducerEpochError):
        a.marker(log, COMMIT, epoch=2)
    a.marker(log, COMMIT, coordinator_epoch=5)
    a.data(log)
    with pytest.raises(TransactionCoordinatorFencedError):
        a.marker(log, ABORT, coordinator_epoch=4)
    with pytest.raises(InvalidTxnStateError):
        a.data(log, txn=False)
    end = log.log_end_offset
    a.marker(log, ABORT, coordinator_epoch=5)
    assert log.log_end_offset == end + 1
    assert log.producer_state.last_entry(1).coordinator_epoch == 5


def test_marker_without_data_completes_nothing(tmp_path):
    log = open_log(tmp_path)
    Producer(1).marker(log, ABORT)
    hw_to_end(log)
    assert log.collect_aborted_transactions(0, 10) == []
    assert log.last_stable_offset == 1


def test_epoch_bump_marker_fences_the_old_epoch(tmp_path):
    log = open_log(tmp_path)
    a = Producer(1)
    a.data(log)
    a.marker(log, ABORT, epoch=1)  # the coordinator aborts with a bumped epoch
    assert log.producer_state.last_entry(1).producer_epoch == 1
    with pytest.raises(InvalidProducerEpochError):
        a.data(log)


def test_ongoing_transaction_survives_snapshot_and_recovery(tmp_path):
    log = open_log(tmp_path)
    a, b = Producer(1), Producer(2)
    a.data(log)
    b.data(log)
    b.marker(log, ABORT)
    log.close()
    again = open_log(tmp_path, high_watermark=5)
    assert again.last_stable_offset == 0
    assert again.producer_state.last_entry(1).current_txn_first_offset == 0
    assert again.collect_aborted_transactions(0, 5) == [(2, 2)]
    again.close()
    for p in (tmp_path / "topic-0").glob("*.snapshot"):
        p.unlink()
    (tmp_path / "topic-0" / "00000000000000000000.txnindex").write_bytes(b"junk")
    third = open_log(tmp_path, high_watermark=5)  # rebuilt from the batches
    assert third.last_stable_offset == 0
    assert third.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(2, 2, 4, 0)]


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path):
    log = open_log(tmp_path)
    a = Producer(1)
    a.data(log)  # 0-1
    a.marker(log, ABORT)  # 2
    a.data(log)  # 3-4
    a.marker(log, ABORT)  # 5
    log.truncate_to(5)
    assert log.collect_aborted_transactions(0, 10) == [(1, 0)]
    assert log.producer_state.first_undecided_offset() == 3
    hw_to_end(log)
    assert log.last_stable_offset == 3


def test_follower_append_indexes_aborts(tmp_path):
    leader = open_log(tmp_path / "l")
    a = Producer(1)
    a.data(leader)
    a.marker(leader, ABORT)
    follower = open_log(tmp_path / "f")
    data = bytearray(leader.read(0, 10**6).read_bytes())
    follower.append_as_follower(data, validate_batches(data, from_client=False))
    assert follower.collect_aborted_transactions(0, 3) == [(1, 0)]


# --- reads for read_committed (Kafka's LocalLog.read with includeAbortedTxns) ---------------------------

def test_read_carries_the_aborted_transactions_of_the_batches_read(tmp_path):
    log = open_log(tmp_path)
    a, b = Producer(1), Producer(2)
    a.data(log)  # 0-1
    b.data(log)  # 2-3
    a.marker(log, COMMIT)  # 4
    b.marker(log, ABORT)  # 5
    Producer(3).data(log, txn=False)  # 6-7
    hw_to_end(log)
    assert log.read(0, 10**6, include_aborted_txns=True).aborted_transactions == [(2, 2)]
    assert log.read(0, 10**6).aborted_transactions is None  # read_uncommitted does not ask
    assert log.read(6, 10**6, include_aborted_txns=True).aborted_transactions == []  # aborted before the range
    # only the first batch fits: the range ends before the aborted transaction starts
    first_only = log.read(0, 1, include_aborted_txns=True)
    assert first_only.size and first_only.aborted_transactions == []
    assert log.read(2, 1, include_aborted_txns=True).aborted_transactions == [(2, 2)]
    # nothing read: an empty list, not None (Kafka's emptyFetchDataInfo)
    assert log.read(8, 10**6, include_aborted_txns=True).aborted_transactions == []
    assert log.read(0, 10**6, max_offset=0, include_aborted_txns=True).aborted_transactions == []
    assert log.read(0, 1, min_one_message=False, include_aborted_txns=True).aborted_transactions == []


def test_an_abort_in_a_later_segment_is_found_from_the_segment_read(tmp_path):
    log = open_log(tmp_path)
    a, plain = Producer(1), Producer(2)
    a.data(log)  # 0-1: the transaction starts in the first segment...
    while len(log.segments) < 3:
        plain.data(log, 4, txn=False)
    a.marker(log, ABORT)  # ...and its marker, so its index entry, lands in the third
    hw_to_end(log)
    assert log.segments[0].txn_index.all_aborted_txns() == []
    info = log.read(0, 10**6, include_aborted_txns=True)
    assert info.records[0].fd == log.segments[0].fd  # one segment read
    assert info.aborted_transactions == [(1, 0)]
    later = log.segments[1].base_offset
    assert log.read(later, 10**6, include_aborted_txns=True).aborted_transactions == [(1, 0)]  # still open there


# --- properties ---------------------------------------------------------------------------------------

ops = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["data", "commit", "abort", "plain"]),
                         st.integers(1, 4)), max_size=40)


class Model:
    """Expected open transactions and aborted ones, from the operations alone."""

    def __init__(self):
        self.open: dict[int, int] = {}  # pid -> first offset
        self.aborted: list[tuple[int, int, int]] = []  # (pid, first, marker offset)


def run(log, script):
    producers = {pid: Producer(pid + 1) for pid in range(4)}
    plain = Producer(99)
    model = Model()
    for pid, op, n in script:
        p = producers[pid]
        offset = log.log_end_offset
        if op == "data":
            p.data(log, n)
            model.open.setdefault(p.pid, offset)
        elif op == "plain":
            plain.data(log, n, txn=False)
        else:
            p.marker(log, ABORT if op == "abort" else COMMIT)
            first = model.open.pop(p.pid, None)
            if first is not None and op == "abort":
                model.aborted.append((p.pid, first, offset))
        if n % 2:
            hw_to_end(log)
    hw_to_end(log)
    return model


def check(log, model):
    end = log.log_end_offset
    assert log.last_stable_offset == min(model.open.values(), default=end)
    for start in range(0, end + 1, 3):
        for upper in range(start, end + 2, 4):
            expected = [(pid, first) for pid, first, last in model.aborted if last >= start and first < upper]
            assert log.collect_aborted_transactions(start, upper) == expected
    for start in range(0, end + 1):  # a read_committed read: the aborts overlapping the batches it returns
        info = log.read(start, 200, max_offset=log.last_stable_offset, include_aborted_txns=True)
        data = info.read_bytes()
        last_read = max((h.last_offset for _, h in iter_batch_headers(data)), default=None)
        expected = [] if last_read is None else \
            [(pid, first) for pid, first, last in model.aborted if last >= start and first <= last_read]
        assert info.aborted_transactions == expected


@PROFILE
@given(script=ops, cut=st.integers(0, 200))
def test_random_transactions_match_the_model(tmp_path_factory, script, cut):
    tmp_path = tmp_path_factory.mktemp("txn")
    log = open_log(tmp_path)
    model = run(log, script)
    check(log, model)
    log.flush()
    log.close()
    # Reopening after a crash recovers every segment and rebuilds the indexes from the batches.
    again = open_log(tmp_path, recovery_point=0, high_watermark=log.log_end_offset)
    check(again, model)
    # Truncation: entries above the point go; the transactions they ended are open again.
    point = min(cut, again.log_end_offset)
    again.truncate_to(point)
    end = again.log_end_offset
    prefix = Model()
    for pid, first, last in model.aborted:
        if last < end:
            prefix.aborted.append((pid, first, last))
    fresh = open_log(tmp_path / "replay")
    replayed = run(fresh, _prefix_script(script, end))
    assert [(a, b, c) for a, b, c in replayed.aborted] == prefix.aborted
    hw_to_end(again)
    check(again, replayed)
    again.close()
    fresh.close()
    shutil.rmtree(tmp_path)


def _prefix_script(script, end):
    """The operations whose batches lie wholly below `end` (batch sizes: data/plain n, marker 1)."""
    out, offset = [], 0
    for pid, op, n in script:
        size = n if op in ("data", "plain") else 1
        if offset + size > end:
            break
        out.append((pid, op, n))
        offset += size
    return out


def test_index_goes_with_its_segment(tmp_path):
    log = open_log(tmp_path)
    a = Producer(1)
    a.data(log)
    a.marker(log, ABORT)
    first = log.segments[0].txn_index.path
    assert first.exists()
    while len(log.segments) < 3:
        a.data(log, 4, txn=False)
    hw_to_end(log)
    log.maybe_increment_log_start_offset(log.segments[1].base_offset)
    log.delete_old_segments()
    assert not first.exists()
    assert not list((tmp_path / "topic-0").glob("*.deleted"))
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []


def test_cleaner_keeps_aborted_transactions(tmp_path):
    from kbroker.log.cleaner import Cleaner, LogToClean

    cfg = SMALL.with_(cleanup_policy="compact", segment_bytes=400)
    log = Log.open(tmp_path / "t-0", cfg, now_ms=Clock())
    a, other = Producer(1), Producer(2)
    a.data(log)  # 0-1
    a.marker(log, ABORT)  # 2
    while len(log.segments) < 4:
        other.data(log, 3, txn=False)
    hw_to_end(log)
    before = log.collect_aborted_transactions(0, log.log_end_offset)
    assert before == [(1, 0)]
    Cleaner().clean(LogToClean.of(log, None, 10**9), 10**9)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == before
    log.close()
    again = Log.open(tmp_path / "t-0", cfg, now_ms=Clock(), cleaned=True, high_watermark=10**6)
    assert again.collect_aborted_transactions(0, again.log_end_offset) == before
