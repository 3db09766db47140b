"""How far the moves in progress have come, for `kbroker cluster status` and `kbroker topics describe`.

A move (a reassignment) copies the partition to its adding replicas, which fetch from the leader
like any follower; it completes when they are all in the ISR. Its progress is the bytes the adding
replicas hold against the bytes they must hold — the leader's log size, once per adding replica —
as DescribeLogDirs reports them (each broker for its own logs). An adding replica already in the
ISR has caught up, whatever its size. The moves come from ListPartitionReassignments (asked only
of a broker that serves it: kbroker's single node has no moves; a client not allowed to list them,
CLUSTER_AUTHORIZATION_FAILED, sees none, as kafka-topics does).

The arithmetic and the bar are pure functions; `moves_in_progress` does the asking.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from kbroker.admin.client import (LIST_PARTITION_REASSIGNMENTS, AdminClient, Broker, KafkaErrorResponse,
                                  PartitionState, TopicPartition)
from kbroker.admin.log_dirs import LOG_DIRS_TIMEOUT_S, partition_sizes

BAR_WIDTH = 20


class Move(NamedTuple):
    topic: str
    partition: int
    replicas: tuple[int, ...]  # the full set while moving: target first, then the original replicas
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    leader_bytes: int | None  # None: unknown
    replica_bytes: dict[int, int | None]  # each adding replica's bytes (None: unknown)
    unknown: tuple[str, ...]  # why some sizes are unknown: "broker 4: offline", "no leader"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


class Progress(NamedTuple):
    fraction: float | None  # 0..1; None: unknown
    copied: int | None  # bytes the adding replicas hold (each counted up to the leader's size)
    total: int | None  # bytes they must hold: the leader's size per adding replica


def progress(move: Move) -> Progress:
    waiting = [r for r in move.adding if r not in move.isr]  # not caught up yet
    if move.leader_bytes is None:
        return Progress(None if waiting else 1.0, None, None)
    total = move.leader_bytes * len(move.adding)
    copied = 0
    for r in move.adding:
        size = move.leader_bytes if r not in waiting else move.replica_bytes.get(r)
        if size is None:
            return Progress(None, None, total)
        copied += min(size, move.leader_bytes)
    if total:
        fraction = copied / total
        if waiting:
            fraction = min(fraction, 0.999)  # as big as the leader, yet not in the ISR
    else:
        fraction = 0.0 if waiting else 1.0  # nothing to copy: done once they are in the ISR
    return Progress(fraction, copied, total)


def human_bytes(n: int | None) -> str:
    """512 B, 12.0 MB, 1.5 GB (decimal units)."""
    if n is None:
        return "?"
    if n < 1000:
        return f"{n} B"
    value = float(n)
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        value /= 1000
        if value < 999.95 or unit == "PB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def bar(fraction: float | None, width: int = BAR_WIDTH) -> str:
    """[#########-----------]  45%; an unknown fraction is all '?'. The percentage is rounded
    down, so 100% means done."""
    if fraction is None:
        return f"[{'?' * width}]    ?"
    fraction = min(max(fraction, 0.0), 1.0)
    filled = int(fraction * width)
    return f"[{'#' * filled}{'-' * (width - filled)}] {int(fraction * 100):3d}%"


def progress_text(move: Move) -> str:
    """`[#########-----------]  45%  12.0 MB / 26.5 MB`, with why it is unknown when it is."""
    if not move.adding:
        return "nothing to copy"
    p = progress(move)
    text = f"{bar(p.fraction)}  {human_bytes(p.copied)} / {human_bytes(p.total)}"
    if p.fraction is None and move.unknown:
        text += f"  ({'; '.join(move.unknown)})"
    return text


def progress_data(move: Move) -> dict:
    """The JSON form of a move, progress included."""
    p = progress(move)
    return {"topic": move.topic, "partition": move.partition, "replicas": list(move.replicas),
            "adding": list(move.adding), "removing": list(move.removing),
            "leader": move.leader if move.leader >= 0 else None, "isr": list(move.isr),
            "progress": None if p.fraction is None else round(p.fraction, 4),
            "copied_bytes": p.copied, "total_bytes": p.total, "leader_bytes": move.leader_bytes,
            "replica_bytes": {str(r): size for r, size in sorted(move.replica_bytes.items())},
            "unknown": list(move.unknown)}


def build_moves(listed: Mapping[TopicPartition, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]],
                states: Mapping[TopicPartition, PartitionState],
                sizes: Mapping[int, Mapping[TopicPartition, int] | str]) -> dict[TopicPartition, Move]:
    """The moves of ListPartitionReassignments with their leader, ISR and the sizes the brokers
    reported (broker id -> sizes, or why they are unknown)."""
    out: dict[TopicPartition, Move] = {}
    for tp, (replicas, adding, removing) in sorted(listed.items()):
        state = states.get(tp)
        leader = state.leader if state is not None else -1
        isr = state.isr if state is not None else ()
        unknown: list[str] = []

        def size_on(broker_id: int) -> int | None:
            got = sizes.get(broker_id)
            if isinstance(got, str):
                unknown.append(f"broker {broker_id}: {got}")
                return None
            if got is None:
                return None
            return got.get(tp, 0)  # a live broker without the log yet holds nothing of it

        leader_bytes = size_on(leader) if leader >= 0 else None
        if leader < 0:
            unknown.append("no leader")
        replica_bytes = {r: (None if r in isr else size_on(r)) for r in adding}
        out[tp] = Move(tp[0], tp[1], tuple(replicas), tuple(adding), tuple(removing), leader, tuple(isr),
                       leader_bytes, replica_bytes, tuple(dict.fromkeys(unknown)))
    return out


def moves_in_progress(admin: AdminClient, brokers: Mapping[int, Broker], states: Mapping[TopicPartition, PartitionState],
                      partitions: Iterable[TopicPartition] | None = None,
                      timeout: float = LOG_DIRS_TIMEOUT_S) -> dict[TopicPartition, Move]:
    """The moves in progress (of `partitions`; None: all) with their progress. `brokers` are the
    live brokers (Metadata), `states` the partitions' leaders and ISRs."""
    if not admin.serves(LIST_PARTITION_REASSIGNMENTS):
        return {}
    try:
        listed = admin.list_partition_reassignments(None if partitions is None else sorted(set(partitions)))
    except KafkaErrorResponse as exc:
        if exc.name == "CLUSTER_AUTHORIZATION_FAILED":  # as kafka-topics: not allowed to see the moves
            return {}
        raise
    wanted: dict[int, set[TopicPartition]] = {}
    for tp, (_replicas, adding, _removing) in listed.items():
        state = states.get(tp)
        if state is None or not adding:
            continue
        for b in [state.leader, *[r for r in adding if r not in state.isr]]:
            if b >= 0:
                wanted.setdefault(b, set()).add(tp)
    return build_moves(listed, states, partition_sizes(brokers, wanted, timeout, admin.security))
