"""`kbroker topics`: the jobs of Kafka's kafka-topics.sh, over the Kafka protocol.

    kbroker topics create TOPIC [--partitions N] [--replication-factor R] [--replica-assignment 1:2,2:3,...]
                                [--config K=V ...] [--if-not-exists]
    kbroker topics list [--exclude-internal]
    kbroker topics describe [--topic T ...] [--exclude-internal] [--under-replicated-partitions]
                            [--unavailable-partitions] [--under-min-isr-partitions] [--at-min-isr-partitions]
        (a partition being moved also shows its adding and removing replicas and how far the copy is)
    kbroker topics delete TOPIC [TOPIC ...] [--if-exists]
    kbroker topics alter TOPIC [--partitions N] [--config K=V ...] [--delete-config K ...]

Every command takes --bootstrap-server, --timeout and --output text|json. This module owns the
arguments, their parsing, the partition filters and the output (pure functions, tested without a
broker); `client` owns the wire.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from kbroker.admin.client import (DEFAULT_CONFIG_SOURCE, DEFAULT_TIMEOUT_S, AdminClient, AdminError, ConfigValue,
                                  KafkaErrorResponse, PartitionState, TopicState)
from kbroker.admin.log_dirs import LOG_DIRS_TIMEOUT_S
from kbroker.admin.shrink import PARTITIONERS, decrease
from kbroker.admin.progress import Move, moves_in_progress, progress_data, progress_text
from kbroker.admin.security import add_command_config_argument, security_of

# Kafka's internal topics (org.apache.kafka.common.internals.Topic); brokers also flag them in Metadata.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__delayed_messages", "__share_group_state"})
MIN_ISR = "min.insync.replicas"
MAX_REPLICATION_FACTOR = 32767  # an INT16 on the wire
FILTERS = ("under_replicated", "unavailable", "under_min_isr", "at_min_isr")


# -- arguments ---------------------------------------------------------------------------------------

def add_topics_command(sub: Any) -> None:
    """Add `topics` to the `kbroker` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                        help="a broker to start from (default 127.0.0.1:9092)")
    add_command_config_argument(common)
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"connect/read timeout and retry budget (default {DEFAULT_TIMEOUT_S:g})")
    common.add_argument("--output", choices=("text", "json", "table"), default="text",
                        help="text (kafka-topics' layout; 'table' is the same) or json")

    topics = sub.add_parser("topics", help="create, list, describe, alter and delete topics "
                                           "(what kafka-topics.sh does)")
    tsub = topics.add_subparsers(dest="topics_command", required=True)

    create = tsub.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, metavar="N",
                        help="partition count (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=int, metavar="R",
                        help="replicas per partition (default: the broker's default.replication.factor)")
    create.add_argument("--replica-assignment", metavar="B:B,B:B,...",
                        help="the replicas of each partition: partitions separated by commas, replicas by colons "
                             "(preferred leader first); excludes --partitions and --replication-factor")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config override (repeatable)")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")

    lst = tsub.add_parser("list", parents=[common], help="topic names")
    lst.add_argument("--exclude-internal", action="store_true",
                     help="leave out internal topics (__consumer_offsets, ...)")

    desc = tsub.add_parser("describe", parents=[common],
                           help="partition count, replication factor, overridden configs, and each partition's "
                                "leader, replicas, ISR and offline replicas")
    desc.add_argument("--topic", action="append", default=None, metavar="TOPIC",
                      help="describe this topic (repeatable; default: every topic)")
    desc.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    desc.add_argument("--under-replicated-partitions", dest="under_replicated", action="store_true",
                      help="only partitions whose ISR is smaller than their replicas")
    desc.add_argument("--unavailable-partitions", dest="unavailable", action="store_true",
                      help="only partitions without a leader, or whose leader is not a live broker")
    desc.add_argument("--under-min-isr-partitions", dest="under_min_isr", action="store_true",
                      help="only partitions whose ISR is smaller than the topic's min.insync.replicas "
                           "(or without a leader)")
    desc.add_argument("--at-min-isr-partitions", dest="at_min_isr", action="store_true",
                      help="only partitions whose ISR is exactly the topic's min.insync.replicas")

    delete = tsub.add_parser("delete", parents=[common], help="delete topics and their data")
    delete.add_argument("topic", nargs="+")
    delete.add_argument("--if-exists", action="store_true", help="succeed if a topic does not exist")

    alter = tsub.add_parser("alter", parents=[common], help="add partitions, or set and remove config overrides")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=int, metavar="N",
                       help="the new partition count; lower than now retires partitions (kbroker's own, cluster only)")
    alter.add_argument("--partitioner", choices=PARTITIONERS, default=None,
                       help="a decrease: where retired keyed records go — the producers' default partitioner "
                            "(murmur2: Java, kafka-python, aiokafka; consistent_random: librdkafka); sets the "
                            "topic's retired.records.partitioner (default murmur2)")
    alter.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                       help="set a topic config override (repeatable)")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove a topic config override, back to the broker's value (repeatable)")


