"""`kbroker reassign`: what kafka-reassign-partitions.sh does, over the Kafka protocol.

    kbroker reassign --plan FILE --execute [--throttle BYTES_PER_S]
                                               start the moves of a plan (AlterPartitionReassignments),
                                               their catch-up throttled (see `throttle`)
    kbroker reassign --plan FILE --verify [--preserve-throttles]
                                               report each partition of the plan: done, moving, or not
                                               started; with no move left in the cluster, remove the throttle
    kbroker reassign --plan FILE --cancel      cancel the plan's moves still running (back to the old replicas)
    kbroker reassign --list                    the moves in progress (ListPartitionReassignments)
    kbroker reassign --generate --topics T[,T...] --brokers 1,2,3 [--plan FILE]
                                               propose a plan placing those topics on those brokers

The plan is Kafka's JSON: {"version": 1, "partitions": [{"topic": "t", "partition": 0,
"replicas": [1, 2, 3], "log_dirs": ["any", "any", "any"]}]}, so plans written for Kafka work. This
module owns the arguments, the plan format and the output; `client` owns the wire.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kbroker.admin import throttle
from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.security import add_command_config_argument, security_of

PLAN_VERSION = 1
Plan = dict[tuple[str, int], list[int]]


class PlanError(ValueError):
    """A plan file that is not Kafka's reassignment JSON."""


def add_reassign_command(sub: Any) -> None:
    p = sub.add_parser("reassign", help="move partition replicas between brokers (what "
                                        "kafka-reassign-partitions.sh does)")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]")
    add_command_config_argument(p)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS")
    p.add_argument("--plan", metavar="FILE", help="the reassignment plan (Kafka's JSON format)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", action="store_true", help="start the plan's moves")
    action.add_argument("--verify", action="store_true", help="report the plan's progress")
    action.add_argument("--cancel", action="store_true", help="cancel the plan's moves in progress")
    action.add_argument("--list", action="store_true", help="list the moves in progress")
    action.add_argument("--generate", action="store_true", help="propose a plan (printed, or written to --plan)")
    p.add_argument("--topics", metavar="T[,T...]", help="--generate: the topics to place")
    p.add_argument("--brokers", metavar="ID[,ID...]", help="--generate: the brokers to place them on")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="--execute: limit the replication of the moving replicas to this rate on every broker "
                        "involved, until --verify finds every move done")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="--verify: leave the throttle in place even when every move is done")


# -- the plan format -------------------------------------------------------------------------------------

def parse_plan(text: str) -> Plan:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise PlanError('a plan is {"version": 1, "partitions": [...]}')
    plan: Plan = {}
    for entry in doc["partitions"]:
        try:
            topic, partition, replicas = entry["topic"], entry["partition"], entry["replicas"]
        except (KeyError, TypeError):
            raise PlanError(f"each partition needs topic, partition and replicas: {entry!r}") from None
        if not isinstance(topic, str) or not isinstance(partition, int) or not isinstance(replicas, list) \
                or not all(isinstance(r, int) for r in replicas):
            raise PlanError(f"malformed partition entry {entry!r}")
        if (topic, partition) in plan:
            raise PlanError(f"{topic}-{partition} appears twice")
        plan[(topic, partition)] = replicas
    return plan


def format_plan(plan: Plan) -> str:
    return json.dumps({"version": PLAN_VERSION, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(plan.items())]})


def generate(current: Plan, brokers: list[int]) -> Plan:
    """Each partition keeps its replication factor; replicas go round-robin over `brokers`,
    shifted per partition so leaderships spread too (what --generate proposes)."""
    if not brokers:
        raise PlanError("--brokers is empty")
    out: Plan = {}
    for i, ((topic, partition), replicas) in enumerate(sorted(current.items())):
        factor = len(replicas)
        if factor > len(brokers):
            raise PlanError(f"{topic}-{partition} has {factor} replicas but only {len(brokers)} brokers are given")
        out[(topic, partition)] = [brokers[(i + k) % len(brokers)] for k in range(factor)]
    return out


