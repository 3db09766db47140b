"""Transaction scenarios' shared parts: one transactional-producer adapter and one reader per client
family, so test_transactions.py and test_cluster_transactions.py are written once and parametrized
over the families.

Producers. Each family's producer is a process of its own driven over stdin/stdout, one command a
line and one JSON answer a line (`TxnProducer`): `txn_producer.py <family>` for confluent-kafka
(librdkafka), aiokafka and kafka-python, `KbrokerHarness txn-producer` for the Java kafka-clients
3.9 KafkaProducer. Commands: init, begin, send P:V[,P:V...] (flushed, answered with each record's
acknowledged [partition, offset]: librdkafka purges unsent records on abort, so every send is
flushed before the test goes on), commit, abort, offsets GROUP P:O[,...]
(send_offsets_to_transaction), close. A failed command answers its error and the family's error
names; `fenced()` tells the family's fenced error (ProducerFenced / INVALID_PRODUCER_EPOCH) from
any other.

Readers. `read(family, ...)` assigns the partitions (no group), starts from the beginning at an
isolation level and polls until every partition's position reaches the end it was given (from
`list_offsets`, the hand-written ListOffsets v2: the high watermark for read_uncommitted, the last
stable offset for read_committed). Every client moves its position past control records and
aborted transactions, so a read never waits for a timeout to end. confluent-kafka, aiokafka and
kafka-python read in this process; Java reads with `KbrokerHarness txn-read`. Readers that can say
what their own end offsets are (Java, aiokafka, kafka-python) report them too.

Every wait has a deadline; only processes started here are signalled, by PID.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import queue
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

from conftest import frame, recv_frame, request_header_v1

HERE = Path(__file__).resolve().parent
FAMILIES = ("confluent", "java", "aiokafka", "kafka-python")
MODULES = {"confluent": "confluent_kafka", "aiokafka": "aiokafka", "kafka-python": "kafka"}
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
CALL_TIMEOUT_S = 60.0  # one adapter command; the adapters' own client calls time out at 30 s

# The error each family reports when another producer with the same transactional id fenced it:
# PRODUCER_FENCED from the coordinator, INVALID_PRODUCER_EPOCH from a partition leader that saw
# the newer epoch's abort marker (and from the coordinator to clients too old for PRODUCER_FENCED).
FENCED = {
    "confluent": {"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"},
    "java": {"org.apache.kafka.common.errors.ProducerFencedException",
             "org.apache.kafka.common.errors.InvalidProducerEpochException"},
    "aiokafka": {"ProducerFenced", "InvalidProducerEpoch"},
    "kafka-python": {"ProducerFencedError", "InvalidProducerEpochError"},
}


def fenced(family: str, answer: dict) -> bool:
    return not answer.get("ok") and bool(FENCED[family] & set(answer.get("names", ())))


def require_family(kt: Any, request: Any, family: str) -> Any:
    """The family's client must be there (a failure under CI=true); Java returns its harness."""
    if family == "java":
        return request.getfixturevalue("java_harness")
    kt.require_module(MODULES[family])
    return None


# --------------------------------------------------------------------------------------------
# producers


