"""What the console's principal may do, in words, from what the brokers answered (pure: no web
stack, no sockets).

- A **refusal** is a broker's authorization error (TOPIC_, GROUP_, CLUSTER_,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED) met while doing an `Action`; the action says which
  operation on which resource it needs per resource type, so the refusal names them:
  "User:alice may not CREATE topic payments".
- **Authorized operations** are KIP-430's bit sets (DescribeCluster, DescribeGroups); they decide
  whether a form is offered at all (`may_create_topics`, `may_reset_offsets`). Hiding a form is a
  courtesy: the broker judges every request, and its refusal is what the console shows.
- The Access page's **rows**: DescribeAcls bindings in Kafka's enum names.
"""

from __future__ import annotations

from typing import Iterable, Mapping, NamedTuple

from kio.schema.errors import ErrorCode

from kbroker.security.acl import (
    CLUSTER_NAME,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourceType,
    entry_order,
    pattern_order,
)

__all__ = ["AUTHORIZATION_ERRORS", "Action", "AclRow", "Refusal", "acl_rows", "may_create_topics",
           "may_reset_offsets", "operations_of", "refusal_of", "create_topic", "reset_offsets",
           "plan_reset", "describe_topic", "browse_topic", "describe_group", "describe_acls", "read_cluster"]

AUTHORIZATION_ERRORS: dict[int, ResourceType] = {
    ErrorCode.topic_authorization_failed: ResourceType.TOPIC,
    ErrorCode.group_authorization_failed: ResourceType.GROUP,
    ErrorCode.cluster_authorization_failed: ResourceType.CLUSTER,
    ErrorCode.transactional_id_authorization_failed: ResourceType.TRANSACTIONAL_ID,
}
_KIND = {ResourceType.TOPIC: "topic", ResourceType.GROUP: "group", ResourceType.CLUSTER: "cluster",
         ResourceType.TRANSACTIONAL_ID: "transactional id"}
NOT_REQUESTED = -(2**31)  # KIP-430's "authorized operations were not asked for (or are unknown)"


class Action(NamedTuple):
    """Something the console does for its principal: in words, and per resource type the
    operation it needs and on which resource (a refusal of that type names them)."""

    what: str
    needs: Mapping[ResourceType, tuple[AclOperation, str]]
    explain: str | None = None  # a sentence for the page, e.g. what the refusal means here


class Refusal(NamedTuple):
    principal: str
    action: str
    resource_type: ResourceType
    resource: str  # "" when the action did not name one of the type
    operation: AclOperation | None
    error: str  # Kafka's error name
    explain: str | None = None

    @property
    def target(self) -> str:
        kind = _KIND.get(self.resource_type, self.resource_type.name.lower())
        if self.resource_type == ResourceType.CLUSTER:
            return "the cluster"
        return f"{kind} {self.resource}" if self.resource else f"a {kind} this needs"

    @property
    def text(self) -> str:
        """"User:alice may not CREATE topic payments"."""
        if self.operation is None:
            return f"{self.principal} may not {self.action}: {self.error} for {self.target}"
        return f"{self.principal} may not {self.operation.name} {self.target}"


def refusal_of(code: int, principal: str, action: Action) -> Refusal | None:
    """The refusal an authorization error code means for `action`; None for any other code."""
    resource_type = AUTHORIZATION_ERRORS.get(int(code))
    if resource_type is None:
        return None
    operation, resource = action.needs.get(resource_type, (None, ""))
    if resource_type == ResourceType.CLUSTER:
        resource = CLUSTER_NAME
    return Refusal(principal, action.what, resource_type, resource, operation,
                   ErrorCode(int(code)).name.upper(), action.explain)


# -- the console's actions ---------------------------------------------------------------------------

def create_topic(name: str) -> Action:
    return Action(f"create topic {name}", {ResourceType.TOPIC: (AclOperation.CREATE, name),
                                           ResourceType.CLUSTER: (AclOperation.CREATE, CLUSTER_NAME)})


