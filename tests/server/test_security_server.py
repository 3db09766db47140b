"""The server's side of connection security, in-process on port 0 over real TCP (and TLS): what a
SASL listener serves before authentication, the v0 handshake's unframed tokens, failures answered
then closed after the delay, oversized tokens, expired sessions, TLS handshakes and the principal of
an mTLS client, and Metadata naming the listener the client came in on."""

from __future__ import annotations

import ssl
import struct

import pytest
import trio
import trustme

from kbroker.config import BrokerConfig
from kbroker.security.plain import plain_client_token
from kbroker.security.scram import ScramClient
from tests.server.test_server import _closed, _read_frame, _request, _with_server, trio_test

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="acme")
    client.private_key_and_cert_chain_pem.write_to_path(str(d / "alice.pem"))
    return d, ca


@pytest.fixture
def config(tmp_path, pki):
    d, _ca = pki
    return BrokerConfig.from_dict({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": "300",
        "sasl.server.max.receive.size": "4096",
        "connections.max.reauth.ms": "1500",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(d / "broker.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(d / "ca.pem"),
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),.*$/$1/U,DEFAULT",
    })


async def _call(stream, api_key, version, body=None, correlation_id=1):
    await stream.send_all(_request(api_key, version, body, correlation_id))
    return await _read_frame(stream)


def _decode(api_key, version, frame):
    from kbroker.wire.protocol import decode_response

    return decode_response(api_key, version, frame)[1]


async def _sasl(server):
    return await trio.open_tcp_stream("127.0.0.1", server.port_of("SASL_PLAINTEXT"))


@trio_test
async def test_sasl_listener_serves_only_api_versions_and_sasl_before_authentication(config):
    async def body(server):
        stream = await _sasl(server)
        versions = _decode(18, 3, await _call(stream, 18, 3))
        keys = {k.api_key for k in versions.api_keys}
        assert {17, 36} <= keys
        plain = await trio.open_tcp_stream("127.0.0.1", server.port)
        plain_keys = {k.api_key for k in _decode(18, 3, await _call(plain, 18, 3)).api_keys}
        assert not {17, 36} & plain_keys and 50 in plain_keys  # SCRAM users are administered anywhere
        await stream.send_all(_request(3, 9, {"topics": None, "allow_auto_topic_creation": False}))
        assert await _closed(stream)  # Metadata before authenticating: the connection is closed

    await _with_server(config, body)


@trio_test
async def test_plain_over_saslauthenticate_then_requests_are_served(config):
    async def body(server):
        stream = await _sasl(server)
        hs = _decode(17, 1, await _call(stream, 17, 1, {"mechanism": "PLAIN"}))
        assert int(hs.error_code) == 0 and list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        auth = _decode(36, 2, await _call(stream, 36, 2, {"auth_bytes": plain_client_token("alice", "alice-secret")}))
        assert int(auth.error_code) == 0
        assert auth.session_lifetime.total_seconds() == pytest.approx(1.5)  # connections.max.reauth.ms
        md = _decode(3, 9, await _call(stream, 3, 9, {"topics": None, "allow_auto_topic_creation": False}))
        # the broker as this listener advertises it, not the PLAINTEXT port
        assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", server.port_of("SASL_PLAINTEXT"))]

    await _with_server(config, body)


@trio_test
async def test_v0_handshake_then_unframed_tokens(config):
    async def body(server):
        stream = await _sasl(server)
        hs = _decode(17, 0, await _call(stream, 17, 0, {"mechanism": "PLAIN"}))
        assert int(hs.error_code) == 0
        token = plain_client_token("bob", "bob-secret")
        await stream.send_all(struct.pack(">i", len(token)) + token)
        assert await _read_frame(stream) == b""  # PLAIN's empty server token, framed by its size only
        md = _decode(3, 1, await _call(stream, 3, 1, {"topics": []}))
        assert md.brokers[0].port == server.port_of("SASL_PLAINTEXT")

    await _with_server(config, body)


@trio_test
async def test_wrong_password_is_answered_then_closed_after_the_delay(config):
    async def body(server):
        stream = await _sasl(server)
        await _call(stream, 17, 1, {"mechanism": "PLAIN"})
        started = trio.current_time()
        auth = _decode(36, 1, await _call(stream, 36, 1, {"auth_bytes": plain_client_token("alice", "guess")}))
        assert int(auth.error_code) == 58 and "Invalid username or password" in auth.error_message
        assert "guess" not in auth.error_message
        assert await _closed(stream)
        assert trio.current_time() - started >= 0.25  # connection.failed.authentication.delay.ms=300

    await _with_server(config, body)


