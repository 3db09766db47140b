"""security/authorizer.py: Kafka's AclAuthorizer decisions.

- Property tests: `authorize` against a plain scan of every binding written from the rules
  (AclAuthorizer.authorizeAction), `authorize_by_resource_type` against Kafka's own generic
  algorithm (the Authorizer interface's default authorizeByResourceType), both through updates
  that must drop cached decisions.
- Kafka's AuthorizerTest and BaseAuthorizerTest cases, transcribed (ZooKeeper mode's answers).
"""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kbroker.security.acl import (
    AccessControlEntry as Ace,
    AclBinding,
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternType as PT,
    ResourcePattern as RP,
    ResourceType as RT,
)
from kbroker.security.authorizer import AclAuthorizer, parse_super_users
from kbroker.security.principal import KafkaPrincipal

ALLOW, DENY = Perm.ALLOW, Perm.DENY
LITERAL, PREFIXED = PT.LITERAL, PT.PREFIXED
CONCRETE_OPS = [o for o in Op if o not in (Op.UNKNOWN, Op.ANY)]


# -- the references --------------------------------------------------------------------------------------

def reference_authorize(bindings, super_users, allow_everyone, principal, host, op, rtype, name) -> bool:
    if principal in super_users:
        return True
    applying = [b.entry for b in bindings if b.pattern.resource_type == rtype and (
        (b.pattern.pattern_type == LITERAL and b.pattern.name in (name, "*"))
        or (b.pattern.pattern_type == PREFIXED and name.startswith(b.pattern.name)))]
    if not applying:
        return allow_everyone

    def mine(e):
        return e.principal in (principal, "User:*") and e.host in (host, "*")

    if any(mine(e) and e.permission_type == DENY and e.operation in (op, Op.ALL) for e in applying):
        return False
    allowing = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
                Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}}.get(op, {op}) | {Op.ALL}
    return any(mine(e) and e.permission_type == ALLOW and e.operation in allowing for e in applying)


def reference_by_resource_type(bindings, super_users, allow_everyone, principal, host, op, rtype) -> bool:
    """Kafka's Authorizer.authorizeByResourceType default method (without its first "hardcode"
    probe, which makes super users pass: checked first here; allow.everyone.if.no.acl.found placed
    as AclAuthorizer places it, after the wildcard DENY)."""
    if principal in super_users:
        return True
    deny = {LITERAL: set(), PREFIXED: set()}
    allow = {LITERAL: set(), PREFIXED: set()}
    wildcard_allow = False
    for b in bindings:
        e = b.entry
        if b.pattern.resource_type != rtype or e.host not in (host, "*") or e.principal not in (principal, "User:*"):
            continue
        if e.operation not in (op, Op.ALL):
            continue
        if e.permission_type == DENY:
            if b.pattern.pattern_type == LITERAL and b.pattern.name == "*":
                return False
            deny[b.pattern.pattern_type].add(b.pattern.name)
        elif b.pattern.pattern_type == LITERAL and b.pattern.name == "*":
            wildcard_allow = True
        else:
            allow[b.pattern.pattern_type].add(b.pattern.name)
    if allow_everyone or wildcard_allow:
        return True
    for ptype, names in allow.items():
        for name in names:
            if ptype == LITERAL and name in deny[LITERAL]:
                continue
            if not any(name[:i] in deny[PREFIXED] for i in range(1, len(name) + 1)):
                return True
    return False


PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]
NAMES = ["*", "a", "ab", "abc", "abd", "b", "ba", "a*"]
ENTRIES = st.builds(Ace, st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS), st.sampled_from(CONCRETE_OPS),
                    st.sampled_from([ALLOW, DENY]))
BINDINGS = st.builds(AclBinding, st.builds(RP, st.sampled_from([RT.TOPIC, RT.GROUP]), st.sampled_from(NAMES),
                                           st.sampled_from([LITERAL, PREFIXED])), ENTRIES)
