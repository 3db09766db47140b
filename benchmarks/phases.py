"""Owns the benchmark phases: each function takes the run context, drives clients.py against
the broker, wraps every run with broker CPU/RSS readings, and returns result rows
{key, phase, name, kind, metrics}. Targets and formatting are run.py's business. The cluster
phase, which starts a ZooKeeper and three brokers of its own, lives in cluster.py."""

from __future__ import annotations

import importlib
import os
import resource
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import clients, kwire
from benchmarks.broker import OwnBroker, ProcStats
from benchmarks.delayed import PARTITIONS as DELAYED_PARTITIONS
from benchmarks.delayed import delayed_run


@dataclass
class Scale:
    messages: int = 200_000
    e2e_messages: int = 10_000
    e2e_rate: float = 1000.0
    latency_messages: int = 5_000
    meta_topics: int = 100
    meta_partitions: int = 100
    metadata_repeats: int = 5
    restarts: int = 3
    connections: int = 1000
    requests: int = 5_000
    cluster_topics: int = 30  # x 100 partitions at RF 3 in the cluster3k phase
    delayed_messages: int = 10_000
    delayed_max_ms: int = 30_000
    fixture_starts: int = 10
    tiered_mb: int = 128
    security_messages: int = 1_000_000  # per listener in the security phase (the Kafka workload)
    sustained_messages: int = 1_500_000  # per sustained run of the cluster phase (1.5 GB of 1 KiB records)
    auth_seconds: float = 5.0           # per authentication run of the security phase
    commit_groups: int = 1000           # classic groups of one committing member (group-commits phase)
    commit_window_s: float = 60.0       # the group-commits phase's steady window

    @classmethod
    def quick(cls) -> "Scale":
        return cls(messages=20_000, e2e_messages=2_000, latency_messages=1_000, meta_topics=10,
                   meta_partitions=100, metadata_repeats=3, restarts=1, connections=200, requests=500, cluster_topics=6,
                   delayed_messages=1_000, delayed_max_ms=5_000, fixture_starts=3, tiered_mb=16,
                   security_messages=20_000, auth_seconds=1.0, commit_groups=50, commit_window_s=10.0,
                   sustained_messages=30_000)


@dataclass
class Ctx:
    bootstrap: str
    stats: ProcStats | None          # the main broker's process, if known
    own: OwnBroker | None            # the main broker, if this harness started it
    base: Path                       # temp dir for harness-started brokers
    scale: Scale
    max_seconds: float
    run_id: str
    overrides: list[str]             # extra --override for harness-started brokers
    log_level: str = "INFO"
    created: list[str] = field(default_factory=list)      # topics created on the main broker
    prefilled: dict = field(default_factory=dict)         # (size, partitions) -> full topic
    side_brokers: list[OwnBroker] = field(default_factory=list)
    seq: int = 0
    cluster_runs: int = 0                                 # clusters the cluster phase has started
    txn_rounds: int = 0                                   # transactions phases run (which mode goes first rotates)
    txn_consumes: int = 0                                 # read_committed/uncommitted pairs run (order alternates)
    notes: list[str] = field(default_factory=list)        # printed under the table
    log_problems: dict = field(default_factory=dict)      # name -> ERROR/Traceback lines of a broker log

    @property
    def host_port(self) -> tuple[str, int]:
        host, port = self.bootstrap.rsplit(":", 1)
        return host, int(port)

    def deadline(self) -> float:
        return time.perf_counter() + self.max_seconds

    def new_topic(self, label: str, partitions: int, config: dict | None = None, bootstrap: str | None = None) -> str:
        self.seq += 1
        name = f"bench-{self.run_id}-{self.seq:03d}-{label}"
        # file.delete.delay.ms=0: a deleted benchmark topic frees its disk and page cache at once
        config = {"file.delete.delay.ms": "0", **(config or {})}
        clients.create_topics(bootstrap or self.bootstrap, [(name, partitions, config)])
        if bootstrap is None:
            self.created.append(name)
        return name

    def drop_topics(self, names: list[str]) -> None:
        """Delete topics on the main broker once measured, so disk and page cache stay small
        (on this VM, writing past ~2 GB of page cache makes the writer's kernel time jump)."""
        clients.delete_topics(self.bootstrap, names)
        self.created[:] = [n for n in self.created if n not in names]

    def check_alive(self) -> None:
        if self.own is not None and not self.own.alive():
            raise RuntimeError(f"main broker is not running (exit code {self.own.proc and self.own.proc.returncode}):\n"
                               f"{self.own.log_tail()}")


