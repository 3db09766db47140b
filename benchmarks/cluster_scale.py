"""Owns the `cluster3k` phase: ZooKeeper and three kbroker brokers (benchmarks.cluster.Cluster, a
fresh cluster per repeat) holding 3,000 partitions at replication factor 3 (30 topics x 100
partitions; --quick: 6 x 100), and two recoveries timed from the moment they start:

1. controller failover: kill -9 of the controller; `elected` is when every surviving broker's
   Metadata names a live leader for every partition, `served` when a producer created then has had
   one acks=1 message acknowledged by every partition's leader. The killed broker is restarted and
   must rejoin every ISR (`rejoin`).
2. full cluster restart: SIGTERM to all three at once (each a controlled shutdown), then all three
   spawned together; `elected` and `served` as above, counted from the spawn, and `isr` when every
   partition is back to a full ISR.

ZooKeeper keeps running throughout (its session timeout is the failover's floor)."""

from __future__ import annotations

import os
import signal
import time

from confluent_kafka import Producer

from benchmarks import clients
from benchmarks.cluster import Cluster, run_phase
from benchmarks.phases import Ctx, row

PARTITIONS_PER_TOPIC = 100
POLL_S = 0.2  # Metadata of 3,000 partitions from every broker: polled less often than the small phase does


def _all_led(c: Cluster, topics: list[str], parts: int, live: set[int]) -> bool:
    """Every running broker names a live leader for every partition of `topics`."""
    views = c.views()
    if set(views) != live:
        return False
    for view in views.values():
        for t in topics:
            layout = view["layout"].get(t, {})
            if len(layout) != parts or any(leader not in live for leader, _, _ in layout.values()):
                return False
    return True


def _full_isr(c: Cluster, topics: list[str], parts: int, rf: int) -> bool:
    for view in c.views().values():
        for t in topics:
            layout = view["layout"].get(t, {})
            if len(layout) != parts or any(len(isr) != rf for _, _, isr in layout.values()):
                return False
    return True


def _serve_all(bootstrap: str, topics: list[str], parts: int, deadline: float) -> dict:
    """One acks=1 message to every partition from a new producer; seconds until the last is
    acknowledged, and the failures (a partition not served counts as one)."""
    state = {"acked": 0, "failed": 0, "first_error": None}

    def delivered(err, _msg):
        if err is None:
            state["acked"] += 1
        else:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    t0 = time.perf_counter()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "log_level": 3,
                         "message.timeout.ms": max(int((deadline - time.perf_counter()) * 1000), 1000)})
    total = len(topics) * parts
    for t in topics:
        for p in range(parts):
            producer.produce(t, b"x", partition=p, on_delivery=delivered)
    while state["acked"] + state["failed"] < total and time.perf_counter() < deadline:
        producer.poll(0.01)
    left = producer.flush(0)
    return {"seconds": time.perf_counter() - t0, "acked": state["acked"], "failed": state["failed"] + left,
            "first_error": state["first_error"]}


def _controller_failover(c: Cluster, topics: list[str], parts: int) -> dict:
    controller = c.controller()
    led = sum(1 for t in topics for leader, _, _ in c.layout(t).values() if leader == controller)
    victim = c.cluster.brokers[controller]
    live = set(c.running) - {controller}
    t0 = time.perf_counter()
    victim.kill()
    elected = c.wait(lambda: _all_led(c, topics, parts, live), 120, "a live leader for every partition", POLL_S)
    served = _serve_all(c.bootstrap, topics, parts, t0 + 120)
    served_s = time.perf_counter() - t0
    new_controller = c.controller()
    t1 = time.perf_counter()
    victim.start()
    c.wait(lambda: _full_isr(c, topics, parts, 3), 180, f"broker {controller} back in every ISR", POLL_S)
    return {"elected_s": elected, "served_s": served_s, "served_failed": served["failed"],
            "first_error": served["first_error"], "killed_controller": controller, "new_controller": new_controller,
            "leaders_moved": led, "rejoin_s": time.perf_counter() - t1, "errors": served["failed"],
            "session_timeout_s": c.session_s}


def _full_restart(c: Cluster, topics: list[str], parts: int) -> dict:
    brokers = list(c.running.values())
    t0 = time.perf_counter()
    for b in brokers:
        os.kill(b.proc.pid, signal.SIGTERM)
    codes = []
    for b in brokers:
        try:
            codes.append(b.proc.wait(90))
        except Exception:  # noqa: BLE001 - a broker that does not stop is killed, and noted
            b.kill()
            codes.append(None)
    stop_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    for b in brokers:
        b.start(wait=False)
    live = {b.broker_id for b in brokers}
    elected = c.wait(lambda: _all_led(c, topics, parts, live), 180, "a leader for every partition after the restart",
                     POLL_S)
    served = _serve_all(c.bootstrap, topics, parts, t1 + 180)
    served_s = time.perf_counter() - t1
    c.wait(lambda: _full_isr(c, topics, parts, 3), 180, "every ISR full after the restart", POLL_S)
    isr_s = time.perf_counter() - t1
    return {"stop_s": stop_s, "exit_codes": ",".join(str(x) for x in codes), "elected_s": elected,
            "served_s": served_s, "isr_s": isr_s, "served_failed": served["failed"],
            "first_error": served["first_error"], "errors": served["failed"] + sum(1 for x in codes if x != 0)}


def phase_cluster_scale(ctx: Ctx) -> list[dict]:
    return run_phase(ctx, "cluster3k", lambda c, rows: _measure(ctx, c, rows))


def _measure(ctx: Ctx, c: Cluster, rows: list[dict]) -> None:
    total = ctx.scale.cluster_topics * PARTITIONS_PER_TOPIC
    c.start()
    ctx.seq += 1
    topics = [f"bench-{ctx.run_id}-{ctx.seq:03d}-scale-{i:02d}" for i in range(ctx.scale.cluster_topics)]
    t0 = time.perf_counter()
    clients.create_topics(c.bootstrap, [(t, PARTITIONS_PER_TOPIC, {}) for t in topics], per_request=10,
                          replication_factor=3)
    c.wait(lambda: _full_isr(c, topics, PARTITIONS_PER_TOPIC, 3), 300, f"{total} partitions online, ISR 3", POLL_S)
    create_s = time.perf_counter() - t0
    print(f"  cluster3k: {total} partitions x RF 3 created and in sync after {create_s:.1f} s", flush=True)
    m = _controller_failover(c, topics, PARTITIONS_PER_TOPIC)
    rows.append(row("cluster3k.controller", "cluster3k", f"{total} partitions RF=3: kill -9 of the controller",
                    "recovery", {**m, "create_s": create_s, "partitions": total}))
    m = _full_restart(c, topics, PARTITIONS_PER_TOPIC)
    rows.append(row("cluster3k.restart", "cluster3k", f"{total} partitions RF=3: full cluster restart",
                    "recovery", {**m, "partitions": total, "rss_mb": c.group().memory_mb().get("rss_mb")}))
