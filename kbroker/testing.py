"""A kbroker for users' own test suites: `KafkaContainer` with the calls of testcontainers' Kafka
module, and a pytest plugin (`pytest -p kbroker.testing`, fixtures `kafka_bootstrap` and
`kafka_broker`).

A suite written for a Docker Kafka switches by one import::

    from kbroker.testing import KafkaContainer   # was: from testcontainers.kafka import KafkaContainer

    with KafkaContainer() as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.get_bootstrap_server())

The broker is the embedded single node on 127.0.0.1, a free port and a temporary data directory
deleted on `stop()`. It runs in a thread of the calling process by default (`mode="thread"`:
ready in tens of milliseconds once kbroker is imported) or as a `python -m kbroker serve` child
process (`mode="process"`: its own interpreter, for suites that fork or want the broker's CPU apart);
the environment variable KBROKER_TEST_MODE sets the default, so a suite switches without an edit.
The container's image is accepted and ignored; `with_env("KAFKA_...")` is read as the Confluent image
reads it (KAFKA_LOG_RETENTION_MS → log.retention.ms), so a suite's broker settings carry over.

Secured listeners (kbroker's own calls): `with_tls()` serves TLS with a throwaway CA made for the
broker (kbroker.devcerts), `with_sasl(mechanism, username, password)` SASL with that one client
user (PLAIN, SCRAM-SHA-256/512, or OAUTHBEARER's unsecured tokens); both make SASL_SSL, and
`KafkaContainer(security_protocol="SASL_SSL")` is the same with the defaults. `get_client_config()`
is then what a Kafka client needs (Kafka's keys), `get_confluent_config()` and
`get_kafka_python_config()` the same for those libraries, `get_ca_file()` the CA to trust.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

__all__ = ["KafkaContainer", "KbrokerError", "kafka_broker", "kafka_bootstrap"]

# What testcontainers' Kafka module sets for a one-broker test cluster, as kbroker keys.
TEST_DEFAULTS = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}
# The container's network settings: kbroker listens on loopback itself.
_CONTAINER_ONLY_ENV = {"KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                       "KAFKA_INTER_BROKER_LISTENER_NAME", "KAFKA_ZOOKEEPER_CONNECT", "KAFKA_PROCESS_ROLES",
                       "KAFKA_CONTROLLER_QUORUM_VOTERS", "KAFKA_CONTROLLER_LISTENER_NAMES", "KAFKA_NODE_ID"}
_SERVING = re.compile(r"serving on [^ ]+:(\d+)")
START_TIMEOUT_S = 30.0


class KbrokerError(RuntimeError):
    """The broker could not start (its reason, as `kbroker serve` would print it)."""


def config_key_of_env(name: str) -> str | None:
    """The broker key a Confluent image reads from environment variable `name` (KAFKA_FOO_BAR →
    foo.bar, `__` → `_`, `___` → `-`), or None when it is not a broker key."""
    if not name.startswith("KAFKA_") or name in _CONTAINER_ONLY_ENV:
        return None
    key = name[len("KAFKA_"):].lower()
    return key.replace("___", "\0").replace("__", "\1").replace("_", ".").replace("\0", "-").replace("\1", "_")


class KafkaContainer:
    """A kbroker with testcontainers' `KafkaContainer` calls. The container's log-wait pattern,
    listener name and extra keyword arguments (volumes, networks) are accepted and have no meaning
    here."""

    def __init__(self, image: str = "confluentinc/cp-kafka:7.6.0", port: int = 9093,
                 wait_strategy_check_string: str = "", listener_name: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT", *, mode: str | None = None,
                 config: dict[str, str] | None = None, **_docker_options: Any) -> None:
        if security_protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise KbrokerError(f"security_protocol {security_protocol!r}: one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
                               f"SASL_SSL")
        mode = mode or os.environ.get("KBROKER_TEST_MODE", "thread")
        if mode not in ("thread", "process"):
            raise ValueError(f"mode must be 'thread' or 'process', not {mode!r}")
        self.image = image
        self.port = port  # the "container" port; get_exposed_port maps it to the real one
        self.mode = mode
        self.env: dict[str, str] = {}
        self.config: dict[str, str] = dict(TEST_DEFAULTS)
        self.config.update(config or {})
        self.cluster_id: str | None = None
        self.data_dir: Path | None = None
        self._bound_port: int | None = None
        self._thread: threading.Thread | None = None
        self._trio_token = None
        self._stop_scope = None
        self._proc: subprocess.Popen | None = None
        self.log_path: Path | None = None  # the child process's output (mode="process")
        self._tls = security_protocol in ("SSL", "SASL_SSL")
        self._sasl: tuple[str, str, str] | None = None  # (mechanism, username, password)
        self.security = None  # the started broker's kbroker.dev_security.SecuritySetup, when secured
        if security_protocol.startswith("SASL_"):
            self.with_sasl()

    # --- testcontainers' calls ---------------------------------------------------------------------

    def with_env(self, key: str, value: Any) -> "KafkaContainer":
        self.env[key] = str(value)
        config_key = config_key_of_env(key)
        if config_key is not None:
            self.config[config_key] = str(value)
        return self

    def with_kraft(self) -> "KafkaContainer":
        return self  # the embedded broker needs no ZooKeeper either way

    def with_cluster_id(self, cluster_id: str) -> "KafkaContainer":
        self.cluster_id = cluster_id
        return self

    def with_config(self, key: str, value: Any) -> "KafkaContainer":
        """kbroker's own: set a broker config key (Kafka's name) before `start()`."""
        self.config[key] = str(value)
        return self

    def with_tls(self) -> "KafkaContainer":
        """kbroker's own: serve TLS (SSL, or SASL_SSL with `with_sasl`) with a certificate for
        127.0.0.1 and localhost signed by a CA made for this broker (`get_ca_file()`)."""
        self._tls = True
        return self

    def with_sasl(self, mechanism: str = "SCRAM-SHA-512", username: str = "test",
                  password: str | None = None) -> "KafkaContainer":
        """kbroker's own: require SASL (SASL_PLAINTEXT, or SASL_SSL with `with_tls`) and create one
        client user: a SCRAM credential, a PLAIN user, or (OAUTHBEARER) the unsecured token's
        subject. The password is random when not given; `get_client_config()` has it."""
        mechanism = mechanism.upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"):
            raise KbrokerError(f"SASL mechanism {mechanism!r}: one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER")
        self._sasl = (mechanism, username, secrets.token_urlsafe(12) if password is None else password)
        return self

    @property
    def security_protocol(self) -> str:
        return ("SASL_" if self._sasl else "") + ("SSL" if self._tls else "PLAINTEXT")

    def get_client_config(self) -> dict[str, str]:
        """kbroker's own: Kafka's client keys for this broker (bootstrap.servers, security.protocol,
        sasl.mechanism, sasl.jaas.config, ssl.truststore.type/location), what Kafka's Java clients
        and `kbroker ... --command-config` read."""
        bootstrap = self.get_bootstrap_server()
        if self.security is None:
            return {"bootstrap.servers": bootstrap, "security.protocol": "PLAINTEXT"}
        return self.security.client_config(bootstrap)

    def get_confluent_config(self) -> dict[str, str]:
        """kbroker's own: the same as confluent-kafka (librdkafka) settings."""
        bootstrap = self.get_bootstrap_server()
        if self.security is None:
            return {"bootstrap.servers": bootstrap}
        return self.security.confluent_config(bootstrap)

    def get_kafka_python_config(self) -> dict[str, Any]:
        """kbroker's own: the same as kafka-python keyword arguments (OAUTHBEARER needs a
        sasl_oauth_token_provider besides)."""
        bootstrap = self.get_bootstrap_server()
        if self.security is None:
            return {"bootstrap_servers": bootstrap}
        return self.security.kafka_python_config(bootstrap)

    def get_ca_file(self) -> str | None:
        """kbroker's own: the PEM file of the CA that signed the broker's certificate (None without TLS)."""
        self.get_bootstrap_server()  # started?
        certs = self.security.certs if self.security is not None else None
        return str(certs.ca_file) if certs is not None else None

    def get_container_host_ip(self) -> str:
        return "127.0.0.1"

    def get_exposed_port(self, port: int) -> int:
        if self._bound_port is None:
            raise KbrokerError("the broker is not started")
        if int(port) != self.port:
            raise KbrokerError(f"port {port} is not exposed (the broker's port is {self.port})")
        return self._bound_port

    def get_bootstrap_server(self) -> str:
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(self.port)}"

    def start(self, timeout: int = int(START_TIMEOUT_S)) -> "KafkaContainer":
        if self._bound_port is not None:
            return self
        self.data_dir = Path(tempfile.mkdtemp(prefix="kbroker-test-"))
        try:
            self._prepare_security()
            if self.mode == "thread":
                self._start_thread(timeout)
            else:
                self._start_process(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        if self._thread is not None:
            import trio

            if self._stop_scope is not None:  # else its run never got as far as serving
                try:
                    trio.from_thread.run_sync(self._stop_scope.cancel, trio_token=self._trio_token)
                except trio.RunFinishedError:
                    pass  # it already ended
            self._thread.join(START_TIMEOUT_S)
            self._thread = self._stop_scope = self._trio_token = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()  # the process we started, by PID
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(10)
            self._proc = None
        self._bound_port = None
        self.security = None
        if self.data_dir is not None and delete_volume:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            if self.log_path is not None:
                self.log_path.unlink(missing_ok=True)
            self.data_dir = self.log_path = None

    def __enter__(self) -> "KafkaContainer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: Any) -> None:
        self.stop()

    # --- the two ways to run it --------------------------------------------------------------------

    def _prepare_security(self) -> None:
        """The certificates, the user's credential and the broker keys of a secured listener."""
        if not (self._tls or self._sasl):
            return
        from kbroker.dev_security import SecuritySetup, write_scram_credential
        from kbroker.devcerts import make_dev_certificates

        assert self.data_dir is not None
        certs = make_dev_certificates(self.data_dir / "dev-security") if self._tls else None
        mechanism, username, password = self._sasl or (None, None, None)
        self.security = SecuritySetup(self.security_protocol, certs, mechanism, username, password,
                                      secrets.token_urlsafe(18) if self._sasl else None)
        write_scram_credential(self.data_dir, self.security.scram_users())

    def _security_overrides(self) -> dict[str, str]:
        """The secured listener's keys (passwords among them), on a free port."""
        return self.security.broker_config("127.0.0.1", 0) if self.security is not None else {}

    def _overrides(self) -> dict[str, str]:
        overrides = dict(self.config)
        overrides["listeners"] = "PLAINTEXT://127.0.0.1:0"  # a free port, read back once bound
        overrides.update(self._security_overrides())
        overrides["log.dirs"] = str(self.data_dir)
        if self.cluster_id:
            overrides["cluster.id"] = self.cluster_id
        return overrides

    def _start_thread(self, timeout: float) -> None:
        import trio

        from kbroker.config import BrokerConfig
        from kbroker.errors import InvalidConfigError
        from kbroker.server.server import KafkaServer

        try:
            config = BrokerConfig.from_dict(self._overrides())
        except InvalidConfigError as exc:
            raise KbrokerError(f"kbroker did not start: {exc}") from None
        ready = threading.Event()
        outcome: dict[str, Any] = {}

        async def run() -> None:
            self._trio_token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._stop_scope = scope
                async with trio.open_nursery() as nursery:
                    server = await nursery.start(KafkaServer(config).run)
                    outcome["port"] = server.port
                    ready.set()

        def main() -> None:
            try:
                trio.run(run)
            except BaseException as exc:  # noqa: BLE001 - handed to start()'s caller
                outcome["error"] = exc
            finally:
                ready.set()

        self._thread = threading.Thread(target=main, name="kbroker", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise KbrokerError(f"kbroker did not start within {timeout} s")
        if "error" in outcome:
            raise KbrokerError(f"kbroker did not start: {_reason(outcome['error'])}") from outcome["error"]
        self._bound_port = outcome["port"]

    def _start_process(self, timeout: float) -> None:
        assert self.data_dir is not None
        argv = [sys.executable, "-m", "kbroker", "serve"]
        overrides = self._overrides()
        secured = self._security_overrides()
        if secured:  # passwords go in an owner-only file, not on the command line
            from kbroker.dev_security import write_properties

            path = write_properties(self.data_dir / "dev-security" / "server.properties",
                                    {k: overrides.pop(k) for k in secured}, "kbroker.testing's secured listener")
            argv += ["--config", str(path)]
        for key, value in overrides.items():
            argv += ["--override", f"{key}={value}"]
        log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                          start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log_path.read_text(errors="replace")
            found = _SERVING.search(text)
            if found:
                self._bound_port = int(found.group(1))
                return
            if self._proc.poll() is not None:
                raise KbrokerError(f"kbroker exited with status {self._proc.returncode}: {text.strip()[-2000:]}")
            time.sleep(0.01)
        raise KbrokerError(f"kbroker did not start within {timeout} s")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_reason(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


# --- the pytest plugin (`pytest -p kbroker.testing`) -------------------------------------------------

try:
    import pytest
except ImportError:  # the plugin needs pytest; KafkaContainer does not
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def kafka_broker() -> Iterator[KafkaContainer]:
        """One kbroker for the test session (`KBROKER_TEST_MODE=process` runs it as a child process)."""
        with KafkaContainer() as broker:
            yield broker

    @pytest.fixture(scope="session")
    def kafka_bootstrap(kafka_broker: KafkaContainer) -> str:
        """`host:port` of the session's kbroker, for `bootstrap_servers`."""
        return kafka_broker.get_bootstrap_server()
