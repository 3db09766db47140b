"""Secured development setups in one command, used by stock clients:

- `kbroker serve --dev-security`: one SASL_SSL listener (no PLAINTEXT port) with a throwaway CA,
  SCRAM-SHA-512 and PLAIN, an `admin` user; confluent-kafka and kafka-python produce and consume
  with the settings it prints, `kbroker topics list --command-config client.properties` works, a
  client without credentials (or with a wrong password) is refused, and a restart keeps the files;
- kbroker.testing's `KafkaContainer().with_tls().with_sasl(...)` used by confluent-kafka;
- `kbroker dev-cluster --brokers 2 --security sasl_ssl`: a replicated topic through confluent-kafka
  and `kbroker topics describe --command-config`.

Processes are started and stopped by PID."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbroker.config import parse_properties
from kbroker.testing import KafkaContainer

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 30
SERVING = re.compile(r"serving on SASL_SSL://127\.0\.0\.1:(\d+)")


def kbroker(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kbroker", *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, stdin=subprocess.DEVNULL)


class DevSecurityBroker:
    """`python -m kbroker serve --dev-security` on a port of ours; stdout and stderr in files."""

    def __init__(self, workdir: Path, port: int) -> None:
        self.workdir, self.port = workdir, port
        self.data = workdir / "data"
        self.out, self.err = workdir / "serve.out", workdir / "serve.err"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> DevSecurityBroker:
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "kbroker", "serve", "--dev-security",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "--override", f"log.dirs={self.data}",
                "--override", "group.initial.rebalance.delay.ms=0", "--override", "offsets.topic.num.partitions=1"]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not SERVING.search(self.err.read_text(errors="replace")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"serve --dev-security did not start (status {self.proc.poll()}):\n"
                                     f"{self.out.read_text()}\n{self.err.read_text()[-3000:]}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the process we started, by PID
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    @property
    def printed(self) -> str:
        return self.out.read_text()

    def printed_config(self, library: str) -> dict:
        found = re.search(rf"^  {re.escape(library)}: (\{{.*\}})$", self.printed, re.MULTILINE)
        assert found, self.printed
        return json.loads(found.group(1))

    @property
    def properties(self) -> Path:
        found = re.search(r"^  client properties: (.+)$", self.printed, re.MULTILINE)
        assert found, self.printed
        return Path(found.group(1))


@pytest.fixture(scope="module")
def dev(tmp_path_factory, kt):
    broker = DevSecurityBroker(tmp_path_factory.mktemp("dev-security"), kt.free_port())
    try:
        yield broker.start()
    finally:
        broker.stop()


def confluent_round_trip(ck, config: dict, topic: str, n: int = 20) -> list[bytes]:
    producer = ck.Producer({**config, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, key=str(i).encode(), value=f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    consumer = ck.Consumer({**config, "group.id": f"{topic}-group", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    return sorted(got)


def admin_client(config: dict):
    from confluent_kafka.admin import AdminClient

    return AdminClient(config)


def expected(topic: str, n: int = 20) -> list[bytes]:
    return sorted(f"{topic}-{i}".encode() for i in range(n))


def test_it_prints_the_client_settings(dev):
    text = dev.printed
    assert text.startswith("dev security: SASL_SSL, user admin (SCRAM-SHA-512)"), text
    props = parse_properties(dev.properties.read_text())
    assert props["bootstrap.servers"] == dev.bootstrap
    assert (props["security.protocol"], props["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    assert props["ssl.truststore.type"] == "PEM" and Path(props["ssl.truststore.location"]).is_file()
    assert dev.properties.parent == dev.data / "dev-security"
    assert dev.printed_config("confluent-kafka")["ssl.ca.location"] == props["ssl.truststore.location"]
    assert dev.printed_config("kafka-python")["sasl_plain_username"] == "admin"


def test_confluent_kafka_produces_and_consumes(dev, kt):
    ck = kt.require_module("confluent_kafka")
    assert confluent_round_trip(ck, dev.printed_config("confluent-kafka"), "dev-confluent") == expected("dev-confluent")


def test_kafka_python_produces_and_consumes(dev, kt):
    kafka = kt.require_module("kafka")
    config = dev.printed_config("kafka-python")
    producer = kafka.KafkaProducer(**config, acks="all")
    for i in range(10):
        producer.send("dev-kafka-python", f"kp-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer("dev-kafka-python", **config, auto_offset_reset="earliest",
                                   consumer_timeout_ms=15000, group_id="dev-kp")
    got = sorted(m.value for m in consumer)
    consumer.close()
    assert got == sorted(f"kp-{i}".encode() for i in range(10))


def test_kbroker_commands_with_command_config(dev):
    created = kbroker("topics", "create", "dev-cli", "--partitions", "2", "--bootstrap-server", dev.bootstrap,
                      "--command-config", str(dev.properties))
    assert created.returncode == 0, created.stderr
    listed = kbroker("topics", "list", "--bootstrap-server", dev.bootstrap, "--command-config", str(dev.properties))
    assert listed.returncode == 0 and "dev-cli" in listed.stdout.split() and listed.stderr == "", listed.stderr
    users = kbroker("users", "list", "--bootstrap-server", dev.bootstrap, "--command-config", str(dev.properties))
    assert users.returncode == 0 and re.search(r"^admin\s+SCRAM-SHA-512\s+4096$", users.stdout, re.MULTILINE), users.stdout


def test_a_client_without_credentials_is_refused(dev, kt, tmp_path):
    ck = kt.require_module("confluent_kafka")
    assert not kt.probe("127.0.0.1", dev.port)  # no plaintext Kafka protocol on the port: TLS only
    plain = kbroker("topics", "list", "--bootstrap-server", dev.bootstrap, "--timeout", "10")
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1 and "--command-config" in plain.stderr
    wrong = dev.properties.read_text().replace('password="', 'password="wrong-')
    (tmp_path / "wrong.properties").write_text(wrong)
    refused = kbroker("topics", "list", "--bootstrap-server", dev.bootstrap,
                      "--command-config", str(tmp_path / "wrong.properties"))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr

    good = dev.printed_config("confluent-kafka")
    tls_only = {k: v for k, v in good.items() if not k.startswith("sasl.")} | {"security.protocol": "SSL"}
    for config, wanted in ((tls_only, None), ({**good, "sasl.password": "wrong"}, "Authentication failed")):
        errors: list = []
        admin = admin_client({**config, "error_cb": errors.append, "log_level": 0})
        with pytest.raises(ck.KafkaException):
            admin.list_topics(timeout=5)
        admin.poll(1)  # serves error_cb
        if wanted:
            assert any(wanted in e.str() for e in errors), [e.str() for e in errors]


def test_a_restart_keeps_the_client_settings(dev):
    before = dev.properties.read_text()
    dev.stop()
    dev.start()
    assert dev.properties.read_text() == before
    listed = kbroker("topics", "list", "--bootstrap-server", dev.bootstrap, "--command-config", str(dev.properties))
    assert listed.returncode == 0 and "dev-cli" in listed.stdout.split(), listed.stderr


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_kbroker_testing_with_sasl_and_tls_serves_confluent_kafka(kt, mode):
    ck = kt.require_module("confluent_kafka")
    with KafkaContainer(mode=mode).with_tls().with_sasl("SCRAM-SHA-512", "app", "app-secret") as kafka:
        config = kafka.get_confluent_config()
        assert (config["security.protocol"], config["sasl.username"]) == ("SASL_SSL", "app")
        assert config["ssl.ca.location"] == kafka.get_ca_file()
        assert confluent_round_trip(ck, config, f"testing-{mode}") == expected(f"testing-{mode}")
        errors: list = []
        admin = admin_client({**config, "sasl.password": "wrong", "error_cb": errors.append, "log_level": 0})
        with pytest.raises(ck.KafkaException):
            admin.list_topics(timeout=5)
        admin.poll(1)  # serves error_cb
        assert any("Authentication failed" in e.str() for e in errors)


def test_kbroker_testing_sasl_plaintext_plain(kt):
    ck = kt.require_module("confluent_kafka")
    with KafkaContainer(security_protocol="SASL_PLAINTEXT").with_sasl("PLAIN", "app", "pw") as kafka:
        config = kafka.get_confluent_config()
        assert (config["security.protocol"], config["sasl.mechanism"]) == ("SASL_PLAINTEXT", "PLAIN")
        assert confluent_round_trip(ck, config, "testing-plain", 5) == expected("testing-plain", 5)


def test_dev_cluster_with_security(tmp_path, kt):
    import clusterkit as ck_cluster
    from test_dev_cluster import FAST, DevCluster

    ck_cluster.require_zookeeper()
    ck = kt.require_module("confluent_kafka")
    base = tmp_path / "cluster"
    dc = DevCluster(base, "--brokers", "2", "--security", "sasl_ssl", *FAST)
    try:
        bootstrap = dc.wait_for_line("bootstrap: ", 120).split(" ", 1)[1]
        dc.wait_for_line("kbroker dev-cluster: 2 brokers running", 10)
        text = "\n".join(dc.lines)
        assert "created SCRAM user admin (SCRAM-SHA-512)" in text
        properties = base / "dev-security" / "client.properties"
        assert f"client properties: {properties}" in text
        assert parse_properties(properties.read_text())["bootstrap.servers"] == bootstrap
        for address in bootstrap.split(","):  # every broker's port speaks TLS only
            host, port = address.rsplit(":", 1)
            assert not kt.probe(host, int(port))
        created = kbroker("topics", "create", "dev-rf2", "--partitions", "2", "--replication-factor", "2",
                          "--bootstrap-server", bootstrap, "--command-config", str(properties))
        assert created.returncode == 0, created.stderr
        config = json.loads(re.search(r"^  confluent-kafka: (\{.*\})$", text, re.MULTILINE).group(1))
        assert confluent_round_trip(ck, config, "dev-rf2") == expected("dev-rf2")
        described = kbroker("topics", "describe", "--topic", "dev-rf2", "--bootstrap-server", bootstrap,
                            "--command-config", str(properties))
        assert described.returncode == 0 and described.stdout.count("Isr: ") == 2, described.stdout
        dc.proc.send_signal(signal.SIGTERM)
        assert dc.wait(120) == 0, dc.stderr
    finally:
        dc.cleanup()