class Meter:
    """Broker CPU delta and memory, plus the harness's own CPU, around one run."""

    def __init__(self, stats: ProcStats | None):
        self.stats = stats

    def __enter__(self):
        self.cpu0 = self.stats.cpu_times() if self.stats else None
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.client0 = ru.ru_utime + ru.ru_stime
        return self

    def __exit__(self, *exc):
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.client_cpu = ru.ru_utime + ru.ru_stime - self.client0
        cpu1 = self.stats.cpu_times() if self.stats else None
        self.broker_cpu = self.broker_utime = self.broker_stime = None
        if cpu1 is not None and self.cpu0 is not None:
            self.broker_utime = cpu1[0] - self.cpu0[0]
            self.broker_stime = cpu1[1] - self.cpu0[1]
            self.broker_cpu = self.broker_utime + self.broker_stime
        self.memory = self.stats.memory_mb() if self.stats else {}
        return False

    def metrics(self, nbytes: int | None = None) -> dict:
        m = {"broker_cpu_s": self.broker_cpu, "broker_user_s": self.broker_utime,
             "broker_sys_s": self.broker_stime, "client_cpu_s": self.client_cpu, **self.memory}
        if nbytes and self.broker_cpu is not None:
            m["cpu_s_per_gb"] = self.broker_cpu / (nbytes / 1e9)
        return m


def row(key: str, phase: str, name: str, kind: str, metrics: dict) -> dict:
    return {"key": key, "phase": phase, "name": name, "kind": kind, "metrics": metrics}


def _size_label(size: int) -> str:
    return "1 KiB" if size == 1024 else f"{size} B"


def _produce_row(ctx: Ctx, key: str, phase: str, name: str, topic: str, partitions: int, size: int, acks: str,
                 bootstrap: str | None = None, stats: ProcStats | None = None) -> dict:
    with Meter(stats if bootstrap else ctx.stats) as meter:
        r = clients.produce_run(bootstrap or ctx.bootstrap, topic, partitions, size, ctx.scale.messages, acks,
                                ctx.deadline())
    return row(key, phase, name, "throughput", {**r, **meter.metrics(r["bytes"])})


# ---------------------------------------------------------------------------------------------
CONSUME_RUNS = ((1024, 1), (1024, 6), (100, 1))  # (message size, partitions) read back by phase_consume


def phase_produce(ctx: Ctx) -> list[dict]:
    rows = []
    for size in (1024, 100):
        for acks in ("1", "all"):
            for parts in (1, 6):
                ctx.check_alive()
                topic = ctx.new_topic(f"produce-{size}-p{parts}-acks{acks}", parts)
                r = _produce_row(ctx, f"produce.{size}.p{parts}.acks{acks}", "produce",
                                 f"{_size_label(size)}, {parts} part, acks={acks}", topic, parts, size, acks)
                rows.append(r)
                m = r["metrics"]
                if (acks == "1" and (size, parts) in CONSUME_RUNS and not m["aborted"] and not m["errors"]
                        and (size, parts) not in ctx.prefilled):
                    ctx.prefilled[(size, parts)] = topic  # kept for the consume phase
                else:
                    ctx.drop_topics([topic])
    return rows


def phase_consume(ctx: Ctx) -> list[dict]:
    rows = []
    for size, parts in CONSUME_RUNS:
        ctx.check_alive()
        topic = ctx.prefilled.get((size, parts))
        if topic is None:  # --only consume: fill a topic first (untimed)
            topic = ctx.new_topic(f"consume-{size}-p{parts}", parts)
            r = clients.produce_run(ctx.bootstrap, topic, parts, size, ctx.scale.messages, "1", ctx.deadline())
            if r["errors"] or r["aborted"]:
                raise RuntimeError(f"prefill of {topic} failed: {r}")
            ctx.prefilled[(size, parts)] = topic
        with Meter(ctx.stats) as meter:
            r = clients.consume_run(ctx.bootstrap, topic, parts, ctx.deadline())
        rows.append(row(f"consume.{size}.p{parts}", "consume", f"{_size_label(size)}, {parts} part, from earliest",
                        "throughput", {**r, **meter.metrics(r["bytes"])}))
    return rows


