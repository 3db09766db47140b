"""ACL tests' shared pieces: a broker with Kafka's AclAuthorizer rules and a SASL_PLAINTEXT listener
(PLAIN users), ACLs made in batches by the super user, each client family configured as one of the
users, the Java admin driven as a script (one JVM per user), hand-written frames for what no stock
client sends, and the broker's metrics and audit log.

- `start(kt, workdir, users, extra)`: generator for a module fixture (stopped by PID whatever
  happens): `authorizer.class.name=kafka.security.authorizer.AclAuthorizer`, `super.users=User:admin`,
  one SASL_PLAINTEXT listener with PLAIN users (the broker's own connections use it too, as admin),
  a metrics listener; yields an `AclBroker`.
- `AclBroker.grant(...)`: CreateAcls through confluent-kafka's AdminClient as admin, every binding of
  a call in one request, each result checked.
- `kafka_python(user)`, `confluent(user)`: the client's own keys for the user;
  `java_script(harness, user, calls)`: `KbrokerHarness admin script`, one JSON outcome per call.
- `RawSasl(broker, user)`: a raw connection authenticated with PLAIN (securitykit's RawConn), for the
  inter-broker requests; `flexible_request(...)` sends a request with header v2.
- Hand-written requests and the error codes of their answers: Fetch v4 (a replica id or -1), Fetch v13
  by topic id, OffsetForLeaderEpoch v3, ListOffsets v1 (independent of kbroker's codec).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import securitykit as sk

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TOPIC, GROUP, CLUSTER, TXN = "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True)
class Grant:
    """One ACL in Kafka's enum names: (resource type, name, pattern type, principal, operation,
    permission), host `*`."""

    rtype: str
    name: str
    op: str
    principal: str
    pattern: str = "LITERAL"
    permission: str = "ALLOW"
    host: str = "*"


class AclBroker:
    def __init__(self, broker, passwords: dict[str, str], workdir: Path, metrics_port: int) -> None:
        self.broker, self.passwords, self.workdir, self.metrics_port = broker, passwords, Path(workdir), metrics_port

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def port(self) -> int:
        return self.broker.port

    # -- the clients' settings --------------------------------------------------------------------
    def kafka_python(self, user: str) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_plain_username": user, "sasl_plain_password": self.passwords[user],
                "request_timeout_ms": 15000, "reconnect_backoff_max_ms": 500}

    def confluent(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": self.passwords[user], "log_level": 0}

    def command_config(self, user: str) -> Path:
        path = self.workdir / f"{user}.properties"
        if not path.exists():
            sk.write_properties(path, {
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{sk.PLAIN_LOGIN} required username="{user}" password="{self.passwords[user]}";'})
        return path

    # -- ACLs -------------------------------------------------------------------------------------
    def grant(self, grants: Iterable[Grant]) -> None:
        """CreateAcls as the super user, all in one request (confluent-kafka's AdminClient)."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            AdminClient,
            ResourcePatternType,
            ResourceType,
        )

        # librdkafka names Kafka's resource type 4 (CLUSTER) BROKER
        bindings = list({AclBinding(ResourceType["BROKER" if g.rtype == CLUSTER else g.rtype], g.name,
                                    ResourcePatternType[g.pattern], g.principal,
                                    g.host, AclOperation[g.op], AclPermissionType[g.permission]): None
                         for g in grants})
        if not bindings:
            return
        admin = AdminClient(self.confluent("admin"))
        for binding, future in admin.create_acls(bindings, request_timeout=60).items():
            assert future.result(60) is None, binding

    # -- the broker's side ------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The unlabelled samples of a scrape of the metrics listener: {name: value}."""
        with urllib.request.urlopen(f"http://{sk.HOST}:{self.metrics_port}/metrics", timeout=10) as r:
            body = r.read().decode()
        out = {}
        for line in body.splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*) ([-+0-9.eE]+|NaN|[-+]Inf)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def audit_lines(self) -> list[str]:
        """The broker's `kbroker.authorizer` log lines so far (its stderr)."""
        text = self.broker.stderr_path.read_text(errors="replace")
        return [line for line in text.splitlines() if "kbroker.authorizer" in line and "Principal = " in line]


