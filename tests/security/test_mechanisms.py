"""The common server face: the factory, the size bound, and that no bytes whatever make a server
raise anything but SaslAuthenticationError or IllegalSaslStateError."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.security.credentials import make_credential
from kbroker.security.errors import (
    INVALID_RECEIVE_SIZE,
    IllegalSaslStateError,
    SaslAuthenticationError,
)
from kbroker.security.mechanisms import (
    MAX_TOKEN_BYTES,
    SUPPORTED_MECHANISMS,
    SaslServer,
    server_for,
)
from kbroker.security.oauthbearer import OAuthBearerServer, unsecured_client_token
from kbroker.security.plain import PlainServer, plain_client_token
from kbroker.security.scram import ScramClient, ScramServer

NOW = 1_700_000_000_000
CREDENTIALS = {(m, "alice"): make_credential(m, "secret", salt=b"salty") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
looked_up: list[tuple[str, str]] = []


def lookup(mechanism, username):
    looked_up.append((mechanism, username))
    return CREDENTIALS.get((mechanism, username))


def make(mechanism: str) -> SaslServer:
    return server_for(mechanism, plain_users={"alice": "secret"}, scram_lookup=lookup, oauth_options={},
                      now_ms=lambda: NOW)


def test_constants():
    assert SUPPORTED_MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    assert MAX_TOKEN_BYTES == 65536


def test_server_for_each_mechanism():
    assert isinstance(make("PLAIN"), PlainServer)
    assert isinstance(make("SCRAM-SHA-256"), ScramServer) and make("SCRAM-SHA-512").mechanism == "SCRAM-SHA-512"
    assert isinstance(make("OAUTHBEARER"), OAuthBearerServer)
    for mechanism in SUPPORTED_MECHANISMS:
        server = make(mechanism)
        assert server.mechanism == mechanism and not server.complete
        assert server.authorization_id is None and server.session_expiry_ms is None


@pytest.mark.parametrize("mechanism", ["GSSAPI", "scram-sha-256", "", "SCRAM-SHA-1"])
def test_server_for_unknown_mechanism(mechanism):
    with pytest.raises(ValueError, match=f"^Unsupported SASL mechanism {mechanism}$"):
        make(mechanism)


def test_server_for_invalid_oauth_options():
    with pytest.raises(ValueError):
        server_for("OAUTHBEARER", plain_users={}, scram_lookup=lookup,
                   oauth_options={"unsecuredValidatorAllowableClockSkewMs": "-1"}, now_ms=lambda: NOW)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_lookup_is_asked_for_the_mechanism(mechanism):
    looked_up.clear()
    server = make(mechanism)
    client = ScramClient(mechanism, "alice", "secret")
    client.verify_server_final(server.evaluate(client.final_message(server.evaluate(client.first_message()))))
    assert server.complete and server.authorization_id == "alice"
    assert looked_up == [(mechanism, "alice")]


def test_every_mechanism_completes_through_the_factory():
    plain = make("PLAIN")
    plain.evaluate(plain_client_token("alice", "secret"))
    oauth = make("OAUTHBEARER")
    oauth.evaluate(unsecured_client_token({"unsecuredLoginStringClaim_sub": "alice"}, NOW))
    assert plain.authorization_id == oauth.authorization_id == "alice"
    assert oauth.session_expiry_ms == NOW + 3_600_000


@pytest.mark.parametrize("mechanism", SUPPORTED_MECHANISMS)
def test_oversized_token_is_refused(mechanism):
    with pytest.raises(SaslAuthenticationError) as info:
        make(mechanism).evaluate(b"\0" * (MAX_TOKEN_BYTES + 1))
    assert info.value.message == INVALID_RECEIVE_SIZE


@pytest.mark.parametrize("mechanism", SUPPORTED_MECHANISMS)
def test_a_token_of_exactly_the_bound_is_read(mechanism):
    with pytest.raises(SaslAuthenticationError) as info:
        make(mechanism).evaluate(b"x" * MAX_TOKEN_BYTES)
    assert info.value.message != INVALID_RECEIVE_SIZE


def _advance(mechanism: str, steps: int) -> SaslServer:
    """A server taken `steps` valid steps into an exchange (SCRAM: past its first message)."""
    server = make(mechanism)
    if steps and mechanism.startswith("SCRAM"):
        server.evaluate(ScramClient(mechanism, "alice", "secret").first_message())
    return server


_interesting = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=100).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.sampled_from([b"n,,n=alice,r=abc", b"n,,\x01auth=Bearer a.b.\x01\x01", b"\x01", b"\0alice\0secret",
                     b"c=biws,r=abc,p=AAAA", b"n,a=alice,n=alice,r=x,tokenauth=true", b"n,,\x01\x01",
                     b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.e30.\x01\x01", b"y,,n=alice,r=abc"]),
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SUPPORTED_MECHANISMS), st.integers(0, 1), st.lists(_interesting, min_size=1, max_size=4))
def test_garbage_only_ever_fails_as_sasl_errors(mechanism, steps, tokens):
    server = _advance(mechanism, steps)
    for token in tokens:
        try:
            reply = server.evaluate(token)
        except (SaslAuthenticationError, IllegalSaslStateError) as exc:
            assert isinstance(exc.message, str) and exc.message
            continue
        assert isinstance(reply, bytes)
