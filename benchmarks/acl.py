"""Owns the `acl` benchmark phase: what ACL authorization costs on the produce and fetch paths.
Two brokers of its own run side by side: one without an authorizer ("off"), one with
`authorizer.class.name=kafka.security.authorizer.AclAuthorizer` and 10,000 ACLs loaded ("on"). The
clients of both are `User:ANONYMOUS` on a PLAINTEXT listener; on "on" that principal is not a super
user, so every request is decided against the ACLs (PREFIXED ALLOWs on `bench-` let it produce,
read, create and delete its topics). The 10,000 ACLs are made through the API (CreateAcls, 2,000
bindings a request, by the super user `admin` over a SASL_PLAINTEXT listener of their own):

- 5,000 LITERAL topic ACLs of 50 other principals, on names like the benchmark's (`svc-...`,
  and 20 on the very topics measured),
- 3,000 PREFIXED topic ACLs, among them prefixes of every length of the measured topics' names
  (`b`, `be`, `ben`, ... for other principals: each decision about those topics scans them), and
  prefixes of 3 to 41 characters of other names (every length is probed),
- 2,000 group ACLs (LITERAL and PREFIXED), the rest of the benchmark's own ALLOWs.

Then, each workload on both brokers:

1. **requests** (the headline): raw pipelined Produce v3 requests of one 1 KiB record each, and
   raw pipelined Fetch v4 requests of one partition (offset 0, ten 1 KiB records in the answer),
   over one connection to each broker, both open, in REQUEST_SLICES slices per broker taken in the
   order off on on off off on ...: the broker's CPU per request, and its ratio on / off;
2. **throughput**: the produce phase's librdkafka run (1 KiB, 1 partition, acks=1) into a fresh
   topic right after prime_page_cache(), then that topic read from the earliest offset, in the
   order off, on, on, off: MB/s and CPU-s/GB;
3. **decision**: in this process, what one check costs the "on" broker's request path
   (api/authorization.permitted over an AclAuthorizerAdapter holding the same 10,000 ACLs, the
   decision cached as it is after a topic's first request, and uncached) next to the "off" path
   (ALLOW_ALL: one identity comparison), set against the broker's CPU per request.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import statistics
import struct
import threading
import time
import timeit
from types import SimpleNamespace

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from benchmarks import clients, kwire
from benchmarks.broker import OwnBroker, free_port
from benchmarks.phases import Ctx, Meter, prime_page_cache, row

SIZE = 1024
ACLS = 10_000
ACL_BATCH = 2_000
REQUEST_SLICES = 20                    # slices of pipelined requests per broker, interleaved
FETCH_RECORDS = 10                     # 1 KiB records in each Fetch answer
ORDER = ("off", "on", "on", "off")     # the throughput runs
ANONYMOUS = "User:ANONYMOUS"
FETCH = 1


# -- the two brokers and the ACLs ----------------------------------------------------------------------
class AclBrokers:
    def __init__(self, ctx: Ctx) -> None:
        self.password = secrets.token_urlsafe(16)
        self.off = OwnBroker(ctx.base, "acl-off", list(ctx.overrides), ctx.log_level)
        self.on = OwnBroker(ctx.base, "acl-on", [], ctx.log_level)
        self.sasl_port = free_port()
        jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                f'password="{self.password}" user_admin="{self.password}";')
        # the last listeners= wins over OwnBroker's own PLAINTEXT-only one (it still probes that port)
        self.on.overrides += [f"listeners=PLAINTEXT://127.0.0.1:{self.on.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                              "sasl.enabled.mechanisms=PLAIN",
                              f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
                              "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                              "super.users=User:admin", *ctx.overrides]
        self.brokers = {"off": self.off, "on": self.on}

    def start(self) -> None:
        for broker in self.brokers.values():
            broker.start()

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": self.password,
                            "log_level": 4})


def acl_bindings(measured: list[str]) -> list[AclBinding]:
    """The benchmark's own ALLOWs, then others up to ACLS bindings in all (see the module's doc)."""
    T, G = ResourceType.TOPIC, ResourceType.GROUP
    L, P = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    Op, A, D = AclOperation, AclPermissionType.ALLOW, AclPermissionType.DENY
    out = [AclBinding(T, "bench-", P, ANONYMOUS, "*", op, A) for op in (Op.WRITE, Op.READ, Op.CREATE, Op.DELETE)]
    out.append(AclBinding(G, "kbroker-bench", L, ANONYMOUS, "*", Op.READ, A))
    ops = (Op.READ, Op.WRITE, Op.DESCRIBE)
    others = [f"User:team{i}" for i in range(50)]
    prefixes = sorted({name[:n] for name in measured for n in range(1, len(name))})
    for name in measured:  # applying to the measured topics: literal ones, and every prefix of them
        out += [AclBinding(T, name, L, others[i], "*", ops[i % 3], A if i % 4 else D) for i in range(20)]
    out += [AclBinding(T, prefix, P, others[len(prefix) % 50], "*", Op.DESCRIBE, A) for prefix in prefixes]
    literal = 5_000 - 20 * len(measured)
    out += [AclBinding(T, f"svc{i % 2000}-orders-{i}", L, others[i % 50], "*", ops[i % 3], A if i % 7 else D)
            for i in range(literal)]
    prefixed = 3_000 - len(prefixes)
    out += [AclBinding(T, f"p{i}-" + "x" * (i % 37), P, others[i % 50], "*", ops[i % 3], A)  # 3 to 41 characters
            for i in range(prefixed)]
    groups = ACLS - len(out)
    out += [AclBinding(G, f"consumers-{i}", L if i % 2 else P, others[i % 50], "*", Op.READ, A)
            for i in range(groups)]
    assert len(out) == ACLS and len(set(out)) == ACLS, (len(out), len(set(out)))
    return out


def load_acls(brokers: AclBrokers, bindings: list[AclBinding]) -> float:
    """CreateAcls in batches of ACL_BATCH; the seconds it took."""
    admin = brokers.admin()
    t0 = time.perf_counter()
    for i in range(0, len(bindings), ACL_BATCH):
        for binding, future in admin.create_acls(bindings[i:i + ACL_BATCH], request_timeout=120).items():
            future.result(120)
    return time.perf_counter() - t0


# -- 1. requests ---------------------------------------------------------------------------------------
def fetch_v4(correlation_id: int, topic: str, max_bytes: int) -> bytes:
    """Fetch v4 of partition 0 from offset 0, as a consumer (no wait: the data is there)."""
    t = topic.encode()
    body = (struct.pack(">iiiib", -1, 0, 1, max_bytes, 0) + struct.pack(">ih", 1, len(t)) + t
            + struct.pack(">iiqi", 1, 0, 0, max_bytes))
    return kwire.request_bytes(FETCH, 4, correlation_id, body)


def _pipelined(sock: socket.socket, frame: bytes, count: int, deadline: float, error_at) -> dict:
    """Send `count` copies of `frame` (correlation ids 1000+) as fast as the socket takes them while a
    thread reads the answers; `error_at(response)` is the answer's error code."""
    frame = bytearray(frame)
    result = {"answered": 0, "errors": 0, "first_error": None, "bytes": 0}

    def read_answers() -> None:
        try:
            for _ in range(count):
                resp = kwire.read_response(sock)
                error = error_at(resp)
                if error:
                    result["errors"] += 1
                    result["first_error"] = result["first_error"] or f"error code {error}"
                result["answered"] += 1
                result["bytes"] += len(resp)
        except OSError as exc:
            result["first_error"] = result["first_error"] or str(exc)

    reader = threading.Thread(target=read_answers, daemon=True)
    t0 = time.perf_counter()
    reader.start()
    sent = 0
    for i in range(count):
        if not i & 255 and time.perf_counter() > deadline:
            break
        struct.pack_into(">i", frame, 8, 1000 + i)
        sock.sendall(frame)
        sent += 1
    reader.join(max(1.0, deadline - time.perf_counter()))
    return {"sent": sent, "seconds": time.perf_counter() - t0, "aborted": sent < count or result["answered"] < sent,
            **result}


