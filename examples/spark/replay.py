"""Batch replay over kbroker with Spark: read part of a topic, by offsets or by time, and write it
to another topic with the same keys, values, headers and partitions.

    # offsets: [start, end) per partition (-2 = earliest, -1 = latest)
    python examples/spark/replay.py --bootstrap-server 127.0.0.1:9092 --source sensors --target sensors-replay \\
        --from-offsets '{"0": 100, "1": -2}' --to-offsets '{"0": 200, "1": -1}'
    # time: from the first record at or after --since to the first at or after --until (epoch ms or ISO 8601)
    python examples/spark/replay.py --source sensors --target sensors-replay --since 2026-11-23T10:00:00Z
    # time per partition (Spark's startingOffsetsByTimestamp)
    python examples/spark/replay.py --source sensors --target sensors-replay --since-per-partition '{"0": 1763892000000}'

Each record written keeps its source partition (the `partition` column: the target needs at least
as many partitions) and its headers, plus two headers saying where it came from:
`replayed-from` (`<topic>/<partition>/<offset>`) and `source-timestamp` (the source record's
CreateTime in epoch ms; the new record's own timestamp is the time of the write). A source
partition is read by one Spark task and written by one idempotent producer, so its records keep
their order. `--isolation-level read_committed` replays committed transactions only.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone

import spark_kafka

REPLAY_HEADERS = ("array(struct('replayed-from' AS key, CAST(concat(topic, '/', partition, '/', offset) AS BINARY) AS value), "
                  "struct('source-timestamp' AS key, CAST(CAST(unix_millis(timestamp) AS STRING) AS BINARY) AS value))")


def read_range(spark, bootstrap: str, source: str, *, starting: dict[str, str], ending: dict[str, str],
               isolation_level: str | None = None):
    """The source's records between the starting and ending options (Spark's option names:
    startingOffsets, startingTimestamp, startingOffsetsByTimestamp, and their ending twins)."""
    reader = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source)
              .option("includeHeaders", "true")
              # a partition with no record at or after the starting time is read from its end,
              # i.e. not at all, rather than failing the job
              .option("startingOffsetsByTimestampStrategy", "latest"))
    if isolation_level:
        reader = reader.option("kafka.isolation.level", isolation_level)
    for name, value in {**starting, **ending}.items():
        reader = reader.option(name, value)
    return reader.load()


def replay(spark, bootstrap: str, source: str, target: str, *, starting: dict[str, str] | None = None,
           ending: dict[str, str] | None = None, isolation_level: str | None = None) -> int:
    """Copy the selected records to `target`; returns how many were written."""
    records = read_range(spark, bootstrap, source, starting=starting or {}, ending=ending or {},
                         isolation_level=isolation_level)
    out = records.selectExpr(
        "key", "value", "partition",
        f"concat(coalesce(headers, array()), {REPLAY_HEADERS}) AS headers",
    ).persist()  # one read of the source: the count and the write see the same records
    try:
        count = out.count()
        (out.write.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("topic", target)
         .save())
        return count
    finally:
        out.unpersist()


def epoch_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 time (a time without a zone is UTC)."""
    if text.lstrip("-").isdigit():
        return int(text)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def by_partition(source: str, text: str) -> str:
    """'{"0": 5, "1": -2}' -> Spark's '{"<source>": {"0": 5, "1": -2}}'."""
    per_partition = json.loads(text)
    return json.dumps({source: {str(int(p)): int(v) for p, v in per_partition.items()}})


def options_from(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str]]:
    starting: dict[str, str] = {}
    ending: dict[str, str] = {}
    if args.from_offsets:
        starting["startingOffsets"] = by_partition(args.source, args.from_offsets)
    if args.since:
        starting["startingTimestamp"] = str(epoch_ms(args.since))
    if args.since_per_partition:
        starting["startingOffsetsByTimestamp"] = by_partition(args.source, args.since_per_partition)
    if args.to_offsets:
        ending["endingOffsets"] = by_partition(args.source, args.to_offsets)
    if args.until:
        ending["endingTimestamp"] = str(epoch_ms(args.until))
    if len(starting) > 1 or len(ending) > 1:
        raise SystemExit("give one start (--from-offsets, --since or --since-per-partition) and one end at most")
    return starting or {"startingOffsets": "earliest"}, ending or {"endingOffsets": "latest"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    spark_kafka.add_common_options(parser)
    parser.add_argument("--source", required=True, help="topic to read")
    parser.add_argument("--target", required=True, help="topic to write (as many partitions as the source at least)")
    parser.add_argument("--from-offsets", help='JSON {"<partition>": <first offset>}; -2 = earliest')
    parser.add_argument("--to-offsets", help='JSON {"<partition>": <end offset, exclusive>}; -1 = latest')
    parser.add_argument("--since", help="epoch ms or ISO 8601: from the first record at or after it, every partition")
    parser.add_argument("--since-per-partition", help='JSON {"<partition>": <epoch ms>}')
    parser.add_argument("--until", help="epoch ms or ISO 8601: up to (not including) the first record at or after it")
    parser.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"), default=None)
    args = parser.parse_args(argv)
    starting, ending = options_from(args)

    spark = spark_kafka.session("kbroker-replay", args)
    try:
        count = replay(spark, args.bootstrap_server, args.source, args.target, starting=starting, ending=ending,
                       isolation_level=args.isolation_level)
    finally:
        spark.stop()
    print(f"replayed {count} records from {args.source} to {args.target}", flush=True)


if __name__ == "__main__":
    main()