def phase_partitions100(ctx: Ctx) -> list[dict]:
    """The 1 KiB acks=1 produce run on 1 partition and right after on 100 partitions."""
    ctx.check_alive()
    base = _produce_row(ctx, "scaling.p1", "partitions100", "1 KiB, 1 part, acks=1 (baseline)",
                        ctx.new_topic("scale-p1", 1), 1, 1024, "1")
    ctx.check_alive()
    wide = _produce_row(ctx, "scaling.p100", "partitions100", "1 KiB, 100 parts, acks=1",
                        ctx.new_topic("scale-p100", 100), 100, 1024, "1")
    ctx.drop_topics([t for t in ctx.created if "-scale-p" in t])
    if base["metrics"]["mb_s"]:
        wide["metrics"]["ratio_to_p1"] = wide["metrics"]["mb_s"] / base["metrics"]["mb_s"]
    return [base, wide]


TXN_RUNS = ((1024, 1), (1024, 6), (100, 1))  # (message size, partitions) of the transactions phase
TXN_MESSAGES = 1000                           # messages per transaction
TXN_MODES = (("idempotent", "idempotent"), ("flushed", f"idempotent, flush every {TXN_MESSAGES:,}"),
             ("transactional", f"{TXN_MESSAGES:,} per transaction"))
ISOLATIONS = ("read_uncommitted", "read_committed")


def prime_page_cache(directory: Path, nbytes: int) -> None:
    """Write `nbytes` to a scratch file and delete it, so that the run that follows writes into
    page-cache pages the kernel has just freed. On this VM (Firecracker, free page reporting) a
    page left free for about a second goes back to the host and costs ~10x as much to write into
    again (a plain 1 MiB os.write loop: ~4 GB/s into just-freed pages, ~0.5 GB/s otherwise), so
    without this two runs compared pair-wise depend on what was deleted just before each."""
    chunk = bytes(1 << 20)
    path = directory / "prime.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(max(1, nbytes >> 20)):
            os.write(fd, chunk)
    finally:
        os.close(fd)
        os.unlink(path)


