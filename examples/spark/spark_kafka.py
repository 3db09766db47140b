"""What the Spark examples share: the SparkSession with Spark's Kafka connector on its class
path, the command-line options every example takes.

The connector is `org.apache.spark:spark-sql-kafka-0-10_2.13` at the version of the running
pyspark (a connector of another Spark version fails at run time). By default the session asks
Spark to fetch it from Maven (`spark.jars.packages`); `--jars` names jar files or directories of
jars instead, for machines without a Maven repository: the connector, its token provider,
commons-pool2 and kafka-clients.
"""

from __future__ import annotations

import argparse
from pathlib import Path

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"


def connector_package() -> str:
    import pyspark

    return f"{CONNECTOR}:{pyspark.__version__}"


def jar_files(spec: str) -> list[str]:
    """`a.jar,dir,...` -> the jar files, a directory standing for the `*.jar` files in it."""
    out: list[str] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        path = Path(item).expanduser().resolve()
        out += [str(p) for p in sorted(path.glob("*.jar"))] if path.is_dir() else [str(path)]
    return out


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092",
                        help="kbroker's listener(s), host:port[,host:port] (default 127.0.0.1:9092)")
    parser.add_argument("--jars", default=None,
                        help="the connector's jar files or directories, comma-separated, instead of "
                             "fetching the connector package from Maven")
    parser.add_argument("--master", default=None, help="Spark master (default: Spark's own, local[*])")


def session(app_name: str, args: argparse.Namespace, conf: dict[str, str] | None = None):
    """The SparkSession an example runs in (the one spark-submit started, if any), with `conf`."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(app_name)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if args.master:
        builder = builder.master(args.master)
    if args.jars:
        builder = builder.config("spark.jars", ",".join(jar_files(args.jars)))
    else:
        builder = builder.config("spark.jars.packages", connector_package())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark

