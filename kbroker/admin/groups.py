"""`kbroker groups`: the jobs of Kafka's kafka-consumer-groups.sh, over the Kafka protocol.

    kbroker groups list [--state STATE ...]
    kbroker groups describe GROUP
    kbroker groups reset-offsets GROUP (--topic T[:P,P...] ... | --all-topics) STRATEGY [--execute]
    kbroker groups delete GROUP [GROUP ...]

Every command takes --bootstrap-server, --timeout and --output table|json. This module owns the
arguments, the assembly of what the client fetched into rows (pure functions, tested without a
broker) and the output; `client` owns the wire, `consumer_groups` ConsumerGroupDescribe (the
KIP-848 groups' epochs and target assignments), `reset` the offset arithmetic.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from kbroker.admin.client import (DEFAULT_TIMEOUT_S, EARLIEST, LATEST, AdminClient, AdminError, Broker,
                                  GroupDescription, KafkaErrorResponse, TopicPartition)
from kbroker.admin.consumer_groups import (MEMBER_HEADERS, STATE_HEADERS, ConsumerGroupDescription,
                                           describe_consumer_group, member_json, member_rows, state_row)
from kbroker.admin.consumer_protocol import ConsumerProtocolError, decode_assignment, decode_subscription
from kbroker.admin.reset import PlanError, PlannedOffset, ResetSpec, parse_datetime_ms, parse_topic_spec, plan_reset
from kbroker.admin.security import add_command_config_argument, security_of

# Group states as Kafka names them (classic and KIP-848 groups); ListGroups filters by exact name.
STATES = ("Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Dead",
          "Assigning", "Reconciling", "NotReady")
RESETTABLE_STATES = ("Empty", "Dead")
CONSUMER_PROTOCOL = "consumer"
OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID")


# -- arguments ---------------------------------------------------------------------------------------

def add_groups_command(sub: Any) -> None:
    """Add `groups` to the `kbroker` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                        help="a broker to start from (default 127.0.0.1:9092)")
    add_command_config_argument(common)
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"connect/read timeout and retry budget (default {DEFAULT_TIMEOUT_S:g})")
    common.add_argument("--output", choices=("table", "json"), default="table")

    groups = sub.add_parser("groups", help="list, describe, reset and delete consumer groups "
                                           "(what kafka-consumer-groups.sh does)")
    gsub = groups.add_subparsers(dest="groups_command", required=True)

    lst = gsub.add_parser("list", parents=[common], help="groups with their type, state and protocol type")
    lst.add_argument("--state", action="append", default=None, metavar="STATE",
                     help=f"only groups in this state (repeatable or comma-separated): {', '.join(STATES)}")

    desc = gsub.add_parser("describe", parents=[common],
                           help="offsets, lag, members and state of a group (epochs and target "
                                "assignments of a consumer-protocol group)")
    desc.add_argument("group")

    reset = gsub.add_parser("reset-offsets", parents=[common],
                            help="plan (default) or --execute new committed offsets for an inactive group")
    reset.add_argument("group")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]",
                       help="a topic (every partition) or some of its partitions; repeatable")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-datetime", metavar="ISO8601", help="e.g. 2024-05-01T12:00:00.000+00:00 (local time without a zone)")
    how.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    how.add_argument("--to-offset", type=int, metavar="N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")

    delete = gsub.add_parser("delete", parents=[common], help="delete empty groups and their offsets")
    delete.add_argument("group", nargs="+")


def run_groups(args: argparse.Namespace) -> int:
    """Run a parsed `kbroker groups ...`; 0 on success, 1 with one line on stderr on failure."""
    command = {"list": _list, "describe": _describe, "reset-offsets": _reset, "delete": _delete}[args.groups_command]
    try:
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as client:
            return command(client, args)
    except (AdminError, PlanError, ConsumerProtocolError) as exc:
        print(f"kbroker groups: {exc}", file=sys.stderr)
        return 1


# -- output ------------------------------------------------------------------------------------------

def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns, one space apart, absent values as "-" (Kafka's tool layout)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [" ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [list(headers), *cells]]
    return "\n".join(lines)


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2) if args.output == "json" else text)


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


