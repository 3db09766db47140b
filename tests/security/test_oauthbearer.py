"""SASL/OAUTHBEARER with Kafka's unsecured tokens: the initial response's grammar
(OAuthBearerClientInitialResponseTest), the validator (OAuthBearerUnsecuredValidatorCallbackHandlerTest,
OAuthBearerValidationUtils), the server's JSON challenge and its failure (OAuthBearerSaslServerTest),
and the client's token (OAuthBearerUnsecuredLoginCallbackHandler)."""

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.security.errors import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    invalid_credentials_message,
)
from kbroker.security.oauthbearer import (
    OAuthBearerServer,
    client_initial_response,
    parse_unsecured_jws,
    unsecured_client_token,
    unsecured_jws,
)

NOW = 1_729_853_600_123
GENERIC = invalid_credentials_message("OAUTHBEARER")


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def jws(claims: str, header: str = '{"alg":"none"}', signature: str = "") -> str:
    return f"{b64(header)}.{b64(claims)}.{signature}"


def claims(**values) -> str:
    return json.dumps(values)


def server(options=None, now=NOW) -> OAuthBearerServer:
    return OAuthBearerServer(options or {}, lambda: now)


def response(token: str, authzid: str = "", **extensions) -> bytes:
    return client_initial_response(token, extensions, authzid)


def challenge(options, token: str, now=NOW) -> bytes:
    s = server(options, now)
    reply = s.evaluate(response(token))
    assert not s.complete
    return reply


EXP = NOW / 1000 + 3600
GOOD = jws(claims(sub="alice", exp=EXP, iat=NOW / 1000))


def test_valid_token():
    s = server()
    assert s.evaluate(response(GOOD)) == b""
    assert s.complete and s.authorization_id == "alice"
    assert s.session_expiry_ms == round(EXP * 1000)
    assert s.extensions == {} and s.token.principal_name == "alice"


def test_client_token_is_accepted_and_carries_extensions():
    token = unsecured_client_token({"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginExtension_traceId": "t1",
                                    "unsecuredLoginExtension_team": "a b"}, NOW)
    s = server()
    assert s.evaluate(token) == b""
    assert s.authorization_id == "alice" and s.extensions == {"traceId": "t1", "team": "a b"}
    assert s.session_expiry_ms == NOW + 3_600_000


def test_client_token_layout_is_kafkas():
    token = unsecured_client_token({"unsecuredLoginStringClaim_sub": "alice",
                                    "unsecuredLoginListClaim_scope": ",KAFKA_BROKER,LOGIN_TO_KAFKA",
                                    "unsecuredLoginNumberClaim_level": "3",
                                    "unsecuredLoginLifetimeSeconds": "60"}, NOW)
    head, _, rest = token.partition(b"auth=Bearer ")
    assert head == b"n,,\x01" and rest.endswith(b".\x01\x01")
    header, body, signature = rest[:-2].decode().split(".")
    assert signature == ""
    assert base64.urlsafe_b64decode(header + "==") == b'{"alg":"none"}'
    # exp and iat as Java prints doubles, then the claims in the options' HashMap order (OpenJDK 17
    # iterates these four options as ...ListClaim_scope, ...NumberClaim_level, ...LifetimeSeconds,
    # ...StringClaim_sub)
    assert base64.urlsafe_b64decode(body + "==").decode() == (
        '{"exp":1.729853660123E9,"iat":1.729853600123E9,"scope":["KAFKA_BROKER","LOGIN_TO_KAFKA"],'
        '"level":3.0,"sub":"alice"}')


# OAuthBearerClientInitialResponseTest


def test_client_response_layout():
    assert client_initial_response("123.345.567", {"nineteen": "42"}) == (
        b"n,,\x01auth=Bearer 123.345.567\x01nineteen=42\x01\x01")
    assert client_initial_response("t", authzid="me") == b"n,a=me,\x01auth=Bearer t\x01\x01"
    with pytest.raises(ValueError, match="Extension name 19 is invalid"):
        client_initial_response("123.345.567", {"19": "42"})
    with pytest.raises(ValueError, match="Extension name auth is invalid"):
        client_initial_response("t", {"auth": "x"})
    with pytest.raises(ValueError, match=r"Extension value \(\x01\) for extension a is invalid"):
        client_initial_response("t", {"a": "\x01"})


RFC7628_EXAMPLE = ("n,a=user@example.com,\x01host=server.example.com\x01port=143\x01"
                   "auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg\x01\x01")
