"""DescribeAcls, CreateAcls and DeleteAcls (29-31, v1-v3) through the dispatch table on a real
single-node broker: Kafka's AclApis semantics and codes (SECURITY_DISABLED without an authorizer,
CLUSTER_AUTHORIZATION_FAILED without ALTER / DESCRIBE on the cluster, INVALID_REQUEST per binding
or filter with Kafka's words, POLICY_VIOLATION past 10,000), the ACLs persisted and fed to the
authorizer (decisions change with them, survive a restart), `authorizer.class.name` and friends at
start-up, and garbage bodies never escaping as a crash."""

from __future__ import annotations

import functools
import struct
from types import SimpleNamespace

import pytest
import trio
from hypothesis import HealthCheck, given, settings, strategies as st

from kbroker.api.authorization import ALLOW_ALL, AclAuthorizerAdapter, permitted, permitted_any, request_host
from kbroker.api.context import RequestContext
from kbroker.api.dispatch import DISPATCH, handle_frame
from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.errors import ErrorCode, InvalidConfigError
from kbroker.security.acl import AclOperation as Op, ResourceType as RT
from kbroker.security.principal import KafkaPrincipal
from kbroker.wire.protocol import ProtocolError, decode_response, encode_request

DESCRIBE, CREATE, DELETE = 29, 30, 31
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TOPIC, GROUP, CLUSTER, TXN, TOKEN, USER = 2, 3, 4, 5, 6, 7
ANY_TYPE, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, ALTER, DESCRIBE_OP = 2, 3, 4, 7, 8
DENY, ALLOW = 2, 3


def make_broker(path, **configs) -> Broker:
    b = Broker(BrokerConfig.from_dict({"log.dirs": str(path), **configs}), ("127.0.0.1", 9092))
    b.startup()
    return b


@pytest.fixture
def broker(tmp_path):
    """The ACL authorizer on; in-process callers (no session) are User:ANONYMOUS, the super user."""
    b = make_broker(tmp_path, **{"authorizer.class.name": ACL_AUTHORIZER, "super.users": "User:ANONYMOUS;User:admin"})
    yield b
    b.shutdown()


def session_of(user: str) -> SimpleNamespace:
    """What the dispatch pipeline reads of a connection's session, for an authenticated user."""
    return SimpleNamespace(principal=KafkaPrincipal("User", user), may_send=lambda key, now: True, sasl=False,
                           authenticated=True, listener=None)


def call(broker, api_key, data, version=3, session=None, host="10.0.0.1"):
    frame = encode_request(api_key, version, 9, "test", data)
    response = trio.run(functools.partial(handle_frame, broker, bytearray(frame[4:]), host, session))
    correlation_id, body = decode_response(api_key, version, response[4:])
    assert correlation_id == 9
    return body


def creation(rtype=TOPIC, name="orders", ptype=LITERAL, principal="User:alice", host="*", op=READ, perm=ALLOW):
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": ptype, "principal": principal,
            "host": host, "operation": op, "permission_type": perm}


def acl_filter(rtype=ANY_TYPE, name=None, ptype=ANY_TYPE, principal=None, host=None, op=1, perm=1):
    return {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": ptype,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


def create(broker, *creations, version=3, session=None):
    body = call(broker, CREATE, {"creations": list(creations)}, version, session)
    return [(r.error_code, r.error_message) for r in body.results]


def describe(broker, version=3, session=None, **f):
    return call(broker, DESCRIBE, acl_filter(**f), version, session)


def described(body) -> set[tuple]:
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in body.resources for a in r.acls}


def delete(broker, *filters, version=3, session=None):
    body = call(broker, DELETE, {"filters": list(filters)}, version, session)
    return [(r.error_code, r.error_message,
             {(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation, m.permission_type)
              for m in r.matching_acls}) for r in body.filter_results]


OK = (ErrorCode.none, None)


def test_served_at_v0_to_v3_in_every_mode():
    for key, name in ((DESCRIBE, "DescribeAcls"), (CREATE, "CreateAcls"), (DELETE, "DeleteAcls")):
        spec = DISPATCH[key]
        assert (spec.name, spec.min_version, spec.max_version, spec.cluster_only) == (name, 0, 3, False)


