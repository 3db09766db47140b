"""Owns the `schema-registry` benchmark phase: kbroker's built-in Confluent-compatible schema
registry (`schema.registry.listener`) on a broker of its own, driven over HTTP/1.1 by client
processes of this module (`python -m benchmarks.schema_registry --worker JSON`).

Placement: with two or more usable cores the broker (every thread) is pinned to CPU 0 and every
client process to CPU 1 (os.sched_setaffinity), so the registry has one core and the load generator
another. The clients are a minimal HTTP/1.1 client on raw sockets (standard library only): several
persistent keep-alive connections per process, each sending its next request when the previous
answer has arrived (no pipelining), multiplexed with `selectors`; a request costs the client
~20 µs, so it is not what limits the figures (its CPU is reported next to them).

1. **Memory, before**: the broker's VmRSS once the registry answers GET /subjects (before the
   first registration).
2. **Registration, sequential**: the global level set to BACKWARD_TRANSITIVE (PUT /config); then
   SUBJECTS subjects x VERSIONS versions registered one after the other by one client
   (POST /subjects/{s}/versions), each version of a subject an Avro record (named per subject, so
   every schema is distinct) that adds one optional field with a default to the one before, so every
   version is checked against every earlier one and all are compatible. Total time and per-request
   p50/p99/max; then the RSS with SUBJECTS x VERSIONS schemas.
3. **Lookups**: GET /schemas/ids/{id} (ids drawn at random from those registered) over 1, 4 and
   LOOKUP_CONNECTIONS connections (4 and LOOKUP_CONNECTIONS: LOOKUP_PROCS processes), and POST /subjects/{s} (what a
   serializer without a cache sends: the schema, answered with its id and version) over
   LOOKUP_CONNECTIONS, each for LOOKUP_SECONDS: requests/s, p50/p99/max latency, and the broker's
   CPU seconds (utime+stime from /proc/<pid>/stat) per 1,000 requests.
4. **Restart**: SIGTERM, start again on the same data; the time from spawning the broker until the
   registry first answers GET /schemas/ids/{the last id} (it reads `_schemas` on its first request),
   and the RSS after that answer.
5. **Registration, concurrent**: another SUBJECTS x VERSIONS (subjects `conc-*`), by
   CONCURRENT_CLIENTS client processes at once (one connection each, each a quarter of the
   subjects), on the registry that already holds the first run's. The schemas are the first run's
   texts (record `Rec{i}`), so, as in Confluent's registry, they get the first run's ids: 10,000 new
   subject versions, each checked against its subject's earlier versions, and no new schema ids.
   Then the RSS.
"""

from __future__ import annotations

import json
import os
import random
import re
import selectors
import socket
import subprocess
import sys
import threading
import time

SUBJECTS = 1000
VERSIONS = 10
CONCURRENT_CLIENTS = 4
LOOKUP_SECONDS = 10.0
LOOKUP_CONNECTIONS = 8
LOOKUP_PROCS = 2
QUICK = {"subjects": 30, "lookup_seconds": 1.5}
BROKER_CPU, CLIENT_CPU = 0, 1
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


# -- the schemas ------------------------------------------------------------------------------------
def avro_schema(subject_index: int, version: int) -> str:
    """Version `version` (1-based) of subject `subject_index`'s record: an id and `version - 1`
    optional string fields with a null default (each version BACKWARD compatible with all before)."""
    fields = [{"name": "id", "type": "long"}]
    fields += [{"name": f"f{k}", "type": ["null", "string"], "default": None} for k in range(1, version)]
    return json.dumps({"type": "record", "name": f"Rec{subject_index}", "namespace": "bench.sr", "fields": fields},
                      separators=(",", ":"))


def subject_name(prefix: str, index: int) -> str:
    return f"{prefix}-{index}-value"


