"""Owns the `consume-default` phase (issue 26): one partition of 1,000,000 x 1 KiB read by a
confluent-kafka consumer with librdkafka's *default* fetch and queue settings, next to the same
consumer with `fetch.queue.backoff.ms=10`. Each read counts librdkafka's queue-full fetch backoffs
from its debug log: a partition whose local queue reached `queued.max.messages.kbytes` (64 MiB by
default) is not fetched again for `fetch.queue.backoff.ms` (1,000 ms by default)."""

from __future__ import annotations

from benchmarks import clients
from benchmarks.phases import Ctx, Meter, row

READS = 3  # reads per setting; the median read is the row's figure, every read is in the JSON
SETTINGS = (("default", {}), ("backoff10", {"fetch.queue.backoff.ms": 10}))


def phase_consume_default(ctx: Ctx) -> list[dict]:
    count = ctx.scale.security_messages
    topic = ctx.new_topic("consume-default-1024-p1", 1)
    r = clients.produce_run(ctx.bootstrap, topic, 1, 1024, count, "1", ctx.deadline())
    if r["errors"] or r["aborted"]:
        raise RuntimeError(f"prefill of {topic} failed: {r}")
    rows = []
    for name, extra in SETTINGS:
        reads = []
        for _ in range(READS):
            ctx.check_alive()
            with Meter(ctx.stats) as meter:
                r = clients.consume_run(ctx.bootstrap, topic, 1, ctx.deadline(), extra=extra, defaults=True)
            reads.append({**r, **meter.metrics(r["bytes"])})
        reads.sort(key=lambda m: m["mb_s"])
        median = reads[len(reads) // 2]
        label = "librdkafka defaults" if not extra else ", ".join(f"{k}={v}" for k, v in extra.items())
        rows.append(row(f"consume-default.1024.p1.{name}", "consume-default",
                        f"1 KiB, 1 part, {count:,} records, {label}", "throughput",
                        {**median, "reads_mb_s": [m["mb_s"] for m in reads],
                         "reads_queue_full_backoffs": [m["queue_full_backoffs"] for m in reads],
                         "median_of": len(reads), "mb_s_min": reads[0]["mb_s"], "mb_s_max": reads[-1]["mb_s"]}))
    ctx.drop_topics([topic])
    return rows
