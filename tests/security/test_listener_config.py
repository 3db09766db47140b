"""Listeners with security protocols as Kafka's KafkaConfig reads them, listener-scoped keys, and
the dynamic security keys (Kafka's DynamicListenerConfig rules)."""

from __future__ import annotations

import pytest

from kbroker.config import BrokerConfig, Endpoint
from kbroker.dynamic_config import is_dynamic, is_per_broker, validate_alter
from kbroker.errors import InvalidConfigError

FOUR = "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095"


def test_listeners_get_their_protocols_from_the_map():
    c = BrokerConfig.from_dict({"listeners": FOUR})
    assert [e.protocol for e in c.endpoints] == ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
    named = BrokerConfig.from_dict({"listeners": "INTERNAL://127.0.0.1:1,EXTERNAL://127.0.0.1:2",
                                    "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:SSL",
                                    "inter.broker.listener.name": "INTERNAL"})
    assert named.endpoints == [Endpoint("INTERNAL", "127.0.0.1", 1, "SASL_PLAINTEXT"),
                               Endpoint("EXTERNAL", "127.0.0.1", 2, "SSL")]
    assert named.inter_broker_listener_name == "INTERNAL" == named.control_plane_listener_name


@pytest.mark.parametrize("raw, words", [
    ({"listeners": "FOO://127.0.0.1:1"}, "No security protocol defined for listener FOO"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, "Each listener must have a different name"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "No enum constant TLS"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol"),
    ({"listeners": "SSL://127.0.0.1:1", "zookeeper.connect": "127.0.0.1:2181"},
     "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
    ({"listeners": FOUR, "advertised.listeners": "OTHER://h:1"}, "No security protocol defined for listener OTHER"),
])
def test_kafkas_listener_rules(raw, words):
    with pytest.raises(InvalidConfigError, match=words):
        BrokerConfig.from_dict(raw)


def test_single_node_inter_broker_listener_falls_back_to_the_first():
    c = BrokerConfig.from_dict({"listeners": "SASL_SSL://127.0.0.1:9094"})
    assert c.inter_broker_listener_name == "SASL_SSL"


def test_listener_scoped_keys_win_over_the_broker_key():
    c = BrokerConfig.from_dict({"listeners": FOUR, "ssl.keystore.location": "/a.p12",
                                "listener.name.sasl_ssl.ssl.keystore.location": "/b.p12",
                                "listener.name.sasl_ssl.plain.sasl.jaas.config": "x required;"})
    assert c.listener_get("SASL_SSL", "ssl.keystore.location") == "/b.p12"
    assert c.listener_get("SSL", "ssl.keystore.location") == "/a.p12"
    assert c.listener_get("SASL_SSL", "sasl.jaas.config", "PLAIN") == "x required;"
    assert c.listener_get("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-512") is None
    with pytest.raises(InvalidConfigError, match="ssl.client.auth"):
        BrokerConfig.from_dict({"listener.name.ssl.ssl.client.auth": "sometimes"})


def test_security_keys_are_dynamic_per_broker_as_in_kafka():
    assert is_dynamic("sasl.kerberos.min.time.before.relogin") and is_per_broker("sasl.kerberos.min.time.before.relogin")
    assert is_dynamic("listener.name.sasl_ssl.ssl.keystore.location")
    assert is_dynamic("listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config")
    assert is_dynamic("listener.name.external.max.connections") and not is_per_broker("listener.name.x.max.connections")
    assert not is_dynamic("listener.name.sasl_ssl.log.retention.ms")
    c = BrokerConfig.from_dict({"listeners": FOUR})
    assert validate_alter(c, "0", {"sasl.kerberos.min.time.before.relogin": "58000"}) == {
        "sasl.kerberos.min.time.before.relogin": 58000}
    with pytest.raises(InvalidConfigError, match="only per-listener using the listener prefix"):
        validate_alter(c, "0", {"ssl.keystore.location": "/x"})
    with pytest.raises(InvalidConfigError, match="broker id must be specified"):
        validate_alter(c, "", {"sasl.enabled.mechanisms": "PLAIN"})


def test_a_keystore_that_does_not_load_is_refused_by_alter_configs(tmp_path):
    c = BrokerConfig.from_dict({"listeners": FOUR})
    (tmp_path / "bad.p12").write_bytes(b"not a keystore")
    with pytest.raises(InvalidConfigError, match="SSLFactory"):
        validate_alter(c, "0", {"listener.name.ssl.ssl.keystore.location": str(tmp_path / "bad.p12"),
                                "listener.name.ssl.ssl.keystore.type": "PKCS12"})
