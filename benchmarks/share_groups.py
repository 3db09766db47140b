"""Owns the `share` benchmark phase: share groups (KIP-932 queues) with confluent-kafka's
ShareConsumer (librdkafka 2.16), on a kbroker of its own started with
`group.coordinator.rebalance.protocols=classic,consumer,share` and a 5 s record lock
(OVERRIDES). Every consumer is a process of its own (benchmarks/share_worker.py); each share group
gets `share.auto.offset.reset=earliest` (IncrementalAlterConfigs on the GROUP resource, kbroker's
`configs alter --group`) before its consumers subscribe, so records produced beforehand count.

1. **Scaling** (one partition, 1 KiB records, 2 ms of simulated work per record, implicit
   acknowledgement): 1, 4 and 16 share consumers of one group on a pre-filled one-partition topic
   (SCALE_RECORDS[n] records, produced in batches of WORK_QUEUE_BATCH bytes); beside them a classic consumer group (confluent_kafka.Consumer) of
   1 and 4 members on the same kind of topic (one partition: one member works). records/s = the
   records received between 5 % and 95 % of the run's total over the time between them (the
   steady part: consumers joining and the tail left out); each run capped at RUN_CAP_S.
2. **Throughput** (no work time, implicit acknowledgement): 4 share consumers next to a classic
   group of 4 members on 4 partitions pre-filled with THROUGHPUT_RECORDS records of 1 KiB (1 MB
   producer batches).
3. **Redelivery**: a share consumer in explicit mode that never acknowledges (`--hold`: prints the
   records its first poll returned, then stops polling) and a survivor (explicit, acknowledging
   every record, printing each record's receive time and delivery count) subscribe to an empty
   one-partition topic; REDELIVERY_RECORDS records are produced; as soon as the holder reports its
   records it is SIGKILLed. Per record the holder held: seconds from the kill until the survivor
   receives it again (delivery count ≥ 2); target p99 ≤ lock duration + 1 s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks import clients
from benchmarks.broker import REPO_ROOT, OwnBroker
from benchmarks.phases import Ctx, Meter, row

LOCK_MS = 5000
OVERRIDES = ["group.coordinator.rebalance.protocols=classic,consumer,share",
             f"group.share.record.lock.duration.ms={LOCK_MS}"]
SIZE = 1024
WORK_MS = 2.0
WORK_QUEUE_BATCH = 16384  # producer batch.size of the runs with work: a share fetch (BATCH_OPTIMIZED, as
# Kafka's) takes whole log batches, so with 1 MB batches a partition's 2,000 record locks go to 2 consumers
SCALE_RECORDS = {1: 20_000, 4: 40_000, 16: 80_000}
CLASSIC_RECORDS = 5_000
THROUGHPUT_PARTITIONS = 4
THROUGHPUT_CONSUMERS = 4
THROUGHPUT_RECORDS = 1_000_000  # a steady window of seconds (200,000 drained in 0.2 s: a start-up race)
REDELIVERY_RECORDS = 2_000
RUN_CAP_S = 60.0
WORKER = Path(__file__).resolve().parent / "share_worker.py"


class Worker:
    """A share_worker.py child, its stdout read by a thread: JSON events, `B` batch and `R` record lines."""

    def __init__(self, name: str, args: list[str], log_dir: Path):
        self.name = name
        self.events: list[dict] = []
        self.batches: list[tuple[float, int]] = []          # (time, records)
        self.records: list[tuple[int, int, float, int]] = []  # (partition, offset, time, delivery count)
        self.stderr = open(log_dir / f"{name}.stderr", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, str(WORKER), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, cwd=REPO_ROOT, text=True,
                                     bufsize=1, start_new_session=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("B "):
                _, n, t = line.split()
                self.batches.append((float(t), int(n)))
            elif line.startswith("R "):
                _, p, off, t, dc = line.split()
                self.records.append((int(p), int(off), float(t), int(dc)))
                self.batches.append((float(t), 1))
            elif line.startswith("{"):
                try:
                    self.events.append(json.loads(line))
                except ValueError:
                    pass

    def event(self, name: str, timeout: float) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for e in list(self.events):
                if e.get("event") == name:
                    return e
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}) before {name!r}")
            time.sleep(0.01)
        raise TimeoutError(f"{self.name}: no {name!r} within {timeout:.0f} s")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def received(self) -> int:
        return sum(n for _, n in list(self.batches))

    def kill(self) -> float:
        t = time.time()
        os.kill(self.proc.pid, signal.SIGKILL)
        return t

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.thread.join(5)
        self.stderr.close()


def share_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest on the group, with kbroker's CLI (IncrementalAlterConfigs, GROUP)."""
    subprocess.run([sys.executable, "-m", "kbroker", "configs", "alter", "--bootstrap-server", bootstrap,
                    "--group", group, "--add-config", "share.auto.offset.reset=earliest"],
                   cwd=REPO_ROOT, check=True, capture_output=True, timeout=60)


