"""Log directories (JBOD) through stock admin clients and real broker processes.

- One scenario over the client families that have the calls (the Java Admin's describeLogDirs,
  describeReplicaLogDirs and alterReplicaLogDirs; kafka-python's describe_log_dirs and
  alter_replica_log_dirs; confluent-kafka has neither): partitions spread over two log dirs, each
  dir's partitions with their sizes on disk, a move of one replica to the other dir (LOG_DIR_NOT_FOUND
  for a dir the broker does not have), every record readable after it.
- A move under produce load, killed with SIGKILL in the middle and restarted: every acknowledged
  record is readable at its offset, the move resumes and completes, and the disk holds one live log
  of the partition.
- A log dir that fails under a running broker (replaced by a regular file; the next segment roll
  hits the error): its partition answers KAFKA_STORAGE_ERROR to Produce, Fetch and ListOffsets and
  Metadata shows it offline, DescribeLogDirs reports the dir's error, the other dir's partition keeps
  serving; after a restart with the dir repaired, everything acknowledged is served.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from kbroker.wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.timeout(240)

KAFKA_STORAGE_ERROR = 56


@pytest.fixture
def two_dir_broker(kt, tmp_path):
    def start(**overrides):
        dirs = [tmp_path / "d1", tmp_path / "d2"]
        broker = kt.Broker(tmp_path / "broker", {"log.dirs": ",".join(map(str, dirs)), "broker.id": "1", **overrides})
        broker.dirs = dirs
        started.append(broker)
        return broker.start()
    started: list = []
    yield start
    for broker in started:
        broker.stop()


def create_topic(kt, bootstrap: str, topic: str, partitions: int, configs: dict | None = None) -> None:
    kafka = kt.require_module("kafka")
    from kafka.admin import NewTopic

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()


def produce(kt, bootstrap: str, topic: str, records: list[tuple[int, bytes]], **config) -> list[tuple[int, int, bytes]]:
    """acks=1, no retries: (partition, offset, value) of each acknowledged record, in order."""
    kafka = kt.require_module("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=0, linger_ms=0, **config)
    try:
        futures = [(p, v, producer.send(topic, value=v, partition=p)) for p, v in records]
        producer.flush(30)
        return [(p, f.get(timeout=30).offset, v) for p, v, f in futures]
    finally:
        producer.close(5)


def read_partition(kt, bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    kafka = kt.require_module("kafka")
    tp = kafka.TopicPartition(topic, partition)
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got.update((r.offset, r.value) for r in records)
        return got
    finally:
        consumer.close()


def assert_all_acked_readable(kt, bootstrap: str, topic: str, acked: list[tuple[int, int, bytes]]) -> None:
    for partition in sorted({p for p, _, _ in acked}):
        mine = [(o, v) for p, o, v in acked if p == partition]
        assert [o for o, _ in mine] == sorted(o for o, _ in mine)  # acknowledged in offset order
        stored = read_partition(kt, bootstrap, topic, partition)
        missing = [(o, v) for o, v in mine if stored.get(o) != v]
        assert not missing, f"partition {partition}: {len(missing)} acknowledged records lost, first {missing[:3]}"


def live_logs(broker, topic: str, partition: int) -> list[Path]:
    return [d / f"{topic}-{partition}" for d in broker.dirs if (d / f"{topic}-{partition}").is_dir()]


# --- the clients ----------------------------------------------------------------------------------

class JavaAdmin:
    def __init__(self, request, kt):
        self.harness = request.getfixturevalue("java_harness")

    def describe(self, bootstrap, topic, partitions):
        """{dir: (error or None, total, usable, {(partition, is_future): (size, lag)})}, {partition: (current, future)}"""
        lines = [json.loads(ln) for ln in self.harness.ok("admin", bootstrap, "log-dirs", "1", topic,
                                                           ",".join(map(str, partitions)))]
        dirs = {ln["dir"]: (ln["error"] and error_name(ln["error"].rsplit(".", 1)[-1]), ln["totalBytes"], ln["usableBytes"],
                            {(r["partition"], r["isFuture"]): (r["size"], r["offsetLag"])
                             for r in ln["replicas"] if r["topic"] == topic})
                for ln in lines if ln["call"] == "log-dirs"}
        replicas = {ln["partition"]: (ln["current"], ln["future"]) for ln in lines if ln["call"] == "replica-log-dirs"}
        return dirs, replicas

    def alter(self, bootstrap, topic, partition, path):
        (line,) = [json.loads(ln) for ln in self.harness.ok("admin", bootstrap, "alter-log-dir", "1", topic,
                                                            str(partition), path)]
        return None if "result" in line else error_name(line["error"].rsplit(".", 1)[-1])


class KafkaPythonAdmin:
    def __init__(self, request, kt):
        self.kafka = kt.require_module("kafka")

    def _admin(self, bootstrap):
        return self.kafka.KafkaAdminClient(bootstrap_servers=bootstrap)

    def describe(self, bootstrap, topic, partitions):
        admin = self._admin(bootstrap)
        try:
            (broker,) = admin.describe_log_dirs()
        finally:
            admin.close()
        dirs, replicas = {}, {p: (None, None) for p in partitions}
        for d in broker["log_dirs"]:
            found = {}
            for t in d["topics"]:
                for p in t["partitions"] if t["name"] == topic else ():
                    found[(p["partition_index"], p["is_future_key"])] = (p["partition_size"], p["offset_lag"])
                    current, future = replicas.get(p["partition_index"], (None, None))
                    replicas[p["partition_index"]] = (current, d["log_dir"]) if p["is_future_key"] else \
                        (d["log_dir"], future)
            error = None if d["error_code"] == 0 else error_name(self.kafka.errors.for_code(d["error_code"]).__name__)
            dirs[d["log_dir"]] = (error, d["total_bytes"], d["usable_bytes"], found)
        return dirs, replicas

    def alter(self, bootstrap, topic, partition, path):
        admin = self._admin(bootstrap)
        try:
            (error,) = admin.alter_replica_log_dirs({(topic, partition, 1): path}).values()
        finally:
            admin.close()
        return None if error is self.kafka.errors.NoError else error_name(error.__name__)


CLIENTS = {"java": JavaAdmin, "kafka-python": KafkaPythonAdmin}


def error_name(class_name: str) -> str:
    """One name across clients: Java's LogDirNotFoundException is kafka-python's LogDirNotFoundError."""
    return class_name.removesuffix("Exception").removesuffix("Error")


def segment_bytes_on_disk(log_dir: Path) -> int:
    return sum(f.stat().st_size for f in log_dir.glob("*.log"))


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_describe_and_move_a_replica(request, kt, two_dir_broker, client):
    broker = two_dir_broker()
    admin = CLIENTS[client](request, kt)
    topic = kt.topic_name(client, "dirs")
    create_topic(kt, broker.bootstrap, topic, 2)
    acked = produce(kt, broker.bootstrap, topic, [(i % 2, b"record-%d-" % i + b"x" * (200 + i)) for i in range(60)])
    d1, d2 = (str(d.absolute()) for d in broker.dirs)
    dirs, replicas = admin.describe(broker.bootstrap, topic, [0, 1])
    assert set(dirs) == {d1, d2} and all(error is None for error, *_ in dirs.values())
    assert all(total > 0 and 0 <= usable <= total for _, total, usable, _ in dirs.values())
    placed = {p: d for d, (_, _, _, found) in dirs.items() for (p, future) in found if not future}
    assert sorted(placed.values()) == [d1, d2]  # the fewest partitions first: one in each dir
    for p, d in placed.items():
        size, lag = dirs[d][3][(p, False)]
        assert size == segment_bytes_on_disk(Path(d) / f"{topic}-{p}") > 30 * 200 and lag == 0
        assert replicas[p] == (d, None)

    assert admin.alter(broker.bootstrap, topic, 0, str(broker.dirs[0].parent / "not-a-log-dir")) == "LogDirNotFound"
    dest = d2 if placed[0] == d1 else d1
    assert admin.alter(broker.bootstrap, topic, 0, dest) is None
    kt.wait_until(lambda: admin.describe(broker.bootstrap, topic, [0, 1])[1][0] == (dest, None), 30,
                  "the replica in its new log dir")
    dirs, _ = admin.describe(broker.bootstrap, topic, [0, 1])
    assert (0, False) in dirs[dest][3] and (0, False) not in dirs[placed[0]][3]
    assert live_logs(broker, topic, 0) == [Path(dest) / f"{topic}-0"]
    acked += produce(kt, broker.bootstrap, topic, [(0, b"after-the-move-%d" % i) for i in range(10)])
    assert_all_acked_readable(kt, broker.bootstrap, topic, acked)


class LoadProducer(threading.Thread):
    """Produces to one partition until stopped (acks=1, no retries); records what was acknowledged."""

    def __init__(self, kt, bootstrap: str, topic: str, partition: int):
        super().__init__(daemon=True)
        self.kafka = kt.require_module("kafka")
        self.args = bootstrap, topic, partition
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        bootstrap, topic, partition = self.args
        producer = self.kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=1, retries=0, linger_ms=2,
                                            request_timeout_ms=3000, reconnect_backoff_max_ms=300)
        i = 0
        try:
            while not self.stopping.is_set():
                value = b"load-%07d" % i
                i += 1
                try:
                    meta = producer.send(topic, value=value, partition=partition).get(timeout=10)
                    self.acked.append((partition, meta.offset, value))
                except Exception:  # noqa: BLE001 - the broker was killed: not acknowledged
                    self.failed += 1
                    time.sleep(0.1)
        finally:
            producer.close(2)


def set_move_rate(kt, bootstrap: str, bytes_per_s: int) -> None:
    kafka = kt.require_module("kafka")
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        resource = ConfigResource(ConfigResourceType.BROKER, "1",
                                  configs={"replica.alter.log.dirs.io.max.bytes.per.second": str(bytes_per_s)})
        assert admin.alter_configs([resource]) == {"broker": {"1": "OK"}}
    finally:
        admin.close()


def test_a_move_under_load_survives_kill_9(kt, two_dir_broker):
    broker = two_dir_broker()
    set_move_rate(kt, broker.bootstrap, 400_000)  # a dynamic broker config (only), as in Kafka; kept across the kill
    admin = KafkaPythonAdmin(None, kt)
    topic = kt.topic_name("kafka-python", "move-load")
    create_topic(kt, broker.bootstrap, topic, 1)
    acked = produce(kt, broker.bootstrap, topic, [(0, b"fill-%05d-" % i + b"y" * 1000) for i in range(2000)],
                    batch_size=65536)
    (src,) = live_logs(broker, topic, 0)
    dest = next(str(d.absolute()) for d in broker.dirs if d != src.parent)
    load = LoadProducer(kt, broker.bootstrap, topic, 0)
    load.start()
    try:
        kt.wait_until(lambda: len(load.acked) > 50, 20, "the load producer's first acknowledgements")
        assert admin.alter(broker.bootstrap, topic, 0, dest) is None
        kt.wait_until(lambda: 0 < admin.describe(broker.bootstrap, topic, [0])[0][dest][3].get((0, True), (0, 0))[0],
                      20, "the copy under way")
        assert admin.describe(broker.bootstrap, topic, [0])[1][0] == (str(src.parent.absolute()), dest)
        broker.kill()  # in the middle of the copy (2 MB at 400 kB/s)
        broker.start()
        kt.wait_until(lambda: admin.describe(broker.bootstrap, topic, [0])[1][0] == (dest, None), 60,
                      "the resumed move to complete")
        kt.wait_until(lambda: len(load.acked) > 0 and load.acked[-1][1] > acked[-1][1] + 100, 20,
                      "acknowledgements after the move")
    finally:
        load.stopping.set()
        load.join(30)
    assert live_logs(broker, topic, 0) == [Path(dest) / f"{topic}-0"]
    assert_all_acked_readable(kt, broker.bootstrap, topic, acked + load.acked)


# --- a failed log dir -------------------------------------------------------------------------------

def partition_errors(kt, broker, topic: str, partition: int) -> dict[str, int]:
    """The partition's error code in Fetch v6 (below it Kafka answers a storage error as
    NOT_LEADER_OR_FOLLOWER), ListOffsets v1 and Metadata v9 (raw requests)."""
    def ask(api_key: int, version: int, body: dict):
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            sock.sendall(encode_request(api_key, version, 1, "compat-log-dirs", body))
            return decode_response(api_key, version, kt.recv_frame(sock))[1]

    fetch = ask(1, 6, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                               "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                                   {"partition": partition, "fetch_offset": 0, "log_start_offset": -1,
                                    "partition_max_bytes": 1 << 20}]}]})
    offsets = ask(2, 1, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "timestamp": -1}]}]})
    meta = ask(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                              "include_topic_authorized_operations": False})
    (meta_partition,) = [p for p in meta.topics[0].partitions if p.partition_index == partition]
    return {"fetch": fetch.responses[0].partitions[0].error_code,
            "list_offsets": offsets.topics[0].partitions[0].error_code,
            "metadata": meta_partition.error_code, "metadata_leader": meta_partition.leader_id,
            "metadata_offline": list(meta_partition.offline_replicas)}


def test_a_failed_log_dir_goes_offline_and_the_rest_serves(kt, two_dir_broker):
    broker = two_dir_broker()
    admin = KafkaPythonAdmin(None, kt)
    topic = kt.topic_name("kafka-python", "offline")
    create_topic(kt, broker.bootstrap, topic, 2, {"segment.bytes": "4096"})
    acked = produce(kt, broker.bootstrap, topic, [(i % 2, b"before-%04d-" % i + b"z" * 100) for i in range(40)])
    (failing_log,) = live_logs(broker, topic, 1)
    failing = failing_log.parent
    assert live_logs(broker, topic, 0)[0].parent != failing
    healthy_partition = 0

    parked = failing.with_name(failing.name + ".parked")
    os.replace(failing, parked)  # the dir is gone under the broker, a regular file in its place
    failing.write_bytes(b"not a directory")
    try:
        # appends go on into the open segment until a roll must create a file in the dir
        outcome = None
        for i in range(200):
            try:
                acked += produce(kt, broker.bootstrap, topic, [(1, b"during-%04d-" % i + b"z" * 100)])
            except Exception as exc:  # noqa: BLE001 - the first refused append
                outcome = type(exc).__name__
                break
        assert outcome == "KafkaStorageError", f"no storage error after {i} appends: {outcome}"
        errors = partition_errors(kt, broker, topic, 1)
        assert errors == {"fetch": KAFKA_STORAGE_ERROR, "list_offsets": KAFKA_STORAGE_ERROR,
                          "metadata": KAFKA_STORAGE_ERROR, "metadata_leader": -1, "metadata_offline": [1]}
        assert partition_errors(kt, broker, topic, healthy_partition)["fetch"] == 0
        acked += produce(kt, broker.bootstrap, topic, [(healthy_partition, b"still-served-%d" % i) for i in range(20)])
        dirs, _ = admin.describe(broker.bootstrap, topic, [0, 1])
        assert dirs[str(failing.absolute())][0] == "KafkaStorage"
        assert dirs[str(live_logs(broker, topic, 0)[0].parent.absolute())][0] is None
        assert "is offline" in broker.log_tail(200)
        assert broker.alive()
    finally:
        assert broker.stop() == 0
        failing.unlink()
        os.replace(parked, failing)  # repaired
    broker.start()
    assert_all_acked_readable(kt, broker.bootstrap, topic, acked)
    assert partition_errors(kt, broker, topic, 1)["fetch"] == 0
