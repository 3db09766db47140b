"""What a secured kbroker refuses, with raw sockets (hand-written SaslHandshake v1 / SaslAuthenticate
v1 frames, securitykit.RawConn) and stock clients, and that it goes on serving afterwards.

The module's broker serves PLAINTEXT, SSL (an inline PEM keystore: ssl.keystore.certificate.chain +
ssl.keystore.key), MTLS (client certificates required; mapping rules without DEFAULT, so a
certificate of another organisation maps to no principal), SASL_PLAINTEXT (sessions limited to
REAUTH_MS by connections.max.reauth.ms, KIP-368) and SASL_SSL, with PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER, and connection.failed.authentication.delay.ms = DELAY_MS.

Kafka's rules checked (SaslServerAuthenticator, SslPrincipalMapper, Selector):
- a failed authentication is answered SASL_AUTHENTICATION_FAILED (58) and the connection is closed,
  after the failed-authentication delay;
- before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served; anything
  else closes the connection; frames above sasl.server.max.receive.size (524288) close it too;
- an unsupported mechanism is answered UNSUPPORTED_SASL_MECHANISM (33) with the enabled list;
- TLS against a plaintext port and plaintext against a TLS port never get a Kafka answer, and a
  stock client so misconfigured produces nothing;
- the session lifetime (SaslAuthenticate v1) is connections.max.reauth.ms, or an OAUTHBEARER token's
  remaining life when shorter; past it the next request closes the connection unless the client
  re-authenticated (as librdkafka and kafka-python do);
- ApiVersions lists SaslHandshake/SaslAuthenticate on SASL listeners only (kbroker's rule; a Kafka
  broker lists them everywhere and answers ILLEGAL_SASL_STATE on a non-SASL listener);
- Metadata names, for the broker, the port of the listener the client came in on.
The last test checks the broker still serves a good client and that its log holds no password.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
import struct
import time
import uuid

import pytest
import securitykit as sk

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("kbroker")]

MTLS_RULES = "RULE:^CN=([a-zA-Z0-9.-]*),OU=kafka-clients,O=acme,.*$/$1/L"  # no DEFAULT: others map to nothing
REAUTH_MS = 2000  # SASL_PLAINTEXT only
DELAY_MS = 400  # connection.failed.authentication.delay.ms
CLOSE_WAIT_S = DELAY_MS / 1000 + 3
SENT_SECRETS: list[str] = []  # wrong passwords the tests send: the broker must not log them either


def wrong_password(tag: str) -> str:
    pw = sk.secret(f"wrong-{tag}")
    SENT_SECRETS.append(pw)
    return pw


@pytest.fixture(scope="module")
def secure(kt, tmp_path_factory):
    yield from sk.running_setup(
        kt, tmp_path_factory.mktemp("security-refusals"), ssl_keystore="inline-pem", mtls_rules=MTLS_RULES,
        extra={"listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS),
               "connection.failed.authentication.delay.ms": str(DELAY_MS)})


@pytest.fixture(scope="module")
def kbroker(secure):
    return secure.broker


def _conn(secure, listener: str, client_cert: str | None = None) -> sk.RawConn:
    tls = sk.tls_context(secure.pki, client_cert) if sk.LISTENERS[listener] in ("SSL", "SASL_SSL") else None
    return sk.RawConn(secure.ports[listener], tls=tls)


def _assert_closed_after_failure(conn: sk.RawConn, what: str, started: float) -> float:
    """The broker closes `conn` (no further Kafka answer), not sooner than the failed-authentication
    delay after `started` (the monotonic time before the failing exchange began: Kafka holds the
    failure answer back for the delay, kbroker may answer first and close after it); returns the
    seconds from `started` to the close."""
    closed, extra = conn.closed_within(CLOSE_WAIT_S)
    took = time.monotonic() - started
    assert closed, f"{what}: the connection is still open {CLOSE_WAIT_S:.1f}s after the failure was answered"
    assert extra == b"", f"{what}: unexpected bytes after the failure answer: {extra[:80]!r}"
    assert took >= DELAY_MS / 1000 * 0.9, \
        f"{what}: closed {took:.3f}s after the exchange began, before connection.failed.authentication.delay.ms={DELAY_MS}"
    return took


def _good_credentials(secure, mechanism):
    users = secure.users
    if mechanism == "PLAIN":
        return "alice", users.plain["alice"]
    if mechanism == "OAUTHBEARER":
        return "alice", None
    return "alice", users.scram["alice"][mechanism]


def _topic(secure, kt, tag):
    topic = kt.topic_name("sec-refused", tag)
    sk.create_topic(secure.plaintext, topic)
    return topic


def _assert_empty(secure, topic):
    ends = sk.end_offsets(secure.plaintext, topic)
    assert ends == {0: 0, 1: 0, 2: 0}, f"records reached {topic} although the client was refused: {ends}"


@contextlib.contextmanager
def captured_logs(*names: str):
    """Records of these loggers at WARNING and above (conftest silences the client loggers)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep(logging.WARNING)
    saved = []
    for name in names:
        lg = logging.getLogger(name)
        saved.append((lg, lg.level))
        lg.setLevel(logging.WARNING)
        lg.addHandler(handler)
    try:
        yield records
    finally:
        for lg, level in saved:
            lg.removeHandler(handler)
            lg.setLevel(level)


