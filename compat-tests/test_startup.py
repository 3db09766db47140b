"""Start-up safety with real `python -m kbroker serve` processes: a data directory in use by another
broker is refused with Kafka's message while the first one keeps serving, a `.lock` left by a killed
broker blocks nothing, and every wrong start-up is one line on stderr and exit status 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parent.parent


def _serve(*overrides: str, config: Path | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "kbroker", "serve", *(["--config", str(config)] if config else [])]
    for item in overrides:
        argv += ["--override", item]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=str(REPO),
                          stdin=subprocess.DEVNULL)


def _refused(result: subprocess.CompletedProcess, *words: str) -> str:
    """Status 2, a single line on stderr holding `words`, and no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _loopback(port: int = 0) -> str:
    return f"listeners=PLAINTEXT://127.0.0.1:{port}"


def test_a_second_broker_on_the_same_dir_is_refused_and_the_first_keeps_serving(fresh_kbroker, kt):
    kafka = kt.require_module("kafka")
    data = fresh_kbroker.data_dir
    line = _refused(_serve(_loopback(kt.free_port()), f"log.dirs={data}"),
                    f"Failed to acquire lock on file .lock in {data}.",
                    "A Kafka instance in another process or thread is using this directory.")
    assert line.startswith("kbroker: ")
    # the same listener too: the lock is reported first, as Kafka takes it before binding
    _refused(_serve(_loopback(fresh_kbroker.port), f"log.dirs={data}"), "Failed to acquire lock")
    assert fresh_kbroker.alive()
    topic = kt.topic_name("startup", "lock")
    producer = kafka.KafkaProducer(bootstrap_servers=fresh_kbroker.bootstrap, acks="all", linger_ms=0)
    try:
        offsets = [producer.send(topic, value=b"v%d" % i, partition=0).get(timeout=20).offset for i in range(3)]
    finally:
        producer.close()
    assert offsets == [0, 1, 2]
    consumer = kafka.KafkaConsumer(bootstrap_servers=fresh_kbroker.bootstrap, enable_auto_commit=False,
                                   consumer_timeout_ms=5000)
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = [r.value for _, r in zip(range(3), consumer)]
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


def test_the_lock_of_a_killed_broker_does_not_block_a_restart(fresh_kbroker, kt):
    lock = fresh_kbroker.data_dir / ".lock"
    assert lock.exists()
    fresh_kbroker.kill()  # SIGKILL: the file stays, the OS dropped the lock with the process
    assert lock.exists()
    fresh_kbroker.start()
    assert kt.api_versions(fresh_kbroker.host, fresh_kbroker.port)