def run_topics(args: argparse.Namespace) -> int:
    """Run a parsed `kbroker topics ...`; 0 on success, 1 with one line on stderr on failure."""
    command = {"create": _create, "list": _list, "describe": _describe, "delete": _delete,
               "alter": _alter}[args.topics_command]
    try:
        check = _CHECKS.get(args.topics_command)
        if check is not None:
            check(args)  # argument errors before any request
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as client:
            return command(client, args)
    except AdminError as exc:
        print(f"kbroker topics: {exc}", file=sys.stderr)
        return 1


def parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' --replica-assignment: "1:2,2:3" -> [[1, 2], [2, 3]] (partition 0 on brokers 1 and
    2, preferred leader first). Every partition needs the same number of distinct replicas."""
    out: list[list[int]] = []
    for index, part in enumerate(text.split(",")):
        try:
            replicas = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise AdminError(f"invalid --replica-assignment {text!r}: partition {index} is {part.strip()!r}, "
                             f"expected broker ids separated by ':'") from None
        duplicates = sorted({b for b in replicas if replicas.count(b) > 1})
        if duplicates:
            raise AdminError("Partition replica lists may not contain duplicate entries: "
                             + ",".join(map(str, duplicates)))
        if out and len(replicas) != len(out[0]):
            raise AdminError(f"Partition {index} has different replication factor: {replicas}")
        out.append(replicas)
    return out


def parse_configs(values: Iterable[str]) -> dict[str, str]:
    """KEY=VALUE pairs (the value may contain '=' and ','); a later key wins."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AdminError(f"invalid config {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def _check_create(args: argparse.Namespace) -> None:
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise AdminError("--replica-assignment cannot be combined with --partitions or --replication-factor")
        parse_replica_assignment(args.replica_assignment)
    if args.partitions is not None and args.partitions < 1:
        raise AdminError("The partitions must be greater than 0")
    if args.replication_factor is not None and not 1 <= args.replication_factor <= MAX_REPLICATION_FACTOR:
        raise AdminError(f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive")
    parse_configs(args.config)


def _check_alter(args: argparse.Namespace) -> None:
    if args.partitions is None and not args.config and not args.delete_config:
        raise AdminError("nothing to alter: give --partitions, --config or --delete-config")
    both = set(parse_configs(args.config)) & set(args.delete_config)
    if both:
        raise AdminError(f"config {sorted(both)[0]!r} is both set and deleted")


_CHECKS = {"create": _check_create, "alter": _check_alter}


# -- output ------------------------------------------------------------------------------------------

def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.output == "json":
        print(json.dumps(data, indent=2))
    elif text:
        print(text)


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def is_internal(topic: TopicState) -> bool:
    return topic.internal or topic.name in INTERNAL_TOPICS


# -- describe: the partition filters and the output --------------------------------------------------

def min_isr_of(configs: Sequence[ConfigValue]) -> int | None:
    """The topic's effective min.insync.replicas (None when the broker does not say)."""
    value = next((c.value for c in configs if c.name == MIN_ISR), None)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def overridden_configs(configs: Sequence[ConfigValue]) -> dict[str, str | None]:
    """The configs kafka-topics shows in a topic's header: every one not at its default (set on the
    topic, or through the broker's configuration)."""
    return {c.name: c.value for c in sorted(configs, key=lambda c: c.name) if c.source != DEFAULT_CONFIG_SOURCE}


def replication_factor(p: PartitionState, adding: Sequence[int] = ()) -> int:
    """kafka-topics' replication factor: while a move is in progress, the replicas the partition had
    before it (the full set less the adding replicas)."""
    return len(p.replicas) - len(adding)


def partition_flags(p: PartitionState, live: Iterable[int], min_isr: int | None,
                    adding: Sequence[int] = ()) -> dict[str, bool]:
    """kafka-topics' tests: under-replicated (ISR smaller than the replication factor: the replicas,
    less the adding ones of a move in progress, as Kafka counts them), unavailable (no leader, or the
    leader is not a live broker), under min ISR (no leader, or ISR smaller than min.insync.replicas),
    at min ISR (ISR exactly min.insync.replicas)."""
    has_leader = p.leader >= 0
    return {
        "under_replicated": len(p.isr) < replication_factor(p, adding),
        "unavailable": not has_leader or p.leader not in set(live),
        "under_min_isr": not has_leader or (min_isr is not None and len(p.isr) < min_isr),
        "at_min_isr": min_isr is not None and len(p.isr) == min_isr,
    }


def selected(flags: Mapping[str, bool], wanted: Sequence[str]) -> bool:
    """No filter: every partition; filters: partitions matching any of them (as kafka-topics)."""
    return not wanted or any(flags[f] for f in wanted)


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids))