def start(kt, workdir: Path, users: Iterable[str], extra: dict[str, str] | None = None):
    """Generator for a module fixture: the broker, stopped by PID whatever happens."""
    import pytest

    if kt.EXTERNAL:
        pytest.skip("KBROKER_COMPAT_EXTERNAL: this module starts a broker of its own with an authorizer")
    workdir = Path(workdir)
    passwords = {u: sk.secret(f"{u}-plain") for u in ("admin", *users)}
    port, metrics_port = kt.free_port(), kt.free_port()
    overrides = {
        "listeners": f"SASL_PLAINTEXT://{sk.HOST}:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "metrics.listener": f"http://{sk.HOST}:{metrics_port}",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
        **(extra or {}),
    }
    jaas = (f'{sk.PLAIN_LOGIN} required username="admin" password="{passwords["admin"]}" '
            + " ".join(f'user_{u}="{p}"' for u, p in passwords.items()) + ";")
    secrets = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas}
    broker = sk.secure_broker(kt, workdir / "broker", overrides, secrets, port)
    gen = kt._running(broker)
    next(gen)
    try:
        yield AclBroker(broker, passwords, workdir, metrics_port)
    finally:
        with contextlib.suppress(StopIteration):
            next(gen)


# -- the Java admin, as a script ----------------------------------------------------------------------

def java_script(ab: AclBroker, harness, user: str, calls: list[str], timeout: float = 240) -> dict[str, dict]:
    """Run `calls` through one Java Admin as `user`: {call line: outcome} (outcome: {"result": "ok",
    "value": ...} or {"error": "<exception simple class name>", "message": ...})."""
    env = dict(os.environ, KBROKER_CLIENT_PROPERTIES=str(ab.command_config(user)))
    cp = subprocess.run(harness.argv("admin", ab.bootstrap, "script"), input="\n".join(calls) + "\n",
                        capture_output=True, text=True, timeout=timeout, env=env)
    assert cp.returncode == 0, f"java harness script failed: {cp.stdout[-2000:]}\n{cp.stderr[-3000:]}"
    out = {}
    for line in cp.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out[row.pop("call")] = row
    missing = [c for c in calls if c not in out]
    assert not missing, f"no outcome for {missing[:3]}: {cp.stdout[-2000:]}\n{cp.stderr[-2000:]}"
    return out


def java_outcome(row: dict) -> str:
    return "ok" if row.get("result") == "ok" else row["error"]


# -- raw frames -----------------------------------------------------------------------------------------

class RawSasl(sk.RawConn):
    """A raw connection authenticated with SASL PLAIN as `user`."""

    def __init__(self, ab: AclBroker, user: str, timeout: float = 10.0) -> None:
        super().__init__(ab.port, timeout=timeout)
        answers = sk.sasl_exchange(self, "PLAIN", user, ab.passwords[user])
        assert answers and answers[-1][0] == 0, f"SASL PLAIN as {user}: {answers}"

    def flexible_request(self, api_key: int, version: int, body: bytes) -> bytes:
        """Request header v2 (flexible: client id, then no tagged fields), response header v1: the
        body after the correlation id and the header's tagged fields."""
        self.corr += 1
        client = b"aclkit"
        header = struct.pack(">hhih", api_key, version, self.corr, len(client)) + client + b"\x00"
        payload = header + body
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        frame = self.recv_frame()
        assert struct.unpack_from(">i", frame)[0] == self.corr
        assert frame[4] == 0, "tagged fields in the response header"
        return frame[5:]


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def compact_string(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


# -- hand-written requests of the refusal checks (non-flexible versions: header v1, response header v0) --

def fetch_v4(topic: str, replica_id: int) -> bytes:
    t = topic.encode()
    return (struct.pack(">iiiib", replica_id, 0, 0, 1 << 20, 0) + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
            + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20))