def reset_offsets(group: str, topics: Iterable[str]) -> Action:
    """OffsetCommit: READ on the group and on each topic (FindCoordinator's DESCRIBE is implied)."""
    names = ", ".join(sorted(set(topics)))
    return Action(f"reset the offsets of group {group}", {ResourceType.GROUP: (AclOperation.READ, group),
                                                          ResourceType.TOPIC: (AclOperation.READ, names)})


def plan_reset(group: str, topic: str | None) -> Action:
    """The preview: DescribeGroups and OffsetFetch (DESCRIBE on the group), ListOffsets (DESCRIBE
    on the topics)."""
    return Action(f"plan an offset reset of group {group}",
                  {ResourceType.GROUP: (AclOperation.DESCRIBE, group),
                   ResourceType.TOPIC: (AclOperation.DESCRIBE, topic or "")})


def describe_topic(name: str) -> Action:
    return Action(f"describe topic {name}", {ResourceType.TOPIC: (AclOperation.DESCRIBE, name)})


def browse_topic(name: str) -> Action:
    return Action(f"read topic {name}", {ResourceType.TOPIC: (AclOperation.READ, name)})


def describe_group(group: str) -> Action:
    return Action(f"describe group {group}", {ResourceType.GROUP: (AclOperation.DESCRIBE, group),
                                              ResourceType.TOPIC: (AclOperation.DESCRIBE, "")})


def describe_acls() -> Action:
    return Action("describe ACLs", {ResourceType.CLUSTER: (AclOperation.DESCRIBE, CLUSTER_NAME)},
                  "this principal may not describe ACLs (DESCRIBE on the cluster)")


def read_cluster(what: str) -> Action:
    """A page that lists the cluster's topics or groups (the brokers leave out what the principal
    may not describe, so only the cluster-wide requests can be refused)."""
    return Action(what, {ResourceType.CLUSTER: (AclOperation.DESCRIBE, CLUSTER_NAME)})


# -- authorized operations -------------------------------------------------------------------------

def operations_of(bits: int | None) -> frozenset[AclOperation] | None:
    """A KIP-430 bit set as operations; None when the broker did not say (not asked, or an old
    version: -2**31)."""
    if bits is None or int(bits) == NOT_REQUESTED or int(bits) < 0:
        return None
    return frozenset(op for op in AclOperation if op >= AclOperation.ALL and int(bits) & (1 << int(op)))


def may_create_topics(cluster_operations: frozenset[AclOperation] | None, principal: str | None,
                      topic_acls: Iterable[AclBinding] | None) -> bool:
    """Whether to offer the create-topic form. Hidden only when the brokers said the cluster
    does not allow CREATE *and* the principal's topic ACLs (DescribeAcls, answered) hold no ALLOW
    of CREATE or ALL for it or `User:*`, literal or prefixed. Whatever is not known shows the form."""
    if cluster_operations is None or AclOperation.CREATE in cluster_operations:
        return True
    if principal is None or topic_acls is None:
        return True
    return any(b.pattern.resource_type == ResourceType.TOPIC
               and b.entry.permission_type == AclPermissionType.ALLOW
               and b.entry.operation in (AclOperation.CREATE, AclOperation.ALL)
               and b.entry.principal in (principal, WILDCARD_PRINCIPAL) for b in topic_acls)


def may_reset_offsets(group_operations: frozenset[AclOperation] | None) -> bool:
    """Whether to offer a group's reset form: its authorized operations include READ (unknown: yes)."""
    return group_operations is None or AclOperation.READ in group_operations


# -- the Access page --------------------------------------------------------------------------------

class AclRow(NamedTuple):
    resource_type: str
    pattern_type: str
    resource: str
    principal: str
    host: str
    operation: str
    permission: str


def acl_rows(bindings: Iterable[AclBinding]) -> list[AclRow]:
    """One row per ACL in Kafka's enum names, by resource pattern then entry, duplicates dropped."""
    unique = sorted(set(bindings), key=lambda b: (pattern_order(b.pattern), entry_order(b.entry)))
    return [AclRow(b.pattern.resource_type.name, b.pattern.pattern_type.name, b.pattern.name, b.entry.principal,
                   b.entry.host, b.entry.operation.name, b.entry.permission_type.name) for b in unique]
