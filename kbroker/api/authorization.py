"""Authorized operations (KIP-430): the `*_authorized_operations` bit sets of Metadata,
DescribeCluster and DescribeGroups, and the hook where an ACL authorizer plugs in.

Kafka's rule: with no authorizer configured every operation the resource type supports is allowed
(`AclEntry.supportedOperations`); the answer is `sum(1 << code)` over the allowed operations, and
-2**31 when the client did not ask. An authorizer narrows the supported set per principal and
resource; kbroker has none yet, so `ALLOW_ALL` answers.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kbroker.api.context import RequestContext

__all__ = ["AclOperation", "ResourceType", "Authorizer", "ALLOW_ALL", "NOT_REQUESTED", "authorized_operations"]

NOT_REQUESTED = -(2**31)  # Kafka's "authorized operations were not asked for"


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (the bit positions)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    """Kafka's ResourceType codes."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_Op = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                                   _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}),
    ResourceType.CLUSTER: frozenset({_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS,
                                     _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}


class Authorizer(Protocol):
    """Which of `operations` the requester may perform on the resource (Kafka's Authorizer.authorize)."""

    def authorize(self, ctx: "RequestContext", resource_type: ResourceType, name: str,
                  operations: frozenset[AclOperation]) -> frozenset[AclOperation]: ...


class _AllowAll:
    """No authorizer configured: everything is allowed, as a Kafka broker without `authorizer.class.name`."""

    def authorize(self, ctx, resource_type, name, operations):
        return operations


ALLOW_ALL: Authorizer = _AllowAll()


def to_bit_set(operations) -> int:
    """Kafka's Utils.to32BitField."""
    return sum(1 << int(op) for op in set(operations))


def authorized_operations(resource_type: ResourceType, name: str, ctx: "RequestContext",
                          authorizer: Authorizer | None = None) -> int:
    """The bit set of the operations on `name` the requester of `ctx` is allowed (by the broker's
    authorizer unless one is given)."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = authorizer or _authorizer(ctx)
    return to_bit_set(authorizer.authorize(ctx, resource_type, name, supported) & supported)


CLUSTER_NAME = "kafka-cluster"  # Kafka's one CLUSTER resource


def _authorizer(ctx: "RequestContext | None") -> Authorizer:
    return getattr(getattr(ctx, "broker", None), "authorizer", None) or ALLOW_ALL


def permitted(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """Whether the requester may perform `operation` on the resource (ALLOW_ALL: always)."""
    authorizer = _authorizer(ctx)
    if authorizer is ALLOW_ALL:
        return True
    return operation in authorizer.authorize(ctx, resource_type, name, frozenset({operation}))


def permitted_any(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType) -> bool:
    """Kafka's authorizeByResourceType: whether some resource of the type allows `operation`
    (InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic)."""
    authorizer = _authorizer(ctx)
    if authorizer is ALLOW_ALL:
        return True
    by_type = getattr(authorizer, "authorize_by_resource_type", None)
    return bool(by_type and by_type(ctx, operation, resource_type))
