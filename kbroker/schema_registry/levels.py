"""Confluent's compatibility levels, and what a level checks a new schema against: which of the
subject's earlier schemas (the latest, or every one for the transitive levels, newest first) and
in which directions (FORWARD: the old schemas read new data; BACKWARD: the new schema reads old
data; FULL: both). Shared by the per-type checkers (avro, json_schema, protobuf) and the state."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")


def against(level: str, previous: list[T]) -> tuple[list[T], bool, bool]:
    """(the earlier schemas to check, newest first; forward; backward) for `level` and the
    subject's `previous` schemas (oldest first); nothing to check for NONE or no earlier schema.
    ValueError for a level that is none of LEVELS (any case)."""
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}")
    if level == "NONE" or not previous:
        return [], False, False
    olds = list(reversed(previous)) if level.endswith("_TRANSITIVE") else [previous[-1]]
    base = level.removesuffix("_TRANSITIVE")
    return olds, base in ("FORWARD", "FULL"), base in ("BACKWARD", "FULL")
