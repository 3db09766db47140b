"""Transactional offset commits in the group coordinator, on a fake clock and a byte-level
`__consumer_offsets`: pending until the producer's marker, the order rule against plain commits,
the member checks of TxnOffsetCommit, groups kept while a transaction holds offsets, and a reload
from the log (real batches and control batches) that agrees with what the coordinator had."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from test_coordinator import Harness

from kbroker.errors import ErrorCode as E, InvalidProducerEpochError
from kbroker.group.coordinator import GroupCoordinator
from kbroker.group.metadata import OffsetAndMetadata
from kbroker.group.state import GroupState as S
from kbroker.wire.control import ABORT, COMMIT, EndTransactionMarker, build_end_txn_marker_batch
from kbroker.wire.internal_records import build_internal_batch, iter_internal_batches
from kbroker.wire.records import build_batch, parse_batch_header, set_base_offset

TP0, TP1 = ("t", 0), ("t", 1)


class ByteOffsetsLog:
    """`__consumer_offsets` partitions as byte logs of real batches, read back as from disk. A
    transactional commit is its producer's batch; `write_marker` appends what WriteTxnMarkers will."""

    def __init__(self) -> None:
        self.logs: dict[int, bytearray] = {}
        self.ends: dict[int, int] = {}
        self.fail_with: Exception | None = None

    def append(self, partition, entries, *, producer_id=-1, producer_epoch=-1) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        return self._write(partition, build_internal_batch(entries, 1000, producer_id=producer_id,
                                                           producer_epoch=producer_epoch))

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        marker = EndTransactionMarker(COMMIT if commit else ABORT, 0)
        self._write(partition, build_end_txn_marker_batch(marker, producer_id=producer_id, producer_epoch=0,
                                                          timestamp=1000))

    def _write(self, partition: int, batch: bytes) -> int:
        buf = bytearray(batch)
        base = self.ends.get(partition, 0)
        set_base_offset(buf, 0, base)
        self.logs.setdefault(partition, bytearray()).extend(buf)
        self.ends[partition] = parse_batch_header(buf).next_offset
        return base

    def read_batches(self, partition):
        return list(iter_internal_batches(bytes(self.logs.get(partition, b""))))


def harness(**config) -> Harness:
    h = Harness(**config)
    h.log = h.coordinator.log = ByteOffsetsLog()
    return h


def txn_commit(h, producer_id, offsets, group="g", member="", gen=-1, instance=None, epoch=0):
    return h.coordinator.commit_txn_offsets(group, producer_id, epoch, member, instance, gen, {
        tp: OffsetAndMetadata(o, 2, f"m{o}", h.now) for tp, o in offsets.items()})


def plain_commit(h, offsets, group="g"):
    return h.coordinator.commit_offsets(group, "", None, -1, {
        tp: OffsetAndMetadata(o, 2, f"m{o}", h.now) for tp, o in offsets.items()})


def end_txn(h, producer_id, commit, group="g"):
    """The marker path: the marker is written to the group's partition, then the coordinator told."""
    partition = h.coordinator.partition_for(group)
    h.log.write_marker(partition, producer_id, commit)
    h.coordinator.complete_transaction(partition, producer_id, commit)


def fetched(h, group="g", tps=(TP0, TP1)):
    error, found = h.coordinator.fetch_offsets(group, list(tps))
    assert error == E.none
    return {tp: om.offset for tp, om in found.items() if om is not None}


def test_offsets_of_a_transaction_are_seen_only_once_it_commits():
    h = harness()
    assert txn_commit(h, 7, {TP0: 10, TP1: 11}) == {TP0: E.none, TP1: E.none}
    assert fetched(h) == {}
    assert h.coordinator.unstable_offsets("g", [TP0, TP1, ("t", 2)]) == {TP0, TP1}
    end_txn(h, 7, commit=True)
    assert fetched(h) == {TP0: 10, TP1: 11}
    assert h.coordinator.unstable_offsets("g", [TP0, TP1]) == set()
    assert h.group().offsets[TP0] == OffsetAndMetadata(10, 2, "m10", h.now)
    assert not h.group().pending_txn_offsets


def test_an_aborted_transaction_leaves_the_committed_offsets():
    h = harness()
    plain_commit(h, {TP0: 5})
    txn_commit(h, 7, {TP0: 10})
    assert fetched(h) == {TP0: 5}  # the last committed one, not the pending one
    end_txn(h, 7, commit=False)
    assert fetched(h) == {TP0: 5} and not h.group().pending_txn_offsets


def test_a_plain_commit_written_during_the_transaction_wins():
    h = harness()
    plain_commit(h, {TP0: 1, TP1: 1})
    txn_commit(h, 7, {TP0: 10, TP1: 10})
    plain_commit(h, {TP1: 20})  # appended after the transaction's batch
    end_txn(h, 7, commit=True)
    assert fetched(h) == {TP0: 10, TP1: 20}