def _adding(moves: Mapping[tuple[str, int], Move], topic: str, p: PartitionState) -> tuple[int, ...]:
    move = moves.get((topic, p.partition))
    return move.adding if move is not None else ()


def header_line(topic: TopicState, configs: Mapping[str, str | None],
                moves: Mapping[tuple[str, int], Move] | None = None) -> str:
    fields = [f"Topic: {topic.name}"]
    if topic.topic_id is not None:
        fields.append(f"TopicId: {topic.topic_id}")
    first = topic.partitions[0] if topic.partitions else None
    replication = replication_factor(first, _adding(moves or {}, topic.name, first)) if first else 0
    fields += [f"PartitionCount: {len(topic.partitions)}", f"ReplicationFactor: {replication}",
               "Configs: " + ",".join(f"{k}={v}" for k, v in configs.items())]
    return "\t".join(fields)


def partition_line(topic: str, p: PartitionState, move: Move | None = None) -> str:
    """kafka-topics' partition line; a partition being moved gets Kafka's Adding Replicas and
    Removing Replicas after its ISR, and kbroker's Progress of the copy at the end."""
    leader = p.leader if p.leader >= 0 else "none"
    line = (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\tReplicas: {_ids(p.replicas)}"
            f"\tIsr: {_ids(p.isr)}")
    if move is not None:
        line += f"\tAdding Replicas: {_ids(move.adding)}\tRemoving Replicas: {_ids(move.removing)}"
    line += f"\tOffline: {_ids(p.offline)}"
    if move is not None:
        line += f"\tProgress: {progress_text(move)}"
    return line


class TopicView(NamedTuple):
    topic: TopicState
    configs: dict[str, str | None]  # overridden only
    min_isr: int | None
    partitions: tuple[tuple[PartitionState, dict[str, bool]], ...]  # the selected ones, with their flags
    moves: Mapping[tuple[str, int], Move] = {}  # the topic's moves in progress


def topic_views(topics: Sequence[TopicState], configs: Mapping[str, Sequence[ConfigValue]], live: Iterable[int],
                wanted: Sequence[str], moves: Mapping[tuple[str, int], Move] | None = None) -> list[TopicView]:
    """What describe shows: each topic with its selected partitions; with filters, topics where no
    partition matches are left out."""
    live = set(live)
    moves = moves or {}
    out = []
    for t in topics:
        entries = configs.get(t.name, ())
        min_isr = min_isr_of(entries)
        parts = tuple((p, flags) for p in t.partitions
                      if selected(flags := partition_flags(p, live, min_isr, _adding(moves, t.name, p)), wanted))
        if wanted and not parts:
            continue
        mine = {tp: m for tp, m in moves.items() if tp[0] == t.name}
        out.append(TopicView(t, overridden_configs(entries), min_isr, parts, mine))
    return out


def describe_text(views: Sequence[TopicView], filtered: bool) -> str:
    """kafka-topics --describe: a header line per topic, then a line per partition; with a filter,
    only the matching partition lines."""
    lines = []
    for v in views:
        if not filtered:
            lines.append(header_line(v.topic, v.configs, v.moves))
        lines += [partition_line(v.topic.name, p, v.moves.get((v.topic.name, p.partition))) for p, _flags in v.partitions]
    return "\n".join(lines)


def _reassignment_data(move: Move | None) -> dict | None:
    if move is None:
        return None
    data = progress_data(move)
    return {k: data[k] for k in ("adding", "removing", "progress", "copied_bytes", "total_bytes", "leader_bytes",
                                 "replica_bytes", "unknown")}


def describe_data(views: Sequence[TopicView]) -> list[dict]:
    return [{
        "topic": v.topic.name,
        "topic_id": v.topic.topic_id,
        "internal": is_internal(v.topic),
        "partition_count": len(v.topic.partitions),
        "replication_factor": (replication_factor(v.topic.partitions[0], _adding(v.moves, v.topic.name,
                                                                                 v.topic.partitions[0]))
                               if v.topic.partitions else 0),
        "configs": v.configs,
        "min_insync_replicas": v.min_isr,
        "partitions": [{"partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
                        "replicas": list(p.replicas), "isr": list(p.isr), "offline": list(p.offline), **flags,
                        "reassignment": _reassignment_data(v.moves.get((v.topic.name, p.partition)))}
                       for p, flags in v.partitions],
    } for v in views]