def test_version_0_has_no_pattern_type_everything_is_literal(broker):
    """Kafka 3.9's v0: bindings are LITERAL, filters are LITERAL (the `*` wildcard compared as a
    name), answers carry no pattern type."""
    assert create(broker, creation(name="v0-orders"), creation(name="*"), version=0) == [OK, OK]
    assert create(broker, creation(name="v0-", ptype=PREFIXED)) == [OK]
    body = call(broker, DESCRIBE, acl_filter(rtype=TOPIC, name="v0-orders"), 0)
    assert body.error_code == ErrorCode.none
    assert [(r.resource_name, [a.operation for a in r.acls]) for r in body.resources] == [("v0-orders", [READ])]
    everything = call(broker, DESCRIBE, acl_filter(rtype=TOPIC), 0)
    assert sorted(r.resource_name for r in everything.resources) == ["*", "v0-orders"]  # no prefixed pattern
    assert {(t, n, p) for t, n, p, *_ in described(describe(broker))} == {
        (TOPIC, "v0-orders", LITERAL), (TOPIC, "*", LITERAL), (TOPIC, "v0-", PREFIXED)}
    body = call(broker, DELETE, {"filters": [acl_filter(rtype=TOPIC, name="v0-")]}, 0)
    assert [len(r.matching_acls) for r in body.filter_results] == [0]  # the prefixed one is not v0's to see
    body = call(broker, DELETE, {"filters": [acl_filter(rtype=TOPIC)]}, 0)
    assert sorted(m.resource_name for m in body.filter_results[0].matching_acls) == ["*", "v0-orders"]
    assert {n for _t, n, *_ in described(describe(broker))} == {"v0-"}


def test_no_authorizer_is_security_disabled_with_kafkas_words(tmp_path):
    b = make_broker(tmp_path)
    try:
        assert b.authorizer is ALLOW_ALL
        assert create(b, creation()) == [(ErrorCode.security_disabled, "No Authorizer is configured.")]
        body = describe(b)
        assert (body.error_code, body.error_message) == (ErrorCode.security_disabled,
                                                         "No Authorizer is configured on the broker")
        assert delete(b, acl_filter(), acl_filter()) == [(ErrorCode.security_disabled, "No Authorizer is configured.",
                                                          set())] * 2
    finally:
        b.shutdown()


def test_create_describe_delete_at_every_version(broker):
    for version in (1, 2, 3):
        name = f"orders-v{version}"
        assert create(broker, creation(name=name), creation(name=name, ptype=PREFIXED, op=WRITE),
                      creation(name=name, principal="User:*", host="10.0.0.9", op=ALL, perm=DENY),
                      version=version) == [OK] * 3
        body = describe(broker, version=version, rtype=TOPIC, name=name, ptype=ANY_TYPE)
        assert body.error_code == ErrorCode.none and body.error_message is None
        assert described(body) == {(TOPIC, name, LITERAL, "User:alice", "*", READ, ALLOW),
                                   (TOPIC, name, PREFIXED, "User:alice", "*", WRITE, ALLOW),
                                   (TOPIC, name, LITERAL, "User:*", "10.0.0.9", ALL, DENY)}
        assert delete(broker, acl_filter(rtype=TOPIC, name=name, ptype=ANY_TYPE), version=version) == [
            (ErrorCode.none, None, described(body))]
        assert described(describe(broker, version=version)) == set()


def test_describe_filters_as_kafka(broker):
    assert create(broker, creation(name="team-orders"), creation(name="team-", ptype=PREFIXED),
                  creation(name="*"), creation(name="other", principal="User:bob"),
                  creation(rtype=GROUP, name="team-orders"), creation(rtype=CLUSTER, name="kafka-cluster", op=ALTER),
                  creation(rtype=TXN, name="tx", op=WRITE), creation(rtype=TOKEN, name="token", op=DESCRIBE_OP),
                  creation(rtype=USER, name="User:bob", op=13)) == [OK] * 9
    names = lambda body: {(t, n, p) for t, n, p, *_ in described(body)}
    assert names(describe(broker, rtype=TOPIC, name="team-orders", ptype=MATCH)) == {
        (TOPIC, "team-orders", LITERAL), (TOPIC, "team-", PREFIXED), (TOPIC, "*", LITERAL)}
    assert names(describe(broker, rtype=ANY_TYPE, name="team-orders", ptype=ANY_TYPE)) == {
        (TOPIC, "team-orders", LITERAL), (GROUP, "team-orders", LITERAL)}
    assert names(describe(broker, rtype=TOPIC, name="team-orders", ptype=PREFIXED)) == set()
    assert names(describe(broker, rtype=TOPIC, name=None, ptype=PREFIXED)) == {(TOPIC, "team-", PREFIXED)}
    assert len(described(describe(broker, principal="User:bob"))) == 1
    assert len(described(describe(broker))) == 9
    assert len(described(describe(broker, op=WRITE, perm=ALLOW))) == 1  # an exact operation, not implied ones


