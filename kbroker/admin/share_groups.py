"""`kbroker share-groups`: the jobs of Kafka 4's kafka-share-groups.sh (ShareGroupCommand), over the
Kafka protocol only, so it works against kbroker and Apache Kafka 4 alike.

    kbroker share-groups --list [--state [STATE,...]]
    kbroker share-groups --describe --group G [--members | --offsets | --state] [--verbose]
    kbroker share-groups --reset-offsets --group G [--topic T[:P,P...] ...] STRATEGY [--dry-run | --execute]
    kbroker share-groups --delete-offsets --group G --topic T [--topic T ...]
    kbroker share-groups --delete --group G [--group G ...]

Every command takes --bootstrap-server, --command-config and --timeout. Requests go to the group's
coordinator (FindCoordinator, key type 0): ShareGroupDescribe (77) v1, DescribeShareGroupOffsets (90)
v0-1, AlterShareGroupOffsets (91) v0, DeleteShareGroupOffsets (92) v0, DeleteGroups (42); ListGroups
(16) v5 with types_filter ["share"] goes to every broker. A broker serves the share APIs only with
`group.coordinator.rebalance.protocols` including `share`; without them the command says so.

Output follows ShareGroupCommand's columns (the tables laid out as `kbroker groups` lays them out);
a failure is one line on stderr with Kafka's error name, and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode

from kbroker.admin.client import (
    DEFAULT_TIMEOUT_S,
    EARLIEST,
    LATEST,
    LIST_GROUPS,
    AdminClient,
    AdminError,
    Broker,
    GroupListing,
    KafkaErrorResponse,
)
from kbroker.admin.consumer_groups import described_assignment
from kbroker.admin.groups import format_table, reset_spec
from kbroker.admin.reset import (
    PlanError,
    parse_topic_spec,
    plan_reset,
)
from kbroker.admin.security import add_command_config_argument, security_of

SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS = 77, 90, 91, 92
# (lowest, highest) version this command fills and reads, per share API.
SHARE_VERSIONS = {SHARE_GROUP_DESCRIBE: (1, 1), DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
                  ALTER_SHARE_GROUP_OFFSETS: (0, 0), DELETE_SHARE_GROUP_OFFSETS: (0, 0)}
API_NAMES = {SHARE_GROUP_DESCRIBE: "ShareGroupDescribe", DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
             ALTER_SHARE_GROUP_OFFSETS: "AlterShareGroupOffsets", DELETE_SHARE_GROUP_OFFSETS: "DeleteShareGroupOffsets"}
LIST_GROUPS_TYPES_VERSION = 5  # the first ListGroups version with types_filter

SHARE_STATES = ("Empty", "Stable", "Dead")  # GroupState.groupStatesForType(SHARE), as ListGroups names them
_RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
              ErrorCode.not_coordinator}
ENABLE_HINT = "share groups are off: start the broker with group.coordinator.rebalance.protocols=classic,consumer,share"

OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
OFFSET_HEADERS_VERBOSE = ("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG")
MEMBER_HEADERS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
MEMBER_HEADERS_VERBOSE = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")
STATE_HEADERS = ("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS")
STATE_HEADERS_VERBOSE = ("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")
RESET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")

TopicAssignment = tuple[tuple[str, tuple[int, ...]], ...]


class ShareMember(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    member_epoch: int
    assignment: TopicAssignment


class ShareGroupDescription(NamedTuple):
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...]
    coordinator: Broker


class ShareOffset(NamedTuple):
    topic: str
    partition: int
    leader_epoch: int | None
    start_offset: int | None  # None: the group has no state for the partition
    lag: int | None


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


# -- the wire ----------------------------------------------------------------------------------------

def share_call(client: AdminClient, group: str, api_key: int, data: dict[str, Any],
               error_of: Callable[[Any], int]) -> tuple[Any, Broker]:
    """Call the group's coordinator with a share API at the highest version both know; look the
    coordinator up again and retry while it loads or has moved, until the client's timeout.
    `error_of(body)` gives the group-level error code."""
    lo, hi = SHARE_VERSIONS[api_key]
    deadline = time.monotonic() + client.timeout
    backoff = 0.05
    while True:
        coordinator = client.find_coordinator(group)
        conn = client.connection(coordinator.host, coordinator.port)
        served = conn.versions.get(api_key)
        if served is None:
            raise AdminError(f"the broker at {conn.address} does not serve {API_NAMES[api_key]} ({ENABLE_HINT})")
        version = min(hi, served[1])
        if version < max(lo, served[0]):
            raise AdminError(f"the broker at {conn.address} serves {API_NAMES[api_key]} versions "
                             f"{served[0]}-{served[1]}; this command needs {lo}-{hi}")
        body = conn.call(api_key, data, version)
        code = error_of(body)
        if code not in _RETRIABLE:
            return body, coordinator
        client._coordinators.pop(group, None)
        if time.monotonic() + backoff > deadline:
            raise KafkaErrorResponse(code, f"{API_NAMES[api_key]} for group {group!r} (gave up after "
                                           f"{client.timeout:g} s)")
        time.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


def list_share_groups(client: AdminClient, states: Iterable[str] = ()) -> list[GroupListing]:
    """ListGroups v5+ with types_filter ["share"] at every broker, sorted by group id."""
    brokers, _ = client.metadata([])
    out: dict[str, GroupListing] = {}
    for broker in sorted(brokers.values()):
        conn = client.connection(broker.host, broker.port)
        version = conn.version(LIST_GROUPS)
        if version < LIST_GROUPS_TYPES_VERSION:
            raise AdminError(f"the broker at {conn.address} serves ListGroups up to v{version}; listing share "
                             f"groups needs v{LIST_GROUPS_TYPES_VERSION} (Kafka 4)")
        body = conn.call(LIST_GROUPS, {"states_filter": sorted(states), "types_filter": ["share"]}, version)
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, f"ListGroups from {conn.address}")
        for g in body.groups:
            out[g.group_id] = GroupListing(g.group_id, g.group_state, g.protocol_type, g.group_type or "share")
    return [out[k] for k in sorted(out)]


def _other_type(client: AdminClient, group: str) -> str | None:
    """The type of a group that exists but is not a share group (None: no such group)."""
    for g in client.list_groups():
        if g.group_id == group and g.group_type != "share":
            return g.group_type or "classic"
    return None


def _not_found(client: AdminClient, group: str, what: str) -> AdminError:
    """GROUP_ID_NOT_FOUND said as Kafka's tool says it: not a share group, or no such group."""
    other = _other_type(client, group)
    if other is not None:
        return AdminError(f"Group '{group}' is not a share group (it is a {other} group): GROUP_ID_NOT_FOUND")
    return AdminError(f"Share group '{group}' does not exist ({what}): GROUP_ID_NOT_FOUND")


