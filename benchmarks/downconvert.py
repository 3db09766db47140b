"""The `downconvert` phase: what an old consumer costs the broker. The consume phase's topics (record
batches v2, uncompressed, as the produce phase wrote them) read from the earliest offset twice,
back to back on the same broker: by the consume phase's librdkafka consumer (Fetch v16: the log's
file ranges sent with sendfile), and by the same consumer forced to an old protocol
(`api.version.request=false`, `broker.version.fallback=0.9.0`: Fetch v1, ListOffsets v0), which
kbroker answers with message sets v0 down-converted from the batches in Python, as Kafka 3.9 does
for Fetch v0-3. librdkafka 2.x cannot be held to Fetch v2-3 (magic 1): any fallback of 0.10.0 or
later makes it ask the broker for its versions."""

from __future__ import annotations

from benchmarks import clients

OLD_CLIENT = {"api.version.request": False, "broker.version.fallback": "0.9.0"}


def phase_downconvert(ctx) -> list[dict]:
    from benchmarks.phases import CONSUME_RUNS, Meter, _size_label, row

    rows = []
    for size, parts in CONSUME_RUNS:
        ctx.check_alive()
        topic = ctx.prefilled.get((size, parts))
        if topic is None:  # not after the produce phase: fill a topic first (untimed)
            topic = ctx.new_topic(f"consume-{size}-p{parts}", parts)
            r = clients.produce_run(ctx.bootstrap, topic, parts, size, ctx.scale.messages, "1", ctx.deadline())
            if r["errors"] or r["aborted"]:
                raise RuntimeError(f"prefill of {topic} failed: {r}")
            ctx.prefilled[(size, parts)] = topic
        label = f"{_size_label(size)}, {parts} part"
        with Meter(ctx.stats) as meter:
            modern = clients.consume_run(ctx.bootstrap, topic, parts, ctx.deadline())
        modern = {**modern, **meter.metrics(modern["bytes"])}
        with Meter(ctx.stats) as meter:
            old = clients.consume_run(ctx.bootstrap, topic, parts, ctx.deadline(), extra=OLD_CLIENT)
        old = {**old, **meter.metrics(old["bytes"])}
        if modern.get("mb_s") and old.get("mb_s") == old.get("mb_s"):  # not NaN
            old["ratio_to_batches"] = old["mb_s"] / modern["mb_s"]
        if modern.get("cpu_s_per_gb") and old.get("cpu_s_per_gb") is not None:
            old["cpu_ratio_to_batches"] = old["cpu_s_per_gb"] / modern["cpu_s_per_gb"]
        rows.append(row(f"downconvert.{size}.p{parts}.batches", "downconvert",
                        f"{label}, Fetch v16 (batches)", "throughput", modern))
        rows.append(row(f"downconvert.{size}.p{parts}.v1", "downconvert",
                        f"{label}, Fetch v1 (magic 0)", "throughput", old))
    return rows
