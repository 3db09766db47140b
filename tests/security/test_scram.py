"""SASL/SCRAM: RFC 7677's example byte for byte, client <-> server round trips, and Kafka's
ScramSaslServer / ScramMessages / ScramFormatter behaviour and messages."""

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.security.credentials import make_credential
from kbroker.security.errors import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    invalid_credentials_message,
)
from kbroker.security.scram import (
    ScramClient,
    ScramServer,
    sasl_name,
    secure_random_string,
    username_from_sasl_name,
)

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
C1 = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
S1 = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
C2 = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
S2 = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

M256, M512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
CRED_A = make_credential(M256, "passwordA", salt=b"salt-for-user-a")


def rfc_server(**kwargs) -> ScramServer:
    credential = make_credential(M256, "pencil", 4096, RFC_SALT)
    return ScramServer(M256, {"user": credential}.get, nonce=RFC_SERVER_NONCE, **kwargs)


def generic(mechanism=M256) -> str:
    return invalid_credentials_message(mechanism)


def test_rfc7677_server_byte_for_byte():
    server = rfc_server()
    assert server.evaluate(C1) == S1
    assert not server.complete
    assert server.evaluate(C2) == S2
    assert server.complete and server.authorization_id == "user" and server.session_expiry_ms is None


def test_rfc7677_client_byte_for_byte():
    client = ScramClient(M256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first_message() == C1
    assert client.final_message(S1) == C2
    client.verify_server_final(S2)
    assert client.complete


def test_rfc7677_wrong_password_fails_at_the_final_message():
    client = ScramClient(M256, "user", "pencil!", nonce=RFC_CLIENT_NONCE)
    server = rfc_server()
    server_first = server.evaluate(client.first_message())
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(client.final_message(server_first))
    assert info.value.message == generic() and info.value.detail == "Invalid client credentials"
    assert not server.complete and server.authorization_id is None


def exchange(mechanism, username, password, lookup_password=None):
    credential = make_credential(mechanism, password if lookup_password is None else lookup_password)
    server = ScramServer(mechanism, {username: credential}.get)
    client = ScramClient(mechanism, username, password)
    server_first = server.evaluate(client.first_message())
    server_final = server.evaluate(client.final_message(server_first))
    client.verify_server_final(server_final)
    return server, client


# Kafka's sasl names are ASCII (\x01-\x7F); ',' and '=' travel escaped
_usernames = st.text(st.characters(min_codepoint=1, max_codepoint=0x7F), min_size=1, max_size=20)
_passwords = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([M256, M512]), _usernames | st.sampled_from([",", "=", "a,b=c", "=2C", "==", ",="]), _passwords)
def test_round_trip(mechanism, username, password):
    server, client = exchange(mechanism, username, password)
    assert server.complete and client.complete and server.authorization_id == username


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([M256, M512]), _usernames, _passwords, _passwords)
def test_round_trip_with_the_wrong_password_fails(mechanism, username, password, stored):
    if password == stored:
        return
    with pytest.raises(SaslAuthenticationError) as info:
        exchange(mechanism, username, password, lookup_password=stored)
    assert info.value.message == generic(mechanism)


@settings(max_examples=10, deadline=None)
@given(st.text(st.characters(min_codepoint=0x80, blacklist_categories=("Cs",)), min_size=1, max_size=5))
def test_non_ascii_usernames_are_refused_as_kafka_refuses_them(username):
    server = ScramServer(M256, lambda name: CRED_A)
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(ScramClient(M256, username, "x").first_message())
    assert info.value.detail.startswith("Invalid SCRAM client first message format")


@pytest.mark.parametrize("username", ["user1", "123", "1,2", "user=A", "user==B", "user,1", "user 1", ",", "=", ",=", "=="])
def test_sasl_name_escaping(username):
    name = sasl_name(username)
    assert "," not in name
    assert "=" not in name.replace("=2C", "").replace("=3D", "")
    assert username_from_sasl_name(name) == username