def txn_runs(ctx: Ctx, phase: str, prefix: str, label: str, bootstrap: str, stats, new_topic, drop) -> list[dict]:
    """The transactions comparison on one broker or cluster, per (size, partitions) of TXN_RUNS:
    the idempotent produce run (acks=all, the produce phase's client settings), the same with a
    flush() every TXN_MESSAGES (what a commit costs without the transaction's own requests) and
    the transactional run (TXN_MESSAGES per transaction), each into a topic of its own, back to
    back, each right after prime_page_cache(), which of them goes first rotating between calls;
    then the transactional topic read from the earliest offset twice with each of isolation.level=
    read_uncommitted and read_committed (A B B A, which is A alternates). `new_topic(label,
    partitions)` creates a topic, `drop(names)` deletes them once measured."""
    rows = []
    ctx.txn_rounds += 1
    for index, (size, parts) in enumerate(TXN_RUNS):
        ctx.check_alive()
        key = f"{prefix}.{size}.p{parts}"
        name = f"{_size_label(size)}, {parts} part{label}"
        produced = {}
        turn = (ctx.txn_rounds + index) % len(TXN_MODES)
        for mode, what in TXN_MODES[turn:] + TXN_MODES[:turn]:
            topic = new_topic(f"txn-{size}-p{parts}-{mode[:5]}", parts)
            prime_page_cache(ctx.base, size * ctx.scale.messages)
            with Meter(stats) as meter:
                r = clients.produce_run(bootstrap, topic, parts, size, ctx.scale.messages, "all", ctx.deadline(),
                                        mode=mode, txn_messages=TXN_MESSAGES)
            produced[mode] = (topic, row(f"{key}.{mode}", phase, f"{name}, {what}, acks=all", "throughput",
                                         {**r, **meter.metrics(r["bytes"]), "position": len(produced)}))
        rows += [produced[mode][1] for mode, _ in TXN_MODES]
        drop([produced[mode][0] for mode in ("idempotent", "flushed")])
        idem, txn = (produced[mode][1]["metrics"] for mode in ("idempotent", "transactional"))
        if idem["mb_s"]:
            for mode in ("flushed", "transactional"):
                produced[mode][1]["metrics"]["ratio_to_idempotent"] = produced[mode][1]["metrics"]["mb_s"] / idem["mb_s"]
        topic = produced["transactional"][0]
        if txn["messages"] and not txn["errors"] and not txn["aborted"]:
            ctx.txn_consumes += 1
            first, second = ISOLATIONS if ctx.txn_consumes % 2 else ISOLATIONS[::-1]
            reads: dict[str, list[dict]] = {i: [] for i in ISOLATIONS}
            for isolation in (first, second, second, first):  # ABBA: two reads each, order balanced
                with Meter(stats) as meter:
                    r = clients.consume_run(bootstrap, topic, parts, ctx.deadline(), isolation=isolation,
                                            expected=txn["messages"])
                reads[isolation].append({**r, **meter.metrics(r["bytes"])})
            read = {i: row(f"{key}.{i}", phase, f"{name}, transactional data, {i} (2 reads)", "throughput",
                           {**_combined(reads[i]), "first": i == first}) for i in ISOLATIONS}
            if read["read_uncommitted"]["metrics"]["mb_s"]:
                read["read_committed"]["metrics"]["ratio_to_uncommitted"] = (
                    read["read_committed"]["metrics"]["mb_s"] / read["read_uncommitted"]["metrics"]["mb_s"])
            rows += [read[i] for i in ISOLATIONS]
        drop([topic])
    return rows


def _combined(reads: list[dict]) -> dict:
    """Several consume runs of the same topic as one: MB/s and CPU-s/GB over their summed bytes and
    seconds, the rest from the first (errors and aborts from any)."""
    out = dict(reads[0])
    for k in ("messages", "bytes", "seconds", "broker_cpu_s", "broker_user_s", "broker_sys_s", "client_cpu_s",
              "errors"):
        vals = [r.get(k) for r in reads]
        out[k] = None if any(v is None for v in vals) else sum(vals)
    out["aborted"] = any(r.get("aborted") for r in reads)
    if out["seconds"]:
        out["msgs_s"], out["mb_s"] = out["messages"] / out["seconds"], out["bytes"] / out["seconds"] / 1e6
    if out["broker_cpu_s"] is not None and out["bytes"]:
        out["cpu_s_per_gb"] = out["broker_cpu_s"] / (out["bytes"] / 1e9)
    out["mb_s_each"] = ", ".join(f"{r['mb_s']:.0f}" for r in reads)
    return out


def phase_transactions(ctx: Ctx) -> list[dict]:
    """Transactional produce next to idempotent produce, and read_committed next to
    read_uncommitted consume of the same transactional data, on the main broker."""
    return txn_runs(ctx, "transactions", "txn", "", ctx.bootstrap, ctx.stats, ctx.new_topic, ctx.drop_topics)


REQUEST_SHAPES = ((160, "160 x 1 KiB"), (1, "1 x 1 KiB"))  # records per batch, label


def phase_requests(ctx: Ctx) -> list[dict]:
    """The broker's cost per Produce request, with no client library in the way: a raw socket
    pipelines single-partition Produce v3 requests (acks=1) round-robin over a 100-partition topic,
    one batch of 160 records (the size librdkafka sends per partition in the partitions100 phase)
    and of one record."""
    ctx.check_alive()
    host, port = ctx.host_port
    rows = []
    for records, label in REQUEST_SHAPES:
        topic = ctx.new_topic(f"requests-{records}", 100)
        batch = kwire.record_batch(records, bytes(1024), int(time.time() * 1000))
        with Meter(ctx.stats) as meter:
            r = kwire.produce_pipelined(host, port, topic, 100, batch, ctx.scale.requests, ctx.deadline())
        m = {**r, **meter.metrics(r["answered"] * records * 1024), "requests_s": r["answered"] / r["seconds"],
             "mb_s": r["answered"] * records * 1024 / r["seconds"] / 1e6}
        if meter.broker_cpu is not None and r["answered"]:
            m["broker_user_us_per_request"] = meter.broker_utime / r["answered"] * 1e6
            m["broker_sys_us_per_request"] = meter.broker_stime / r["answered"] * 1e6
        rows.append(row(f"requests.{records}", "requests", f"Produce {label}, 1 partition per request", "requests", m))
        ctx.drop_topics([topic])
    return rows


