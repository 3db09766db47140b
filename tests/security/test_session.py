"""The connection session's rules: what may be sent before authentication, handshake and
authenticate steps, failures, session lifetime and KIP-368 re-authentication."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kbroker.errors import ErrorCode
from kbroker.security.credentials import make_credential
from kbroker.security.errors import SaslAuthenticationError
from kbroker.security.mechanisms import server_for
from kbroker.security.plain import plain_client_token
from kbroker.security.scram import ScramClient
from kbroker.security.session import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE, ConnectionSession, Phase

PRODUCE, METADATA = 0, 3
USERS = {"alice": "alice-secret"}
CREDENTIALS = {("bob", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "bob-secret", 4096)}


def servers(expiry_ms: int | None = None):
    def make(mechanism: str):
        server = server_for(mechanism, plain_users=USERS, scram_lookup=lambda m, u: CREDENTIALS.get((u, m)),
                            oauth_options={}, now_ms=lambda: 0)
        if expiry_ms is not None:
            server.session_expiry_ms = expiry_ms  # as an OAUTHBEARER token's exp would
        return server
    return make


def sasl_session(reauth_ms: int = 0, mechanisms=("PLAIN", "SCRAM-SHA-512"), **kw) -> ConnectionSession:
    return ConnectionSession("SASL_SSL", "SASL_SSL", mechanisms=mechanisms, sasl_servers=servers(**kw),
                             reauth_ms=reauth_ms)


def test_a_plaintext_session_is_authenticated_and_refuses_the_sasl_apis():
    s = ConnectionSession("PLAINTEXT", "PLAINTEXT")
    assert s.authenticated and not s.sasl
    assert s.may_send(PRODUCE, 0) and s.may_send(API_VERSIONS, 0)
    assert not s.may_send(SASL_HANDSHAKE, 0) and not s.may_send(SASL_AUTHENTICATE, 0)


@given(st.integers(min_value=0, max_value=100))
def test_before_authentication_only_api_versions_and_sasl(api_key):
    s = sasl_session()
    assert s.may_send(api_key, 0) == (api_key in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE))


def test_plain_success_gives_the_principal_and_opens_every_api():
    s = sasl_session()
    assert s.handshake(1, "PLAIN") == (ErrorCode.none, ["PLAIN", "SCRAM-SHA-512"])
    step = s.authenticate(plain_client_token("alice", "alice-secret"), 1000)
    assert step.error == ErrorCode.none and not step.close and step.session_lifetime_ms == 0
    assert s.authenticated and str(s.principal) == "User:alice"
    assert s.may_send(PRODUCE, 10**12)  # no connections.max.reauth.ms: the session never expires


def test_wrong_password_fails_and_closes():
    s = sasl_session()
    s.handshake(1, "PLAIN")
    step = s.authenticate(plain_client_token("alice", "wrong"), 0)
    assert step.error == ErrorCode.sasl_authentication_failed and step.close
    assert s.phase is Phase.FAILED and not s.may_send(API_VERSIONS, 0)
    assert "wrong" not in (step.message or "")


def test_unknown_mechanism_is_refused_with_the_enabled_list():
    s = sasl_session()
    assert s.handshake(1, "GSSAPI") == (ErrorCode.unsupported_sasl_mechanism, ["PLAIN", "SCRAM-SHA-512"])
    assert s.phase is Phase.FAILED


def test_authenticate_before_handshake_is_an_illegal_state():
    s = sasl_session()
    step = s.authenticate(b"\0alice\0alice-secret", 0)
    assert step.error == ErrorCode.illegal_sasl_state and step.close


def test_v0_handshake_switches_to_unframed_tokens():
    s = sasl_session()
    s.handshake(0, "PLAIN")
    assert s.unframed_tokens
    s.authenticate(plain_client_token("alice", "alice-secret"), 0)
    assert s.authenticated and not s.unframed_tokens


def test_scram_exchange_through_the_session():
    s = sasl_session()
    s.handshake(1, "SCRAM-SHA-512")
    client = ScramClient("SCRAM-SHA-512", "bob", "bob-secret")
    first = s.authenticate(client.first_message(), 0)
    assert first.error == ErrorCode.none and not s.authenticated
    final = s.authenticate(client.final_message(first.token), 0)
    assert final.error == ErrorCode.none and s.authenticated and str(s.principal) == "User:bob"
    client.verify_server_final(final.token)


def test_session_lifetime_is_the_shorter_of_reauth_and_the_credential():
    s = sasl_session(reauth_ms=10_000)
    s.handshake(1, "PLAIN")
    assert s.authenticate(plain_client_token("alice", "alice-secret"), 1_000).session_lifetime_ms == 10_000
    assert s.may_send(PRODUCE, 10_999) and not s.may_send(PRODUCE, 11_000)
    assert s.may_send(SASL_HANDSHAKE, 11_000)  # only a re-authentication may follow
    s2 = sasl_session(reauth_ms=10_000, expiry_ms=5_000)
    s2.handshake(1, "PLAIN")
    assert s2.authenticate(plain_client_token("alice", "alice-secret"), 1_000).session_lifetime_ms == 4_000
    s3 = sasl_session(expiry_ms=5_000)  # no reauth config: the credential's life alone
    s3.handshake(1, "PLAIN")
    assert s3.authenticate(plain_client_token("alice", "alice-secret"), 1_000).session_lifetime_ms == 4_000


def test_reauthentication_keeps_the_principal_and_extends_the_session():
    s = sasl_session(reauth_ms=10_000)
    s.handshake(1, "PLAIN")
    s.authenticate(plain_client_token("alice", "alice-secret"), 0)
    assert s.handshake(1, "PLAIN")[0] == ErrorCode.none
    step = s.authenticate(plain_client_token("alice", "alice-secret"), 9_000)
    assert step.error == ErrorCode.none and s.may_send(PRODUCE, 18_999)


def test_reauthentication_as_someone_else_fails():
    users = dict(USERS, mallory="m")
    s = ConnectionSession("L", "SASL_PLAINTEXT", mechanisms=("PLAIN",), sasl_servers=lambda m: server_for(
        m, plain_users=users, scram_lookup=lambda m, u: None, oauth_options={}, now_ms=lambda: 0))
    s.handshake(1, "PLAIN")
    s.authenticate(plain_client_token("alice", "alice-secret"), 0)
    s.handshake(1, "PLAIN")
    step = s.authenticate(plain_client_token("mallory", "m"), 0)
    assert step.error == ErrorCode.sasl_authentication_failed and step.close


def test_reauthentication_needs_v1_and_the_same_mechanism():
    for version, mechanism in ((0, "PLAIN"), (1, "SCRAM-SHA-512")):
        s = sasl_session()
        s.handshake(1, "PLAIN")
        s.authenticate(plain_client_token("alice", "alice-secret"), 0)
        assert s.handshake(version, mechanism)[0] == ErrorCode.illegal_sasl_state
        assert s.phase is Phase.FAILED


@given(st.binary(max_size=300))
def test_garbage_tokens_fail_cleanly(token):
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        s = sasl_session()
        s.handshake(1, mechanism)
        step = s.authenticate(token, 0)
        assert step.error in (ErrorCode.none, ErrorCode.sasl_authentication_failed, ErrorCode.illegal_sasl_state)
        if step.error != ErrorCode.none:
            assert step.close and s.phase is Phase.FAILED


def test_sasl_authentication_error_is_the_mechanisms_refusal():
    server = servers()("PLAIN")
    try:
        server.evaluate(b"\0alice\0nope")
    except SaslAuthenticationError:
        pass
    else:  # pragma: no cover - the assertion
        raise AssertionError("a wrong password must raise SaslAuthenticationError")
