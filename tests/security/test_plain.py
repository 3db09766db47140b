"""SASL/PLAIN: Kafka's PlainSaslServerTest cases, the failure messages, and the client's token."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.security.errors import IllegalSaslStateError, SaslAuthenticationError
from kbroker.security.plain import PlainServer, plain_client_token

USERS = {"userA": "passwordA", "userB": "passwordB"}


def message(authzid: str, username: str, password: str) -> bytes:
    return f"{authzid}\0{username}\0{password}".encode()


def fails(token: bytes, users=USERS) -> str:
    with pytest.raises(SaslAuthenticationError) as info:
        PlainServer(users).evaluate(token)
    return info.value.message


def test_no_authorization_id():
    server = PlainServer(USERS)
    assert server.evaluate(message("", "userA", "passwordA")) == b""
    assert server.complete and server.authorization_id == "userA" and server.session_expiry_ms is None


def test_authorization_id_equal_to_username():
    server = PlainServer(USERS)
    assert server.evaluate(message("userA", "userA", "passwordA")) == b""
    assert server.authorization_id == "userA"


def test_authorization_id_different_from_username():
    assert fails(message("userB", "userA", "passwordA")) == (
        "Authentication failed: Client requested an authorization id that is different from username")


def test_wrong_password_and_unknown_user_read_the_same():
    assert fails(message("", "userA", "passwordB")) == "Authentication failed: Invalid username or password"
    assert fails(message("", "nobody", "passwordA")) == "Authentication failed: Invalid username or password"


@pytest.mark.parametrize("authzid,username,password,expected", [
    ("", "", "", "Authentication failed: username not specified"),
    ("", "", "p", "Authentication failed: username not specified"),
    ("", "u", "", "Authentication failed: password not specified"),
    ("a", "", "", "Authentication failed: username not specified"),
    ("a", "", "p", "Authentication failed: username not specified"),
    ("a", "u", "", "Authentication failed: password not specified"),
])
def test_empty_tokens(authzid, username, password, expected):
    assert fails(message(authzid, username, password)) == expected


def test_token_counts():
    assert fails(b"a\0u\0p\0") == "Invalid SASL/PLAIN response: expected 3 tokens, got 4"
    assert fails(b"a\0u\0p\0x\0y") == "Invalid SASL/PLAIN response: expected 3 tokens, got 4"
    assert fails(b"\0u") == "Invalid SASL/PLAIN response: expected 3 tokens, got 2"
    assert fails(b"") == "Invalid SASL/PLAIN response: expected 3 tokens, got 1"


def test_bad_utf8_is_an_authentication_failure():
    assert fails(b"\0userA\0\xff\xfe") == "Authentication failed: Invalid username or password"


def test_non_ascii_credentials():
    server = PlainServer({"jörg": "pässwörd ✓"})
    server.evaluate(plain_client_token("jörg", "pässwörd ✓"))
    assert server.authorization_id == "jörg"


def test_no_second_token():
    server = PlainServer(USERS)
    server.evaluate(message("", "userA", "passwordA"))
    with pytest.raises(IllegalSaslStateError, match="Unexpected challenge in Sasl server state COMPLETE"):
        server.evaluate(message("", "userA", "passwordA"))
    failed = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError):
        failed.evaluate(message("", "userA", "nope"))
    with pytest.raises(IllegalSaslStateError, match="state FAILED"):
        failed.evaluate(message("", "userA", "passwordA"))
    assert not failed.complete and failed.authorization_id is None


def test_client_token_layout():
    assert plain_client_token("alice", "secret") == b"\0alice\0secret"
    with pytest.raises(ValueError):
        plain_client_token("al\0ice", "secret")


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1)


@given(_text, _text)
def test_client_token_round_trip(username, password):
    server = PlainServer({username: password})
    assert server.evaluate(plain_client_token(username, password)) == b""
    assert server.authorization_id == username


@given(_text, _text, _text)
def test_only_the_right_password_passes(username, password, attempt):
    server = PlainServer({username: password})
    if attempt == password:
        server.evaluate(plain_client_token(username, attempt))
        assert server.complete
    else:
        with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
            server.evaluate(plain_client_token(username, attempt))