class TxnProducer:
    """One transactional producer process; `call` sends a command and waits (bounded) for its answer."""

    def __init__(self, family: str, argv: list[str], name: str, log_dir: Path) -> None:
        self.family = family
        self.name = name
        self.stderr_path = Path(log_dir) / f"txn-producer-{name}.stderr.log"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, bufsize=1, cwd=str(HERE))
        self.answers: queue.Queue = queue.Queue()
        self.transcript: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"txn-producer-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                self.transcript.append(f"(unparsed) {line}")

    def call(self, command: str, timeout: float = CALL_TIMEOUT_S) -> dict:
        """Send one command; its answer. A producer that died or did not answer in time fails the test."""
        self.transcript.append(f"> {command}")
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise AssertionError(f"{self.name}: cannot send {command!r}: {exc!r}\n{self.describe()}") from None
        deadline = time.monotonic() + timeout
        while True:
            try:
                answer = self.answers.get(timeout=0.2)
                break
            except queue.Empty:
                if self.proc.poll() is not None and self.answers.empty():
                    raise AssertionError(f"{self.name} exited ({self.proc.returncode}) before answering "
                                         f"{command!r}\n{self.describe()}") from None
                if time.monotonic() >= deadline:
                    raise AssertionError(f"{self.name} did not answer {command!r} within {timeout} s\n"
                                         f"{self.describe()}") from None
        self.transcript.append(f"< {json.dumps(answer)}")
        return answer

    def ok(self, command: str, timeout: float = CALL_TIMEOUT_S) -> dict:
        answer = self.call(command, timeout)
        if not answer.get("ok"):
            raise AssertionError(f"{self.name}: {command!r} failed: {answer.get('error')} "
                                 f"{answer.get('names')}\n{self.describe()}")
        return answer

    # -- the commands -------------------------------------------------------------------------------
    def init(self) -> None:
        self.ok("init")

    def begin(self) -> None:
        self.ok("begin")

    def commit(self) -> None:
        self.ok("commit")

    def abort(self) -> None:
        self.ok("abort")

    def send(self, records: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
        """Produce and flush; (partition, offset, value) of every record, in send order."""
        acks = self.ok(send_command(records))["acks"]
        assert len(acks) == len(records), f"{self.name}: {len(acks)} acks for {len(records)} records"
        out = []
        for (p, v), (ap, offset) in zip(records, acks):
            assert ap == p, f"{self.name}: {v} acknowledged on partition {ap}, sent to {p}"
            out.append((p, offset, v))
        return out

    def offsets(self, group: str, offsets: dict[int, int]) -> None:
        self.ok(offsets_command(group, offsets))

    def close(self, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            try:
                self.call("close", timeout)
                self.proc.wait(timeout)
            except (AssertionError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # only the process started here
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self._reader.join(5)
        self._stderr.close()

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def describe(self) -> str:
        return (f"--- {self.name} ({self.family}, pid {self.proc.pid}) transcript ---\n"
                + "\n".join(self.transcript[-20:]) + f"\n--- {self.name} stderr tail ---\n{self.stderr_tail()}")


def send_command(records: Iterable[tuple[int, str]]) -> str:
    return "send " + ",".join(f"{p}:{v}" for p, v in records)


def offsets_command(group: str, offsets: dict[int, int]) -> str:
    return f"offsets {group} " + ",".join(f"{p}:{o}" for p, o in sorted(offsets.items()))


def producer_argv(family: str, bootstrap: str, topic: str, txn_id: str, timeout_ms: int, java: Any = None) -> list[str]:
    if family == "java":
        assert java is not None, "the Java family needs the java_harness fixture"
        return java.argv("txn-producer", bootstrap, topic, txn_id, str(timeout_ms))
    return [sys.executable, str(HERE / "txn_producer.py"), family, bootstrap, topic, txn_id, str(timeout_ms)]


class Producers:
    """Starts producers for a test and kills whatever is left at its end (the `producers` fixture)."""

    def __init__(self, kt: Any, request: Any, log_dir: Path) -> None:
        self.kt, self.request, self.log_dir = kt, request, log_dir
        self.started: list[TxnProducer] = []

    def start(self, family: str, bootstrap: str, topic: str, txn_id: str, timeout_ms: int = 60000,
              name: str | None = None) -> TxnProducer:
        java = require_family(self.kt, self.request, family)
        name = name or f"{family}-{len(self.started)}"
        producer = TxnProducer(family, producer_argv(family, bootstrap, topic, txn_id, timeout_ms, java), name,
                               self.log_dir)
        self.started.append(producer)
        return producer

    def close_all(self) -> None:
        for producer in self.started:
            producer.kill()

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.started)


def values(tag: str, n: int, partitions: int) -> list[tuple[int, str]]:
    """n records for one transaction, spread round-robin over the partitions: (partition, value)."""
    return [(i % partitions, f"{tag}-{i}") for i in range(n)]


# --------------------------------------------------------------------------------------------
# readers


@dataclasses.dataclass
class ReadResult:
    family: str
    isolation: str
    records: list[tuple[int, int, str, str]]  # partition, offset, key, value; in the order received
    positions: dict[int, int]
    client_end_offsets: dict[int, int] | None  # the reader's own end offsets, if it can tell

    def by_partition(self) -> dict[int, list[tuple[int, str]]]:
        out: dict[int, list[tuple[int, str]]] = {}
        for p, offset, _key, value in self.records:
            out.setdefault(p, []).append((offset, value))
        return out

    def values(self) -> set[str]:
        return {v for _p, _o, _k, v in self.records}


def read(family: str, bootstrap: str, topic: str, isolation: str, ends: dict[int, int], timeout: float = 30,
         java: Any = None, fetcher_position: bool = False) -> ReadResult:
    """Every record from the beginning of each partition until its position reaches `ends[p]`.

    `fetcher_position` (confluent only): librdkafka's position() is the offset after the last
    record handed to the application, so it stops short of a tail of batches without records (a
    filtered view's, a compacted log's); its fetcher's end-of-partition event says the offset the
    fetcher itself reached, which is then taken as the position."""
    assert isolation in (READ_COMMITTED, READ_UNCOMMITTED)
    if family == "confluent":
        return _read_confluent(bootstrap, topic, isolation, ends, timeout, fetcher_position)
    reader = {"aiokafka": _read_aiokafka, "kafka-python": _read_kafka_python}.get(family)
    if family == "java":
        return _read_java(java, bootstrap, topic, isolation, ends, timeout)
    assert reader is not None, f"unknown family {family}"
    return reader(bootstrap, topic, isolation, ends, timeout)


def _reached(positions: dict[int, int], ends: dict[int, int]) -> bool:
    return all(end <= 0 or positions.get(p, -1) >= end for p, end in ends.items())


def _read_confluent(bootstrap: str, topic: str, isolation: str, ends: dict[int, int], timeout: float,
                    fetcher_position: bool = False) -> ReadResult:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txnkit-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": isolation, "enable.partition.eof": fetcher_position})
    records, positions, fetched_to = [], {}, {}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(ends)])
        deadline = time.monotonic() + timeout
        while True:
            positions = {tp.partition: max(tp.offset, fetched_to.get(tp.partition, -1))
                         for tp in consumer.position([TopicPartition(topic, p) for p in ends])}
            if _reached(positions, ends) or time.monotonic() >= deadline:
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                records.append((msg.partition(), msg.offset(), (msg.key() or b"").decode(), (msg.value() or b"").decode()))
            elif msg is not None and msg.error().code() == KafkaError._PARTITION_EOF:
                fetched_to[msg.partition()] = msg.offset()
    finally:
        consumer.close()
    return ReadResult("confluent", isolation, records, positions, None)