def phase_e2e(ctx: Ctx) -> list[dict]:
    ctx.check_alive()
    topic = ctx.new_topic("e2e", 1)
    with Meter(ctx.stats) as meter:
        r = clients.e2e_run(ctx.bootstrap, topic, ctx.scale.e2e_rate, ctx.scale.e2e_messages, 1024, ctx.deadline())
    return [row("e2e", "e2e", f"1 KiB at {ctx.scale.e2e_rate:.0f} msg/s, linger.ms=0, acks=1", "latency",
                {**r, **meter.metrics()})]


def phase_latency(ctx: Ctx) -> list[dict]:
    ctx.check_alive()
    topic = ctx.new_topic("latency", 1)
    with Meter(ctx.stats) as meter:
        r = clients.produce_latency_run(ctx.bootstrap, topic, ctx.scale.latency_messages, 1024, ctx.deadline())
    return [row("latency", "latency", "1 KiB, acks=all, one at a time", "latency", {**r, **meter.metrics()})]


def phase_connections(ctx: Ctx) -> list[dict]:
    """Open N connections that each complete ApiVersions and stay open; check the broker still
    serves produce+consume; ask ApiVersions again on every idle connection; close them."""
    ctx.check_alive()
    host, port = ctx.host_port
    n = ctx.scale.connections
    deadline = ctx.deadline()
    before = ctx.stats.memory_mb() if ctx.stats else {}
    socks: list[socket.socket] = []
    failures = 0
    first_error = None
    t0 = time.perf_counter()
    try:
        for i in range(n):
            if time.perf_counter() > deadline:
                break
            try:
                s = socket.create_connection((host, port), timeout=10)
                s.settimeout(10)
                socks.append(s)
                if kwire.api_versions(s, i + 1) != 0:
                    raise ConnectionError("ApiVersions error code")
            except OSError as exc:
                failures += 1
                first_error = first_error or f"connection {i}: {exc!r}"
        open_s = time.perf_counter() - t0
        time.sleep(1.0)
        with_conns = ctx.stats.memory_mb() if ctx.stats else {}
        # the broker must still serve real traffic with all of them open
        topic = ctx.new_topic("conns", 1)
        t1 = time.perf_counter()
        count = 1000
        p = clients.produce_run(ctx.bootstrap, topic, 1, 1024, count, "all", deadline)
        c = clients.consume_run(ctx.bootstrap, topic, 1, deadline)
        serve_s = time.perf_counter() - t1
        serve_ok = p["messages"] == count and c["messages"] == count and not p["errors"] and not c["errors"]
        reprobe_ok = 0
        for i, s in enumerate(socks):
            if time.perf_counter() > deadline:
                break
            try:
                reprobe_ok += kwire.api_versions(s, 100000 + i) == 0
            except OSError as exc:
                first_error = first_error or f"re-probe {i}: {exc!r}"
    finally:
        for s in socks:
            s.close()
    time.sleep(1.0)
    after = ctx.stats.memory_mb() if ctx.stats else {}
    return [row("connections", "connections", f"{n} idle connections", "connections", {
        "requested": n, "opened": len(socks) - failures, "failures": failures, "open_s": open_s,
        "serve_ok": serve_ok, "serve_s": serve_s, "reprobe_ok": reprobe_ok, "first_error": first_error,
        "rss_before_mb": before.get("rss_mb"), "rss_mb": with_conns.get("rss_mb"),
        "rss_after_close_mb": after.get("rss_mb"), "peak_rss_mb": after.get("peak_rss_mb")})]


