"""The add-then-drop move's rules (kbroker.controller.reassignment), without ZooKeeper or brokers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kbroker.controller.reassignment import (
    ReplicaSets,
    begin,
    cancel,
    completed_state,
    started_state,
    unneeded,
    validate_target,
)
from kbroker.errors import ErrorCode
from kbroker.zookeeper.znodes import NO_LEADER, LeaderAndIsr


def state(leader, isr, epoch=5):
    return LeaderAndIsr(leader=leader, leader_epoch=epoch, isr=tuple(isr), controller_epoch=1, partition_epoch=3)


def test_a_move_adds_the_targets_first_and_removes_the_rest():
    sets = begin(ReplicaSets((1, 2, 3)), [4, 2, 5])
    assert sets == ReplicaSets((4, 2, 5, 1, 3), adding=(4, 5), removing=(1, 3))
    assert sets.target == (4, 2, 5) and sets.original == (2, 1, 3) and sets.moving


def test_a_move_to_the_same_replicas_is_no_move():
    assert begin(ReplicaSets((1, 2, 3)), [1, 2, 3]) == ReplicaSets((1, 2, 3))
    assert not begin(ReplicaSets((1, 2, 3)), [1, 2, 3]).moving


def test_a_reorder_only_changes_the_preferred_leader():
    assert begin(ReplicaSets((1, 2, 3)), [3, 1, 2]) == ReplicaSets((3, 1, 2))


def test_a_new_move_replaces_one_in_progress_from_the_original_replicas():
    first = begin(ReplicaSets((1, 2, 3)), [4, 5, 6])
    second = begin(first, [1, 2, 7])
    assert second == ReplicaSets((1, 2, 7, 3), adding=(7,), removing=(3,))
    assert unneeded(first, second) == [4, 5, 6]


def test_cancel_returns_to_the_original_replicas():
    moving = begin(ReplicaSets((1, 2, 3)), [2, 3, 4])
    back = cancel(moving)
    assert back == ReplicaSets((2, 3, 4, 1), adding=(), removing=(4,))
    assert set(back.target) == {1, 2, 3}
    assert cancel(ReplicaSets((1, 2))) == ReplicaSets((1, 2))


def test_validate_target():
    live = {1, 2, 3}
    assert validate_target([1, 2], live) is None
    assert validate_target([], live)[0] == ErrorCode.invalid_replica_assignment
    assert validate_target([1, 1], live)[0] == ErrorCode.invalid_replica_assignment
    assert validate_target([1, 9], live)[0] == ErrorCode.invalid_replica_assignment
    assert validate_target([-1], live)[0] == ErrorCode.invalid_replica_assignment


def test_start_bumps_the_leader_epoch_only():
    s = state(1, [1, 2, 3])
    started = started_state(s, 7)
    assert (started.leader, started.isr, started.leader_epoch, started.controller_epoch) == (1, (1, 2, 3), 6, 7)


def test_not_complete_until_every_target_replica_is_in_the_isr():
    sets = begin(ReplicaSets((1, 2, 3)), [2, 3, 4])
    assert completed_state(state(1, [1, 2, 3]), sets, {1, 2, 3, 4}, 7) is None
    done = completed_state(state(1, [1, 2, 3, 4]), sets, {1, 2, 3, 4}, 7)
    assert done.leader == 2 and done.isr == (2, 3, 4) and done.leader_epoch == 6  # the leaving leader moved


def test_a_staying_leader_keeps_leading():
    sets = begin(ReplicaSets((1, 2, 3)), [1, 2, 4])
    done = completed_state(state(1, [1, 2, 3, 4]), sets, {1, 2, 3, 4}, 7)
    assert done.leader == 1 and done.isr == (1, 2, 4)


def test_a_leader_in_controlled_shutdown_hands_over():
    sets = begin(ReplicaSets((1, 2, 3)), [1, 2, 4])
    done = completed_state(state(1, [1, 2, 3, 4]), sets, {2, 3, 4}, 7)
    assert done.leader == 2


def test_no_electable_target_replica_waits():
    sets = begin(ReplicaSets((1, 2)), [3])
    assert completed_state(state(1, [1, 2, 3]), sets, {1, 2}, 7) is None


@given(st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True),
       st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True),
       st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True))
def test_moves_keep_their_invariants(original, first_target, second_target):
    first = begin(ReplicaSets(tuple(original)), first_target)
    for sets, target in ((first, first_target), (begin(first, second_target), second_target)):
        assert set(sets.target) == set(target)
        assert set(sets.original) == set(original)
        assert len(set(sets.replicas)) == len(sets.replicas)
        assert set(sets.adding) == set(target) - set(original)
        assert set(sets.removing) == set(original) - set(target)
        assert sets.replicas[: len(target)] == tuple(target) or not sets.moving
        back = cancel(sets)
        assert set(back.target) == set(original)
        full = state(sets.replicas[0], sets.replicas)
        done = completed_state(full, sets, set(range(1, 7)), 2)
        assert done is not None and set(done.isr) == set(target) and done.leader in target
        assert done.leader != NO_LEADER


def test_restore_replaces_a_gone_broker_in_place_on_the_least_loaded_live_broker():
    from kbroker.controller.reassignment import restore_targets

    assignments = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1), ("t", 2): (3, 1, 2), ("u", 0): (1, 2)}
    targets = restore_targets(assignments, {3}, {1: None, 2: None, 4: None, 5: None})
    assert targets == {("t", 0): [1, 2, 4], ("t", 1): [2, 5, 1], ("t", 2): [4, 1, 2]}  # 4, 5, then 4 (id order)
    assert ("u", 0) not in targets


def test_restore_prefers_a_rack_the_partition_does_not_use():
    from kbroker.controller.reassignment import restore_targets

    racks = {1: "a", 2: "b", 4: "a", 5: "c"}
    assert restore_targets({("t", 0): (1, 2, 3)}, {3}, racks) == {("t", 0): [1, 2, 5]}


def test_restore_leaves_a_partition_with_nowhere_to_go():
    from kbroker.controller.reassignment import restore_targets

    assert restore_targets({("t", 0): (1, 2, 3)}, {3}, {1: None, 2: None}) == {}
