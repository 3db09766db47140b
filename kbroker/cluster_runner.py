"""Local clusters: a standalone ZooKeeper server (Debian's `zookeeper` package) and kbroker broker
processes on loopback, for `kbroker dev-cluster` and for tests.

Every process is started by PID and stopped by PID (SIGTERM, then SIGKILL after a grace period);
nothing else on the machine is touched. Readiness is checked on the wire: ZooKeeper's `srvr`
four-letter command (`ruok` answers before it serves), a broker's ApiVersions v0.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")


class ClusterError(Exception):
    pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def zookeeper_classpath() -> str | None:
    """Debian's zookeeper jar (its manifest names its dependencies), or None when it is missing."""
    if not all(Path(j).exists() for j in ZOOKEEPER_JARS) or shutil.which("java") is None:
        return None
    return ":".join(ZOOKEEPER_JARS)


def _stop(proc: subprocess.Popen, grace_s: float) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
        proc.terminate()
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    except ProcessLookupError:
        pass


@dataclass
class ZooKeeperServer:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    tick_ms: int = 500  # short ticks allow the short session timeouts fault tests use
    max_session_ms: int = 60000  # ZooKeeper's default cap (20 ticks) would cut longer sessions to 10 s
    proc: subprocess.Popen | None = None
    log_path: Path | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> "ZooKeeperServer":
        classpath = zookeeper_classpath()
        if classpath is None:
            raise ClusterError("ZooKeeper is not installed (Debian: apt-get install zookeeper) or java is missing")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port(self.host)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_ms}\ndataDir={self.data_dir / 'data'}\nclientPort={self.port}\n"
            f"clientPortAddress={self.host}\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            f"minSessionTimeout={2 * self.tick_ms}\nmaxSessionTimeout={self.max_session_ms}\n"
            f"4lw.commands.whitelist=srvr,ruok\n")
        self.log_path = self.data_dir / "zookeeper.log"
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Dzookeeper.admin.enableServer=false", "-cp", classpath,
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)],
            stdout=self.log_path.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ClusterError(f"ZooKeeper exited with {self.proc.returncode}: {self.log_tail()}")
            if self.serving():
                return self
            time.sleep(0.1)
        self.stop()
        raise ClusterError(f"ZooKeeper did not serve within {timeout_s} s: {self.log_tail()}")

    def serving(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as s:
                s.sendall(b"srvr")
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
            return b"Mode:" in data
        except OSError:
            return False

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:] if self.log_path else ""
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc, 10)


def broker_ready(host: str, port: int, timeout_s: float = 1.0, ssl_context: ssl.SSLContext | None = None) -> bool:
    """ApiVersions v0 answered with error 0 (over TLS with `ssl_context`: an SSL or SASL_SSL
    listener; a SASL listener answers ApiVersions before authentication)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw, \
                (ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context else raw) as s:
            client = b"kbroker-runner"
            payload = struct.pack(">hhih", 18, 0, 1, len(client)) + client
            s.sendall(struct.pack(">i", len(payload)) + payload)
            head = s.recv(10)
            return len(head) >= 10 and struct.unpack(">h", head[8:10])[0] == 0
    except OSError:
        return False


@dataclass
class BrokerProcess:
    broker_id: int
    data_dir: Path
    zookeeper_connect: str
    host: str = "127.0.0.1"
    port: int = 0
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    log_dir_count: int = 1  # several: data-1, data-2, ... (JBOD)
    protocol: str = "PLAINTEXT"  # the listener's (named after it); its security keys in config_file
    config_file: Path | None = None  # a server.properties read before the overrides
    ssl_context: ssl.SSLContext | None = None  # how the readiness check reaches an SSL listener
    advertised_host: str | None = None  # what clients are told (advertised.listeners); None: `host`

    @property
    def log_dirs(self) -> list[Path]:
        if self.log_dir_count == 1:
            return [self.data_dir / "data"]
        return [self.data_dir / f"data-{i}" for i in range(1, self.log_dir_count + 1)]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        settings = {
            "broker.id": str(self.broker_id),
            "zookeeper.connect": self.zookeeper_connect,
            "listeners": f"{self.protocol}://{self.host}:{self.port}",
            "log.dirs": ",".join(map(str, self.log_dirs)),
            **({"advertised.listeners": f"{self.protocol}://{self.advertised_host}:{self.port}"}
               if self.advertised_host else {}),
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "kbroker", "serve"]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, wait: bool = True, timeout_s: float = 60.0) -> "BrokerProcess":
        self.port = self.port or free_port(self.host)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.data_dir / "broker.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL,
                                     stderr=self.log_path.open("ab"), env=env, start_new_session=True)
        if wait:
            self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise ClusterError(f"broker {self.broker_id} exited: {self.log_tail()}")
            if broker_ready(self.host, self.port, ssl_context=self.ssl_context):
                return
            time.sleep(0.1)
        raise ClusterError(f"broker {self.broker_id} did not serve within {timeout_s} s: {self.log_tail()}")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9."""
        if self.running:
            self.proc.kill()
            self.proc.wait(10)

    def pause(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self, grace_s: float = 60.0) -> int | None:
        """SIGTERM (a controlled shutdown in a cluster), SIGKILL after `grace_s`."""
        if self.proc is not None:
            _stop(self.proc, grace_s)
            return self.proc.returncode
        return None

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:] if self.log_path else ""
        except OSError:
            return ""


