"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v0-v3, with the semantics and error codes
of Kafka's AclApis over its AclAuthorizer (ZooKeeper mode). The ACLs live in the metadata store (a
file on the single node, Kafka's `/kafka-acl...` znodes in a cluster), so any broker answers.

- The principal needs ALTER (create, delete) or DESCRIBE (describe) on the CLUSTER: else every
  result is CLUSTER_AUTHORIZATION_FAILED (describe: the top-level error).
- Without an authorizer (`authorizer.class.name` unset) the answer is SECURITY_DISABLED, with
  Kafka's words ("No Authorizer is configured." / "... on the broker").
- CreateAcls refuses a binding with INVALID_REQUEST and Kafka's words (acl.creation_error: an
  UNKNOWN or ANY type, a MATCH or ANY pattern type, a CLUSTER name other than kafka-cluster, an
  empty name, a principal that is not `Type:name`, a name that cannot be a znode); the others
  are created. DeleteAcls refuses a filter with an UNKNOWN element (INVALID_REQUEST, per filter);
  DescribeAcls a filter with one (INVALID_REQUEST, top level). Kafka's ZooKeeper mode closes the
  connection or answers UNKNOWN_SERVER_ERROR for some of these; KRaft's words and codes are used.
- More than 10,000 creations or filters in one request: POLICY_VIOLATION for each (KRaft's bound
  on one ACL operation, "Unable to perform excessively large batch operation.").
- DeleteAcls reports each removed binding under the first filter that matches it.

Version 0 has no pattern type: its bindings and filters are LITERAL (the `*` wildcard included),
as Kafka 3.9 reads them; its bodies come from Kafka 3.9's schemas (wire/interbroker.OLD_VERSIONS),
kio carrying v1-v3 only, as Kafka 4.0 serves them.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from kbroker.api.authorization import ALLOW_ALL, permitted, request_principal
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.security.acl import (
    BATCH_TOO_LARGE,
    CLUSTER_NAME,
    MAX_BATCH,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    creation_error,
    entry_order,
    filter_error,
    log_text,
    pattern_order,
)

logger = logging.getLogger(__name__)

NO_AUTHORIZER = "No Authorizer is configured."  # CreateAcls and DeleteAcls (SecurityDisabledException)
NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"  # DescribeAcls


async def _resolved(value: Any) -> Any:
    """The store's writes: plain values on the single node, awaitables in a cluster."""
    return await value if inspect.isawaitable(value) else value


def _acls_served(ctx: RequestContext) -> bool:
    authorizer = getattr(ctx.broker, "authorizer", None)
    return authorizer is not None and authorizer is not ALLOW_ALL