def prefill(bootstrap: str, topic: str, partitions: int, count: int, batch_size: int = 1000000) -> None:
    clients.create_topics(bootstrap, [(topic, partitions, {"file.delete.delay.ms": "0"})])
    r = clients.produce_run(bootstrap, topic, partitions, SIZE, count, "1", time.perf_counter() + 120,
                            batch_size=batch_size)
    if r.get("errors"):
        raise RuntimeError(f"prefill of {topic}: {r['errors']} produce errors")


def steady_rate(workers: list[Worker], total: int) -> dict:
    """records/s between 5 % and 95 % of `total` records received (all workers' batches merged)."""
    events = sorted(b for w in workers for b in list(w.batches))
    got = sum(n for _, n in events)
    out = {"received": got, "expected": total, "working_consumers": sum(1 for w in workers if w.batches)}
    if not events:
        return out
    lo, hi = 0.05 * got, 0.95 * got
    cum, t_lo, n_lo, t_hi, n_hi = 0, None, 0, None, 0
    for t, n in events:
        cum += n
        if t_lo is None and cum >= lo:
            t_lo, n_lo = t, cum
        if t_hi is None and cum >= hi:
            t_hi, n_hi = t, cum
    out["first_to_last_s"] = events[-1][0] - events[0][0]
    if t_lo is not None and t_hi is not None and t_hi > t_lo:
        out["records_s"] = out["msgs_s"] = (n_hi - n_lo) / (t_hi - t_lo)
        out["mb_s"] = out["records_s"] * SIZE / 1e6
    return out


def consume_run(ctx: Ctx, broker: OwnBroker, label: str, kind: str, members: int, partitions: int,
                records: int, work_ms: float) -> dict:
    """Pre-fill a topic, start `members` workers of one group (`kind` share or classic), and wait until
    they have received every record (or RUN_CAP_S)."""
    topic = f"bench-{ctx.run_id}-share-{label}"
    group = f"bench-{ctx.run_id}-sg-{label}"
    # a work queue's producer sends records as they come (small batches: the Java client's default
    # batch.size); the throughput runs are bulk-loaded with librdkafka's 1 MB batches
    prefill(broker.bootstrap, topic, partitions, records, WORK_QUEUE_BATCH if work_ms else 1000000)
    if kind == "share":
        share_earliest(broker.bootstrap, group)
    logs = broker.dir / f"children-{label}"
    logs.mkdir(parents=True, exist_ok=True)
    args = ["--group", group, "--work-ms", str(work_ms), "--max-poll", "500" if not work_ms else "100"]
    if kind == "share" and work_ms:
        args.append("--records")  # every record with its delivery count: duplicates are counted
    workers = [Worker(f"{label}-{i}", [kind, broker.bootstrap, topic, "--name", str(i), *args], logs)
               for i in range(members)]
    try:
        for w in workers:
            w.event("ready", 30)
        with Meter(broker.stats()) as meter:
            start = time.time()
            for w in workers:
                w.go()
            aborted = False
            while sum(w.received() for w in workers) < records:
                if time.time() - start > RUN_CAP_S:
                    aborted = True
                    break
                for w in workers:
                    if w.proc.poll() is not None:
                        raise RuntimeError(f"{w.name} exited ({w.proc.returncode})")
                time.sleep(0.05)
            elapsed = time.time() - start
    finally:
        for w in workers:
            w.stop()
        clients.delete_topics(broker.bootstrap, [topic])
    m = {"members": members, "partitions": partitions, "work_ms": work_ms, "size": SIZE, "seconds": elapsed,
         **steady_rate(workers, records), **meter.metrics(sum(w.received() for w in workers) * SIZE)}
    recs = [(p, off) for w in workers for p, off, _, _ in w.records]
    if recs:
        m["unique_records"] = len(set(recs))
        m["duplicate_deliveries"] = len(recs) - len(set(recs))
    if aborted:
        m["capped_at_s"] = RUN_CAP_S  # not aborted: a capped run still gives its steady rate
    return m


