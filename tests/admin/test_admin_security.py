"""The admin tools on a secured listener (`--command-config`, admin/security.py): Kafka's client
keys read into TLS and SASL settings, then a blocking `Connection` / `AdminClient` against a real
in-process SASL_SSL broker (kbroker.testing, SCRAM-SHA-512 and PLAIN) — the exchange right after
ApiVersions, a wrong password refused with SASL_AUTHENTICATION_FAILED, Kafka's error names on one
line with exit status 1 from the commands, hints when the client settings are missing."""

from __future__ import annotations

import pytest

from kbroker.admin.client import (
    AdminClient,
    AdminError,
    KafkaErrorResponse,
    parse_address,
)
from kbroker.admin.command_config import load_command_config
from kbroker.admin.connection import METADATA, Connection
from kbroker.admin.security import ClientSecurity, client_security
from kbroker.cli import main
from kbroker.dev_security import BROKER_USER, write_client_properties
from kbroker.devcerts import make_dev_certificates
from kbroker.security.jaas import LOGIN_MODULES, format_jaas
from kbroker.testing import KafkaContainer

USER, PASSWORD = "alice", "alice-s3cret"


def jaas(mechanism: str, **options: str) -> str:
    return format_jaas(LOGIN_MODULES[mechanism], options)


@pytest.fixture(scope="module")
def broker():
    with KafkaContainer(mode="thread").with_tls().with_sasl("SCRAM-SHA-512", USER, PASSWORD) as container:
        yield container


@pytest.fixture
def address(broker) -> tuple[str, int]:
    return parse_address(broker.get_bootstrap_server())


def props(broker, mechanism: str = "SCRAM-SHA-512", username: str = USER, password: str = PASSWORD,
          protocol: str = "SASL_SSL") -> dict[str, str]:
    return {"security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.jaas.config": jaas(mechanism, username=username, password=password),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": broker.get_ca_file()}


# -- Kafka's client keys ----------------------------------------------------------------------------

def test_keys_make_a_client_security(tmp_path):
    assert client_security({}) == ClientSecurity("PLAINTEXT")
    sec = client_security({"security.protocol": "sasl_plaintext", "sasl.mechanism": "PLAIN",
                           "sasl.jaas.config": jaas("PLAIN", username="bob", password="pw")})
    assert (sec.protocol, sec.mechanism, sec.ssl_context, sec.username) == ("SASL_PLAINTEXT", "PLAIN", None, "bob")
    assert "pw" not in repr(sec)
    certs = make_dev_certificates(tmp_path / "certs")
    sec = client_security({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                           "ssl.truststore.location": str(certs.ca_file)})
    assert sec.ssl_context is not None and sec.ssl_context.check_hostname and sec.mechanism is None
    sec = client_security({"security.protocol": "SSL", "ssl.truststore.type": "PKCS12",
                           "ssl.truststore.location": str(certs.keystore),
                           "ssl.truststore.password": certs.keystore_password,
                           "ssl.endpoint.identification.algorithm": ""})
    assert not sec.ssl_context.check_hostname
    sec = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                           "sasl.jaas.config": jaas("OAUTHBEARER", unsecuredLoginStringClaim_sub="svc")})
    assert (sec.mechanism, sec.username) == ("OAUTHBEARER", "svc")


@pytest.mark.parametrize("keys, message", [
    ({"security.protocol": "TLS"}, "security.protocol=TLS is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI (Kafka's default: set sasl.mechanism)"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs sasl.jaas.config, e.g. "
                                                                         "org.apache.kafka.common.security.plain"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
      "sasl.jaas.config": jaas("PLAIN", username="a", password="b")}, "needs the login module "
                                                                      "org.apache.kafka.common.security.scram"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": jaas("PLAIN", username="a")}, "needs username and password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "PlainLoginModule required username="}, "sasl.jaas.config: "),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem", "ssl.truststore.type": "PEM"},
     "cannot read ssl.truststore.location=/nonexistent/ca.pem"),
])
def test_bad_keys_are_one_line(keys, message):
    with pytest.raises(AdminError) as exc:
        client_security(keys, "--command-config c.properties")
    text = str(exc.value)
    assert message in text and text.startswith("--command-config c.properties") and "\n" not in text


def test_credentials_optional_only_when_asked():
    """`kbroker console --login` reads its command config with require_credentials=False: no
    sasl.jaas.config (or no username/password in it) is accepted; a line there is still checked."""
    keys = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    with pytest.raises(AdminError, match="needs sasl.jaas.config, e.g. "):
        client_security(keys)
    sec = client_security(keys, require_credentials=False)
    assert (sec.protocol, sec.mechanism, dict(sec.options), sec.username) == ("SASL_PLAINTEXT", "PLAIN", {}, None)
    no_password = {**keys, "sasl.jaas.config": jaas("PLAIN", username="a")}
    with pytest.raises(AdminError, match="needs username and password"):
        client_security(no_password)
    assert client_security(no_password, require_credentials=False).username == "a"
    with pytest.raises(AdminError, match="needs the login module "):
        client_security({**keys, "sasl.jaas.config": jaas("SCRAM-SHA-256", username="a", password="b")},
                         require_credentials=False)
    assert client_security({}, require_credentials=False) == ClientSecurity("PLAINTEXT")


