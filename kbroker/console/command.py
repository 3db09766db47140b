"""`kbroker console --bootstrap-server HOST:PORT [--port 8080] [--command-config client.properties]`:
the web console, served by uvicorn (--command-config: a secured listener's client keys, as the
other commands take them). The web stack is imported only when the console runs, so other commands do not load it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kbroker.admin.client import AdminError
from kbroker.admin.security import add_command_config_argument, security_of


def add_console_command(sub: Any) -> None:
    console = sub.add_parser("console", help="a web console for a Kafka-protocol cluster (kbroker or Kafka)")
    console.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT[,HOST:PORT...]",
                         help="a broker to start from (default 127.0.0.1:9092)")
    console.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080; 0: any free port)")
    console.add_argument("--host", default="127.0.0.1",
                         help="address to listen on (default 127.0.0.1; the console has no login: "
                              "expose it only behind an authenticating proxy)")
    console.add_argument("--refresh", type=float, default=5.0, metavar="SECONDS",
                         help="how often pages refresh their live part (default 5)")
    console.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                         help="connect/read timeout for broker requests (default 10)")
    add_command_config_argument(console)


def run_console(args: argparse.Namespace) -> int:
    import uvicorn

    from kbroker.console.app import create_app

    if not 0 <= args.port < 65536 or args.refresh < 0.5 or args.timeout <= 0:
        print("kbroker console: --port must be 0-65535, --refresh at least 0.5, --timeout positive", file=sys.stderr)
        return 2
    try:
        app = create_app(args.bootstrap_server, args.refresh, args.timeout, security_of(args))
    except AdminError as exc:
        print(f"kbroker console: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    return 0
