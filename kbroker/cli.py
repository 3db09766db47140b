"""Command line: `kbroker serve [--config server.properties] [--override key=value ...]`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import trio

from kbroker.config import BrokerConfig
from kbroker.errors import KafkaError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kbroker", description="A Kafka-compatible message broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_cmd = sub.add_parser("serve", help="run a broker (embedded single node unless zookeeper.connect is set)")
    serve_cmd.add_argument("--config", type=Path, help="Kafka-style server.properties file")
    serve_cmd.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                           help="set a config key, overriding the file (repeatable)")
    serve_cmd.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = BrokerConfig.from_sources(args.config, args.override)
    except (KafkaError, OSError) as exc:
        print(f"kbroker: {exc}", file=sys.stderr)
        return 2
    for key in config.unknown:
        logging.getLogger("kbroker.config").warning("ignoring unknown config %s", key)
    from kbroker.server.server import serve

    trio.run(serve, config)
    return 0
