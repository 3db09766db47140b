"""A child process of the `share` benchmark phase (benchmarks/share_groups.py), run as a script:

- `share`: a confluent-kafka ShareConsumer (KIP-932) of `--group`. It creates its consumer, prints
  `{"event": "ready"}`, waits for a line on stdin, subscribes (printing `{"event": "subscribed"}`)
  and polls until SIGTERM. Per record it sleeps `--work-ms` (the simulated work time). In implicit
  mode it prints one line `B <records> <t>` per non-empty poll (t = wall-clock time once the batch's
  work is done). With `--records` it prints `R <partition> <offset> <t> <delivery count>` per record
  instead. In explicit mode it acknowledges (ACCEPT) every record and commits after each poll,
  unless `--hold`: then it never acknowledges, and after the first non-empty poll it prints the
  records it holds and stops polling (sleeping until killed): a consumer that dies holding acquired
  records.
- `classic`: a confluent-kafka Consumer (classic group protocol, `auto.offset.reset=earliest`) of
  `--group`, the same `B` lines and work time: the comparison.

Kept free of kbroker and benchmarks imports, so it starts fast."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def share(args) -> None:
    from confluent_kafka import ShareConsumer

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group,
            "share.acknowledgement.mode": args.mode, "max.poll.records": args.max_poll,
            "fetch.wait.max.ms": args.fetch_wait_ms, "client.id": f"bench-share-{args.name}"}
    conf.update(kv.split("=", 1) for kv in args.conf)
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer = ShareConsumer(conf)
    emit(event="ready", t=time.time())
    sys.stdin.readline()
    consumer.subscribe([args.topic])
    emit(event="subscribed", t=time.time())
    out = sys.stdout
    work = args.work_ms / 1000.0
    explicit = args.mode == "explicit"
    while not stop:
        msgs = consumer.poll(0.1)
        if not msgs:
            continue
        got = [m for m in msgs if not m.error()]
        for m in msgs:
            if m.error():
                print(f"consume error: {m.error()!r}", file=sys.stderr)
        if args.hold:
            now = time.time()
            for m in got:
                out.write(f"R {m.partition()} {m.offset()} {now:.6f} {m.delivery_count()}\n")
            out.flush()
            emit(event="holding", records=len(got), t=now)
            while not stop:
                time.sleep(0.1)
            break
        lines = []
        for m in got:
            if work:
                time.sleep(work)
            if explicit:
                consumer.acknowledge(m)
            if args.records:
                lines.append(f"R {m.partition()} {m.offset()} {time.time():.6f} {m.delivery_count()}\n")
        if explicit and got:
            consumer.commit_sync()
        if args.records:
            out.write("".join(lines))
        elif got:
            out.write(f"B {len(got)} {time.time():.6f}\n")
        out.flush()
    if not args.hold:
        consumer.close()
    emit(event="closed", t=time.time())


def classic(args) -> None:
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": args.fetch_wait_ms, "enable.auto.commit": True,
            "client.id": f"bench-classic-{args.name}"}
    conf.update(kv.split("=", 1) for kv in args.conf)
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer = Consumer(conf)
    emit(event="ready", t=time.time())
    sys.stdin.readline()
    consumer.subscribe([args.topic])
    emit(event="subscribed", t=time.time())
    out = sys.stdout
    work = args.work_ms / 1000.0
    while not stop:
        msgs = consumer.consume(args.max_poll, 0.1)
        n = 0
        for m in msgs:
            if m.error():
                continue
            if work:
                time.sleep(work)
            n += 1
        if n:
            out.write(f"B {n} {time.time():.6f}\n")
            out.flush()
    consumer.close()
    emit(event="closed", t=time.time())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=("share", "classic"))
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("--group", default="bench-share")
    ap.add_argument("--name", default="0")
    ap.add_argument("--mode", default="implicit", choices=("implicit", "explicit"))
    ap.add_argument("--work-ms", type=float, default=0.0)
    ap.add_argument("--max-poll", type=int, default=500)
    ap.add_argument("--fetch-wait-ms", type=int, default=500)
    ap.add_argument("--records", action="store_true", help="print every record (R lines), not batches")
    ap.add_argument("--hold", action="store_true", help="explicit mode: never acknowledge; stop after one poll")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="more consumer configuration")
    args = ap.parse_args()
    (share if args.role == "share" else classic)(args)


if __name__ == "__main__":
    main()