def _logged_errors(records, cls) -> list:
    """Exceptions of class `cls` passed to the log calls (as arguments or exc_info)."""
    found = []
    for r in records:
        for a in (r.args if isinstance(r.args, tuple) else (r.args,)) + ((r.exc_info[1],) if r.exc_info else ()):
            if isinstance(a, cls):
                found.append(a)
    return found


# ---------------------------------------------------------------------------------------------
# ApiVersions and Metadata per listener


def _api_keys(conn: sk.RawConn, kt) -> set[int]:
    conn.sock.sendall(kt.api_versions_v0_request(7))
    corr, err, ranges = kt.parse_api_versions_v0(conn.recv_frame())
    assert (corr, err) == (7, 0)
    return {k for k, _, _ in ranges}


def test_api_versions_lists_sasl_apis_on_sasl_listeners_only(secure, kt):
    sasl_apis = {sk.SASL_HANDSHAKE, sk.SASL_AUTHENTICATE}
    plaintext = {k for k, _, _ in kt.api_versions(sk.HOST, secure.ports["PLAINTEXT"])}
    assert plaintext and not plaintext & sasl_apis, f"PLAINTEXT lists {sorted(plaintext & sasl_apis)}"
    for listener in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        with _conn(secure, listener) as c:
            keys = _api_keys(c, kt)
        if listener.startswith("SASL"):
            assert sasl_apis <= keys, f"{listener} lists {sorted(keys)}: SaslHandshake/SaslAuthenticate missing"
            # before authentication the broker still lists everything it serves afterwards
            assert {0, 1, 3} <= keys, f"{listener}: Produce/Fetch/Metadata missing before authentication"
        else:
            assert not keys & sasl_apis, f"{listener} lists {sorted(keys & sasl_apis)}"


def test_sasl_handshake_on_the_plaintext_listener_is_not_served(secure, kt):
    """Kafka answers ILLEGAL_SASL_STATE (34) there, kbroker (which does not list the API) closes:
    either way the exchange does not succeed, and the listener goes on serving."""
    with _conn(secure, "PLAINTEXT") as c:
        c.send(sk.SASL_HANDSHAKE, 1, sk.kafka_string("PLAIN"))
        closed, got = c.closed_within(3)
        if got:
            (size,) = struct.unpack_from(">i", got)
            err = struct.unpack_from(">h", got, 8)[0]
            assert err != 0 and size == len(got) - 4, f"SaslHandshake on PLAINTEXT answered {got!r}"
        else:
            assert closed, "SaslHandshake on PLAINTEXT: neither answered nor closed"
    assert kt.api_versions(sk.HOST, secure.ports["PLAINTEXT"])