QUERIES = st.tuples(st.sampled_from(["User:alice", "User:bob", "User:carol"]), st.sampled_from(["10.0.0.1", "10.0.0.2"]),
                    st.sampled_from(CONCRETE_OPS), st.sampled_from([RT.TOPIC, RT.GROUP]),
                    st.sampled_from(["", "a", "ab", "abc", "abcd", "b", "*", "c", "a*"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(BINDINGS, max_size=25), st.lists(QUERIES, min_size=1, max_size=20), st.booleans(),
       st.sampled_from([set(), {"User:bob"}]))
def test_authorize_is_the_rules(bindings, queries, allow_everyone, super_users):
    authorizer = AclAuthorizer(bindings, super_users, allow_everyone)
    for principal, host, op, rtype, name in queries * 2:  # the second round is answered from the cache
        expected = reference_authorize(bindings, super_users, allow_everyone, principal, host, op, rtype, name)
        assert authorizer.authorize(principal, host, op, rtype, name) is expected, (principal, host, op, rtype, name)


@settings(max_examples=400, deadline=None)
@given(st.lists(BINDINGS, max_size=25), st.lists(QUERIES, min_size=1, max_size=20), st.booleans())
def test_authorize_by_resource_type_is_kafkas_generic_algorithm(bindings, queries, allow_everyone):
    authorizer = AclAuthorizer(bindings, {"User:bob"}, allow_everyone)
    for principal, host, op, rtype, _name in queries:
        expected = reference_by_resource_type(bindings, {"User:bob"}, allow_everyone, principal, host, op, rtype)
        assert authorizer.authorize_by_resource_type(principal, host, op, rtype) is expected


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(BINDINGS, max_size=12), min_size=2, max_size=5), st.lists(QUERIES, min_size=1, max_size=15))
def test_update_drops_every_cached_decision(generations, queries):
    authorizer = AclAuthorizer()
    for bindings in generations:
        authorizer.update(bindings)
        for principal, host, op, rtype, name in queries:
            assert authorizer.authorize(principal, host, op, rtype, name) is \
                reference_authorize(bindings, set(), False, principal, host, op, rtype, name)
            assert authorizer.allowed_operations(principal, host, rtype, name, CONCRETE_OPS) == {
                o for o in CONCRETE_OPS if reference_authorize(bindings, set(), False, principal, host, o, rtype, name)}


def test_ten_thousand_acls_decide_as_the_rules():
    rng = random.Random(7)
    bindings = []
    for i in range(10_000):
        name = f"team{i % 500}-{rng.choice(['orders', 'pay', 'logs'])}{i}"
        ptype = PREFIXED if i % 3 == 0 else LITERAL
        if ptype == PREFIXED:
            name = name[: rng.randrange(5, len(name))]
        bindings.append(AclBinding(RP(RT.TOPIC, name, ptype),
                                   Ace(f"User:u{i % 50}", "*", rng.choice([Op.READ, Op.WRITE, Op.ALL]),
                                       DENY if i % 17 == 0 else ALLOW)))
    authorizer = AclAuthorizer(bindings)
    for _ in range(300):
        b = rng.choice(bindings)
        name = b.pattern.name + ("" if b.pattern.pattern_type == LITERAL else "x-suffix")
        principal, op = rng.choice([b.entry.principal, "User:u7"]), rng.choice([Op.READ, Op.WRITE, Op.DESCRIBE])
        assert authorizer.authorize(principal, "10.0.0.1", op, RT.TOPIC, name) is \
            reference_authorize(bindings, set(), False, principal, "10.0.0.1", op, RT.TOPIC, name)


def test_principal_objects_and_cache_bound():
    authorizer = AclAuthorizer([AclBinding(RP(RT.TOPIC, "t"), Ace("User:alice", "*", Op.READ, ALLOW))], cache_size=4)
    assert authorizer.authorize(KafkaPrincipal("User", "alice"), "h", Op.READ, RT.TOPIC, "t")
    for i in range(20):
        authorizer.authorize("User:alice", "h", Op.READ, RT.TOPIC, f"t{i}")
    assert authorizer.cache_info().currsize <= 4


