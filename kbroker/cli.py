"""Command line: `kbroker serve [--config server.properties] [--override key=value ...]`, and the
administration commands (`groups`, `topics`, `reassign`, `cluster`, `transactions`, `delayed`, `users`, `quotas`, `acls`:
kbroker.admin), and the web console (`console`: kbroker.console)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import importlib

from kbroker.errors import InvalidConfigError, StartupError

# command -> (module, the function adding its parser, the function running it); a command line
# imports only its own command's module (each pulls in the admin client, kio, ...: a script calling
# `kbroker share-groups` pays for that one, not for all of them)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "groups": ("kbroker.admin.groups", "add_groups_command", "run_groups"),
    "share-groups": ("kbroker.admin.share_groups", "add_share_groups_command", "run_share_groups"),
    "topics": ("kbroker.admin.topics", "add_topics_command", "run_topics"),
    "configs": ("kbroker.admin.configs_cmd", "add_configs_command", "run_configs"),
    "reassign": ("kbroker.admin.reassign", "add_reassign_command", "run_reassign"),
    "cluster": ("kbroker.admin.cluster_cmd", "add_cluster_command", "run_cluster"),
    "transactions": ("kbroker.admin.transactions", "add_transactions_command", "run_transactions"),
    "delayed": ("kbroker.admin.delayed", "add_delayed_command", "run_delayed"),
    "users": ("kbroker.admin.users", "add_users_command", "run_users"),
    "acls": ("kbroker.admin.acls", "add_acls_command", "run_acls"),
    "quotas": ("kbroker.admin.quotas", "add_quotas_command", "run_quotas"),
    "schemas": ("kbroker.admin.schemas_cmd", "add_schemas_command", "run_schemas"),
    "dev-cluster": ("kbroker.dev_cluster", "add_dev_cluster_command", "run_dev_cluster"),
    "console": ("kbroker.console.command", "add_console_command", "run_console"),
}


def _raise_open_files_limit() -> None:
    """Every segment and connection holds a file descriptor: use all the hard limit allows, as
    Kafka's start scripts ask operators to."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))
        except (ValueError, OSError):
            logging.getLogger("kbroker").warning("could not raise the open files limit above %d", soft)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kbroker", description="A Kafka-compatible message broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_cmd = sub.add_parser("serve", help="run a broker (embedded single node unless zookeeper.connect is set)")
    serve_cmd.add_argument("--config", type=Path, help="Kafka-style server.properties file")
    serve_cmd.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                           help="set a config key, overriding the file (repeatable)")
    serve_cmd.add_argument("--log-level", default="INFO")
    serve_cmd.add_argument("--dev-security", action="store_true",
                           help="development only: serve the listener as SASL_SSL with a throwaway CA and "
                                "certificate, SCRAM-SHA-512 and PLAIN, and an admin user (in <data>/dev-security/, "
                                "with the client.properties to use)")
    words = sys.argv[1:] if argv is None else list(argv)
    chosen = [w for w in words[:1] if w in COMMANDS]  # `kbroker <command> ...`: that one only
    modules = {}
    for name in chosen or COMMANDS:  # no command, `serve`, --help: every one (the usage lists them)
        module_name, add, _run = COMMANDS[name]
        modules[name] = importlib.import_module(module_name)
        getattr(modules[name], add)(sub)
    args = parser.parse_args(argv)
    if getattr(args, "command_config", None):  # every client command: read once, before it runs
        from kbroker.admin.command_config import apply_command_config
        from kbroker.admin.connection import AdminError

        try:
            apply_command_config(args)
        except AdminError as exc:
            print(f"kbroker {args.command}: {exc}", file=sys.stderr)
            return 1
    if args.command in COMMANDS:
        return getattr(modules[args.command], COMMANDS[args.command][2])(args)

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return _serve(args)
    except Exception as exc:  # noqa: BLE001 - a start-up failure is one line and status 2, not a traceback
        cause = _startup_error(exc)
        if cause is None:
            raise
        print(f"kbroker: {' '.join(str(cause).split())}", file=sys.stderr)
        return 2


def _serve(args: argparse.Namespace) -> int:
    import trio

    from kbroker.config import BrokerConfig

    try:
        config = BrokerConfig.from_sources(args.config, args.override)
    except OSError as exc:
        raise StartupError(f"cannot read the --config file {args.config}: {exc.strerror or exc}") from None
    if args.dev_security:
        from kbroker.dev_security import serve_overrides

        secured, text = serve_overrides(config)
        config = BrokerConfig.from_sources(args.config, [*args.override, *secured])
        print(text, flush=True)
    store_prefix = config.get("remote.log.storage.manager.impl.prefix")  # the archive store's own keys
    for key in config.unknown:
        if not key.startswith(store_prefix):
            logging.getLogger("kbroker.config").warning("ignoring unknown config %s", key)
    _raise_open_files_limit()
    from kbroker.server.server import serve

    trio.run(serve, config)
    return 0


def _startup_error(exc: BaseException) -> BaseException | None:
    """Why the broker could not start, if that is what ended the run: a StartupError (log dirs,
    listeners, the --config file), a config value Kafka would refuse, a file that cannot be read, or
    the ZooKeeper or archive store failing, found inside trio's (possibly nested) exception groups."""
    from kbroker.tiered.store import StoreError
    from kbroker.zookeeper.znodes import ZkError

    if isinstance(exc, (StartupError, InvalidConfigError, ZkError, StoreError)):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _startup_error(inner)
            if found is not None:
                return found
    return None
