"""A transactional id's states, Kafka's byte codes for them, and the one table of legal transitions
(Kafka's TransactionState).

Empty: a producer id and epoch, no transaction open. Ongoing: partitions were added.
PrepareCommit / PrepareAbort: EndTxn was written, markers are being sent. CompleteCommit /
CompleteAbort: every marker was written. Dead: being expired (never written). PrepareEpochFence:
an epoch bump that fences an Ongoing transaction before it is aborted (never written either:
the abort it leads to is).
"""

from __future__ import annotations

import enum


class TransactionState(enum.Enum):
    # values are the `TransactionStatus` bytes of the __transaction_state records
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name, as DescribeTransactions and ListTransactions report it."""
        return _NAMES[self]


_S = TransactionState

_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

# target state -> the states it may be entered from
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

# an idle transactional id in these states expires after transactional.id.expiration.ms
EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})

# a transaction is open (its partitions may hold undecided records)
PENDING_TRANSACTION = frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT})


class IllegalStateTransition(RuntimeError):
    """A bug, never a client's fault: the rules asked for a transition Kafka's table forbids."""


def check_transition(current: TransactionState, target: TransactionState) -> None:
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(
            f"transaction cannot go from {current.state_name} to {target.state_name}"
        )
