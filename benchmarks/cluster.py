"""Owns the `cluster` phase: a ZooKeeper server and three kbroker brokers on 127.0.0.1, started with
kbroker.cluster_runner.LocalCluster in the run's temp dir (a fresh cluster per repeat) and stopped by
PID, and the load the phase puts on them with the librdkafka clients of the other phases:

1. produce (1 KiB messages, linger.ms=5, ~1 MB batches): RF=3 with min.insync.replicas=2 and
   acks=all on 1 and on 6 partitions, then RF=1 acks=1; MB/s and the three brokers' summed
   CPU-seconds per GB (/proc/<pid>/stat before and after);
2. consume each RF=3 topic from the earliest offset right after it is produced;
2b. sustained: the RF=3 acks=all runs again with 1.5 GB each (Scale.sustained_messages), long
   enough for the kernel's write-back to start, then the disk's own ceiling for that volume (three
   copies written and fdatasync'ed); user and system CPU per broker thread beside both;
3. the three brokers' summed RSS after that load;
4. failover: an idempotent acks=all producer sends at a steady rate to a 1-partition RF=3 topic
   whose leader is not the controller; the leader is killed with SIGKILL; the figure is the time
   from the kill to the first acknowledgement of a message handed to the producer after the kill
   (and, beside it, the time until a surviving broker's metadata names the new leader); the
   killed broker is then restarted and must rejoin the ISR;
5. controlled shutdown: the same producer on 6 partitions, SIGTERM to a broker (not the controller)
   that leads two of them; the figure is the longest gap between consecutive acknowledgements of
   one partition (what a client sees of the leadership move).

Every acknowledged message of 4 and 5 is read back afterwards: one missing from the partition and
offset it was acknowledged with, or present twice, counts as an error."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks import clients, kwire
from benchmarks.broker import ProcGroup, ProcStats, log_problems, stat_cpu_times
from benchmarks.phases import Ctx, Meter, row, txn_runs

BROKERS = 3
SESSION_MS = 6000            # zookeeper.session.timeout.ms of the brokers (the failover target is this + 1 s)
RATE = 2000.0                # msg/s of the failover and controlled-shutdown producers
WARM_S = 2.0                 # steady sending before the kill / SIGTERM
SIZE = 1024
RF3_CONFIG = {"min.insync.replicas": "2"}
# key suffix, partitions, replication factor, acks
PRODUCE_RUNS = (("rf3.p1", 1, 3, "all"), ("rf3.p6", 6, 3, "all"), ("rf1.p1", 1, 1, "1"))
CONSUMED = ("rf3.p1", "rf3.p6")  # read back right after they are produced
# the sustained runs (issue 26): Scale.sustained_messages (1.5 GB of 1 KiB records by default) per
# run, long enough for the kernel to write the page cache back while the brokers run; each starts
# after COLD_S so that the pages the previous run's deleted topic freed have gone back to the host
# (see prime_page_cache in phases.py) and the run writes into fresh pages, as a long run does
SUSTAINED_RUNS = (("rf3.p1", 1), ("rf3.p6", 6))
COLD_S = 3.0
GROUP = "kbroker-bench"      # the consumer group id clients.consume_run uses (assign only, no commits)


def _overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key.strip()] = value.strip()
    return out


class Cluster:
    """The phase's LocalCluster plus what the phase asks of it: every broker's view of the metadata
    (the harness's own Metadata v1 request), readiness waits (all bounded), topic creation with
    librdkafka's AdminClient, the brokers' /proc readings, and a stop in an order that lets every
    broker finish its controlled shutdown."""

    def __init__(self, ctx: Ctx, base: Path):
        from kbroker.cluster_runner import LocalCluster, zookeeper_classpath

        if zookeeper_classpath() is None:
            raise RuntimeError("ZooKeeper is not installed (Debian: apt-get install zookeeper) or java is missing")
        self.ctx = ctx
        self.base = base
        settings = {"zookeeper.session.timeout.ms": str(SESSION_MS), **_overrides(ctx.overrides)}
        self.session_s = int(settings["zookeeper.session.timeout.ms"]) / 1000
        self.cluster = LocalCluster(base, BROKERS, overrides=settings)
        self.settings = settings
        self.topics: list[str] = []

    # -- processes ---------------------------------------------------------------------------------
    def start(self) -> dict:
        t0 = time.perf_counter()
        self.cluster.start()
        started = time.perf_counter() - t0
        ready = self.wait(self.metadata_ready, 60, "every broker's Metadata to list all brokers and a controller")
        return {"start_s": started, "metadata_ready_s": ready}

    @property
    def running(self) -> dict:
        return {i: b for i, b in sorted(self.cluster.brokers.items()) if b.running}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.running.values())

    def group(self) -> ProcGroup:
        return ProcGroup([b.proc.pid for b in self.running.values()])

    def zookeeper(self) -> ProcStats | None:
        zk = self.cluster.zookeeper
        return ProcStats(zk.proc.pid) if zk is not None and zk.proc is not None else None

    def stop(self) -> None:
        """SIGTERM the brokers one at a time, the controller last, each a controlled shutdown
        (60 s grace, then SIGKILL); then ZooKeeper. Broker data is removed, logs are kept."""
        try:
            controller = self.controller()
        except Exception:  # noqa: BLE001 - stopping anyway
            controller = -1
        try:
            for broker in sorted(self.running.values(), key=lambda b: b.broker_id == controller):
                broker.stop(60)
        finally:
            self.cluster.stop()
            for broker in self.cluster.brokers.values():
                shutil.rmtree(broker.data_dir / "data", ignore_errors=True)

    def log_problems(self) -> dict[str, tuple[int, list[str]]]:
        return {f"broker {i}": log_problems(b.log_path) for i, b in sorted(self.cluster.brokers.items())
                if b.log_path is not None}

    def log_tails(self, chars: int = 3000) -> str:
        return "\n".join(f"--- broker {i} (running={b.running}) ---\n{b.log_tail(chars)}"
                         for i, b in sorted(self.cluster.brokers.items()))

    # -- metadata ----------------------------------------------------------------------------------
    def view(self, broker) -> dict:
        return kwire.metadata_all(broker.host, broker.port, timeout=10)[2]

    def views(self) -> dict[int, dict]:
        return {i: self.view(b) for i, b in self.running.items()}

    def metadata_ready(self) -> bool:
        views = self.views()
        ids = sorted(self.running)
        controllers = {v["controller"] for v in views.values()}
        return all(v["brokers"] == ids for v in views.values()) and len(controllers) == 1 and controllers.pop() in ids

    def controller(self) -> int:
        for broker in self.running.values():
            try:
                return self.view(broker)["controller"]
            except OSError:
                continue
        return -1

    def layout(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """partition -> (leader, replicas, isr), as the first broker that answers sees it."""
        for broker in self.running.values():
            try:
                return self.view(broker)["layout"].get(topic, {})
            except OSError:
                continue
        return {}

    def topic_ready(self, topic: str, partitions: int | None, rf: int) -> bool:
        """Every running broker sees every partition with a leader and an ISR of `rf`."""
        for v in self.views().values():
            parts = v["layout"].get(topic, {})
            if not parts or (partitions is not None and len(parts) != partitions):
                return False
            if any(leader < 0 or len(isr) != rf for leader, _, isr in parts.values()):
                return False
        return True

    def wait(self, condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> float:
        """Poll condition() every `interval` s until true; return the seconds it took."""
        t0 = time.perf_counter()
        last = None
        while time.perf_counter() - t0 < timeout:
            try:
                if condition():
                    return time.perf_counter() - t0
            except Exception as exc:  # noqa: BLE001 - a broker mid-failover; ask again
                last = exc
            time.sleep(interval)
        raise TimeoutError(f"cluster: no {what} after {timeout:.0f} s (last error: {last!r})\n{self.log_tails()}")

    def create(self, label: str, partitions: int, rf: int, config: dict,
               assignment: list[list[int]] | None = None) -> str:
        self.ctx.seq += 1
        name = f"bench-{self.ctx.run_id}-{self.ctx.seq:03d}-cluster-{label}"
        config = {"file.delete.delay.ms": "0", **config}
        if assignment is not None:
            topic = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=config)
        else:
            topic = NewTopic(name, num_partitions=partitions, replication_factor=rf, config=config)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        admin.create_topics([topic], operation_timeout=60, request_timeout=60)[name].result(timeout=90)
        self.topics.append(name)
        self.wait(lambda: self.topic_ready(name, partitions, rf), 60, f"{name} online with an ISR of {rf}")
        return name

    def drop(self, names: list[str]) -> None:
        clients.delete_topics(self.bootstrap, names)
        self.topics[:] = [t for t in self.topics if t not in names]

    def make_group_coordinator(self) -> float:
        """Have __consumer_offsets created (FindCoordinator does it) and online before anything is
        measured, as on any cluster that has served a consumer group; return the seconds it took."""
        t0 = time.perf_counter()
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        try:
            admin.describe_consumer_groups([GROUP], request_timeout=30)[GROUP].result(timeout=40)
        except Exception:  # noqa: BLE001 - an unknown group may come back as an error; the topic is what counts
            pass
        self.wait(lambda: self.topic_ready("__consumer_offsets", None, min(3, BROKERS)), 60,
                  "__consumer_offsets online with a full ISR")
        return time.perf_counter() - t0


def run_phase(ctx: Ctx, phase: str, body: Callable[[Cluster, list[dict]], None]) -> list[dict]:
    """A fresh cluster for `body`, which appends its rows; a failure keeps the rows measured before
    it and adds an error row; the cluster is stopped and its brokers' logged problems noted."""
    ctx.cluster_runs += 1
    c = Cluster(ctx, ctx.base / f"{phase}-{ctx.cluster_runs}")
    rows: list[dict] = []
    try:
        body(c, rows)
    except Exception as exc:  # keep what was measured before the failure; the error is a row of its own
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        first = f"{type(exc).__name__}: {exc}".splitlines()[0]
        rows.append(row(f"{phase}.error", phase, "FAILED", "error", {"error": first, "errors": 1}))
        ctx.notes.append(f"{phase} {ctx.cluster_runs}: {first}")
    finally:
        c.stop()
        for name, (count, lines) in c.log_problems().items():
            if count:
                key = f"{phase} {ctx.cluster_runs}, {name}"
                ctx.log_problems[key] = lines
                ctx.notes.append(f"{key} logged {count} ERROR/Traceback lines")
    return rows


# ---------------------------------------------------------------------------------------------
def _name(partitions: int, rf: int, acks: str) -> str:
    return f"1 KiB, {partitions} part, RF={rf}{' min.insync=2' if rf == 3 else ''}, acks={acks}"


def _clock(t: float) -> str:
    """Wall-clock time as the broker logs print it, to find the moment in their logs."""
    return time.strftime("%H:%M:%S", time.localtime(t)) + f",{int(t % 1 * 1000):03d}"


def _cpu(t: tuple[float, float] | None) -> float | None:
    return None if t is None else t[0] + t[1]


def _thread_cpu(pid: int) -> dict[str, tuple[float, float]]:
    """(utime, stime) seconds per thread name of a process, threads of one name summed."""
    out: dict[str, tuple[float, float]] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        (u, s), (du, ds) = out.get(name, (0.0, 0.0)), stat_cpu_times(stat)
        out[name] = (u + du, s + ds)
    return out


def _thread_delta(before: dict, after: dict) -> dict[str, list[float]]:
    """Per thread name [user, system] seconds between two _thread_cpu readings, busiest first."""
    delta = {k: [round(after[k][0] - before.get(k, (0, 0))[0], 2), round(after[k][1] - before.get(k, (0, 0))[1], 2)]
             for k in after}
    return dict(sorted(((k, v) for k, v in delta.items() if v[0] + v[1] > 0), key=lambda kv: -sum(kv[1])))


def disk_ceiling(directory: Path, nbytes: int) -> dict:
    """The disk's own ceiling for what a sustained RF 3 run writes: `nbytes` (three copies of the run's
    records) written with 1 MiB os.write calls into fresh page-cache pages and fdatasync'ed, in the
    directory the brokers write to. RF 3 on one disk can at best reach a third of it."""
    chunk = os.urandom(1 << 20)
    chunks = max(1, nbytes >> 20)
    path = directory / "disk-ceiling.tmp"
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(chunks):
            os.write(fd, chunk)
        os.fdatasync(fd)
    finally:
        os.close(fd)
        elapsed = time.perf_counter() - t0
        os.unlink(path)
    written = chunks << 20
    return {"disk_mb_s": written / elapsed / 1e6, "disk_bytes": written, "rf3_ceiling_mb_s": written / elapsed / 1e6 / 3}


def _produce(ctx: Ctx, c: Cluster, suffix: str, partitions: int, rf: int, acks: str,
             count: int | None = None) -> tuple[dict, str]:
    """One produce run into a fresh topic; `count` records (default Scale.messages). Beside the
    summed CPU: the leader's and the followers' share (1 partition), and user/system seconds per
    thread name of every broker."""
    topic = c.create(suffix, partitions, rf, RF3_CONFIG if rf == 3 else {})
    leaders = {p: leader for p, (leader, _, _) in c.layout(topic).items()}
    ids = list(c.running)
    group, zk = c.group(), c.zookeeper()
    zk0, each0 = zk.cpu_seconds() if zk else None, group.cpu_times_each()
    threads0 = {i: _thread_cpu(b.proc.pid) for i, b in c.running.items()}
    with Meter(group) as meter:
        r = clients.produce_run(c.bootstrap, topic, partitions, SIZE, count or ctx.scale.messages, acks,
                                ctx.deadline())
    each1, zk1 = group.cpu_times_each(), zk.cpu_seconds() if zk else None
    m = {**r, **meter.metrics(r["bytes"])}
    m["threads_user_sys_s"] = {f"broker {i}": _thread_delta(threads0[i], _thread_cpu(b.proc.pid))
                               for i, b in c.running.items() if i in threads0}
    m["zookeeper_cpu_s"] = zk1 - zk0 if zk0 is not None and zk1 is not None else None
    by_broker = {i: _cpu(b) - _cpu(a) for i, a, b in zip(ids, each0, each1) if a is not None and b is not None}
    if partitions == 1 and leaders.get(0) in by_broker:
        m["leader_cpu_s"] = by_broker[leaders[0]]
        m["followers_cpu_s"] = sum(v for i, v in by_broker.items() if i != leaders[0])
    isr = [len(i) for _, _, i in c.layout(topic).values()]
    m["min_isr_after"] = min(isr) if isr else None
    if m["min_isr_after"] is not None and m["min_isr_after"] < rf:
        ctx.notes.append(f"cluster {suffix}: ISR shrank to {m['min_isr_after']} during the run")
    return row(f"cluster.produce.{suffix}", "cluster", _name(partitions, rf, acks), "throughput", m), topic


class _LeaderWatch(threading.Thread):
    """Asks the surviving brokers for the topic's metadata every 20 ms; notes when one of them
    first names a new leader (the broker side of a failover, without the client's part)."""

    def __init__(self, c: Cluster, topic: str, old_leader: int, until: float):
        super().__init__(daemon=True)
        self.brokers = [b for i, b in c.running.items() if i != old_leader]
        self.c, self.topic, self.old, self.until = c, topic, old_leader, until
        self.elected_at: float | None = None

    def run(self) -> None:
        while self.elected_at is None and time.perf_counter() < self.until:
            for b in self.brokers:
                try:
                    leader = self.c.view(b)["layout"].get(self.topic, {}).get(0, (-1,))[0]
                except OSError:
                    continue
                if leader not in (-1, self.old):
                    self.elected_at = time.perf_counter()
                    break
            time.sleep(0.02)


def _failover(ctx: Ctx, c: Cluster) -> dict:
    controller = c.controller()
    ids = list(c.running)
    leader = next(i for i in ids if i != controller)
    topic = c.create("failover", 1, 3, RF3_CONFIG, assignment=[[leader, *[i for i in ids if i != leader]]])
    prod = clients.PacedProducer(c.bootstrap, topic, 1, SIZE, RATE)
    warm_ok = prod.run_until(lambda: time.perf_counter() - prod.t0 >= WARM_S, ctx.deadline())
    victim = c.cluster.brokers[leader]
    t_kill, wall_kill = time.perf_counter(), time.time()
    limit = t_kill + c.session_s + 30
    watch = _LeaderWatch(c, topic, leader, limit)
    victim.kill()  # SIGKILL by PID, then reaped
    prod.watch(t_kill)
    watch.start()
    ok = prod.run_until(lambda: prod.first_after is not None and time.perf_counter() > prod.first_after[0] + 1.0,
                        limit)
    left = prod.finish(30)
    watch.join(1)
    after = c.layout(topic).get(0, (-1, [], []))
    first_any = min((at for at, _, _, _ in prod.acks if at > t_kill), default=None)
    # the killed broker comes back and must catch up into the ISR
    t_restart = time.perf_counter()
    victim.start()
    rejoin = c.wait(lambda: c.topic_ready(topic, 1, 3), 90, f"broker {leader} back in the ISR of {topic}")
    rejoin_s = time.perf_counter() - t_restart
    check = clients.verify_acknowledged(c.bootstrap, topic, 1, prod.acks, ctx.deadline())
    failover_s = prod.first_after[0] - t_kill if prod.first_after else None
    errors = len(prod.errors) + left + check["lost"] + check["duplicates"] + check["read_errors"]
    m = {"failover_s": failover_s, "session_timeout_s": c.session_s, "failover_target_s": c.session_s + 1,
         "leader_elected_s": watch.elected_at - t_kill if watch.elected_at else None,
         "first_ack_any_s": first_any - t_kill if first_any else None,
         "killed_at": _clock(wall_kill), "killed_broker": leader, "controller": controller, "new_leader": after[0], "isr_after": len(after[2]),
         "rate": RATE, "sent": len(prod.sent_at), "acked": len(prod.acks), "unacked_after_flush": left,
         "rejoin_s": rejoin_s, "rejoin_wait_s": rejoin, **check, "errors": errors,
         "first_error": (prod.errors[0] if prod.errors else check["first_problem"]
                         or (f"{left} messages unacknowledged 30 s after the run" if left else None)),
         "aborted": not (ok and warm_ok)}
    return row("cluster.failover", "cluster", f"kill -9 of the partition leader, acks=all idempotent, "
               f"{RATE:.0f} msg/s", "failover", m)


def _gaps(acks: list[float], start: float, end: float) -> float:
    """Longest gap between consecutive acknowledgements that ends after `start` (a run of no
    acknowledgement still open at `end` counts up to `end`)."""
    longest = 0.0
    for a, b in zip(acks, acks[1:]):
        if start < b <= end:
            longest = max(longest, b - a)
    if acks and acks[-1] < end:
        longest = max(longest, end - max(acks[-1], start))
    return longest


def _controlled_shutdown(ctx: Ctx, c: Cluster) -> dict:
    controller = c.controller()
    partitions = 6
    topic = c.create("shutdown", partitions, 3, RF3_CONFIG)
    before = c.layout(topic)
    led = {i: sorted(p for p, (leader, _, _) in before.items() if leader == i) for i in c.running}
    victim_id = max((i for i in c.running if i != controller), key=lambda i: len(led[i]))
    victim = c.cluster.brokers[victim_id]
    prod = clients.PacedProducer(c.bootstrap, topic, partitions, SIZE, RATE)
    warm_ok = prod.run_until(lambda: time.perf_counter() - prod.t0 >= WARM_S, ctx.deadline())
    t_term, wall_term = time.perf_counter(), time.time()
    os.kill(victim.proc.pid, signal.SIGTERM)
    state = {"exit": None}
    latest: dict[int, float] = {}  # partition -> send time of its latest acknowledged message

    def done() -> bool:
        now = time.perf_counter()
        if state["exit"] is None and victim.proc.poll() is not None:
            state["exit"] = now
        if state["exit"] is None or now < state["exit"] + 1.0:
            return False
        for at, seq, p, _ in prod.acks[-2000:]:
            latest[p] = max(latest.get(p, 0.0), prod.sent_at[seq])
        return all(latest.get(p, 0.0) > state["exit"] for p in range(partitions))

    ok = prod.run_until(done, t_term + 90)
    end = time.perf_counter()
    left = prod.finish(30)
    by_partition = prod.acks_by_partition()
    gaps = {p: _gaps(by_partition.get(p, []), t_term, end) for p in range(partitions)}
    worst = max(gaps, key=gaps.get)
    baseline = max((_gaps([a for a in by_partition.get(p, []) if a <= t_term], prod.t0 + 0.5, t_term)
                    for p in range(partitions)), default=None)
    after = c.layout(topic)
    check = clients.verify_acknowledged(c.bootstrap, topic, partitions, prod.acks, ctx.deadline())
    errors = len(prod.errors) + left + check["lost"] + check["duplicates"] + check["read_errors"]
    m = {"max_gap_s": gaps[worst], "max_gap_partition": worst, "max_gap_partition_moved": worst in led[victim_id],
         "moved_partitions_max_gap_s": max((gaps[p] for p in led[victim_id]), default=None),
         "other_partitions_max_gap_s": max((g for p, g in gaps.items() if p not in led[victim_id]), default=None),
         "baseline_max_gap_s": baseline, "sigterm_at": _clock(wall_term), "stopped_broker": victim_id,
         "controller": controller,
         "moved_partitions": len(led[victim_id]),
         "new_leaders": ",".join(str(after.get(p, (-1,))[0]) for p in led[victim_id]),
         "shutdown_s": state["exit"] - t_term if state["exit"] else None, "exit_code": victim.proc.returncode,
         "rate": RATE, "sent": len(prod.sent_at), "acked": len(prod.acks), "unacked_after_flush": left,
         **check, "errors": errors,
         "first_error": (prod.errors[0] if prod.errors else check["first_problem"]
                         or (f"{left} messages unacknowledged 30 s after the run" if left else None)),
         "aborted": not (ok and warm_ok)}
    if victim.proc.returncode not in (0, None):
        ctx.notes.append(f"cluster: broker {victim_id} exited with {victim.proc.returncode} after SIGTERM")
    return row("cluster.shutdown", "cluster", f"SIGTERM of a leader (controlled shutdown), {RATE:.0f} msg/s",
               "shutdown", m)


def phase_cluster(ctx: Ctx) -> list[dict]:
    return run_phase(ctx, "cluster", lambda c, rows: _measure(ctx, c, rows))


def _measure(ctx: Ctx, c: Cluster, rows: list[dict]) -> None:
    setup = c.start()
    setup["coordinator_s"] = c.make_group_coordinator()
    setup["broker_settings"] = ", ".join(f"{k}={v}" for k, v in sorted(c.settings.items()))
    print(f"  cluster: ZooKeeper + {BROKERS} brokers serving after {setup['start_s']:.1f} s, metadata on every "
          f"broker after {setup['metadata_ready_s']:.1f} s more; session timeout {c.session_s:.0f} s", flush=True)
    for suffix, partitions, rf, acks in PRODUCE_RUNS:
        r, topic = _produce(ctx, c, suffix, partitions, rf, acks)
        rows.append(r)
        if suffix in CONSUMED and not r["metrics"]["aborted"] and not r["metrics"]["errors"]:
            with Meter(c.group()) as meter:
                r = clients.consume_run(c.bootstrap, topic, partitions, ctx.deadline())
            rows.append(row(f"cluster.consume.{suffix}", "cluster", f"consume {partitions} part RF=3, from earliest",
                            "throughput", {**r, **meter.metrics(r["bytes"])}))
        # measured topics go at once: with ~1 GB of them left in the page cache, the next run's
        # writes cost the leader several times the kernel time (see docs/benchmarks.md)
        c.drop([topic])
    rows.extend(_sustained(ctx, c))
    mem = c.group().memory_mb()
    each = [ProcStats(b.proc.pid).memory_mb().get("rss_mb") for b in c.running.values()]
    rows.append(row("cluster.memory", "cluster", f"{BROKERS} brokers after the produce and consume runs", "memory",
                    {**mem, "rss_each_mb": ", ".join(f"{x:.0f}" for x in each if x is not None), **setup}))
    rows.append(_failover(ctx, c))
    rows.append(_controlled_shutdown(ctx, c))


def _sustained(ctx: Ctx, c: Cluster) -> list[dict]:
    """The RF 3 acks=all runs again with Scale.sustained_messages each, every one starting cold
    (COLD_S), then the disk's ceiling for the same volume measured right after them; each row
    carries its MB/s as a share of a third of that ceiling."""
    rows = []
    count = ctx.scale.sustained_messages
    for suffix, partitions in SUSTAINED_RUNS:
        time.sleep(COLD_S)
        r, topic = _produce(ctx, c, f"{suffix}.sustained", partitions, 3, "all", count)
        r["name"] = f"{_name(partitions, 3, 'all')}, sustained ({count * SIZE / 1e9:.1f} GB)"
        rows.append(r)
        c.drop([topic])
    time.sleep(COLD_S)
    disk = disk_ceiling(c.base, 3 * count * SIZE)
    for r in rows:
        m = r["metrics"]
        m.update(disk)
        m["ratio_to_ceiling"] = m["mb_s"] / disk["rf3_ceiling_mb_s"]
    return rows


def phase_cluster_txn(ctx: Ctx) -> list[dict]:
    """The transactions phase's runs on a fresh three-broker cluster, into RF=3 topics with
    min.insync.replicas=2 (__transaction_state: RF 3, min ISR 2, Kafka's defaults)."""
    def measure(c: Cluster, rows: list[dict]) -> None:
        setup = c.start()
        print(f"  cluster: ZooKeeper + {BROKERS} brokers serving after {setup['start_s']:.1f} s", flush=True)
        rows += txn_runs(ctx, "clustertxn", "clustertxn", ", RF=3 min.insync=2", c.bootstrap, c.group(),
                         lambda label, partitions: c.create(label, partitions, 3, RF3_CONFIG), c.drop)

    return run_phase(ctx, "clustertxn", measure)
