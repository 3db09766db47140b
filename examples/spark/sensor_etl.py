"""Streaming ETL over kbroker with Spark Structured Streaming: sensor readings (JSON, as written
by loadgen.py) are read from a topic and go two ways, each a streaming query with its own
checkpoint:

- stats: parsed, grouped into event-time windows per sensor with a watermark, and each window's
  count / sum / min / max / avg written as JSON (key: the sensor) to another kbroker topic once the
  watermark has passed the window's end (append mode: a window is written once it is final);
- archive: every raw record (partition, offset, CreateTime, key, value, headers) appended to a
  Parquet directory, whatever its value holds.

    python examples/spark/sensor_etl.py --bootstrap-server 127.0.0.1:9092 --source sensors \\
        --stats-topic sensor-stats --archive ./sensor-archive --checkpoint ./sensor-checkpoints

Stop it (Ctrl-C) and run the same command again: each query resumes from the offsets in its
checkpoint, so the archive holds every record exactly once (Spark's file sink commits a batch's
files in `_spark_metadata` with the batch) and the window state carries on. Spark's Kafka sink is
at least once: a batch cut short by a stop or crash is written again on restart, so a window may
be written twice, with the same key and value.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

import spark_kafka
from loadgen import EVENT_JSON_SCHEMA


def read_stream(spark, bootstrap: str, topic: str, max_offsets_per_trigger: int | None = None,
                starting_offsets: str = "earliest"):
    """The topic as a stream of Spark's Kafka rows (key, value, topic, partition, offset,
    timestamp, timestampType, headers). `starting_offsets` only counts on the first run: after
    that the checkpoint says where to go on."""
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", starting_offsets)
              .option("includeHeaders", "true"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load()


def window_stats(records, window: str, watermark: str):
    """Kafka rows -> one (key, value) row per sensor and event-time window, once it is final.
    Values that are not events (bad JSON, missing fields) are left out of the stats."""
    from pyspark.sql import functions as F

    events = (records
              .select(F.from_json(F.col("value").cast("string"), EVENT_JSON_SCHEMA).alias("e"))
              .where("e.sensor IS NOT NULL AND e.event_ms IS NOT NULL AND e.reading IS NOT NULL")
              .selectExpr("e.sensor AS sensor", "e.reading AS reading",
                          "timestamp_millis(e.event_ms) AS event_time"))
    stats = (events
             .withWatermark("event_time", watermark)
             .groupBy(F.window("event_time", window), "sensor")
             .agg(F.count("*").alias("count"), F.sum("reading").alias("sum"), F.min("reading").alias("min"),
                  F.max("reading").alias("max"), F.avg("reading").alias("avg")))
    return stats.selectExpr(
        "sensor AS key",
        "to_json(named_struct('sensor', sensor, 'window_start_ms', unix_millis(window.start), "
        "'window_end_ms', unix_millis(window.end), 'count', count, 'sum', sum, 'min', min, "
        "'max', max, 'avg', avg)) AS value")


def start_stats(spark, bootstrap: str, source: str, stats_topic: str, checkpoint: Path, *,
                window: str = "10 seconds", watermark: str = "10 seconds", trigger: str = "5 seconds",
                max_offsets_per_trigger: int | None = None):
    """The windowed aggregation, written to `stats_topic`; its checkpoint is `checkpoint`."""
    records = read_stream(spark, bootstrap, source, max_offsets_per_trigger)
    return (window_stats(records, window, watermark).writeStream
            .queryName(f"stats-{source}")
            .format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", stats_topic)
            .option("checkpointLocation", str(checkpoint))
            .outputMode("append")
            .trigger(processingTime=trigger)
            .start())


def start_archive(spark, bootstrap: str, source: str, archive: Path, checkpoint: Path, *,
                  trigger: str = "5 seconds", max_offsets_per_trigger: int | None = None):
    """Every raw record appended to the Parquet directory `archive`; its checkpoint is `checkpoint`."""
    records = read_stream(spark, bootstrap, source, max_offsets_per_trigger)
    return (records
            .selectExpr("topic", "partition", "offset", "timestamp", "timestampType", "key", "value", "headers")
            .writeStream
            .queryName(f"archive-{source}")
            .format("parquet")
            .option("path", str(archive))
            .option("checkpointLocation", str(checkpoint))
            .outputMode("append")
            .trigger(processingTime=trigger)
            .start())


def start(spark, bootstrap: str, source: str, stats_topic: str, archive: Path, checkpoints: Path, **options):
    """Both queries; `checkpoints` holds one checkpoint directory per query. Options: window,
    watermark (stats only), trigger, max_offsets_per_trigger."""
    archive_options = {k: v for k, v in options.items() if k in ("trigger", "max_offsets_per_trigger")}
    return [start_stats(spark, bootstrap, source, stats_topic, Path(checkpoints) / "stats", **options),
            start_archive(spark, bootstrap, source, archive, Path(checkpoints) / "archive", **archive_options)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    spark_kafka.add_common_options(parser)
    parser.add_argument("--source", default="sensors", help="topic of JSON events (default sensors)")
    parser.add_argument("--stats-topic", default="sensor-stats", help="topic the window stats go to")
    parser.add_argument("--archive", type=Path, default=Path("sensor-archive"), help="Parquet directory")
    parser.add_argument("--checkpoint", type=Path, default=Path("sensor-checkpoints"),
                        help="checkpoint directory (one sub-directory per query); keep it to resume")
    parser.add_argument("--window", default="10 seconds", help="event-time window (default 10 seconds)")
    parser.add_argument("--watermark", default="10 seconds", help="how late an event may come (default 10 seconds)")
    parser.add_argument("--trigger", default="5 seconds", help="micro-batch interval (default 5 seconds)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None,
                        help="bound each micro-batch to this many records (default: all available)")
    parser.add_argument("--state-partitions", type=int, default=4,
                        help="partitions of the window state (spark.sql.shuffle.partitions, default 4); "
                             "a checkpoint keeps the number it began with")
    args = parser.parse_args(argv)

    spark = spark_kafka.session("kbroker-sensor-etl", args,
                                {"spark.sql.shuffle.partitions": str(args.state_partitions)})
    queries = start(spark, args.bootstrap_server, args.source, args.stats_topic, args.archive, args.checkpoint,
                    window=args.window, watermark=args.watermark, trigger=args.trigger,
                    max_offsets_per_trigger=args.max_offsets_per_trigger)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C or SIGTERM: stop between two waits
        signal.signal(signum, lambda *_: stopping.set())
    print(f"running: {', '.join(q.name for q in queries)}; Ctrl-C to stop", flush=True)
    try:
        while not stopping.is_set():
            if spark.streams.awaitAnyTermination(1):  # a query ended: raises its error, if any
                break
    finally:
        for query in queries:
            query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