def test_a_later_commit_of_the_same_transaction_replaces_its_earlier_one():
    h = harness()
    txn_commit(h, 7, {TP0: 10})
    txn_commit(h, 7, {TP0: 12})
    end_txn(h, 7, commit=True)
    assert fetched(h) == {TP0: 12}


def test_the_marker_completes_only_its_producer_in_its_partition():
    h = harness()
    other = next(g for g in (f"g{i}" for i in range(100))
                 if h.coordinator.partition_for(g) != h.coordinator.partition_for("g"))
    txn_commit(h, 7, {TP0: 10})
    txn_commit(h, 8, {TP1: 11})
    txn_commit(h, 7, {TP0: 30}, group=other)
    end_txn(h, 7, commit=True)
    assert fetched(h) == {TP0: 10}
    assert h.coordinator.unstable_offsets("g", [TP0, TP1]) == {TP1}
    assert fetched(h, other) == {}  # its partition has not seen the marker yet
    end_txn(h, 7, commit=True, group=other)
    assert fetched(h, other) == {TP0: 30}


def test_a_producer_id_of_minus_one_is_a_plain_commit_as_in_kafka():
    h = harness()
    assert txn_commit(h, -1, {TP0: 10}, epoch=-1) == {TP0: E.none}
    assert fetched(h) == {TP0: 10}
    [batch] = h.log.read_batches(h.coordinator.partition_for("g"))
    assert not batch.is_transactional


def test_the_batch_is_the_producers_transactional_one():
    h = harness()
    txn_commit(h, 7, {TP0: 10, TP1: 11}, epoch=3)
    [batch] = h.log.read_batches(h.coordinator.partition_for("g"))
    assert (batch.producer_id, batch.is_transactional, len(batch.records)) == (7, True, 2)
    header = parse_batch_header(bytes(h.log.logs[h.coordinator.partition_for("g")]))
    assert (header.producer_epoch, header.base_sequence) == (3, 0)


def test_member_checks_are_offset_commits_but_optional():
    h = harness()
    leader, follower, gen = h.stable_pair()
    assert txn_commit(h, 7, {TP0: 1}, member=leader, gen=gen) == {TP0: E.none}
    assert txn_commit(h, 7, {TP0: 1}, member=leader, gen=gen + 1) == {TP0: E.illegal_generation}
    assert txn_commit(h, 7, {TP0: 1}, member="stranger", gen=gen) == {TP0: E.unknown_member_id}
    assert txn_commit(h, 7, {TP0: 1}, member="stranger") == {TP0: E.unknown_member_id}
    # before v3 there is no member: never refused, even by an active group (OffsetCommit refuses)
    assert txn_commit(h, 7, {TP0: 2}) == {TP0: E.none}
    assert plain_commit(h, {TP0: 2}) == {TP0: E.unknown_member_id}
    # a rebalance does not stop a transaction's commit
    h.join(member_id=leader)
    assert h.group().state is S.PREPARING_REBALANCE
    assert txn_commit(h, 7, {TP0: 3}, member=leader, gen=gen) == {TP0: E.none}
    # a group this coordinator does not know has no members: Kafka answers UNKNOWN_MEMBER_ID
    assert txn_commit(h, 7, {TP0: 1}, group="new", member="m", gen=1) == {TP0: E.unknown_member_id}


def test_static_members_are_fenced():
    h = harness()
    first = h.join(instance="i1")  # static members get their id at once
    h.advance(3000)
    member, gen = first.result.member_id, first.result.generation_id
    assert txn_commit(h, 7, {TP0: 1}, member=member, gen=gen, instance="i1") == {TP0: E.none}
    assert txn_commit(h, 7, {TP0: 1}, member="old", gen=gen, instance="i1") == {TP0: E.fenced_instance_id}
    assert txn_commit(h, 7, {TP0: 1}, member=member, gen=gen, instance="i2") == {TP0: E.unknown_member_id}


def test_coordinator_and_request_errors():
    h = harness(offset_metadata_max_bytes=3)
    assert txn_commit(h, 7, {TP0: 1}, group="") == {TP0: E.invalid_group_id}
    assert txn_commit(h, 7, {TP0: 100, TP1: 1}) == {TP0: E.offset_metadata_too_large, TP1: E.none}
    assert set(h.group().pending_txn_offsets[7]) == {TP1}
    h.coordinator.loading.add(h.coordinator.partition_for("g"))
    assert txn_commit(h, 7, {TP0: 1}) == {TP0: E.coordinator_load_in_progress}
    h.coordinator.loading.clear()
    h.coordinator.owned = set()
    assert txn_commit(h, 7, {TP0: 1}) == {TP0: E.not_coordinator}


def test_a_fenced_producer_commits_nothing():
    h = harness()
    h.log.fail_with = InvalidProducerEpochError("epoch 0 is older than 1")
    assert txn_commit(h, 7, {TP0: 1}) == {TP0: E.invalid_producer_epoch}
    assert not h.group().pending_txn_offsets