def test_invalid_bindings_are_refused_one_by_one_with_kafkas_words(broker):
    results = create(broker, creation(rtype=ANY_TYPE), creation(ptype=MATCH), creation(ptype=ANY_TYPE),
                     creation(op=1), creation(perm=1), creation(rtype=99), creation(op=0), creation(ptype=0),
                     creation(rtype=CLUSTER, name="cluster"), creation(name=""), creation(principal="alice"),
                     creation(rtype=GROUP, name="a/b"), creation(name="fine"))
    assert results == [
        (ErrorCode.invalid_request, "Invalid resourceType ANY"),
        (ErrorCode.invalid_request, "Invalid patternType MATCH"),
        (ErrorCode.invalid_request, "Invalid patternType ANY"),
        (ErrorCode.invalid_request, "Invalid operation ANY"),
        (ErrorCode.invalid_request, "Invalid permissionType ANY"),
        (ErrorCode.invalid_request, "Invalid resourceType UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid operation UNKNOWN"),
        (ErrorCode.invalid_request, "Invalid patternType UNKNOWN"),
        (ErrorCode.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.invalid_request, "Invalid empty resource name"),
        (ErrorCode.invalid_request, ("Could not parse principal from `alice` (no colon is present separating the "
                                     "principal type from the principal name)")),
        (ErrorCode.invalid_request, "Failed to create ACL"),
        OK,
    ]
    assert {n for _t, n, *_ in described(describe(broker))} == {"fine"}


def test_invalid_filters_are_refused(broker):
    body = describe(broker, rtype=0)
    assert body.error_code == ErrorCode.invalid_request and "UNKNOWN elements" in body.error_message
    assert describe(broker, op=77).error_code == ErrorCode.invalid_request
    create(broker, creation())
    assert delete(broker, acl_filter(rtype=0), acl_filter(ptype=9), acl_filter(perm=0), acl_filter()) == [
        (ErrorCode.invalid_request, "Unknown patternFilter.", set()),
        (ErrorCode.invalid_request, "Unknown patternFilter.", set()),
        (ErrorCode.invalid_request, "Unknown entryFilter.", set()),
        (ErrorCode.none, None, {(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW)})]


def test_huge_requests_are_a_policy_violation(broker):
    results = create(broker, *[creation(name=f"t{i}") for i in range(10_001)])
    assert set(results) == {(ErrorCode.policy_violation, "Unable to perform excessively large batch operation.")}
    assert len(results) == 10_001
    results = delete(broker, *[acl_filter(name=f"t{i}") for i in range(10_001)])
    assert {(c, m) for c, m, _ in results} == {(ErrorCode.policy_violation,
                                                "Unable to perform excessively large batch operation.")}
    assert described(describe(broker)) == set()
    # within the bound: 10,000 creations, then 10,000 exact filters
    assert create(broker, *[creation(name=f"t{i}") for i in range(10_000)]) == [OK] * 10_000
    results = delete(broker, *[acl_filter(rtype=TOPIC, name=f"t{i}", ptype=LITERAL, principal="User:alice", host="*",
                                          op=READ, perm=ALLOW) for i in range(10_000)])
    assert all(code == ErrorCode.none and len(matched) == 1 for code, _m, matched in results)


def test_cluster_authorization(broker):
    alice, bob = session_of("alice"), session_of("bob")
    refused = create(broker, creation(), session=alice)
    assert refused[0][0] == ErrorCode.cluster_authorization_failed and "User:alice" in refused[0][1]
    body = describe(broker, session=alice)
    assert body.error_code == ErrorCode.cluster_authorization_failed and body.resources == ()
    assert delete(broker, acl_filter(), session=alice)[0][0] == ErrorCode.cluster_authorization_failed
    # the admin (a super user) grants alice ALTER on the cluster: she may create and delete, and
    # describe (ALTER implies DESCRIBE); bob still may not
    assert create(broker, creation(rtype=CLUSTER, name="kafka-cluster", op=ALTER), session=session_of("admin")) == [OK]
    assert create(broker, creation(name="t1", principal="User:bob"), session=alice) == [OK]
    assert describe(broker, session=alice).error_code == ErrorCode.none
    assert create(broker, creation(name="t2"), session=bob)[0][0] == ErrorCode.cluster_authorization_failed
    # a DENY of DESCRIBE on the cluster for alice: describing is refused, creating still allowed
    assert create(broker, creation(rtype=CLUSTER, name="kafka-cluster", principal="User:alice", op=DESCRIBE_OP,
                                   perm=DENY), session=alice) == [OK]
    assert describe(broker, session=alice).error_code == ErrorCode.cluster_authorization_failed
    assert create(broker, creation(name="t3"), session=alice) == [OK]


def _ctx(broker, user: str, host: str = "10.0.0.1") -> RequestContext:
    return RequestContext(None, broker, host, session_of(user))