RFC6750_CHARACTERS = ("n,a=user@example.com,\x01host=server.example.com\x01port=143\x01auth=Bearer "
                      "vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg==\x01\x01")


@pytest.mark.parametrize("message,token,authzid,extensions", [
    ("n,,\x01auth=Bearer 123.345.567\x01\x01", "123.345.567", "", {}),
    ("n,a=myuser,\x01auth=Bearer 345\x01\x01", "345", "myuser", {}),
    ("n,,\x01propA=valueA1, valueA2\x01auth=Bearer 567\x01propB=valueB\x01\x01", "567", "",
     {"propA": "valueA1, valueA2", "propB": "valueB"}),
    (RFC7628_EXAMPLE, "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg", "user@example.com",
     {"host": "server.example.com", "port": "143"}),
    (RFC6750_CHARACTERS, "vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg==",
     "user@example.com", {"host": "server.example.com", "port": "143"}),
])
def test_initial_response_parsing(message, token, authzid, extensions):
    assert OAuthBearerServer._initial_response(message.encode()) == (authzid, token, extensions)


@pytest.mark.parametrize("message,detail", [
    (b"", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer t\x01", "Invalid OAUTHBEARER client first message"),
    (b"y,,\x01auth=Bearer t\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01host=h\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Bearer a b\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
])
def test_malformed_initial_response_fails_with_the_generic_message(message, detail):
    s = server()
    with pytest.raises(SaslAuthenticationError) as info:
        s.evaluate(message)
    assert (info.value.message, info.value.detail) == (GENERIC, detail)


def test_scheme_is_case_insensitive():
    s = server()
    s.evaluate(f"n,,\x01auth=bEaReR {GOOD}\x01\x01".encode())
    assert s.complete


# OAuthBearerUnsecuredValidatorCallbackHandlerTest

VALIDATOR = {"unsecuredValidatorPrincipalClaimName": "principal", "unsecuredValidatorAllowableClockSkewMs": "1"}


@pytest.mark.parametrize("with_iat", [True, False])
def test_validator_valid_token(with_iat):
    body = {"principal": "username", "exp": EXP} | ({"iat": NOW / 1000} if with_iat else {})
    s = server(VALIDATOR)
    assert s.evaluate(response(jws(json.dumps(body)))) == b""
    assert s.authorization_id == "username"


@pytest.mark.parametrize("body", [{"exp": EXP, "principal": 1}, {"exp": EXP}, {"exp": EXP, "principal": " "},
                                  {"exp": EXP, "principal": ["a"]}])
def test_validator_bad_or_missing_principal(body):
    assert challenge(VALIDATOR, jws(json.dumps(body))) == b'{"status":"invalid_token"}'


def test_validator_too_early_expiration():
    token = jws(claims(principal="username", iat=NOW / 1000, exp=NOW / 1000))
    assert challenge(VALIDATOR, token) == b'{"status":"invalid_token"}'


def test_validator_scope():
    token = jws(claims(sub="username", exp=EXP, scope="scope1"))
    s = server({"unsecuredValidatorRequiredScope": "scope1"})
    assert s.evaluate(response(token)) == b""
    assert challenge({"unsecuredValidatorRequiredScope": "scope1 scope2"}, token) == (
        b'{"status":"insufficient_scope", "scope":"[scope1, scope2]"}')
    listed = jws(claims(sub="username", exp=EXP, scope=["scope2", " scope1 ", ""]))
    assert server({"unsecuredValidatorRequiredScope": "  scope1   scope2 "}).evaluate(response(listed)) == b""
    # a string scope claim is one scope, not split on spaces
    spaced = jws(claims(sub="username", exp=EXP, scope="scope1 scope2"))
    assert challenge({"unsecuredValidatorRequiredScope": "scope1"}, spaced).startswith(b'{"status":"insufficient_scope"')


def test_validator_custom_scope_claim():
    token = jws(claims(sub="u", exp=EXP, roles=["admin"]))
    assert server({"unsecuredValidatorScopeClaimName": "roles",
                   "unsecuredValidatorRequiredScope": "admin"}).evaluate(response(token)) == b""


@pytest.mark.parametrize("now,skew,ok", [
    (NOW, "0", True), (round(EXP * 1000) - 1, "0", True), (round(EXP * 1000), "0", False),
    (round(EXP * 1000), "1", True), (round(EXP * 1000) + 5, "5", False),
])
def test_expiry_with_clock_skew(now, skew, ok):
    s = server({"unsecuredValidatorAllowableClockSkewMs": skew}, now)
    reply = s.evaluate(response(jws(claims(sub="u", exp=EXP))))
    assert (reply == b"") is ok


def test_issued_at_checks():
    future = jws(claims(sub="u", exp=EXP, iat=NOW / 1000 + 10))
    assert challenge({}, future) == b'{"status":"invalid_token"}'
    assert server({"unsecuredValidatorAllowableClockSkewMs": "10000"}).evaluate(response(future)) == b""
    backwards = jws(claims(sub="u", exp=NOW / 1000 + 5, iat=NOW / 1000 + 10))
    assert challenge({"unsecuredValidatorAllowableClockSkewMs": "20000"}, backwards) == b'{"status":"invalid_token"}'
    assert challenge({}, jws(claims(sub="u", exp=EXP, iat="yesterday"))) == b'{"status":"invalid_token"}'


@pytest.mark.parametrize("token,detail", [
    (jws(claims(sub="u", exp=EXP), header='{"alg":"HS256"}'), "Unsecured JWS must have 'none' for an algorithm"),
    (jws(claims(sub="u", exp=EXP), signature="AB"), "Unsecured JWS must not contain a digital signature"),
    (jws(claims(sub="u")), "No expiration time in JWT"),
    (jws(claims(sub="u", exp="soon")), "The 'exp' claim was not of type Number: String"),
    (jws(claims(sub=7, exp=EXP)), "The 'sub' claim was not of type String: Integer"),
    (jws(claims(sub="u", exp=EXP, scope=7)), "The 'scope' claim was not of type List: Integer"),
    ("a.b", "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"),
    ("a..b", "Malformed compact serialization contains '..'"),
    (f"{b64('{}')}+.{b64('{}')}.", "malformed Base64 URL encoded value"),
    (f"{b64('{nope')}.{b64('{}')}.", "malformed JSON"),
    (jws('{"sub":"u","exp":NaN}'), "malformed JSON"),
    (jws("[1,2]"), "No expiration time in JWT"),
])
def test_illegal_tokens_get_the_json_challenge(token, detail):
    s = server()
    assert s.evaluate(response(token)) == b'{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationError) as info:
        s.evaluate(b"\x01")
    assert info.value.message == '{"status":"invalid_token"}'
    assert info.value.detail == detail
    with pytest.raises(IllegalSaslStateError):
        s.evaluate(b"\x01")


def test_header_without_alg_fails_outright():
    s = server()
    with pytest.raises(SaslAuthenticationError) as info:
        s.evaluate(response(jws(claims(sub="u", exp=EXP), header='{"typ":"JWT"}')))
    assert info.value.message == GENERIC and info.value.detail == "JWS header must have an Algorithm value"


def test_a_new_initial_response_after_the_challenge_is_evaluated_afresh():
    s = server()
    assert s.evaluate(response(GOOD + "AB")) == b'{"status":"invalid_token"}'
    assert s.evaluate(response(GOOD)) == b""
    assert s.complete


def test_control_a_without_a_pending_error_is_malformed():
    with pytest.raises(SaslAuthenticationError) as info:
        server().evaluate(b"\x01")
    assert info.value.message == GENERIC


def test_authorization_id():
    s = server()
    assert s.evaluate(response(GOOD, authzid="alice")) == b""
    with pytest.raises(SaslAuthenticationError) as info:
        server().evaluate(response(GOOD, authzid="alicex"))
    assert info.value.message == ("Authentication failed: Client requested an authorization id (alicex) that is "
                                  "different from the token's principal name (alice)")


def test_base64url_sections_with_dash_and_underscore_are_read():
    body = '{"sub":"u>>>___<<<---","exp":' + str(EXP) + ',"data":"??~~"}'
    token = jws(body)
    assert "-" in token or "_" in token
    s = server()
    assert s.evaluate(response(token)) == b"" and s.authorization_id == "u>>>___<<<---"


def test_jws_number_and_trailing_text_handling():
    # Jackson's readTree reads the first JSON value and ignores what follows; huge numbers are numbers
    token = jws('{"sub":"u","exp":1e400} trailing')
    parsed = parse_unsecured_jws(token)
    assert parsed.lifetime_ms == 2**63 - 1
    assert parse_unsecured_jws(jws('{"sub":"u","exp":' + str(10**30) + ',"iat":12}')).start_time_ms == 12000
    # booleans, nulls and objects become their text; arrays become lists of text
    odd = parse_unsecured_jws(jws('{"sub":"u","exp":5,"b":true,"n":null,"o":{"x":1},"l":[1,2.5,"s",null,{}]}'))
    assert odd.claims["b"] == "true" and odd.claims["n"] == "null" and odd.claims["o"] == ""
    assert odd.claims["l"] == ["1", "2.5", "s", "null", ""]


def test_validator_options():
    with pytest.raises(ValueError, match='For input string: "soon"'):
        server({"unsecuredValidatorAllowableClockSkewMs": "soon"})
    with pytest.raises(ValueError, match="Allowable clock skew millis must not be negative: -1"):
        server({"unsecuredValidatorAllowableClockSkewMs": "-1"})
    with pytest.raises(ValueError, match='Invalid scope value: a"b'):
        server({"unsecuredValidatorRequiredScope": 'ok a"b'})
    s = server({"unsecuredValidatorPrincipalClaimName": "  ", "unsecuredValidatorAllowableClockSkewMs": " 5 "})
    s.evaluate(response(GOOD))
    assert s.authorization_id == "alice"


# OAuthBearerUnsecuredLoginCallbackHandler


@pytest.mark.parametrize("options,message", [
    ({}, "Token not provided, this login cannot be used to establish client connections"),
    ({"unsecuredLoginExtension_a": "b"}, "Extensions provided in login context without a token"),
    ({"unsecuredLoginNumberClaim_x": "1"}, "No principal name in JWT claim: sub"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginStringClaim_exp": "1"}, "Cannot explicitly set the 'exp' claim"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_iat": "1"}, "Cannot explicitly set the 'iat' claim"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "1h"}, 'For input string: "1h"'),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "1_0"}, 'For input string: "1_0"'),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginExtension_auth": "x"}, "Extension name auth is invalid"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginExtension_": "x"}, "Extension name  is invalid"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginExtension_k": "\x01"}, "Extension value (\x01) for extension k is invalid"),
    # Kafka's escaping doubles the backslash it puts before a quote: such a claim cannot be parsed
    ({"unsecuredLoginStringClaim_sub": 'a"b'}, "malformed JSON"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginListClaim_l": ",,"}, 'Illegal JSON array: ,""]'),
])
def test_client_option_errors(options, message):
    with pytest.raises(ValueError) as info:
        unsecured_client_token(options, NOW)
    assert str(info.value) == message


