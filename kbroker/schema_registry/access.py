"""Who may do what with the registry: Kafka's ACLs applied to the REST API through a documented
mapping (Kafka has no SUBJECT resource; Confluent's is an RBAC plug-in). Pure.

A subject is guarded by the ACLs of a topic: the subject less a `-key` or `-value` suffix
(Confluent's TopicNameStrategy: `orders-value` is topic `orders`), else the subject's own name
(RecordNameStrategy subjects like `com.acme.Order`, which prefixed topic ACLs can cover).

==========================================================  =====================================
request                                                     needs
==========================================================  =====================================
GET a subject's versions, a version, its schema, referencedby,  DESCRIBE on the subject's topic
POST /subjects/{s} (lookup), POST /compatibility/...        (READ, WRITE, ... imply it)
POST /subjects/{s}/versions (register)                      WRITE on the topic
DELETE /subjects/{s}[/versions/{v}]                         DELETE on the topic
GET /config/{s}, GET /mode/{s}                              DESCRIBE_CONFIGS on the topic
PUT|DELETE /config/{s}, PUT|DELETE /mode/{s}                ALTER_CONFIGS on the topic
PUT|DELETE /config, PUT|DELETE /mode (global)               ALTER_CONFIGS on the CLUSTER
GET /schemas/ids/{id}[/schema]                              DESCRIBE on the topic of a subject using the id
GET /subjects, /schemas, /schemas/ids/{id}/subjects|versions  only what the principal may DESCRIBE is listed
GET /, /schemas/types, /config, /mode (global)              nothing beyond authentication
==========================================================  =====================================

A refusal is HTTP 403 with Confluent's security plug-in code 40301 and a message naming the
principal, operation and subject.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CLUSTER", "FORBIDDEN", "TOPIC", "May", "Requirement", "required", "topic_of"]

TOPIC = "TOPIC"
CLUSTER = "CLUSTER"
CLUSTER_NAME = "kafka-cluster"
FORBIDDEN = 40301

#: (operation, resource type, resource name) -> allowed; operations are Kafka's ACL operation names
May = Callable[[str, str, str], bool]


@dataclass(frozen=True, slots=True)
class Requirement:
    operation: str
    resource_type: str
    name: str
    subject: str | None = None  # for the refusal's message


def topic_of(subject: str) -> str:
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def _on_subject(operation: str, subject: str) -> Requirement:
    return Requirement(operation, TOPIC, topic_of(subject), subject)


def required(method: str, seg: list[str]) -> Requirement | None:
    """What a request needs beyond authentication (None: nothing, or a listing filtered per item,
    or a schema id checked against its subjects)."""
    head = seg[0] if seg else ""
    n = len(seg)
    if head == "subjects" and n >= 2:
        subject = seg[1]
        if method == "DELETE":
            return _on_subject("DELETE", subject)
        if method == "POST" and n == 3:
            return _on_subject("WRITE", subject)
        return _on_subject("DESCRIBE", subject)
    if head == "compatibility" and n >= 3:
        return _on_subject("DESCRIBE", seg[2])
    if head in ("config", "mode"):
        if n == 2:
            return _on_subject("DESCRIBE_CONFIGS" if method == "GET" else "ALTER_CONFIGS", seg[1])
        if method != "GET":
            return Requirement("ALTER_CONFIGS", CLUSTER, CLUSTER_NAME)
    return None


def refusal(principal: str, req: Requirement) -> str:
    what = f"Subject: {req.subject}" if req.subject is not None else "the registry's global settings"
    return f"User {principal} is denied operation {req.operation} on {what}"