def fetch_v4_errors(body: bytes) -> list[int]:
    pos = 4  # throttle
    (ntopics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    errors = []
    for _ in range(ntopics):
        (tlen,) = struct.unpack_from(">h", body, pos)
        pos += 2 + tlen
        (nparts,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(nparts):
            _p, err, _hw, _lso = struct.unpack_from(">ihqq", body, pos)
            errors.append(err)
            pos += 4 + 2 + 8 + 8
            (naborted,) = struct.unpack_from(">i", body, pos)
            pos += 4 + max(naborted, 0) * 16
            (rlen,) = struct.unpack_from(">i", body, pos)
            pos += 4 + max(rlen, 0)
    return errors


def epoch_v3(topic: str, replica_id: int) -> bytes:
    t = topic.encode()
    return (struct.pack(">i", replica_id) + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t
            + struct.pack(">i", 1) + struct.pack(">iii", 0, -1, 0))


def epoch_v3_errors(body: bytes) -> list[int]:
    pos = 4
    (ntopics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    errors = []
    for _ in range(ntopics):
        (tlen,) = struct.unpack_from(">h", body, pos)
        pos += 2 + tlen
        (nparts,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(nparts):
            err, _p, _epoch, _end = struct.unpack_from(">hiiq", body, pos)
            errors.append(err)
            pos += 18
    return errors


def list_offsets_v1(topic: str, partition: int = 0, timestamp: int = -1) -> bytes:
    """ListOffsets v1 as a consumer (replica id -1): one partition, latest (-1) by default."""
    t = topic.encode()
    return (struct.pack(">i", -1) + struct.pack(">i", 1) + struct.pack(">h", len(t)) + t + struct.pack(">i", 1)
            + struct.pack(">iq", partition, timestamp))


def list_offsets_v1_answers(body: bytes) -> list[tuple[int, int]]:
    """(error code, offset) per partition of a ListOffsets v1 response."""
    pos = 0
    (ntopics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    out = []
    for _ in range(ntopics):
        (tlen,) = struct.unpack_from(">h", body, pos)
        pos += 2 + tlen
        (nparts,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(nparts):
            _p, err, _ts, offset = struct.unpack_from(">ihqq", body, pos)
            out.append((err, offset))
            pos += 22
    return out


def fetch_v13_by_id(topic_id: bytes, partition: int = 0) -> bytes:
    """Fetch v13 (flexible; topics named by id) of one partition from offset 0, as a consumer."""
    part = struct.pack(">iiqiqi", partition, -1, 0, -1, -1, 1 << 20) + b"\x00"
    topics = uvarint(2) + topic_id + uvarint(2) + part + b"\x00"
    return (struct.pack(">iiiibii", -1, 0, 0, 1 << 20, 0, 0, -1) + topics + uvarint(1)  # no forgotten topics
            + uvarint(1) + b"\x00")  # rack id "", no tagged fields


def fetch_v13_first(body: bytes) -> tuple[int, int, bytes]:
    """(top-level error, the first partition's error, its records) of a Fetch v13 response."""
    _throttle, error, _session = struct.unpack_from(">ihi", body, 0)
    pos = 10
    ntopics, pos = read_uvarint(body, pos)
    assert ntopics >= 2, "no topic in the answer"
    pos += 16  # topic id
    nparts, pos = read_uvarint(body, pos)
    assert nparts >= 2, "no partition in the answer"
    _p, perr, _hw, _lso, _lso2 = struct.unpack_from(">ihqqq", body, pos)
    pos += 4 + 2 + 24
    naborted, pos = read_uvarint(body, pos)
    pos += max(naborted - 1, 0) * 17
    pos += 4  # preferred read replica
    nrecords, pos = read_uvarint(body, pos)
    records = body[pos:pos + max(nrecords - 1, 0)]
    return error, perr, records
