"""What the console says when the brokers refuse its principal, and which forms it offers (pure)."""

from kio.schema.errors import ErrorCode

from kbroker.console import refusals
from kbroker.console.refusals import acl_rows, may_create_topics, may_reset_offsets, operations_of, refusal_of
from kbroker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Op = AclOperation


def binding(rtype, name, principal, op, permission=AclPermissionType.ALLOW, pattern=PatternType.LITERAL):
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, permission))


def test_a_refusal_names_principal_operation_and_resource():
    r = refusal_of(ErrorCode.topic_authorization_failed, "User:alice", refusals.create_topic("payments"))
    assert r.text == "User:alice may not CREATE topic payments" and r.error == "TOPIC_AUTHORIZATION_FAILED"
    r = refusal_of(ErrorCode.group_authorization_failed, "User:alice", refusals.reset_offsets("g", ["t"]))
    assert r.text == "User:alice may not READ group g" and r.action == "reset the offsets of group g"
    r = refusal_of(ErrorCode.cluster_authorization_failed, "User:bob", refusals.describe_acls())
    assert r.text == "User:bob may not DESCRIBE the cluster"
    assert r.explain == "this principal may not describe ACLs (DESCRIBE on the cluster)"


def test_a_refusal_the_action_did_not_expect_still_says_what_was_refused():
    r = refusal_of(ErrorCode.transactional_id_authorization_failed, "User:alice", refusals.create_topic("t"))
    assert r.operation is None
    assert r.text == "User:alice may not create topic t: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional id this needs"


def test_other_errors_are_not_refusals():
    for code in (ErrorCode.none, ErrorCode.topic_already_exists, ErrorCode.security_disabled,
                 ErrorCode.sasl_authentication_failed):
        assert refusal_of(code, "User:alice", refusals.create_topic("t")) is None


def test_operations_of_kip430_bit_sets():
    assert operations_of(None) is None and operations_of(-(2**31)) is None
    assert operations_of(0) == frozenset()
    assert operations_of((1 << 3) | (1 << 8)) == {Op.READ, Op.DESCRIBE}
    assert operations_of(1 << 1) == frozenset()  # ANY is never an authorized operation


def test_the_create_form_is_hidden_only_when_nothing_could_allow_it():
    no_create = frozenset({Op.DESCRIBE})
    assert may_create_topics(None, "User:alice", [])  # the broker did not say
    assert may_create_topics(frozenset({Op.CREATE}), "User:alice", [])
    assert may_create_topics(no_create, None, [])  # the principal is not known
    assert may_create_topics(no_create, "User:alice", None)  # DescribeAcls refused
    assert not may_create_topics(no_create, "User:alice", [])
    assert not may_create_topics(no_create, "User:alice", [
        binding(ResourceType.TOPIC, "t", "User:alice", Op.READ),
        binding(ResourceType.TOPIC, "t", "User:bob", Op.CREATE),
        binding(ResourceType.TOPIC, "t", "User:alice", Op.CREATE, AclPermissionType.DENY),
        binding(ResourceType.GROUP, "t", "User:alice", Op.ALL)])
    for principal, op in (("User:alice", Op.CREATE), ("User:alice", Op.ALL), ("User:*", Op.CREATE)):
        assert may_create_topics(no_create, "User:alice", [
            binding(ResourceType.TOPIC, "pay-", principal, op, pattern=PatternType.PREFIXED)])


def test_the_reset_form_needs_read_on_the_group():
    assert may_reset_offsets(None) and may_reset_offsets(frozenset({Op.READ, Op.DESCRIBE}))
    assert not may_reset_offsets(frozenset({Op.DESCRIBE}))


def test_acl_rows_are_sorted_and_unique():
    b1 = binding(ResourceType.GROUP, "g", "User:alice", Op.READ)
    b2 = binding(ResourceType.TOPIC, "team.", "User:alice", Op.DESCRIBE, pattern=PatternType.PREFIXED)
    b3 = binding(ResourceType.TOPIC, "team.", "User:alice", Op.READ, pattern=PatternType.PREFIXED)
    rows = acl_rows([b1, b3, b2, b1])
    assert [(r.resource_type, r.pattern_type, r.resource, r.operation) for r in rows] == [
        ("TOPIC", "PREFIXED", "team.", "READ"), ("TOPIC", "PREFIXED", "team.", "DESCRIBE"),
        ("GROUP", "LITERAL", "g", "READ")]
    assert rows[0].principal == "User:alice" and rows[0].host == "*" and rows[0].permission == "ALLOW"
