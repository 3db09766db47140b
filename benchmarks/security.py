"""Owns the `security` benchmark phase: what connection security (TLS, SASL) costs. One kbroker of
its own serves four listeners — PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (SCRAM-SHA-512) — with
a CA and broker certificate made for the run with `trustme` (RSA 2048, as Kafka's documented
`keytool -genkey -keyalg RSA` setup; ssl.keystore.type=PEM), and one SCRAM-SHA-512 user created
through the PLAINTEXT listener with confluent-kafka's AdminClient.alter_user_scram_credentials
(4096 iterations, Kafka's default). Then:

1. **Throughput** over PLAINTEXT, SSL and SASL_SSL: the produce phase's librdkafka run (1 KiB
   records, one partition, acks=1, linger.ms=5, ~1 MB batches; 1,000,000 records by default, the
   issue's Kafka 3.8 workload) into a fresh topic right after prime_page_cache(), then that topic
   read back from the earliest offset (the consume phase's consumer) over the same listener, then
   deleted. The three listeners' order rotates from one repeat to the next. MB/s and the broker's
   CPU-s/GB, the TLS rows also as a ratio of the plaintext ones of the same repeat. The clients are
   clients.produce_run / consume_run unchanged; only their librdkafka settings gain the listener's
   security keys (`_secured`).
2. **SCRAM-SHA-512 authentications**: client processes each open connection after connection for
   a fixed time, each doing ApiVersions, SaslHandshake v1 and the two SaslAuthenticate v1 round
   trips of the SCRAM exchange (kbroker.security.scram.ScramClient on a raw socket), checking the
   server's signature, and closing. Over SASL_PLAINTEXT (no TLS handshake in the way) twice: with
   AUTH_CLIENTS processes doing the client's PBKDF2 on every login, as Kafka's and librdkafka's
   clients do, and with AUTH_CLIENTS_CACHED processes whose salted password is cached, so that the
   clients can outrun the broker; and over SASL_SSL (a full TLS handshake per connection, no session
   resumption). The broker's CPU-seconds per authentication and its inverse, authentications per
   second per broker core. (PBKDF2 is the client's work only: the broker keeps the stored and server
   keys, and checks a proof with a few HMACs and a hash.)
3. **The produce path of an authenticated connection**: raw pipelined Produce v3 requests of one
   1 KiB record each (the requests phase's encoder, benchmarks/kwire.py) into a one-partition topic,
   over a PLAINTEXT connection and over a SASL_PLAINTEXT one authenticated first, both open, in
   REQUEST_SLICES slices each, interleaved P S S P P S S P ...; the broker's CPU per request.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import multiprocessing
import secrets
import shutil
import socket
import ssl
import struct
import time

import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from benchmarks import clients, kwire
from benchmarks.broker import OwnBroker, free_port
from benchmarks.phases import Ctx, Meter, prime_page_cache, row

SIZE = 1024
MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096                      # Kafka's default (and minimum) for SCRAM credentials
USER = "bench"
AUTH_CLIENTS = 3                       # client processes of the authentication runs (PBKDF2 per login)
AUTH_CLIENTS_CACHED = 8                # ... with the client's salted password cached (cheap clients)
REQUEST_SLICES = 10                    # slices of pipelined requests per listener, interleaved
THROUGHPUT = ("plaintext", "ssl", "sasl_ssl")
PROTOCOL = {"plaintext": "PLAINTEXT", "ssl": "SSL", "sasl_plaintext": "SASL_PLAINTEXT", "sasl_ssl": "SASL_SSL"}
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_rounds = itertools.count()            # invocations of the phase (the listeners' order rotates)


class SecureBroker:
    """A harness-started kbroker with the four listeners, its certificates and SCRAM user."""

    def __init__(self, ctx: Ctx) -> None:
        self.broker = OwnBroker(ctx.base, "security", [], ctx.log_level)
        self.dir = self.broker.dir
        self.dir.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(key_type=trustme.KeyType.RSA)
        cert = ca.issue_cert("127.0.0.1", "localhost", key_type=trustme.KeyType.RSA)
        self.ca_file = self.dir / "ca.pem"
        self.ca_file.write_bytes(ca.cert_pem.bytes())
        keystore = self.dir / "broker.pem"  # the key and the certificate chain, PEM
        keystore.touch(mode=0o600)
        keystore.write_bytes(cert.private_key_and_cert_chain_pem.bytes())
        self.password = secrets.token_urlsafe(16)
        self.ports = {"plaintext": self.broker.port, **{name: free_port() for name in PROTOCOL if name != "plaintext"}}
        listeners = ",".join(f"{PROTOCOL[name]}://127.0.0.1:{port}" for name, port in self.ports.items())
        # the last listeners= wins over OwnBroker's own PLAINTEXT-only one (it still probes that port)
        self.broker.overrides += [f"listeners={listeners}", "ssl.keystore.type=PEM",
                                  f"ssl.keystore.location={keystore}", f"sasl.enabled.mechanisms={MECHANISM}",
                                  *ctx.overrides]

    def start(self) -> None:
        self.broker.start()
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap, "log_level": 4})
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS), self.password.encode())])
        for fut in futures.values():
            fut.result(timeout=30)

    def bootstrap(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def client_config(self, name: str) -> dict:
        """librdkafka's settings for the listener `name`."""
        conf: dict = {"security.protocol": PROTOCOL[name]}
        if name in ("ssl", "sasl_ssl"):
            conf["ssl.ca.location"] = str(self.ca_file)  # host name checked (https): the SAN is 127.0.0.1
        if name.startswith("sasl"):
            conf.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": self.password})
        return conf


