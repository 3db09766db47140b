"""ACL values (security/acl.py): Kafka's codes and names, filter matching transcribed from Kafka's
ResourcePatternFilterTest and AclBindingTest, CreateAcls's binding validation and DeleteAcls's filter
validation with Kafka's words, the implied operations, the pattern index against a scan, and
DeleteAcls's plan (each removed binding under the first filter matching it, as AclAuthorizer)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kbroker.security.acl import (
    AccessControlEntry as Ace,
    AccessControlEntryFilter as AceFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternIndex,
    PatternType as PT,
    ResourcePattern as RP,
    ResourcePatternFilter as RPF,
    ResourceType as RT,
    creation_error,
    entry_from_json,
    entry_to_json,
    filter_error,
    implied_operations,
    name_of,
    parse_operation,
    parse_pattern_type,
    parse_permission_type,
    parse_resource_type,
    plan_deletions,
    touched_patterns,
)

ALLOW_READ = Ace("User:*", "*", Op.READ, Perm.ALLOW)


# -- codes and names ------------------------------------------------------------------------------------

def test_codes_are_kafkas():
    assert [(o.name, int(o)) for o in Op][:4] == [("UNKNOWN", 0), ("ANY", 1), ("ALL", 2), ("READ", 3)]
    assert int(Op.DESCRIBE_TOKENS) == 14 and int(RT.USER) == 7 and int(PT.PREFIXED) == 4 and int(Perm.ALLOW) == 3
    assert Op.from_code(99) == Op.UNKNOWN and RT.from_code(-1) == RT.UNKNOWN and PT.from_code(5) == PT.UNKNOWN
    assert Perm.from_code(2) == Perm.DENY


def test_names_are_kafkas_security_utils():
    assert name_of(RT.TRANSACTIONAL_ID) == "TransactionalId" and name_of(Op.IDEMPOTENT_WRITE) == "IdempotentWrite"
    assert name_of(Perm.ALLOW) == "Allow" and name_of(RT.DELEGATION_TOKEN) == "DelegationToken"
    assert parse_operation("Read") == Op.READ and parse_operation("read") == Op.READ
    assert parse_operation("IDEMPOTENTWRITE") == Op.IDEMPOTENT_WRITE
    assert parse_operation("IDEMPOTENT_WRITE") == Op.UNKNOWN  # SecurityUtils looks up PascalCase upper-cased
    assert parse_resource_type("topic") == RT.TOPIC and parse_resource_type("Nope") == RT.UNKNOWN
    assert parse_permission_type("DENY") == Perm.DENY
    assert parse_pattern_type("PREFIXED") == PT.PREFIXED and parse_pattern_type("prefixed") == PT.UNKNOWN


def test_entry_json_round_trip_and_invalid_entries():
    e = Ace("User:alice", "10.0.0.1", Op.DESCRIBE_CONFIGS, Perm.DENY)
    assert entry_to_json(e) == {"principal": "User:alice", "permissionType": "Deny", "operation": "DescribeConfigs",
                                "host": "10.0.0.1"}
    assert entry_from_json(entry_to_json(e)) == e
    for bad in ({"principal": "alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
                {"principal": "User:a", "permissionType": "Maybe", "operation": "Read", "host": "*"},
                {"principal": "User:a", "permissionType": "Allow", "operation": "Any", "host": "*"},
                {"principal": "User:a", "permissionType": "Allow", "operation": "Read"}, "text", None):
        assert entry_from_json(bad) is None


def test_java_to_string_forms():
    assert str(RP(RT.TOPIC, "t", PT.PREFIXED)) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)"
    assert str(RPF()) == "ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY)"
    assert str(ALLOW_READ) == "(principal=User:*, host=*, operation=READ, permissionType=ALLOW)"


# -- Kafka's ResourcePatternFilterTest ------------------------------------------------------------------

@pytest.mark.parametrize("f, pattern, expected", [
    (RPF(RT.TOPIC, "Name", PT.LITERAL), RP(RT.GROUP, "Name", PT.LITERAL), False),  # different resource type
    (RPF(RT.TOPIC, "Different", PT.PREFIXED), RP(RT.TOPIC, "Name", PT.PREFIXED), False),
    (RPF(RT.TOPIC, "NAME", PT.LITERAL), RP(RT.TOPIC, "Name", PT.LITERAL), False),  # case matters
    (RPF(RT.TOPIC, "Name", PT.LITERAL), RP(RT.TOPIC, "Name", PT.PREFIXED), False),
    (RPF(RT.ANY, "Name", PT.PREFIXED), RP(RT.TOPIC, "Name", PT.PREFIXED), True),
    (RPF(RT.TOPIC, None, PT.PREFIXED), RP(RT.TOPIC, "Name", PT.PREFIXED), True),
    (RPF(RT.TOPIC, None, PT.ANY), RP(RT.TOPIC, "Name", PT.PREFIXED), True),
    (RPF(RT.TOPIC, None, PT.MATCH), RP(RT.TOPIC, "Name", PT.PREFIXED), True),
    (RPF(RT.TOPIC, "Name", PT.LITERAL), RP(RT.TOPIC, "Name", PT.LITERAL), True),
    (RPF(RT.TOPIC, "Name", PT.ANY), RP(RT.TOPIC, "Name", PT.LITERAL), True),
    (RPF(RT.TOPIC, "Name", PT.MATCH), RP(RT.TOPIC, "Name", PT.LITERAL), True),
    (RPF(RT.TOPIC, "Name-something", PT.MATCH), RP(RT.TOPIC, "Name", PT.LITERAL), False),
    (RPF(RT.TOPIC, "*", PT.LITERAL), RP(RT.TOPIC, "*", PT.LITERAL), True),
    (RPF(RT.TOPIC, "Name", PT.LITERAL), RP(RT.TOPIC, "*", PT.LITERAL), False),
    (RPF(RT.TOPIC, "*", PT.LITERAL), RP(RT.TOPIC, "Name", PT.LITERAL), False),
    (RPF(RT.TOPIC, "Name", PT.ANY), RP(RT.TOPIC, "*", PT.LITERAL), False),
    (RPF(RT.TOPIC, "Name", PT.MATCH), RP(RT.TOPIC, "*", PT.LITERAL), True),
    (RPF(RT.TOPIC, "Name", PT.PREFIXED), RP(RT.TOPIC, "Name", PT.PREFIXED), True),
    (RPF(RT.TOPIC, "Name", PT.PREFIXED), RP(RT.TOPIC, "Name-something", PT.PREFIXED), False),
    (RPF(RT.TOPIC, "Name-something", PT.PREFIXED), RP(RT.TOPIC, "Name", PT.PREFIXED), False),
    (RPF(RT.TOPIC, "Name-something", PT.ANY), RP(RT.TOPIC, "Name", PT.PREFIXED), False),
    (RPF(RT.TOPIC, "Name-something", PT.MATCH), RP(RT.TOPIC, "Name", PT.PREFIXED), True),
])
def test_resource_pattern_filter_matches(f, pattern, expected):
    assert f.matches(pattern) is expected


def test_unknown_and_indefinite_filters():
    assert RPF(RT.UNKNOWN, None, PT.LITERAL).is_unknown and RPF(RT.GROUP, None, PT.UNKNOWN).is_unknown
    assert AceFilter(None, None, Op.UNKNOWN, Perm.ANY).is_unknown
    assert AclBindingFilter().find_indefinite_field() == "Resource type is ANY."
    exact = AclBinding(RP(RT.TOPIC, "t"), ALLOW_READ).to_filter()
    assert exact.matches_at_most_one() and exact.find_indefinite_field() is None
    assert RPF(RT.TOPIC, "t", PT.MATCH).find_indefinite_field() == "Resource pattern type is MATCH."
    assert AceFilter("User:a", None).find_indefinite_field() == "Host is NULL"


def test_acl_binding_filter_matching_as_kafkas_acl_binding_test():
    acl1 = AclBinding(RP(RT.TOPIC, "mytopic"), Ace("User:ANONYMOUS", "", Op.ALL, Perm.ALLOW))
    acl2 = AclBinding(RP(RT.TOPIC, "mytopic"), Ace("User:*", "", Op.READ, Perm.ALLOW))
    acl3 = AclBinding(RP(RT.TOPIC, "mytopic2"), Ace("User:ANONYMOUS", "127.0.0.1", Op.READ, Perm.DENY))
    any_anonymous = AclBindingFilter(RPF(), AceFilter("User:ANONYMOUS", None))
    any_deny = AclBindingFilter(RPF(), AceFilter(None, None, Op.ANY, Perm.DENY))
    any_mytopic = AclBindingFilter(RPF(RT.TOPIC, "mytopic", PT.LITERAL), AceFilter())
    assert AclBindingFilter().matches(acl1) and AclBindingFilter().matches(acl3)
    assert any_anonymous.matches(acl1) and not any_anonymous.matches(acl2) and any_anonymous.matches(acl3)
    assert not any_deny.matches(acl1) and not any_deny.matches(acl2) and any_deny.matches(acl3)
    assert any_mytopic.matches(acl1) and any_mytopic.matches(acl2) and not any_mytopic.matches(acl3)
    assert acl1.to_filter().matches(acl1) and not acl1.to_filter().matches(acl2)


# -- validation -----------------------------------------------------------------------------------------

def _b(rtype=RT.TOPIC, name="t", ptype=PT.LITERAL, principal="User:alice", host="*", op=Op.READ, perm=Perm.ALLOW):
    return AclBinding(RP(rtype, name, ptype), Ace(principal, host, op, perm))


@pytest.mark.parametrize("binding, message", [
    (_b(rtype=RT.ANY), "Invalid resourceType ANY"),
    (_b(rtype=RT.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (_b(ptype=PT.MATCH), "Invalid patternType MATCH"),
    (_b(ptype=PT.ANY), "Invalid patternType ANY"),
    (_b(ptype=PT.UNKNOWN), "Invalid patternType UNKNOWN"),
    (_b(op=Op.ANY), "Invalid operation ANY"),
    (_b(op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
    (_b(perm=Perm.ANY), "Invalid permissionType ANY"),
    (_b(perm=Perm.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (_b(rtype=RT.CLUSTER, name="my-cluster"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (_b(name=""), "Invalid empty resource name"),
    (_b(principal="alice"), ("Could not parse principal from `alice` (no colon is present separating the "
                             "principal type from the principal name)")),
    (_b(rtype=RT.GROUP, name="a/b"), "Failed to create ACL"),
    (_b(rtype=RT.GROUP, name=".."), "Failed to create ACL"),
    (_b(rtype=RT.GROUP, name="a\0b"), "Failed to create ACL"),
])
def test_creation_errors_have_kafkas_words(binding, message):
    assert creation_error(binding) == message


@pytest.mark.parametrize("binding", [
    _b(), _b(principal="User:*"), _b(host="10.1.2.3"), _b(op=Op.ALL), _b(perm=Perm.DENY), _b(name="*"),
    _b(ptype=PT.PREFIXED, name="*"), _b(rtype=RT.CLUSTER, name="kafka-cluster", op=Op.ALTER),
    _b(rtype=RT.TRANSACTIONAL_ID, name="tx-", ptype=PT.PREFIXED, op=Op.WRITE),
    _b(rtype=RT.DELEGATION_TOKEN, name="token", op=Op.DESCRIBE), _b(rtype=RT.USER, name="User:bob", op=Op.CREATE_TOKENS),
    _b(principal="Group:ops"), _b(name="ünïcode topic"),
])
def test_valid_bindings(binding):
    assert creation_error(binding) is None


def test_filter_errors_have_kafkas_words():
    assert filter_error(AclBindingFilter(RPF(RT.UNKNOWN), AceFilter())) == "Unknown patternFilter."
    assert filter_error(AclBindingFilter(RPF(RT.TOPIC, None, PT.UNKNOWN), AceFilter())) == "Unknown patternFilter."
    assert filter_error(AclBindingFilter(RPF(), AceFilter(None, None, Op.UNKNOWN))) == "Unknown entryFilter."
    assert filter_error(AclBindingFilter(RPF(), AceFilter(None, None, Op.ANY, Perm.UNKNOWN))) == "Unknown entryFilter."
    assert filter_error(AclBindingFilter()) is None


def test_implied_operations():
    assert implied_operations(Op.DESCRIBE) == {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL}
    assert implied_operations(Op.DESCRIBE_CONFIGS) == {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL}
    assert implied_operations(Op.READ) == {Op.READ, Op.ALL}


# -- the pattern index and DeleteAcls's plan ------------------------------------------------------------

NAMES = st.sampled_from(["", "*", "a", "ab", "abc", "b", "ba", "a*", "abd"])
PATTERNS = st.builds(RP, st.sampled_from([RT.TOPIC, RT.GROUP]), NAMES, st.sampled_from([PT.LITERAL, PT.PREFIXED]))
FILTERS = st.builds(RPF, st.sampled_from([RT.TOPIC, RT.GROUP, RT.ANY]), st.none() | NAMES,
                    st.sampled_from([PT.LITERAL, PT.PREFIXED, PT.ANY, PT.MATCH]))


@settings(max_examples=300, deadline=None)
@given(st.sets(PATTERNS), FILTERS)
def test_pattern_index_finds_what_a_scan_finds(patterns, f):
    assert set(PatternIndex(patterns).matching(f)) == {p for p in patterns if f.matches(p)}


def test_delete_plan_reports_a_binding_under_the_first_filter_as_kafkas_acl_authorizer():
    """AuthorizerTest.testAclsFilter (ZooKeeper mode)."""
    r1, r2, prefixed = RP(RT.TOPIC, "foo-1"), RP(RT.TOPIC, "bar-1"), RP(RT.TOPIC, "bar-", PT.PREFIXED)
    acl1 = AclBinding(r1, Ace("User:alice", "*", Op.READ, Perm.ALLOW))
    acl2 = AclBinding(r1, Ace("User:alice", "192.168.0.1", Op.WRITE, Perm.ALLOW))
    acl3 = AclBinding(r2, Ace("User:alice", "*", Op.DESCRIBE, Perm.ALLOW))
    acl4 = AclBinding(prefixed, Ace("User:*", "*", Op.READ, Perm.ALLOW))
    current: dict = {}
    for b in (acl1, acl2, acl3, acl4):
        current.setdefault(b.pattern, set()).add(b.entry)
    matching = AclBindingFilter(RPF(RT.ANY, r2.name, PT.MATCH), AceFilter())
    filters = [matching, acl1.to_filter(), AclBindingFilter(r2.to_filter(), AceFilter()),
               AclBindingFilter(RPF(RT.TOPIC, "baz", PT.ANY), AceFilter())]
    plan = plan_deletions(current, filters)
    by_filter = {i: set() for i in range(len(filters))}
    for pattern, removed in plan.items():
        for entry, i in removed.items():
            by_filter[i].add(AclBinding(pattern, entry))
    assert by_filter == {0: {acl3, acl4}, 1: {acl1}, 2: set(), 3: set()}
    # the exact patterns of filters naming one are looked at even when absent (a fresh read)
    assert RP(RT.TOPIC, "baz", PT.LITERAL) in touched_patterns(current.keys(), filters)
    assert RP(RT.TOPIC, "baz", PT.PREFIXED) in touched_patterns(current.keys(), filters)


def test_delete_plan_of_a_repeated_filter_gives_the_repeat_nothing():
    current = {RP(RT.TOPIC, "t"): {ALLOW_READ}}
    f = AclBindingFilter(RPF(RT.TOPIC, "t", PT.LITERAL), AceFilter())
    assert plan_deletions(current, [f, f]) == {RP(RT.TOPIC, "t"): {ALLOW_READ: 0}}
