"""Incremental fetch sessions (KIP-227) against a real broker.

- On the wire (Fetch v12/v13 sent by hand): a full request opens a session; incremental requests
  answer only partitions with news (records, or a moved high watermark); a forgotten partition is
  no longer answered; a repeated epoch is INVALID_FETCH_SESSION_EPOCH, an unknown session
  FETCH_SESSION_ID_NOT_FOUND, a v13 request in a v12 session FETCH_SESSION_TOPIC_ID_ERROR, and
  epoch -1 closes the session; a
  follower's session evicts the smallest consumer session of a full cache
  (`max.incremental.fetch.session.cache.slots`), whose next request is told its session is gone.
- The client families that use sessions (kafka-python 3.0; Java kafka-clients 3.9 and 4.3 — the
  broker's `kbroker_fetch_session_requests_total{kind="incremental"}` says they did) read every
  record exactly once and in order while a producer writes, and kafka-python across an assignment
  that drops one partition and adds another. (librdkafka, aiokafka and KafkaJS fetch sessionless;
  every other compat test reads through this same handler.)
Followers use sessions too: the cluster tests (replication, failover, restarts) run on them, and
test_cluster_metrics checks that leaders see incremental follower fetches."""

from __future__ import annotations

import base64
import contextlib
import subprocess
import threading
import time
import uuid

import metricskit as mk
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kbroker.admin.connection import Connection
from kbroker.errors import ErrorCode

pytestmark = pytest.mark.timeout(240)

SLOTS = 4
KBROKER_OVERRIDES = {"metrics.listener": mk.LISTENER_ANY_PORT,
                     "max.incremental.fetch.session.cache.slots": str(SLOTS)}
FETCH = 1