@dataclass
class LocalCluster:
    """ZooKeeper plus N brokers (ids 1..N) under `base_dir`, on 127.0.0.1."""

    base_dir: Path
    size: int = 3
    overrides: dict[str, str] = field(default_factory=dict)
    zookeeper_connect: str | None = None  # an existing ZooKeeper instead of starting one
    chroot: str = "/kbroker"
    log_dirs_per_broker: int = 1
    protocol: str = "PLAINTEXT"  # the brokers' one listener; its security keys in config_file
    config_file: Path | None = None
    ssl_context: ssl.SSLContext | None = None
    zookeeper: ZooKeeperServer | None = None
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    broker_ports: dict[int, int] = field(default_factory=dict)  # broker id -> its port (unset: a free one)
    zookeeper_port: int = 0  # the ZooKeeper this starts (0: a free port)
    advertised_host: str | None = None  # the brokers' advertised.listeners host (None: 127.0.0.1)
    broker_overrides: dict[int, dict[str, str]] = field(default_factory=dict)  # broker id -> its own keys

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def start(self) -> "LocalCluster":
        try:
            if self.zookeeper_connect is None:
                self.zookeeper = ZooKeeperServer(self.base_dir / "zookeeper", port=self.zookeeper_port).start()
                connect = self.zookeeper.connect
            else:
                connect = self.zookeeper_connect
            for broker_id in range(1, self.size + 1):
                self.add_broker(broker_id, f"{connect}{self.chroot}", wait=False)
            for broker in self.brokers.values():
                broker.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def add_broker(self, broker_id: int, connect: str | None = None, wait: bool = True) -> BrokerProcess:
        if connect is None:
            connect = next(iter(self.brokers.values())).zookeeper_connect
        factor = str(min(3, self.size))
        overrides = {"offsets.topic.replication.factor": factor, "default.replication.factor": "1",
                     **self.overrides, **self.broker_overrides.get(broker_id, {})}
        broker = BrokerProcess(broker_id, self.base_dir / f"broker-{broker_id}", connect, overrides=overrides,
                               log_dir_count=self.log_dirs_per_broker, protocol=self.protocol,
                               config_file=self.config_file, ssl_context=self.ssl_context,
                               port=self.broker_ports.get(broker_id, 0) or self._unused_port(),
                               advertised_host=self.advertised_host)
        self.brokers[broker_id] = broker
        return broker.start(wait=wait)

    def _unused_port(self) -> int:
        """A free port no other broker of this cluster was given: brokers start side by side, and a
        port handed to one that has not bound it yet is free again to the operating system."""
        taken = {b.port for b in self.brokers.values()} | set(self.broker_ports.values())
        port = free_port()
        while port in taken:
            port = free_port()
        return port

    def stop(self, grace_s: float = 30.0) -> tuple[list[BrokerProcess], set[int]]:
        """One SIGTERM to every broker at once (each does a controlled shutdown: a second SIGTERM
        would only make it die by the signal once done), SIGKILL for any still running after
        `grace_s`, then ZooKeeper. Returns the brokers that were running and the ids killed."""
        running = [b for b in self.brokers.values() if b.running]
        killed: set[int] = set()
        for broker in running:
            broker.resume()
            broker.proc.terminate()
        deadline = time.monotonic() + grace_s
        for broker in running:
            try:
                broker.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                broker.proc.kill()
                broker.proc.wait(10)
                killed.add(broker.broker_id)
        if self.zookeeper is not None:
            self.zookeeper.stop()
        return running, killed
