"""`kbroker console --bootstrap-server HOST:PORT [--port 8080] [--command-config client.properties] [--login]
[--schema-registry-url URL [--schema-registry-basic-auth USER:PASSWORD]]`:
the web console, served by uvicorn (--command-config: a secured listener's client keys, as the
other commands take them; --login: each browser session logs in as its own SASL principal;
--schema-registry-url: a Confluent-compatible schema registry, with which the message browser
decodes Avro, JSON Schema and Protobuf keys and values and the Schemas pages list subjects). The
web stack is imported only when the console runs, so other commands do not load it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from kbroker.admin.client import AdminError
from kbroker.admin.security import add_command_config_argument, security_of

LOGIN_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
LOGIN_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
REGISTRY_URL_ENV = "KBROKER_SCHEMA_REGISTRY_URL"  # as `kbroker schemas` reads them
REGISTRY_AUTH_ENV = "KBROKER_SCHEMA_REGISTRY_BASIC_AUTH"


def add_console_command(sub: Any) -> None:
    console = sub.add_parser("console", help="a web console for a Kafka-protocol cluster (kbroker or Kafka)")
    console.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                         help="a broker to start from (default 127.0.0.1:9092)")
    console.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080; 0: any free port)")
    console.add_argument("--host", default="127.0.0.1",
                         help="address to listen on (default 127.0.0.1; without --login the console has no "
                              "login: expose it only behind an authenticating proxy)")
    console.add_argument("--refresh", type=float, default=5.0, metavar="SECONDS",
                         help="how often pages refresh their live part and the console samples lag and "
                              "messages/s for its charts (default 5; samples at most once a second)")
    console.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                         help="connect/read timeout for broker requests (default 10)")
    add_command_config_argument(console)
    console.add_argument("--login", action="store_true",
                         help="ask each browser session for a SASL username and password (checked by "
                              "authenticating to a broker) and talk to the brokers as that principal: the "
                              "--command-config file's security.protocol (SASL_PLAINTEXT or SASL_SSL), TLS "
                              "settings and sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) are used with "
                              "the session's username and password in place of its own (its sasl.jaas.config is "
                              "not needed); pages then act, and "
                              "are refused, as the logged-in principal")
    console.add_argument("--session-idle-timeout", type=float, default=1800.0, metavar="SECONDS",
                         help="with --login: a session idle this long ends (default 1800)")
    console.add_argument("--max-sessions", type=int, default=100, metavar="N",
                         help="with --login: sessions kept at once; a new login ends the one idle the "
                              "longest (default 100)")
    console.add_argument("--schema-registry-url", metavar="URL",
                         help="a Confluent-compatible schema registry (kbroker's schema.registry.listener, "
                              "Confluent's, Karapace's): the message browser decodes keys and values in "
                              "Confluent's wire format (Avro, JSON Schema, Protobuf) with the schema their id "
                              "names, and the Schemas pages show subjects, versions and compatibility "
                              f"(default ${REGISTRY_URL_ENV}; none: no decoding, no Schemas pages)")
    console.add_argument("--schema-registry-basic-auth", metavar="USER:PASSWORD",
                         help=f"HTTP basic credentials for the schema registry (default ${REGISTRY_AUTH_ENV}, "
                              "or the URL's user info)")
    console.set_defaults(command_config_requires_credentials=command_config_requires_credentials)


def command_config_requires_credentials(args: argparse.Namespace) -> bool:
    """Whether --command-config must hold sasl.jaas.config's username and password (read by
    kbroker.admin.command_config before the console runs): not with --login, whose sessions log in
    with their own; the file's security.protocol, TLS keys and sasl.mechanism are still used."""
    return not args.login


def login_problem(security: Any) -> str | None:
    """Why --login cannot work with this command config (one line), or None."""
    protocol = getattr(security, "protocol", "PLAINTEXT")
    if protocol not in LOGIN_PROTOCOLS:
        return (f"--login needs --command-config with security.protocol SASL_PLAINTEXT or SASL_SSL "
                f"(the console logs in with SASL), not {protocol}")
    if security.mechanism not in LOGIN_MECHANISMS:
        return (f"--login needs sasl.mechanism {', '.join(LOGIN_MECHANISMS)} (a username and a password), "
                f"not {security.mechanism}")
    return None


def run_console(args: argparse.Namespace) -> int:
    if not 0 <= args.port < 65536 or args.refresh < 0.5 or args.timeout <= 0:
        print("kbroker console: --port must be 0-65535, --refresh at least 0.5, --timeout positive", file=sys.stderr)
        return 2
    if args.session_idle_timeout <= 0 or args.max_sessions < 1:
        print("kbroker console: --session-idle-timeout must be positive, --max-sessions at least 1", file=sys.stderr)
        return 2
    try:
        security = security_of(args)
    except AdminError as exc:
        print(f"kbroker console: {exc}", file=sys.stderr)
        return 2
    if args.login:
        problem = login_problem(security)
        if problem is not None:
            print(f"kbroker console: {problem}", file=sys.stderr)
            return 2

    registry = None
    url = args.schema_registry_url or os.environ.get(REGISTRY_URL_ENV, "").strip()
    if url:
        from kbroker.admin.schemas_cmd import UsageError
        from kbroker.console.registry import ConsoleRegistry

        try:
            registry = ConsoleRegistry(url, args.schema_registry_basic_auth or os.environ.get(REGISTRY_AUTH_ENV)
                                       or None, args.timeout)
        except UsageError as exc:
            print(f"kbroker console: {str(exc).replace('--registry-url', '--schema-registry-url')}"
                  .replace("--basic-auth", "--schema-registry-basic-auth"), file=sys.stderr)
            return 2
    elif args.schema_registry_basic_auth:
        print(f"kbroker console: --schema-registry-basic-auth needs --schema-registry-url (or ${REGISTRY_URL_ENV})",
              file=sys.stderr)
        return 2

    import uvicorn

    from kbroker.console.app import create_app

    try:
        app = create_app(args.bootstrap_server, args.refresh, args.timeout, security, login=args.login,
                         idle_timeout_s=args.session_idle_timeout, max_sessions=args.max_sessions,
                         registry=registry)
    except AdminError as exc:
        print(f"kbroker console: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    return 0