def _read_kafka_python(bootstrap: str, topic: str, isolation: str, ends: dict[int, int], timeout: float) -> ReadResult:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level=isolation, request_timeout_ms=15000,
                             reconnect_backoff_max_ms=1000)
    records, positions = [], {}
    try:
        tps = [TopicPartition(topic, p) for p in sorted(ends)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        client_ends = {tp.partition: o for tp, o in consumer.end_offsets(tps).items()}
        deadline = time.monotonic() + timeout
        while True:
            positions = {tp.partition: consumer.position(tp) for tp in tps}
            if _reached(positions, ends) or time.monotonic() >= deadline:
                break
            for batch in consumer.poll(200).values():
                records += [(r.partition, r.offset, (r.key or b"").decode(), (r.value or b"").decode()) for r in batch]
    finally:
        consumer.close()
    return ReadResult("kafka-python", isolation, records, positions, client_ends)


def _read_aiokafka(bootstrap: str, topic: str, isolation: str, ends: dict[int, int], timeout: float) -> ReadResult:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> ReadResult:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", isolation_level=isolation,
                                    request_timeout_ms=15000)
        records, positions = [], {}
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in sorted(ends)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            client_ends = {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()}
            deadline = time.monotonic() + timeout
            while True:
                positions = {tp.partition: await consumer.position(tp) for tp in tps}
                if _reached(positions, ends) or time.monotonic() >= deadline:
                    break
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    records.extend((r.partition, r.offset, (r.key or b"").decode(), (r.value or b"").decode())
                                   for r in batch)
        finally:
            await consumer.stop()
        return ReadResult("aiokafka", isolation, records, positions, client_ends)

    return asyncio.run(asyncio.wait_for(run(), timeout + 30))


def _read_java(java: Any, bootstrap: str, topic: str, isolation: str, ends: dict[int, int], timeout: float) -> ReadResult:
    assert java is not None, "the Java family needs the java_harness fixture"
    spec = ",".join(f"{p}:{e}" for p, e in sorted(ends.items()))
    lines = java.ok("txn-read", bootstrap, topic, isolation, str(int(timeout * 1000)), spec, timeout=timeout + 60)
    records, done = [], None
    for line in lines:
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event["event"] == "record":
            records.append((event["partition"], event["offset"], event["key"], event["value"]))
        elif event["event"] == "done":
            done = event
    assert done is not None, f"java txn-read printed no done line: {lines[-5:]}"
    return ReadResult("java", isolation, records, {int(p): o for p, o in done["positions"].items()},
                      {int(p): o for p, o in done["end_offsets"].items()})


def check_read(result: ReadResult, expected: dict[int, list[tuple[int, str]]], ends: dict[int, int]) -> None:
    """Exactly `expected` ((offset, value) per partition, in offset order), every key == its value,
    and the reader reached every end."""
    got = result.by_partition()
    who = f"{result.family} {result.isolation}"
    for p in sorted(set(got) | set(expected)):
        g, e = got.get(p, []), expected.get(p, [])
        if g != e:
            extra = sorted(set(g) - set(e))[:10]
            missing = sorted(set(e) - set(g))[:10]
            raise AssertionError(f"{who} partition {p}: read {len(g)} records, expected {len(e)}; "
                                 f"not expected: {extra}; missing: {missing}; read: {g[:20]}")
    bad_keys = [(p, o, k, v) for p, o, k, v in result.records if k != v]
    assert not bad_keys, f"{who}: keys differ from values: {bad_keys[:5]}"
    assert _reached(result.positions, ends), f"{who}: positions {result.positions} never reached the ends {ends}"


