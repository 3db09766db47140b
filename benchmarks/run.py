"""Owns the command line of the benchmark harness (`python -m benchmarks`): machine description,
starting/stopping the main broker, running the selected phases (with --repeat, median of each
figure), the issue's targets and met/not-met marking, the final table and the --json file."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

import confluent_kafka

from benchmarks import clients
from benchmarks.broker import REPO_ROOT, OwnBroker, ProcStats
from benchmarks.phases import OPT_IN, PHASES, REPEATABLE, Ctx, Scale
from benchmarks.targets import REFERENCES, TARGETS

ORDER = list(PHASES)
ALIASES = {"scaling": ["partitions100", "partitions10k", "connections"], "all": ORDER}
RATIOS = {"ratio_to_classic": "classic", "ratio_to_1": "1 consumer", "ratio_to_authorizer_off": "authorizer off", "ratio_to_batches": "batches (Fetch v16)", "ratio_to_alone": "alone", "ratio_to_local": "local", "ratio_to_off": "metrics off", "ratio_to_unfiltered": "unfiltered", "ratio_to_p1": "1 part", "ratio_to_idempotent": "idempotent", "ratio_to_uncommitted": "read_uncommitted", "ratio_to_plaintext": "plaintext"}
QUICK_NA = {"partitions10k", "connections",  # targets stated for full-size numbers only
            # quick runs last a few CPU clock ticks (10 ms): the on/off ratios are noise
            "metrics.produce.on", "metrics.requests.on",
            # ratios of runs lasting ~10 ms (20 transactions, 20 MB reads): one scheduler hiccup decides them
            *(key for key in TARGETS if key.startswith(("txn.", "clustertxn."))),
            # 20 MB over TLS is a few clock ticks of broker CPU: the CPU ratios are noise
            *(key for key in TARGETS if key.startswith(("security.produce.", "security.consume."))),
            "security.requests.sasl_plaintext",
            # quick: a few hundred requests per slice, a few clock ticks of broker CPU
            "acl.produce.on", "acl.fetch.on"}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap", metavar="HOST:PORT",
                   help="benchmark an already running broker instead of starting kbroker")
    p.add_argument("--broker-pid", type=int, help="PID of the --bootstrap broker, for its CPU and RSS")
    p.add_argument("--only", default="all",
                   help=f"comma-separated phases: {','.join(ORDER)} (scaling = partitions100,partitions10k,"
                        f"connections; default all; {','.join(sorted(OPT_IN))} only when named under --quick "
                        "or --bootstrap)")
    p.add_argument("--quick", action="store_true", help="smoke test: 20k messages, small scaling numbers")
    p.add_argument("--connections", type=int, help="connections the connections phase opens (default 1000, quick 200)")
    p.add_argument("--messages", type=int, help="messages per throughput run (default 200000, quick 20000)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the throughput/latency phases N times and report the median of each figure")
    p.add_argument("--max-seconds", type=float, default=60.0,
                   help="time bound of each run; a run that hits it stops cleanly, marked aborted (default 60)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="extra --override for the brokers this harness starts (repeatable)")
    p.add_argument("--broker-log-level", default="INFO", help="--log-level of harness-started brokers")
    p.add_argument("--json", metavar="FILE", help="write all results (every repeat) as JSON")
    p.add_argument("--keep-data", action="store_true", help="keep the temp dir (broker data and logs)")
    args = p.parse_args(argv)
    names = []
    for part in args.only.split(","):
        part = part.strip()
        if not part:
            continue
        if part in ALIASES:  # by alias: the opt-in phases only in a full run against our own broker
            names += [n for n in ALIASES[part] if n not in OPT_IN or not (args.quick or args.bootstrap)]
        elif part in PHASES:
            names.append(part)
        else:
            p.error(f"unknown phase {part!r}; choose from {', '.join(ORDER + list(ALIASES))}")
    args.phases = [n for n in ORDER if n in names]
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    return args


def _first(v):
    return v[0] if isinstance(v, tuple) else v


def machine() -> dict:
    info = {"cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)), "cpu_model": None,
            "mem_total_gb": None, "kernel": platform.release(), "python": platform.python_version(),
            "confluent_kafka": _first(confluent_kafka.version()), "librdkafka": _first(confluent_kafka.libversion())}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["mem_total_gb"] = round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "kbroker"], cwd=REPO_ROOT, capture_output=True,
                               text=True, timeout=10).stdout.strip()
        info["kbroker_commit"] = commit + (" (kbroker/ modified)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        info["kbroker_commit"] = None
    return info


def raise_nofile() -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


# ---------------------------------------------------------------------------------------------
def merge(runs: list[dict]) -> dict:
    """Median of every numeric figure over the repeats; flags are OR-ed/AND-ed pessimistically."""
    out = {}
    for k in dict.fromkeys(k for r in runs for k in r):
        vals = [r.get(k) for r in runs if r.get(k) is not None]
        if not vals:
            out[k] = None
        elif k == "aborted":
            out[k] = any(vals)
        elif all(isinstance(v, bool) for v in vals):
            out[k] = all(vals)
        elif k in ("errors", "failures", "metadata_errors"):
            out[k] = max(vals)
        elif all(isinstance(v, (int, float)) for v in vals):
            out[k] = statistics.median(vals)
        else:
            out[k] = vals[0]
    return out


def judge(row: dict, quick: bool) -> tuple[str, str | None]:
    """(target text, status) for a merged row; status None when the row has no target."""
    m = row["metrics"]
    problems = []
    if m.get("aborted"):
        problems.append("ABORTED")
    if m.get("errors") or m.get("failures") or m.get("metadata_errors"):
        problems.append("ERRORS")
    if row["key"] == "partitions10k":
        if m.get("metadata_partitions_seen") not in (None, m["partitions"]) or \
                m.get("partitions_after_restart") not in (None, m["partitions"]):
            problems.append("PARTITIONS MISSING")
    checks = TARGETS.get(row["key"])
    if not checks:
        return REFERENCES.get(row["key"], ""), " ".join(problems) or None
    text = ", ".join(c[3] for c in checks)
    if quick and row["key"] in QUICK_NA:
        return text + " (full size)", " ".join(problems + ["n/a (quick)"])
    failed, missing = [], []
    for metric, op, limit, label in checks:
        v = m.get(metric)
        if isinstance(limit, str):
            limit = m.get(limit)
        if v is None or v != v or limit is None:  # None or NaN
            missing.append(label)
        elif not {"<=": v <= limit, "<": v < limit, ">=": v >= limit, "==": v == limit}[op]:
            failed.append(label)
    if failed:
        status = "NOT MET (" + ", ".join(failed) + ")"
    elif missing and len(missing) == len(checks):
        status = "n/a"
    elif missing:
        status = "met (" + ", ".join(missing) + " n/a)"
    else:
        status = "met"
    return text, " ".join(problems + [status])


def _f(v, fmt="{:.1f}", none="-"):
    return none if v is None or v != v else fmt.format(v)


def describe(row: dict) -> str:
    m, kind = row["metrics"], row["kind"]
    if kind == "throughput":
        s = f"{_f(m.get('msgs_s'), '{:,.0f}')} msg/s  {_f(m.get('mb_s'))} MB/s"
        if m.get("source_mb_s") is not None:  # a filtered view: how fast the source is moved past
            s += f"  (source {_f(m['source_mb_s'])} MB/s)"
        for ratio, of in RATIOS.items():
            if ratio in m:
                s += f"  ({_f(m[ratio] * 100, '{:.0f}')}% of {of})"
        if m.get("transactions"):
            s += (f"  ({_f(m['transactions'], '{:.0f}')} txns, commit p50 {_f(m.get('commit_p50_ms'))} "
                  f"p99 {_f(m.get('commit_p99_ms'))} ms)")
        if m.get("cpu_ratio_to_plaintext") is not None:
            s += f"  (CPU/GB {_f(m['cpu_ratio_to_plaintext'] * 100, '{:.0f}')}% of plaintext)"
        if m.get("cpu_ratio_to_authorizer_off") is not None:
            s += f"  (CPU/GB {_f(m['cpu_ratio_to_authorizer_off'] * 100, '{:.0f}')}% of authorizer off)"
        if m.get("cpu_ratio_to_batches") is not None:
            s += f"  (CPU/GB {_f(m['cpu_ratio_to_batches'], '{:.1f}')}x that of batches)"
        if m.get("first_message_s") is not None:
            s += f"  (first msg after {m['first_message_s'] * 1000:.0f} ms)"
        return s
    if kind == "latency":
        s = f"p50 {_f(m.get('p50_ms'), '{:.2f}')}  p99 {_f(m.get('p99_ms'), '{:.2f}')}  max {_f(m.get('max_ms'), '{:.1f}')} ms"
        if "received" in m:
            s += f"  ({_f(m['received'], '{:.0f}')}/{_f(m['sent'], '{:.0f}')} recv)"
        if "late_over_100ms" in m:
            s += f"  {_f(m['late_over_100ms'], '{:.0f}')} > 100 ms late, {_f(m.get('early'), '{:.0f}')} early"
        return s
    if kind == "requests":
        s = (f"{_f(m.get('requests_s'), '{:,.0f}')} req/s  {_f(m.get('mb_s'))} MB/s  broker "
             f"{_f(m.get('broker_user_us_per_request'), '{:.0f}')} us user + "
             f"{_f(m.get('broker_sys_us_per_request'), '{:.0f}')} us sys per request")
        if "cpu_ratio_to_authorizer_off" in m:
            s += f"  (CPU {_f(m['cpu_ratio_to_authorizer_off'] * 100, '{:.0f}')}% of authorizer off"
            s += f"; slices {m['us_per_request_each']} us)" if m.get("us_per_request_each") else ")"
        elif m.get("us_per_request_each") and row["key"].startswith("acl."):
            s += f"  (slices {m['us_per_request_each']} us)"
        if "cpu_ratio_to_off" in m:
            s += f"  (CPU {_f(m['cpu_ratio_to_off'] * 100, '{:.0f}')}% of metrics off)"
        if "cpu_ratio_to_plaintext" in m:
            s += f"  (CPU {_f(m['cpu_ratio_to_plaintext'] * 100, '{:.0f}')}% of plaintext)"
        return s
    if kind == "quota":
        return (f"{_f(m.get('mb_s'), '{:.2f}')} MB/s = {_f(m.get('ratio_to_quota', 0) * 100, '{:.0f}')}% of its "
                f"{_f(m.get('quota_mb_s'), '{:.0f}')} MB/s quota over {_f(m.get('seconds'), '{:.0f}')} s "
                f"(after the first {m.get('window_num')} s: {_f(m.get('steady_mb_s'), '{:.2f}')} MB/s = "
                f"{_f(m.get('steady_ratio_to_quota', 0) * 100, '{:.0f}')}%; quota.window.num={m.get('window_num')})")
    if kind == "auth":
        return (f"{_f(m.get('auths_s'), '{:,.0f}')} logins/s ({m.get('clients')} client procs); broker {_f(m.get('broker_ms_per_auth'), '{:.2f}')} ms "
                f"CPU per login = {_f(m.get('auths_per_core_s'), '{:,.0f}')}/s per core; clients "
                f"{_f(m.get('client_ms_per_auth'), '{:.2f}')} ms per login")
    if kind == "connections":
        return (f"{_f(m['opened'], '{:.0f}')}/{m['requested']} open in {_f(m['open_s'])} s; produce+consume "
                f"{'ok' if m.get('serve_ok') else 'FAILED'}; re-probe {_f(m.get('reprobe_ok'), '{:.0f}')} ok")
    if kind == "partitions":
        s = (f"Metadata {_f(m.get('metadata_ms'))} ms (first {_f(m.get('metadata_first_ms'))}, "
             f"{_f(m.get('metadata_bytes', 0) / 1e3, '{:.0f}')} kB); create {_f(m.get('create_s'))} s")
        if "restart_s" in m:
            s += f"; restart {_f(m.get('restart_s'), '{:.2f}')} s, stop {_f(m.get('shutdown_s'), '{:.2f}')} s"
        return s
    if kind == "memory":
        s = f"RSS after run {_f(m.get('rss_mb'), '{:.0f}')} MB, peak (VmHWM) {_f(m.get('peak_rss_mb'), '{:.0f}')} MB"
        return s + (f" (each {m['rss_each_mb']})" if m.get("rss_each_mb") else "")
    if kind == "failover":
        return (f"first ack of a post-kill message after {_f(m.get('failover_s'), '{:.2f}')} s (session timeout "
                f"{_f(m.get('session_timeout_s'), '{:.0f}')} s; new leader in metadata after "
                f"{_f(m.get('leader_elected_s'), '{:.2f}')} s); back in ISR {_f(m.get('rejoin_s'))} s after restart; "
                f"{_f(m.get('lost'), '{:.0f}')} lost")
    if kind == "shutdown":
        return (f"longest ack gap {_f(m.get('max_gap_s', 0) * 1000, '{:.0f}')} ms (before: "
                f"{_f((m.get('baseline_max_gap_s') or 0) * 1000, '{:.0f}')} ms); {_f(m.get('moved_partitions'), '{:.0f}')} "
                f"leaders moved; broker stopped in {_f(m.get('shutdown_s'), '{:.2f}')} s; {_f(m.get('lost'), '{:.0f}')} lost")
    if kind == "recovery":
        s = (f"all leaders elected {_f(m.get('elected_s'), '{:.2f}')} s, every partition served "
             f"{_f(m.get('served_s'), '{:.2f}')} s")
        if "rejoin_s" in m:
            s += (f" (session timeout {_f(m.get('session_timeout_s'), '{:.0f}')} s; {_f(m.get('leaders_moved'), '{:.0f}')}"
                  f" leaders moved); back in every ISR {_f(m.get('rejoin_s'))} s after restart")
        if "isr_s" in m:
            s += f"; every ISR full {_f(m.get('isr_s'))} s; stop took {_f(m.get('stop_s'))} s"
        return s
    if kind == "scale":  # benchmarks/scale.py: a cluster holding many partitions, no clients
        s = (f"idle {_f(m.get('idle_cpu_pct'), '{:.1f}')} % of a core ({m.get('idle_cpu_pct_each', '')}); "
             f"created and in sync in {_f(m.get('create_s'), '{:.1f}')} s")
        if m.get("kafka_idle_cpu_pct") is not None:
            s += f"; Kafka 3.8: {_f(m['kafka_idle_cpu_pct'], '{:.0f}')} %, {_f(m.get('kafka_rss_mb'), '{:,.0f}')} MB"
        return s
    if kind == "startup":
        return (f"first start {_f(m.get('cold_start_ms'), '{:.0f}')} ms (imports included); later starts p50 "
                f"{_f(m.get('p50_ms'), '{:.0f}')} ms, max {_f(m.get('max_ms'), '{:.0f}')} ms")
    if kind == "acl-decision":
        return (f"{_f(m.get('cached_ns'), '{:.0f}')} ns a check (decision cached; {_f(m.get('uncached_ns'), '{:,.0f}')} "
                f"ns uncached) vs {_f(m.get('allow_all_ns'), '{:.0f}')} ns without an authorizer: +"
                f"{_f(m.get('counting_ns'), '{:.0f}')} ns = {_f((m.get('share_of_request') or float('nan')) * 100, '{:.2f}')}% "
                f"of the broker's {_f(m.get('request_us'), '{:.0f}')} us per Produce request")
    if kind == "counting":
        return (f"{_f(m.get('counting_ns'), '{:.0f}')} ns per request = "
                f"{_f((m.get('share_of_request') or float('nan')) * 100, '{:.2f}')}% of the broker's "
                f"{_f(m.get('request_us'), '{:.0f}')} us per request (metrics off)")
    if kind == "rebalance":
        s = f"owned again after {_f(m.get('owned_s'), '{:.2f}')} s"
        if m.get("event") == "kill":
            s += f" (session timeout {_f(m.get('session_timeout_s'), '{:.0f}')} s)"
        s += (f"; {_f(m.get('unmoved_partitions'), '{:.0f}')} unmoved: longest gap "
              f"{_f((m.get('max_gap_s') or float('nan')) * 1000, '{:.0f}')} ms (before "
              f"{_f((m.get('baseline_max_gap_s') or float('nan')) * 1000, '{:.0f}')}; no partition at all: "
              f"{_f((m.get('all_partitions_silent_s') or float('nan')) * 1000, '{:.0f}')}), "
              f"{_f(m.get('unmoved_records_s_during'), '{:.0f}')} rec/s during vs "
              f"{_f(m.get('unmoved_records_s_before'), '{:.0f}')} before")
        return s
    if kind == "heartbeat":
        s = (f"{_f(m.get('broker_us_per_heartbeat'), '{:.0f}')} us broker CPU per heartbeat "
             f"({_f(m.get('heartbeats'), '{:,.0f}')} heartbeats, {_f(m.get('heartbeats_s'), '{:,.0f}')}/s)")
        if m.get("us_per_heartbeat_each"):
            s += f" (slices of the first repeat {m['us_per_heartbeat_each']} us)"
        if m.get("join_us_per_heartbeat") is not None:
            s += (f" (joins {_f(m.get('join_us_per_heartbeat'), '{:.0f}')} us, reconciling "
                  f"{_f(m.get('reconcile_us_per_heartbeat'), '{:.0f}')} us)")
        return s
    if kind == "group-commits":
        return (f"broker {_f(m.get('coordinator_cpu_pct'), '{:.1f}')} % of a core (idle "
                f"{_f(m.get('idle_cpu_pct'), '{:.1f}')} %); {_f(m.get('commits'), '{:,.0f}')} commits + "
                f"{_f(m.get('heartbeats'), '{:,.0f}')} heartbeats in {_f(m.get('seconds'), '{:.0f}')} s, "
                f"{_f(m.get('broker_us_per_request'), '{:.0f}')} us each; commit p99 "
                f"{_f(m.get('commit_p99_ms'), '{:.1f}')} ms; RSS {_f(m.get('rss_before_mb'), '{:.0f}')} -> "
                f"{_f(m.get('rss_stable_mb'), '{:.0f}')} MB = {_f(m.get('kb_per_group'), '{:.1f}')} KB per group "
                f"({_f(m.get('kb_per_group_without_connection'), '{:.1f}')} KB without its connection); "
                f"{_f(m.get('offsets_verified'), '{:.0f}')} offsets fetched back ok; harness "
                f"{_f(m.get('client_cpu_pct'), '{:.1f}')} % CPU")
    if kind == "decision":
        return (f"{_f(m.get('decision_lean_us'), '{:.1f}')} us a heartbeat (owned listed: "
                f"{_f(m.get('decision_owned_us'), '{:.1f}')} us) = "
                f"{_f((m.get('share_of_heartbeat') or float('nan')) * 100, '{:.0f}')}% of the broker's "
                f"{_f(m.get('broker_us_per_heartbeat'), '{:.0f}')} us; whole request path in-process "
                f"{_f(m.get('request_path_us'), '{:.0f}')} us")
    if kind == "lookup":
        return (f"{_f(m.get('requests_s'), '{:,.0f}')} req/s  p50 {_f(m.get('p50_ms'), '{:.2f}')}  p99 "
                f"{_f(m.get('p99_ms'), '{:.2f}')}  max {_f(m.get('max_ms'), '{:.1f}')} ms  broker "
                f"{_f(m.get('broker_cpu_s_per_1000'), '{:.3f}')} CPU-s/1000 req = {_f(m.get('capacity_req_s_per_core'), '{:,.0f}')} req/s "
                f"per core ({_f((m.get('broker_cpu_busy') or float('nan')) * 100, '{:.0f}')}% "
                f"of its core; clients {_f((m.get('client_cpu_busy') or float('nan')) * 100, '{:.0f}')}%)")
    if kind == "registration":
        return (f"{_f(m.get('registrations'), '{:,.0f}')} in {_f(m.get('total_s'))} s = "
                f"{_f(m.get('requests_s'), '{:,.0f}')}/s  p50 {_f(m.get('p50_ms'), '{:.2f}')}  p99 "
                f"{_f(m.get('p99_ms'), '{:.2f}')}  max {_f(m.get('max_ms'), '{:.1f}')} ms  broker "
                f"{_f(m.get('broker_cpu_ms_per_request'), '{:.2f}')} CPU-ms each")
    if kind == "registry-memory":
        return (f"RSS {_f(m.get('rss_before_mb'), '{:.0f}')} MB before, {_f(m.get('rss_mb'), '{:.0f}')} MB with "
                f"{_f(m.get('schemas'), '{:,.0f}')} schemas (+{_f(m.get('bytes_per_schema'), '{:,.0f}')} B each), "
                f"{_f(m.get('rss_after_restart_mb'), '{:.0f}')} MB after restart; restart to first answer "
                f"{_f(m.get('restart_first_answer_s'), '{:.2f}')} s (Kafka port {_f(m.get('restart_kafka_s'), '{:.2f}')} s; "
                f"reading _schemas {_f(m.get('restart_read_s'), '{:.2f}')} s of it)")
    if kind == "error":
        return m.get("error", "")[:100]
    return json.dumps(m)[:100]


def table(rows: list[dict], quick: bool) -> str:
    header = ["Phase", "Run", "Result", "CPU-s/GB", "RSS MB", "Target (issue)", "Status"]
    lines = []
    for r in rows:
        target, status = judge(r, quick)
        m = r["metrics"]
        lines.append([r["phase"], r["name"], describe(r), _f(m.get("cpu_s_per_gb"), "{:.1f}"),
                      _f(m.get("rss_mb"), "{:.0f}"), target, status or ""])
    widths = [max(len(str(x[i])) for x in [header] + lines) for i in range(len(header))]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [fmt(header), fmt(["-" * w for w in widths])]
    prev = None
    for cells in lines:
        out.append(fmt(cells if cells[0] != prev else [""] + cells[1:]))
        prev = cells[0]
    return "\n".join(out)


def progress(row: dict) -> None:
    m = row["metrics"]
    extra = f"  broker {m['cpu_s_per_gb']:.1f} CPU-s/GB" if m.get("cpu_s_per_gb") is not None else ""
    rss = f"  RSS {m['rss_mb']:.0f} MB" if m.get("rss_mb") is not None else ""
    flags = "  ABORTED" if m.get("aborted") else ""
    flags += f"  errors={m['errors']} ({m.get('first_error')})" if m.get("errors") else ""
    print(f"  {row['phase']:<13} {row['name']:<42} {describe(row)}{extra}{rss}{flags}", flush=True)


# ---------------------------------------------------------------------------------------------
def _portable(broker_command: str | None, base: Path) -> str | None:
    """The broker command as it reads on any machine: no interpreter path, temp dir or port of this run."""
    if broker_command is None:
        return None
    out = broker_command.replace(str(base), "<temp dir>").replace(sys.executable, "python", 1)
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<free port>", out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks
    nofile = raise_nofile()
    scale = Scale.quick() if args.quick else Scale()
    if args.messages:
        scale.messages = scale.security_messages = args.messages
    if args.connections:
        scale.connections = args.connections
    mach = machine()
    command = shlex.join(["python", "-m", "benchmarks", *argv])
    print(f"kbroker benchmarks: {command}")
    print(f"machine: {mach['cores']} cores ({mach['usable_cores']} usable), {mach['cpu_model']}, "
          f"{mach['mem_total_gb']} GB RAM, Linux {mach['kernel']}, Python {mach['python']}, "
          f"confluent-kafka {mach['confluent_kafka']} / librdkafka {mach['librdkafka']}, "
          f"kbroker {mach['kbroker_commit']}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"open files limit {nofile[0]}; phases: {','.join(args.phases)}; repeat {args.repeat}; "
          f"{scale.messages} messages per throughput run", flush=True)

    base = Path(tempfile.mkdtemp(prefix="kbroker-bench-"))
    started = time.time()
    results: dict[str, dict] = {}   # key -> merged row (first-seen order)
    runs: dict[str, list[dict]] = {}
    notes: list[str] = []
    problems: dict[str, list[str]] = {}
    own = None
    ctx = None
    broker_command = None
    try:
        if args.bootstrap:
            stats = ProcStats(args.broker_pid) if args.broker_pid else None
            if stats and stats.cpu_seconds() is None:
                raise SystemExit(f"--broker-pid {args.broker_pid}: no such process")
            bootstrap = args.bootstrap
            print(f"broker: {bootstrap} (external{', pid %d' % args.broker_pid if args.broker_pid else ', no pid: no CPU/RSS'})")
        else:
            own = OwnBroker(base, "main", args.override, args.broker_log_level)
            broker_command = shlex.join(own.command)
            startup = own.start()
            stats, bootstrap = own.stats(), own.bootstrap
            print(f"broker: {broker_command}\n        pid {own.proc.pid}, serving after {startup:.2f} s", flush=True)
        ctx = Ctx(bootstrap=bootstrap, stats=stats, own=own, base=base, scale=scale, max_seconds=args.max_seconds,
                  run_id=uuid.uuid4().hex[:6], overrides=args.override, log_level=args.broker_log_level)
        for phase in args.phases:
            reps = args.repeat if phase in REPEATABLE else 1
            for rep in range(reps):
                label = f"{phase}" + (f" (repeat {rep + 1}/{reps})" if reps > 1 else "")
                print(f"[{time.strftime('%H:%M:%S')}] {label}", flush=True)
                try:
                    rows = PHASES[phase](ctx)
                except Exception as exc:  # one phase failing must not lose the others
                    tb = traceback.format_exc()
                    print(tb, file=sys.stderr, flush=True)
                    rows = [{"key": f"{phase}.error", "phase": phase, "name": "FAILED", "kind": "error",
                             "metrics": {"error": f"{type(exc).__name__}: {exc}".splitlines()[0], "errors": 1}}]
                    notes.append(f"{label}: {type(exc).__name__}: {exc}")
                    if own is not None and not own.alive():
                        notes.append(f"main broker died during {label} (exit {own.proc.returncode}); restarted")
                        print(f"main broker died; log tail:\n{own.log_tail()}\nrestarting", file=sys.stderr)
                        own.start()
                        ctx.stats = own.stats()
                for r in rows:
                    progress(r)
                    runs.setdefault(r["key"], []).append(r["metrics"])
                    results.setdefault(r["key"], r)
        for key, metric_runs in runs.items():
            results[key]["metrics"] = merge(metric_runs)
        main_used = args.bootstrap or any(p not in ("durability", "partitions10k", "cluster", "clustertxn", "cluster3k", "metrics", "security", "quotas", "acl", "groups", "groups-cpu", "group-commits", "share",
                                                       "schema-registry", "scale")
                                             for p in args.phases)
        if ctx.stats is not None and main_used:
            mem = ctx.stats.memory_mb()
            results["memory"] = {"key": "memory", "phase": "memory", "name": "broker after all phases",
                                 "kind": "memory", "metrics": mem}
    finally:
        if own is not None:
            try:
                own.stop()
            except Exception as exc:
                notes.append(f"stopping the main broker: {exc}")
        if ctx is not None:
            notes.extend(ctx.notes)
            problems.update(ctx.log_problems)
        for b in ([own] if own else []) + (ctx.side_brokers if ctx else []):
            if b.alive():
                b.stop()
            count, lines = b.log_problems()
            if count:
                problems[b.dir.name] = lines
                notes.append(f"broker '{b.dir.name}' logged {count} ERROR/Traceback lines")
        if args.bootstrap and ctx is not None and ctx.created:
            try:
                clients.delete_topics(args.bootstrap, ctx.created)
            except Exception as exc:
                notes.append(f"deleting benchmark topics: {exc}")
        if args.keep_data:
            print(f"data and broker logs kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)

    rows = list(results.values())
    print()
    print(f"kbroker benchmarks: {command}")
    print(f"machine: {mach['cores']} cores, {mach['cpu_model']}; load average at end: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; total {time.time() - started:.0f} s"
          + (f"; median of {args.repeat} repeats" if args.repeat > 1 else ""))
    print("MB = 10^6 bytes of message values; CPU-s/GB = broker utime+stime per 10^9 value bytes; "
          "RSS = broker VmRSS after the run" + ("; cluster rows: the three brokers summed" if {"cluster", "clustertxn"} & set(args.phases)
                                                else ""))
    print(table(rows, args.quick))
    for n in notes:
        print(f"note: {n}")
    for name, lines in problems.items():
        print(f"broker '{name}' log problems (first {len(lines)}):")
        for ln in lines:
            print(f"    {ln}")
    if args.json:
        doc = {"command": command, "broker_command": _portable(broker_command, base), "machine": mach, "started": started,
               "seconds": time.time() - started, "args": vars(args), "scale": vars(scale), "notes": notes,
               "broker_log_problems": problems,
               "results": [{**r, "target": judge(r, args.quick)[0], "status": judge(r, args.quick)[1],
                            "runs": runs.get(r["key"], [])} for r in rows]}
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str))
        print(f"results written to {args.json}")
    return 1 if any(r["kind"] == "error" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
