"""`kbroker reassign --throttle`: which replicas and brokers a plan throttles (Kafka's
calculateProposedMoveMap, calculateLeaderThrottles, calculateFollowerThrottles and
calculateReassigningBrokers), and the arguments."""

import argparse

import pytest

from kbroker.admin.client import AdminError
from kbroker.admin.reassign import add_reassign_command
from kbroker.admin.throttle import proposed_moves, reassigning_brokers, replica_lists


def test_a_planned_move_goes_from_the_current_replicas_to_the_new_ones():
    moves = proposed_moves({}, {("t", 0): [3, 2], ("t", 1): [1, 4]}, {("t", 0): [1, 2], ("t", 1): [2, 1]})
    assert moves == {("t", 0): ({1, 2}, {3}), ("t", 1): ({1, 2}, {4})}
    leaders, followers = replica_lists(moves)
    assert leaders == {"t": "0:1,0:2,1:1,1:2"}
    assert followers == {"t": "0:3,1:4"}
    assert reassigning_brokers(moves) == [1, 2, 3, 4]


def test_moves_in_progress_are_throttled_too_and_keep_their_sources():
    in_progress = {("u", 0): ((5, 6, 1, 2), (5, 6), (1, 2)),  # from [1, 2] to [5, 6], under way
                   ("t", 0): ((3, 1, 2), (3,), (1,))}
    plan = {("t", 0): [4, 2]}  # replaces the move of t-0: still counted from its original replicas
    moves = proposed_moves(in_progress, plan, {("t", 0): [3, 1, 2]})
    assert moves[("u", 0)] == ({1, 2}, {5, 6})
    assert moves[("t", 0)] == ({1, 2}, {4})
    leaders, followers = replica_lists(moves)
    assert leaders == {"t": "0:1,0:2", "u": "0:1,0:2"} and followers == {"t": "0:4", "u": "0:5,0:6"}


def test_a_reordering_throttles_no_follower():
    moves = proposed_moves({}, {("t", 0): [2, 1]}, {("t", 0): [1, 2]})
    assert replica_lists(moves) == ({"t": "0:1,0:2"}, {"t": ""})


def test_entries_sort_by_number_not_text():
    moves = proposed_moves({}, {("t", 10): [12], ("t", 2): [3]}, {("t", 10): [1], ("t", 2): [1]})
    assert replica_lists(moves) == ({"t": "2:1,10:1"}, {"t": "2:3,10:12"})


def test_a_partition_that_is_not_there_cannot_be_throttled():
    with pytest.raises(AdminError):
        proposed_moves({}, {("t", 9): [1]}, {})


def test_arguments():
    parser = argparse.ArgumentParser()
    add_reassign_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["reassign", "--execute", "--plan", "p.json", "--throttle", "1000000"])
    assert args.throttle == 1_000_000 and not args.preserve_throttles
    args = parser.parse_args(["reassign", "--verify", "--plan", "p.json", "--preserve-throttles"])
    assert args.throttle == -1 and args.preserve_throttles