def _describe(client: AdminClient, args: argparse.Namespace) -> int:
    brokers, topics = client.describe_topics(args.topic)
    if args.exclude_internal:
        topics = [t for t in topics if not is_internal(t)]
    configs = client.describe_topic_configs(t.name for t in topics)
    wanted = [f for f in FILTERS if getattr(args, f)]
    states = {(t.name, p.partition): p for t in topics for p in t.partitions}
    moves = moves_in_progress(client, brokers, states, list(states) if args.topic else None,
                              min(args.timeout, LOG_DIRS_TIMEOUT_S)) if states else {}
    views = topic_views(topics, configs, brokers, wanted, moves)
    _emit(args, describe_data(views), describe_text(views, filtered=bool(wanted)))
    return 0


# -- create, list, delete, alter ---------------------------------------------------------------------

def _create(client: AdminClient, args: argparse.Namespace) -> int:
    assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment is not None else None
    try:
        created = client.create_topic(args.topic, args.partitions, args.replication_factor, assignment,
                                      parse_configs(args.config))
    except KafkaErrorResponse as exc:
        if not (args.if_not_exists and exc.name == "TOPIC_ALREADY_EXISTS"):
            raise
        _warn(f"Topic '{args.topic}' already exists (--if-not-exists): nothing to do.")
        _emit(args, {"topic": args.topic, "created": False}, "")
        return 0
    _emit(args, {"topic": created.name, "created": True, "topic_id": created.topic_id,
                 "partitions": created.partitions, "replication_factor": created.replication_factor},
          f"Created topic {created.name}.")
    return 0


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    _brokers, topics = client.describe_topics(None)
    if args.exclude_internal:
        topics = [t for t in topics if not is_internal(t)]
    data = [{"topic": t.name, "topic_id": t.topic_id, "internal": is_internal(t), "partitions": len(t.partitions)}
            for t in topics]
    _emit(args, data, "\n".join(t.name for t in topics))
    return 0


def _delete(client: AdminClient, args: argparse.Namespace) -> int:
    results = client.delete_topics(args.topic)
    deleted = [name for name, error in results.items() if error is None]
    missing = [name for name, error in results.items()
               if error is not None and error.name == "UNKNOWN_TOPIC_OR_PARTITION" and args.if_exists]
    failed = {name: error for name, error in results.items() if error is not None and name not in missing}
    _emit(args, {"deleted": deleted, "not_found": missing, "failed": {n: e.name for n, e in failed.items()}},
          "\n".join(f"Deleted topic {name}." for name in deleted))
    if failed:
        raise next(iter(failed.values()))
    return 0


def _decrease(client: AdminClient, args: argparse.Namespace) -> list[str]:
    def progress(line: str) -> None:
        if args.output != "json":
            print(line, flush=True)

    drained = decrease(client, args.topic, args.partitions, partitioner=args.partitioner, progress=progress)
    retired = ", ".join(map(str, sorted(drained)))
    return [f"Topic {args.topic} now has {args.partitions} partitions; partitions {retired} are retired: what no "
            f"group had read there is copied into the others, and so is anything still sent there; their files "
            f"go after retention."]


def _alter(client: AdminClient, args: argparse.Namespace) -> int:
    lines = []
    if args.partitions is not None:
        try:
            current = len(client.partitions_of(args.topic))
        except AdminError:
            current = 0  # the broker's CreatePartitions answer says what is wrong
        if args.partitions <= current:  # kbroker's own: a decrease (or a drain run again)
            lines += _decrease(client, args)
        else:
            client.create_partitions(args.topic, args.partitions)
            lines.append(f"Topic {args.topic} now has {args.partitions} partitions.")
    set_configs = parse_configs(args.config)
    if set_configs or args.delete_config:
        client.alter_topic_configs(args.topic, set_configs, args.delete_config)
        lines += [f"Topic {args.topic}: set {k}={v}." for k, v in set_configs.items()]
        lines += [f"Topic {args.topic}: removed the override of {k}." for k in dict.fromkeys(args.delete_config)]
    _emit(args, {"topic": args.topic, "partitions": args.partitions, "set": set_configs,
                 "deleted": list(dict.fromkeys(args.delete_config))}, "\n".join(lines))
    return 0