def test_super_users_config_is_kafkas():
    assert parse_super_users("User:admin; User:broker ") == {"User:admin", "User:broker"}
    assert parse_super_users("User:admin;") == {"User:admin"}  # Java's split drops a trailing empty part
    assert parse_super_users("") == set() and parse_super_users(None) == set()
    for bad in ("admin", "User:a;;User:b", "User:a; ;User:b"):
        with pytest.raises(ValueError, match="expected a string in format principalType:principalName"):
            parse_super_users(bad)


def test_by_resource_type_refuses_filter_arguments():
    authorizer = AclAuthorizer()
    with pytest.raises(ValueError, match="non-filter resource type"):
        authorizer.authorize_by_resource_type("User:a", "h", Op.READ, RT.ANY)
    with pytest.raises(ValueError, match="Unknown operation type"):
        authorizer.authorize_by_resource_type("User:a", "h", Op.UNKNOWN, RT.TOPIC)


# -- Kafka's AuthorizerTest (ZooKeeper mode) ---------------------------------------------------------------

class Kafka:
    """AuthorizerTest's harness: addAcls / removeAcls on one resource, then authorize."""

    SUPER = "User:superuser1; User:superuser2"

    def __init__(self, allow_everyone: bool = False) -> None:
        self.bindings: set[AclBinding] = set()
        self.authorizer = AclAuthorizer((), parse_super_users(self.SUPER), allow_everyone)

    def add(self, entries, pattern) -> None:
        self.bindings |= {AclBinding(pattern, e) for e in entries}
        self.authorizer.update(self.bindings)

    def remove(self, entries, pattern) -> None:
        self.bindings -= {AclBinding(pattern, e) for e in entries} if entries else \
            {b for b in self.bindings if b.pattern == pattern}
        self.authorizer.update(self.bindings)

    def ok(self, principal, host, op, pattern) -> bool:
        return self.authorizer.authorize(principal, host, op, pattern.resource_type, pattern.name)

    def by_type(self, principal, host, op, rtype) -> bool:
        return self.authorizer.authorize_by_resource_type(principal, host, op, rtype)


ALLOW_READ = Ace("User:*", "*", Op.READ, ALLOW)
ALLOW_WRITE = Ace("User:*", "*", Op.WRITE, ALLOW)
DENY_READ = Ace("User:*", "*", Op.READ, DENY)
WILDCARD = RP(RT.TOPIC, "*", LITERAL)
PREFIX_FOO = RP(RT.TOPIC, "foo", PREFIXED)
CLUSTER = RP(RT.CLUSTER, "kafka-cluster", LITERAL)
ALICE, HOST = "User:alice", "192.168.0.1"


@pytest.fixture
def kafka():
    return Kafka()


@pytest.fixture
def resource():
    return RP(RT.TOPIC, f"foo-{uuid.uuid4()}", LITERAL)


def test_authorize_with_empty_resource_name(kafka):
    assert not kafka.ok(ALICE, HOST, Op.READ, RP(RT.GROUP, ""))
    kafka.add({ALLOW_READ}, RP(RT.GROUP, "*"))
    assert kafka.ok(ALICE, HOST, Op.READ, RP(RT.GROUP, ""))


def test_topic_acl(kafka, resource):
    user1, user2, user3 = "User:alice", "User:rob", "User:batman"
    host1, host2 = "192.168.1.1", "192.168.1.2"
    kafka.add({Ace(user1, host1, Op.READ, ALLOW), Ace(user1, host2, Op.READ, ALLOW), Ace(user1, host1, Op.READ, DENY),
               Ace(user1, host1, Op.WRITE, ALLOW), Ace(user1, "*", Op.DESCRIBE, ALLOW), Ace(user2, "*", Op.READ, ALLOW),
               Ace(user3, "*", Op.WRITE, ALLOW)}, resource)
    assert kafka.ok(user1, host2, Op.READ, resource)
    assert not kafka.ok(user1, host1, Op.READ, resource)  # the DENY from host1
    assert kafka.ok(user1, host1, Op.WRITE, resource)
    assert not kafka.ok(user1, host2, Op.WRITE, resource)
    assert kafka.ok(user1, host1, Op.DESCRIBE, resource) and kafka.ok(user1, host2, Op.DESCRIBE, resource)
    assert not kafka.ok(user1, host1, Op.ALTER, resource) and not kafka.ok(user1, host2, Op.ALTER, resource)
    assert kafka.ok(user2, host1, Op.DESCRIBE, resource) and kafka.ok(user3, host1, Op.DESCRIBE, resource)
    assert kafka.ok(user2, host1, Op.READ, resource) and kafka.ok(user3, host1, Op.WRITE, resource)


