"""KafkaJS 2.2.4 (Node.js) as a client family of the compat suite: the Python side of
`kafkajs/harness.js`, written to the interfaces the other families already have, so scenarios are
written once:

- `Harness` (`harness(kt, dir)`; each test module's `kafkajs` fixture): runs `node
  kafkajs/harness.js <command>` and parses its JSON lines; `admin(...)` makes KafkaJS admin calls (KafkaJS's own argument objects) and answers
  KafkaJS's results or its error objects (name, KafkaJS `type` = Kafka's error name, code, causes).
- `KafkaJSClient`: a `securitykit.Adapter` (produce with acknowledgements, consume by assignment,
  consume in a group), translating a `securitykit.SecurityConfig` into KafkaJS's `ssl` / `sasl`.
- group members for `groupkit.Member` (`member_argv`), transactional producers for
  `txnkit.TxnProducer` (`txn_producer`), and a reader returning `txnkit.ReadResult` (`txn_read`).
- So that existing scenario modules take KafkaJS as one more family without a copy, importing this
  module registers it with the shared kits: `securitykit.ADAPTERS["kafkajs"]` and
  `txnkit.FENCED["kafkajs"]`; `Producers` / `read` start KafkaJS or any txnkit family.

KafkaJS differences the checks account for (compat-tests/FINDINGS.md, "KafkaJS"):
- headers are a JavaScript object: a repeated key's values travel together (`kafkajs_headers`);
- there is no assign(): "consume by assignment" is a group of its own with a fixed assigner that
  never commits (harness `consume`);
- codecs: none and gzip built in, snappy through kafkajs-snappy (pure JavaScript); LZ4 and ZSTD only
  through native add-ons, not installed (`CODECS`).

Node and the package: `node` on PATH (Debian's `nodejs`, or the machine's), and
`compat-tests/kafkajs/node_modules` made by `npm ci` from the committed lock file (`.ci/run` does
both). Missing either: a skip, a failure under CI=true (conftest `require`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import struct
import subprocess
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import securitykit as sk
import txnkit as tk

HERE = Path(__file__).resolve().parent
PACKAGE_DIR = HERE / "kafkajs"
HARNESS = PACKAGE_DIR / "harness.js"
VERSION = "2.2.4"
# KafkaJS 2.2.4: gzip is built in, snappy comes from kafkajs-snappy (installed); LZ4 and ZSTD need
# kafkajs-lz4 / @kafkajs/zstd, native node-gyp add-ons (FINDINGS.md): not installed, not tested.
CODECS = ("none", "gzip", "snappy")
# KafkaJS's error types (Kafka's error names) for a producer fenced by a newer one with its id
FENCED = {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}
CALL_TIMEOUT_S = 120


class HarnessError(AssertionError):
    pass


class Harness:
    """`node harness.js ...` runs; env: KAFKAJS_LOG_LEVEL (debug for evidence), KBROKER_KAFKAJS_*."""

    def __init__(self, node: str, workdir: Path):
        self.node = node
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)

    def argv(self, *args: str) -> list[str]:
        return [self.node, str(HARNESS), *map(str, args)]

    def env(self, sec: sk.SecurityConfig | None = None, **extra: str) -> dict[str, str]:
        env = {**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1", **extra}
        if sec is not None and sec.protocol != "PLAINTEXT":
            env["KBROKER_KAFKAJS_SECURITY"] = json.dumps(security_json(sec))
        return env

    def run(self, *args: str, stdin: str | None = None, timeout: float = CALL_TIMEOUT_S,
            sec: sk.SecurityConfig | None = None, **env: str) -> tuple[list[dict], str]:
        """(JSON lines of stdout, stderr); a non-zero exit is a HarnessError with KafkaJS's error."""
        stderr_path = self.workdir / f"kafkajs-{args[0]}-{uuid.uuid4().hex[:6]}.stderr.log"
        with open(stderr_path, "w+") as err:
            try:
                cp = subprocess.run(self.argv(*args), check=False, input=stdin, stdout=subprocess.PIPE, stderr=err, text=True,
                                    timeout=timeout, env=self.env(sec, **env), cwd=str(PACKAGE_DIR))
            except subprocess.TimeoutExpired as e:
                err.seek(0)
                raise HarnessError(f"kafkajs harness {' '.join(map(str, args[:3]))} did not finish in {timeout} s\n"
                                   f"--- stderr tail ---\n{_tail(err.read())}") from e
            err.seek(0)
            stderr = err.read()
        events = []
        for line in cp.stdout.splitlines():
            if line.startswith("{"):
                events.append(json.loads(line))
        if cp.returncode != 0:
            failure = [e for e in events if e.get("event") == "error"]
            raise HarnessError(f"kafkajs harness {' '.join(map(str, args[:3]))} failed (exit {cp.returncode}): "
                               f"{json.dumps(failure[0]) if failure else '(no error line)'}\n"
                               f"--- stderr ({stderr_path}) tail ---\n{_tail(stderr)}")
        return events, stderr

    def events(self, *args: str, **kw: Any) -> list[dict]:
        return self.run(*args, **kw)[0]

    # -- admin ----------------------------------------------------------------------------------
    def admin(self, bootstrap: str, *calls: tuple[str, list], retries: int | None = None,
              sec: sk.SecurityConfig | None = None, timeout: float = CALL_TIMEOUT_S) -> list[dict]:
        """KafkaJS admin calls, in one process: `calls` are (method, [arguments]); one answer each:
        {"op", "ok": true, "result"} or {"op", "ok": false, "error": {name, type, code, ...}}.
        `retries`: KafkaJS's retries (its own retry of retriable errors), fewer for expected errors."""
        stdin = "".join(json.dumps({"op": op, "args": args}) + "\n" for op, args in calls)
        env = {} if retries is None else {"KBROKER_KAFKAJS_RETRIES": str(retries)}
        answers = self.events("admin", bootstrap, stdin=stdin, sec=sec, timeout=timeout, **env)
        assert len(answers) == len(calls), f"{len(answers)} answers to {len(calls)} admin calls: {answers}"
        return answers

    def admin_ok(self, bootstrap: str, op: str, *args: Any, **kw: Any) -> Any:
        [answer] = self.admin(bootstrap, (op, list(args)), **kw)
        assert answer["ok"], f"KafkaJS admin.{op}({json.dumps(list(args))[:300]}) failed: {answer['error']}"
        return answer["result"]

    def admin_error(self, bootstrap: str, op: str, *args: Any, retries: int = 1, **kw: Any) -> dict:
        [answer] = self.admin(bootstrap, (op, list(args)), retries=retries, **kw)
        assert not answer["ok"], f"KafkaJS admin.{op}({json.dumps(list(args))[:300]}) succeeded: {answer['result']}"
        return answer["error"]

    def create_topic(self, bootstrap: str, topic: str, partitions: int = 3, replication_factor: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        spec: dict[str, Any] = {"topic": topic, "numPartitions": partitions, "replicationFactor": replication_factor}
        if configs:
            spec["configEntries"] = [{"name": k, "value": v} for k, v in configs.items()]
        assert self.admin_ok(bootstrap, "createTopics", {"topics": [spec]}) is True, f"{topic} already existed"

    def partitions(self, bootstrap: str, topic: str) -> dict[int, dict]:
        """fetchTopicMetadata: partition -> {leader, replicas, isr}."""
        result = self.admin_ok(bootstrap, "fetchTopicMetadata", {"topics": [topic]})
        [t] = result["topics"]
        return {p["partitionId"]: {"leader": p["leader"], "replicas": p["replicas"], "isr": p["isr"]}
                for p in t["partitions"]}

    def committed(self, bootstrap: str, group: str, topic: str) -> dict[int, int]:
        """admin.fetchOffsets (OffsetFetch): the group's committed offsets, partitions with one only."""
        [t] = self.admin_ok(bootstrap, "fetchOffsets", {"groupId": group, "topics": [topic]})
        return {p["partition"]: int(p["offset"]) for p in t["partitions"] if int(p["offset"]) >= 0}


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def harness(kt, workdir: Path) -> Harness:
    """Node and the KafkaJS package, or a skip (a failure under CI=true)."""
    node = kt.require_exe("node")
    installed = PACKAGE_DIR / "node_modules" / "kafkajs" / "package.json"
    kt.require(installed.is_file(), f"KafkaJS is not installed: run `npm ci` in {PACKAGE_DIR} (.ci/run does)")
    version = json.loads(installed.read_text())["version"]
    kt.require(version == VERSION, f"KafkaJS {version} installed in {PACKAGE_DIR}, {VERSION} expected: npm ci")
    h = Harness(node, workdir)
    [v] = h.events("version", timeout=60)
    assert v["kafkajs"] == VERSION, v
    return h


# --------------------------------------------------------------------------------------------
# records


def kafkajs_headers(headers: Iterable[tuple[str, bytes]]) -> tuple[tuple[str, bytes], ...]:
    """Headers as KafkaJS carries them (a JavaScript object): keys in first-appearance order, a
    repeated key's values together in their order. (h-idx, h-bin, h-empty, h-idx) -> (h-idx, h-idx,
    h-bin, h-empty), whether KafkaJS writes them or reads what another client wrote."""
    grouped: dict[str, list[bytes]] = {}
    for k, v in headers:
        grouped.setdefault(k, []).append(v)
    return tuple((k, v) for k, vs in grouped.items() for v in vs)


def as_kafkajs(messages: list) -> list:
    """Messages with their headers as KafkaJS writes and reads them."""
    return [dataclasses.replace(m, headers=kafkajs_headers(m.headers)) for m in messages]


def produce_lines(kt, messages: list) -> str:
    return "".join(json.dumps({"partition": m.partition, "timestamp": m.timestamp,
                               "key": None if m.key is None else kt.b64(m.key),
                               "value": None if m.value is None else kt.b64(m.value),
                               "headers": [[k, kt.b64(v)] for k, v in m.headers]}) + "\n" for m in messages)


def _dec(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def to_rec(kt, e: dict):
    return kt.Rec(e["partition"], e["offset"], _dec(e["key"]), _dec(e["value"]),
                  tuple((k, _dec(v)) for k, v in e["headers"]), e["timestamp"])


@dataclasses.dataclass(frozen=True)
class Batch:
    base_offset: int
    records: int
    codec: str
    transactional: bool
    control: bool
    producer_id: int
    producer_epoch: int
    base_sequence: int


CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def log_batches(data_dir: Path, topic: str, partition: int) -> list[Batch]:
    """The record batch headers (magic 2) of one partition's log files, read by hand, in offset order:
    what the client's batches became on disk."""
    out = []
    for segment in sorted((Path(data_dir) / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            magic = data[pos + 16]
            assert magic == 2, f"{segment}: magic {magic} at {pos}"
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            producer_id, epoch, sequence, count = struct.unpack_from(">qhii", data, pos + 43)
            out.append(Batch(base_offset, count, CODEC_NAMES.get(attributes & 7, str(attributes & 7)),
                             bool(attributes & 0x10), bool(attributes & 0x20), producer_id, epoch, sequence))
            pos += 12 + length
    return out


# --------------------------------------------------------------------------------------------
# the adapter (securitykit's interface)


def security_json(sec: sk.SecurityConfig) -> dict:
    out: dict[str, Any] = {"ssl": None, "sasl": None}
    if sec.tls:
        out["ssl"] = {"ca": str(sec.ca), "cert": str(sec.client_cert) if sec.client_cert else None,
                      "key": str(sec.client_key) if sec.client_key else None}
    if sec.sasl:
        out["sasl"] = {"mechanism": sec.mechanism, "username": sec.username, "password": sec.password,
                       "token": sec.token() if sec.mechanism == "OAUTHBEARER" else None}
    return out


class KafkaJSClient(sk.Adapter):
    """KafkaJS through the harness, one process per call."""

    family = "kafkajs"

    def __init__(self, sec: sk.SecurityConfig, kt, workdir: Path, h: Harness, timeout_s: float = 30):
        super().__init__(sec, kt, workdir, timeout_s)
        self.h = h

    def produce(self, bootstrap, topic, messages, idempotent=True, codec="none", acks="-1"):
        events = self.h.events("produce", bootstrap, topic, codec, acks, "1" if idempotent else "0",
                               stdin=produce_lines(self.kt, messages), sec=self.sec)
        acked = {e["i"]: (e["partition"], e["offset"]) for e in events if e.get("event") == "ack"}
        done = [e for e in events if e.get("event") == "done"]
        if not done or len(acked) != len(messages):
            raise sk.ClientError(f"kafkajs acknowledged {len(acked)} of {len(messages)}: {events[-3:]}")
        return [acked[i] for i in range(len(messages))]

    def consume(self, bootstrap, topic, n, seek="beginning", timeout=30, isolation="read_uncommitted"):
        """By assignment (a group of its own with a fixed assigner, nothing committed)."""
        events = self.h.events("consume", bootstrap, topic, str(n), str(int(timeout * 1000)), seek, isolation,
                               sec=self.sec, timeout=timeout + 60)
        return [to_rec(self.kt, e) for e in events if e.get("event") == "record"]

    def consume_group(self, bootstrap, topic, group, n, timeout=60):
        events = self.h.events("group-consume", bootstrap, topic, group, str(n), str(int(timeout * 1000)),
                               sec=self.sec, timeout=timeout + 60)
        return [to_rec(self.kt, e) for e in events if e.get("event") == "record"]


def client(kt, h: Harness, sec: sk.SecurityConfig | None = None, timeout_s: float = 30) -> KafkaJSClient:
    return KafkaJSClient(sec or sk.SecurityConfig(), kt, h.workdir, h, timeout_s)


# --------------------------------------------------------------------------------------------
# groups (groupkit), transactions (txnkit)


def member_argv(h: Harness, bootstrap: str, group: str, topic: str, session_timeout_ms: int = 10000) -> list[str]:
    """A `groupkit.Member` command line (run it with `member_env()`)."""
    return h.argv("group-member", bootstrap, group, topic, str(session_timeout_ms))


def member_env() -> dict[str, str]:
    return {"KAFKAJS_NO_PARTITIONER_WARNING": "1"}


def txn_producer(h: Harness, bootstrap: str, topic: str, txn_id: str, timeout_ms: int, name: str,
                 log_dir: Path) -> tk.TxnProducer:
    """txnkit's line protocol over KafkaJS's transactional producer."""
    return tk.TxnProducer("kafkajs", h.argv("txn-producer", bootstrap, topic, txn_id, str(timeout_ms)), name,
                          log_dir)


def fenced(answer: dict) -> bool:
    return not answer.get("ok") and bool(FENCED & set(answer.get("names", ())))


def txn_read(h: Harness, bootstrap: str, topic: str, isolation: str, ends: dict[int, int],
             timeout: float = 30) -> tk.ReadResult:
    """txnkit's reader contract: from the beginning until every position reaches `ends[p]`."""
    spec = ",".join(f"{p}:{e}" for p, e in sorted(ends.items()))
    events = h.events("txn-read", bootstrap, topic, isolation, str(int(timeout * 1000)), spec, timeout=timeout + 60)
    records = [(e["partition"], e["offset"], e["key"], e["value"]) for e in events if e.get("event") == "record"]
    [done] = [e for e in events if e.get("event") == "done"]
    return tk.ReadResult("kafkajs", isolation, records, {int(p): o for p, o in done["positions"].items()}, None)


# txnkit's scenarios tell a fenced producer by family: KafkaJS's error types (see FENCED)
tk.FENCED.setdefault("kafkajs", FENCED)


class Producers(tk.Producers):
    """txnkit.Producers that also starts KafkaJS transactional producers (family "kafkajs"), so
    test_transactions.py's scenarios run unchanged with KafkaJS as one more family."""

    def start(self, family: str, bootstrap: str, topic: str, txn_id: str, timeout_ms: int = 60000,
              name: str | None = None) -> tk.TxnProducer:
        if family != "kafkajs":
            return super().start(family, bootstrap, topic, txn_id, timeout_ms, name)
        h = self.request.getfixturevalue("kafkajs")
        producer = txn_producer(h, bootstrap, topic, txn_id, timeout_ms, name or f"kafkajs-{len(self.started)}",
                                self.log_dir)
        self.started.append(producer)
        return producer


def read(kt, request, family: str, bootstrap: str, topic: str, isolation: str, ends: dict[int, int],
         timeout: float = 30) -> tk.ReadResult:
    """txnkit.read, KafkaJS included."""
    if family == "kafkajs":
        return txn_read(request.getfixturevalue("kafkajs"), bootstrap, topic, isolation, ends, timeout)
    java = tk.require_family(kt, request, family)
    return tk.read(family, bootstrap, topic, isolation, ends, timeout, java=java)


def _security_adapter(sec: sk.SecurityConfig, kt, workdir: Path, timeout_s: float = 30) -> KafkaJSClient:
    return KafkaJSClient(sec, kt, workdir, harness(kt, workdir), timeout_s)


# securitykit.adapter("kafkajs", ...) gives this adapter, so the security scenarios take KafkaJS too
sk.ADAPTERS.setdefault("kafkajs", _security_adapter)
