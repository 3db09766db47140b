"""`kbroker dev-cluster`: what a user gets. It starts ZooKeeper and N brokers, prints their PIDs and
one `bootstrap:` line, serves a stock client (confluent-kafka) with replication factor 3, and on
SIGTERM stops every process it started and exits 0; a missing ZooKeeper, a broker that cannot
start or bad options are one line on stderr and exit status 2, with nothing left running.

Processes are found and, if a test fails half-way, killed by the PIDs the command printed, and
only while their command line still names the test's directory."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import clusterkit as ck
from kbroker.cli import main

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 120
FAST = ["--override", "controlled.shutdown.retry.backoff.ms=500", "--override", "group.initial.rebalance.delay.ms=0",
        "--base-port", "0", "--zookeeper-port", "0"]  # free ports: 9092... and 2181 stay the user's (test_dev_cluster_ports.py)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running (a zombie, exited but not yet reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def _processes_naming(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (every process a run in `marker` started does)."""
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit() and int(entry) != os.getpid() and marker in _cmdline(int(entry)) and _alive(int(entry)):
            found.append(int(entry))
    return found


class DevCluster:
    """`python -m kbroker dev-cluster` as a subprocess, its output read line by line."""

    def __init__(self, base: Path, *args: str, env: dict | None = None) -> None:
        self.base = base
        self.proc = subprocess.Popen([sys.executable, "-m", "kbroker", "dev-cluster", "--dir", str(base), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env, start_new_session=True)
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self._queue), daemon=True).start()
        self._err_thread = threading.Thread(target=self._collect_stderr, daemon=True)
        self._err_thread.start()

    @staticmethod
    def _pump(stream, q) -> None:
        for line in stream:
            q.put(line.rstrip("\n"))
        q.put(None)

    def _collect_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "\n".join(self._stderr)

    def wait_for_line(self, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no {prefix!r} line (exit status {self.proc.poll()})\nstdout:\n"
                             + "\n".join(self.lines) + f"\nstderr:\n{self.stderr}\n{self.logs()}")

    def drain(self) -> None:
        while True:
            try:
                line = self._queue.get(timeout=2)
            except queue.Empty:
                return
            if line is None:
                return
            self.lines.append(line)

    def pids(self) -> dict[str, int]:
        """'zookeeper' / 'broker N' -> PID, as printed."""
        out = {}
        for line in self.lines:
            m = re.match(r"(zookeeper|broker \d+): \S+ \(pid (\d+)\)", line)
            if m:
                out[m.group(1)] = int(m.group(2))
        return out

    def wait(self, timeout_s: float) -> int:
        rc = self.proc.wait(timeout_s)
        self._err_thread.join(5)
        self.drain()
        return rc

    def logs(self) -> str:
        parts = []
        for log in sorted(self.base.glob("broker-*/broker.log")) + sorted(self.base.glob("zookeeper/zookeeper.log")):
            parts.append(f"--- {log.relative_to(self.base)} ---\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def cleanup(self) -> None:
        """After a failure: kill the command and whatever it started (by the PIDs it printed, while
        they still name our directory)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in set(self.pids().values()) | set(_processes_naming(str(self.base))):
            if str(self.base) in _cmdline(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture
def base(tmp_path):
    return tmp_path / "cluster"


def test_dev_cluster_serves_a_replicated_cluster_and_stops_everything_on_sigterm(base):
    ck.require_zookeeper()
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    dc = DevCluster(base, "--brokers", "3", *FAST)
    try:
        bootstrap = dc.wait_for_line("bootstrap: ", START_TIMEOUT_S).split(" ", 1)[1]
        dc.wait_for_line("kbroker dev-cluster: 3 brokers running", 10)
        pids = dc.pids()
        assert sorted(pids) == ["broker 1", "broker 2", "broker 3", "zookeeper"], dc.lines
        assert all(_alive(pid) for pid in pids.values())
        addresses = bootstrap.split(",")
        assert len(addresses) == 3 and all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in addresses)
        for i in (1, 2, 3):
            assert (base / f"broker-{i}" / "broker.log").exists() and (base / f"broker-{i}" / "data").is_dir()
            assert f"broker-{i}" in _cmdline(pids[f"broker {i}"])
        assert any(line.startswith("logs: ") for line in dc.lines)

        # a second dev-cluster on the same directory is refused, not started beside it
        second = subprocess.run([sys.executable, "-m", "kbroker", "dev-cluster", "--brokers", "1", "--dir", str(base)],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and "in use" in second.stderr, second.stderr

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("dev-rf3", num_partitions=3, replication_factor=3)])["dev-rf3"].result(60)

        def full_isr():
            parts = admin.list_topics("dev-rf3", timeout=10).topics["dev-rf3"].partitions
            return len(parts) == 3 and all(p.leader in (1, 2, 3) and sorted(p.isrs) == [1, 2, 3]
                                           and sorted(p.replicas) == [1, 2, 3] for p in parts.values())

        ck.wait_for(full_isr, 60, "dev-rf3 with 3 replicas, all in the ISR")

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(100):
            producer.produce("dev-rf3", key=str(i).encode(), value=f"v{i}".encode())
        assert producer.flush(60) == 0

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dev-cluster-test",
                             "auto.offset.reset": "earliest", "enable.auto.commit": True})
        consumer.subscribe(["dev-rf3"])
        seen = set()
        deadline = time.monotonic() + 90
        while len(seen) < 100 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.add(msg.value().decode())
        consumer.close()
        assert seen == {f"v{i}" for i in range(100)}

        # the schema registry is on by default: registered through one broker, served by another
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
        line = next(line for line in dc.lines if line.startswith("schema registry: "))  # printed before "running"
        registries = line.split(": ", 1)[1].split(" (")[0].split(", ")
        assert len(registries) == 3 and all(re.fullmatch(r"http://127\.0\.0\.1:\d+", url) for url in registries)
        schema = '{"type": "record", "name": "Dev", "fields": [{"name": "x", "type": "int"}]}'
        schema_id = SchemaRegistryClient({"url": registries[0]}).register_schema("dev-value", Schema(schema, "AVRO"))
        assert SchemaRegistryClient({"url": registries[2]}).get_schema(schema_id).schema_str == schema.replace(" ", "")

        # the group's offsets live in __consumer_offsets, replicated min(3, N) = 3 times
        offsets = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
        assert offsets and all(len(p.replicas) == 3 for p in offsets.values())

        dc.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        if dc.proc.poll() is None:  # an impatient second one: the stop goes on undisturbed
            dc.proc.send_signal(signal.SIGTERM)
        rc = dc.wait(STOP_TIMEOUT_S)
        assert rc == 0, f"exit status {rc}\nstdout:\n" + "\n".join(dc.lines) + f"\nstderr:\n{dc.stderr}\n{dc.logs()}"
        assert dc.lines[-1] == "kbroker dev-cluster: stopped"
        assert all(line == "kbroker dev-cluster: still stopping (brokers get 30 s for a controlled shutdown)"
                   for line in dc._stderr), dc.stderr
        still = [name for name, pid in pids.items() if _alive(pid) and str(base) in _cmdline(pid)]
        assert not still, f"still running after dev-cluster exited: {still}"
        assert _processes_naming(str(base)) == []
        for i in (1, 2, 3):  # every broker went through a clean shutdown
            assert "kbroker stopped" in (base / f"broker-{i}" / "broker.log").read_text()
    finally:
        dc.cleanup()


def test_dev_cluster_without_zookeeper_is_one_line_and_status_2(tmp_path, base):
    """No java on PATH is what a machine without Debian's zookeeper package looks like to it."""
    empty = tmp_path / "bin"
    empty.mkdir()
    dc = DevCluster(base, "--brokers", "3", env=dict(os.environ, PATH=str(empty)))
    try:
        rc = dc.wait(60)
        assert rc == 2
        assert dc.lines == []
        assert len(dc._stderr) == 1, dc.stderr
        assert dc.stderr.startswith("kbroker dev-cluster: ") and "ZooKeeper is not installed" in dc.stderr
        assert not base.exists()  # nothing was started, nothing written
    finally:
        dc.cleanup()


def test_dev_cluster_broker_failing_to_start_stops_everything_with_status_2(base):
    ck.require_zookeeper()
    (base / "broker-2").mkdir(parents=True)
    (base / "broker-2" / "data").write_text("a file where broker 2's log directory should be")
    dc = DevCluster(base, "--brokers", "2", "--base-port", "0", "--zookeeper-port", "0")
    try:
        rc = dc.wait(START_TIMEOUT_S)
        assert rc == 2, "\n".join(dc.lines) + dc.stderr
        assert len(dc._stderr) == 1, dc.stderr
        assert dc.stderr.startswith("kbroker dev-cluster: broker 2 exited during start-up"), dc.stderr
        assert "Traceback" not in dc.stderr
        pids = dc.pids()
        assert "zookeeper" in pids  # it had started ZooKeeper; now it is gone, with broker 1
        assert not _alive(pids["zookeeper"]) or str(base) not in _cmdline(pids["zookeeper"])
        assert _processes_naming(str(base)) == []
    finally:
        dc.cleanup()


@pytest.mark.parametrize("args, message", [
    (["--brokers", "0"], "--brokers must be at least 1"),
    (["--brokers", "2", "--override", "broker.id=7"], "--override broker.id is not allowed"),
    (["--brokers", "2", "--override", "log.dirs=/elsewhere"], "--override log.dirs is not allowed"),
    (["--brokers", "2", "--override", "num.partitions=many"], "num.partitions"),
    (["--brokers", "2", "--override", "num.partitions"], "key=value"),
])
def test_dev_cluster_refuses_bad_options(capsys, base, args, message):
    assert main(["dev-cluster", "--dir", str(base), *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err, err
    assert not base.exists()


def test_dev_cluster_with_an_unreachable_zookeeper(capsys, base):
    from kbroker.cluster_runner import free_port

    port = free_port()  # nothing listens there
    assert main(["dev-cluster", "--brokers", "1", "--dir", str(base), "--zookeeper", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1


def test_local_cluster_stop_sends_each_broker_one_sigterm(tmp_path):
    """LocalCluster.stop() sends every broker SIGTERM, then BrokerProcess.stop() sends it SIGTERM
    again while it is still in its controlled shutdown. A broker takes a second SIGTERM received
    while shutting down as a reason to die by the signal once done (trio re-delivers a pending
    signal when its receiver closes): it exits with status -15 instead of 0 after a clean stop."""
    from kbroker.cluster_runner import BrokerProcess, LocalCluster

    class StillShuttingDown:
        """A broker process that is in its controlled shutdown until waited for."""

        def __init__(self) -> None:
            self.signals: list[int] = []
            self.returncode = None
            self.pid = 1 << 22

        def poll(self):
            return self.returncode

        def send_signal(self, signum):
            self.signals.append(signum)

        def terminate(self):
            self.signals.append(signal.SIGTERM)

        def kill(self):
            self.signals.append(signal.SIGKILL)
            self.returncode = -9

        def wait(self, timeout=None):
            self.returncode = 0 if signal.SIGTERM in self.signals else -9
            return self.returncode

    cluster = LocalCluster(tmp_path, 2)
    fakes = {}
    for broker_id in (1, 2):
        fakes[broker_id] = StillShuttingDown()
        cluster.brokers[broker_id] = BrokerProcess(broker_id, tmp_path / f"broker-{broker_id}", "zk", proc=fakes[broker_id])
    cluster.stop()
    assert {b: f.signals.count(signal.SIGTERM) for b, f in fakes.items()} == {1: 1, 2: 1}