def test_deny_takes_precedence(kafka, resource):
    kafka.add({Ace("User:*", "*", Op.ALL, ALLOW), Ace(ALICE, "192.168.2.1", Op.ALL, DENY)}, resource)
    assert not kafka.ok(ALICE, "192.168.2.1", Op.READ, resource)


def test_allow_all_access(kafka, resource):
    kafka.add({Ace("User:*", "*", Op.ALL, ALLOW)}, resource)
    assert kafka.ok("User:random", "192.0.4.4", Op.READ, resource)


def test_super_user_has_access(kafka, resource):
    kafka.add({Ace("User:*", "*", Op.ALL, DENY)}, resource)
    assert kafka.ok("User:superuser1", "192.0.4.4", Op.READ, resource)
    assert kafka.ok("User:superuser2", "192.0.4.4", Op.READ, resource)
    assert kafka.ok(KafkaPrincipal("User", "superuser1"), "192.0.4.4", Op.READ, resource)


def test_wildcard_acls(kafka, resource):
    assert not kafka.ok(ALICE, "192.168.3.1", Op.READ, resource)
    read = Ace(ALICE, "192.168.3.1", Op.READ, ALLOW)
    kafka.add({read}, WILDCARD)
    assert kafka.ok(ALICE, "192.168.3.1", Op.READ, resource)
    kafka.add({Ace(ALICE, "192.168.3.1", Op.WRITE, ALLOW)}, resource)
    kafka.add({Ace(ALICE, "192.168.3.1", Op.WRITE, DENY)}, WILDCARD)
    assert not kafka.ok(ALICE, "192.168.3.1", Op.WRITE, resource)


def test_no_acl_found(kafka, resource):
    assert not kafka.ok(ALICE, HOST, Op.READ, resource)


def test_no_acl_found_override(resource):
    everyone = Kafka(allow_everyone=True)
    assert everyone.ok(ALICE, HOST, Op.READ, resource)
    everyone.add({Ace("User:bob", "*", Op.READ, ALLOW)}, resource)
    assert not everyone.ok(ALICE, HOST, Op.READ, resource)  # an ACL exists: the override no longer applies


@pytest.mark.parametrize("parent, implied", [
    (Op.ALL, set(CONCRETE_OPS)), (Op.READ, {Op.DESCRIBE}), (Op.WRITE, {Op.DESCRIBE}), (Op.DELETE, {Op.DESCRIBE}),
    (Op.ALTER, {Op.DESCRIBE}), (Op.ALTER_CONFIGS, {Op.DESCRIBE_CONFIGS}),
])
def test_implications_of_allow(kafka, parent, implied):
    kafka.add({Ace(ALICE, "*", parent, ALLOW)}, CLUSTER)
    for op in CONCRETE_OPS:
        assert kafka.ok(ALICE, "192.168.3.1", op, CLUSTER) is (op in implied or op == parent), op


@pytest.mark.parametrize("parent, implied", [(Op.ALL, set(CONCRETE_OPS)), (Op.DESCRIBE, set()),
                                             (Op.DESCRIBE_CONFIGS, set())])
def test_implications_of_deny(kafka, parent, implied):
    kafka.add({Ace(ALICE, "*", parent, DENY), Ace(ALICE, "*", Op.ALL, ALLOW)}, CLUSTER)
    for op in CONCRETE_OPS:
        assert kafka.ok(ALICE, "192.168.3.1", op, CLUSTER) is not (op in implied or op == parent), op


def test_access_allowed_if_allow_acl_exists_on_wildcard_or_prefixed_resource(resource):
    for pattern in (WILDCARD, PREFIX_FOO):
        kafka = Kafka()
        kafka.add({ALLOW_READ}, pattern)
        assert kafka.ok(ALICE, HOST, Op.READ, resource)


