"""Authorized operations (KIP-430): the `*_authorized_operations` bit sets of Metadata,
DescribeCluster and DescribeGroups, and the hook where an ACL authorizer plugs in.

Kafka's rule: with no authorizer configured every operation the resource type supports is allowed
(`AclEntry.supportedOperations`); the answer is `sum(1 << code)` over the allowed operations, and
-2**31 when the client did not ask. An authorizer narrows the supported set per principal and
resource: `ALLOW_ALL` without `authorizer.class.name`, else `AclAuthorizerAdapter` over
security/authorizer.py's AclAuthorizer (Kafka's rules), fed the metadata store's ACLs.

Handlers ask `permitted(ctx, operation, resource_type, name)` (and `permitted_any(ctx, operation,
resource_type)`, Kafka's authorizeByResourceType); with ALLOW_ALL both answer True at once.
The codes and SUPPORTED_OPERATIONS live in security/acl.py and are re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import logging

from kbroker.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from kbroker.security.audit import DecisionCounts, DenialAudit
from kbroker.security.authorizer import AUTHORIZER_CLASS_NAMES, AclAuthorizer, parse_super_users
from kbroker.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from kbroker.api.context import RequestContext

__all__ = ["AclOperation", "ResourceType", "SUPPORTED_OPERATIONS", "CLUSTER_NAME", "Authorizer", "ALLOW_ALL",
           "NOT_REQUESTED", "AclAuthorizerAdapter", "ACL_AUTHORIZER_CLASSES", "authorizer_from_config",
           "authorized_operations", "permitted", "permitted_any", "request_principal", "request_host",
           "request_name", "audit_denied", "AUDIT_LOGGER"]

NOT_REQUESTED = -(2**31)  # Kafka's "authorized operations were not asked for"

# denials, rate-limited (security/audit.py): Kafka's kafka.authorizer.logger lines at INFO
AUDIT_LOGGER = logging.getLogger("kbroker.authorizer")


class Authorizer(Protocol):
    """Which of `operations` the requester may perform on the resource (Kafka's Authorizer.authorize)."""

    def authorize(self, ctx: "RequestContext", resource_type: ResourceType, name: str,
                  operations: frozenset[AclOperation]) -> frozenset[AclOperation]: ...


class _AllowAll:
    """No authorizer configured: everything is allowed, as a Kafka broker without `authorizer.class.name`."""

    def authorize(self, ctx, resource_type, name, operations):
        return operations


ALLOW_ALL: Authorizer = _AllowAll()


# -- the ACL authorizer -------------------------------------------------------------------------------

ACL_AUTHORIZER_CLASSES = AUTHORIZER_CLASS_NAMES  # authorizer.class.name values that turn ACL checks on


def request_principal(ctx: "RequestContext"):
    """The requester's principal: the connection's (User:ANONYMOUS before or without SASL and
    without a client certificate), ANONYMOUS for in-process callers (no session)."""
    session = getattr(ctx, "session", None)
    return ANONYMOUS if session is None else session.principal


def request_host(ctx: "RequestContext") -> str:
    """The client's address as Kafka compares it with an ACL's host: Java's
    InetAddress.getHostAddress() text (IPv6 written out in full without zero compression,
    `0:0:0:0:0:0:0:1`; an IPv4-mapped address as IPv4)."""
    host = getattr(ctx, "client_host", "") or ""
    return _java_host_address(host) if ":" in host else host


def _java_host_address(host: str) -> str:
    import ipaddress

    try:
        address = ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return ":".join(f"{int(group, 16):x}" for group in address.exploded.split(":"))


class AclAuthorizerAdapter:
    """The `Authorizer` protocol over `security.authorizer.AclAuthorizer` (Kafka's AclAuthorizer
    rules): the principal and host come from the request context. `update` takes the store's ACLs
    (the broker's acl listener calls it after every change, local or notified).

    Every check a request makes (`permits`, `authorize_by_resource_type`) is counted in `counts`
    (the metrics listener's authorizer counters); a denial is also handed to `audit`, which logs it
    on `kbroker.authorizer` at most once a minute per principal, resource and operation, unless the
    check only filters what a listing shows (`log_denied=False`, Kafka's logIfDenied). The KIP-430
    bit sets (`authorize`) are neither counted nor logged."""

    def __init__(self, acl_authorizer: AclAuthorizer, audit: DenialAudit | None = None) -> None:
        self.acl_authorizer = acl_authorizer
        self.counts = DecisionCounts()
        self.audit = audit if audit is not None else DenialAudit(lambda line: AUDIT_LOGGER.info("%s", line))

    @property
    def acl_count(self) -> int:
        return len(self.acl_authorizer.bindings)

    def update(self, bindings) -> None:
        self.acl_authorizer.update(bindings)

    def authorize(self, ctx: "RequestContext", resource_type: ResourceType, name: str,
                  operations: frozenset[AclOperation]) -> frozenset[AclOperation]:
        return self.acl_authorizer.allowed_operations(request_principal(ctx), request_host(ctx), resource_type,
                                                      name, operations)

    def permits(self, ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType, name: str,
                log_denied: bool = True) -> bool:
        """One operation: `permitted`'s fast path (the per-request check of every handler)."""
        session = ctx.session
        principal = "User:ANONYMOUS" if session is None else str(session.principal)
        host = ctx.client_host
        if ":" in host:
            host = _java_host_address(host)
        if self.acl_authorizer.authorize(principal, host, operation, resource_type, name):
            self.counts.allowed += 1
            return True
        self.counts.denied += 1
        if log_denied:
            self.audit.denied(principal, host, operation, resource_type, name, request_name(ctx))
        return False

    def authorize_by_resource_type(self, ctx: "RequestContext", operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        allowed = self.acl_authorizer.authorize_by_resource_type(request_principal(ctx), request_host(ctx), operation,
                                                                 resource_type)
        if allowed:
            self.counts.allowed += 1
        else:
            self.counts.denied += 1  # the caller's refusal names the resource it then checks (and logs)
        return allowed


def request_name(ctx: "RequestContext") -> str:
    """The request's API as Kafka names it in its audit log (`Produce`, `OffsetCommit`)."""
    header = getattr(ctx, "header", None)
    if header is None:
        return "-"
    from kbroker.api.dispatch import DISPATCH  # a denial's path only (dispatch imports this module)

    spec = DISPATCH.get(header.api_key)
    return spec.name if spec is not None else str(header.api_key)


def authorizer_from_config(config) -> Authorizer:
    """The broker's authorizer from `authorizer.class.name` ("" or unset: ALLOW_ALL), `super.users`
    and `allow.everyone.if.no.acl.found`. InvalidConfigError (a one-line start-up failure) for a
    class kbroker does not have or a super user that is not `Type:name`."""
    from kbroker.errors import InvalidConfigError

    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return ALLOW_ALL
    if name not in ACL_AUTHORIZER_CLASSES:
        raise InvalidConfigError(f"authorizer.class.name={name}: kbroker has no such authorizer; set one of "
                                 f"{', '.join(ACL_AUTHORIZER_CLASSES)}, or leave it empty (no ACL checks)")
    try:
        super_users = parse_super_users(config.get("super.users"))
    except ValueError as exc:
        raise InvalidConfigError(f"super.users: {exc}") from None
    return AclAuthorizerAdapter(AclAuthorizer((), super_users, bool(config.get("allow.everyone.if.no.acl.found"))))


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


def _authorizer(ctx: "RequestContext | None") -> Authorizer:
    return getattr(getattr(ctx, "broker", None), "authorizer", None) or ALLOW_ALL


def permitted(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType, name: str,
              log_denied: bool = True) -> bool:
    """Whether the requester may perform `operation` on the resource (ALLOW_ALL: always).
    `log_denied=False` where a denial only leaves the resource out of a listing (Metadata of all
    topics, ListGroups, OffsetFetch of all offsets, ListTransactions): not audited, as in Kafka."""
    authorizer = _authorizer(ctx)
    if authorizer is ALLOW_ALL:
        return True
    permits = getattr(authorizer, "permits", None)
    if permits is not None:
        return permits(ctx, operation, resource_type, name, log_denied)
    return operation in authorizer.authorize(ctx, resource_type, name, frozenset({operation}))


def audit_denied(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    """Log a refusal decided from checks made with `log_denied=False` (InitProducerId without
    IDEMPOTENT_WRITE on the cluster nor WRITE on any topic), rate-limited like every denial."""
    audit = getattr(_authorizer(ctx), "audit", None)
    if audit is not None:
        audit.denied(str(request_principal(ctx)), request_host(ctx), operation, resource_type, name, request_name(ctx))


def permitted_any(ctx: "RequestContext", operation: AclOperation, resource_type: ResourceType) -> bool:
    """Kafka's authorizeByResourceType: whether some resource of the type allows `operation`
    (InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic)."""
    authorizer = _authorizer(ctx)
    if authorizer is ALLOW_ALL:
        return True
    by_type = getattr(authorizer, "authorize_by_resource_type", None)
    return bool(by_type and by_type(ctx, operation, resource_type))
