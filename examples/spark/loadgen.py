"""Load generator for the sensor pipeline: JSON sensor readings written to a kbroker topic by
Spark's Kafka sink (an idempotent producer, acks=all), `--rate` events a second.

    python examples/spark/loadgen.py --bootstrap-server 127.0.0.1:9092 --topic sensors --rate 200 --seconds 60

Event `i` is a pure function of `i` (see `event`), so a run can be checked exactly: its key is the
sensor name (Kafka's default partitioner keeps each sensor in one partition, in order), its value

    {"event_id": i, "sensor": "sensor-<i % sensors>", "reading": <i * 7 % 100>, "event_ms": <origin + i * 1000 // rate>}

and it carries a header `event-id`. The origin is the run's start (or `--origin-ms`), so event
times follow the clock; `--first` continues the numbering of an earlier run.
"""

from __future__ import annotations

import argparse
import time

import spark_kafka

EVENT_JSON_SCHEMA = "event_id LONG, sensor STRING, reading INT, event_ms LONG"


def event(i: int, *, origin_ms: int, rate: int, sensors: int) -> dict:
    """Event `i` as the JSON object written (the Spark expressions in `write_events` mirror it)."""
    return {"event_id": i, "sensor": f"sensor-{i % sensors}", "reading": i * 7 % 100,
            "event_ms": origin_ms + i * 1000 // rate}


def write_events(spark, bootstrap: str, topic: str, first: int, count: int, *, origin_ms: int, rate: int,
                 sensors: int) -> None:
    """Write events first .. first+count-1 in one Spark job; returns once all are acknowledged."""
    frame = spark.range(first, first + count).selectExpr(
        "id AS event_id",
        f"concat('sensor-', CAST(id % {int(sensors)} AS STRING)) AS sensor",
        "CAST(id * 7 % 100 AS INT) AS reading",
        f"{int(origin_ms)} + (id * 1000) div {int(rate)} AS event_ms",
    ).selectExpr(
        "sensor AS key",
        "to_json(struct(event_id, sensor, reading, event_ms)) AS value",
        "array(struct('event-id' AS key, CAST(CAST(event_id AS STRING) AS BINARY) AS value)) AS headers",
    )
    (frame.write.format("kafka")
     .option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic)
     .save())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    spark_kafka.add_common_options(parser)
    parser.add_argument("--topic", default="sensors")
    parser.add_argument("--rate", type=int, default=100, help="events a second (default 100)")
    parser.add_argument("--seconds", type=int, default=60, help="how long to run (default 60)")
    parser.add_argument("--sensors", type=int, default=8, help="distinct sensors (default 8)")
    parser.add_argument("--first", type=int, default=0, help="id of the first event (default 0)")
    parser.add_argument("--origin-ms", type=int, default=None,
                        help="event time of event 0, epoch ms (default: event --first is now)")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.sensors <= 0 or args.seconds < 0:
        parser.error("--rate and --sensors must be positive, --seconds not negative")

    spark = spark_kafka.session("kbroker-loadgen", args)
    started = time.monotonic()
    origin_ms = args.origin_ms
    if origin_ms is None:
        origin_ms = int(time.time() * 1000) - args.first * 1000 // args.rate  # event `first` is "now"
    next_id = args.first
    for second in range(args.seconds):
        write_events(spark, args.bootstrap_server, args.topic, next_id, args.rate,
                     origin_ms=origin_ms, rate=args.rate, sensors=args.sensors)
        next_id += args.rate
        print(f"wrote events {next_id - args.rate}..{next_id - 1}", flush=True)
        time.sleep(max(0.0, started + second + 1 - time.monotonic()))
    print(f"done: {next_id - args.first} events, next --first {next_id}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