def test_authorize_with_prefixed_resource(kafka, resource):
    for name, ptype in (("a_other", LITERAL), ("a_other", PREFIXED), (f"foo-{uuid.uuid4()}", PREFIXED),
                        (f"foo-{uuid.uuid4()}", PREFIXED), (f"foo-{uuid.uuid4()}-zzz", PREFIXED),
                        (f"fooo-{uuid.uuid4()}", PREFIXED), (f"fo-{uuid.uuid4()}", PREFIXED),
                        (f"fop-{uuid.uuid4()}", PREFIXED), (f"fon-{uuid.uuid4()}", PREFIXED), ("fon-", PREFIXED),
                        ("z_other", PREFIXED), ("z_other", LITERAL)):
        kafka.add({DENY_READ}, RP(RT.TOPIC, name, ptype))
    kafka.add({ALLOW_READ}, PREFIX_FOO)
    assert kafka.ok(ALICE, HOST, Op.READ, resource)


def test_single_character_resource_acls(kafka):
    kafka.add({ALLOW_READ}, RP(RT.TOPIC, "f", LITERAL))
    assert kafka.ok(ALICE, HOST, Op.READ, RP(RT.TOPIC, "f"))
    assert not kafka.ok(ALICE, HOST, Op.READ, RP(RT.TOPIC, "foo"))
    kafka.add({ALLOW_READ}, RP(RT.TOPIC, "_", PREFIXED))
    assert kafka.ok(ALICE, HOST, Op.READ, RP(RT.TOPIC, "_foo"))
    assert kafka.ok(ALICE, HOST, Op.READ, RP(RT.TOPIC, "_"))
    assert not kafka.ok(ALICE, HOST, Op.READ, RP(RT.TOPIC, "foo_"))


def test_authorize_by_resource_type_no_acl_found_override(resource):
    everyone = Kafka(allow_everyone=True)
    assert everyone.by_type(ALICE, HOST, Op.READ, RT.TOPIC)
    assert everyone.by_type(ALICE, HOST, Op.WRITE, RT.TOPIC)


# -- Kafka's BaseAuthorizerTest (authorizeByResourceType) --------------------------------------------------

U1, U2, H1, H2 = "User:user1", "User:user2", "192.168.1.1", "192.168.1.2"


def _topic(prefix: str) -> RP:
    return RP(RT.TOPIC, f"{prefix}{uuid.uuid4()}", LITERAL)


def test_by_resource_type_multiple_add_and_remove(kafka):
    resource1 = _topic("sb1")
    deny_read, allow_read = Ace(U1, H1, Op.READ, DENY), Ace(U1, H1, Op.READ, ALLOW)
    for _ in range(3):
        assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
        kafka.add({allow_read}, resource1)
        assert kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
        for _ in range(3):
            kafka.add({deny_read}, resource1)
            assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
            kafka.remove({deny_read}, resource1)
            kafka.add({allow_read}, resource1)
            assert kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
        kafka.remove({allow_read}, resource1)
        assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)


def test_by_resource_type_isolation_unrelated_deny_wont_dominate_allow(kafka):
    resource1, resource2, resource3 = _topic("sb1"), _topic("sb2"), RP(RT.GROUP, "s", PREFIXED)
    kafka.add({Ace(U1, H1, Op.READ, DENY), Ace(U2, H1, Op.READ, DENY), Ace(U1, H2, Op.WRITE, DENY),
               Ace(U2, H2, Op.READ, DENY), Ace(U1, H2, Op.READ, ALLOW)}, resource1)
    kafka.add({Ace(U1, H2, Op.READ, DENY)}, resource2)
    kafka.add({Ace(U1, H2, Op.READ, DENY)}, resource3)
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    assert not kafka.by_type(U1, H1, Op.READ, RT.GROUP)
    assert not kafka.by_type(U1, H1, Op.READ, RT.TRANSACTIONAL_ID)
    assert not kafka.by_type(U1, H1, Op.READ, RT.CLUSTER)
    assert kafka.by_type(U1, H2, Op.READ, RT.TOPIC)