# --------------------------------------------------------------------------------------------
# raw requests, hand-written (independent of the broker's codec and of every client)


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _call(address: str, api_key: int, version: int, body: bytes, timeout: float = 10) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(frame(request_header_v1(api_key, version, 77, b"txnkit") + body))
        response = recv_frame(s)
    (corr,) = struct.unpack_from(">i", response, 0)
    assert corr == 77, f"correlation id {corr}"
    return response[4:]


def settled_ends(kt, bootstrap: str, topic: str, partitions: Iterable[int], timeout: float = 15
                 ) -> tuple[dict[int, int], dict[int, int]]:
    """(LSO, HW) once no transaction is open on the topic: a commit or abort returns once the
    coordinator has logged its decision, the markers follow (in Kafka too), so the last stable
    offset may trail for a moment; it must reach the high watermark within `timeout`."""
    partitions = sorted(partitions)
    last: list = []

    def settled():
        last[:] = [(list_offsets(bootstrap, topic, partitions, READ_COMMITTED),
                    list_offsets(bootstrap, topic, partitions, READ_UNCOMMITTED))]
        return last[0][0] == last[0][1]

    try:
        kt.wait_until(settled, timeout, "no open transaction", interval=0.05)
    except AssertionError:
        raise AssertionError(f"a transaction is still open {timeout} s after the last commit/abort returned: "
                             f"last stable offsets {last[0][0]}, high watermarks {last[0][1]}") from None
    return last[0]


def list_offsets(addresses: str | dict[int, str], topic: str, partitions: Iterable[int], isolation: str) -> dict[int, int]:
    """The latest offset of each partition by ListOffsets v2 at `isolation`: the high watermark
    (read_uncommitted) or the last stable offset (read_committed). `addresses`: one broker for all,
    or each partition's leader."""
    partitions = sorted(partitions)
    by_address: dict[str, list[int]] = {}
    for p in partitions:
        address = addresses if isinstance(addresses, str) else addresses[p]
        by_address.setdefault(address, []).append(p)
    out: dict[int, int] = {}
    for address, ps in by_address.items():
        body = struct.pack(">ib", -1, 1 if isolation == READ_COMMITTED else 0) + struct.pack(">i", 1) + _string(topic)
        body += struct.pack(">i", len(ps)) + b"".join(struct.pack(">iq", p, -1) for p in ps)
        r = _call(address, 2, 2, body)
        pos = 4  # throttle_time_ms
        (n_topics,) = struct.unpack_from(">i", r, pos)
        pos += 4
        for _ in range(n_topics):
            (name_len,) = struct.unpack_from(">h", r, pos)
            pos += 2 + name_len
            (n_parts,) = struct.unpack_from(">i", r, pos)
            pos += 4
            for _ in range(n_parts):
                p, error, _ts, offset = struct.unpack_from(">ihqq", r, pos)
                pos += 22
                assert error == 0, f"ListOffsets {topic}-{p} at {address} ({isolation}): error {error}"
                out[p] = offset
    assert set(out) == set(partitions), f"ListOffsets answered {sorted(out)} of {partitions}"
    return out


def find_transaction_coordinator(address: str, transactional_id: str) -> tuple[int, int, str]:
    """FindCoordinator v1, key type 1: (error_code, node_id, host:port)."""
    r = _call(address, 10, 1, _string(transactional_id) + struct.pack(">b", 1))
    _throttle, error, msg_len = struct.unpack_from(">ihh", r, 0)
    pos = 8 + max(msg_len, 0)
    (node_id,) = struct.unpack_from(">i", r, pos)
    pos += 4
    (host_len,) = struct.unpack_from(">h", r, pos)
    host = r[pos + 2:pos + 2 + host_len].decode()
    (port,) = struct.unpack_from(">i", r, pos + 2 + host_len)
    return error, node_id, f"{host}:{port}"


# --------------------------------------------------------------------------------------------
# group offsets


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """What OffsetFetch answers for the group (kafka-python's admin: require_stable unset), the
    topic's partitions with an offset only."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        offsets = admin.list_group_offsets([group]).get(group, {})
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic and om.offset >= 0}


def committed(bootstrap: str, group: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """A group member's view: confluent-kafka `Consumer.committed()`, whose OffsetFetch asks for stable
    offsets (librdkafka's read_committed default): it waits while a transaction's offsets are pending."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=20)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def expected_by_partition(acks: Iterable[tuple[int, int, str]]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = {}
    for p, offset, value in sorted(acks):
        out.setdefault(p, []).append((offset, value))
    return out