def describe_share_group(client: AdminClient, group: str) -> ShareGroupDescription | None:
    """ShareGroupDescribe v1 at the coordinator; None for GROUP_ID_NOT_FOUND (no such group, or a
    group of another type)."""
    def entry_of(body: Any) -> Any:
        entries = [g for g in body.groups if g.group_id == group]
        if len(entries) != 1:
            raise AdminError(f"ShareGroupDescribe answered {len(body.groups)} groups, none for {group!r}")
        return entries[0]

    body, coordinator = share_call(client, group, SHARE_GROUP_DESCRIBE,
                                   {"group_ids": [group], "include_authorized_operations": False},
                                   lambda b: entry_of(b).error_code)
    e = entry_of(body)
    if e.error_code == ErrorCode.group_id_not_found:
        return None
    if e.error_code != ErrorCode.none:
        raise KafkaErrorResponse(e.error_code, f"ShareGroupDescribe for group {group!r}", e.error_message)
    members = tuple(sorted((ShareMember(m.member_id, m.client_id, m.client_host, int(m.member_epoch),
                                        described_assignment(m.assignment)) for m in e.members),
                           key=lambda m: m.member_id))
    return ShareGroupDescription(e.group_id, e.group_state, int(e.group_epoch), int(e.assignment_epoch),
                                 members, coordinator)


def share_group_offsets(client: AdminClient, group: str) -> list[ShareOffset] | None:
    """DescribeShareGroupOffsets (every partition the group has state for), sorted; None for
    GROUP_ID_NOT_FOUND. Lag is None before v1 (and where the broker does not know it)."""
    def entry_of(body: Any) -> Any:
        entries = [g for g in body.groups if g.group_id == group]
        if len(entries) != 1:
            raise AdminError(f"DescribeShareGroupOffsets answered {len(body.groups)} groups, none for {group!r}")
        return entries[0]

    body, _ = share_call(client, group, DESCRIBE_SHARE_GROUP_OFFSETS,
                         {"groups": [{"group_id": group, "topics": None}]}, lambda b: entry_of(b).error_code)
    e = entry_of(body)
    if e.error_code == ErrorCode.group_id_not_found:
        return None
    if e.error_code != ErrorCode.none:
        raise KafkaErrorResponse(e.error_code, f"DescribeShareGroupOffsets for group {group!r}", e.error_message)
    out = []
    for t in e.topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                raise KafkaErrorResponse(p.error_code, f"DescribeShareGroupOffsets for {t.topic_name}-"
                                                       f"{p.partition_index}", p.error_message)
            lag = getattr(p, "lag", -1)
            out.append(ShareOffset(t.topic_name, int(p.partition_index),
                                   None if p.leader_epoch < 0 else int(p.leader_epoch),
                                   None if p.start_offset < 0 else int(p.start_offset),
                                   None if lag is None or lag < 0 else int(lag)))
    return sorted(out)