def test_the_properties_file(tmp_path):
    path = write_client_properties(tmp_path / "client.properties", {
        "bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": jaas("SCRAM-SHA-256", username="u", password='p"w\\x')})
    sec = load_command_config(path)
    assert (sec.mechanism, sec.options["username"], sec.options["password"]) == ("SCRAM-SHA-256", "u", 'p"w\\x')
    with pytest.raises(AdminError, match="cannot read --command-config .*missing.properties"):
        load_command_config(tmp_path / "missing.properties")


# -- against a SASL_SSL broker ----------------------------------------------------------------------

def test_scram_then_requests(broker, address):
    conn = Connection(*address, timeout=5, security=client_security(props(broker)))
    try:
        body = conn.call(METADATA, {"topics": None, "allow_auto_topic_creation": False})
        assert [b.port for b in body.brokers] == [address[1]]
    finally:
        conn.close()
    with AdminClient(broker.get_bootstrap_server(), 5, client_security(props(broker))) as admin:
        admin.create_topic("secured", 2, 1)
        _brokers, topics = admin.describe_topics(["secured"])
        assert [len(t.partitions) for t in topics] == [2]


def test_plain(broker, address):
    sec = client_security(props(broker, "PLAIN", BROKER_USER, broker.security.broker_password))
    with AdminClient(broker.get_bootstrap_server(), 5, sec) as admin:
        assert admin.describe_cluster().brokers


@pytest.mark.parametrize("mechanism, username", [("SCRAM-SHA-512", USER), ("SCRAM-SHA-512", "nobody"),
                                                 ("PLAIN", BROKER_USER)])
def test_a_wrong_password_is_refused(broker, address, mechanism, username):
    with pytest.raises(KafkaErrorResponse) as exc:
        Connection(*address, timeout=5, security=client_security(props(broker, mechanism, username, "wrong")))
    assert exc.value.name == "SASL_AUTHENTICATION_FAILED"
    assert str(exc.value).startswith(f"SASL {mechanism} authentication at {address[0]}:{address[1]}: "
                                     f"SASL_AUTHENTICATION_FAILED (")


def test_a_mechanism_the_listener_does_not_serve(broker, address):
    with pytest.raises(KafkaErrorResponse) as exc:
        Connection(*address, timeout=5, security=client_security(props(broker, "SCRAM-SHA-256")))
    assert exc.value.name == "UNSUPPORTED_SASL_MECHANISM"
    assert "SCRAM-SHA-512" in str(exc.value) and "PLAIN" in str(exc.value)  # what the listener offers


def test_missing_or_wrong_tls_settings(broker, address, tmp_path):
    with pytest.raises(AdminError, match="--command-config"):  # plaintext to a TLS listener: a hint
        Connection(*address, timeout=5)
    other_ca = make_dev_certificates(tmp_path / "other").ca_file
    untrusted = client_security({**props(broker), "ssl.truststore.location": str(other_ca)})
    with pytest.raises(AdminError, match="TLS handshake failed: the broker's certificate was refused"):
        Connection(*address, timeout=5, security=untrusted)
    no_sasl = client_security({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                               "ssl.truststore.location": broker.get_ca_file()})
    with pytest.raises(AdminError, match="SASL listener closes connections that have not authenticated"), \
            AdminClient(broker.get_bootstrap_server(), 5, no_sasl) as admin:
        admin.describe_topics(None)


def test_commands_take_command_config(broker, tmp_path, capsys):
    good = write_client_properties(tmp_path / "good.properties", props(broker))
    bad = write_client_properties(tmp_path / "bad.properties", props(broker, password="nope"))
    boot = ("--bootstrap-server", broker.get_bootstrap_server())
    assert main(["topics", "create", "cli-topic", "--partitions", "1", *boot,
                 "--command-config", str(good)]) == 0
    assert main(["topics", "list", *boot, "--command-config", str(good)]) == 0
    assert "cli-topic" in capsys.readouterr().out.split()
    assert main(["users", "list", *boot, "--command-config", str(good)]) == 0
    assert USER in capsys.readouterr().out
    for argv in (["topics", "list"], ["groups", "list"], ["configs", "describe", "--broker-defaults"],
                 ["cluster", "status"], ["transactions", "list"], ["users", "list"]):
        assert main([*argv, *boot, "--command-config", str(bad)]) == 1, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "SASL_AUTHENTICATION_FAILED" in err, (argv, err)
    assert main(["topics", "list", *boot, "--command-config", str(tmp_path / "none.properties")]) == 1
    assert capsys.readouterr().err.startswith("kbroker topics: cannot read --command-config")


def test_oauthbearer_unsecured_tokens():
    with KafkaContainer(mode="thread").with_sasl("OAUTHBEARER", "svc") as container:
        sec = client_security(container.get_client_config())
        assert sec.protocol == "SASL_PLAINTEXT"
        with AdminClient(container.get_bootstrap_server(), 5, sec) as admin:
            assert admin.describe_cluster().brokers
