"""`kbroker configs`: what kafka-configs.sh does for brokers, topics and groups, over the Kafka
protocol.

    kbroker configs describe (--broker ID | --broker-defaults | --topic T | --group G) [--all]
        the dynamic configs of one broker, of the cluster-wide broker default, a topic's
        overrides or a consumer group's own configs (KIP-848); --all: every config, with its
        source. Each line has Kafka's form:
        `  key=value sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:key=value, ...}`

    kbroker configs alter (--broker ID | --broker-defaults | --topic T | --group G)
                          [--add-config K=V[,K=V...]] [--delete-config K[,K...]]
        IncrementalAlterConfigs: SET each added key, DELETE each removed one, keep the others.

kafka-configs.sh's `--entity-type topics|brokers|groups --entity-name NAME` (`--entity-default`
for the broker default) name the same resources.

A broker resource is sent to that broker (the broker-default one to any), as Kafka's admin client
routes it: a broker answers and alters only its own configs.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.client import DEFAULT_TIMEOUT_S, AdminClient, AdminError, KafkaErrorResponse
from kbroker.admin.connection import DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, Connection
from kbroker.admin.security import add_command_config_argument, security_of

RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
CONFIG_SET, CONFIG_DELETE = 0, 1
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           8: "DYNAMIC_GROUP_CONFIG"}
_DYNAMIC_SOURCES = {1, 2, 3, 8}
ENTITY_TYPES = ("topics", "brokers", "groups")  # kafka-configs.sh's --entity-type values served here


def add_configs_command(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe or alter broker, topic and group configs (kafka-configs.sh)")
    csub = p.add_subparsers(dest="configs_command", required=True)
    for name, text in (("describe", "show dynamic configs (--all: every config)"),
                       ("alter", "set and delete dynamic configs")):
        c = csub.add_parser(name, help=text)
        c.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]")
        add_command_config_argument(c)
        c.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS")
        target = c.add_mutually_exclusive_group(required=True)
        target.add_argument("--broker", type=int, metavar="ID", help="one broker's configs")
        target.add_argument("--broker-defaults", action="store_true", help="the cluster-wide broker default")
        target.add_argument("--topic", metavar="TOPIC")
        target.add_argument("--group", metavar="GROUP", help="a consumer group's own configs")
        target.add_argument("--entity-type", choices=ENTITY_TYPES, help="with --entity-name or --entity-default")
        c.add_argument("--entity-name", metavar="NAME")
        c.add_argument("--entity-default", action="store_true", help="with --entity-type brokers")
        if name == "describe":
            c.add_argument("--all", action="store_true", help="every config with its source, not only dynamic ones")
        else:
            c.add_argument("--add-config", default="", metavar="K=V[,K=V...]",
                           help="keys to set; a value with commas goes in brackets: k=[a,b]")
            c.add_argument("--delete-config", default="", metavar="K[,K...]", help="keys to remove")


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: k=v pairs split on commas outside square brackets."""
    out: dict[str, str] = {}
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise AdminError(f"invalid config {item!r}: expected KEY=VALUE")
        value = value.strip()
        out[key.strip()] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return out


def _resource(args: argparse.Namespace) -> tuple[int, str, str]:
    """(resource type, resource name, the words kafka-configs.sh names it with)."""
    if getattr(args, "entity_type", None) is not None:
        return _entity(args)
    if getattr(args, "entity_name", None) is not None or getattr(args, "entity_default", False):
        raise AdminError("--entity-name and --entity-default go with --entity-type")
    if getattr(args, "group", None) is not None:
        return RESOURCE_GROUP, args.group, f"group {args.group}"
    if args.topic is not None:
        return RESOURCE_TOPIC, args.topic, f"topic {args.topic}"
    if args.broker_defaults:
        return RESOURCE_BROKER, "", "brokers in the cluster"
    return RESOURCE_BROKER, str(args.broker), f"broker {args.broker}"


def _entity(args: argparse.Namespace) -> tuple[int, str, str]:
    """kafka-configs.sh's `--entity-type T --entity-name N` (`--entity-default`: the broker default)."""
    if args.entity_default:
        if args.entity_type != "brokers" or args.entity_name is not None:
            raise AdminError("--entity-default is the broker default: --entity-type brokers without --entity-name")
        return RESOURCE_BROKER, "", "brokers in the cluster"
    name = args.entity_name
    if not name:
        raise AdminError(f"--entity-type {args.entity_type} needs --entity-name")
    if args.entity_type == "brokers":
        if not name.isdigit():
            raise AdminError(f"The entity name for brokers must be a valid integer broker id, found: {name}")
        return RESOURCE_BROKER, name, f"broker {name}"
    if args.entity_type == "groups":
        return RESOURCE_GROUP, name, f"group {name}"
    return RESOURCE_TOPIC, name, f"topic {name}"


def _connection(admin: AdminClient, resource_type: int, name: str) -> Connection:
    if resource_type != RESOURCE_BROKER or name == "":
        return admin.any_connection()
    brokers, _ = admin.metadata([])
    broker = brokers.get(int(name))
    if broker is None:
        raise AdminError(f"broker {name} is not running: its configs are described and altered by itself")
    return admin.connection(broker.host, broker.port)


def describe(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    resource_type, name, words = _resource(args)
    body = _connection(admin, resource_type, name).call(DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    result = body.results[0]
    if result.error_code != ErrorCode.none:
        raise KafkaErrorResponse(result.error_code, f"DescribeConfigs for {words}", result.error_message)
    configs = sorted(result.configs, key=lambda c: c.name)
    if not args.all:
        configs = [c for c in configs if c.config_source in _DYNAMIC_SOURCES]
    title = "Default configs for" if name == "" and resource_type == RESOURCE_BROKER else \
        "All configs for" if args.all else "Dynamic configs for"
    lines = [f"{title} {words} are:"]
    for c in configs:
        synonyms = ", ".join(f"{SOURCES.get(s.source, s.source)}:{s.name}={_shown(s.value)}" for s in c.synonyms)
        lines.append(f"  {c.name}={_shown(c.value)} sensitive={str(bool(c.is_sensitive)).lower()} "
                     f"synonyms={{{synonyms}}}")
    return lines


def _shown(value: str | None) -> str:
    return "null" if value is None else value


def alter(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    resource_type, name, words = _resource(args)
    added = parse_add_config(args.add_config)
    deleted = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    if not added and not deleted:
        raise AdminError("nothing to alter: give --add-config or --delete-config")
    both = set(added) & set(deleted)
    if both:
        raise AdminError(f"config {sorted(both)[0]!r} is both added and deleted")
    ops = [{"name": k, "config_operation": CONFIG_SET, "value": v} for k, v in added.items()]
    ops += [{"name": k, "config_operation": CONFIG_DELETE, "value": None} for k in deleted]
    body = _connection(admin, resource_type, name).call(INCREMENTAL_ALTER_CONFIGS, {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configs": ops}],
        "validate_only": False})
    answer = body.responses[0]
    if answer.error_code != ErrorCode.none:
        raise KafkaErrorResponse(answer.error_code, f"IncrementalAlterConfigs for {words}", answer.error_message)
    if resource_type == RESOURCE_BROKER and name == "":
        return ["Completed updating default config for brokers in the cluster."]
    return [f"Completed updating config for {words}."]


def run_configs(args: argparse.Namespace) -> int:
    try:
        with AdminClient(args.bootstrap_server, timeout=args.timeout, security=security_of(args)) as admin:
            lines = describe(admin, args) if args.configs_command == "describe" else alter(admin, args)
    except (AdminError, KafkaErrorResponse, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
