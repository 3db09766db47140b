"""Security configs as dynamic broker configs, through stock admin clients: a renewed keystore set
with AlterConfigs is served to new connections without a restart (a keystore that does not load is
refused and the old one kept), Kafka's per-broker SASL keys are accepted, keystore keys only under
a listener prefix, and DescribeConfigs shows what was set with passwords hidden."""

from __future__ import annotations

import socket
import ssl

import pytest

import securitykit as sk

BROKER_ID = "0"


@pytest.fixture(scope="module")
def tls_broker(kt, tmp_path_factory):
    d = sk.trustme_certs(tmp_path_factory.mktemp("reload"), ("first", "second"))
    broker, ssl_port = sk.with_listener(kt, d / "broker", "SSL", {
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(d / "first.pem"),
    })
    try:
        broker.start()
        yield broker, ssl_port, d
    finally:
        broker.stop()


def served_unit(port: int, cafile) -> str:
    """The OU of the certificate the SSL listener presents to a new connection."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        subject = dict(x[0] for x in tls.getpeercert()["subject"])
    return subject["organizationalUnitName"]


def alter(bootstrap: str, configs: dict[str, str]):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, BROKER_ID, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    future = admin.incremental_alter_configs([resource])[resource]
    return future.result(timeout=30)


def describe(bootstrap: str) -> dict:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, BROKER_ID)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def test_a_renewed_keystore_is_served_without_a_restart(kt, tls_broker):
    from confluent_kafka import KafkaException

    broker, ssl_port, d = tls_broker
    assert served_unit(ssl_port, d / "ca.pem") == "first"
    ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
    held = ctx.wrap_socket(socket.create_connection(("127.0.0.1", ssl_port), timeout=5), server_hostname="127.0.0.1")
    alter(broker.bootstrap, {"listener.name.ssl.ssl.keystore.location": str(d / "second.pem")})
    assert served_unit(ssl_port, d / "ca.pem") == "second"
    held.sendall(kt.api_versions_v0_request(3))  # a connection opened before keeps its session
    assert kt.parse_api_versions_v0(kt.recv_frame(held))[1] == 0
    held.close()
    (d / "broken.pem").write_text("not a certificate")
    with pytest.raises(KafkaException, match="INVALID_CONFIG|SSLFactory"):
        alter(broker.bootstrap, {"listener.name.ssl.ssl.keystore.location": str(d / "broken.pem")})
    assert served_unit(ssl_port, d / "ca.pem") == "second"
    entries = describe(broker.bootstrap)
    entry = entries["listener.name.ssl.ssl.keystore.location"]
    assert entry.value == str(d / "second.pem") and entry.source == 2  # DYNAMIC_BROKER_CONFIG
    assert broker.alive()


def test_kafkas_dynamic_sasl_keys_are_accepted_and_keystores_need_a_listener(tls_broker):
    from confluent_kafka import KafkaException

    broker, _ssl_port, _d = tls_broker
    alter(broker.bootstrap, {"sasl.kerberos.min.time.before.relogin": "58000",
                             "listener.name.ssl.ssl.keystore.password": "s3cret-kept-hidden"})
    entries = describe(broker.bootstrap)
    assert entries["sasl.kerberos.min.time.before.relogin"].value == "58000"
    hidden = entries["listener.name.ssl.ssl.keystore.password"]
    assert hidden.is_sensitive and hidden.value is None
    with pytest.raises(KafkaException, match="listener prefix"):
        alter(broker.bootstrap, {"ssl.keystore.location": "/tmp/x.p12"})
    assert "s3cret-kept-hidden" not in broker.log_tail(100_000)