# -- list --------------------------------------------------------------------------------------------

def parse_states(values: Iterable[str] | None) -> list[str] | None:
    """Kafka's state names from user input (case-insensitive, comma-separated allowed)."""
    if values is None:
        return None
    return states_named(values, STATES, lambda _value, name: f"unknown group state {name!r}; known states: "
                        f"{', '.join(STATES)}")


def states_named(values: Iterable[str], known: Sequence[str], refusal) -> list[str]:
    """The states of `known` named in `values` (case-insensitive, comma-separated), sorted, once
    each; AdminError(refusal(value, name)) for a name that is none of them."""
    by_lower = {s.lower(): s for s in known}
    out = []
    for value in values:
        for name in filter(None, (v.strip() for v in value.split(","))):
            state = by_lower.get(name.lower())
            if state is None:
                raise AdminError(refusal(value, name))
            out.append(state)
    return sorted(set(out))


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    groups = client.list_groups(parse_states(args.state))
    data = [{"group_id": g.group_id, "group_type": g.group_type, "state": g.state, "protocol_type": g.protocol_type}
            for g in groups]
    _emit(args, data, format_table(("GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"),
                                   [(g.group_id, g.group_type, g.state, g.protocol_type) for g in groups]))
    return 0


# -- describe ----------------------------------------------------------------------------------------

class MemberView(NamedTuple):
    consumer_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[tuple[str, tuple[int, ...]], ...]
    subscribed_topics: tuple[str, ...]
    error: str | None  # why the payloads could not be read, if they could not


class OffsetRow(NamedTuple):
    topic: str | None  # None: a member with nothing assigned
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


def member_views(desc: GroupDescription) -> list[MemberView]:
    """Members with their assignment and subscription decoded (consumer-protocol groups only).
    A payload that does not decode is reported on the member, not fatal: other members still show."""
    out = []
    for m in desc.members:
        assignment: tuple = ()
        topics: tuple = ()
        error = None
        if desc.protocol_type == CONSUMER_PROTOCOL:
            try:
                assignment = decode_assignment(m.assignment).partitions
                topics = decode_subscription(m.metadata).topics
            except ConsumerProtocolError as exc:
                error = str(exc)
        out.append(MemberView(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment, topics, error))
    return out


def offset_rows(members: Sequence[MemberView], committed: Mapping[TopicPartition, int],
                log_end: Mapping[TopicPartition, int | None]) -> list[OffsetRow]:
    """Kafka's --describe --offsets rows: each assigned partition with its member, committed
    partitions nobody is assigned, then members with nothing assigned. CURRENT-OFFSET and LAG are
    absent where nothing is committed."""
    owner: dict[TopicPartition, MemberView] = {}
    for m in members:
        for topic, parts in m.assignment:
            for p in parts:
                owner[(topic, p)] = m
    rows = []
    for tp in sorted(set(owner) | set(committed)):
        m = owner.get(tp)
        current, end = committed.get(tp), log_end.get(tp)
        lag = end - current if current is not None and end is not None else None
        rows.append(OffsetRow(tp[0], tp[1], current, end, lag, m and m.consumer_id, m and m.host, m and m.client_id))
    for m in members:
        if not any(parts for _t, parts in m.assignment):
            rows.append(OffsetRow(None, None, None, None, None, m.consumer_id, m.host, m.client_id))
    return rows


def describe_data(desc: GroupDescription, members: Sequence[MemberView], rows: Sequence[OffsetRow]) -> dict:
    """`--output json` of a classic group: the consumer-protocol keys are there, null."""
    return {
        "group": desc.group_id,
        "group_type": "classic",
        "state": desc.state,
        "protocol_type": desc.protocol_type,
        "assignment_strategy": desc.protocol,
        "group_epoch": None,
        "assignment_epoch": None,
        "coordinator": _coordinator_json(desc.coordinator),
        "members": [{"consumer_id": m.consumer_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                     "host": m.host, "rack": None, "member_epoch": None, "subscribed_topics": list(m.subscribed_topics),
                     "subscribed_topic_regex": None,
                     "assignment": [{"topic": t, "partitions": list(ps)} for t, ps in m.assignment],
                     "target_assignment": None, "pending_revocation": None, "error": m.error} for m in members],
        "offsets": [r._asdict() for r in rows],
    }