def test_client_principal_claim_name_and_list_claims():
    token = unsecured_jws({"unsecuredLoginPrincipalClaimName": "who", "unsecuredLoginStringClaim_who": "bob",
                           "unsecuredLoginListClaim_l": "|a|b||", "unsecuredLoginListClaim_e": "x",
                           "unsecuredLoginNumberClaim_n": " 2.5e3 "}, NOW)
    parsed = parse_unsecured_jws(token, "who")
    assert parsed.principal_name == "bob"
    assert parsed.claims["l"] == ["a", "b", ""] and parsed.claims["e"] == [] and parsed.claims["n"] == 2500.0
    s = server({"unsecuredValidatorPrincipalClaimName": "who"})
    assert s.evaluate(client_initial_response(token)) == b"" and s.authorization_id == "bob"


_principals = st.text(st.characters(min_codepoint=0x20, blacklist_categories=("Cs",), blacklist_characters='"'),
                      min_size=1).filter(lambda s: s.strip(" ") != "")


@settings(max_examples=60)
@given(_principals, st.integers(1, 10**6), st.integers(0, 2**41),
       st.dictionaries(st.from_regex(r"[A-Za-z]+", fullmatch=True).filter(lambda k: k != "auth"),
                       st.from_regex(r"[\x21-\x7e \t\r\n]+", fullmatch=True), max_size=3))
def test_client_server_round_trip(principal, lifetime, now, extensions):
    options = {"unsecuredLoginStringClaim_sub": principal, "unsecuredLoginLifetimeSeconds": str(lifetime)}
    options |= {f"unsecuredLoginExtension_{k}": v for k, v in extensions.items()}
    # the broker reads the token a millisecond later: at the very same instant iat * 1000 may come out
    # a hair above now in floating point (2.043 * 1000 > 2043), and Kafka would refuse it just the same
    s = server(now=now + 1)
    assert s.evaluate(unsecured_client_token(options, now)) == b""
    assert s.authorization_id == principal and s.extensions == extensions
    assert abs(s.session_expiry_ms - (now + lifetime * 1000)) <= 1