def test_sasl_name_decoding():
    assert username_from_sasl_name("test=2Cuser") == "test,user"
    assert username_from_sasl_name("test=3Duser") == "test=user"
    with pytest.raises(ValueError, match="Invalid username: a=b"):
        username_from_sasl_name("a=b")


def first(server: ScramServer, message: str) -> bytes:
    return server.evaluate(message.encode())


def fails_first(message: str, lookup=None) -> SaslAuthenticationError:
    server = ScramServer(M256, lookup or {"userA": CRED_A, "testuser": CRED_A}.get)
    with pytest.raises(SaslAuthenticationError) as info:
        first(server, message)
    return info.value


NONCE = "fyko+d2lbbFgONRv9qkxdawL"


@pytest.mark.parametrize("message", [
    f"n,,n=testuser,r={NONCE}",
    f"n,a=testuser,n=testuser,r={NONCE}",
    f"n,,m=reserved-value,n=testuser,r={NONCE}",
    f"n,,m=name1=value1 name2=another test value \"'!$[](),n=testuser,r={NONCE}",
    f"n,,n=testuser,r={NONCE},ext=val1",
    f"n,,n=testuser,r={NONCE},anotherext=name1=value1 name2=another test value \"'!$[]()",
    f"n,,n=testuser,r={NONCE},first=val1,second=name1 = value ,third=123",
])
def test_valid_client_first_messages(message):
    server = ScramServer(M256, {"testuser": CRED_A}.get, nonce="srv")
    reply = first(server, message).decode()
    assert reply == f"r={NONCE}srv,s={base64.b64encode(CRED_A.salt).decode()},i=4096"


@pytest.mark.parametrize("message", [
    f"n,x=something,n=testuser,r={NONCE}",
    f"n,,m,n=testuser,r={NONCE}", f"n,,m=name,value,n=testuser,r={NONCE}", f"n,,m=,,n=testuser,r={NONCE}",
    f"n,,n=testuser,r={NONCE},ext1=value", f"n,,n=testuser,r={NONCE},ext", f"n,,n=testuser,r={NONCE},ext=value1,value2",
    f"n,,n=testuser,r={NONCE},ext=,", f"n,,n=testuser,r={NONCE},ext =value",
    # channel binding: only the gs2 flag n is accepted
    f"y,,n=testuser,r={NONCE}", f"p=tls-unique,,n=testuser,r={NONCE}",
    # empty name, nonce with a comma-free but non-printable char, junk
    f"n,,n=,r={NONCE}", "n,,n=testuser,r=a b", "", "n,,", "\xff",
])
def test_invalid_client_first_messages(message):
    err = fails_first(message)
    assert err.message == generic()
    assert err.detail == f"Invalid SCRAM client first message format: {message}"


def test_unknown_user_fails_at_the_first_message_with_the_generic_message():
    err = fails_first(f"n,,n=nobody,r={NONCE}")
    assert (err.message, err.detail) == (generic(), "Authentication failed: Invalid user credentials")


def test_escaped_usernames_are_looked_up_unescaped():
    seen = []
    server = ScramServer(M256, lambda name: seen.append(name) or CRED_A)
    first(server, f"n,,n=a=2Cb=3D=3D2C,r={NONCE}")
    assert seen == ["a,b==2C"]
    # an '=' that is no escape is refused by the grammar itself
    assert fails_first(f"n,,n=a=2Db,r={NONCE}").detail.startswith("Invalid SCRAM client first message format")


def test_lookup_failure_is_could_not_be_obtained():
    def broken(_):
        raise RuntimeError("store down")
    err = fails_first(f"n,,n=userA,r={NONCE}", lookup=broken)
    assert err.message == generic() and err.detail.startswith("Authentication failed: Credentials could not be obtained")


def test_authorization_id_must_be_the_username():
    err = fails_first(f"n,a=userB,n=userA,r={NONCE}")
    assert err.message == "Authentication failed: Client requested an authorization id that is different from username"
    assert err.mechanism is None