def alter_share_group_offsets(client: AdminClient, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """AlterShareGroupOffsets v0: the group's start offsets (refused with NON_EMPTY_GROUP while it has members)."""
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append({"partition_index": partition, "start_offset": offset})
    data = {"group_id": group, "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}
    body, _ = share_call(client, group, ALTER_SHARE_GROUP_OFFSETS, data, lambda b: b.error_code)
    if body.error_code != ErrorCode.none:
        raise KafkaErrorResponse(body.error_code, f"AlterShareGroupOffsets for group {group!r}", body.error_message)
    for t in body.responses:
        for p in t.partitions:
            if p.error_code != ErrorCode.none:
                raise KafkaErrorResponse(p.error_code, f"AlterShareGroupOffsets for {t.topic_name}-"
                                                       f"{p.partition_index}", p.error_message)


def delete_share_group_offsets(client: AdminClient, group: str, topics: Sequence[str]
                               ) -> dict[str, KafkaErrorResponse | None]:
    """DeleteShareGroupOffsets v0: the result per topic; a group-level error is raised."""
    data = {"group_id": group, "topics": [{"topic_name": t} for t in dict.fromkeys(topics)]}
    body, _ = share_call(client, group, DELETE_SHARE_GROUP_OFFSETS, data, lambda b: b.error_code)
    if body.error_code != ErrorCode.none:
        raise KafkaErrorResponse(body.error_code, f"DeleteShareGroupOffsets for group {group!r}", body.error_message)
    out: dict[str, KafkaErrorResponse | None] = {t: None for t in dict.fromkeys(topics)}
    for r in body.responses:
        if r.error_code != ErrorCode.none:
            out[r.topic_name] = KafkaErrorResponse(r.error_code, f"topic {r.topic_name!r}", r.error_message)
    return out


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
    by_lower = {s.lower(): s for s in SHARE_STATES}
    out = []
    for name in filter(None, (v.strip() for v in value.split(","))):
        state = by_lower.get(name.lower())
        if state is None:
            raise AdminError(f"Invalid state list '{value}'. Valid states are: {', '.join(SHARE_STATES)}")
        out.append(state)
    return sorted(set(out))


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    if args.state is None:  # Kafka prints the ids alone
        for g in list_share_groups(client):
            print(g.group_id)
        return 0
    groups = list_share_groups(client, parse_states(args.state))
    print(format_table(("GROUP", "STATE"), [(g.group_id, g.state) for g in groups]))
    return 0


def _described(client: AdminClient, group: str) -> ShareGroupDescription:
    desc = describe_share_group(client, group)
    if desc is None:
        raise _not_found(client, group, "ShareGroupDescribe")
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
    offsets = share_group_offsets(client, group)
    if offsets is None:
        raise _not_found(client, group, "DescribeShareGroupOffsets")
    if not desc.members:
        print(f"Share group '{group}' has no active members.", file=sys.stderr)
    if not offsets:
        print(f"Share group '{group}' has no offset information.")
        return 0
    print(format_table(OFFSET_HEADERS_VERBOSE if verbose else OFFSET_HEADERS, offset_rows(group, offsets, verbose)))
    return 0


def _reset(client: AdminClient, args: argparse.Namespace) -> int:
    group = args.group[0]
    spec = reset_spec(args)  # argument errors before any request
    desc = describe_share_group(client, group)
    if desc is None:
        other = _other_type(client, group)
        if other is not None:
            raise AdminError(f"Group '{group}' is not a share group (it is a {other} group): GROUP_ID_NOT_FOUND")
    elif desc.state not in ("Empty", "Dead") or desc.members:
        raise AdminError(f"Share group '{group}' is not empty (state {desc.state}, {len(desc.members)} members); "
                         f"stop its consumers first: NON_EMPTY_GROUP")
    current = {(o.topic, o.partition): o.start_offset for o in (share_group_offsets(client, group) or ())
               if o.start_offset is not None}
    if args.topic:
        wanted: set[tuple[str, int]] = set()
        for topic_spec in args.topic:
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
    plan, warnings = plan_reset(partitions_to_reset, spec, current, log_start, log_end, by_time)
    for w in warnings:
        print(w, file=sys.stderr)
    if args.execute:
        alter_share_group_offsets(client, group, {(p.topic, p.partition): p.new for p in plan})
    print(format_table(RESET_HEADERS, [(group, p.topic, p.partition, p.new) for p in plan]))
    if not args.execute:
        print("Dry run: nothing was altered. Add --execute to alter these start offsets.", file=sys.stderr)
    return 0


def _delete_offsets(client: AdminClient, args: argparse.Namespace) -> int:
    group = args.group[0]
    try:
        results = delete_share_group_offsets(client, group, args.topic)
    except KafkaErrorResponse as exc:
        if exc.code == ErrorCode.group_id_not_found:
            raise _not_found(client, group, "DeleteShareGroupOffsets") from None
        if exc.code == ErrorCode.non_empty_group:
            raise AdminError(f"Share group '{group}' is not empty; stop its consumers first: NON_EMPTY_GROUP") from None
        raise
    print(format_table(("TOPIC", "STATUS"), [(t, "Successful" if e is None else f"Error: {e.name}")
                                             for t, e in sorted(results.items())]))
    return 1 if any(e is not None for e in results.values()) else 0


def _delete(client: AdminClient, args: argparse.Namespace) -> int:
    listed = {g.group_id: g for g in list_share_groups(client)}
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
