"""ACLs over the Kafka protocol (CreateAcls, DescribeAcls, DeleteAcls, v1-v3: only standard APIs,
so the same calls manage an Apache Kafka cluster's ACLs), and `kbroker acls`, which is
`kafka-acls.sh --bootstrap-server` with its options, rules and output:

    kbroker acls --add --allow-principal User:alice --operation Read --operation Write --topic orders
    kbroker acls --add --allow-principal User:app --producer --topic orders --transactional-id app- \\
        --resource-pattern-type prefixed --idempotent
    kbroker acls --add --allow-principal User:app --consumer --topic orders --group app
    kbroker acls --add --deny-principal User:mallory --deny-host 10.0.0.9 --operation All --topic '*'
    kbroker acls --list [--topic orders --resource-pattern-type match] [--principal User:alice] [--output json]
    kbroker acls --remove --allow-principal User:alice --operation Read --topic orders [--force]
    kbroker acls --remove --topic orders --force          # every ACL of the pattern

Options as Kafka's AclCommand: `--operation` defaults to All; hosts default to `*` for the given
principals; `--producer` is WRITE, DESCRIBE, CREATE on the topics (WRITE, DESCRIBE on the
transactional ids, IDEMPOTENT_WRITE on the cluster with `--idempotent`), `--consumer` READ,
DESCRIBE on the topics and READ on the groups; `--cluster` counts only with the literal pattern
type; `--remove` asks before deleting unless `--force` (no answer on stdin: nothing is deleted).
Every command also takes --command-config (a secured listener's client properties) and --timeout;
a failure is one line on stderr with Kafka's error name, and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, Iterable

from kio.schema.errors import ErrorCode

from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.connection import Connection
from kbroker.admin.security import add_command_config_argument, security_of
from kbroker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    entry_order,
    name_of,
    parse_operation,
    pattern_order,
)
from kbroker.wire.protocol import api_name, known_versions

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
CLIENT_VERSIONS = (1, 3)  # the shapes this client fills (v0 has no pattern type)


@dataclass(frozen=True)
class DeleteResult:
    """One DeleteAcls filter's answer: its error, and each binding it matched with the binding's error."""

    error_code: int
    error_message: str | None
    matched: list[tuple[AclBinding, int, str | None]]


def _connection(admin: AdminClient, api_key: int) -> tuple[Connection, int]:
    """Any broker (Kafka's admin client sends ACL requests to any), at the newest version it, kio
    and this client share."""
    connection = admin.any_connection()
    served = connection.versions.get(api_key)
    if served is None:
        raise AdminError(f"the broker at {connection.address} does not serve {api_name(api_key)}")
    known = known_versions(api_key)
    low, high = max(CLIENT_VERSIONS[0], served[0], known[0]), min(CLIENT_VERSIONS[1], served[1], known[-1])
    if high < low:
        raise AdminError(f"the broker at {connection.address} serves {api_name(api_key)} versions "
                         f"{served[0]}-{served[1]}; this client needs {CLIENT_VERSIONS[0]}-{CLIENT_VERSIONS[1]}")
    return connection, high


def _binding(fields: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.from_code(fields.resource_type), fields.resource_name,
                        PatternType.from_code(fields.pattern_type)),
        AccessControlEntry(fields.principal, fields.host, AclOperation.from_code(fields.operation),
                           AclPermissionType.from_code(fields.permission_type)))


def _filter_fields(f: AclBindingFilter) -> dict:
    return {"resource_type_filter": int(f.pattern_filter.resource_type), "resource_name_filter": f.pattern_filter.name,
            "pattern_type_filter": int(f.pattern_filter.pattern_type), "principal_filter": f.entry_filter.principal,
            "host_filter": f.entry_filter.host, "operation": int(f.entry_filter.operation),
            "permission_type": int(f.entry_filter.permission_type)}


def create_acls(admin: AdminClient, bindings: Iterable[AclBinding]) -> list[tuple[int, str | None]]:
    """CreateAcls: one (error code, message) per binding, as the broker answered."""
    bindings = list(bindings)
    connection, version = _connection(admin, CREATE_ACLS)
    body = connection.call(CREATE_ACLS, {"creations": [
        {"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
         "resource_pattern_type": int(b.pattern.pattern_type), "principal": b.entry.principal, "host": b.entry.host,
         "operation": int(b.entry.operation), "permission_type": int(b.entry.permission_type)} for b in bindings]},
        version=version)
    return [(int(r.error_code), r.error_message) for r in body.results]


def describe_acls(admin: AdminClient, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
    """DescribeAcls: the bindings the filter (default: every ACL) matches; KafkaErrorResponse for
    the broker's error."""
    connection, version = _connection(admin, DESCRIBE_ACLS)
    body = connection.call(DESCRIBE_ACLS, _filter_fields(acl_filter or AclBindingFilter()), version=version)
    if body.error_code != ErrorCode.none:
        raise KafkaErrorResponse(body.error_code, "DescribeAcls", body.error_message)
    return [AclBinding(ResourcePattern(ResourceType.from_code(r.resource_type), r.resource_name,
                                       PatternType.from_code(r.pattern_type)),
                       AccessControlEntry(a.principal, a.host, AclOperation.from_code(a.operation),
                                          AclPermissionType.from_code(a.permission_type)))
            for r in body.resources for a in r.acls]


def delete_acls(admin: AdminClient, filters: Iterable[AclBindingFilter]) -> list[DeleteResult]:
    """DeleteAcls: per filter, its error and the bindings it removed."""
    filters = list(filters)
    connection, version = _connection(admin, DELETE_ACLS)
    body = connection.call(DELETE_ACLS, {"filters": [_filter_fields(f) for f in filters]}, version=version)
    return [DeleteResult(int(r.error_code), r.error_message,
                         [(_binding(m), int(m.error_code), m.error_message) for m in r.matching_acls])
            for r in body.filter_results]


# -- the command (Kafka's AclCommand) -----------------------------------------------------------------

class UsageError(AdminError):
    """An option combination kafka-acls.sh refuses (its words)."""


def add_acls_command(sub: Any) -> None:
    """Add `acls` to the `kbroker` subcommands."""
    p = sub.add_parser("acls", help="add, list and remove ACLs (kafka-acls.sh)",
                       description="Manage ACLs as kafka-acls.sh --bootstrap-server does (any Kafka-compatible broker).")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                   help="a broker to start from (default 127.0.0.1:9092)")
    add_command_config_argument(p)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs (of the resources given, or all)")
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="principal allowed, e.g. User:alice (User:* is everyone)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME", help="principal denied")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="address the allowed principals may come from (default *: any)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                   help="address the denied principals are denied from (default *: any)")
    p.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                   help="operation allowed or denied (repeatable; default All): " + ", ".join(
                       name_of(o) for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)))
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic ('*': every topic)")
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="a consumer group ('*': every group)")
    p.add_argument("--cluster", action="store_true", help="the cluster")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                   help="a transactional id ('*': every one)")
    p.add_argument("--delegation-token", action="append", default=[], metavar="TOKEN", help="a delegation token")
    p.add_argument("--user-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="a user principal as a resource (CreateTokens, DescribeTokens)")
    p.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                   help="literal (default) or prefixed when adding; any or match too when listing or removing")
    p.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE, CREATE on the topics (and WRITE, "
                                                           "DESCRIBE on the transactional ids)")
    p.add_argument("--consumer", action="store_true", help="READ, DESCRIBE on the topics and READ on the groups")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--force", action="store_true", help="do not ask before removing")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                   help="with --list: only the ACLs of this principal (repeatable)")
    p.add_argument("--output", choices=("text", "json"), default="text", help="--list output (kbroker's own json)")