def _coordinator_json(c: Broker) -> dict:
    return {"id": c.node_id, "host": c.host, "port": c.port}


def describe_text(desc: GroupDescription, members: Sequence[MemberView], rows: Sequence[OffsetRow]) -> str:
    parts = []
    if not members:
        parts.append(f"Consumer group '{desc.group_id}' has no active members.\n")
    parts.append(format_table(OFFSET_HEADERS, [(desc.group_id, *r) for r in rows]))
    c = desc.coordinator
    parts.append("\n" + format_table(("GROUP", "TYPE", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                                     [(desc.group_id, "classic", f"{c.host}:{c.port} ({c.node_id})", desc.protocol,
                                       desc.state, len(members))]))
    if members:
        def assignment(m: MemberView) -> str:
            return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in m.assignment if ps)

        parts.append("\n" + format_table(
            ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"),
            [(desc.group_id, m.consumer_id, m.group_instance_id, m.host, m.client_id,
              sum(len(ps) for _t, ps in m.assignment), assignment(m)) for m in members]))
    return "\n".join(parts)


def describe_group_offsets(client: AdminClient, group: str
                           ) -> tuple[GroupDescription, list[MemberView], list[OffsetRow]]:
    """A group's description, its members decoded and its offset rows with the lag of each
    partition (log end offsets from the leaders). A group nobody knows is an AdminError."""
    desc = client.describe_group(group)
    committed = client.committed_offsets(group)
    if desc.state == "Dead" and not desc.members and not committed:
        raise AdminError(f"consumer group '{group}' does not exist")
    members = member_views(desc)
    return desc, members, _offset_rows_with_lag(client, members, committed)


def _offset_rows_with_lag(client: AdminClient, members: Sequence[MemberView],
                          committed: Mapping[TopicPartition, int]) -> list[OffsetRow]:
    assigned = {(t, p) for m in members for t, ps in m.assignment for p in ps}
    log_end = client.list_offsets(assigned | set(committed), LATEST, strict=False)
    return offset_rows(members, committed, log_end)


# -- describe: consumer-protocol groups (KIP-848) ------------------------------------------------------

def consumer_member_views(desc: ConsumerGroupDescription) -> list[MemberView]:
    """The members as the offsets table wants them: each with what it holds now."""
    return [MemberView(m.member_id, m.instance_id, m.client_id, m.client_host, m.assignment,
                       m.subscribed_topic_names, None) for m in desc.members]


def consumer_describe_data(desc: ConsumerGroupDescription, rows: Sequence[OffsetRow]) -> dict:
    return {
        "group": desc.group_id,
        "group_type": "consumer",
        "state": desc.state,
        "protocol_type": CONSUMER_PROTOCOL,
        "assignment_strategy": desc.assignor,
        "group_epoch": desc.group_epoch,
        "assignment_epoch": desc.assignment_epoch,
        "coordinator": _coordinator_json(desc.coordinator),
        "members": [member_json(m) for m in desc.members],
        "offsets": [r._asdict() for r in rows],
    }


def consumer_describe_text(desc: ConsumerGroupDescription, rows: Sequence[OffsetRow]) -> str:
    """The offsets table (as for classic groups), the group's state with its epochs, and each
    member's current and target assignment and what it still has to give up."""
    parts = []
    if not desc.members:
        parts.append(f"Consumer group '{desc.group_id}' has no active members.\n")
    parts.append(format_table(OFFSET_HEADERS, [(desc.group_id, *r) for r in rows]))
    parts.append("\n" + format_table(STATE_HEADERS, [state_row(desc)]))
    if desc.members:
        parts.append("\n" + format_table(MEMBER_HEADERS, member_rows(desc)))
    return "\n".join(parts)


