"""The schema registry behind the broker's security (securitykit's five-listener broker, real
certificates and SASL users): HTTPS with the SASL_SSL listener's keystore and HTTP basic
authentication against its PLAIN and SCRAM users; Kafka ACLs on subjects through their topics
(schema_registry/access.py); and mTLS principals with the MTLS listener's settings. Every
refusal is checked, not only the success. The client is confluent-kafka's SchemaRegistryClient."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request

import pytest

import securitykit as sk

pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as ka  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

AVRO = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def _secured_registry(kt, workdir, listener: str, super_users: str):
    """securitykit's broker with its registry on https, secured like `listener`, and Kafka's ACL
    authorizer on (User:ANONYMOUS a super user: the PLAINTEXT listener's admin calls)."""
    port = kt.free_port()
    extra = {"schema.registry.listener": f"https://127.0.0.1:{port}",
             "schema.registry.security.listener": listener,
             "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
             "super.users": f"User:ANONYMOUS;{super_users}"}
    for setup in sk.running_setup(kt, workdir, extra=extra):
        setup.registry_url = f"https://127.0.0.1:{port}"
        yield setup


@pytest.fixture(scope="module")
def basic(kt, tmp_path_factory):
    """Basic authentication against the SASL_SSL listener's users."""
    yield from _secured_registry(kt, tmp_path_factory.mktemp("sr-basic"), "SASL_SSL", "User:admin")


def _client(setup, user: str | None = None, password: str | None = None) -> SchemaRegistryClient:
    conf = {"url": setup.registry_url, "ssl.ca.location": str(setup.pki.ca), "max.retries": 0}
    if user is not None:
        conf["basic.auth.user.info"] = f"{user}:{password}"
    return SchemaRegistryClient(conf)


def _status(setup, path: str, auth: str | None) -> tuple[int, dict]:
    request = urllib.request.Request(setup.registry_url + path)
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    context = ssl.create_default_context(cafile=str(setup.pki.ca))
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _grant(setup, principal: str, name: str, operation, pattern=ka.ResourcePatternType.LITERAL) -> None:
    admin = ka.AdminClient({"bootstrap.servers": setup.plaintext})
    binding = ka.AclBinding(ka.ResourceType.TOPIC, name, pattern, principal, "*", operation,
                            ka.AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(30)


def test_basic_authentication_against_plain_and_scram_users(basic):
    users = basic.users
    assert _status(basic, "/subjects", None) == (401, {"error_code": 401, "message": "Unauthorized"})
    assert _status(basic, "/subjects", f"alice:{users.plain['alice']}x")[0] == 401  # wrong password
    assert _status(basic, "/subjects", "nobody:nothing")[0] == 401
    assert _status(basic, "/subjects", f"alice:{users.plain['alice']}")[0] == 200  # PLAIN's JAAS user
    assert _status(basic, "/subjects", f"alice:{users.scram['alice']['SCRAM-SHA-512']}")[0] == 200  # SCRAM
    assert _status(basic, "/subjects", f"bob:{users.scram['bob']['SCRAM-SHA-256']}")[0] == 200
    # plain http to the https listener gets nothing
    with pytest.raises(Exception):
        urllib.request.urlopen(basic.registry_url.replace("https", "http") + "/subjects", timeout=5)


def test_subject_acls_through_their_topics(basic):
    users = basic.users
    alice = _client(basic, "alice", users.plain["alice"])
    bob = _client(basic, "bob", users.scram["bob"]["SCRAM-SHA-256"])
    admin = _client(basic, "admin", users.plain["admin"])

    # nobody but the super user may register before an ACL says so (deny by default)
    with pytest.raises(SchemaRegistryError) as refused:
        alice.register_schema("team-a.orders-value", Schema(AVRO, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    assert "User:alice" in refused.value.error_message and "WRITE" in refused.value.error_message

    _grant(basic, "User:alice", "team-a.", ka.AclOperation.WRITE, ka.ResourcePatternType.PREFIXED)
    _grant(basic, "User:bob", "team-a.orders", ka.AclOperation.READ)
    schema_id = alice.register_schema("team-a.orders-value", Schema(AVRO, "AVRO"))
    admin.register_schema("team-b.payments-value", Schema(AVRO, "AVRO"))  # the same schema: the same id

    # bob reads team-a's subject (READ implies DESCRIBE) but may not write it, nor see team-b's
    assert bob.get_latest_version("team-a.orders-value").schema_id == schema_id
    with pytest.raises(SchemaRegistryError) as no_write:
        bob.register_schema("team-a.orders-value", Schema(AVRO.replace("Order", "Order2"), "AVRO"))
    assert no_write.value.error_code == 40301
    with pytest.raises(SchemaRegistryError) as no_read:
        bob.get_latest_version("team-b.payments-value")
    assert no_read.value.error_code == 40301
    assert bob.get_subjects() == ["team-a.orders-value"]  # listings show only what may be described
    assert sorted(admin.get_subjects()) == ["team-a.orders-value", "team-b.payments-value"]
    assert json.loads(bob.get_schema(schema_id).schema_str)["name"] == "Order"  # a subject of bob's uses it
    # deleting and changing a subject's level need DELETE and ALTER_CONFIGS on the topic
    with pytest.raises(SchemaRegistryError) as no_delete:
        alice.delete_subject("team-a.orders-value")
    assert no_delete.value.error_code == 40301
    with pytest.raises(SchemaRegistryError) as no_config:
        alice.set_compatibility("team-a.orders-value", "NONE")
    assert no_config.value.error_code == 40301
    with pytest.raises(SchemaRegistryError) as no_global:
        alice.set_compatibility(level="NONE")  # the global level: ALTER_CONFIGS on the cluster
    assert no_global.value.error_code == 40301
    assert admin.get_compatibility() == "BACKWARD"


@pytest.fixture(scope="module")
def mtls(kt, tmp_path_factory):
    """Client certificates of the MTLS listener (bob's stands in for a broker's: a super user)."""
    yield from _secured_registry(kt, tmp_path_factory.mktemp("sr-mtls"), "MTLS", "User:bob")


def test_mtls_principals(mtls):
    alice_cert = mtls.pki.clients["alice"]
    alice = SchemaRegistryClient({"url": mtls.registry_url, "ssl.ca.location": str(mtls.pki.ca),
                                  "ssl.certificate.location": str(alice_cert.cert),
                                  "ssl.key.location": str(alice_cert.key), "max.retries": 0})
    with pytest.raises(SchemaRegistryError) as refused:  # User:alice (her certificate) has no ACL yet
        alice.register_schema("mtls-value", Schema(AVRO, "AVRO"))
    assert refused.value.error_code == 40301 and "User:alice" in refused.value.error_message
    _grant(mtls, "User:alice", "mtls", ka.AclOperation.WRITE)
    assert alice.register_schema("mtls-value", Schema(AVRO, "AVRO")) >= 1
    # no client certificate: the TLS handshake is refused (ssl.client.auth=required)
    anonymous = SchemaRegistryClient({"url": mtls.registry_url, "ssl.ca.location": str(mtls.pki.ca),
                                      "max.retries": 0})
    with pytest.raises(Exception) as no_cert:
        anonymous.get_subjects()
    assert not isinstance(no_cert.value, SchemaRegistryError)  # no HTTP answer at all


def test_only_a_super_user_may_forward_for_another_principal(mtls):
    """A broker forwarding a request to the registry's writer names the principal it authenticated
    (kbroker-forwarded-principal); the writer believes it only from a super user's certificate."""
    def ask(cert_name: str, vouch: str) -> tuple[int, dict]:
        cert = mtls.pki.clients[cert_name]
        context = ssl.create_default_context(cafile=str(mtls.pki.ca))
        context.load_cert_chain(str(cert.cert), str(cert.key))
        request = urllib.request.Request(mtls.registry_url + "/subjects/mtls-value/versions", method="POST",
                                         data=json.dumps({"schema": AVRO}).encode(),
                                         headers={"Content-Type": "application/json",
                                                  "kbroker-forwarded-principal": vouch,
                                                  "kbroker-forwarded": "1"})
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    status, body = ask("alice", "User:admin")  # alice is no super user: she cannot pose as anyone
    assert (status, body["error_code"]) == (403, 40301) and "User:alice may not forward" in body["message"]
    status, body = ask("bob-other-org", "User:carol")  # bob may: carol's own ACLs then decide
    assert (status, body["error_code"]) == (403, 40301) and "User:carol" in body["message"]
    _grant(mtls, "User:carol", "mtls", ka.AclOperation.WRITE)
    status, body = ask("bob-other-org", "User:carol")
    assert status == 200 and body["id"] >= 1
