"""What the console asks the brokers about access (blocking, run in worker threads like
backend.py): the ACLs, through `kbroker.admin.acls.describe_acls` (DescribeAcls), and KIP-430's
authorized operations of the cluster (DescribeCluster) and of a group (DescribeGroups v3+ at its
coordinator), which decide the forms a page offers. `kbroker.admin.client` asks for neither (it
never sets the include_*_authorized_operations flags), so the two requests are made here on its
connections.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from kio.schema.errors import ErrorCode

from kbroker.admin.acls import describe_acls
from kbroker.admin.client import DESCRIBE_CLUSTER, DESCRIBE_GROUPS, METADATA, AdminClient, KafkaErrorResponse
from kbroker.console.refusals import AclRow, acl_rows, operations_of
from kbroker.security.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)

__all__ = ["AclListing", "ResourceRefused", "cluster_operations", "group_operations", "list_acls", "principal_acls",
           "require_topic_operation", "topic_operations"]

GROUP_OPERATIONS_MIN_VERSION = 3  # the first DescribeGroups version with authorized operations
TOPIC_OPERATIONS_MIN_VERSION = 8  # the first Metadata version with them


class ResourceRefused(KafkaErrorResponse):
    """A refusal known before sending the change (the broker's authorized operations lack what it
    needs): nothing was sent. `resource` names the refused resource."""

    def __init__(self, code: int, what: str, resource: str) -> None:
        super().__init__(code, what)
        self.resource = resource


class AclListing(NamedTuple):
    rows: list[AclRow]
    principal: str | None  # the filter; None: every principal
    no_authorizer: bool = False  # the brokers answered SECURITY_DISABLED


def cluster_operations(client: AdminClient) -> frozenset[AclOperation] | None:
    """What the principal may do to the cluster; None when the broker does not say."""
    conn = client.any_connection()
    if DESCRIBE_CLUSTER not in conn.versions:
        return None
    body = conn.call(DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True, "endpoint_type": 1})
    if body.error_code != ErrorCode.none:
        return None
    return operations_of(body.cluster_authorized_operations)


def group_operations(client: AdminClient, group: str) -> frozenset[AclOperation] | None:
    """What the principal may do to the group, as its coordinator says; None when it does not
    (an old broker, the group unknown there). A group the principal may not describe is the
    coordinator lookup's KafkaErrorResponse (GROUP_AUTHORIZATION_FAILED)."""
    coordinator = client.find_coordinator(group)
    conn = client.connection(coordinator.host, coordinator.port)
    if conn.version(DESCRIBE_GROUPS) < GROUP_OPERATIONS_MIN_VERSION:
        return None
    body = conn.call(DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": True})
    entry = next((g for g in body.groups if g.group_id == group), None)
    if entry is None or entry.error_code != ErrorCode.none:
        return None
    return operations_of(entry.authorized_operations)


def topic_operations(client: AdminClient, topics: Iterable[str]) -> dict[str, frozenset[AclOperation] | None]:
    """What the principal may do to each topic, from Metadata v8+ (a topic it may not describe:
    nothing); None where the broker does not say."""
    names = sorted(set(topics))
    conn = client.any_connection()
    version = conn.version(METADATA)
    if version < TOPIC_OPERATIONS_MIN_VERSION or not names:
        return dict.fromkeys(names)
    body = conn.call(METADATA, {"topics": [{"name": t} for t in names], "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": True}, version)
    out: dict[str, frozenset[AclOperation] | None] = dict.fromkeys(names)
    for t in body.topics:
        if t.error_code == ErrorCode.topic_authorization_failed:
            out[t.name] = frozenset()
        elif t.error_code == ErrorCode.none:
            out[t.name] = operations_of(t.topic_authorized_operations)
    return out


def require_topic_operation(client: AdminClient, topics: Iterable[str], operation: AclOperation, what: str) -> None:
    """ResourceRefused (TOPIC_AUTHORIZATION_FAILED) for the first topic whose authorized
    operations lack `operation`, so a change that would be refused for some of its topics is not
    sent at all (OffsetCommit would commit the others)."""
    for topic, operations in sorted(topic_operations(client, topics).items()):
        if operations is not None and operation not in operations:
            raise ResourceRefused(ErrorCode.topic_authorization_failed, f"{what}, topic {topic!r}", topic)


def principal_acls(client: AdminClient, principal: str | None,
                   resource_type: ResourceType = ResourceType.ANY) -> list[AclBinding]:
    """DescribeAcls of one principal's ACLs (None: everyone's), of one resource type or all;
    KafkaErrorResponse when the broker refuses (CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED)."""
    return describe_acls(client, AclBindingFilter(ResourcePatternFilter(resource_type, None, PatternType.ANY),
                                                  AccessControlEntryFilter(principal)))


def list_acls(client: AdminClient, principal: str | None) -> AclListing:
    """The Access page: the ACLs of `principal` (None: all); brokers without an authorizer are a
    listing that says so, a refusal stays the KafkaErrorResponse it is."""
    try:
        return AclListing(acl_rows(principal_acls(client, principal)), principal)
    except KafkaErrorResponse as exc:
        if exc.code == ErrorCode.security_disabled:
            return AclListing([], principal, no_authorizer=True)
        raise
