"""Spark's Kafka connector against kbroker: the SparkSession the Spark tests share (one per test
module, `spark` fixture in conftest), the jars it needs, checked by sha256, and readers that turn
Spark's Kafka and Parquet rows into the suite's `Rec`s so they compare exactly with what a
producer wrote.

Jars: the connector, its token provider and commons-pool2 come from the directory named by
`KBROKER_SPARK_JARS` (`.ci/run` sets it; unset, the copies committed in `compat-tests/spark-jars`);
kafka-clients 3.9.0 from
the wheel the Java harness uses (`conftest.kafka_client_jars`). pyspark must be 4.0.0, the
connector's version. Under CI=true anything missing is a failure, locally a skip.

Spark runs `local[2]`, loopback only, no UI, two shuffle partitions, log level WARN, its
scratch, warehouse and JVM temp directories under the module's pytest tmp dir. The examples the
tests run are imported from `examples/spark/` (`example`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

PYSPARK_VERSION = "4.0.0"
JARS_ENV = "KBROKER_SPARK_JARS"
CONNECTOR_JARS = {  # compat-tests/spark-jars/README.md
    "spark-sql-kafka-0-10_2.13-4.0.0.jar": "33a3b8b04df4a2e43c9d5bf8ca5972936a1ac662f2714e014d00ef6f27468bf3",
    "spark-token-provider-kafka-0-10_2.13-4.0.0.jar": "f2be3b76f9e6cbe63379d4e4e0dc14f59dbf056ae2ad16ff15ac108004c86767",
    "commons-pool2-2.12.0.jar": "6d3bd18df8410f3e31b031aca582cc109342358a62a2759ebd0c4cdf30d06f8b",
}
KAFKA_CLIENTS = ("kafka-clients-3.9.0.jar", "15c1e137f2c2c94398e27abc4060a03b6bde10bf9fac15e8f70c02320b202f18")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "spark"
COMMITTED_JARS = Path(__file__).resolve().parent / "spark-jars"

LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def connector_jars(kt) -> list[Path]:
    """The four jars Spark needs beyond its own, each checked against its sha256."""
    directory = os.environ.get(JARS_ENV, "").strip() or str(COMMITTED_JARS)
    jars = []
    for name, digest in CONNECTOR_JARS.items():
        path = Path(directory).resolve() / name
        kt.require(path.is_file(), f"{name} is not in {JARS_ENV}={directory}")
        assert sha256(path) == digest, f"{path}: sha256 differs from compat-tests/spark-jars/README.md"
        jars.append(path)
    with kt.cache_lock():
        client = next(j for j in kt.kafka_client_jars() if j.name == KAFKA_CLIENTS[0])
        assert sha256(client) == KAFKA_CLIENTS[1], f"{client}: not the kafka-clients 3.9.0 release"
    return jars + [client]


def require_pyspark(kt) -> None:
    pyspark = kt.require_module("pyspark")
    kt.require(pyspark.__version__ == PYSPARK_VERSION,
               f"pyspark {pyspark.__version__} is installed; the connector jars need {PYSPARK_VERSION} "
               f"(pip install -e '.[spark]')")
    kt.require_exe("java")


def start_session(kt, workdir: Path):
    require_pyspark(kt)
    jars = connector_jars(kt)
    from pyspark.sql import SparkSession

    for sub in ("local", "warehouse", "tmp"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    log_config = workdir / "log4j2.properties"
    log_config.write_text(LOG4J2)
    # read when the JVM starts: the first session of this process
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    java_options = f"-Djava.io.tmpdir={workdir / 'tmp'} -Dlog4j2.configurationFile=file:{log_config}"
    # the client compiler only (C1, as the Java harness runs): a test session's jobs are short; the
    # session starts ~1.5 s sooner on two cores and the streaming/batch tests run no slower
    java_options += " -XX:TieredStopAtLevel=1"
    builder = (SparkSession.builder
             .master("local[2]")
             .appName("kbroker-compat")
             .config("spark.jars", ",".join(str(j) for j in jars))
             .config("spark.driver.memory", "768m")
             .config("spark.driver.extraJavaOptions", java_options)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.local.dir", str(workdir / "local"))
             .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
             .config("spark.sql.session.timeZone", "UTC"))
    # Spark 4.0 makes an `artifacts` directory in the working directory of its JVM, which starts
    # here with the first session of this process: not in the repository
    previous = os.getcwd()
    os.chdir(workdir)
    try:
        spark = builder.getOrCreate()
    finally:
        os.chdir(previous)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_session(spark) -> None:
    for query in spark.streams.active:
        query.stop()
    spark.stop()


def example(name: str) -> ModuleType:
    """`examples/spark/<name>.py`, imported as the scripts import each other."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


# --------------------------------------------------------------------------------------------
# Spark rows -> the suite's records

ROW_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers",
               "unix_millis(timestamp) AS timestamp_ms", "timestampType")


def to_records(kt, rows: list[Any], topic: str, timestamp_type: int = 0) -> list:
    """Rows of Spark's Kafka schema -> `kt.Rec`s sorted by (partition, offset), duplicates kept.
    Every row must be of `topic` and carry `timestamp_type` (0 = CreateTime)."""
    out = []
    for row in rows:
        assert row.topic == topic, f"row of topic {row.topic!r} in a read of {topic!r}"
        assert row.timestampType == timestamp_type, \
            f"partition {row.partition} offset {row.offset}: timestampType {row.timestampType} != {timestamp_type}"
        headers = tuple((h.key, bytes(h.value) if h.value is not None else None) for h in (row.headers or ()))
        out.append(kt.Rec(row.partition, row.offset, None if row.key is None else bytes(row.key),
                          None if row.value is None else bytes(row.value), headers, row.timestamp_ms))
    return sorted(out, key=lambda r: (r.partition, r.offset))


def read_topic(kt, spark, bootstrap: str, topic: str, **options: str) -> list:
    """A batch read of `topic` (Spark's option names; default earliest to latest)."""
    reader = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("includeHeaders", "true"))
    for name, value in options.items():
        reader = reader.option(name, value)
    return to_records(kt, reader.load().selectExpr(*ROW_COLUMNS).collect(), topic)


def read_archive(kt, spark, path: Path, topic: str) -> list:
    """What a Parquet file sink committed (through its `_spark_metadata` log)."""
    return to_records(kt, spark.read.parquet(str(path)).selectExpr(*ROW_COLUMNS).collect(), topic)


def wait_archive(kt, spark, path, topic: str, count: int, timeout: float, what: str) -> list:
    """Poll the archive (as a reader sees it: committed batches only) until it holds `count` rows."""
    rows: list = []

    def enough():
        nonlocal rows
        rows = read_archive(kt, spark, path, topic) if (path / "_spark_metadata").exists() else []
        return len(rows) >= count

    kt.wait_until(enough, timeout, f"{what}: {count} rows in the archive (last: {len(rows)})", interval=1.0)
    return rows
