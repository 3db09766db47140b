"""Client quotas over the Kafka protocol (DescribeClientQuotas, AlterClientQuotas), and
`kbroker quotas`: what `kafka-configs.sh --entity-type users|clients --alter --add-config
'producer_byte_rate=...'` and `kafka-configs.sh --entity-type users|clients --describe` do for
quotas, against kbroker or Apache Kafka (standard APIs only).

    kbroker quotas alter (--user U | --user-defaults) and/or (--client C | --client-defaults)
                         [--add-config 'k=v,k=v'] [--delete-config 'k,k'] [--validate-only]
    kbroker quotas describe [--user [U] | --user-defaults] [--client [C] | --client-defaults]
                            [--output table|json]

Keys: producer_byte_rate and consumer_byte_rate (bytes/s), request_percentage (% of one request
thread per quota window), controller_mutation_rate (partitions created or deleted per second).
`describe` with no entity lists every quota; with some it matches as kafka-configs does (strict:
`--user` alone lists user quotas, not user/client-id ones), a name exactly, `--user`/`--client`
with no name any user or client id, the `-defaults` flags the default entity. Every command takes
--bootstrap-server, --command-config and --timeout; a failure is one line on stderr with Kafka's
error name, and exit status 1.
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
from kbroker.wire.protocol import api_name

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
USER, CLIENT_ID = "user", "client-id"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
ANY = object()  # a filter component matching any name of its type


@dataclass(frozen=True)
class QuotaEntry:
    entity: dict[str, str | None]  # entity type -> name (None: the default)
    values: dict[str, float]


def _connection(admin: AdminClient, api_key: int) -> tuple[Connection, int]:
    connection = admin.any_connection()
    served = connection.versions.get(api_key)
    if served is None:
        raise AdminError(f"the broker at {connection.address} does not serve {api_name(api_key)}")
    return connection, min(1, served[1])


def describe_client_quotas(admin: AdminClient, components: Iterable[tuple[str, Any]] = (),
                           strict: bool = False) -> list[QuotaEntry]:
    """The quotas a filter selects: components are (entity type, match), match a name, None for the
    default entity or ANY for any name; KafkaErrorResponse when the broker refuses the filter."""
    data = []
    for entity_type, match in components:
        if match is ANY:
            data.append({"entity_type": entity_type, "match_type": MATCH_SPECIFIED, "match": None})
        elif match is None:
            data.append({"entity_type": entity_type, "match_type": MATCH_DEFAULT, "match": None})
        else:
            data.append({"entity_type": entity_type, "match_type": MATCH_EXACT, "match": match})
    connection, version = _connection(admin, DESCRIBE_CLIENT_QUOTAS)
    body = connection.call(DESCRIBE_CLIENT_QUOTAS, {"components": data, "strict": strict}, version=version)
    if body.error_code != ErrorCode.none:
        raise KafkaErrorResponse(body.error_code, "DescribeClientQuotas", body.error_message)
    return [QuotaEntry({e.entity_type: e.entity_name for e in entry.entity},
                       {v.key: float(v.value) for v in entry.values})
            for entry in body.entries or ()]


def alter_client_quotas(admin: AdminClient, alterations: Iterable[tuple[dict[str, str | None], dict[str, float | None]]],
                        validate_only: bool = False) -> list[tuple[dict[str, str | None], int, str | None]]:
    """Set (a number) or remove (None) quota keys of each entity; returns (entity, error code,
    message) per entity as the broker answered."""
    entries = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                        for k, v in ops.items()]}
               for entity, ops in alterations]
    connection, version = _connection(admin, ALTER_CLIENT_QUOTAS)
    body = connection.call(ALTER_CLIENT_QUOTAS, {"entries": entries, "validate_only": validate_only},
                           version=version)
    return [({e.entity_type: e.entity_name for e in r.entity}, int(r.error_code), r.error_message)
            for r in body.entries]


# -- the command -------------------------------------------------------------------------------------

def add_quotas_command(sub: Any) -> None:
    """Add `quotas` to the `kbroker` subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                        help="a broker to start from (default 127.0.0.1:9092)")
    add_command_config_argument(common)
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS")

    quotas = sub.add_parser("quotas", help="describe and alter client quotas (kafka-configs.sh --entity-type "
                                           "users|clients)")
    qsub = quotas.add_subparsers(dest="quotas_command", required=True)
    alter = qsub.add_parser("alter", parents=[common], help="set or delete quotas of a user, a client id or both")
    _entity_arguments(alter, optional_names=False)
    alter.add_argument("--add-config", metavar="K=V[,K=V...]", default="",
                       help=f"quotas to set: {', '.join(QUOTA_KEYS)}")
    alter.add_argument("--delete-config", metavar="K[,K...]", default="", help="quotas to remove")
    alter.add_argument("--validate-only", action="store_true", help="check with the broker, change nothing")
    describe = qsub.add_parser("describe", parents=[common], help="list quotas (all, or of the entities named)")
    _entity_arguments(describe, optional_names=True)
    describe.add_argument("--output", choices=("table", "json"), default="table")


def _entity_arguments(parser: argparse.ArgumentParser, optional_names: bool) -> None:
    user = parser.add_mutually_exclusive_group()
    client = parser.add_mutually_exclusive_group()
    if optional_names:
        user.add_argument("--user", nargs="?", const=ANY, metavar="USER", help="a user (no name: every user)")
        client.add_argument("--client", "--client-id", dest="client", nargs="?", const=ANY, metavar="CLIENT_ID",
                            help="a client id (no name: every client id)")
    else:
        user.add_argument("--user", metavar="USER", help="the user (its principal's name)")
        client.add_argument("--client", "--client-id", dest="client", metavar="CLIENT_ID", help="the client id")
    user.add_argument("--user-defaults", action="store_true", help="the default user entity")
    client.add_argument("--client-defaults", action="store_true", help="the default client-id entity")


def _entity(args: argparse.Namespace) -> dict[str, Any]:
    entity: dict[str, Any] = {}
    if args.user_defaults:
        entity[USER] = None
    elif args.user is not None:
        entity[USER] = args.user
    if args.client_defaults:
        entity[CLIENT_ID] = None
    elif args.client is not None:
        entity[CLIENT_ID] = args.client
    return entity


def _parse_add(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise AdminError(f"--add-config takes key=value pairs, got {part!r}")
        try:
            out[key.strip()] = float(value.strip())
        except ValueError:
            raise AdminError(f"--add-config {key.strip()}: {value.strip()!r} is not a number") from None
    return out


def _describe_entity(entity: dict[str, str | None]) -> str:
    parts = []
    for kind, label in ((USER, "user"), (CLIENT_ID, "client-id")):
        if kind in entity:
            parts.append(f"{label} <default>" if entity[kind] is None else f"{label} {entity[kind]!r}")
    return ", ".join(parts) or "no entity"


def _format_value(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    entity = _entity(args)
    if not entity:
        raise AdminError("name an entity: --user USER or --user-defaults, and/or --client CLIENT_ID or --client-defaults")
    ops: dict[str, float | None] = dict(_parse_add(args.add_config))
    for key in (k.strip() for k in args.delete_config.split(",")):
        if key:
            ops[key] = None
    if not ops:
        raise AdminError("nothing to change: give --add-config and/or --delete-config")
    results = alter_client_quotas(admin, [(entity, ops)], args.validate_only)
    for _entity_given, code, message in results:
        if code != ErrorCode.none:
            raise KafkaErrorResponse(code, f"AlterClientQuotas for {_describe_entity(entity)}", message)
    changes = [f"{k}={_format_value(v)}" for k, v in ops.items() if v is not None] + \
              [f"{k} deleted" for k, v in ops.items() if v is None]
    verb = "Validated" if args.validate_only else "Altered"
    print(f"{verb} quotas of {_describe_entity(entity)}: {', '.join(changes)}.")
    return 0


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    from kbroker.admin.groups import format_table

    entity = _entity(args)
    found = describe_client_quotas(admin, list(entity.items()), strict=bool(entity))

    def name(e: QuotaEntry, kind: str) -> str:
        if kind not in e.entity:
            return ""
        return "<default>" if e.entity[kind] is None else str(e.entity[kind])

    found.sort(key=lambda e: (name(e, USER), name(e, CLIENT_ID)))
    if args.output == "json":
        print(json.dumps([{"entity": e.entity, "quotas": e.values} for e in found], indent=2))
        return 0
    rows = [(name(e, USER), name(e, CLIENT_ID), key, _format_value(e.values[key]))
            for e in found for key in sorted(e.values)]
    print(format_table(("USER", "CLIENT-ID", "QUOTA", "VALUE"), rows))
    return 0


def run_quotas(args: argparse.Namespace) -> int:
    """Run a parsed `kbroker quotas ...`; 0 on success, 1 with one line on stderr on failure."""
    try:
        with AdminClient(args.bootstrap_server, args.timeout, security_of(args)) as admin:
            if args.quotas_command == "alter":
                return _alter(admin, args)
            return _describe(admin, args)
    except (AdminError, OSError) as exc:
        print(f"kbroker quotas: {exc}", file=sys.stderr)
        return 1
