"""`kbroker share-groups`: the jobs of Kafka 4's kafka-share-groups.sh (ShareGroupCommand), over the
Kafka protocol only, so it works against kbroker and Apache Kafka 4 alike.

    kbroker share-groups --list [--state [STATE,...]]
    kbroker share-groups --describe --group G [--members | --offsets | --state] [--verbose]
    kbroker share-groups --reset-offsets --group G [--topic T[:P,P...] ...] STRATEGY [--dry-run | --execute]
    kbroker share-groups --delete-offsets --group G --topic T [--topic T ...]
    kbroker share-groups --delete --group G [--group G ...]

Every command takes --bootstrap-server, --command-config and --timeout. The requests are
AdminClient's share-group calls (`share_calls.py`: ShareGroupDescribe, DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets at the group's coordinator, ListGroups v5 with
types_filter ["share"] at every broker) and DeleteGroups. A broker serves the share APIs only with
`group.coordinator.rebalance.protocols` including `share`; without them the command says so. This
module owns the options, the checks between them and the tables; the rows are pure functions the
console uses too.

Output follows ShareGroupCommand's columns (the tables laid out as `kbroker groups` lays them out);
a failure is one line on stderr with Kafka's error name, and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.client import (
    DEFAULT_TIMEOUT_S,
    EARLIEST,
    LATEST,
    SHARE_STATES,
    AdminClient,
    AdminError,
    KafkaErrorResponse,
    ShareGroupDescription,
    ShareOffset,
    TopicAssignment,
)
from kbroker.admin.groups import format_table, reset_spec, states_named
from kbroker.admin.reset import (
    PlanError,
    PlannedOffset,
    ResetSpec,
    parse_topic_spec,
    plan_reset,
)
from kbroker.admin.security import add_command_config_argument, security_of

OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
OFFSET_HEADERS_VERBOSE = ("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG")
MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
MEMBER_HEADERS_VERBOSE = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS")
STATE_HEADERS_VERBOSE = ("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
RESET_STRATEGIES = ("to-earliest", "to-latest", "to-datetime", "to-offset")  # ShareGroupCommand's: no --shift-by

# -- arguments ---------------------------------------------------------------------------------------

def add_share_groups_command(sub: Any) -> None:
    """Add `share-groups` to the `kbroker` subcommands (kafka-share-groups.sh's options)."""
    p = sub.add_parser("share-groups", help="list, describe, reset and delete share groups "
                                            "(what kafka-share-groups.sh does)")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                   help="a broker to start from (default 127.0.0.1:9092)")
    add_command_config_argument(p)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"connect/read timeout and retry budget (default {DEFAULT_TIMEOUT_S:g})")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the share groups")
    action.add_argument("--describe", action="store_true", help="describe a share group (default: its offsets)")
    action.add_argument("--reset-offsets", action="store_true",
                        help="plan (default) or --execute new start offsets for a share group without members")
    action.add_argument("--delete-offsets", action="store_true", help="delete the group's state for --topic")
    action.add_argument("--delete", action="store_true", help="delete empty share groups")
    p.add_argument("--group", action="append", metavar="GROUP", help="the share group (repeatable for --delete)")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]", help="a topic or some of its partitions")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATE[,STATE...]",
                   help=f"--list: only groups in these states ({', '.join(SHARE_STATES)}), with a STATE column; "
                        f"--describe: the group's state")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="--describe: the members and their assignments")
    view.add_argument("--offsets", action="store_true", help="--describe: start offsets and lag (the default)")
    p.add_argument("--verbose", action="store_true", help="--describe: epochs too")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int, metavar="N")
    how.add_argument("--to-datetime", metavar="ISO8601",
                     help="e.g. 2024-05-01T12:00:00.000+00:00 (local time without a zone)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="--reset-offsets: alter the start offsets")
    mode.add_argument("--dry-run", action="store_true", help="--reset-offsets: only print the plan (the default)")


def _check_args(args: argparse.Namespace) -> None:
    """What argparse cannot say: which options go with which action (Kafka's checkArgs)."""
    if args.list and args.group:
        raise AdminError("option --list does not take --group")
    if not args.list and not args.group:
        raise AdminError("option --group is required with --describe, --reset-offsets, --delete-offsets and --delete")
    if args.group and not args.delete and len(args.group) > 1:
        raise AdminError("give one --group (several only with --delete)")
    if args.state is not None and not (args.describe or args.list):
        raise AdminError("option --state goes with --list or --describe")
    if args.state and args.describe:
        raise AdminError("--describe --state takes no value")
    if args.describe and args.state is not None and (args.members or args.offsets):
        raise AdminError("give one of --members, --offsets and --state")
    if (args.members or args.offsets or args.verbose) and not args.describe:
        raise AdminError("options --members, --offsets and --verbose go with --describe")
    strategy = args.to_earliest or args.to_latest or args.to_offset is not None or args.to_datetime is not None
    if args.reset_offsets and not strategy:
        raise AdminError("option --reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    if strategy and not args.reset_offsets:
        raise AdminError("options --to-earliest, --to-latest, --to-offset and --to-datetime go with --reset-offsets")
    if (args.execute or args.dry_run) and not args.reset_offsets:
        raise AdminError("options --execute and --dry-run go with --reset-offsets")
    if args.delete_offsets and not args.topic:
        raise AdminError("option --delete-offsets needs --topic")
    if args.topic and not (args.reset_offsets or args.delete_offsets):
        raise AdminError("option --topic goes with --reset-offsets or --delete-offsets")


def run_share_groups(args: argparse.Namespace) -> int:
    """Run a parsed `kbroker share-groups ...`; 0 on success, 1 with one line on stderr on failure."""
    try:
        _check_args(args)
        command = (_list if args.list else _describe if args.describe else _reset if args.reset_offsets
                   else _delete_offsets if args.delete_offsets else _delete)
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as client:
            return command(client, args)
    except (AdminError, PlanError) as exc:
        print(f"kbroker share-groups: {exc}", file=sys.stderr)
        return 1


# -- refusals ----------------------------------------------------------------------------------------

def _other_type(client: AdminClient, group: str) -> str | None:
    """The type of a group that exists but is not a share group (None: no such group)."""
    for g in client.list_groups():
        if g.group_id == group and g.group_type != "share":
            return g.group_type or "classic"
    return None


def share_group_not_found(client: AdminClient, group: str, what: str) -> AdminError:
    """GROUP_ID_NOT_FOUND said as Kafka's tool says it: not a share group, or no such group
    (`what`: the request that answered it)."""
    other = _other_type(client, group)
    if other is not None:
        return AdminError(f"Group '{group}' is not a share group (it is a {other} group): GROUP_ID_NOT_FOUND")
    return AdminError(f"Share group '{group}' does not exist ({what}): GROUP_ID_NOT_FOUND")


# -- pure: rows --------------------------------------------------------------------------------------

def assignment_text(assignment: TopicAssignment) -> str:
    """`t:0,1;u:3` as ShareGroupCommand prints an assignment."""
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in assignment if ps)


def offset_rows(group: str, offsets: Sequence[ShareOffset], verbose: bool = False) -> list[tuple]:
    if verbose:
        return [(group, o.topic, o.partition, o.leader_epoch, o.start_offset, o.lag) for o in offsets]
    return [(group, o.topic, o.partition, o.start_offset, o.lag) for o in offsets]


def member_rows(desc: ShareGroupDescription, verbose: bool = False) -> list[tuple]:
    out = []
    for m in desc.members:
        count = sum(len(ps) for _t, ps in m.assignment)
        row = (desc.group_id, m.member_id, m.client_host, m.client_id, count)
        out.append((*row, m.member_epoch, assignment_text(m.assignment)) if verbose
                   else (*row, assignment_text(m.assignment)))
    return out


def state_row(desc: ShareGroupDescription, verbose: bool = False) -> tuple:
    c = desc.coordinator
    coordinator = f"{c.host}:{c.port} ({c.node_id})"
    if verbose:
        return (desc.group_id, coordinator, desc.state, desc.group_epoch, desc.assignment_epoch, len(desc.members))
    return (desc.group_id, coordinator, desc.state, len(desc.members))


# -- commands ----------------------------------------------------------------------------------------

def parse_states(value: str) -> list[str]:
    return states_named([value], SHARE_STATES, lambda value, _name: f"Invalid state list '{value}'. Valid states "
                        f"are: {', '.join(SHARE_STATES)}")


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    if args.state is None:  # Kafka prints the ids alone
        for g in client.list_share_groups():
            print(g.group_id)
        return 0
    groups = client.list_share_groups(parse_states(args.state))
    print(format_table(("GROUP", "STATE"), [(g.group_id, g.state) for g in groups]))
    return 0


def _described(client: AdminClient, group: str) -> ShareGroupDescription:
    desc = client.describe_share_group(group)
    if desc is None:
        raise share_group_not_found(client, group, "ShareGroupDescribe")
    return desc


def _describe(client: AdminClient, args: argparse.Namespace) -> int:
    group = args.group[0]
    desc = _described(client, group)
    verbose = args.verbose
    if args.state is not None:
        print(format_table(STATE_HEADERS_VERBOSE if verbose else STATE_HEADERS, [state_row(desc, verbose)]))
        return 0
    if args.members:
        if not desc.members:
            print(f"Share group '{group}' has no active members.")
            return 0
        print(format_table(MEMBER_HEADERS_VERBOSE if verbose else MEMBER_HEADERS, member_rows(desc, verbose)))
        return 0
    offsets = client.describe_share_group_offsets(group)
    if offsets is None:
        raise share_group_not_found(client, group, "DescribeShareGroupOffsets")
    if not desc.members:
        print(f"Share group '{group}' has no active members.", file=sys.stderr)
    if not offsets:
        print(f"Share group '{group}' has no offset information.")
        return 0
    print(format_table(OFFSET_HEADERS_VERBOSE if verbose else OFFSET_HEADERS, offset_rows(group, offsets, verbose)))
    return 0


def plan_share_group_reset(client: AdminClient, group: str, spec: ResetSpec, topic_specs: Sequence[str] | None
                           ) -> tuple[list[PlannedOffset], list[str]]:
    """The start offsets a reset would set, with Kafka's warnings (clamping); `topic_specs` are
    `T` or `T:P,P...` (None or empty: every partition the group has state for). Refused while the
    group has members, and for a group of another type."""
    desc = client.describe_share_group(group)
    if desc is None:
        other = _other_type(client, group)
        if other is not None:
            raise AdminError(f"Group '{group}' is not a share group (it is a {other} group): GROUP_ID_NOT_FOUND")
    elif desc.state not in ("Empty", "Dead") or desc.members:
        raise AdminError(f"Share group '{group}' is not empty (state {desc.state}, {len(desc.members)} members); "
                         f"stop its consumers first: NON_EMPTY_GROUP")
    current = {(o.topic, o.partition): o.start_offset for o in (client.describe_share_group_offsets(group) or ())
               if o.start_offset is not None}
    if topic_specs:
        wanted: set[tuple[str, int]] = set()
        for topic_spec in topic_specs:
            topic, partitions = parse_topic_spec(topic_spec)
            wanted.update((topic, p) for p in (partitions if partitions is not None else client.partitions_of(topic)))
        partitions_to_reset = sorted(wanted)
    else:
        partitions_to_reset = sorted(current)
    if not partitions_to_reset:
        raise AdminError(f"nothing to reset: share group '{group}' has no offsets; name partitions with --topic")
    log_start = client.list_offsets(partitions_to_reset, EARLIEST)
    log_end = client.list_offsets(partitions_to_reset, LATEST)
    by_time = client.list_offsets(partitions_to_reset, spec.value) if spec.strategy == "to-datetime" else None
    return plan_reset(partitions_to_reset, spec, current, log_start, log_end, by_time)


def _reset(client: AdminClient, args: argparse.Namespace) -> int:
    group = args.group[0]
    spec = reset_spec(args)  # argument errors before any request
    plan, warnings = plan_share_group_reset(client, group, spec, args.topic)
    for w in warnings:
        print(w, file=sys.stderr)
    if args.execute:
        client.alter_share_group_offsets(group, {(p.topic, p.partition): p.new for p in plan})
    print(format_table(RESET_HEADERS, [(group, p.topic, p.partition, p.new) for p in plan]))
    if not args.execute:
        print("Dry run: nothing was altered. Add --execute to alter these start offsets.", file=sys.stderr)
    return 0


def _delete_offsets(client: AdminClient, args: argparse.Namespace) -> int:
    group = args.group[0]
    try:
        results = client.delete_share_group_offsets(group, args.topic)
    except KafkaErrorResponse as exc:
        if exc.code == ErrorCode.group_id_not_found:
            raise share_group_not_found(client, group, "DeleteShareGroupOffsets") from None
        if exc.code == ErrorCode.non_empty_group:
            raise AdminError(f"Share group '{group}' is not empty; stop its consumers first: NON_EMPTY_GROUP") from None
        raise
    print(format_table(("TOPIC", "STATUS"), [(t, "Successful" if e is None else f"Error: {e.name}")
                                             for t, e in sorted(results.items())]))
    return 1 if any(e is not None for e in results.values()) else 0


def _delete(client: AdminClient, args: argparse.Namespace) -> int:
    listed = {g.group_id: g for g in client.list_share_groups()}
    deleted, failed = [], {}
    for group in dict.fromkeys(args.group):
        listing = listed.get(group)
        if listing is None:
            failed[group] = f"Group '{group}' is not a share group: GROUP_ID_NOT_FOUND"
            continue
        if listing.state not in (None, "Empty"):
            failed[group] = f"Share group '{group}' is not EMPTY (state {listing.state}): NON_EMPTY_GROUP"
            continue
        try:
            client.delete_group(group)
            deleted.append(group)
        except KafkaErrorResponse as exc:
            failed[group] = exc.name
    if deleted:
        print("Deletion of requested share groups (" + ", ".join(f"'{g}'" for g in deleted) + ") was successful.")
    for g, why in failed.items():  # one line each, as every failure of this command
        print(f"kbroker share-groups: Group '{g}' could not be deleted due to: {why}", file=sys.stderr)
    return 1 if failed else 0