def create(kbroker, topic: str, partitions: int = 3) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(kbroker, topic: str, per_partition: int, partitions: range, tag: str) -> None:
    producer = KafkaProducer(bootstrap_servers=kbroker.bootstrap, acks="all", linger_ms=0)
    try:
        for i in range(per_partition):
            for p in partitions:
                producer.send(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
        producer.flush(30)
    finally:
        producer.close()


def requests_of_kind(kbroker, kind: str) -> float:
    url = mk.metrics_url(kbroker.stderr_path)
    assert url is not None, "the broker did not say where it serves metrics"
    return mk.value(mk.scrape(url), "kbroker_fetch_session_requests_total", kind=kind)


def fetch(conn: Connection, session_id: int, epoch: int, partitions: dict, topic: str | None = None,
          topic_id: uuid.UUID | None = None, forgotten: list[int] = (), replica_id: int = -1,
          max_wait: int = 0, version: int = 12):
    def named(entry: dict) -> dict:
        return {**entry, "topic_id": topic_id} if version >= 13 else {**entry, "topic": topic}
    return conn.call(FETCH, {
        "replica_id": replica_id, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch,
        "topics": [named({"partitions": [{"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                          "last_fetched_epoch": -1, "log_start_offset": -1,
                                          "partition_max_bytes": 1 << 20} for p, offset in partitions.items()]})]
        if partitions else [],
        "forgotten_topics_data": [named({"partitions": list(forgotten)})] if forgotten else [],
        "rack_id": ""}, version)


def answered(response) -> dict[int, tuple[int, int, int]]:
    """partition -> (error code, high watermark, record bytes)."""
    return {p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in response.responses for p in t.partitions}


def test_sessions_on_the_wire(kbroker):
    topic = f"sessions-wire-{uuid.uuid4().hex[:6]}"
    create(kbroker, topic)
    produce(kbroker, topic, 5, range(3), "a")
    with contextlib.closing(Connection(kbroker.host, kbroker.port)) as conn:
        full = fetch(conn, 0, 0, {0: 0, 1: 0, 2: 0}, topic)
        assert full.error_code == ErrorCode.none and full.session_id > 0
        sid = full.session_id
        assert {p: (e, hw) for p, (e, hw, _) in answered(full).items()} == {0: (0, 5), 1: (0, 5), 2: (0, 5)}
        assert all(size > 0 for _, _, size in answered(full).values())

        moved = fetch(conn, sid, 1, {0: 5, 1: 5, 2: 5}, topic)  # caught up: nothing new to say
        assert (moved.error_code, moved.session_id, answered(moved)) == (ErrorCode.none, sid, {})
        assert answered(fetch(conn, sid, 2, {}, topic)) == {}

        produce(kbroker, topic, 2, range(1, 2), "b")
        news = fetch(conn, sid, 3, {}, topic, max_wait=5000)
        assert answered(news).keys() == {1} and answered(news)[1][:2] == (0, 7) and answered(news)[1][2] > 0

        fetch(conn, sid, 4, {1: 7}, topic, forgotten=[1])
        produce(kbroker, topic, 1, range(1, 2), "c")
        assert answered(fetch(conn, sid, 5, {}, topic)) == {}  # partition 1 is no longer in the session
        produce(kbroker, topic, 1, range(1), "d")
        assert answered(fetch(conn, sid, 6, {}, topic, max_wait=5000)).keys() == {0}

        repeated = fetch(conn, sid, 6, {}, topic)
        assert (repeated.error_code, repeated.responses) == (ErrorCode.invalid_fetch_session_epoch, ())
        assert fetch(conn, sid + 1 if sid < 2**31 - 2 else 1, 1, {}, topic).error_code == \
            ErrorCode.fetch_session_id_not_found
        assert fetch(conn, 0, 1, {0: 0}, topic).error_code == ErrorCode.fetch_session_id_not_found
        topic_id = next(t.topic_id for t in conn.call(3, {"topics": [{"name": topic}],
                                                          "allow_auto_topic_creation": False}, 12).topics)
        assert fetch(conn, sid, 7, {}, topic_id=topic_id, version=13).error_code == \
            ErrorCode.fetch_session_topic_id_error
        again = fetch(conn, sid, 7, {}, topic)  # the session is unharmed: offset 5 of partition 0 again
        assert answered(again).keys() == {0} and answered(again)[0][2] > 0
        assert answered(fetch(conn, sid, 8, {0: 6}, topic)) == {}  # past it: no news
        closed = fetch(conn, sid, -1, {0: 6}, topic)  # a full request with epoch -1 closes it: sessionless
        assert (closed.error_code, closed.session_id, answered(closed)) == (ErrorCode.none, 0, {0: (0, 6, 0)})
        assert fetch(conn, sid, 9, {}, topic).error_code == ErrorCode.fetch_session_id_not_found


def test_a_followers_session_evicts_the_smallest_consumer_session_of_a_full_cache(kbroker):
    topic = f"sessions-evict-{uuid.uuid4().hex[:6]}"
    create(kbroker, topic, 4)
    produce(kbroker, topic, 1, range(4), "a")
    with contextlib.closing(Connection(kbroker.host, kbroker.port)) as conn:
        evictions_before = mk.value(mk.scrape(mk.metrics_url(kbroker.stderr_path)),
                                    "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total")
        # fill the cache with consumer sessions of 4 partitions; once it is full a newcomer cannot
        # evict a fresh consumer session, and reads sessionless
        sessions = []
        while True:
            answer = fetch(conn, 0, 0, {p: 0 for p in range(4)}, topic)
            assert answer.error_code == ErrorCode.none and answered(answer).keys() == {0, 1, 2, 3}
            if answer.session_id == 0:
                break
            sessions.append(answer.session_id)
            assert len(sessions) <= SLOTS
        assert sessions, "no slot was free"
        # the last one is made the smallest of all (earlier tests' sessions hold 2 or more)
        smallest = fetch(conn, sessions[-1], 1, {}, topic, forgotten=[1, 2, 3])
        assert smallest.error_code == ErrorCode.none
        follower = fetch(conn, 0, 0, {0: 0, 1: 0}, topic, replica_id=1)  # privileged: evicts it
        assert follower.error_code == ErrorCode.none and follower.session_id > 0
        gone = fetch(conn, sessions[-1], 2, {}, topic)
        assert gone.error_code == ErrorCode.fetch_session_id_not_found
        restarted = fetch(conn, 0, 0, {0: 0}, topic)  # the client starts over: full, sessionless if no room
        assert restarted.error_code == ErrorCode.none and answered(restarted).keys() == {0}
        evictions_after = mk.value(mk.scrape(mk.metrics_url(kbroker.stderr_path)),
                                   "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total")
        assert evictions_after >= evictions_before + 1
        for sid in [*sessions[:-1], follower.session_id]:  # closed (epoch -1): the slots are free again
            closed = fetch(conn, sid, -1, {0: 0}, topic)
            assert (closed.error_code, closed.session_id) == (ErrorCode.none, 0)
        reopened = fetch(conn, 0, 0, {0: 0}, topic)
        assert reopened.session_id > 0
        fetch(conn, reopened.session_id, -1, {}, topic)


class Writer:
    """Writes `per_partition` records to each partition, a few every 50 ms, in the background."""

    def __init__(self, kbroker, topic: str, partitions: range, per_partition: int, tag: str) -> None:
        self.args = (kbroker, topic, partitions, per_partition, tag)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        kbroker, topic, partitions, per_partition, tag = self.args
        try:
            producer = KafkaProducer(bootstrap_servers=kbroker.bootstrap, acks="all", linger_ms=0)
            for i in range(per_partition):
                for p in partitions:
                    producer.send(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
                if i % 10 == 9:
                    producer.flush(30)
                    time.sleep(0.05)
            producer.flush(30)
            producer.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.thread.join(60)
        assert not self.thread.is_alive() and self.error is None, self.error


def expected(tag: str, partitions, count: int, start: int = 0) -> dict[int, list[bytes]]:
    return {p: [f"{tag}-{p}-{i}".encode() for i in range(start, count)] for p in partitions}


def test_kafka_python_reads_everything_once_through_a_changing_session(kbroker):
    topic = f"sessions-kp-{uuid.uuid4().hex[:6]}"
    create(kbroker, topic)
    produce(kbroker, topic, 50, range(3), "a")
    incremental = requests_of_kind(kbroker, "incremental")
    consumer = KafkaConsumer(bootstrap_servers=kbroker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}

    def read_until(want: dict[int, list[bytes]], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while any(len(got[p]) < len(v) for p, v in want.items()) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(r.value for r in records)

    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        with Writer(kbroker, topic, range(3), 100, "b"):
            read_until({0: [None] * 150, 1: [None] * 150})
        consumer.assign([TopicPartition(topic, 1), TopicPartition(topic, 2)])  # 0 forgotten, 2 added
        consumer.seek_to_beginning(TopicPartition(topic, 2))
        with Writer(kbroker, topic, range(3), 50, "c"):
            read_until({1: [None] * 200, 2: [None] * 200})
    finally:
        consumer.close()
    want = {p: expected("a", [p], 50)[p] + expected("b", [p], 100)[p] for p in range(3)}
    assert got[0] == want[0]  # read while assigned, nothing after
    assert got[1] == want[1] + expected("c", [1], 50)[1]
    assert got[2] == want[2] + expected("c", [2], 50)[2]
    assert requests_of_kind(kbroker, "incremental") > incremental, "kafka-python fetched without a session"


def test_java_clients_read_everything_once_in_a_session(kbroker, java_client, tmp_path):
    topic = f"sessions-{java_client.name}-{uuid.uuid4().hex[:6]}"
    create(kbroker, topic)
    produce(kbroker, topic, 40, range(3), "a")
    incremental = requests_of_kind(kbroker, "incremental")
    stderr = (tmp_path / "java.stderr").open("w")
    proc = subprocess.Popen(java_client.argv("consume", kbroker.bootstrap, topic, str(3 * 120), "90000", "beginning"),
                            stdout=subprocess.PIPE, stderr=stderr, text=True)
    lines: list[str] = []
    backlog_read = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("REC "):
                backlog_read.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        # the rest is written once the consumer has fetched the backlog: it must fetch again for it
        assert backlog_read.wait(90), "the Java consumer read nothing"
        with Writer(kbroker, topic, range(3), 80, "b"):
            pass
        proc.wait(120)
        reader.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
    assert proc.returncode == 0, (tmp_path / "java.stderr").read_text()[-2000:]
    out = "".join(lines)
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for line in out.splitlines():
        if line.startswith("REC "):
            parts = line.split(" ")
            got[int(parts[1])].append(base64.b64decode(parts[5]))
    assert f"DONE {3 * 120}" in out
    for p in range(3):
        assert got[p] == expected("a", [p], 40)[p] + expected("b", [p], 80)[p], p
    assert requests_of_kind(kbroker, "incremental") > incremental, f"{java_client.name} fetched without a session"