def verify(plan: Plan, current: Plan, moving: set[tuple[str, int]]) -> list[str]:
    """A line per partition of the plan: complete, still moving, or not as planned."""
    lines = []
    for (topic, p), target in sorted(plan.items()):
        name = f"{topic}-{p}"
        if (topic, p) in moving:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif current.get((topic, p)) == target:
            lines.append(f"Reassignment of partition {name} is completed.")
        elif (topic, p) not in current:
            lines.append(f"Partition {name} does not exist.")
        else:
            lines.append(f"There is no active reassignment of partition {name}, but replica set is "
                         f"{current[(topic, p)]} rather than {target}.")
    return lines


# -- running it ------------------------------------------------------------------------------------------

def run_reassign(args: argparse.Namespace) -> int:
    try:
        with AdminClient(args.bootstrap_server, timeout=args.timeout, security=security_of(args)) as admin:
            return _run(admin, args)
    except (PlanError, AdminError, KafkaErrorResponse, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def _read_plan(args: argparse.Namespace) -> Plan:
    if not args.plan:
        raise PlanError("--plan FILE is required")
    with open(args.plan) as f:
        return parse_plan(f.read())


def _current(admin: AdminClient, topics) -> Plan:
    _brokers, states = admin.describe_topics(sorted(set(topics)))
    return {(t.name, p.partition): list(p.replicas) for t in states for p in t.partitions}


def _run(admin: AdminClient, args: argparse.Namespace) -> int:
    if args.list:
        moving = admin.list_partition_reassignments()
        for (topic, p), (replicas, adding, removing) in sorted(moving.items()):
            print(f"{topic}-{p}: replicas {list(replicas)}, adding {list(adding)}, removing {list(removing)}")
        if not moving:
            print("No partition reassignments in progress.")
        return 0
    if args.generate:
        if not args.topics or not args.brokers:
            raise PlanError("--generate needs --topics and --brokers")
        current = _current(admin, args.topics.split(","))
        proposed = generate(current, [int(b) for b in args.brokers.split(",")])
        print(f"Current partition replica assignment\n{format_plan(current)}\n")
        print(f"Proposed partition reassignment configuration\n{format_plan(proposed)}")
        if args.plan:
            with open(args.plan, "w") as f:
                f.write(format_plan(proposed) + "\n")
        return 0
    plan = _read_plan(args)
    if args.throttle >= 0 and not args.execute:
        raise PlanError("--throttle goes with --execute")
    if args.execute:
        current = _current(admin, {t for t, _ in plan})
        print(f"Current partition replica assignment\n\n{format_plan({k: current[k] for k in plan if k in current})}\n")
        print("Save this to use as the --plan JSON during rollback")
        if args.throttle >= 0:  # before the moves start, so their catch-up is throttled from the first byte
            print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                  "throttle is removed.")
            moves = throttle.proposed_moves(admin.list_partition_reassignments(), plan, current)
            print("\n".join(throttle.set_throttle(admin, moves, args.throttle)))
        errors = admin.alter_partition_reassignments(plan)
        return _report(errors, "Successfully started partition reassignment", "start")
    if args.cancel:
        errors = admin.alter_partition_reassignments({k: None for k in plan})
        return _report(errors, "Successfully cancelled partition reassignment", "cancel")
    in_progress = admin.list_partition_reassignments()
    lines = verify(plan, _current(admin, {t for t, _ in plan}), set(in_progress) & set(plan))
    print("Status of partition reassignment:")
    print("\n".join(lines))
    if not in_progress and not args.preserve_throttles:
        # Kafka's rule: the rates are per broker and shared by every move, so they go only when
        # no move at all is left; the brokers are all live ones and the plan's
        print("\n".join(throttle.clear_throttles(admin, {t for t, _ in plan}, {b for r in plan.values() for b in r})))
    return 0 if all(line.endswith("is completed.") for line in lines) else 1


def _report(errors: dict, ok: str, verb: str) -> int:
    failed = {k: e for k, e in errors.items() if e is not None}
    done = sorted(k for k, e in errors.items() if e is None)
    if done:
        print(f"{ok}s for {', '.join(f'{t}-{p}' for t, p in done)}")
    for (topic, p), error in sorted(failed.items()):
        print(f"Error: could not {verb} the reassignment of {topic}-{p}: {error}", file=sys.stderr)
    return 1 if failed else 0