@contextlib.contextmanager
def _secured(conf: dict):
    """clients.produce_run / consume_run with `conf` added to every librdkafka client they make."""
    producer, consumer = clients.Producer, clients.Consumer
    clients.Producer = lambda c: producer({**c, **conf})
    clients.Consumer = lambda c: consumer({**c, **conf})
    try:
        yield
    finally:
        clients.Producer, clients.Consumer = producer, consumer


# -- 1. throughput ---------------------------------------------------------------------------------
def _throughput(ctx: Ctx, sb: SecureBroker, order: list[str]) -> dict[str, dict[str, dict]]:
    """{"produce"|"consume": {listener: metrics}} for each listener of `order`, in that order."""
    count = ctx.scale.security_messages
    stats = sb.broker.stats()
    out: dict[str, dict[str, dict]] = {"produce": {}, "consume": {}}
    for name in order:
        ctx.check_alive()
        topic = ctx.new_topic(f"security-{name}", 1, bootstrap=sb.broker.bootstrap)
        try:
            with _secured(sb.client_config(name)):
                prime_page_cache(ctx.base, SIZE * count)
                with Meter(stats) as meter:
                    r = clients.produce_run(sb.bootstrap(name), topic, 1, SIZE, count, "1", ctx.deadline())
                out["produce"][name] = {**r, **meter.metrics(r["bytes"]), "position": order.index(name)}
                with Meter(stats) as meter:
                    r = clients.consume_run(sb.bootstrap(name), topic, 1, ctx.deadline())
                out["consume"][name] = {**r, **meter.metrics(r["bytes"]), "position": order.index(name)}
        finally:
            clients.delete_topics(sb.broker.bootstrap, [topic])
        if not sb.broker.alive():
            raise RuntimeError(f"security broker died:\n{sb.broker.log_tail()}")
    for runs in out.values():
        plain = runs.get("plaintext", {})
        for name in ("ssl", "sasl_ssl"):
            m = runs.get(name)
            if m is None:
                continue
            if plain.get("mb_s") and m.get("mb_s"):
                m["ratio_to_plaintext"] = m["mb_s"] / plain["mb_s"]
            if plain.get("cpu_s_per_gb") and m.get("cpu_s_per_gb") is not None:
                m["cpu_ratio_to_plaintext"] = m["cpu_s_per_gb"] / plain["cpu_s_per_gb"]
                m["extra_cpu_s_per_gb"] = m["cpu_s_per_gb"] - plain["cpu_s_per_gb"]
    return out