def test_by_resource_type_deny_takes_precedence(kafka):
    resource1 = _topic("sb1")
    kafka.add({Ace(U1, H1, Op.WRITE, ALLOW)}, resource1)
    assert kafka.by_type(U1, H1, Op.WRITE, RT.TOPIC)
    kafka.add({Ace(U1, H1, Op.WRITE, DENY)}, resource1)
    assert not kafka.by_type(U1, H1, Op.WRITE, RT.TOPIC)


def test_by_resource_type_prefixed_resource_deny_dominate(kafka):
    allow, deny = Ace(U1, H1, Op.READ, ALLOW), Ace(U1, H1, Op.READ, DENY)
    steps = [(allow, "abcde", True), (deny, "abcd", False), (allow, "abc", True), (deny, "a", False),
             (allow, "ab", False)]
    for ace, name, expected in steps:
        kafka.add({ace}, RP(RT.GROUP, name, PREFIXED))
        assert kafka.by_type(U1, H1, Op.READ, RT.GROUP) is expected, name


def test_by_resource_type_wildcard_resource_deny_dominate(kafka):
    allow, deny = Ace(U1, H1, Op.WRITE, ALLOW), Ace(U1, H1, Op.WRITE, DENY)
    kafka.add({allow}, RP(RT.GROUP, "hello", PREFIXED))
    assert kafka.by_type(U1, H1, Op.WRITE, RT.GROUP)
    kafka.add({deny}, RP(RT.GROUP, "*", LITERAL))
    assert not kafka.by_type(U1, H1, Op.WRITE, RT.GROUP)
    kafka.add({allow}, RP(RT.GROUP, "*", LITERAL))
    assert not kafka.by_type(U1, H1, Op.WRITE, RT.GROUP)
    kafka.add({allow}, RP(RT.GROUP, "aloha", LITERAL))
    assert not kafka.by_type(U1, H1, Op.WRITE, RT.GROUP)


def test_by_resource_type_with_all_operation_ace(kafka):
    resource1 = _topic("sb1")
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, H1, Op.WRITE, DENY), Ace(U1, H1, Op.ALL, ALLOW)}, resource1)
    assert kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, H1, Op.ALL, DENY)}, resource1)
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)


def test_by_resource_type_with_all_host_ace(kafka):
    resource1, resource2 = _topic("sb1"), _topic("sb2")
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, H1, Op.READ, ALLOW)}, resource1)
    assert kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, "*", Op.READ, DENY)}, resource1)
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, H1, Op.READ, DENY)}, resource2)
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC) and not kafka.by_type(U1, H2, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, "*", Op.READ, ALLOW)}, resource2)
    assert kafka.by_type(U1, H2, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, "*", Op.READ, DENY)}, resource2)
    assert not kafka.by_type(U1, H2, Op.READ, RT.TOPIC)


def test_by_resource_type_with_all_principal_ace(kafka):
    resource1, resource2 = _topic("sb1"), _topic("sb2")
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, H1, Op.READ, ALLOW)}, resource1)
    assert kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace("User:*", H1, Op.READ, DENY)}, resource1)
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace(U1, H1, Op.READ, DENY)}, resource2)
    assert not kafka.by_type(U1, H1, Op.READ, RT.TOPIC) and not kafka.by_type(U2, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace("User:*", H1, Op.READ, ALLOW)}, resource2)
    assert kafka.by_type(U2, H1, Op.READ, RT.TOPIC)
    kafka.add({Ace("User:*", H1, Op.READ, DENY)}, resource2)
    assert not kafka.by_type(U2, H1, Op.READ, RT.TOPIC)


def test_by_resource_type_super_user_has_access(kafka):
    deny_all = Ace("User:*", "*", Op.ALL, DENY)
    for rtype in (RT.TOPIC, RT.CLUSTER, RT.GROUP, RT.TRANSACTIONAL_ID):
        kafka.add({deny_all}, RP(rtype, "*", LITERAL))
    for rtype in (RT.TOPIC, RT.CLUSTER, RT.GROUP, RT.TRANSACTIONAL_ID):
        assert kafka.by_type("User:superuser1", "192.0.4.4", Op.READ, rtype)