@trio_test
async def test_unknown_mechanism_and_unknown_scram_user(config):
    async def body(server):
        stream = await _sasl(server)
        hs = _decode(17, 1, await _call(stream, 17, 1, {"mechanism": "GSSAPI"}))
        assert int(hs.error_code) == 33 and list(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256"]
        assert await _closed(stream)
        stream = await _sasl(server)
        await _call(stream, 17, 1, {"mechanism": "SCRAM-SHA-256"})
        client = ScramClient("SCRAM-SHA-256", "nobody", "pw")
        first = _decode(36, 2, await _call(stream, 36, 2, {"auth_bytes": client.first_message()}))
        if int(first.error_code) == 0:  # Kafka answers an unknown user at the final step
            final = _decode(36, 2, await _call(stream, 36, 2, {"auth_bytes": client.final_message(first.auth_bytes)}))
            assert int(final.error_code) == 58
        else:
            assert int(first.error_code) == 58
        assert await _closed(stream)

    await _with_server(config, body)


@trio_test
async def test_oversized_token_before_authentication_closes(config):
    async def body(server):
        stream = await _sasl(server)
        await _call(stream, 17, 1, {"mechanism": "PLAIN"})
        await stream.send_all(_request(36, 1, {"auth_bytes": b"x" * 10_000}))  # > sasl.server.max.receive.size
        assert await _closed(stream)
        other = await _sasl(server)  # everyone else is still served
        assert int(_decode(17, 1, await _call(other, 17, 1, {"mechanism": "PLAIN"})).error_code) == 0

    await _with_server(config, body)


@trio_test
async def test_an_expired_session_may_only_reauthenticate(config):
    async def body(server):
        stream = await _sasl(server)
        await _call(stream, 17, 1, {"mechanism": "PLAIN"})
        await _call(stream, 36, 2, {"auth_bytes": plain_client_token("alice", "alice-secret")})
        await trio.sleep(1.0)
        await _call(stream, 17, 1, {"mechanism": "PLAIN"}, correlation_id=2)  # KIP-368, before expiry
        auth = _decode(36, 2, await _call(stream, 36, 2, {"auth_bytes": plain_client_token("alice", "alice-secret")}))
        assert int(auth.error_code) == 0
        await trio.sleep(1.0)  # 2.0 s after the first authentication, 1.0 s after the second: still valid
        md = await _call(stream, 3, 1, {"topics": []}, correlation_id=3)
        assert md is not None
        await trio.sleep(0.7)  # past the second session's 1.5 s
        await stream.send_all(_request(3, 1, {"topics": []}, correlation_id=4))
        assert await _closed(stream)

    await _with_server(config, body)


@trio_test
async def test_tls_listener_with_and_without_a_client_certificate(config, pki):
    d, _ca = pki

    async def body(server):
        port = server.port_of("SSL")
        ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
        tls = trio.SSLStream(await trio.open_tcp_stream("127.0.0.1", port), ctx, server_hostname="127.0.0.1")
        md = _decode(3, 9, await _call(tls, 3, 9, {"topics": None, "allow_auto_topic_creation": False}))
        assert [b.port for b in md.brokers] == [port]
        mtls = ssl.create_default_context(cafile=str(d / "ca.pem"))
        mtls.load_cert_chain(str(d / "alice.pem"))
        tls = trio.SSLStream(await trio.open_tcp_stream("127.0.0.1", port), mtls, server_hostname="127.0.0.1")
        assert await _call(tls, 18, 0) is not None
        # a plaintext client on the TLS port gets no answer: its frame is no TLS handshake
        raw = await trio.open_tcp_stream("127.0.0.1", port)
        await raw.send_all(_request(18, 0))
        assert await _closed(raw)
        # a TLS client on the plaintext port: its ClientHello is no Kafka frame
        wrong = trio.SSLStream(await trio.open_tcp_stream("127.0.0.1", server.port), ctx, server_hostname="127.0.0.1")
        with pytest.raises((trio.BrokenResourceError, ssl.SSLError)):
            await wrong.do_handshake()

    await _with_server(config, body)


def test_principal_of_an_mtls_client_is_mapped(config, pki):
    from kbroker.server.listeners import build

    d, _ca = pki
    security = build(config, next(e for e in config.endpoints if e.name == "SSL"), None)
    pem = (d / "alice.pem").read_text()
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    cert = x509.load_pem_x509_certificate(pem[pem.index("-----BEGIN CERTIFICATE"):].encode())
    session = security.new_session(cert.public_bytes(Encoding.DER))
    assert str(session.principal) == "User:ALICE"  # RULE:^CN=([a-z]+),.*$/$1/U


@pytest.mark.parametrize("overrides, words", [
    ({"listeners": "SASL_SSL://127.0.0.1:0"}, "needs a keystore"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "GSSAPI (Kerberos) is not served"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "PLAIN needs its users"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-1"},
     "sasl.enabled.mechanisms names SCRAM-SHA-1"),
])
def test_a_listener_whose_security_is_not_served_never_comes_up(tmp_path, overrides, words):
    from kbroker.errors import StartupError
    from kbroker.server.server import KafkaServer

    config = BrokerConfig.from_dict({"log.dirs": str(tmp_path / "data"), **overrides})
    with pytest.raises(StartupError, match=words.replace("(", r"\(").replace(")", r"\)")):
        trio.run(KafkaServer(config).run)