# -- 2. authentications ----------------------------------------------------------------------------
def _request(sock: socket.socket, api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    sock.sendall(kwire.request_bytes(api_key, version, correlation_id, body))
    resp = kwire.read_response(sock)
    if struct.unpack_from(">i", resp)[0] != correlation_id:
        raise ConnectionError(f"api {api_key}: wrong correlation id")
    return resp[4:]


def _sasl_authenticate(sock: socket.socket, correlation_id: int, token: bytes) -> bytes:
    """SaslAuthenticate v1: the broker's token; ConnectionError with its message on an error."""
    resp = _request(sock, SASL_AUTHENTICATE, 1, correlation_id, struct.pack(">i", len(token)) + token)
    error, msg_len = struct.unpack_from(">hh", resp)
    off = 4 + max(msg_len, 0)
    if error:
        raise ConnectionError(f"SaslAuthenticate error {error}: {resp[4:off].decode(errors='replace')}")
    (n,) = struct.unpack_from(">i", resp, off)
    return resp[off + 4:off + 4 + n]


def scram_login(sock: socket.socket, username: str, password: str, scram_client) -> None:
    """ApiVersions v0, SaslHandshake v1 and the SCRAM exchange on a connected socket."""
    if kwire.api_versions(sock, 1) != 0:
        raise ConnectionError("ApiVersions error")
    mech = MECHANISM.encode()
    resp = _request(sock, SASL_HANDSHAKE, 1, 2, struct.pack(">h", len(mech)) + mech)
    if struct.unpack_from(">h", resp)[0]:
        raise ConnectionError(f"SaslHandshake error {struct.unpack_from('>h', resp)[0]}")
    client = scram_client(MECHANISM, username, password)
    server_first = _sasl_authenticate(sock, 3, client.first_message())
    server_final = _sasl_authenticate(sock, 4, client.final_message(server_first))
    client.verify_server_final(server_final)


def _auth_worker(port: int, ca_file: str | None, username: str, password: str, cache_client_key: bool,
                 seconds: float, ready, go, results) -> None:
    """Child process: log in over and over for `seconds` once `go` is set; put (logins, failures,
    first error, seconds, own CPU seconds) on `results`."""
    import os

    from kbroker.security import scram

    if cache_client_key:  # the client's PBKDF2 once per (password, salt) instead of once per login
        scram.salted_password = functools.lru_cache(maxsize=8)(scram.salted_password)
    tls = ssl.create_default_context(cafile=ca_file) if ca_file else None
    ready.release()
    go.wait()
    count = failures = 0
    first_error = None
    cpu0 = os.times()
    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock = tls.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
                try:
                    scram_login(sock, username, password, scram.ScramClient)
                finally:
                    if tls:
                        sock.close()
            count += 1
        except (OSError, ValueError, scram.SaslAuthenticationError) as exc:
            failures += 1
            first_error = first_error or repr(exc)
            if failures >= 100:
                break
    cpu1 = os.times()
    results.put((count, failures, first_error, time.perf_counter() - t0,
                 cpu1.user + cpu1.system - cpu0.user - cpu0.system))


def _auth_run(ctx: Ctx, sb: SecureBroker, name: str, cache_client_key: bool) -> dict:
    mp = multiprocessing.get_context("spawn")  # no fork of a process running librdkafka threads
    ready, go, results = mp.Semaphore(0), mp.Event(), mp.Queue()
    ca_file = str(sb.ca_file) if name == "sasl_ssl" else None
    seconds = min(ctx.scale.auth_seconds, ctx.max_seconds)
    nclients = AUTH_CLIENTS_CACHED if cache_client_key else AUTH_CLIENTS
    procs = [mp.Process(target=_auth_worker, args=(sb.ports[name], ca_file, USER, sb.password, cache_client_key,
                                                   seconds, ready, go, results), daemon=True, name=f"auth-{i}")
             for i in range(nclients)]
    for p in procs:
        p.start()
    out = []
    try:
        for _ in procs:
            if not ready.acquire(timeout=60):
                raise TimeoutError("authentication clients did not start within 60 s")
        with Meter(sb.broker.stats()) as meter:
            go.set()
            for _ in procs:
                out.append(results.get(timeout=seconds + 60))
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    logins = sum(r[0] for r in out)
    m = {"clients": nclients, "auths": logins, "seconds": max(r[3] for r in out),
         "errors": sum(r[1] for r in out), "first_error": next((r[2] for r in out if r[2]), None),
         "client_cpu_s": sum(r[4] for r in out), "client_key_cached": cache_client_key,
         **{k: v for k, v in meter.metrics().items() if k != "client_cpu_s"}}
    m["auths_s"] = logins / m["seconds"] if m["seconds"] else None
    if logins and meter.broker_cpu:
        m["broker_ms_per_auth"] = meter.broker_cpu / logins * 1000
        m["auths_per_core_s"] = logins / meter.broker_cpu
        m["client_ms_per_auth"] = m["client_cpu_s"] / logins * 1000
    return m


# -- 3. the produce path of an authenticated connection ---------------------------------------------
def _requests_runs(ctx: Ctx, sb: SecureBroker) -> dict[str, dict]:
    """Pipelined one-record Produce requests over a PLAINTEXT connection and over a SASL_PLAINTEXT
    one authenticated first, both open throughout, in REQUEST_SLICES slices per listener taken in
    the order P S S P P S S P ...: a change in the machine's load hits both alike. The broker's CPU
    per request of each listener over all its slices."""
    from kbroker.security.scram import ScramClient

    per_slice = max(100, ctx.scale.requests * 4 // REQUEST_SLICES)
    batch = kwire.record_batch(1, bytes(SIZE), int(time.time() * 1000))
    names = ("plaintext", "sasl_plaintext")
    topics = {name: ctx.new_topic(f"security-req-{name}", 1, bootstrap=sb.broker.bootstrap) for name in names}
    totals = {name: {"sent": 0, "answered": 0, "errors": 0, "first_error": None, "seconds": 0.0, "aborted": False,
                     "broker_user_s": 0.0, "broker_sys_s": 0.0, "slices": 0, "us_each": []} for name in names}
    stats = sb.broker.stats()
    socks = {}
    try:
        for name in names:
            socks[name] = socket.create_connection(("127.0.0.1", sb.ports[name]), timeout=60)
            socks[name].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        scram_login(socks["sasl_plaintext"], USER, sb.password, ScramClient)  # before anything is measured
        deadline = ctx.deadline()
        order = [names[(i + i // 2) % 2] for i in range(2 * REQUEST_SLICES)]  # P S S P P S S P ...
        for name in order:
            with Meter(stats) as meter:
                r = kwire.produce_pipelined_on(socks[name], topics[name], 1, batch, per_slice, deadline)
            t = totals[name]
            for key in ("sent", "answered", "errors", "seconds"):
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
        clients.delete_topics(sb.broker.bootstrap, list(topics.values()))
    out = {}
    for name, t in totals.items():
        m = {k: v for k, v in t.items() if k != "us_each"}
        n = t["answered"]
        m.update({"requests_s": n / t["seconds"] if t["seconds"] else None,
                  "mb_s": n * SIZE / t["seconds"] / 1e6 if t["seconds"] else None,
                  "broker_cpu_s": t["broker_user_s"] + t["broker_sys_s"],
                  "broker_user_us_per_request": t["broker_user_s"] / n * 1e6 if n else None,
                  "broker_sys_us_per_request": t["broker_sys_s"] / n * 1e6 if n else None,
                  "us_per_request_each": ", ".join(f"{x:.0f}" for x in t["us_each"]),
                  **stats.memory_mb()})
        out[name] = m
    return out


# -- the phase --------------------------------------------------------------------------------------
def phase_security(ctx: Ctx) -> list[dict]:
    sb = SecureBroker(ctx)
    ctx.side_brokers.append(sb.broker)
    turn = next(_rounds) % len(THROUGHPUT)
    order = list(THROUGHPUT[turn:] + THROUGHPUT[:turn])
    rows = []
    try:
        sb.start()
        # 1. throughput over PLAINTEXT, SSL, SASL_SSL
        tp = _throughput(ctx, sb, order)
        n = ctx.scale.security_messages
        for workload, what in (("produce", f"{n:,} x 1 KiB, 1 part, acks=1"),
                               ("consume", "1 KiB, 1 part, from earliest")):
            for name in THROUGHPUT:
                label = {"plaintext": "PLAINTEXT", "ssl": "SSL", "sasl_ssl": f"SASL_SSL ({MECHANISM})"}[name]
                rows.append(row(f"security.{workload}.{name}", "security", f"{what}, {label}", "throughput",
                                tp[workload][name]))
        extra = {w: {name: tp[w][name].get("extra_cpu_s_per_gb") for name in ("ssl", "sasl_ssl")} for w in tp}
        fmt = lambda v: "-" if v is None else f"{v:+.2f}"
        ctx.notes.append(
            f"security (order {'/'.join(order)}): TLS costs the broker {fmt(extra['produce']['ssl'])} CPU-s/GB "
            f"producing and {fmt(extra['consume']['ssl'])} consuming over plaintext (SASL_SSL "
            f"{fmt(extra['produce']['sasl_ssl'])} / {fmt(extra['consume']['sasl_ssl'])}); TLS listeners lose "
            f"zero-copy: Fetch file ranges are pread into memory and encrypted by OpenSSL in user space instead "
            f"of sendfile (no kernel TLS: Python 3.11's ssl has no KTLS option and /sys/module/tls is absent)")
        # 2. SCRAM-SHA-512 authentications
        for name, cached, key, label in (
                ("sasl_plaintext", False, "sasl_plaintext", "SASL_PLAINTEXT"),
                ("sasl_plaintext", True, "sasl_plaintext.cached", "SASL_PLAINTEXT, client key cached"),
                ("sasl_ssl", False, "sasl_ssl", "SASL_SSL, TLS handshake each")):
            ctx.check_alive()
            rows.append(row(f"security.auth.{key}", "security", f"{MECHANISM} logins, {label}", "auth",
                            _auth_run(ctx, sb, name, cached)))
        # 3. the produce path of an authenticated connection
        ctx.check_alive()
        merged = _requests_runs(ctx, sb)
        cpu = {name: (m.get("broker_user_us_per_request") or 0) + (m.get("broker_sys_us_per_request") or 0)
               for name, m in merged.items()}
        if cpu["plaintext"] and cpu["sasl_plaintext"]:
            merged["sasl_plaintext"]["cpu_ratio_to_plaintext"] = cpu["sasl_plaintext"] / cpu["plaintext"]
        for name, label in (("plaintext", "PLAINTEXT"), ("sasl_plaintext", f"SASL_PLAINTEXT, after {MECHANISM}")):
            rows.append(row(f"security.requests.{name}", "security",
                            f"Produce 1 x 1 KiB pipelined, {label}", "requests", merged[name]))
    finally:
        sb.broker.stop()
        shutil.rmtree(sb.broker.data, ignore_errors=True)
    return rows