def test_a_group_holding_a_transactions_offsets_is_not_expired():
    h = harness(offsets_retention_ms=60_000)
    plain_commit(h, {TP0: 1})
    txn_commit(h, 7, {TP1: 2})
    h.now += 60_000
    assert h.coordinator.expire_offsets() == 1  # the committed offset expires, the group stays
    assert "g" in h.coordinator.groups and h.coordinator.unstable_offsets("g", [TP1]) == {TP1}
    end_txn(h, 7, commit=False)
    assert h.coordinator.expire_offsets() == 0
    assert "g" not in h.coordinator.groups


def test_deleted_offsets_take_the_pending_ones_along():
    h = harness()
    txn_commit(h, 7, {TP0: 1, ("u", 0): 2})
    assert h.coordinator.delete_offsets("g", [TP0]) == (E.none, {TP0: E.none})
    h.coordinator.remove_offsets_of_topic("u")
    assert h.group().pending_txn_offsets == {7: {}}  # kept until its marker, as Kafka does
    end_txn(h, 7, commit=True)
    assert fetched(h, tps=[TP0, ("u", 0)]) == {}


def reloaded(h) -> GroupCoordinator:
    coordinator = GroupCoordinator(h.config, h.log, lambda: h.now)
    for partition in h.log.logs:
        coordinator.load_partition(partition)
    return coordinator


def state_of(coordinator: GroupCoordinator) -> dict:
    """What a group's offsets are, with the record offsets that order them."""
    def flat(offsets):
        return {tp: (om, om.record_offset) for tp, om in offsets.items()}
    return {gid: (flat(g.offsets), {pid: flat(p) for pid, p in g.pending_txn_offsets.items() if p})
            for gid, g in coordinator.groups.items() if g.offsets or any(g.pending_txn_offsets.values())}


def test_a_reload_replays_transactions_and_their_markers():
    h = harness()
    plain_commit(h, {TP0: 1, TP1: 1})
    txn_commit(h, 7, {TP0: 10, TP1: 10})
    txn_commit(h, 8, {TP0: 20})
    plain_commit(h, {TP1: 5})
    end_txn(h, 7, commit=True)
    end_txn(h, 8, commit=False)
    txn_commit(h, 9, {TP1: 30})  # still open at the log end
    loaded = reloaded(h)
    assert state_of(loaded) == state_of(h.coordinator)
    assert fetched(h) == {TP0: 10, TP1: 5}
    # the open transaction's marker arrives after the reload
    h.coordinator = loaded
    end_txn(h, 9, commit=True)
    assert fetched(h) == {TP0: 10, TP1: 30}


def test_a_group_with_only_a_transactions_offsets_is_reloaded():
    h = harness()
    txn_commit(h, 7, {TP0: 10})
    loaded = reloaded(h)
    assert loaded.groups["g"].state is S.EMPTY and loaded.unstable_offsets("g", [TP0]) == {TP0}


def test_a_deleted_group_takes_its_pending_offsets_out_of_the_replay():
    h = harness()
    txn_commit(h, 7, {TP0: 10})
    assert h.coordinator.delete_groups(["g"]) == {"g": E.none}
    end_txn(h, 7, commit=True)
    assert "g" not in h.coordinator.groups and "g" not in reloaded(h).groups


OPS = st.lists(st.one_of(
    st.tuples(st.just("plain"), st.sampled_from([TP0, TP1]), st.integers(0, 99)),
    st.tuples(st.just("txn"), st.sampled_from([1, 2, 3]), st.sampled_from([TP0, TP1]), st.integers(0, 99)),
    st.tuples(st.just("end"), st.sampled_from([1, 2, 3]), st.booleans()),
    st.tuples(st.just("delete_group")),
), max_size=25)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_a_reload_agrees_with_the_coordinator_it_replaces(ops):
    h = harness()
    for op in ops:
        if op[0] == "plain":
            plain_commit(h, {op[1]: op[2]})
        elif op[0] == "txn":
            txn_commit(h, op[1], {op[2]: op[3]})
        elif op[0] == "end":
            end_txn(h, op[1], op[2])
        else:
            h.coordinator.delete_groups(["g"])
    assert state_of(reloaded(h)) == state_of(h.coordinator)


def test_an_empty_control_batch_ends_nothing():
    """The cleaner keeps an emptied control batch for the producer state; Kafka's loader skips it."""
    h = harness()
    txn_commit(h, 7, {TP0: 10})
    partition = h.coordinator.partition_for("g")
    h.log._write(partition, build_batch([], producer_id=7, producer_epoch=0, is_transactional=True,
                                        is_control=True, last_offset_delta=0, max_timestamp=0))
    assert reloaded(h).unstable_offsets("g", [TP0]) == {TP0}
