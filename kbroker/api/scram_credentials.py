"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), with the semantics and the
words of Kafka's ZooKeeper mode (ZkAdminManager): any broker serves them, reading and writing the
credentials through the metadata store (a file on the single node, `/config/users/<user>` in a
cluster). A client sends the salted password, never the password; the broker keeps the salt, the
stored and server keys and the iteration count (kbroker/security/credentials.py).

Describe: null or empty `users` lists every user with a credential, sorted; a named user without
one is RESOURCE_NOT_FOUND, an empty name too, a name given twice DUPLICATE_RESOURCE (answered once).
Alter: one result per user. An empty name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL; the same
(user, mechanism) twice in the request (deletions and upsertions together) DUPLICATE_RESOURCE;
deleting a credential the user does not have RESOURCE_NOT_FOUND. A user with any of these has none
of its changes applied; the others have their deletions, then their upsertions, applied.
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from typing import Any

from kbroker.api.access import Op, cluster_allowed
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, KafkaError, error_code_of
from kbroker.security.credentials import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
    mechanism_by_type,
)

logger = logging.getLogger(__name__)

# Kafka's messages (ZkAdminManager)
USERNAME_EMPTY = "Username must not be empty"
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist"
DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request"
ERROR_DESCRIBING = "Error processing describe user SCRAM credential configs request"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"


async def _resolved(value: Any) -> Any:
    """The stores' reads and writes: plain values on the single node, awaitables in a cluster."""
    return await value if inspect.isawaitable(value) else value


def _credential_infos(creds: dict[str, ScramCredential]) -> list[dict]:
    return [{"mechanism": MECHANISMS[m][1], "iterations": creds[m].iterations} for m in MECHANISMS if m in creds]


def _result(user: str, code: ErrorCode = ErrorCode.none, message: str | None = None,
            creds: dict[str, ScramCredential] | None = None) -> dict:
    return {"user": user, "error_code": code, "error_message": message,
            "credential_infos": _credential_infos(creds or {})}


async def describe_user_scram_credentials(ctx: RequestContext, request) -> dict:
    store = ctx.broker.metadata
    names = [u.name for u in request.users or ()]
    response: dict = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": []}
    try:
        if not names:  # null or empty: every user that has a credential
            found = await _resolved(store.read_scram_users(None))
            response["results"] = [_result(user, creds=found[user]) for user in sorted(found)]
            return response
        counts = Counter(names)
        answers: dict[str, dict] = {}
        for user in counts:
            if user == "":
                answers[user] = _result(user, ErrorCode.resource_not_found, USERNAME_EMPTY)
            elif counts[user] > 1:
                answers[user] = _result(user, ErrorCode.duplicate_resource, f"{DESCRIBE_TWICE}: {user}")
        wanted = [u for u in counts if u not in answers]
        found = await _resolved(store.read_scram_users(wanted)) if wanted else {}
        for user in wanted:
            answers[user] = _result(user, creds=found[user]) if user in found else \
                _result(user, ErrorCode.resource_not_found, f"{DESCRIBE_MISSING}: {user}")
        response["results"] = [answers[user] for user in counts]  # each user once, in request order
    except Exception as exc:  # noqa: BLE001 - Kafka answers a failed read with a top-level error
        code = error_code_of(exc)
        if not isinstance(exc, KafkaError):
            logger.exception(ERROR_DESCRIBING)
        response.update(error_code=code, error_message=str(exc) or ERROR_DESCRIBING, results=[])
    return response


def _illegal(name: str, mechanism: int, iterations: int | None) -> tuple[ErrorCode, str] | None:
    """Why an upsertion (with iterations) or a deletion (None) is refused before anything is read."""
    if name == "":
        return ErrorCode.unacceptable_credential, USERNAME_EMPTY
    if mechanism_by_type(mechanism) is None:
        return ErrorCode.unsupported_sasl_mechanism, UNKNOWN_MECHANISM
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, TOO_FEW_ITERATIONS
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, TOO_MANY_ITERATIONS
    return None


async def alter_user_scram_credentials(ctx: RequestContext, request) -> dict:
    store = ctx.broker.metadata
    deletions, upsertions = list(request.deletions), list(request.upsertions)
    if not cluster_allowed(ctx, Op.ALTER):  # Kafka: ALTER on the cluster, else every user refused
        users = dict.fromkeys(a.name for a in [*deletions, *upsertions])
        return {"throttle_time": 0, "results": [{"user": u, "error_code": ErrorCode.cluster_authorization_failed,
                                                 "error_message": None} for u in users]}
    # users refused outright: deletions' reasons first, an upsertion's reason wins (Kafka's map order)
    illegal: dict[str, tuple[ErrorCode, str]] = {}
    for d in deletions:
        reason = _illegal(d.name, d.mechanism, None)
        if reason is not None:
            illegal[d.name] = reason
    for u in upsertions:
        reason = _illegal(u.name, u.mechanism, u.iterations)
        if reason is not None:
            illegal[u.name] = reason
    pairs = Counter((a.name, a.mechanism) for a in [*upsertions, *deletions] if a.name not in illegal)
    duplicated = list(dict.fromkeys(user for (user, _), n in pairs.items() if n > 1))
    results = [{"user": user, "error_code": code, "error_message": message}
               for user, (code, message) in illegal.items()]
    results += [{"user": user, "error_code": ErrorCode.duplicate_resource, "error_message": ALTERED_TWICE}
                for user in duplicated]
    valid = [user for user in dict.fromkeys(user for user, _ in pairs) if user not in duplicated]
    missing, failed, done = [], [], []
    for user in valid:
        try:
            upserts = {}
            for u in upsertions:
                if u.name == user:
                    mechanism = mechanism_by_type(u.mechanism)
                    upserts[mechanism] = credential_from_salted_password(mechanism, u.salted_password, u.salt,
                                                                         u.iterations)
            removed = [mechanism_by_type(d.mechanism) for d in deletions if d.name == user]
            await _resolved(store.alter_scram_credentials(user, upserts, removed))
        except Exception as exc:  # noqa: BLE001 - one user's failure is its result, not the request's
            code = error_code_of(exc)
            if code == ErrorCode.resource_not_found:
                missing.append({"user": user, "error_code": code, "error_message": str(exc)})
                continue
            if not isinstance(exc, KafkaError):
                logger.exception("altering the SCRAM credentials of user %r failed", user)
            failed.append({"user": user, "error_code": code, "error_message": str(exc) or None})
            continue
        logger.info("SCRAM credentials of user %r altered: %s", user,
                    ", ".join([f"{m} set" for m in upserts] + [f"{m} deleted" for m in removed]))
        done.append({"user": user, "error_code": ErrorCode.none, "error_message": None})
    return {"throttle_time": 0, "results": results + missing + failed + done}
