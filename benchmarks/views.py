"""Owns the `views` benchmark phase: filtered consume next to unfiltered consume of the same data.

One topic is filled with 1 KiB records (librdkafka's batching: ~1 MB batches) whose `tags` header
selects them for three views: `any(t1)` matches 1 % of the records, `any(t50)` 50 % and
`any(all)` 100 %. Each view is read from the earliest offset twice (the first read walks every
batch's records; the second finds most verdicts in the broker's match cache), next to the topic
itself read twice, each timed from assign() to the last record. Rows report the delivered MB/s
(matching records' bytes) and the source MB/s (the source bytes the read moved past per second:
what a consumer of the view waits for).
"""

from __future__ import annotations

import os
import time

from confluent_kafka import Producer

from benchmarks import clients
from benchmarks.phases import Meter, Ctx, row

SIZE = 1024
SELECTIVITIES = ((1, "t1"), (50, "t50"), (100, "all"))


def _tags(i: int) -> bytes:
    tags = ["all"] + (["t50"] if i % 2 == 0 else []) + (["t1"] if i % 100 == 0 else [])
    return ",".join(tags).encode()


def fill(bootstrap: str, topic: str, count: int, deadline: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 1000000,
                         "batch.num.messages": 1000000, "queue.buffering.max.messages": 2000000,
                         "queue.buffering.max.kbytes": 2097151, "compression.type": "none"})
    payload = os.urandom(SIZE)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=payload, partition=0, headers=[("tags", _tags(i))])
                break
            except BufferError:
                producer.poll(0.01)
        if time.perf_counter() > deadline:
            raise RuntimeError(f"filling {topic} ran past the deadline")
    if producer.flush(120):
        raise RuntimeError(f"filling {topic}: records still unacknowledged")


def phase_views(ctx: Ctx) -> list[dict]:
    ctx.check_alive()
    count = ctx.scale.messages
    topic = ctx.new_topic("views-src", 1)
    fill(ctx.bootstrap, topic, count, ctx.deadline())
    source_bytes = count * SIZE
    views = []
    for percent, tag in SELECTIVITIES:
        name = f"{topic}-v{percent}"
        clients.create_topics(ctx.bootstrap, [(name, 1, {"view.source": topic, "view.filter": f"any({tag})"})])
        views.append((percent, name))
    rows = []
    matching = {1: len(range(0, count, 100)), 50: len(range(0, count, 2)), 100: count}  # as _tags() says
    reads = [("unfiltered", topic, count)] + [(f"{p}%", name, matching[p]) for p, name in views]
    baseline = None
    for label, name, expected in reads:
        for attempt in ("first read", "second read"):
            ctx.check_alive()
            with Meter(ctx.stats) as meter:
                # consume() waits for 10,000 records or poll_s: only the 1 % read has fewer than that
                r = clients.consume_run(ctx.bootstrap, name, 1, ctx.deadline(), expected=expected,
                                        poll_s=0.5 if expected >= 10000 else 0.005)
            m = {**r, **meter.metrics(source_bytes)}
            # timed from assign() to the last record: a view's broker work comes before its first record
            m["seconds"] = (r["first_message_s"] or 0) + (r["seconds"] if r["seconds"] == r["seconds"] else 0)
            if m["seconds"] > 0:
                m.update(msgs_s=r["messages"] / m["seconds"], mb_s=r["bytes"] / m["seconds"] / 1e6,
                         source_mb_s=source_bytes / m["seconds"] / 1e6)
            if label == "unfiltered" and attempt == "second read":
                baseline = m.get("source_mb_s")
            if baseline and label != "unfiltered" and m.get("source_mb_s"):
                m["ratio_to_unfiltered"] = m["source_mb_s"] / baseline
            what = "the source topic" if label == "unfiltered" else f"a view matching {label}"
            rows.append(row(f"views.{label.rstrip('%')}.{attempt.split()[0]}", "views",
                            f"1 KiB, {what}, {attempt}", "throughput", m))
    clients.delete_topics(ctx.bootstrap, [name for _, name in views])
    ctx.drop_topics([topic])
    return rows