def _pattern_type(args: argparse.Namespace) -> PatternType:
    value = PatternType.__members__.get(args.resource_pattern_type.strip().upper())
    if value is None or value == PatternType.UNKNOWN:
        raise UsageError(f"Unknown resource-pattern-type: {args.resource_pattern_type} (ANY|MATCH|LITERAL|PREFIXED)")
    return value


def _principal(text: str) -> str:
    principal = text.strip()
    if ":" not in principal:
        raise AdminError(f"expected a string in format principalType:principalName but got {principal}")
    return principal


def _operation(text: str) -> AclOperation:
    operation = parse_operation(text.strip())
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):  # also Kafka's enum names: IDEMPOTENT_WRITE
        operation = AclOperation.__members__.get(text.strip().upper(), AclOperation.UNKNOWN)
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise UsageError(f"unknown operation {text!r}: one of " + ", ".join(
            name_of(o) for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)))
    return operation


def check_args(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs, with its words."""
    if args.list:
        for flag in ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"):
            if getattr(args, flag):
                raise UsageError(f"Option \"[list]\" can't be used with option \"[{flag.replace('_', '-')}]\"")
    for shortcut in ("producer", "consumer"):
        if getattr(args, shortcut):
            for flag in ("operation", "deny_principal", "deny_host"):
                if getattr(args, flag):
                    raise UsageError(f"Option \"[{shortcut}]\" can't be used with option \"[{flag.replace('_', '-')}]\"")
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or
                          (not args.producer and (args.cluster or args.transactional_id))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                         "--transactional-id option should be specified.")


def resource_filters(args: argparse.Namespace, die_if_none: bool = True) -> list[ResourcePatternFilter]:
    """AclCommand.getResourceFilter: the resources named on the command line."""
    pattern_type = _pattern_type(args)
    out: list[ResourcePatternFilter] = []

    def add(f: ResourcePatternFilter) -> None:
        if f not in out:
            out.append(f)

    for topic in args.topic:
        add(ResourcePatternFilter(ResourceType.TOPIC, topic.strip(), pattern_type))
    if pattern_type == PatternType.LITERAL and (args.cluster or args.idempotent):
        add(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    for group in args.group:
        add(ResourcePatternFilter(ResourceType.GROUP, group.strip(), pattern_type))
    for transactional_id in args.transactional_id:
        add(ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, transactional_id, pattern_type))
    for token in args.delegation_token:
        add(ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, token.strip(), pattern_type))
    for user in args.user_principal:
        add(ResourcePatternFilter(ResourceType.USER, user.strip(), pattern_type))
    if not out and die_if_none:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                         "or --delegation-token <Delegation Token ID>")
    return out


def _entries(args: argparse.Namespace, operations: Iterable[AclOperation]) -> list[AccessControlEntry]:
    """AclCommand.getAcl: allowed principals x operations x allowed hosts (default `*`), the same
    for the denied ones."""
    operations = sorted(set(operations))
    out: list[AccessControlEntry] = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        parsed = list(dict.fromkeys(_principal(p) for p in principals))
        host_set = list(dict.fromkeys(h.strip() for h in hosts)) or ([WILDCARD_HOST] if parsed else [])
        out += [AccessControlEntry(p, h, o, permission) for p in parsed for o in operations for h in host_set]
    return list(dict.fromkeys(out))


def filters_to_entries(args: argparse.Namespace) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    """AclCommand.getResourceFilterToAcls: per resource filter, the entries the options make
    (--producer / --consumer's, or --operation's), checked against the resource type's operations."""
    Op = AclOperation
    out: dict[ResourcePatternFilter, list[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        operations = [_operation(o) for o in args.operation] or [Op.ALL]
        for f in resource_filters(args):
            out[f] = _entries(args, operations)
    if args.producer:
        for f in resource_filters(args):
            if f.resource_type == ResourceType.TOPIC:
                out[f] = _entries(args, [Op.WRITE, Op.DESCRIBE, Op.CREATE])
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = _entries(args, [Op.WRITE, Op.DESCRIBE])
        if args.idempotent:
            out[ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)] = \
                _entries(args, [Op.IDEMPOTENT_WRITE])
    if args.consumer:
        for f in resource_filters(args):
            if f.resource_type == ResourceType.TOPIC:
                out[f] = list(dict.fromkeys(_entries(args, [Op.READ, Op.DESCRIBE]) + out.get(f, [])))
            elif f.resource_type == ResourceType.GROUP:
                out[f] = _entries(args, [Op.READ])
    for f, entries in out.items():  # AclCommand.validateOperation
        valid = SUPPORTED_OPERATIONS.get(f.resource_type, frozenset()) | {Op.ALL}
        if any(e.operation not in valid for e in entries):
            raise UsageError(f"ResourceType {f.resource_type.name} only supports operations "
                             + ", ".join(name_of(o) for o in sorted(valid)))
    return out


def _entries_text(entries: Iterable[AccessControlEntry]) -> str:
    return "\n".join(f"\t{e}" for e in sorted(entries, key=entry_order))


def _confirm(args: argparse.Namespace, message: str) -> bool:
    if args.force:
        return True
    print(message, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"


def _add(admin: AdminClient, args: argparse.Namespace) -> int:
    pattern_type = _pattern_type(args)
    if not pattern_type.is_specific:
        raise UsageError(f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when adding acls.")
    to_add = filters_to_entries(args)
    if any(not entries for entries in to_add.values()):
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    for f, entries in to_add.items():
        pattern = ResourcePattern(f.resource_type, f.name or "", f.pattern_type)
        print(f"Adding ACLs for resource `{pattern}`: \n {_entries_text(entries)} \n")
        results = create_acls(admin, [AclBinding(pattern, e) for e in entries])
        for entry, (code, message) in zip(entries, results):
            if code != ErrorCode.none:
                raise KafkaErrorResponse(code, f"CreateAcls for {pattern} {entry}", message)
    return 0


def _check_deleted(results: list[DeleteResult], what: str) -> int:
    removed = 0
    for r in results:
        if r.error_code != ErrorCode.none:
            raise KafkaErrorResponse(r.error_code, f"DeleteAcls for {what}", r.error_message)
        for binding, code, message in r.matched:
            if code != ErrorCode.none:
                raise KafkaErrorResponse(code, f"DeleteAcls of {binding}", message)
            removed += 1
    return removed


def _remove(admin: AdminClient, args: argparse.Namespace) -> int:
    for f, entries in filters_to_entries(args).items():
        if not entries:
            if _confirm(args, f"Are you sure you want to delete all ACLs for resource filter `{f}`? (y/n)"):
                n = _check_deleted(delete_acls(admin, [AclBindingFilter(f, AccessControlEntryFilter())]), str(f))
                print(f"Removed {n} ACL{'s' if n != 1 else ''} of resource filter `{f}`.")
        elif _confirm(args, f"Are you sure you want to remove ACLs: \n {_entries_text(entries)} \n "
                            f"from resource filter `{f}`? (y/n)"):
            n = _check_deleted(delete_acls(admin, [AclBindingFilter(f, e.to_filter()) for e in entries]), str(f))
            print(f"Removed {n} ACL{'s' if n != 1 else ''} of resource filter `{f}`.")
    return 0


def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    filters = resource_filters(args, die_if_none=False)
    principals = [_principal(p) for p in args.principal]
    found: list[AclBinding] = []
    if not filters:
        found = describe_acls(admin)
    for f in filters:
        found += describe_acls(admin, AclBindingFilter(f, AccessControlEntryFilter()))
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in found:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    patterns = sorted(by_pattern, key=pattern_order)
    if args.output == "json":
        rows = [{"resourceType": p.resource_type.name, "patternType": p.pattern_type.name, "name": p.name,
                 "principal": e.principal, "host": e.host, "operation": e.operation.name,
                 "permissionType": e.permission_type.name}
                for p in patterns for e in sorted(by_pattern[p], key=entry_order)
                if not principals or e.principal in principals]
        print(json.dumps(rows, indent=2))
        return 0

    def show(keep) -> None:
        for p in patterns:
            entries = [e for e in by_pattern[p] if keep(e)]
            if entries:
                print(f"Current ACLs for resource `{p}`: \n {_entries_text(entries)} \n")

    if not principals:
        show(lambda e: True)
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        show(lambda e, principal=principal: e.principal == principal)
    return 0


def run_acls(args: argparse.Namespace) -> int:
    """Run a parsed `kbroker acls ...`; 0 on success, 1 with one line on stderr on failure."""
    try:
        check_args(args)
        if args.add or args.remove:
            filters_to_entries(args)  # the options' mistakes before any connection
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as admin:
            if args.add:
                return _add(admin, args)
            if args.remove:
                return _remove(admin, args)
            return _list(admin, args)
    except (AdminError, OSError) as exc:
        print(f"kbroker acls: {exc}", file=sys.stderr)
        return 1
