"""A child process of the `groups` benchmark phase (benchmarks/groups.py), run as a script:

- `member`: a confluent-kafka consumer-group member (classic with --strategy, or
  `group.protocol=consumer`). It creates its Consumer, prints `{"event": "ready"}`, waits for a line
  on stdin, then subscribes (printing `{"event": "subscribed", "t": ...}`). Each rebalance callback
  applies the change (assign/unassign, or incremental_* when cooperative) and prints the member's
  whole assignment with a wall-clock `t`; each record received prints `R <partition> <offset> <t>
  <latency ms>` (t = wall-clock receive time, latency = receive time - the send time the producer
  wrote into the value). SIGTERM closes the consumer.
- `producer`: a steady producer of `--rate` records/s round-robin over the topic's partitions, each
  value carrying its wall-clock send time; prints a JSON summary on SIGTERM.

Kept free of kbroker and benchmarks imports, so it starts fast and loads any broker the same way."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def member(args) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "latest",
            "fetch.wait.max.ms": args.fetch_wait_ms, "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
            "client.id": f"bench-member-{args.name}"}
    if args.group_protocol == "consumer":
        conf["group.protocol"] = "consumer"  # the broker's heartbeat interval and session timeout apply
    else:
        conf["partition.assignment.strategy"] = args.strategy
        conf["session.timeout.ms"] = args.session_ms
        conf["heartbeat.interval.ms"] = args.heartbeat_ms
    if args.debug:
        conf["debug"] = args.debug  # librdkafka's debug contexts, to stderr
    conf.update(kv.split("=", 1) for kv in args.conf)
    cooperative = args.group_protocol == "consumer" or args.strategy == "cooperative-sticky"
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer = Consumer(conf)

    def report(c, why: str) -> None:
        try:
            assignment = c.assignment()
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._DESTROY:
                return
            raise
        emit(event="assigned", why=why, partitions=sorted(tp.partition for tp in assignment), t=time.time())

    def on_assign(c, partitions):
        if cooperative:
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        report(c, "assign")

    def on_revoke(c, partitions):
        if cooperative:
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        report(c, "revoke")

    def on_lost(c, partitions):
        if cooperative:
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        report(c, "lost")

    emit(event="ready", t=time.time())
    sys.stdin.readline()
    emit(event="subscribed", t=time.time())
    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    out = sys.stdout
    while not stop:
        msg = consumer.poll(0.05)
        if msg is None:
            continue
        now = time.time()
        if msg.error():
            print(f"consume error: {msg.error()!r}", file=sys.stderr)
            continue
        try:
            sent = float(msg.value()[:17])
        except ValueError:
            sent = now
        out.write(f"R {msg.partition()} {msg.offset()} {now:.6f} {(now - sent) * 1000:.2f}\n")
        out.flush()
    consumer.close()
    emit(event="closed", t=time.time())


def producer(args) -> None:
    from confluent_kafka import Producer

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    p = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 1, "acks": "1", "client.id": "bench-producer"})
    p.list_topics(args.topic, timeout=30)
    errors = [0]

    def failed(err, _msg):
        if err is not None:
            errors[0] += 1

    pad = b" " * max(0, args.size - 17)
    start = time.time()
    sent, max_gap, last = 0, 0.0, start
    emit(event="producing", t=start)
    while not stop:
        now = time.time()
        due = int((now - start) * args.rate)
        if due > sent:
            max_gap = max(max_gap, now - last)
            last = now
        while sent < due:
            try:
                p.produce(args.topic, b"%17.6f" % time.time() + pad, partition=sent % args.partitions,
                          on_delivery=failed)
            except BufferError:
                p.poll(0.01)
                continue
            sent += 1
        p.poll(0)
        time.sleep(0.002)
    p.flush(10)
    emit(event="produced", sent=sent, errors=errors[0], seconds=time.time() - start, max_send_gap_s=max_gap)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("member", "producer"))
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("--group", default="bench-group")
    ap.add_argument("--name", default="0")
    ap.add_argument("--strategy", default="range", choices=("range", "roundrobin", "cooperative-sticky"))
    ap.add_argument("--group-protocol", default="classic", choices=("classic", "consumer"))
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--fetch-wait-ms", type=int, default=500)
    ap.add_argument("--rate", type=float, default=600.0)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--debug", default="", help="librdkafka debug contexts (e.g. fetch,cgrp), for diagnosis")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="more consumer configuration")
    args = ap.parse_args()
    (member if args.role == "member" else producer)(args)


if __name__ == "__main__":
    main()