def test_metadata_names_the_listener_the_client_came_in_on(secure, kt, tmp_path):
    from confluent_kafka.admin import AdminClient

    for listener, case in (("SASL_SSL", "sasl_ssl-scram-sha-512"), ("SASL_PLAINTEXT", "sasl_plaintext-plain"),
                           ("SSL", "ssl"), ("PLAINTEXT", None)):
        sec = sk.security_for(sk.CASES[case], secure.pki, secure.users) if case else sk.SecurityConfig()
        errors: list = []
        admin = AdminClient({"bootstrap.servers": secure.bootstrap(listener), **sk.confluent_config(sec, errors)})
        md = admin.list_topics(timeout=15)
        brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
        assert brokers == {0: (sk.HOST, secure.ports[listener])}, \
            f"confluent-kafka through {listener} (port {secure.ports[listener]}) was told {brokers}; errors {errors[:3]}"
    # kafka-python's view through the MTLS listener, with alice's certificate
    import kafka

    sec = sk.security_for(sk.CASES["ssl-mtls"], secure.pki, secure.users)
    cfg = sk.KafkaPythonClient(sec, kt, tmp_path).config()
    admin = kafka.KafkaAdminClient(bootstrap_servers=secure.bootstrap("MTLS"), **cfg)
    try:
        nodes = {b["broker_id"]: (b["host"], b["port"]) for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()
    assert nodes == {0: (sk.HOST, secure.ports["MTLS"])}, f"kafka-python through MTLS was told {nodes}"


# ---------------------------------------------------------------------------------------------
# SASL: good and bad credentials, raw


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", sk.MECHANISMS)
def test_good_credentials_then_requests_are_served(secure, listener, mechanism):
    user, password = _good_credentials(secure, mechanism)
    with _conn(secure, listener) as c:
        answers = sk.sasl_exchange(c, mechanism, user, password)
        assert [a[0] for a in answers] == [0] * len(answers), f"{mechanism} with good credentials: {answers}"
        c.metadata_v1()
        assert len(c.recv_frame()) > 8, "Metadata after authentication not answered"


FAILURES = [(m, kind) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") for kind in ("wrong-password", "unknown-user")]
FAILURES += [("SCRAM-SHA-512", "user-without-this-mechanism")]  # bob has SCRAM-SHA-256 only


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism,kind", FAILURES, ids=[f"{m}-{k}" for m, k in FAILURES])
def test_bad_credentials_are_refused_with_58_and_closed(secure, listener, mechanism, kind):
    if kind == "wrong-password":
        user, password = "alice", wrong_password(mechanism)
    elif kind == "unknown-user":
        user, password = f"nobody-{uuid.uuid4().hex[:6]}", wrong_password(mechanism)
    else:
        user, password = "bob", secure.users.scram["bob"]["SCRAM-SHA-256"]
    with _conn(secure, listener) as c:
        started = time.monotonic()
        answers = sk.sasl_exchange(c, mechanism, user, password)
        assert answers[-1][0] == sk.SASL_AUTHENTICATION_FAILED, \
            f"{mechanism} {kind}: answers {answers} (SASL_AUTHENTICATION_FAILED=58 expected last)"
        assert all(a[0] == 0 for a in answers[:-1]), answers
        assert password not in (answers[-1][1] or ""), "the error message repeats the password"
        _assert_closed_after_failure(c, f"{mechanism} {kind} on {listener}", started)


OAUTH_TOKENS = {
    "expired": lambda: sk.unsecured_jwt("alice", lifetime_s=-60, issued_ago_s=3600),
    "no-subject": lambda: sk.unsecured_jwt(None),
    "not-a-jwt": lambda: "not-a-jwt",
    "signed-alg": lambda: sk.unsecured_jwt("alice").replace(
        sk._b64url(json.dumps({"alg": "none"}).encode()), sk._b64url(json.dumps({"alg": "HS256"}).encode())),
}


@pytest.mark.parametrize("kind", sorted(OAUTH_TOKENS))
def test_bad_oauthbearer_tokens_are_refused(secure, kind):
    """RFC 7628 as Kafka does it: an error challenge (a JSON status, error code 0), the client's
    kvsep, then SASL_AUTHENTICATION_FAILED; a broker failing at once with 58 is accepted too."""
    with _conn(secure, "SASL_SSL") as c:
        started = time.monotonic()
        answers = sk.sasl_exchange(c, "OAUTHBEARER", "alice", token=OAUTH_TOKENS[kind]())
        assert answers[-1][0] == sk.SASL_AUTHENTICATION_FAILED, f"{kind} token: answers {answers}"
        if len(answers) == 2:
            assert json.loads(answers[0][2]).get("status"), f"{kind}: challenge {answers[0][2]!r} is no RFC 7628 error"
        _assert_closed_after_failure(c, f"OAUTHBEARER {kind} token", started)


# ---------------------------------------------------------------------------------------------
# SASL: protocol violations, raw


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_metadata_before_the_handshake_closes_the_connection(secure, listener):
    with _conn(secure, listener) as c:
        c.metadata_v1()
        closed, got = c.closed_within(3)
        assert closed and got == b"", f"Metadata before SaslHandshake on {listener}: closed={closed}, answer {got[:60]!r}"


def test_metadata_between_handshake_and_authenticate_closes_the_connection(secure):
    with _conn(secure, "SASL_PLAINTEXT") as c:
        assert c.handshake("PLAIN")[0] == 0
        c.metadata_v1()
        closed, got = c.closed_within(3)
        assert closed and got == b"", f"Metadata before SaslAuthenticate: closed={closed}, answer {got[:60]!r}"


def test_authenticate_without_handshake_closes_the_connection(secure):
    """Kafka closes without an answer (IllegalSaslStateException); an ILLEGAL_SASL_STATE answer
    before the close is tolerated."""
    with _conn(secure, "SASL_PLAINTEXT") as c:
        c.send(sk.SASL_AUTHENTICATE, 1, sk.kafka_bytes(sk.plain_token("alice", secure.users.plain["alice"])))
        closed, got = c.closed_within(CLOSE_WAIT_S)
        if got:
            err = struct.unpack_from(">h", got, 8)[0]
            assert err == sk.ILLEGAL_SASL_STATE, f"SaslAuthenticate before SaslHandshake answered {got[:80]!r}"
        assert closed, f"SaslAuthenticate before SaslHandshake: still open after {CLOSE_WAIT_S:.1f}s (answer {got[:80]!r})"


@pytest.mark.parametrize("mechanism", ["GSSAPI", "SCRAM-SHA-1", "plain"])
def test_unsupported_mechanism_is_refused_with_the_enabled_list(secure, mechanism):
    with _conn(secure, "SASL_PLAINTEXT") as c:
        err, enabled = c.handshake(mechanism)
        assert err == sk.UNSUPPORTED_SASL_MECHANISM, f"SaslHandshake {mechanism}: error {err}"
        assert sorted(enabled) == sorted(sk.MECHANISMS), f"enabled mechanisms answered: {enabled}"
        closed, got = c.closed_within(CLOSE_WAIT_S)
        assert closed and got == b"", f"after UNSUPPORTED_SASL_MECHANISM: closed={closed}, bytes {got[:60]!r}"


GARBAGE = {"PLAIN": b"no-separators-at-all", "SCRAM-SHA-256": b"\xff\xfe not a scram message",
           "SCRAM-SHA-512": b"n,,m=unsupported-extension", "OAUTHBEARER": b"\x00\x01\x02\x03"}


@pytest.mark.parametrize("mechanism", sorted(GARBAGE))
def test_garbage_token_is_refused_and_closed(secure, mechanism):
    with _conn(secure, "SASL_PLAINTEXT") as c:
        assert c.handshake(mechanism)[0] == 0
        started = time.monotonic()
        err, msg, _auth, _life = c.authenticate(GARBAGE[mechanism])
        if mechanism == "OAUTHBEARER" and err == 0:  # an RFC 7628 error challenge first
            err, msg, _auth, _life = c.authenticate(b"\x01")
        assert err == sk.SASL_AUTHENTICATION_FAILED, f"garbage {mechanism} token answered {err} {msg!r}"
        _assert_closed_after_failure(c, f"garbage {mechanism} token", started)


@pytest.mark.parametrize("when", ["first-frame", "after-handshake"])
def test_oversized_frame_before_authentication_closes(secure, when):
    """sasl.server.max.receive.size (524288): a bigger frame before authentication is not read."""
    size = 600_000
    with _conn(secure, "SASL_PLAINTEXT") as c:
        if when == "after-handshake":
            assert c.handshake("PLAIN")[0] == 0
        header = struct.pack(">hhih", sk.SASL_AUTHENTICATE, 1, 9, 2) + b"sk"
        token = b"\0alice\0" + b"x" * (size - len(header) - 4 - 7)
        try:
            c.sock.sendall(struct.pack(">i", size) + header + struct.pack(">i", len(token)) + token)
        except OSError:
            pass  # closed while we were still sending: that is the point
        closed, got = c.closed_within(3)
        assert closed and got == b"", f"a {size}-byte frame ({when}): closed={closed}, answer {got[:60]!r}"


def test_after_authentication_frames_may_exceed_the_sasl_limit(secure, kt, tmp_path):
    """The 524288-byte limit is for unauthenticated connections: a 700 kB record through SASL."""
    topic = _topic(secure, kt, "big")
    msg = kt.Msg(0, b"big", b"v" * 700_000, (), int(time.time() * 1000))
    client = sk.adapter("confluent-kafka", sk.security_for(sk.CASES["sasl_plaintext-plain"], secure.pki, secure.users),
                        kt, tmp_path)
    assert client.produce(secure.bootstrap("SASL_PLAINTEXT"), topic, [msg]) == [(0, 0)]


def test_v0_handshake_with_unframed_tokens(secure):
    """SaslHandshake v0: the tokens follow as bare size-prefixed bytes (pre-KIP-152 clients)."""
    with _conn(secure, "SASL_PLAINTEXT") as c:
        err, _ = c.handshake("PLAIN", version=0)
        assert err == 0
        tok = sk.plain_token("alice", secure.users.plain["alice"])
        c.sock.sendall(struct.pack(">i", len(tok)) + tok)
        assert c.recv_frame() == b"", "PLAIN's (empty) server reply expected as a bare frame"
        c.metadata_v1()
        assert len(c.recv_frame()) > 8


# ---------------------------------------------------------------------------------------------
# stock clients with bad credentials


BAD_CLIENTS = [("kafka-python", "SASL_SSL", "PLAIN", "wrong-password"),
               ("confluent-kafka", "SASL_SSL", "SCRAM-SHA-512", "wrong-password"),
               ("aiokafka", "SASL_PLAINTEXT", "SCRAM-SHA-256", "unknown-user"),
               ("java", "SASL_SSL", "SCRAM-SHA-512", "wrong-password"),
               ("kafka-python", "SASL_SSL", "OAUTHBEARER", "expired-token"),
               ("confluent-kafka", "SASL_PLAINTEXT", "OAUTHBEARER", "expired-token")]


@pytest.mark.parametrize("family,listener,mechanism,kind", BAD_CLIENTS, ids=["-".join(b) for b in BAD_CLIENTS])
def test_stock_client_with_bad_credentials_gets_authentication_failed(secure, kt, request, tmp_path,
                                                                      family, listener, mechanism, kind):
    harness = request.getfixturevalue("java_harness") if family == "java" else None
    kw = dict(protocol=listener, mechanism=mechanism, ca=secure.pki.ca if listener == "SASL_SSL" else None)
    if kind == "expired-token":
        kw.update(oauth_principal="alice", oauth_token=sk.unsecured_jwt("alice", lifetime_s=-60, issued_ago_s=3600))
    else:
        kw.update(username="alice" if kind == "wrong-password" else f"nobody-{uuid.uuid4().hex[:6]}",
                  password=wrong_password(family))
    client = sk.adapter(family, sk.SecurityConfig(**kw), kt, tmp_path, harness, timeout_s=6)
    topic = _topic(secure, kt, family)
    msgs = sk.make_records(kt, f"refused-{family}", per_partition=2)
    with captured_logs("kafka", "aiokafka") as records:
        with pytest.raises(Exception) as excinfo:
            client.produce(secure.bootstrap(listener), topic, msgs)
    text = f"{excinfo.type.__name__}: {excinfo.value}"
    if family == "confluent-kafka":
        assert "_AUTHENTICATION" in text and "SASL authentication error" in text, text
    elif family == "java":
        assert "SaslAuthenticationException" in text, text
    elif family == "kafka-python":
        import kafka.errors

        errs = _logged_errors(records, kafka.errors.SaslAuthenticationFailedError)
        assert errs and errs[0].errno == sk.SASL_AUTHENTICATION_FAILED, \
            f"kafka-python: {text}; no SaslAuthenticationFailedError logged: {[r.getMessage() for r in records][:5]}"
    elif family == "aiokafka":
        import aiokafka.errors

        errs = _logged_errors(records, aiokafka.errors.SaslAuthenticationFailed)
        assert errs and errs[0].errno == sk.SASL_AUTHENTICATION_FAILED, \
            f"aiokafka: {text}; no SaslAuthenticationFailed logged: {[r.getMessage() for r in records][:5]}"
    _assert_empty(secure, topic)


# ---------------------------------------------------------------------------------------------
# TLS mismatches and client certificates


@pytest.mark.parametrize("listener", ["SSL", "MTLS", "SASL_SSL"])
def test_plaintext_client_on_a_tls_port_gets_no_kafka_answer(secure, kt, listener):
    with sk.RawConn(secure.ports[listener]) as c:
        c.sock.sendall(kt.api_versions_v0_request(7))
        closed, got = c.closed_within(5)
    assert closed, f"plaintext ApiVersions on {listener}: connection still open"
    assert not got.startswith(struct.pack(">i", len(got) - 4) + struct.pack(">i", 7)), \
        f"plaintext ApiVersions on {listener} was answered: {got[:40]!r}"


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_tls_client_on_a_plaintext_port_fails_its_handshake(secure, kt, listener):
    with pytest.raises((ssl.SSLError, OSError)):
        with sk.RawConn(secure.ports[listener], tls=sk.tls_context(secure.pki)) as c:
            c.sock.sendall(kt.api_versions_v0_request(7))
            c.recv_frame()
    assert kt.api_versions(sk.HOST, secure.ports["PLAINTEXT"])


MISMATCHED = [("plaintext-client-on-SSL", "SSL", sk.SecurityConfig()),
              ("ssl-client-on-PLAINTEXT", "PLAINTEXT", None),
              ("sasl-plaintext-client-on-SASL_SSL", "SASL_SSL", None),
              ("no-certificate-on-MTLS", "MTLS", None)]


@pytest.mark.parametrize("name,listener,sec", MISMATCHED, ids=[m[0] for m in MISMATCHED])
def test_misconfigured_stock_client_produces_nothing(secure, kt, tmp_path, name, listener, sec):
    if sec is None:
        sec = {"ssl-client-on-PLAINTEXT": sk.SecurityConfig("SSL", ca=secure.pki.ca),
               "sasl-plaintext-client-on-SASL_SSL": sk.security_for(sk.CASES["sasl_plaintext-plain"], secure.pki,
                                                                    secure.users),
               "no-certificate-on-MTLS": sk.SecurityConfig("SSL", ca=secure.pki.ca)}[name]
    topic = _topic(secure, kt, name.lower())
    client = sk.adapter("confluent-kafka", sec, kt, tmp_path, timeout_s=5)
    with pytest.raises(sk.ClientError):
        client.produce(secure.bootstrap(listener), topic, sk.make_records(kt, name, per_partition=1))
    _assert_empty(secure, topic)


@pytest.mark.parametrize("cert", [None, "mallory-untrusted", "bob-other-org"],
                         ids=["no-certificate", "untrusted-ca", "no-mapping-rule-matches"])
def test_mtls_listener_refuses_the_handshake(secure, kt, cert):
    """Without a client certificate, with one of another CA, or one whose subject no
    ssl.principal.mapping.rules rule matches (Kafka: NoMatchingRule): no Kafka answer."""
    try:
        with _conn(secure, "MTLS", cert) as c:  # TLS 1.3: the client may finish before the server refuses
            c.sock.sendall(kt.api_versions_v0_request(7))
            closed, got = c.closed_within(5)
    except (ssl.SSLError, OSError):
        closed, got = True, b""
    assert closed and got == b"", f"MTLS with {cert or 'no certificate'}: closed={closed}, answer {got[:40]!r}"
    # the control: alice's certificate (CN=Alice,OU=kafka-clients,O=acme,...) is served
    with _conn(secure, "MTLS", "alice") as c:
        assert sk.SASL_HANDSHAKE not in _api_keys(c, kt)


def test_mtls_with_a_mapped_certificate_produces_and_consumes(secure, kt, tmp_path):
    sec = sk.security_for(sk.CASES["ssl-mtls"], secure.pki, secure.users)
    client = sk.adapter("kafka-python", sec, kt, tmp_path)
    topic = _topic(secure, kt, "mtls-ok")
    msgs = sk.make_records(kt, "mtls-ok", per_partition=3)
    client.produce(secure.bootstrap("MTLS"), topic, msgs)
    kt.assert_records_match(msgs, client.consume_group(secure.bootstrap("MTLS"), topic, f"g-{uuid.uuid4().hex[:6]}",
                                                       len(msgs)))


# ---------------------------------------------------------------------------------------------
# KIP-368 session lifetimes and re-authentication


def test_session_lifetimes(secure):
    """SaslAuthenticate v1's session_lifetime_ms: connections.max.reauth.ms where set (SASL_PLAINTEXT),
    0 (no limit) where not, and an OAUTHBEARER token's remaining life when that is shorter."""
    for listener, expected in (("SASL_PLAINTEXT", REAUTH_MS), ("SASL_SSL", 0)):
        for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            user, password = _good_credentials(secure, mechanism)
            with _conn(secure, listener) as c:
                answers = sk.sasl_exchange(c, mechanism, user, password)
            assert answers[-1][0] == 0 and answers[-1][3] == expected, \
                f"{mechanism} on {listener}: session lifetime {answers[-1][3]} != {expected}"
    token_life_s = 60
    for listener, low, high in (("SASL_PLAINTEXT", REAUTH_MS, REAUTH_MS),
                                ("SASL_SSL", (token_life_s - 5) * 1000, token_life_s * 1000)):
        with _conn(secure, listener) as c:
            answers = sk.sasl_exchange(c, "OAUTHBEARER", "alice", token=sk.unsecured_jwt("alice", token_life_s))
        assert answers[-1][0] == 0 and low <= answers[-1][3] <= high, \
            f"OAUTHBEARER ({token_life_s}s token) on {listener}: session lifetime {answers[-1][3]} not in [{low}, {high}]"


def test_expired_session_is_closed_unless_reauthenticated(secure):
    password = secure.users.plain["alice"]
    with _conn(secure, "SASL_PLAINTEXT") as c:
        assert sk.sasl_exchange(c, "PLAIN", "alice", password)[-1][0] == 0
        c.metadata_v1()
        assert c.recv_frame()
        time.sleep(REAUTH_MS / 1000 + 0.3)
        c.metadata_v1()
        closed, got = c.closed_within(3)
        assert closed and got == b"", f"Metadata after the session expired: closed={closed}, answer {got[:60]!r}"
    with _conn(secure, "SASL_PLAINTEXT") as c:
        assert sk.sasl_exchange(c, "PLAIN", "alice", password)[-1][0] == 0
        time.sleep(REAUTH_MS / 1000 * 0.6)
        again = sk.sasl_exchange(c, "PLAIN", "alice", password)  # SaslHandshake v1 on an authenticated connection
        assert again[-1][0] == 0 and again[-1][3] == REAUTH_MS, f"re-authentication: {again}"
        time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session's end, inside the second's
        c.metadata_v1()
        assert c.recv_frame(), "Metadata after re-authentication not answered"
        # a re-authentication may not change the principal (Kafka: "Cannot change principals")
        started = time.monotonic()
        other = sk.sasl_exchange(c, "PLAIN", "admin", secure.users.plain["admin"])
        assert other[-1][0] == sk.SASL_AUTHENTICATION_FAILED, f"re-authentication as admin: {other}"
        _assert_closed_after_failure(c, "re-authentication as another principal", started)


@pytest.mark.parametrize("family", ["confluent-kafka", "kafka-python", "aiokafka"])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "OAUTHBEARER"])
def test_stock_clients_reauthenticate_and_keep_producing(secure, kt, family, mechanism):
    """An idempotent producer running for three session lifetimes on SASL_PLAINTEXT: every record
    acknowledged once, no client error, and (librdkafka's security debug log) re-authentications on
    the way. aiokafka 0.14 does not re-authenticate (it ignores the session lifetime): its expired
    connection is closed by the broker, it reconnects, and still no record is lost or doubled."""
    sec = sk.security_for(sk.CASES[f"sasl_plaintext-{mechanism.lower()}"], secure.pki, secure.users)
    topic = _topic(secure, kt, f"reauth-{family}")
    bootstrap = secure.bootstrap("SASL_PLAINTEXT")
    run_s = 3 * REAUTH_MS / 1000
    if family == "confluent-kafka":
        from confluent_kafka import Producer

        errors: list = []
        lines: list[str] = []

        class Keep(logging.Handler):
            def emit(self, record):
                lines.append(record.getMessage())

        logger = logging.getLogger(f"securitykit.librdkafka.{uuid.uuid4().hex[:6]}")
        logger.propagate = False
        logger.addHandler(Keep())
        logger.setLevel(logging.DEBUG)
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "logger": logger,
                      **sk.confluent_config(sec, errors, debug="security")})
        acks: list = []
        t0, i = time.monotonic(), 0
        while time.monotonic() - t0 < run_s:
            p.produce(topic, b"v%d" % i, partition=i % 3, on_delivery=lambda e, m: acks.append(e))
            i += 1
            p.poll(0.05)
        assert p.flush(15) == 0
        assert len(acks) == i and all(a is None for a in acks), f"{sum(a is not None for a in acks)} of {i} failed"
        assert errors == [], f"client errors: {errors[:5]}"
        reauths = [ln for ln in lines if "Auth in state REAUTH" in ln]
        assert len(reauths) >= 2, f"librdkafka re-authenticated {len(reauths)} times in {run_s}s (session {REAUTH_MS} ms)"
    elif family == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaProducer

        async def run():
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                                 **sk.AiokafkaClient(sec, kt, "/nonexistent").config())
            await p.start()
            futs = []
            try:
                t0 = time.monotonic()
                while time.monotonic() - t0 < run_s:
                    futs.append(await p.send(topic, b"v%d" % len(futs), partition=len(futs) % 3))
                    await asyncio.sleep(0.05)
                return [md.offset for md in await asyncio.wait_for(asyncio.gather(*futs), 30)]
            finally:
                await p.stop()

        offsets = asyncio.run(run())
        i = len(offsets)
    else:
        import kafka

        cfg = sk.KafkaPythonClient(sec, kt, "/nonexistent").config()
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", **cfg)
        futs = []
        try:
            t0, i = time.monotonic(), 0
            while time.monotonic() - t0 < run_s:
                futs.append(p.send(topic, b"v%d" % i, partition=i % 3))
                i += 1
                time.sleep(0.05)
            p.flush(15)
            offsets = [f.get(15).offset for f in futs]
        finally:
            p.close(5)
        assert len(offsets) == len(futs)
    ends = sk.end_offsets(secure.plaintext, topic)
    assert sum(ends.values()) == i, f"{i} records sent, the log has {ends}"


