"""Owns the `scale` phase: what the *number* of partitions costs. For N = 1,000 / 3,000 / 10,000
partitions at RF 3 (--quick: 1,000 only), a fresh cluster of ZooKeeper and three kbroker brokers
(benchmarks.cluster.Cluster) and, in order:

1. create: N partitions in topics of 100, timed to every partition in sync on every broker;
2. idle: after a 10 s settle, the three brokers' CPU over 20 s (percent of one core, summed) and
   their RSS — no client connected;
3. light load: one confluent-kafka producer, acks=all, linger.ms=0, 100 msg/s in total spread
   round-robin over every partition for 30 s: each acknowledgement's latency, p50/p99;
4. controller failover and full restart, as the cluster3k phase times them (benchmarks/cluster_scale.py).

`draw_curves` plots idle CPU, RSS and failover time against N (docs/images/scale-curves.png, with
matplotlib), with Kafka 3.8's figures where the issue measured them (this machine has no Kafka
distribution to run beside kbroker: no Maven, no Apache downloads).
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer

from benchmarks import clients
from benchmarks.cluster import Cluster, run_phase
from benchmarks.cluster_scale import PARTITIONS_PER_TOPIC, POLL_S, _controller_failover, _full_isr, _full_restart
from benchmarks.phases import Ctx, row

COUNTS = (1_000, 3_000, 10_000)
SETTLE_S = 10.0
IDLE_S = 20.0
LOAD_RATE = 100.0  # messages per second, all partitions together
LOAD_S = 30.0
# Kafka 3.8 on this machine class, three brokers and ZooKeeper, from issue 26 (3,000 partitions RF 3)
KAFKA_38 = {3_000: {"idle_cpu_pct": 14.0, "rss_mb": 1982.0}}
CURVES_PNG = Path(__file__).resolve().parent.parent / "docs" / "images" / "scale-curves.png"


def phase_scale(ctx: Ctx) -> list[dict]:
    counts = COUNTS[:1] if ctx.scale.cluster_topics < 30 else COUNTS  # --quick: 1,000 only
    rows: list[dict] = []
    for n in counts:
        rows += run_phase(ctx, f"scale{n}", lambda c, out, n=n: _measure(ctx, c, out, n))
    try:
        draw_curves(rows, CURVES_PNG)
        ctx.notes.append(f"scale curves drawn to {CURVES_PNG.relative_to(CURVES_PNG.parent.parent.parent)}")
    except ImportError:
        ctx.notes.append("scale curves not drawn: matplotlib is not installed (pip install -e .[bench])")
    return rows


def _measure(ctx: Ctx, c: Cluster, rows: list[dict], n: int) -> None:
    c.start()
    ctx.seq += 1
    topics = [f"bench-{ctx.run_id}-{ctx.seq:03d}-s{n}-{i:03d}" for i in range(n // PARTITIONS_PER_TOPIC)]
    t0 = time.perf_counter()
    clients.create_topics(c.bootstrap, [(t, PARTITIONS_PER_TOPIC, {}) for t in topics], per_request=10,
                          replication_factor=3, timeout=300)
    c.wait(lambda: _full_isr(c, topics, PARTITIONS_PER_TOPIC, 3), 600, f"{n} partitions online, ISR 3", POLL_S)
    create_s = time.perf_counter() - t0
    print(f"  scale{n}: {n} partitions x RF 3 created and in sync after {create_s:.1f} s", flush=True)

    time.sleep(SETTLE_S)
    group = c.group()
    before, t1 = group.cpu_times_each(), time.perf_counter()
    time.sleep(IDLE_S)
    after, elapsed = group.cpu_times_each(), time.perf_counter() - t1
    each = [((a[0] + a[1]) - (b[0] + b[1])) / elapsed * 100 for a, b in zip(after, before) if a and b]
    memory = group.memory_mb()
    rows.append(row(f"scale.{n}.idle", "scale", f"{n} partitions RF=3, no clients: three brokers", "scale",
                    {"partitions": n, "create_s": create_s, "idle_cpu_pct": sum(each),
                     "idle_cpu_pct_each": ",".join(f"{x:.1f}" for x in each), "rss_mb": memory.get("rss_mb"),
                     **({"kafka_idle_cpu_pct": KAFKA_38[n]["idle_cpu_pct"], "kafka_rss_mb": KAFKA_38[n]["rss_mb"]}
                        if n in KAFKA_38 else {})}))

    load = _light_load(c.bootstrap, topics)
    rows.append(row(f"scale.{n}.produce", "scale", f"{n} partitions RF=3: {LOAD_RATE:.0f} msg/s acks=all over all",
                    "latency", {"partitions": n, **load}))
    m = _controller_failover(c, topics, PARTITIONS_PER_TOPIC)
    rows.append(row(f"scale.{n}.controller", "scale", f"{n} partitions RF=3: kill -9 of the controller",
                    "recovery", {**m, "partitions": n}))
    m = _full_restart(c, topics, PARTITIONS_PER_TOPIC)
    rows.append(row(f"scale.{n}.restart", "scale", f"{n} partitions RF=3: full cluster restart", "recovery",
                    {**m, "partitions": n, "rss_mb": c.group().memory_mb().get("rss_mb")}))


def _light_load(bootstrap: str, topics: list[str]) -> dict:
    """LOAD_RATE messages/s, acks=all, linger 0, each to the next partition of every topic in turn;
    the acknowledgement latency of each."""
    latencies: list[float] = []
    failed = [0]

    def delivered(err, _msg, sent=None):
        if err is None:
            latencies.append(time.perf_counter() - sent)
        else:
            failed[0] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 3,
                         "message.timeout.ms": 60000})
    targets = [(t, p) for p in range(PARTITIONS_PER_TOPIC) for t in topics]
    total = int(LOAD_RATE * LOAD_S)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / LOAD_RATE
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.005))
        topic, partition = targets[i % len(targets)]
        producer.produce(topic, b"x" * 100, partition=partition,
                         on_delivery=lambda err, msg, sent=time.perf_counter(): delivered(err, msg, sent))
    left = producer.flush(60)
    latencies.sort()

    def pct(q: float) -> float | None:
        return latencies[min(int(q * len(latencies)), len(latencies) - 1)] * 1000 if latencies else None

    return {"messages": total, "acked": len(latencies), "errors": failed[0] + left, "p50_ms": pct(0.50),
            "p99_ms": pct(0.99), "max_ms": latencies[-1] * 1000 if latencies else None}


def draw_curves(rows: list[dict], out: Path) -> None:
    """Idle CPU, RSS and controller failover (served) against the partition count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_key = {r["key"]: r["metrics"] for r in rows}
    counts = sorted({m["partitions"] for k, m in by_key.items() if k.endswith(".idle")})
    if not counts:
        return
    panels = (("idle_cpu_pct", "idle", "idle CPU, three brokers (% of a core)", "kafka_idle_cpu_pct"),
              ("rss_mb", "idle", "RSS, three brokers (MB)", "kafka_rss_mb"),
              ("served_s", "controller", "controller kill -9 to all served (s)", None))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, (metric, kind, title, kafka_metric) in zip(axes, panels):
        xs = [n for n in counts if by_key.get(f"scale.{n}.{kind}", {}).get(metric) is not None]
        ax.plot(xs, [by_key[f"scale.{n}.{kind}"][metric] for n in xs], "o-", label="kbroker")
        if kafka_metric:
            kx = [n for n in counts if kafka_metric in by_key.get(f"scale.{n}.{kind}", {})]
            if kx:
                ax.plot(kx, [by_key[f"scale.{n}.{kind}"][kafka_metric] for n in kx], "s", color="tab:red",
                        label="Kafka 3.8 (issue 26's measurement)")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("partitions (RF 3)")
        ax.set_xscale("log")
        ax.set_xticks(counts, [f"{n:,}" for n in counts])
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
