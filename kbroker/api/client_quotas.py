"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0–1, with the semantics and the words of
Kafka's ZooKeeper mode (ZkAdminManager.describeClientQuotas / alterClientQuotas): any broker
serves them, through the metadata store (`kbroker-client-quotas.json` on the single node,
`/config/users|clients/...` znodes with change notifications in a cluster), and every broker applies
a change to its quota managers when its store hears of it.

Entities are a `user`, a `client-id`, or both; a null name is the default entity. Describe's filter
components match a name exactly (EXACT, 0), the default (DEFAULT, 1) or any name (SPECIFIED, 2);
`strict` leaves out entities with a part no component names. Its failures are top-level errors
with no entries: a duplicate or empty entity type INVALID_REQUEST, another type UNSUPPORTED_VERSION.
Alter answers per entity: an empty entity, an unknown type, an empty name or an unknown key
INVALID_REQUEST, a fractional byte rate INVALID_REQUEST (as Kafka's LONG keys), and — Kafka's KRaft
rule, which kbroker keeps — a value not above zero INVALID_REQUEST. Removing a key that is not set
is no error. `validate_only` checks everything and writes nothing. Both need the CLUSTER resource's
DESCRIBE_CONFIGS / ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED otherwise).

Not served: `ip` entities (connection_creation_rate; answered INVALID_REQUEST) and a
client.quota.callback.class.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from kbroker.api.authorization import CLUSTER_NAME, AclOperation, ResourceType, permitted
from kbroker.api.context import RequestContext
from kbroker.errors import ErrorCode, InvalidRequestError, KafkaError, UnsupportedVersionError, error_code_of
from kbroker.quota.entities import (
    CLIENT_ID,
    DEFAULT,
    IP,
    LONG_KEYS,
    QUOTA_KEYS,
    USER,
    QuotaEntity,
    entity_path,
    parse_entity_path,
)
from kbroker.zookeeper.znodes import desanitize, sanitize

logger = logging.getLogger(__name__)

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_EPSILON = 1e-6
IP_NOT_SERVED = "IP quotas (connection_creation_rate) are not supported by kbroker"


async def _resolved(value: Any) -> Any:
    """The stores' reads and writes: plain values on the single node, awaitables in a cluster."""
    return await value if inspect.isawaitable(value) else value


_UNSET = object()


class _Component:
    """A filter component: `match` a name, None for the default entity, _UNSET for any name."""

    __slots__ = ("entity_type", "match")

    def __init__(self, entity_type: str, match: Any) -> None:
        self.entity_type = entity_type
        self.match = match

    def matches(self, name: Any) -> bool:
        """`name`: the entity's name for this type, None for the default, _UNSET when it has no such part."""
        if self.match is _UNSET:
            return name is not _UNSET
        return name is not _UNSET and name == self.match


def _components(request) -> dict[str, _Component]:
    found: dict[str, _Component] = {}
    for c in request.components:
        if c.match_type == MATCH_EXACT:
            if c.match is None:  # Kafka: ClientQuotaFilterComponent.ofEntity's requireNonNull
                raise KafkaError("EXACT match needs a name")
            match = c.match
        elif c.match_type == MATCH_DEFAULT:
            match = None
        elif c.match_type == MATCH_SPECIFIED:
            match = _UNSET
        else:
            raise KafkaError(f"Unexpected match type: {c.match_type}")  # Kafka's IllegalArgumentException
        kind = c.entity_type
        if kind in (USER, CLIENT_ID, IP):
            if kind in found:
                words = {USER: "user", CLIENT_ID: "client", IP: "ip"}[kind]
                raise InvalidRequestError(f"Duplicate {words} filter component entity type")
            found[kind] = _Component(kind, match)
        elif kind == "":
            raise InvalidRequestError("Unexpected empty filter component entity type")
        else:
            raise UnsupportedVersionError(f"Custom entity type '{kind}' not supported")
    if IP in found and (USER in found or CLIENT_ID in found):
        raise InvalidRequestError("Invalid entity filter component combination, IP filter component should not "
                                  "be used with user or clientId filter component.")
    return found


def _name(part: str | None) -> Any:
    if part is None:
        return _UNSET
    return None if part == DEFAULT else desanitize(part)


def _entity_data(entity: QuotaEntity) -> list[dict]:
    out = []
    if entity.user is not None:
        out.append({"entity_type": USER, "entity_name": _name(entity.user)})
    if entity.client_id is not None:
        out.append({"entity_type": CLIENT_ID, "entity_name": _name(entity.client_id)})
    return out


