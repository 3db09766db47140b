"""Development security setups (devcerts.py, dev_security.py): throwaway certificates for
127.0.0.1/localhost, kept across restarts; the broker and client keys of a setup; `kbroker serve
--dev-security`'s refusals and files; dev-cluster's override checks; kbroker.testing's secured
KafkaContainer (its brokers are exercised in tests/admin/test_admin_security.py)."""

from __future__ import annotations

import ipaddress
import json
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from kbroker.admin.command_config import load_command_config
from kbroker.cli import main
from kbroker.config import BrokerConfig, parse_properties
from kbroker.dev_cluster import _parse_overrides
from kbroker.dev_security import (
    ADMIN_USER,
    BROKER_USER,
    SecuritySetup,
    dev_setup,
    serve_overrides,
    write_scram_credential,
)
from kbroker.devcerts import dev_certificates, make_dev_certificates
from kbroker.errors import StartupError
from kbroker.security.credentials import ScramCredential
from kbroker.security.jaas import parse_jaas_config, plain_users
from kbroker.testing import KafkaContainer, KbrokerError


def test_certificates_for_this_machine(tmp_path):
    certs = make_dev_certificates(tmp_path / "c")
    key, cert, extra = pkcs12.load_key_and_certificates(certs.keystore.read_bytes(), certs.keystore_password.encode())
    ca = x509.load_pem_x509_certificate(certs.ca_file.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.issuer == ca.subject and [c.subject for c in extra] == [ca.subject] and key is not None
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(ca)
    ctx = ssl.create_default_context(cafile=str(certs.ca_file))  # a CA Python's TLS accepts
    assert ctx.get_ca_certs()[0]["subject"]
    for private in (certs.keystore, tmp_path / "c" / "broker.p12.password"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert certs.keystore_password not in repr(certs)


def test_certificates_are_kept_while_they_fit(tmp_path):
    first = dev_certificates(tmp_path)
    assert dev_certificates(tmp_path) == first  # the same files and password: clients keep their CA
    other = dev_certificates(tmp_path, ips=("127.0.0.1", "10.1.2.3"))  # a name it lacks: made again
    assert other.keystore_password != first.keystore_password
    (tmp_path / "broker.p12").write_bytes(b"garbage")
    assert dev_certificates(tmp_path).keystore_password != other.keystore_password


def test_a_setup_kept_in_its_directory(tmp_path):
    setup = dev_setup(tmp_path / "d", "sasl_ssl")
    assert (setup.protocol, setup.mechanism, setup.username) == ("SASL_SSL", "SCRAM-SHA-512", ADMIN_USER)
    assert dev_setup(tmp_path / "d", "SASL_SSL") == setup
    assert setup.password not in repr(setup) and setup.broker_password not in repr(setup)
    assert dev_setup(tmp_path / "p", "sasl_plaintext").certs is None
    assert dev_setup(tmp_path / "s", "ssl").mechanism is None


def test_broker_and_client_keys(tmp_path):
    setup = dev_setup(tmp_path, "sasl_ssl")
    config = setup.broker_config("127.0.0.1", 9999)
    assert config["listeners"] == "SASL_SSL://127.0.0.1:9999"
    assert config["inter.broker.listener.name"] == "SASL_SSL"
    assert config["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,PLAIN"
    assert config["sasl.mechanism.inter.broker.protocol"] == "PLAIN"
    plain = parse_jaas_config(config["listener.name.sasl_ssl.plain.sasl.jaas.config"])
    assert plain_users(plain) == {BROKER_USER: setup.broker_password}
    assert plain.options["username"] == BROKER_USER
    assert parse_jaas_config(config["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]).options == {}
    assert BrokerConfig.from_dict(config).unknown == {}  # every key is one the broker knows
    client = setup.client_config("127.0.0.1:9999")
    assert client["ssl.truststore.location"] == str(setup.certs.ca_file)
    assert parse_jaas_config(client["sasl.jaas.config"]).options == {"username": ADMIN_USER,
                                                                      "password": setup.password}
    assert setup.confluent_config()["sasl.username"] == ADMIN_USER
    assert setup.kafka_python_config("h:1")["ssl_cafile"] == str(setup.certs.ca_file)
    (user, creds), = setup.scram_users().items()
    assert user == ADMIN_USER and list(creds) == ["SCRAM-SHA-512"]
    ScramCredential.from_kafka_string(creds["SCRAM-SHA-512"])
    with pytest.raises(ValueError):
        SecuritySetup("SASL_SSL", None, "PLAIN", "u", "p", "b")  # TLS without certificates


def test_scram_credentials_are_merged_into_the_store_file(tmp_path):
    write_scram_credential(tmp_path, {"a": {"SCRAM-SHA-256": "x"}})
    write_scram_credential(tmp_path, {"a": {"SCRAM-SHA-512": "y"}, "b": {"SCRAM-SHA-512": "z"}})
    path = tmp_path / "kbroker-scram-credentials.json"
    assert json.loads(path.read_text()) == {"version": 1, "users": {"a": {"SCRAM-SHA-256": "x", "SCRAM-SHA-512": "y"},
                                                                   "b": {"SCRAM-SHA-512": "z"}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_serve_overrides(tmp_path):
    data = tmp_path / "data"
    config = BrokerConfig.from_dict({"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:19999"})
    overrides, text = serve_overrides(config)
    keys = dict(item.split("=", 1) for item in overrides)
    assert keys["listeners"] == "SASL_SSL://127.0.0.1:19999"
    properties = data / "dev-security" / "client.properties"
    assert f"--command-config {properties}" in text and "confluent-kafka: {" in text
    client = parse_properties(properties.read_text())
    assert client["bootstrap.servers"] == "127.0.0.1:19999" and client["security.protocol"] == "SASL_SSL"
    assert load_command_config(properties).mechanism == "SCRAM-SHA-512"
    store = data / "kbroker-scram-credentials.json"
    written = store.read_text()
    assert serve_overrides(config)[0] == overrides and store.read_text() == written  # kept as it was
    secured = BrokerConfig.from_dict({"log.dirs": str(data), **keys})
    assert [e.protocol for e in secured.endpoints] == ["SASL_SSL"]  # no PLAINTEXT port left


@pytest.mark.parametrize("raw, message", [
    ({"zookeeper.connect": "z:2181"}, "kbroker dev-cluster --security"),
    ({"ssl.keystore.location": "/k.p12"}, "remove ssl.keystore.location"),
    ({"listener.name.plaintext.plain.sasl.jaas.config": "x required;"}, "remove listener.name.plaintext"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2"}, "secures one listener"),
])
def test_serve_overrides_refusals(tmp_path, raw, message):
    with pytest.raises(StartupError, match=message):
        serve_overrides(BrokerConfig.from_dict({"log.dirs": str(tmp_path), **raw}))


def test_serve_dev_security_refusal_is_one_line(tmp_path, capsys):
    assert main(["serve", "--dev-security", "--override", f"log.dirs={tmp_path}",
                 "--override", "sasl.enabled.mechanisms=PLAIN"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kbroker: --dev-security sets the listener's security itself") and err.count("\n") == 1


def test_dev_cluster_security_keeps_its_keys():
    assert _parse_overrides(["ssl.keystore.location=/x"]) == {"ssl.keystore.location": "/x"}
    assert "not allowed with --security sasl_ssl" in _parse_overrides(["ssl.keystore.location=/x"], "sasl_ssl")
    assert "not allowed" in _parse_overrides(["inter.broker.listener.name=X"], "ssl")
    assert _parse_overrides(["log.retention.ms=1000"], "ssl") == {"log.retention.ms": "1000"}


def test_kafka_container_security_calls():
    plain = KafkaContainer()
    assert plain.security_protocol == "PLAINTEXT"
    with pytest.raises(KbrokerError, match="not started"):
        plain.get_client_config()
    assert KafkaContainer(security_protocol="SASL_SSL").security_protocol == "SASL_SSL"
    assert KafkaContainer(security_protocol="SSL").security_protocol == "SSL"
    assert KafkaContainer().with_sasl("plain", "u", "p").security_protocol == "SASL_PLAINTEXT"
    with pytest.raises(KbrokerError, match="GSSAPI"):
        KafkaContainer().with_sasl("GSSAPI")
    with pytest.raises(KbrokerError, match="security_protocol"):
        KafkaContainer(security_protocol="KERBEROS")


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_kafka_container_secured(mode):
    with KafkaContainer(mode=mode).with_tls().with_sasl("SCRAM-SHA-256", "svc", "pw") as kafka:
        config = kafka.get_client_config()
        assert config["bootstrap.servers"] == kafka.get_bootstrap_server()
        assert (config["security.protocol"], config["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-256")
        assert config["ssl.truststore.location"] == kafka.get_ca_file()
        assert kafka.get_confluent_config()["ssl.ca.location"] == kafka.get_ca_file()
        assert kafka.get_kafka_python_config()["sasl_plain_password"] == "pw"
        if mode == "process":  # the passwords are in an owner-only file, not on the command line
            cmdline = Path(f"/proc/{kafka._proc.pid}/cmdline").read_bytes()
            assert b"pw" not in cmdline.split(b"\0") and kafka.security.broker_password.encode() not in cmdline
    with KafkaContainer(mode="thread") as kafka:
        assert kafka.get_client_config() == {"bootstrap.servers": kafka.get_bootstrap_server(),
                                             "security.protocol": "PLAINTEXT"}
        assert kafka.get_ca_file() is None