def test_authorization_id_is_compared_as_sent_like_kafka():
    # the authzid is not un-escaped before the comparison, so a,b cannot name itself
    server = ScramServer(M256, {"a,b": CRED_A}.get)
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        first(server, f"n,a=a=2Cb,n=a=2Cb,r={NONCE}")


def test_delegation_tokens_are_not_served():
    err = fails_first(f"n,,n=userA,r={NONCE},tokenauth=true")
    assert err.message == generic() and err.detail == "Token Authentication failed: Invalid tokenId : userA"
    err = fails_first(f"n,,n=userA,r={NONCE},tokenauth=TRUE")
    assert err.detail.startswith("Token Authentication failed")
    # tokenauth=false is an ordinary login
    assert first(ScramServer(M256, {"userA": CRED_A}.get), f"n,,n=userA,r={NONCE},tokenauth=false")


def test_too_few_iterations_in_the_stored_credential():
    weak = make_credential(M256, "pw", iterations=1024)
    err = fails_first(f"n,,n=userA,r={NONCE}", lookup={"userA": weak}.get)
    assert err.message == generic() and err.detail == "Iterations 1024 is less than the minimum 4096 for SCRAM_SHA_256"


def started(mechanism=M256, password="passwordA"):
    credential = make_credential(mechanism, "passwordA")
    server = ScramServer(mechanism, {"userA": credential}.get)
    client = ScramClient(mechanism, "userA", password)
    server_first = server.evaluate(client.first_message())
    return server, client, server_first


def fails_final(server, message: bytes) -> SaslAuthenticationError:
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(message)
    return info.value


def test_final_message_nonce_must_end_with_the_servers():
    server, _, _ = started()
    err = fails_final(server, f"c=biws,r={secure_random_string()},p=AAAA".encode())
    assert (err.message, err.detail) == (generic(), "Invalid client nonce in the final client message.")


def test_final_message_nonce_is_checked_with_endswith_like_kafka():
    server, client, server_first = started()
    nonce = "XX" + server_first.decode().split(",")[0][2:]
    salt = base64.b64decode(server_first.decode().split(",")[1][2:])
    salted = hashlib.pbkdf2_hmac("sha256", b"passwordA", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    auth = f"{client._first_bare},{server_first.decode()},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, hmac.new(stored_key, auth, "sha256").digest()))
    assert server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()).startswith(b"v=")


@pytest.mark.parametrize("message", [b"c=ab,r=x,p=AAAA", b"c=biws,r=x,p=123", b"c=biws,r=x,ext1=value,p=AAAA",
                                     b"garbage", b""])
def test_malformed_final_messages(message):
    server, _, _ = started()
    err = fails_final(server, message)
    assert err.message == generic() and err.detail.startswith("Invalid SCRAM client final message format")


def test_proof_of_the_wrong_length():
    server, _, server_first = started()
    nonce = server_first.decode().split(",")[0][2:]
    err = fails_final(server, f"c=biws,r={nonce},p=AAAA".encode())
    assert err.message == generic()


def test_no_message_after_completion_or_failure():
    server, client, server_first = started()
    server.evaluate(client.final_message(server_first))
    with pytest.raises(IllegalSaslStateError, match="^Unexpected challenge in Sasl server state COMPLETE$"):
        server.evaluate(b"n,,n=userA,r=abc")
    server, client, server_first = started(password="wrong")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(client.final_message(server_first))
    with pytest.raises(IllegalSaslStateError, match="state FAILED"):
        server.evaluate(b"n,,n=userA,r=abc")


def test_client_extensions_are_sent_in_javas_order_and_verified():
    credential = make_credential(M512, "pw")
    server = ScramServer(M512, {"u": credential}.get)
    client = ScramClient(M512, "u", "pw", nonce="abc", extensions={"first": "1", "second": "2", "third": "3"})
    first_message = client.first_message()
    assert first_message == b"n,,n=u,r=abc,third=3,first=1,second=2"
    client.verify_server_final(server.evaluate(client.final_message(server.evaluate(first_message))))
    assert server.complete