def test_the_authorizer_follows_the_store_and_survives_a_restart(tmp_path):
    configs = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "super.users": "User:ANONYMOUS"}
    b = make_broker(tmp_path, **configs)
    try:
        assert isinstance(b.authorizer, AclAuthorizerAdapter)
        assert not permitted(_ctx(b, "alice"), Op.READ, RT.TOPIC, "orders")
        assert not permitted_any(_ctx(b, "alice"), Op.WRITE, RT.TOPIC)
        assert create(b, creation(name="ord", ptype=PREFIXED), creation(op=WRITE, host="10.0.0.1")) == [OK, OK]
        assert permitted(_ctx(b, "alice"), Op.READ, RT.TOPIC, "orders")
        assert permitted(_ctx(b, "alice"), Op.DESCRIBE, RT.TOPIC, "orders")  # implied by READ
        assert not permitted(_ctx(b, "bob"), Op.READ, RT.TOPIC, "orders")
        assert permitted(_ctx(b, "alice"), Op.WRITE, RT.TOPIC, "orders")
        assert not permitted(_ctx(b, "alice", "10.0.0.2"), Op.WRITE, RT.TOPIC, "orders")  # host mismatch
        assert permitted_any(_ctx(b, "alice"), Op.WRITE, RT.TOPIC)
        assert permitted(RequestContext(None, b, ""), Op.ALTER, RT.CLUSTER, "kafka-cluster")  # ANONYMOUS, super
        delete(b, acl_filter(rtype=TOPIC, name="ord", ptype=PREFIXED))
        assert not permitted(_ctx(b, "alice"), Op.READ, RT.TOPIC, "orders")
    finally:
        b.shutdown()
    b = make_broker(tmp_path, **configs)
    try:
        assert permitted(_ctx(b, "alice"), Op.WRITE, RT.TOPIC, "orders")
        assert not permitted(_ctx(b, "alice"), Op.READ, RT.TOPIC, "orders")
    finally:
        b.shutdown()


def test_allow_everyone_if_no_acl_found(tmp_path):
    b = make_broker(tmp_path, **{"authorizer.class.name": "kbroker.security.authorizer.AclAuthorizer",
                                 "allow.everyone.if.no.acl.found": "true"})
    try:
        assert permitted(_ctx(b, "alice"), Op.READ, RT.TOPIC, "anything")
        assert create(b, creation()) == [OK]  # ANONYMOUS: no ACL on the cluster, so allowed
        assert not permitted(_ctx(b, "bob"), Op.READ, RT.TOPIC, "orders")  # orders has an ACL now
    finally:
        b.shutdown()


def test_request_host_is_javas_text():
    ctx = lambda host: RequestContext(None, None, host)
    assert request_host(ctx("10.0.0.1")) == "10.0.0.1"
    assert request_host(ctx("::1")) == "0:0:0:0:0:0:0:1"
    assert request_host(ctx("2001:db8::17")) == "2001:db8:0:0:0:0:0:17"
    assert request_host(ctx("::ffff:10.1.2.3")) == "10.1.2.3"


@pytest.mark.parametrize("configs, words", [
    ({"authorizer.class.name": "com.example.MyAuthorizer"}, "authorizer.class.name"),
    ({"authorizer.class.name": ACL_AUTHORIZER, "super.users": "admin"}, "super.users"),
    ({"allow.everyone.if.no.acl.found": "yes"}, "allow.everyone.if.no.acl.found"),
])
def test_start_up_refuses_what_kafka_refuses(tmp_path, configs, words):
    with pytest.raises(InvalidConfigError, match=words):
        BrokerConfig.from_dict({"log.dirs": str(tmp_path), **configs})


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    b = make_broker(tmp_path_factory.mktemp("acl-fuzz"), **{"authorizer.class.name": ACL_AUTHORIZER,
                                                            "super.users": "User:ANONYMOUS"})
    yield b
    b.shutdown()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([DESCRIBE, CREATE, DELETE]), st.sampled_from([0, 1, 2, 3]), st.binary(max_size=120))
def test_garbage_bodies_never_escape_as_crashes(fuzz_broker, key, version, body):
    header = struct.pack(">hhih", key, version, 1, 3) + b"abc" + (b"\x00" if version >= 2 else b"")

    async def answer():
        with trio.fail_after(10):
            try:
                response = await handle_frame(fuzz_broker, bytearray(header + body))
            except ProtocolError:
                return
            assert isinstance(response, bytes)
            decode_response(key, version, response[4:])  # a well-formed answer

    trio.run(answer)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.fixed_dictionaries({
    "resource_type": st.integers(-128, 127), "resource_name": st.text(max_size=8),
    "resource_pattern_type": st.integers(-128, 127), "principal": st.text(max_size=8), "host": st.text(max_size=4),
    "operation": st.integers(-128, 127), "permission_type": st.integers(-128, 127)}), max_size=5))
def test_any_creation_gets_an_answer_per_binding(fuzz_broker, creations):
    results = create(fuzz_broker, *creations)
    assert len(results) == len(creations)
    assert {code for code, _ in results} <= {ErrorCode.none, ErrorCode.invalid_request}
