"""At-most-once consumption with a consumer group (kafka-python): commit, then process.

A crash between the commit and the processing loses those records — they are never processed —
but nothing is ever processed twice.

    python docs/examples/at_most_once.py --bootstrap 127.0.0.1:9092 --group billing --topic orders
"""

import argparse
import os
import sys

from kafka import KafkaConsumer


def process(record, out) -> None:
    out.write(f"{record.partition} {record.offset} {record.value.decode()}\n")
    out.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--session-timeout-ms", type=int, default=45000,
                    help="how soon the group notices this process died (kafka-python's default: 45 s)")
    ap.add_argument("--idle-exit-s", type=float, default=5.0, help="stop after this long without records")
    ap.add_argument("--crash-after-commit", type=int, default=0,
                    help="(demonstration) die right after the N-th commit, before processing that batch")
    args = ap.parse_args()
    consumer = KafkaConsumer(args.topic, bootstrap_servers=args.bootstrap, group_id=args.group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=args.session_timeout_ms)
    commits = 0
    idle_ms = 0
    while idle_ms < args.idle_exit_s * 1000:
        batch = consumer.poll(timeout_ms=1000)
        if not batch:
            if consumer.assignment():  # joining the group takes a moment; idle counts after it
                idle_ms += 500
            continue
        idle_ms = 0
        consumer.commit()  # first commit: these records count as consumed from now on
        commits += 1
        if commits == args.crash_after_commit:
            os._exit(17)  # a crash before processing: the committed batch is lost
        for records in batch.values():
            for record in records:
                process(record, sys.stdout)
    consumer.close()


if __name__ == "__main__":
    main()
