"""A worker pool on a share group (KIP-932 queues, docs/queues.md): N worker processes take jobs from
one topic — any worker any job, more workers than partitions welcome — and acknowledge each job on
its own: ACCEPT when done, RELEASE to have it tried again (by any worker), REJECT when it can never
succeed (it goes to the group's dead-letter topic if the group has one). A worker that dies leaves
its jobs to the others after the lock duration.

The broker serves share groups with `group.coordinator.rebalance.protocols=classic,consumer,share`.
A new share group starts at the end of the topic; to take jobs produced before the first worker
started: `kbroker configs alter --group workers --add-config share.auto.offset.reset=earliest`.

    python examples/work_queue.py --bootstrap 127.0.0.1:9092 --topic jobs --group workers \\
        --workers 4 --idle-exit-s 10

The demonstration job handler sleeps `--work-ms` per job, fails for good on values starting with
`poison` (REJECT) and once on values starting with `flaky` (RELEASE on the first delivery, done on
the second). Each worker prints one line per job: `<worker> <accept|release|reject> <partition>
<offset> <delivery count> <value>`; the pool prints `done: N accepted, M released, K rejected` when
every worker has been idle for `--idle-exit-s`. Needs confluent-kafka 2.15+ (ShareConsumer).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time


class Permanent(Exception):
    """The job can never succeed: REJECT it."""


class Transient(Exception):
    """Worth another try: RELEASE it."""


def handle(value: bytes, delivery_count: int, work_ms: float) -> None:
    time.sleep(work_ms / 1000)
    if value.startswith(b"poison"):
        raise Permanent(value)
    if value.startswith(b"flaky") and delivery_count < 2:
        raise Transient(value)


def say(line: str) -> None:
    """One line in one write: the workers share stdout, and a line must not be cut by another's."""
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def worker(index: int, args: argparse.Namespace, tally) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer

    consumer = ShareConsumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": args.batch,
                              "fetch.wait.max.ms": 200})
    consumer.subscribe([args.topic])
    idle_since = time.monotonic()
    try:
        while time.monotonic() - idle_since < args.idle_exit_s:
            messages = [m for m in consumer.poll(0.5) or [] if m.error() is None]
            if not messages:
                continue
            idle_since = time.monotonic()
            for m in messages:
                try:
                    handle(m.value() or b"", m.delivery_count(), args.work_ms)
                    kind, ack = "accept", AcknowledgeType.ACCEPT
                except Transient:
                    kind, ack = "release", AcknowledgeType.RELEASE
                except Permanent:
                    kind, ack = "reject", AcknowledgeType.REJECT
                consumer.acknowledge(m, ack)
                say(f"{index} {kind} {m.partition()} {m.offset()} {m.delivery_count()} "
                    f"{(m.value() or b'').decode(errors='replace')}")
                with tally.get_lock():
                    tally[("accept", "release", "reject").index(kind)] += 1
            consumer.commit_sync()  # the acknowledgements are on the broker before more is taken
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", default="workers")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--work-ms", type=float, default=2.0)
    p.add_argument("--batch", type=int, default=10, help="max.poll.records: jobs a worker takes at once")
    p.add_argument("--idle-exit-s", type=float, default=10.0, help="a worker stops after this long without jobs")
    args = p.parse_args(argv)
    tally = multiprocessing.Array("l", 3)
    pool = [multiprocessing.Process(target=worker, args=(i, args, tally)) for i in range(args.workers)]
    for proc in pool:
        proc.start()
    for proc in pool:
        proc.join()
    accepted, released, rejected = tally[:]
    say(f"done: {accepted} accepted, {released} released, {rejected} rejected")
    return 0 if all(proc.exitcode == 0 for proc in pool) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