def http_request(method: str, path: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if method != "GET":
        head += f"Content-Type: {CONTENT_TYPE}\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


def register_request(prefix: str, index: int, version: int) -> bytes:
    body = json.dumps({"schema": avro_schema(index, version)}).encode()
    return http_request("POST", f"/subjects/{subject_name(prefix, index)}/versions", body)


def lookup_request(prefix: str, index: int, version: int) -> bytes:
    body = json.dumps({"schema": avro_schema(index, version)}).encode()
    return http_request("POST", f"/subjects/{subject_name(prefix, index)}", body)


# -- the client (worker processes) ------------------------------------------------------------------
class Conn:
    """One keep-alive connection: one request in flight at a time."""

    def __init__(self, addr: tuple[str, int], requests):
        self.sock = socket.create_connection(addr)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.requests = requests   # iterator of request bytes
        self.buf = b""
        self.sent_at = 0.0

    def send_next(self) -> bool:
        req = next(self.requests, None)
        if req is None:
            return False
        self.buf = b""
        self.sent_at = time.perf_counter()
        self.sock.sendall(req)  # small requests: the socket buffer takes them whole
        return True

    def receive(self) -> tuple[int, bytes] | None:
        """(status, body) once the whole answer is in, else None."""
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("registry closed the connection")
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buf[:end].decode("latin-1")
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if len(self.buf) < end + 4 + length:
            return None
        return int(head.split(" ", 2)[1]), self.buf[end + 4:end + 4 + length]


def worker(spec: dict) -> dict:
    """Run `spec` and return {latencies_ms (within the window), errors, first_error, cpu_s, ...}."""
    if spec.get("cpu") is not None:
        os.sched_setaffinity(0, {spec["cpu"]})
    addr = (spec["host"], spec["port"])
    rng = random.Random(spec.get("seed", 0))
    mode = spec["mode"]
    if mode == "get":
        lo, hi = spec["ids"]
        reqs = [http_request("GET", f"/schemas/ids/{i}") for i in range(lo, hi + 1)]
        streams = [iter(lambda: rng.choice(reqs), None) for _ in range(spec["connections"])]
    elif mode == "post":
        pool = [lookup_request(spec["prefix"], rng.randrange(spec["subjects"]), rng.randint(1, spec["versions"]))
                for _ in range(2000)]
        streams = [iter(lambda: rng.choice(pool), None) for _ in range(spec["connections"])]
    elif mode == "register":  # each connection its subjects in turn, every version of one before the next
        mine = list(spec["indexes"])
        streams = [(register_request(spec["prefix"], i, v) for i in mine[c::spec["connections"]]
                    for v in range(1, spec["versions"] + 1)) for c in range(spec["connections"])]
    else:
        raise ValueError(mode)
    conns = [Conn(addr, s) for s in streams]
    sel = selectors.DefaultSelector()
    start, stop = spec.get("start"), spec.get("stop")
    while start is not None and time.time() < start:
        time.sleep(min(0.01, start - time.time()))
    t0 = time.perf_counter()
    wall0 = time.time()
    cpu0 = os.times()
    latencies, errors, first_error, bodies = [], 0, None, []
    for c in conns:
        if c.send_next():
            sel.register(c.sock, selectors.EVENT_READ, c)
    deadline = None if stop is None else t0 + (stop - wall0)
    open_conns = len(sel.get_map())
    while open_conns:
        for key, _ in sel.select(timeout=1.0):
            c = key.data
            answer = c.receive()
            if answer is None:
                continue
            now = time.perf_counter()
            status, body = answer
            if deadline is None or now <= deadline:
                latencies.append((now - c.sent_at) * 1000)
                if status != 200:
                    errors += 1
                    first_error = first_error or f"{status} {body[:200].decode(errors='replace')}"
                elif mode == "register" and spec.get("keep_ids"):
                    bodies.append(json.loads(body)["id"])
            if (deadline is not None and now > deadline) or not c.send_next():
                sel.unregister(c.sock)
                c.sock.close()
                open_conns -= 1
    cpu1 = os.times()
    return {"latencies_ms": latencies, "errors": errors, "first_error": first_error, "ids": bodies,
            "seconds": time.perf_counter() - t0,
            "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)}


# -- the harness side -------------------------------------------------------------------------------
def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _pin_broker(pid: int, cpu: int) -> bool:
    """Pin every thread of the broker to `cpu` (threads started later inherit it)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})
        return True
    except OSError:
        return False


def _run_workers(specs: list[dict]) -> list[dict]:
    """One process per spec, started together; their JSON results."""
    from benchmarks.broker import REPO_ROOT

    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.schema_registry", "--worker", json.dumps(s)],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in specs]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"schema registry client failed ({p.returncode}):\n{stderr[-2000:]}")
        out.append(json.loads(stdout))
    return out


def _call(port: int, method: str, path: str, body: dict | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": CONTENT_TYPE} if data else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _wait_answer(port: int, path: str, timeout: float, interval: float = 0.005) -> float | None:
    """perf_counter time of the first 200 answer to GET `path`, None after `timeout`."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            status, _ = _call(port, "GET", path, timeout=2.0)
            if status == 200:
                return time.perf_counter()
        except OSError:
            pass
        time.sleep(interval)
    return None


def _latency_metrics(results: list[dict], seconds: float | None = None) -> dict:
    lat = [x for r in results for x in r["latencies_ms"]]
    m = {"requests": len(lat), "p50_ms": _pct(lat, 0.5), "p99_ms": _pct(lat, 0.99),
         "max_ms": max(lat) if lat else None, "errors": sum(r["errors"] for r in results),
         "client_cpu_s": sum(r["cpu_s"] for r in results)}
    firsts = [r["first_error"] for r in results if r["first_error"]]
    if firsts:
        m["first_error"] = firsts[0]
    wall = seconds if seconds is not None else max(r["seconds"] for r in results)
    m["seconds"] = wall
    m["requests_s"] = len(lat) / wall if wall else None
    return m


def _registration(ctx, port: int, stats, prefix: str, clients: int, subjects: int, cpu) -> dict:
    from benchmarks.phases import Meter

    indexes = list(range(subjects))
    specs = [{"mode": "register", "host": "127.0.0.1", "port": port, "prefix": prefix, "versions": VERSIONS,
              "indexes": indexes[k::clients], "connections": 1, "cpu": cpu, "keep_ids": True}
             for k in range(clients)]
    with Meter(stats) as meter:
        t0 = time.perf_counter()
        results = _run_workers(specs)
        total = time.perf_counter() - t0
    m = meter.metrics()  # its client_cpu_s (the harness's own) replaced by the clients' below
    m.update(_latency_metrics(results))
    m["load_avg_1m"] = os.getloadavg()[0]
    m.update({"clients": clients, "subjects": subjects, "versions": VERSIONS, "registrations": subjects * VERSIONS,
              "total_s": total, "level": "BACKWARD_TRANSITIVE",
              "max_id": max((i for r in results for i in r["ids"]), default=None),
              "distinct_ids": len({i for r in results for i in r["ids"]})})
    if m["broker_cpu_s"] is not None and m["requests"]:
        m["broker_cpu_ms_per_request"] = m["broker_cpu_s"] * 1000 / m["requests"]
    return m


def _lookups(port: int, stats, mode: str, connections: int, procs: int, seconds: float, cpu, **extra) -> dict:
    per = [connections // procs + (1 if k < connections % procs else 0) for k in range(procs)]
    start = time.time() + 1.5  # the clients' start-up (imports) before the window
    specs = [{"mode": mode, "host": "127.0.0.1", "port": port, "connections": n, "cpu": cpu, "seed": k + 1,
              "start": start, "stop": start + seconds, **extra} for k, n in enumerate(per) if n]
    box: dict = {}

    def sample():  # broker CPU over the window itself
        time.sleep(max(0.0, start - time.time()))
        box["cpu0"] = stats.cpu_times()
        time.sleep(max(0.0, start + seconds - time.time()))
        box["cpu1"] = stats.cpu_times()
        box["mem"] = stats.memory_mb()

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    results = _run_workers(specs)
    th.join()
    m = _latency_metrics(results, seconds)
    m.update({"connections": connections, "client_procs": len(specs), **box.get("mem", {})})
    if box.get("cpu0") and box.get("cpu1"):
        user = box["cpu1"][0] - box["cpu0"][0]
        sys_ = box["cpu1"][1] - box["cpu0"][1]
        m.update({"broker_cpu_s": user + sys_, "broker_user_s": user, "broker_sys_s": sys_,
                  "broker_cpu_busy": (user + sys_) / seconds})
        if m["requests"]:
            m["broker_cpu_s_per_1000"] = (user + sys_) * 1000 / m["requests"]
        if user + sys_ > 0:  # what one core would serve were the broker alone on it
            m["capacity_req_s_per_core"] = m["requests"] / (user + sys_)
    m["load_avg_1m"] = os.getloadavg()[0]
    m["client_cpu_busy"] = m["client_cpu_s"] / seconds
    return m


def phase_schema_registry(ctx) -> list[dict]:
    from benchmarks.broker import OwnBroker, free_port
    from benchmarks.phases import Scale, row

    quick = ctx.scale.requests < Scale().requests  # --quick: a smoke run
    subjects = QUICK["subjects"] if quick else SUBJECTS
    seconds = QUICK["lookup_seconds"] if quick else LOOKUP_SECONDS
    port = free_port()
    broker = OwnBroker(ctx.base, "schema-registry", [f"schema.registry.listener=http://127.0.0.1:{port}",
                                                      *ctx.overrides], ctx.log_level)
    ctx.side_brokers.append(broker)
    pin = len(os.sched_getaffinity(0)) >= 2 and {BROKER_CPU, CLIENT_CPU} <= os.sched_getaffinity(0)
    client_cpu = CLIENT_CPU if pin else None
    placement = (f"broker pinned to CPU {BROKER_CPU}, clients to CPU {CLIENT_CPU}" if pin
                 else "not pinned (fewer than 2 usable cores)")
    rows: list[dict] = []
    common = {"placement": placement, "load_avg_start": os.getloadavg()[0]}  # shared by every row
    try:
        broker.start()
        if pin and not _pin_broker(broker.proc.pid, BROKER_CPU):
            common["placement"] = "pinning the broker failed; clients on CPU 1"
        stats = broker.stats()
        if _wait_answer(port, "/subjects", 60) is None:
            raise RuntimeError(f"schema registry not answering:\n{broker.log_tail()}")
        time.sleep(0.5)
        rss_before = stats.memory_mb()
        status, body = _call(port, "PUT", "/config", {"compatibility": "BACKWARD_TRANSITIVE"})
        if status != 200:
            raise RuntimeError(f"PUT /config: {status} {body[:200]!r}")

        seq = _registration(ctx, port, stats, "seq", 1, subjects, client_cpu)
        seq.update(common)
        rss_after = stats.memory_mb()
        max_id = seq["max_id"]
        rows.append(row("schema_registry.register.sequential", "schema-registry",
                        f"register {subjects} subjects x {VERSIONS} versions, BACKWARD_TRANSITIVE, 1 client",
                        "registration", seq))
        mem = {"schemas": seq["distinct_ids"], "rss_before_mb": rss_before.get("rss_mb"),
               "rss_mb": rss_after.get("rss_mb"), "peak_rss_mb": rss_after.get("peak_rss_mb"), **common}
        mem["rss_growth_mb"] = mem["rss_mb"] - mem["rss_before_mb"]
        mem["bytes_per_schema"] = mem["rss_growth_mb"] * 1e6 / max(1, mem["schemas"])

        look = {"subjects": subjects, "versions": VERSIONS}
        for name, mode, conns, procs, extra in (
                ("get1", "get", 1, 1, {"ids": [1, max_id]}),
                ("get4", "get", 4, LOOKUP_PROCS, {"ids": [1, max_id]}),
                ("get", "get", LOOKUP_CONNECTIONS, LOOKUP_PROCS, {"ids": [1, max_id]}),
                ("post", "post", LOOKUP_CONNECTIONS, LOOKUP_PROCS, {"prefix": "seq", **look})):
            m = _lookups(port, stats, mode, conns, procs, seconds, client_cpu, **extra)
            m.update(common)
            what = "GET /schemas/ids/{id}" if mode == "get" else "POST /subjects/{s} (lookup)"
            rows.append(row(f"schema_registry.lookup.{name}", "schema-registry",
                            f"{what}, {conns} connection{'s' if conns > 1 else ''}, {m['client_procs']} client "
                            f"proc{'s' if m['client_procs'] > 1 else ''}", "lookup", m))

        # restart: the time to the first answer, reading _schemas back
        stop_s = broker.stop()
        answered: dict = {}
        t_spawn = time.perf_counter()
        poller = threading.Thread(target=lambda: answered.update(
            t=_wait_answer(port, f"/schemas/ids/{max_id}", 120, 0.005)), daemon=True)
        poller.start()
        kafka_s = broker.start(timeout=120)
        if pin:
            _pin_broker(broker.proc.pid, BROKER_CPU)
        poller.join()
        stats = broker.stats()
        if answered.get("t") is None:
            raise RuntimeError(f"registry not answering after restart:\n{broker.log_tail()}")
        status, body = _call(port, "GET", "/subjects")
        reads = re.findall(r"read at leader epoch \d+: (\d+) subjects, max id (\d+) \(([\d.]+) s\)",
                           broker.log_path.read_text(errors="replace"))
        if reads:
            mem["restart_read_s"] = float(reads[-1][2])  # the registry's own reading of _schemas
        mem.update({"restart_first_answer_s": answered["t"] - t_spawn, "restart_kafka_s": kafka_s,
                    "stop_s": stop_s, "subjects_after_restart": len(json.loads(body)) if status == 200 else None,
                    "rss_after_restart_mb": stats.memory_mb().get("rss_mb")})
        rows.append(row("schema_registry.memory", "schema-registry",
                        f"RSS with {mem['schemas']:,} schemas; restart", "registry-memory", mem))

        conc = _registration(ctx, port, stats, "conc", CONCURRENT_CLIENTS, subjects, client_cpu)
        conc.update(common)
        conc["schemas_before"] = mem["schemas"]
        conc["rss_after_mb"] = stats.memory_mb().get("rss_mb")
        rows.append(row("schema_registry.register.concurrent", "schema-registry",
                        f"register {subjects} more subjects x {VERSIONS} versions, {CONCURRENT_CLIENTS} clients",
                        "registration", conc))
        for r in rows:
            r["metrics"]["load_avg_end"] = os.getloadavg()[0]
    finally:
        broker.stop()
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
    else:
        sys.exit("usage: python -m benchmarks.schema_registry --worker JSON (run by python -m benchmarks "
                 "--only schema-registry)")