def _produce_error(resp: bytes) -> int:
    (name_len,) = struct.unpack_from(">h", resp, 8)
    return struct.unpack_from(">h", resp, 10 + name_len + 8)[0]


def _fetch_error(resp: bytes) -> int:
    # correlation id, throttle, [topic: name, [partition, error, ...]]
    (name_len,) = struct.unpack_from(">h", resp, 12)
    return struct.unpack_from(">h", resp, 14 + name_len + 8)[0]


def _requests_runs(ctx: Ctx, brokers: AclBrokers, topics: dict[str, dict[str, str]]) -> dict[str, dict[str, dict]]:
    """{"produce"|"fetch": {"off"|"on": metrics}}: pipelined requests over one connection to each
    broker, both open, in REQUEST_SLICES slices per broker, in the order off on on off off on ..."""
    per_slice = max(100, ctx.scale.requests * 4 // REQUEST_SLICES)
    batch = kwire.record_batch(1, bytes(SIZE), int(time.time() * 1000))
    out: dict[str, dict[str, dict]] = {}
    for workload in ("produce", "fetch"):
        totals = {mode: {"sent": 0, "answered": 0, "errors": 0, "first_error": None, "seconds": 0.0, "aborted": False,
                         "broker_user_s": 0.0, "broker_sys_s": 0.0, "slices": 0, "us_each": [], "bytes": 0}
                  for mode in brokers.brokers}
        socks = {}
        try:
            for mode, broker in brokers.brokers.items():
                socks[mode] = socket.create_connection(("127.0.0.1", broker.port), timeout=60)
                socks[mode].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            frames = {mode: kwire.produce_v3(0, topics[mode][workload], 0, batch) if workload == "produce"
                      else fetch_v4(0, topics[mode][workload], FETCH_RECORDS * (SIZE + 100))
                      for mode in brokers.brokers}
            error_at = _produce_error if workload == "produce" else _fetch_error
            for mode in brokers.brokers:  # a warm-up slice each: the first requests decide and cache
                _pipelined(socks[mode], frames[mode], 200, ctx.deadline(), error_at)
            deadline = ctx.deadline()
            modes = ("off", "on")
            order = [modes[(i + i // 2) % 2] for i in range(2 * REQUEST_SLICES)]  # off on on off off on on ...
            for mode in order:
                with Meter(brokers.brokers[mode].stats()) as meter:
                    r = _pipelined(socks[mode], frames[mode], per_slice, deadline, error_at)
                t = totals[mode]
                for key in ("sent", "answered", "errors", "seconds", "bytes"):
                    t[key] += r[key]
                t["first_error"] = t["first_error"] or r["first_error"]
                t["aborted"] |= r["aborted"]
                t["broker_user_s"] += meter.broker_utime or 0.0
                t["broker_sys_s"] += meter.broker_stime or 0.0
                t["slices"] += 1
                if r["answered"]:
                    t["us_each"].append((meter.broker_cpu or 0.0) / r["answered"] * 1e6)
                if r["aborted"]:
                    break
        finally:
            for sock in socks.values():
                sock.close()
        runs = {}
        for mode, t in totals.items():
            m = {k: v for k, v in t.items() if k != "us_each"}
            n = t["answered"]
            m.update({"requests_s": n / t["seconds"] if t["seconds"] else None,
                      "mb_s": t["bytes"] / t["seconds"] / 1e6 if t["seconds"] else None,
                      "broker_cpu_s": t["broker_user_s"] + t["broker_sys_s"],
                      "broker_user_us_per_request": t["broker_user_s"] / n * 1e6 if n else None,
                      "broker_sys_us_per_request": t["broker_sys_s"] / n * 1e6 if n else None,
                      "us_per_request_each": ", ".join(f"{x:.0f}" for x in t["us_each"]),
                      "us_per_request_median": statistics.median(t["us_each"]) if t["us_each"] else None,
                      **(brokers.brokers[mode].stats().memory_mb())})
            runs[mode] = m
        cpu = {mode: (runs[mode]["broker_user_us_per_request"] or 0) + (runs[mode]["broker_sys_us_per_request"] or 0)
               for mode in runs}
        if cpu["off"] and cpu["on"]:
            runs["on"]["cpu_ratio_to_authorizer_off"] = cpu["on"] / cpu["off"]
        out[workload] = runs
    return out


# -- 2. throughput ----------------------------------------------------------------------------------
def _throughput(ctx: Ctx, brokers: AclBrokers) -> dict[str, dict[str, list[dict]]]:
    runs: dict[str, dict[str, list[dict]]] = {"produce": {"off": [], "on": []}, "consume": {"off": [], "on": []}}
    for mode in ORDER:
        ctx.check_alive()
        broker = brokers.brokers[mode]
        topic = ctx.new_topic(f"acl-{mode}", 1, bootstrap=broker.bootstrap)
        try:
            prime_page_cache(ctx.base, SIZE * ctx.scale.messages)
            with Meter(broker.stats()) as meter:
                r = clients.produce_run(broker.bootstrap, topic, 1, SIZE, ctx.scale.messages, "1", ctx.deadline())
            runs["produce"][mode].append({**r, **meter.metrics(r["bytes"])})
            with Meter(broker.stats()) as meter:
                r = clients.consume_run(broker.bootstrap, topic, 1, ctx.deadline())
            runs["consume"][mode].append({**r, **meter.metrics(r["bytes"])})
        finally:
            clients.delete_topics(broker.bootstrap, [topic])
    return runs


def _merged(runs: list[dict]) -> dict:
    out = dict(runs[0])
    for key in ("messages", "bytes", "seconds", "broker_cpu_s", "broker_user_s", "broker_sys_s", "client_cpu_s"):
        vals = [r.get(key) for r in runs]
        out[key] = None if any(v is None for v in vals) else sum(vals)
    out["errors"] = sum(r.get("errors") or 0 for r in runs)
    out["aborted"] = any(r.get("aborted") for r in runs)
    if out["seconds"]:
        out["msgs_s"], out["mb_s"] = out["messages"] / out["seconds"], out["bytes"] / out["seconds"] / 1e6
    if out["broker_cpu_s"] is not None and out["bytes"]:
        out["cpu_s_per_gb"] = out["broker_cpu_s"] / (out["bytes"] / 1e9)
    out["mb_s_each"] = ", ".join(f"{r['mb_s']:.0f}" for r in runs if r.get("mb_s"))
    return out


# -- 3. one decision ---------------------------------------------------------------------------------
def _decision_row(bindings: list[AclBinding], topic: str, request_us: float | None) -> dict:
    from kbroker.api.authorization import ALLOW_ALL, AclAuthorizerAdapter, permitted
    from kbroker.api.context import RequestContext
    from kbroker.security import acl as kacl
    from kbroker.security.audit import DenialAudit
    from kbroker.security.authorizer import AclAuthorizer
    from kbroker.security.principal import ANONYMOUS as PRINCIPAL
    from kbroker.wire.protocol import RequestHeader

    # confluent-kafka's enums carry Kafka's codes (its BROKER is Kafka's CLUSTER, 4)
    ours = [kacl.AclBinding(kacl.ResourcePattern(kacl.ResourceType(b.restype.value), b.name,
                                                 kacl.PatternType(b.resource_pattern_type.value)),
                            kacl.AccessControlEntry(b.principal, b.host, kacl.AclOperation(b.operation.value),
                                                    kacl.AclPermissionType(b.permission_type.value)))
            for b in bindings]
    adapter = AclAuthorizerAdapter(AclAuthorizer(ours, {"User:admin"}), DenialAudit(lambda line: None))
    session = SimpleNamespace(principal=PRINCIPAL)
    header = RequestHeader(0, 9, 1, "bench", True)
    on = RequestContext(header, SimpleNamespace(authorizer=adapter), "127.0.0.1", session)
    off = RequestContext(header, SimpleNamespace(authorizer=ALLOW_ALL), "127.0.0.1", session)
    write, rtype = kacl.AclOperation.WRITE, kacl.ResourceType.TOPIC
    assert permitted(on, write, rtype, topic) and not permitted(on, write, rtype, "elsewhere")

    def best_ns(fn, n: int) -> float:
        return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e9

    cached = best_ns(lambda: permitted(on, write, rtype, topic), 200_000)
    allow_all = best_ns(lambda: permitted(off, write, rtype, topic), 200_000)
    decide = adapter.acl_authorizer._uncached  # what a first request (or one after an ACL change) pays
    uncached = best_ns(lambda: decide(ANONYMOUS, "127.0.0.1", write, rtype, topic), 20_000)
    m = {"cached_ns": cached, "allow_all_ns": allow_all, "uncached_ns": uncached, "counting_ns": cached - allow_all,
         "request_us": request_us,
         "share_of_request": (cached - allow_all) / 1000 / request_us if request_us else None}
    return row("acl.decision", "acl", "one check (Produce's WRITE on the topic) on the request path", "acl-decision", m)


# -- the phase ---------------------------------------------------------------------------------------
def phase_acl(ctx: Ctx) -> list[dict]:
    brokers = AclBrokers(ctx)
    ctx.side_brokers.extend(brokers.brokers.values())
    rows = []
    try:
        brokers.start()
        measured = {mode: {w: f"bench-{ctx.run_id}-acl-{w}" for w in ("produce", "fetch")} for mode in brokers.brokers}
        bindings = acl_bindings(list(measured["on"].values()))
        load_s = load_acls(brokers, bindings)
        admin = brokers.admin()  # referenced until its futures are done
        listed = len(admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY)).result(60))
        ctx.notes.append(f"acl: {listed:,} ACLs loaded on the 'on' broker in {load_s:.1f} s "
                         f"({ACL_BATCH:,} bindings per CreateAcls request)")
        for mode, broker in brokers.brokers.items():
            clients.create_topics(broker.bootstrap, [(t, 1, {}) for t in measured[mode].values()])
            clients.produce_run(broker.bootstrap, measured[mode]["fetch"], 1, SIZE, FETCH_RECORDS, "1", ctx.deadline())
        req = _requests_runs(ctx, brokers, measured)
        labels = {"produce": "Produce 1 x 1 KiB per request, pipelined",
                  "fetch": f"Fetch of {FETCH_RECORDS} x 1 KiB per request, pipelined"}
        for workload in ("produce", "fetch"):
            for mode in ("off", "on"):
                label = "authorizer off" if mode == "off" else f"AclAuthorizer, {ACLS:,} ACLs"
                rows.append(row(f"acl.{workload}.{mode}", "acl", f"{labels[workload]}, {label}", "requests",
                                req[workload][mode]))
        tp = _throughput(ctx, brokers)
        for workload, what in (("produce", f"{ctx.scale.messages:,} x 1 KiB, 1 part, acks=1"),
                               ("consume", "1 KiB, 1 part, from earliest")):
            merged = {mode: _merged(tp[workload][mode]) for mode in ("off", "on")}
            if merged["off"].get("mb_s") and merged["on"].get("mb_s"):
                merged["on"]["ratio_to_authorizer_off"] = merged["on"]["mb_s"] / merged["off"]["mb_s"]
            if merged["off"].get("cpu_s_per_gb") and merged["on"].get("cpu_s_per_gb") is not None:
                merged["on"]["cpu_ratio_to_authorizer_off"] = \
                    merged["on"]["cpu_s_per_gb"] / merged["off"]["cpu_s_per_gb"]
            for mode in ("off", "on"):
                label = "authorizer off" if mode == "off" else f"AclAuthorizer, {ACLS:,} ACLs"
                rows.append(row(f"acl.{workload}-run.{mode}", "acl", f"{what}, {label}", "throughput", merged[mode]))
        off = req["produce"]["off"]
        request_us = (off.get("broker_user_us_per_request") or 0) + (off.get("broker_sys_us_per_request") or 0)
        rows.append(_decision_row(bindings, measured["on"]["produce"], request_us or None))
    finally:
        for broker in brokers.brokers.values():
            broker.stop()
            shutil.rmtree(broker.data, ignore_errors=True)
    return rows