# --- the client's checks of what the server sends --------------------------------------------


def client_after_first(nonce="cnonce"):
    client = ScramClient(M256, "user", "pencil", nonce=nonce)
    client.first_message()
    return client


def client_fails(client_call) -> str:
    with pytest.raises(SaslAuthenticationError) as info:
        client_call()
    return info.value.message


def test_client_refuses_a_foreign_nonce():
    client = client_after_first()
    assert client_fails(lambda: client.final_message(b"r=other,s=c2FsdA==,i=4096")) == (
        "Invalid server nonce: does not start with client nonce")


def test_client_refuses_too_few_or_too_many_iterations():
    assert client_fails(lambda: client_after_first().final_message(b"r=cnonceX,s=c2FsdA==,i=4095")) == (
        "Requested iterations 4095 is less than the minimum 4096 for SCRAM_SHA_256")
    assert "is more than the maximum 16384" in client_fails(
        lambda: client_after_first().final_message(b"r=cnonceX,s=c2FsdA==,i=1000000"))
    assert client_fails(lambda: client_after_first().final_message(b"r=cnonceX,s=c2FsdA==,i=0")) == (
        "Invalid SCRAM server first message format: invalid iterations 0")
    assert client_fails(lambda: client_after_first().final_message(b"r=cnonceX,s=c2FsdA==,i=99999999999")) == (
        "Invalid SCRAM server first message format: invalid iterations")


@pytest.mark.parametrize("message", [b"r=cnonceX,s==123,i=4096", b"r=cnonceX,invalid,s=c2FsdA==,i=4096",
                                     b"m,r=cnonceX,s=c2FsdA==,i=4096", b"r=cnonceX,s=c2FsdA==,i=4096,ext"])
def test_client_refuses_malformed_server_first(message):
    assert client_fails(lambda: client_after_first().final_message(message)).startswith(
        "Invalid SCRAM server first message format")


@pytest.mark.parametrize("message", [b"m=reserved,r=cnonceX,s=c2FsdA==,i=4096", b"r=cnonceX,s=c2FsdA==,i=4096,ext=val1"])
def test_client_accepts_reserved_and_extensions_in_server_first(message):
    assert client_after_first().final_message(message).startswith(b"c=biws,r=cnonceX,p=")


def test_client_server_final_errors():
    client = ScramClient(M256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    client.first_message()
    client.final_message(S1)
    assert client_fails(lambda: client.verify_server_final(b"e=unknown-user")) == (
        "Sasl authentication using SCRAM_SHA_256 failed with error: unknown-user")
    for bad, expected in [(b"v=" + base64.b64encode(b"x" * 32), "Invalid server signature in server final message"),
                          (b"e=error1,error2", "Invalid SCRAM server final message format: e=error1,error2"),
                          (b"v=1=23", "Invalid SCRAM server final message format: v=1=23")]:
        client = ScramClient(M256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
        client.first_message()
        client.final_message(S1)
        assert client_fails(lambda c=client, b=bad: c.verify_server_final(b)) == expected
        assert not client.complete


def test_client_order_is_enforced():
    client = ScramClient(M256, "user", "pencil")
    with pytest.raises(IllegalSaslStateError, match="SEND_CLIENT_FIRST_MESSAGE"):
        client.final_message(S1)
    client.first_message()
    with pytest.raises(IllegalSaslStateError):
        client.first_message()


def test_secure_random_string_is_base36_130_bits():
    values = {secure_random_string() for _ in range(50)}
    assert len(values) == 50
    assert all(v.isalnum() and v == v.lower() and len(v) <= 26 for v in values)


def test_invalid_constructor_arguments():
    with pytest.raises(ValueError, match="Requested mechanism 'SCRAM-SHA-1' is not supported"):
        ScramServer("SCRAM-SHA-1", lambda _: None)
    with pytest.raises(ValueError):
        ScramServer(M256, lambda _: None, nonce="a,b")
    with pytest.raises(ValueError):
        ScramClient(M256, "u", "p", nonce="")
