"""`kbroker cluster rebalance` and `kbroker cluster elect-leaders`: even out replicas and
leaderships over the brokers, over the Kafka protocol.

    kbroker cluster rebalance [--execute] [--plan-out FILE] [--wait SECONDS]
        plan moves that spread replicas, then preferred leaders, evenly over the live brokers (a
        new, empty broker included; rules in `controller/balance.py`); without --execute, print
        the plan and the counts it leads to. With --execute, start the moves (add-then-drop
        reassignments), wait for them, then elect the preferred leaders so leadership follows.
    kbroker cluster elect-leaders [--election-type preferred|unclean] [--topic T [--partition P]]
        what kafka-leader-election.sh does (ElectLeaders); every partition when no topic is named.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kbroker.admin.client import AdminClient
from kbroker.admin.reassign import format_plan
from kbroker.controller.balance import balanced_assignment, counts

ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def add_balance_commands(csub: Any, common) -> None:
    r = csub.add_parser("rebalance", help="spread replicas and leaderships evenly over the brokers")
    common(r)
    r.add_argument("--execute", action="store_true", help="start the moves (default: only print the plan)")
    r.add_argument("--plan-out", metavar="FILE", help="also write the plan in Kafka's reassignment JSON")
    r.add_argument("--wait", type=float, default=3600.0, metavar="SECONDS",
                   help="--execute: how long to wait for the moves (default %(default)s)")
    e = csub.add_parser("elect-leaders", help="preferred or unclean leader election (ElectLeaders)")
    common(e)
    e.add_argument("--election-type", choices=sorted(ELECTION_TYPES), default="preferred")
    e.add_argument("--topic", help="only this topic's partitions")
    e.add_argument("--partition", type=int, help="only this partition of --topic")


def _counts_line(replicas, leaders, brokers) -> str:
    r, _ = counts(replicas, brokers)
    led = {b: sum(1 for leader in leaders.values() if leader == b) for b in brokers}
    return "  ".join(f"{b}: {r[b]} replicas, {led[b]} leaders" for b in sorted(brokers))


def rebalance(admin: AdminClient, args: argparse.Namespace) -> int:
    brokers, replicas, leaders = admin.placement()
    moving = set(admin.list_partition_reassignments())
    settled = {tp: r for tp, r in replicas.items() if tp not in moving}
    plan = balanced_assignment(settled, {b: info.rack for b, info in brokers.items()})
    print(f"Now:     {_counts_line(replicas, leaders, brokers)}")
    after = dict(replicas)
    after.update({tp: tuple(r) for tp, r in plan.items()})
    print(f"Planned: {_counts_line(after, {tp: r[0] for tp, r in after.items() if r}, brokers)}")
    if moving:
        print(f"({len(moving)} partitions are being moved already and are left out.)")
    for (t, p), target in sorted(plan.items()):
        print(f"  {t}-{p}: {list(replicas[(t, p)])} -> {target}")
    if args.plan_out:
        with open(args.plan_out, "w", encoding="utf-8") as f:
            f.write(format_plan(plan) + "\n")
    if not args.execute:
        if plan:
            print(f"{len(plan)} partitions would change; run again with --execute to move them.")
        else:
            print("The cluster is balanced: nothing to move.")
        return 0
    if plan:
        errors = {tp: e for tp, e in admin.alter_partition_reassignments(plan).items() if e is not None}
        for (t, p), e in sorted(errors.items()):
            print(f"Error: could not move {t}-{p}: {e}", file=sys.stderr)
        if errors:
            return 1
        print(f"Moving {len(plan)} partitions.", flush=True)
        if not _wait_for_moves(admin, plan, args.wait):
            return 1
    elected = _elect_preferred(admin)
    brokers, replicas, leaders = admin.placement()
    print(f"Done ({elected} leaderships moved to their preferred replica). "
          f"Now: {_counts_line(replicas, leaders, brokers)}")
    return 0


def _wait_for_moves(admin: AdminClient, plan: dict, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        in_progress = set(admin.list_partition_reassignments(list(plan)))
        _, replicas, _ = admin.placement()
        done = sum(1 for tp, target in plan.items() if tp not in in_progress and list(replicas.get(tp, ())) == target)
        if done == len(plan):
            return True
        if time.monotonic() > deadline:
            print(f"Error: {len(plan) - done} of {len(plan)} moves still running after {wait_s:g} s; they "
                  f"continue (kbroker reassign --list)", file=sys.stderr)
            return False
        print(f"  {done} of {len(plan)} moves done", flush=True)
        time.sleep(1.0)


def _elect_preferred(admin: AdminClient) -> int:
    _, replicas, leaders = admin.placement()
    off = [tp for tp, r in replicas.items() if r and leaders.get(tp) != r[0]]
    if not off:
        return 0
    return sum(1 for e in admin.elect_leaders(off).values() if e is None)


def elect_leaders(admin: AdminClient, args: argparse.Namespace) -> int:
    if args.partition is not None and not args.topic:
        print("Error: --partition needs --topic", file=sys.stderr)
        return 2
    partitions = None
    if args.topic:
        _, replicas, _ = admin.placement()
        partitions = [tp for tp in replicas if tp[0] == args.topic and args.partition in (None, tp[1])]
        if not partitions:
            print(f"Error: no such partition: {args.topic}"
                  f"{'' if args.partition is None else f'-{args.partition}'}", file=sys.stderr)
            return 1
    results = admin.elect_leaders(partitions, ELECTION_TYPES[args.election_type])
    moved = sorted(tp for tp, e in results.items() if e is None)
    not_needed = sorted(tp for tp, e in results.items() if e is not None and e.name == "ELECTION_NOT_NEEDED")
    failed = {tp: e for tp, e in results.items() if e is not None and e.name != "ELECTION_NOT_NEEDED"}
    if moved:
        print(f"Successfully completed leader election ({args.election_type}) for partitions "
              f"{', '.join(f'{t}-{p}' for t, p in moved)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(f'{t}-{p}' for t, p in not_needed)}")
    for (t, p), e in sorted(failed.items()):
        print(f"Error: election for {t}-{p} failed: {e}", file=sys.stderr)
    return 1 if failed else 0