def phase_durability(ctx: Ctx) -> list[dict]:
    """The 1 KiB 1-partition acks=1 produce run with fsync before ack: a harness-started broker with
    log.flush.interval.messages=1, or, against --bootstrap, a topic with flush.messages=1."""
    name = "1 KiB, 1 part, acks=1, fsync before ack"
    if ctx.own is None:
        topic = ctx.new_topic("flush1", 1, {"flush.messages": "1"})
        r = _produce_row(ctx, "durability.flush1", "durability", name + " (topic flush.messages=1)",
                         topic, 1, 1024, "1")
        ctx.drop_topics([topic])
        return [r]
    broker = OwnBroker(ctx.base, "flush1", ["log.flush.interval.messages=1", *ctx.overrides], ctx.log_level)
    ctx.side_brokers.append(broker)
    try:
        broker.start()
        topic = ctx.new_topic("flush1", 1, bootstrap=broker.bootstrap)
        r = _produce_row(ctx, "durability.flush1", "durability", name, topic, 1, 1024, "1",
                         bootstrap=broker.bootstrap, stats=broker.stats())
        if not broker.alive():
            raise RuntimeError(f"durability broker died:\n{broker.log_tail()}")
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    return [r]


def phase_partitions10k(ctx: Ctx) -> list[dict]:
    """Create topics x partitions (100 x 100 = 10,000), time a full Metadata v1 request, then time
    restarts (SIGTERM, spawn, until ApiVersions answers) and check the partitions are all back."""
    sc = ctx.scale
    total = sc.meta_topics * sc.meta_partitions
    own = None
    if ctx.own is not None:
        own = OwnBroker(ctx.base, "partitions", list(ctx.overrides), ctx.log_level)
        ctx.side_brokers.append(own)
        own.start()
        bootstrap, stats = own.bootstrap, own.stats()
    else:
        bootstrap, stats = ctx.bootstrap, ctx.stats
    host, port = bootstrap.rsplit(":", 1)
    port = int(port)
    m: dict = {"topics": sc.meta_topics, "partitions": total}
    try:
        names = [f"bench-{ctx.run_id}-meta-{i:03d}" for i in range(sc.meta_topics)]
        if own is None:
            ctx.created.extend(names)
        with Meter(stats) as meter:
            t0 = time.perf_counter()
            clients.create_topics(bootstrap, [(n, sc.meta_partitions, {"file.delete.delay.ms": "0"}) for n in names],
                                  per_request=10,
                                  timeout=max(60.0, ctx.max_seconds))
            m["create_s"] = time.perf_counter() - t0
        m["create_broker_cpu_s"] = meter.broker_cpu
        times = []
        for _ in range(sc.metadata_repeats):
            secs, size, summary = kwire.metadata_all(host, port)
            times.append(secs * 1000)
        m["metadata_first_ms"] = times[0]
        m["metadata_ms"] = sorted(times)[len(times) // 2]
        m["metadata_max_ms"] = max(times)
        m["metadata_bytes"] = size
        m["metadata_partitions_seen"] = sum(summary["per_topic"].get(n, 0) for n in names)
        m["metadata_errors"] = summary["errors"]
        m.update(stats.memory_mb() if stats else {})
        if own is not None:
            stops, starts = [], []
            for _ in range(sc.restarts):
                stops.append(own.stop())
                starts.append(own.start(timeout=max(60.0, ctx.max_seconds)))
            m["shutdown_s"] = sorted(stops)[len(stops) // 2]
            m["restart_s"] = sorted(starts)[len(starts) // 2]
            m["restart_max_s"] = max(starts)
            secs, _, summary = kwire.metadata_all(host, port)
            m["metadata_after_restart_ms"] = secs * 1000
            m["partitions_after_restart"] = sum(summary["per_topic"].get(n, 0) for n in names)
            m["rss_after_restart_mb"] = own.stats().memory_mb().get("rss_mb")
    finally:
        if own is not None:
            own.stop()
            shutil.rmtree(own.data, ignore_errors=True)
    return [row("partitions10k", "partitions10k", f"{sc.meta_topics} topics x {sc.meta_partitions} partitions",
                "partitions", m)]


def phase_delayed(ctx: Ctx) -> list[dict]:
    ctx.check_alive()
    topic = ctx.new_topic("delayed", DELAYED_PARTITIONS)
    with Meter(ctx.stats) as meter:
        r = delayed_run(ctx.bootstrap, topic, ctx.scale.delayed_messages, ctx.scale.delayed_max_ms, ctx.deadline())
    ctx.drop_topics([topic])
    return [row("delayed", "delayed", f"{ctx.scale.delayed_messages:,} records, delay.ms 1..{ctx.scale.delayed_max_ms:,}",
                "latency", {**r, **meter.metrics()})]


def phase_tiered(ctx: Ctx) -> list[dict]:
    """Consume from the tiered storage archive next to the local log, on a broker of its own
    (benchmarks/tiered.py)."""
    from benchmarks.tiered import measure

    rows = measure(ctx.scale.tiered_mb)
    local = rows["local"]["mb_s"]
    return [row("tiered.local", "tiered", f"{ctx.scale.tiered_mb} MB from the local log (best of 3)", "throughput",
                {"mb_s": local, "msgs_s": rows["local"]["msgs_s"]}),
            row("tiered.archive", "tiered", f"{ctx.scale.tiered_mb} MB from the archive (best of 3)", "throughput",
                {"mb_s": rows["tiered"]["mb_s"], "msgs_s": rows["tiered"]["msgs_s"],
                 "ratio_to_local": rows["tiered"]["mb_s"] / local if local else None})]


def phase_fixture(ctx: Ctx) -> list[dict]:
    """kbroker.testing's start time, in a thread and as a child process (benchmarks/fixture_start.py)."""
    from benchmarks.fixture_start import measure

    return [row(f"fixture.{mode}", "fixture", f"KafkaContainer(mode={mode!r}).start()", "startup",
                measure(mode, ctx.scale.fixture_starts))
            for mode in ("thread", "process")]
def elsewhere(module: str, name: str):
    """A phase that lives in benchmarks/<module>.py, imported when it runs (those modules build on
    this one, and most runs skip most phases)."""
    def phase(ctx: Ctx) -> list[dict]:
        return getattr(importlib.import_module(f"benchmarks.{module}"), name)(ctx)
    phase.__qualname__ = f"{module}.{name}"
    return phase


PHASES = {
    "produce": phase_produce,
    "consume": phase_consume,
    "downconvert": elsewhere("downconvert", "phase_downconvert"),
    "views": elsewhere("views", "phase_views"),
    "transactions": phase_transactions,
    "partitions100": phase_partitions100,
    "requests": phase_requests,
    "e2e": phase_e2e,
    "latency": phase_latency,
    "connections": phase_connections,
    "durability": phase_durability,
    "partitions10k": phase_partitions10k,
    "delayed": phase_delayed,
    "tiered": phase_tiered,
    "fixture": phase_fixture,
    "metrics": elsewhere("metrics", "phase_metrics"),
    "security": elsewhere("security", "phase_security"),
    "acl": elsewhere("acl", "phase_acl"),
    "quotas": elsewhere("quotas", "phase_quotas"),
    "groups": elsewhere("groups", "phase_groups"),
    "groups-cpu": elsewhere("groups", "phase_groups_cpu"),
    "group-commits": elsewhere("group_commits", "phase_group_commits"),
    "share": elsewhere("share_groups", "phase_share"),
    "schema-registry": elsewhere("schema_registry", "phase_schema_registry"),
    "cluster": elsewhere("cluster", "phase_cluster"),
    "clustertxn": elsewhere("cluster", "phase_cluster_txn"),
    "cluster3k": elsewhere("cluster_scale", "phase_cluster_scale"),
    "scale": elsewhere("scale", "phase_scale"),
    "consume-default": elsewhere("consume_default", "phase_consume_default"),
}
REPEATABLE = {"produce", "metrics", "consume", "downconvert", "views", "transactions", "partitions100", "requests", "e2e", "latency", "durability", "cluster", "clustertxn", "cluster3k", "security", "acl", "groups", "groups-cpu", "group-commits", "share"}
# left out of --quick and of runs against --bootstrap unless named in --only
OPT_IN = {"consume-default", "cluster", "clustertxn", "cluster3k", "scale", "metrics", "security", "quotas", "downconvert", "acl", "groups", "groups-cpu", "group-commits", "share", "schema-registry"}