def redelivery_run(ctx: Ctx, broker: OwnBroker) -> dict:
    topic = f"bench-{ctx.run_id}-share-redeliver"
    group = f"bench-{ctx.run_id}-sg-redeliver"
    clients.create_topics(broker.bootstrap, [(topic, 1, {"file.delete.delay.ms": "0"})])
    share_earliest(broker.bootstrap, group)
    logs = broker.dir / "children-redeliver"
    logs.mkdir(parents=True, exist_ok=True)
    common = [broker.bootstrap, topic, "--group", group, "--mode", "explicit", "--max-poll", "500"]
    holder = Worker("holder", ["share", *common, "--name", "holder", "--hold"], logs)
    survivor = Worker("survivor", ["share", *common, "--name", "survivor", "--records"], logs)
    try:
        for w in (holder, survivor):
            w.event("ready", 30)
            w.go()
        for w in (holder, survivor):
            w.event("subscribed", 30)
        time.sleep(3.0)  # both members joined and fetching
        r = clients.produce_run(broker.bootstrap, topic, 1, SIZE, REDELIVERY_RECORDS, "1", time.perf_counter() + 60)
        held_event = holder.event("holding", 30)
        t_kill = holder.kill()
        held = {(p, off): t for p, off, t, _ in list(holder.records)}
        deadline = time.time() + LOCK_MS / 1000 + 20
        while time.time() < deadline:
            again = {(p, off) for p, off, t, dc in list(survivor.records) if t > t_kill and dc >= 2}
            if held.keys() <= again and sum(1 for _ in survivor.records) >= REDELIVERY_RECORDS:
                break
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        survivor.stop()
        holder.stop()
        clients.delete_topics(broker.bootstrap, [topic])
    first_again = {}
    for p, off, t, dc in sorted(survivor.records, key=lambda x: x[2]):
        if t > t_kill and dc >= 2 and (p, off) not in first_again:
            first_again[(p, off)] = t
    delays = sorted(first_again[k] - t_kill for k in held if k in first_again)
    since_acquired = sorted(first_again[k] - held[k] for k in held if k in first_again)
    all_redelivered = sorted(t - t_kill for t in first_again.values())
    unique = {(p, off) for p, off, _, _ in survivor.records}
    return {"produced": REDELIVERY_RECORDS, "produce_errors": r.get("errors", 0),
            "held": len(held), "held_at_kill_s": t_kill - held_event["t"],
            "redelivered_held": len(delays), "missing": len(held) - len(delays),
            "redelivered_total": len(first_again), "survivor_unique": len(unique),
            "lost": REDELIVERY_RECORDS - len(unique),
            "lock_ms": LOCK_MS, "target_ms": LOCK_MS + 1000.0,
            **{f"{k}_ms": None if v is None else v * 1000 for k, v in (
                ("p50", clients.percentile(delays, 50)), ("p99", clients.percentile(delays, 99)),
                ("max", delays[-1] if delays else None),
                ("p99_all_redelivered", clients.percentile(all_redelivered, 99)),
                ("p99_from_acquired", clients.percentile(since_acquired, 99)))}}


def phase_share(ctx: Ctx) -> list[dict]:
    rows: list[dict] = []
    broker = OwnBroker(ctx.base, "share", [*OVERRIDES, *ctx.overrides], ctx.log_level)
    ctx.side_brokers.append(broker)
    broker.start()
    try:
        scale: dict[int, dict] = {}
        for n in (1, 4, 16):
            if not broker.alive():
                raise RuntimeError(f"share broker died:\n{broker.log_tail()}")
            scale[n] = consume_run(ctx, broker, f"scale-{n}", "share", n, 1, SCALE_RECORDS[n], WORK_MS)
        base = scale[1].get("records_s")
        for n in (1, 4, 16):
            m = scale[n]
            if base and m.get("records_s"):
                m["ratio_to_1"] = m["records_s"] / base
            rows.append(row(f"share.scale.share{n}", "share",
                            f"share group, {n} consumer{'s' if n > 1 else ''}, 1 partition, 2 ms/record", "throughput", m))
        for n in (1, 4):
            m = consume_run(ctx, broker, f"classic-{n}", "classic", n, 1, CLASSIC_RECORDS, WORK_MS)
            rows.append(row(f"share.scale.classic{n}", "share",
                            f"classic group, {n} member{'s' if n > 1 else ''}, 1 partition, 2 ms/record", "throughput", m))
        classic = consume_run(ctx, broker, "tp-classic", "classic", THROUGHPUT_CONSUMERS, THROUGHPUT_PARTITIONS,
                              THROUGHPUT_RECORDS, 0.0)
        share = consume_run(ctx, broker, "tp-share", "share", THROUGHPUT_CONSUMERS, THROUGHPUT_PARTITIONS,
                            THROUGHPUT_RECORDS, 0.0)
        if classic.get("records_s") and share.get("records_s"):
            share["ratio_to_classic"] = share["records_s"] / classic["records_s"]
        rows.append(row("share.throughput.classic", "share", "classic group, 4 members, 4 partitions, no work",
                        "throughput", classic))
        rows.append(row("share.throughput.share", "share", "share group, 4 consumers, 4 partitions, no work",
                        "throughput", share))
        rows.append(row("share.redelivery", "share", "kill-to-redelivery, explicit acks, lock 5 s", "latency",
                        redelivery_run(ctx, broker)))
    finally:
        broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)
    return rows