def _cluster_refusal(ctx: RequestContext, operation: AclOperation, api: str) -> str | None:
    """None when the requester holds `operation` on the cluster, else the refusal's message."""
    if permitted(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return f"{api} request from {request_principal(ctx)} is not authorized ({operation.name} on the cluster)."


def _failure(exc: Exception, what: str) -> tuple[ErrorCode, str | None]:
    code = error_code_of(exc)
    if not isinstance(exc, KafkaError):
        logger.warning("%s failed: %s", what, exc)
        return code, None  # Kafka sends no message with UNKNOWN_SERVER_ERROR
    return code, str(exc) or None


def binding_of(creation: Any) -> AclBinding:
    """CreateAclsRequest.aclBinding (codes Kafka does not know become UNKNOWN; v0 has no pattern
    type: LITERAL)."""
    return AclBinding(
        ResourcePattern(ResourceType.from_code(creation.resource_type), creation.resource_name,
                        PatternType.from_code(getattr(creation, "resource_pattern_type", PatternType.LITERAL))),
        AccessControlEntry(creation.principal, creation.host, AclOperation.from_code(creation.operation),
                           AclPermissionType.from_code(creation.permission_type)))


def filter_of(request: Any) -> AclBindingFilter:
    """A DescribeAcls request's or a DeleteAcls filter's AclBindingFilter (v0 has no pattern type:
    LITERAL, as Kafka reads it, the `*` wildcard included)."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(request.resource_type_filter), request.resource_name_filter,
                              PatternType.from_code(getattr(request, "pattern_type_filter", PatternType.LITERAL))),
        AccessControlEntryFilter(request.principal_filter, request.host_filter,
                                 AclOperation.from_code(request.operation),
                                 AclPermissionType.from_code(request.permission_type)))


def _binding_fields(b: AclBinding) -> dict:
    return {"resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
            "pattern_type": int(b.pattern.pattern_type), "principal": b.entry.principal, "host": b.entry.host,
            "operation": int(b.entry.operation), "permission_type": int(b.entry.permission_type)}


# -- CreateAcls ---------------------------------------------------------------------------------------

async def create_acls(ctx: RequestContext, request) -> dict:
    creations = list(request.creations)

    def every(code: ErrorCode, message: str | None) -> dict:
        return {"throttle_time": 0, "results": [{"error_code": code, "error_message": message}] * len(creations)}

    refusal = _cluster_refusal(ctx, AclOperation.ALTER, "CreateAcls")
    if refusal is not None:
        return every(ErrorCode.cluster_authorization_failed, refusal)
    if not _acls_served(ctx):
        return every(ErrorCode.security_disabled, NO_AUTHORIZER)
    if len(creations) > MAX_BATCH:
        return every(ErrorCode.policy_violation, BATCH_TOO_LARGE)
    bindings = [binding_of(c) for c in creations]
    results: list[dict] = []
    valid: list[AclBinding] = []
    for b in bindings:
        problem = creation_error(b)
        results.append({"error_code": ErrorCode.invalid_request if problem else ErrorCode.none,
                        "error_message": problem})
        if problem is None:
            valid.append(b)
    if valid:
        try:
            outcomes = await _resolved(ctx.broker.metadata.create_acls(valid))
        except Exception as exc:  # noqa: BLE001 - the store failed: every binding it was given fails
            outcomes = [exc] * len(valid)
        it = iter(outcomes)
        for result, b in zip(results, bindings):
            if result["error_code"] != ErrorCode.none:
                continue
            outcome = next(it)
            if outcome is not None:
                result["error_code"], result["error_message"] = _failure(outcome, f"creating ACL {log_text(b)}")
        created = [log_text(b) for b, r in zip(bindings, results) if r["error_code"] == ErrorCode.none]
        if created:
            logger.info("ACLs created by %s: %s", request_principal(ctx), "; ".join(created))
    return {"throttle_time": 0, "results": results}


# -- DescribeAcls -------------------------------------------------------------------------------------

def _resources(bindings: list[AclBinding]) -> list[dict]:
    """DescribeAclsResponse.aclsResources: the bindings grouped by pattern (sorted)."""
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    return [{"resource_type": int(p.resource_type), "resource_name": p.name, "pattern_type": int(p.pattern_type),
             "acls": [{"principal": e.principal, "host": e.host, "operation": int(e.operation),
                       "permission_type": int(e.permission_type)} for e in sorted(entries, key=entry_order)]}
            for p, entries in sorted(by_pattern.items(), key=lambda kv: pattern_order(kv[0]))]


async def describe_acls(ctx: RequestContext, request) -> dict:
    def refused(code: ErrorCode, message: str) -> dict:
        return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}

    refusal = _cluster_refusal(ctx, AclOperation.DESCRIBE, "DescribeAcls")
    if refusal is not None:
        return refused(ErrorCode.cluster_authorization_failed, refusal)
    if not _acls_served(ctx):
        return refused(ErrorCode.security_disabled, NO_AUTHORIZER_ON_BROKER)
    acl_filter = filter_of(request)
    if acl_filter.is_unknown:
        return refused(ErrorCode.invalid_request, f"DescribeAclsRequest contains UNKNOWN elements: {acl_filter}")
    found = [b for b in ctx.broker.metadata.acls() if acl_filter.matches(b)]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "resources": _resources(found)}


# -- DeleteAcls ---------------------------------------------------------------------------------------

async def delete_acls(ctx: RequestContext, request) -> dict:
    raw = list(request.filters)

    def every(code: ErrorCode, message: str | None) -> dict:
        return {"throttle_time": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in raw]}

    refusal = _cluster_refusal(ctx, AclOperation.ALTER, "DeleteAcls")
    if refusal is not None:
        return every(ErrorCode.cluster_authorization_failed, refusal)
    if not _acls_served(ctx):
        return every(ErrorCode.security_disabled, NO_AUTHORIZER)
    if len(raw) > MAX_BATCH:
        return every(ErrorCode.policy_violation, BATCH_TOO_LARGE)
    filters = [filter_of(f) for f in raw]
    results = []
    valid: list[int] = []
    for i, f in enumerate(filters):
        problem = filter_error(f)
        results.append({"error_code": ErrorCode.invalid_request if problem else ErrorCode.none,
                        "error_message": problem, "matching_acls": []})
        if problem is None:
            valid.append(i)
    if valid:
        try:
            deleted = await _resolved(ctx.broker.metadata.delete_acls([filters[i] for i in valid]))
        except Exception as exc:  # noqa: BLE001 - the store failed: the filters it was given fail
            code, message = _failure(exc, "deleting ACLs")
            for i in valid:
                results[i].update(error_code=code, error_message=message)
            return {"throttle_time": 0, "filter_results": results}
        removed = []
        for i, bindings in zip(valid, deleted):
            results[i]["matching_acls"] = [{"error_code": ErrorCode.none, "error_message": None, **_binding_fields(b)}
                                           for b in bindings]
            removed += [log_text(b) for b in bindings]
        if removed:
            logger.info("ACLs deleted by %s: %s", request_principal(ctx), "; ".join(removed))
    return {"throttle_time": 0, "filter_results": results}