def _describe(client: AdminClient, args: argparse.Namespace) -> int:
    consumer = describe_consumer_group(client, args.group)
    if consumer is not None:
        members = consumer_member_views(consumer)
        rows = _offset_rows_with_lag(client, members, client.committed_offsets(args.group))
        _emit(args, consumer_describe_data(consumer, rows), consumer_describe_text(consumer, rows))
        return 0
    desc, members, rows = describe_group_offsets(client, args.group)
    for m in members:
        if m.error:
            _warn(f"member {m.consumer_id}: {m.error}")
    _emit(args, describe_data(desc, members, rows), describe_text(desc, members, rows))
    return 0


# -- reset-offsets -----------------------------------------------------------------------------------

def reset_spec(args: argparse.Namespace) -> ResetSpec:
    """The reset strategy the options name (`kbroker groups` and `kbroker share-groups`, which has
    no --shift-by)."""
    if args.to_earliest:
        return ResetSpec("to-earliest")
    if args.to_latest:
        return ResetSpec("to-latest")
    if args.to_datetime is not None:
        return ResetSpec("to-datetime", parse_datetime_ms(args.to_datetime))
    if getattr(args, "shift_by", None) is not None:
        return ResetSpec("shift-by", args.shift_by)
    return ResetSpec("to-offset", args.to_offset)


def _partitions_to_reset(client: AdminClient, topic_specs: Sequence[str] | None,
                         committed: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    if topic_specs is None:
        return sorted(committed)
    out: set[TopicPartition] = set()
    for spec in topic_specs:
        topic, partitions = parse_topic_spec(spec)
        for p in partitions if partitions is not None else client.partitions_of(topic):
            out.add((topic, p))
    return sorted(out)


def plan_group_reset(client: AdminClient, group: str, spec: ResetSpec, topic_specs: Sequence[str] | None
                     ) -> tuple[list[PlannedOffset], list[str]]:
    """The new offsets a reset would commit, with Kafka's warnings (clamping); `topic_specs`
    are `T` or `T:P,P...` (None: every partition the group has committed). Refused while the
    group has members."""
    consumer = describe_consumer_group(client, group)  # DescribeGroups answers a consumer group Dead
    state = consumer.state if consumer is not None else client.describe_group(group).state
    if state not in RESETTABLE_STATES:
        raise AdminError(f"assignments can only be reset if the group '{group}' is inactive, "
                         f"but the current state is {state}")
    committed = client.committed_offsets(group)
    partitions = _partitions_to_reset(client, topic_specs, committed)
    if not partitions:
        raise AdminError(f"nothing to reset: group '{group}' has no committed offsets")
    log_start = client.list_offsets(partitions, EARLIEST)
    log_end = client.list_offsets(partitions, LATEST)
    by_time = client.list_offsets(partitions, spec.value) if spec.strategy == "to-datetime" else None
    return plan_reset(partitions, spec, committed, log_start, log_end, by_time)


def _reset(client: AdminClient, args: argparse.Namespace) -> int:
    spec = reset_spec(args)  # argument errors before any request
    plan, warnings = plan_group_reset(client, args.group, spec, None if args.all_topics else args.topic)
    for w in warnings:
        _warn(w)
    if args.execute:
        client.commit_offsets(args.group, {(p.topic, p.partition): p.new for p in plan})
    data = {"group": args.group, "executed": bool(args.execute),
            "offsets": [{"topic": p.topic, "partition": p.partition, "current_offset": p.current,
                         "new_offset": p.new} for p in plan]}
    _emit(args, data, format_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                                   [(args.group, p.topic, p.partition, p.new) for p in plan]))
    if not args.execute:
        _warn("Dry run: nothing was committed. Add --execute to commit these offsets.")
    return 0


# -- delete ------------------------------------------------------------------------------------------

def _delete(client: AdminClient, args: argparse.Namespace) -> int:
    deleted, failed = [], {}
    for group in dict.fromkeys(args.group):
        try:
            client.delete_group(group)
            deleted.append(group)
        except KafkaErrorResponse as exc:
            failed[group] = exc.name
    lines = []
    if deleted:
        lines.append("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in deleted)
                     + ") was successful.")
    if failed:
        lines.append("Deletion of some consumer groups failed:")
        lines += [f"* Group '{g}' could not be deleted due to: {name}" for g, name in failed.items()]
    _emit(args, {"deleted": deleted, "failed": failed}, "\n".join(lines))
    return 1 if failed else 0
