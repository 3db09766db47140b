"""A confluent-kafka (librdkafka) consumer-group member for groupkit: subscribe, process, commit
synchronously after each batch, report as JSON lines; SIGTERM closes the consumer (leaving the
group, unless it is a static member). librdkafka's defaults otherwise (auto-commit stays on).

With the eager strategies (range, roundrobin) on_assign receives the whole new assignment; with
cooperative-sticky on_assign/on_revoke receive only the partitions added/removed. Either way the
callback applies them (assign / unassign / incremental_assign / incremental_unassign, what the client
would otherwise do itself right after the callback) and then reports `consumer.assignment()` with
the wall time `t` of the callback (an eager revocation reports the empty assignment: groupkit's
single-owner check). `--session-timeout-ms` / `--heartbeat-interval-ms` set the classic protocol's
session.timeout.ms / heartbeat.interval.ms (with group.protocol=consumer the broker decides them).

`--group-protocol consumer`: KIP-848 (`group.protocol=consumer`), the broker assigns (uniform unless
`--remote-assignor`); librdkafka refuses the classic-only settings, so `--strategy` must be absent."""

import argparse
import json
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException

STRATEGIES = ("range", "roundrobin", "cooperative-sticky")


def emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("group")
    ap.add_argument("topic")
    ap.add_argument("--strategy", default=None, choices=STRATEGIES)
    ap.add_argument("--instance-id", default=None)
    ap.add_argument("--group-protocol", default="classic", choices=("classic", "consumer"))
    ap.add_argument("--remote-assignor", default=None)
    ap.add_argument("--session-timeout-ms", type=int, default=None)
    ap.add_argument("--heartbeat-interval-ms", type=int, default=None)
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest"}
    if args.strategy:
        conf["partition.assignment.strategy"] = args.strategy
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if args.group_protocol == "consumer":
        conf["group.protocol"] = "consumer"  # KIP-848: the broker assigns, callbacks are incremental
        if args.remote_assignor:
            conf["group.remote.assignor"] = args.remote_assignor
    if args.session_timeout_ms:
        conf["session.timeout.ms"] = args.session_timeout_ms
    if args.heartbeat_interval_ms:
        conf["heartbeat.interval.ms"] = args.heartbeat_interval_ms
    consumer = Consumer(conf)
    # the client exposes no rebalance_protocol()
    cooperative = args.strategy == "cooperative-sticky" or args.group_protocol == "consumer"

    def report(c):
        try:
            assignment = c.assignment()
        except KafkaException as exc:  # the revoke close() runs: librdkafka is already tearing down
            if exc.args[0].code() == KafkaError._DESTROY:
                return
            raise
        emit(event="assigned", partitions=sorted(tp.partition for tp in assignment), t=time.time())

    def on_assign(c, partitions):
        if cooperative:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        report(c)

    def on_revoke(c, partitions):
        if cooperative:
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        report(c)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop:
        batch = consumer.consume(num_messages=500, timeout=0.2)
        nexts = {}
        for msg in batch:
            if msg.error():
                print(f"consume error: {msg.error()!r}", file=sys.stderr)
                continue
            emit(event="record", partition=msg.partition(), offset=msg.offset(), key=(msg.key() or b"").decode())
            nexts[msg.partition()] = msg.offset() + 1
        if not nexts:
            continue
        try:
            done = consumer.commit(asynchronous=False)
            committed = {tp.partition: tp.offset for tp in done if tp.error is None and tp.offset >= 0}
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                print(f"commit failed: {exc!r}", file=sys.stderr)
                continue
            committed = nexts  # nothing left to commit: auto-commit had committed them already
        emit(event="committed", offsets={str(p): o for p, o in committed.items()})
    consumer.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
