"""`kbroker cluster`: operations on the cluster's brokers, over the Kafka protocol
(`rebalance` and `elect-leaders` live in `balance_cmd`).

    kbroker cluster status [--json]
        the brokers, under-replicated and offline partitions, and the moves in progress with how
        far each has come (`status`).

    kbroker cluster decommission BROKER_ID [--wait SECONDS]
        move every replica (and so every leadership) off the broker with add-then-drop
        reassignments, wait until none is left, then say it is safe to stop.

The replacement for each of the broker's replicas is chosen as the controller's automatic
re-replication chooses (`controller/reassignment.restore_targets`: a rack the partition does not
use yet first, then the least loaded broker), and the moves are ordinary
AlterPartitionReassignments, visible to `kbroker reassign --list`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kbroker.admin.balance_cmd import add_balance_commands, elect_leaders, rebalance
from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.status import add_status_command, run_status
from kbroker.admin.security import add_command_config_argument, security_of
from kbroker.controller.reassignment import restore_targets


def add_cluster_command(sub: Any) -> None:
    p = sub.add_parser("cluster", help="cluster operations (rebalance, elect leaders, decommission a broker)")
    csub = p.add_subparsers(dest="cluster_command", required=True)
    add_status_command(csub)
    d = csub.add_parser("decommission", help="move every replica off a broker, then say it is safe to stop")
    d.add_argument("broker_id", type=int)
    _common(d)
    add_balance_commands(csub, _common)
    d.add_argument("--wait", type=float, default=3600.0, metavar="SECONDS",
                   help="how long to wait for the moves to finish (default %(default)s)")


def _common(p: Any) -> None:
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]")
    add_command_config_argument(p)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="per request (default %(default)s)")


def run_cluster(args: argparse.Namespace) -> int:
    try:
        with AdminClient(args.bootstrap_server, timeout=args.timeout, security=security_of(args)) as admin:
            if args.cluster_command == "status":
                return run_status(admin, args)
            if args.cluster_command == "rebalance":
                return rebalance(admin, args)
            if args.cluster_command == "elect-leaders":
                return elect_leaders(admin, args)
            return decommission(admin, args.broker_id, args.wait)
    except (AdminError, KafkaErrorResponse, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def decommission(admin: AdminClient, broker_id: int, wait_s: float) -> int:
    brokers, replicas, _ = admin.placement()
    others = {b: info.rack for b, info in brokers.items() if b != broker_id}
    on_it = {tp for tp, r in replicas.items() if broker_id in r}
    targets = restore_targets({tp: replicas[tp] for tp in on_it}, {broker_id}, others)
    stuck = sorted(on_it - set(targets))
    if stuck:
        print(f"Error: no other broker can take the replicas of {', '.join(f'{t}-{p}' for t, p in stuck[:10])}"
              f" (every live broker hosts them already)", file=sys.stderr)
        return 1
    if targets:
        errors = {tp: e for tp, e in admin.alter_partition_reassignments(targets).items() if e is not None}
        if errors:
            for (t, p), e in sorted(errors.items()):
                print(f"Error: could not move {t}-{p}: {e}", file=sys.stderr)
            return 1
        print(f"Moving {len(targets)} replicas off broker {broker_id}.", flush=True)
    deadline = time.monotonic() + wait_s
    while True:
        _, replicas, leaders = admin.placement()
        left = sum(1 for r in replicas.values() if broker_id in r)
        led = sum(1 for leader in leaders.values() if leader == broker_id)
        if not left and not led:
            print(f"Broker {broker_id} holds no replicas and leads no partitions: it is safe to stop.")
            return 0
        if time.monotonic() > deadline:
            print(f"Error: broker {broker_id} still holds {left} replicas ({led} led) after {wait_s:g} s; "
                  f"the moves continue (kbroker reassign --list)", file=sys.stderr)
            return 1
        print(f"  {len(on_it) - left} of {len(on_it)} replicas moved", flush=True)
        time.sleep(1.0)