def test_a_port_in_use_is_refused_with_kafkas_words(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _refused(_serve(_loopback(port), f"log.dirs={tmp_path / 'data'}"),
                 f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use.")


def test_a_metrics_listener_port_in_use_is_refused(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _refused(_serve(_loopback(), f"log.dirs={tmp_path / 'data'}", f"metrics.listener=http://127.0.0.1:{port}"),
                 f"metrics.listener failed to bind to 127.0.0.1:{port}: Address already in use.")


def test_an_unparsable_listener(tmp_path):
    _refused(_serve("listeners=PLAINTEXT:/127.0.0.1:9092", f"log.dirs={tmp_path}"),
             "Unable to parse PLAINTEXT:/127.0.0.1:9092 to a broker endpoint")


def test_a_log_dir_that_is_a_file(tmp_path):
    file = tmp_path / "file"
    file.write_text("not a dir")
    _refused(_serve(_loopback(), f"log.dirs={file}"), f"{file} is not a readable log directory.")


def test_a_log_dir_that_cannot_be_created(tmp_path):
    file = tmp_path / "file"
    file.write_text("not a dir")
    _refused(_serve(_loopback(), f"log.dirs={file / 'data'}"), f"Failed to create data directory {file / 'data'}")


def test_a_log_dir_that_cannot_be_written(tmp_path):
    # the tests run as root, whom permission bits do not stop; sysfs refuses new files even to root
    unwritable = Path("/sys/kernel")
    assert unwritable.is_dir()
    _refused(_serve(_loopback(), f"log.dirs={tmp_path / 'ok'},{unwritable}"),
             f"Disk error while locking directory {unwritable}")


def test_a_missing_log_dir_is_created(fresh_kbroker, tmp_path, kt):
    # the fixture's data dir exists; this one does not, with its parents: Kafka creates it (mkdir -p)
    missing = tmp_path / "a" / "b" / "data"
    fresh_kbroker.stop()
    fresh_kbroker.overrides["log.dirs"] = str(missing)
    fresh_kbroker.data_dir = missing
    fresh_kbroker.start()
    assert (missing / ".lock").exists()


@pytest.mark.parametrize("override, words", [
    ("log.segment.bytes=10", "Invalid value 10 for configuration log.segment.bytes: Value must be at least 14"),
    ("num.partitions=0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ("log.retention.ms=0", "Invalid value 0 for configuration log.retention.ms: "
                           "log.retention.ms must be unlimited (-1) or, greater than or equal to 1"),
    ("log.cleaner.min.cleanable.ratio=1.5", "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: "
                                            "Value must be no more than 1"),
    ("message.max.bytes=ten", "Invalid value ten for configuration message.max.bytes: Not a number of type INT"),
    ("metrics.listener=127.0.0.1:9404", "Invalid value 127.0.0.1:9404 for configuration metrics.listener: "
                                        "expected http://host:port"),
])
def test_a_value_outside_kafkas_validator(tmp_path, override, words):
    _refused(_serve(_loopback(), f"log.dirs={tmp_path}", override), words)
    assert not (tmp_path / ".lock").exists()  # refused before any file was touched


def test_an_unknown_config_file(tmp_path):
    _refused(_serve(_loopback(), config=tmp_path / "server.properties"),
             f"cannot read the --config file {tmp_path / 'server.properties'}: No such file or directory")


def test_recovery_after_a_crash_logs_its_progress_and_its_phases(fresh_kbroker, kt):
    """40 partitions written, the broker SIGKILLed (no clean shutdown marker: every log is
    recovered): the restart logs one progress line with 40/40 and the count recovered, a line per
    start-up phase, and serves every acknowledged record."""
    confluent = kt.require_module("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = kt.topic_name("startup", "recovery")
    admin = AdminClient({"bootstrap.servers": fresh_kbroker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=40, replication_factor=1)])[topic].result(20)
    producer = confluent.Producer({"bootstrap.servers": fresh_kbroker.bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[int, list[bytes]] = {}

    def delivered(err, msg):
        assert err is None, err
        acked.setdefault(msg.partition(), []).append(msg.value())

    for i in range(400):
        producer.produce(topic, b"r%d" % i, partition=i % 40, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert sum(map(len, acked.values())) == 400
    fresh_kbroker.kill()
    fresh_kbroker.start()
    restart_log = fresh_kbroker.stderr_path.read_text().rsplit("===== start #", 1)[-1]
    progress = [line for line in restart_log.splitlines() if "partition logs (" in line]
    assert progress, restart_log[-3000:]
    final = progress[-1].split("loaded ", 1)[1]
    done, total = final.split(" ", 1)[0].split("/")
    assert done == total and int(total) >= 40, final  # internal topics' partitions count too
    assert int(final.split("(", 1)[1].split(" ", 1)[0]) >= 40, final  # every written log was recovered
    for phase in ("log dirs locked, listeners bound", "partition logs loaded", "replicas ready",
                  "transactions and delayed messages loaded"):
        assert f"start-up: {phase} (" in restart_log, phase
    assert "Traceback" not in restart_log
    consumer = confluent.Consumer({"bootstrap.servers": fresh_kbroker.bootstrap, "group.id": topic,
                                   "enable.auto.commit": False})
    consumer.assign([confluent.TopicPartition(topic, p, 0) for p in range(40)])
    got: dict[int, list[bytes]] = {}
    deadline_polls = 200
    while sum(map(len, got.values())) < 400 and deadline_polls:
        deadline_polls -= 1
        for message in consumer.consume(500, 0.2):
            if not message.error():
                got.setdefault(message.partition(), []).append(message.value())
    consumer.close()
    assert got == acked  # everything acknowledged, in order per partition, nothing twice