def test_java_client_reauthenticates_transparently(secure, kt, kbroker, java_harness, tmp_path):
    """The Java client (3.9) re-authenticates before its session lifetime ends (KIP-368): an
    idempotent acks=all producer running for three lifetimes has every record acknowledged, and
    the broker never had to close one of its connections for an expired session."""
    sec = sk.security_for(sk.CASES["sasl_plaintext-scram-sha-512"], secure.pki, secure.users)
    topic = _topic(secure, kt, "reauth-java")
    client = sk.adapter("java", sec, kt, tmp_path, java_harness)
    interval_ms = 50
    count = int(3 * REAUTH_MS / interval_ms)
    before = kbroker.log_tail(10**7).count("after the SASL session expired")
    lines = client._run(["acked-producer", secure.bootstrap("SASL_PLAINTEXT"), topic, str(count), str(interval_ms)],
                        {}, timeout=120)
    events = [json.loads(ln) for ln in lines if ln.startswith("{")]
    acked = [e for e in events if e["event"] == "acked"]
    assert [e for e in events if e["event"] == "failed"] == [] and len(acked) == count
    assert sum(sk.end_offsets(secure.plaintext, topic).values()) == count
    assert kbroker.log_tail(10**7).count("after the SASL session expired") == before


# ---------------------------------------------------------------------------------------------
# last: the broker still serves, and never logged a password


def test_zz_broker_still_serves_and_logged_no_password(secure, kt, kbroker, tmp_path):
    sec = sk.security_for(sk.CASES["sasl_ssl-scram-sha-512"], secure.pki, secure.users)
    client = sk.adapter("confluent-kafka", sec, kt, tmp_path)
    topic = _topic(secure, kt, "after-all")
    msgs = sk.make_records(kt, "after-all", per_partition=4)
    client.produce(secure.bootstrap("SASL_SSL"), topic, msgs)
    kt.assert_records_match(msgs, client.consume_group(secure.bootstrap("SASL_SSL"), topic,
                                                       f"g-{uuid.uuid4().hex[:6]}", len(msgs)))
    assert kbroker.alive()
    log = kbroker.stderr_path.read_text(errors="replace")
    secrets = secure.passwords + SENT_SECRETS
    leaked = [s for s in secrets if s in log]
    assert not leaked, f"the broker's stderr holds {len(leaked)} of the {len(secrets)} passwords used"