def describe_entries(stored: dict[str, dict[str, str]], components: dict[str, _Component],
                     strict: bool) -> list[dict]:
    """The entries a filter selects (ZkAdminManager.handleDescribeClientQuotas), sorted by entity."""
    if IP in components:
        return []  # no IP quotas are kept
    user_c, client_c = components.get(USER), components.get(CLIENT_ID)

    def matches(component: _Component | None, name: Any) -> bool:
        if component is not None:
            return component.matches(name)
        return name is _UNSET or not strict

    entries = []
    for path in sorted(stored):
        entity = parse_entity_path(path)
        if entity is None:
            continue
        values = {}
        for key, value in stored[path].items():
            if key in QUOTA_KEYS:
                try:
                    values[key] = float(value)
                except ValueError:  # Kafka's "Unexpected client quota configuration value"
                    raise KafkaError(f"Unexpected client quota configuration value: {key} -> {value}") from None
        if values and matches(user_c, _name(entity.user)) and matches(client_c, _name(entity.client_id)):
            entries.append({"entity": _entity_data(entity),
                            "values": [{"key": k, "value": values[k]} for k in sorted(values)]})
    return entries


async def describe_client_quotas(ctx: RequestContext, request) -> dict:
    if not permitted(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "error_message": None, "entries": None}
    try:
        components = _components(request)
        stored = await _resolved(ctx.broker.metadata.read_client_quotas())
        entries = describe_entries(stored, components, request.strict)
    except Exception as exc:  # noqa: BLE001 - Kafka answers a failed describe with a top-level error
        if not isinstance(exc, KafkaError):
            logger.exception("describing client quotas failed")
        return {"throttle_time": 0, "error_code": error_code_of(exc), "error_message": str(exc) or None,
                "entries": None}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "entries": entries}


def _key(pairs) -> tuple:
    """An entity's key in the answer: its (type, name) pairs in a fixed order (a name may be None)."""
    return tuple(sorted(pairs, key=lambda kv: (kv[0], kv[1] is not None, kv[1] or "")))


def _entity(entry) -> tuple[QuotaEntity, tuple]:
    """A request entry's entity (ZkAdminManager.parseAndSanitizeQuotaEntity) and its key in the
    answer: the entity as given (types and names; a repeated type counts once, the last name wins)."""
    given: dict[str, str | None] = {}
    for e in entry.entity:
        given[e.entity_type] = e.entity_name
    key = _key(given.items())
    if not given:
        raise InvalidRequestError("Invalid empty client quota entity")
    for kind, name in given.items():
        if kind not in (USER, CLIENT_ID, IP):
            raise InvalidRequestError(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise InvalidRequestError(f"Empty {kind} not supported")
    if IP in given:
        if USER in given or CLIENT_ID in given:
            raise InvalidRequestError("Invalid quota entity combination, IP entity should not be used with "
                                      "user/client ID entity.")
        raise InvalidRequestError(IP_NOT_SERVED)
    part = {kind: (DEFAULT if name is None else sanitize(name)) for kind, name in given.items()}
    return QuotaEntity(part.get(USER), part.get(CLIENT_ID)), key


def _changes(entry) -> dict[str, str | None]:
    """The ops as stored values (None: removed), Kafka's rules: a removal of any key is accepted, a
    value needs a quota key, a byte rate an integral value (within 1e-6)."""
    changes: dict[str, str | None] = {}
    for op in entry.ops:
        if op.remove:
            changes[op.key] = None
            continue
        if op.key not in QUOTA_KEYS:
            raise InvalidRequestError(f"Invalid configuration key {op.key}")
        value = float(op.value)
        if not value > 0.0:  # Kafka's KRaft rule (ZooKeeper mode stored any number)
            raise InvalidRequestError(f"Quota {op.key} must be greater than 0")
        if op.key in LONG_KEYS:
            integral = int(value + _EPSILON)
            if abs(integral - value) > _EPSILON:
                raise InvalidRequestError(f"Configuration {op.key} must be a LONG value")
            changes[op.key] = str(integral)
        else:
            changes[op.key] = repr(value)
    return {k: v for k, v in changes.items() if v is not None or k in QUOTA_KEYS}  # SCRAM entries never removed


async def alter_client_quotas(ctx: RequestContext, request) -> dict:
    results: dict[tuple, dict] = {}  # one result per entity, in request order
    entities = []
    for entry in request.entries:
        given = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        entities.append((entry, given))
    if not permitted(ctx, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        for entry, given in entities:
            results[_key((g["entity_type"], g["entity_name"]) for g in given)] = {
                "error_code": ErrorCode.cluster_authorization_failed, "error_message": None, "entity": given}
        return {"throttle_time": 0, "entries": list(results.values())}
    store = ctx.broker.metadata
    for entry, given in entities:
        key = _key((g["entity_type"], g["entity_name"]) for g in given)
        try:
            entity, key = _entity(entry)
            changes = _changes(entry)
            if not request.validate_only and changes:
                await _resolved(store.alter_client_quotas(entity_path(entity), changes))
                logger.info("client quotas of %s altered: %s", entity,
                            ", ".join(f"{k}={v}" if v is not None else f"{k} removed" for k, v in changes.items()))
            result = {"error_code": ErrorCode.none, "error_message": None}
        except Exception as exc:  # noqa: BLE001 - one entity's failure is its result, not the request's
            if not isinstance(exc, KafkaError):
                logger.exception("altering client quotas failed")
            result = {"error_code": error_code_of(exc), "error_message": str(exc) or None}
        results[key] = {**result, "entity": given}
    return {"throttle_time": 0, "entries": list(results.values())}
