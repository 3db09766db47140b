"""`kbroker cluster status`: the brokers, the partitions' health and the moves in progress, at a glance.

    kbroker cluster status [--bootstrap-server HOST:PORT] [--timeout SECONDS] [--json]

One Metadata answer gives the brokers and every partition's leader, replicas and ISR (the counts
per broker and the under-replicated and offline partitions, by kafka-topics' tests); DescribeConfigs
gives each topic's min.insync.replicas (under-min-ISR; shown as '?' when it cannot be had);
ListPartitionReassignments and DescribeLogDirs give the moves and how far they have come
(`progress`). This module owns the arguments and the output (pure functions, tested without a
broker); `client` owns the wire.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Iterable, Mapping, Sequence

from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, Broker, TopicState
from kbroker.admin.log_dirs import LOG_DIRS_TIMEOUT_S
from kbroker.admin.progress import Move, moves_in_progress, progress_data, progress_text
from kbroker.admin.topics import min_isr_of, partition_flags
from kbroker.admin.security import add_command_config_argument


def add_status_command(csub: Any) -> None:
    """Add `status` to the `kbroker cluster` subcommands."""
    s = csub.add_parser("status", help="brokers, under-replicated and offline partitions, moves in progress")
    s.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]")
    add_command_config_argument(s)
    s.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"per request (default %(default)s; a broker's log sizes wait at most {LOG_DIRS_TIMEOUT_S:g} s)")
    s.add_argument("--json", action="store_true", help="print the status as JSON")


def run_status(admin: AdminClient, args: argparse.Namespace) -> int:
    brokers, topics = admin.describe_topics(None)
    cluster_id, controller = admin.controller()
    try:
        configs = admin.describe_topic_configs(t.name for t in topics)
        min_isr: dict[str, int | None] | None = {name: min_isr_of(c) for name, c in configs.items()}
    except AdminError:  # the counts are still worth having without it
        min_isr = None
    states = {(t.name, p.partition): p for t in topics for p in t.partitions}
    moves = moves_in_progress(admin, brokers, states, timeout=min(args.timeout, LOG_DIRS_TIMEOUT_S))
    data = cluster_status(cluster_id, controller, brokers, topics, min_isr, moves)
    print(json.dumps(data, indent=2) if args.json else status_text(data))
    return 0


def cluster_status(cluster_id: str | None, controller: int, brokers: Mapping[int, Broker],
                   topics: Sequence[TopicState], min_isr: Mapping[str, int | None] | None,
                   moves: Mapping[tuple[str, int], Move]) -> dict:
    """The status as plain data (what --json prints; the text is made from it). `brokers` are the
    live ones; a broker that replicas name but Metadata does not list is offline."""
    live = set(brokers)
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    under_replicated, offline, under_min_isr = [], [], []
    for t in topics:
        for p in t.partitions:
            name = f"{t.name}-{p.partition}"
            for r in p.replicas:
                replicas[r] = replicas.get(r, 0) + 1
            if p.leader >= 0:
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
            move = moves.get((t.name, p.partition))
            flags = partition_flags(p, live, None if min_isr is None else min_isr.get(t.name),
                                    move.adding if move is not None else ())
            if flags["under_replicated"]:
                under_replicated.append(name)
            if flags["unavailable"]:
                offline.append(name)
            if flags["under_min_isr"]:
                under_min_isr.append(name)
    rows = []
    for b in sorted(live | set(replicas) | set(leaders)):
        info = brokers.get(b)
        rows.append({"id": b, "host": info.host if info else None, "port": info.port if info else None,
                     "rack": info.rack if info else None, "live": info is not None, "controller": b == controller,
                     "replicas": replicas.get(b, 0), "leaders": leaders.get(b, 0)})
    return {
        "cluster_id": cluster_id,
        "controller": controller if controller >= 0 else None,
        "brokers": rows,
        "partitions": sum(len(t.partitions) for t in topics),
        "under_replicated": len(under_replicated),
        "offline": len(offline),
        "under_min_isr": None if min_isr is None else len(under_min_isr),
        "under_replicated_partitions": under_replicated,
        "offline_partitions": offline,
        "under_min_isr_partitions": None if min_isr is None else under_min_isr,
        "reassignments": [{**progress_data(m), "progress_text": progress_text(m)} for _tp, m in sorted(moves.items())],
    }


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    rows = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return ["  ".join([*(cell.ljust(w) for cell, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def status_text(data: Mapping[str, Any]) -> str:
    """The status in a few lines: a header, a row per broker (the controller marked '*'), the
    partition counts, then a row per move in progress."""
    live = sum(1 for b in data["brokers"] if b["live"])
    down = len(data["brokers"]) - live
    controller = data["controller"] if data["controller"] is not None else "none"
    lines = [f"Cluster: {data['cluster_id'] or '-'}  Controller: {controller}  Brokers: {live} live"
             + (f", {down} offline" if down else "")]
    lines += _table(["BROKER", "ADDRESS", "RACK", "STATE", "REPLICAS", "LEADERS"], (
        [f"{b['id']}{'*' if b['controller'] else ''}", f"{b['host']}:{b['port']}" if b["live"] else "-",
         b["rack"] or "-", "live" if b["live"] else "offline", str(b["replicas"]), str(b["leaders"])]
        for b in data["brokers"]))
    under_min = "?" if data["under_min_isr"] is None else data["under_min_isr"]
    lines.append(f"Partitions: {data['partitions']}  Under-replicated: {data['under_replicated']}  "
                 f"Offline: {data['offline']}  Under-min-ISR: {under_min}")
    moves = data["reassignments"]
    lines.append(f"Reassignments in progress: {len(moves)}")
    if moves:
        lines += _table(["PARTITION", "REPLICAS", "ADDING", "REMOVING", "PROGRESS"], (
            [f"{m['topic']}-{m['partition']}", _ids(m["replicas"]), _ids(m["adding"]), _ids(m["removing"]),
             m["progress_text"]] for m in moves))
    return "\n".join(lines)
