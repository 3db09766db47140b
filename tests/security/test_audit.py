"""The audit of denials on a fake clock: Kafka's line, once per principal / resource / operation per
minute, the count of the denials not logged, bounded memory and a bounded log under a probe of
many names; and the adapter: counts, log_denied=False, the `kbroker.authorizer` logger."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from kbroker.api.authorization import AclAuthorizerAdapter, audit_denied, permitted, permitted_any
from kbroker.api.context import RequestContext
from kbroker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation as Op,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType as RT,
)
from kbroker.security.audit import DecisionCounts, DenialAudit, denial_line
from kbroker.security.authorizer import AclAuthorizer
from kbroker.security.principal import KafkaPrincipal
from kbroker.wire.protocol import RequestHeader


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _audit(**kw):
    lines: list[str] = []
    clock = Clock()
    return DenialAudit(lines.append, clock, **kw), lines, clock


def test_the_line_is_kafkas():
    assert denial_line("User:alice", "127.0.0.1", Op.WRITE, RT.TOPIC, "x", "Produce") == (
        "Principal = User:alice is Denied Operation = Write from host = 127.0.0.1 on resource = Topic:LITERAL:x "
        "for request = Produce with resourceRefCount = 1")
    assert "Operation = IdempotentWrite" in denial_line("User:a", "h", Op.IDEMPOTENT_WRITE, RT.CLUSTER,
                                                        "kafka-cluster", "InitProducerId")
    assert "resource = TransactionalId:LITERAL:tx" in denial_line("User:a", "h", Op.WRITE, RT.TRANSACTIONAL_ID,
                                                                  "tx", "EndTxn")


def test_once_per_principal_resource_and_operation_per_minute():
    audit, lines, clock = _audit()
    assert audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", "Produce")
    for _ in range(500):  # a producer retrying in a loop
        clock.now += 0.1
        assert audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", "Produce") is None
    # another operation, resource or principal is another key; another host or API is not
    assert audit.denied("User:alice", "10.0.0.1", Op.READ, RT.TOPIC, "orders", "Fetch")
    assert audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.TOPIC, "payments", "Produce")
    assert audit.denied("User:bob", "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", "Produce")
    assert audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.GROUP, "orders", "Produce")
    assert audit.denied("User:alice", "10.0.0.9", Op.WRITE, RT.TOPIC, "orders", "Produce") is None
    assert len(lines) == 5
    # a minute after the first line: logged again, with what was left out meanwhile
    clock.now = 1000.0 + 60
    line = audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", "Produce")
    assert line and line.endswith("(501 more denials of it not logged in the last 60 s)")
    clock.now += 59.9
    assert audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", "Produce") is None
    clock.now += 0.2
    line = audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", "Produce")
    assert line and line.endswith("(1 more denials of it not logged in the last 60 s)")
    clock.now += 61
    assert audit.denied("User:alice", "10.0.0.1", Op.WRITE, RT.TOPIC, "orders", "Produce").endswith("= 1")
    assert lines[-1].endswith("resourceRefCount = 1")


def test_a_probe_of_many_names_keeps_memory_and_the_log_bounded():
    audit, lines, clock = _audit(max_keys=100)
    for i in range(1000):
        clock.now += 0.01
        audit.denied("User:mallory", "10.6.6.6", Op.DESCRIBE, RT.TOPIC, f"secret-{i}", "Metadata")
    assert len(audit) == 100
    assert len(lines) == 101  # 100 names, then one summary line for the rest of the minute
    assert lines[-1] == "1 denials of resources beyond the 100 denied in the last 60 s not logged one by one"
    # a minute on, the old keys are forgotten and new names are logged again
    clock.now += 60
    assert audit.denied("User:mallory", "10.6.6.6", Op.DESCRIBE, RT.TOPIC, "secret-new", "Metadata")
    assert len(audit) <= 100
    # the overflow summary counts what it left out, once per minute
    audit2, lines2, clock2 = _audit(max_keys=2)
    for i in range(10):
        audit2.denied("User:m", "h", Op.READ, RT.TOPIC, f"t{i}", "Fetch")
    assert len(lines2) == 3
    clock2.now += 30
    audit2.denied("User:m", "h", Op.READ, RT.TOPIC, "t99", "Fetch")
    assert len(lines2) == 3
    clock2.now += 31
    audit2.denied("User:m", "h", Op.READ, RT.TOPIC, "t100", "Fetch")  # the first two expired: logged
    assert lines2[-1].startswith("Principal = User:m is Denied Operation = Read")


# -- the adapter -------------------------------------------------------------------------------------

def _adapter():
    bindings = [AclBinding(ResourcePattern(RT.TOPIC, "orders", PatternType.LITERAL),
                           AccessControlEntry("User:alice", "*", Op.WRITE, AclPermissionType.ALLOW))]
    lines: list[str] = []
    adapter = AclAuthorizerAdapter(AclAuthorizer(bindings, {"User:admin"}), DenialAudit(lines.append, Clock()))
    return adapter, lines


def _ctx(adapter, user: str, api_key: int = 0, host: str = "127.0.0.1") -> RequestContext:
    session = SimpleNamespace(principal=KafkaPrincipal("User", user))
    return RequestContext(RequestHeader(api_key, 9, 1, "c", True), SimpleNamespace(authorizer=adapter), host, session)


def test_the_adapter_counts_every_check_and_audits_denials_once():
    adapter, lines = _adapter()
    alice = _ctx(adapter, "alice")
    assert permitted(alice, Op.WRITE, RT.TOPIC, "orders")
    assert permitted(alice, Op.DESCRIBE, RT.TOPIC, "orders")  # implied by WRITE
    for _ in range(3):
        assert not permitted(alice, Op.WRITE, RT.TOPIC, "payments")
    assert lines == ["Principal = User:alice is Denied Operation = Write from host = 127.0.0.1 on resource = "
                     "Topic:LITERAL:payments for request = Produce with resourceRefCount = 1"]
    # a listing's filter is counted, not logged
    assert not permitted(_ctx(adapter, "alice", 3), Op.DESCRIBE, RT.TOPIC, "secret", log_denied=False)
    assert len(lines) == 1
    assert permitted(_ctx(adapter, "admin"), Op.ALTER, RT.CLUSTER, "kafka-cluster")  # super user: counted allowed
    assert (adapter.counts.allowed, adapter.counts.denied, adapter.counts.requests) == (3, 4, 7)
    # IPv6 peers are named as Java prints them; the API is Kafka's name for it
    assert not permitted(_ctx(adapter, "bob", 22, "::1"), Op.WRITE, RT.TRANSACTIONAL_ID, "tx")
    assert lines[-1] == ("Principal = User:bob is Denied Operation = Write from host = 0:0:0:0:0:0:0:1 on resource "
                         "= TransactionalId:LITERAL:tx for request = InitProducerId with resourceRefCount = 1")
    # authorizeByResourceType is counted; a refusal decided on checks not logged is logged by the caller
    assert not permitted_any(_ctx(adapter, "bob", 22), Op.WRITE, RT.TOPIC)
    assert adapter.counts.denied == 6
    audit_denied(_ctx(adapter, "bob", 22), Op.IDEMPOTENT_WRITE, RT.CLUSTER, "kafka-cluster")
    assert "Operation = IdempotentWrite" in lines[-1] and "Cluster:LITERAL:kafka-cluster" in lines[-1]
    assert adapter.acl_count == 1


def test_the_broker_logs_denials_on_kbroker_authorizer_at_info(caplog):
    adapter = AclAuthorizerAdapter(AclAuthorizer((), ()))
    with caplog.at_level(logging.INFO, logger="kbroker.authorizer"):
        assert not permitted(_ctx(adapter, "alice", 1), Op.READ, RT.TOPIC, "orders")
        assert not permitted(_ctx(adapter, "alice", 1), Op.READ, RT.TOPIC, "orders")
    records = [r for r in caplog.records if r.name == "kbroker.authorizer"]
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.INFO, (
        "Principal = User:alice is Denied Operation = Read from host = 127.0.0.1 on resource = Topic:LITERAL:orders "
        "for request = Fetch with resourceRefCount = 1"))]


def test_decision_counts():
    counts = DecisionCounts()
    counts.allowed += 2
    counts.denied += 1
    assert counts.requests == 3
