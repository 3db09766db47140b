"""Kafka's client quota entities, keys and precedence.

An entity is a user, a client id, or both, each a name or the default (`<default>`), as Kafka's
ZooKeeper layout has them: `/config/users/<user>`, `/config/clients/<client-id>`,
`/config/users/<user>/clients/<client-id>`. `QuotaEntity` holds the names as stored there
(sanitized, `Sanitizer.sanitize`: a sanitized name never reads `<default>`), so one value is the
key in memory, the znode path and the single node's file alike; `entity_path` and
`parse_entity_path` give the path of a config change notification (`users/<u>/clients/<c>`).

Which quota applies to a request is ClientQuotaManager's DefaultQuotaCallback: the most specific
entity that has the quota, in this order

    1. /config/users/<user>/clients/<client-id>     5. /config/users/<default>/clients/<default>
    2. /config/users/<user>/clients/<default>       6. /config/users/<default>
    3. /config/users/<user>                         7. /config/clients/<client-id>
    4. /config/users/<default>/clients/<client-id>  8. /config/clients/<default>

and the clients that share one measured rate are those the chosen entity names alike: a user quota
is one rate for all the user's client ids, a client-id quota one rate for all users of the client
id (`metric_tags`). With one level of quota in use, Kafka skips the walk (`QuotaTypes`), which
gives the same answer.
"""

from __future__ import annotations

import math
from typing import Mapping, NamedTuple

from kbroker.zookeeper.znodes import desanitize, sanitize

__all__ = [
    "DEFAULT", "USER", "CLIENT_ID", "IP", "PRODUCER_BYTE_RATE", "CONSUMER_BYTE_RATE", "REQUEST_PERCENTAGE",
    "CONTROLLER_MUTATION_RATE", "QUOTA_KEYS", "LONG_KEYS", "QuotaEntity", "entity_path", "parse_entity_path",
    "enabled_levels", "metric_tags", "quota_limit", "parse_quota_value",
]

DEFAULT = "<default>"  # ZooKeeperInternals.DEFAULT_STRING
USER, CLIENT_ID, IP = "user", "client-id", "ip"  # ClientQuotaEntity's entity types

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# QuotaConfigs.userAndClientQuotaConfigs: key -> ConfigDef type
QUOTA_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG", REQUEST_PERCENTAGE: "DOUBLE",
              CONTROLLER_MUTATION_RATE: "DOUBLE"}
LONG_KEYS = frozenset(k for k, t in QUOTA_KEYS.items() if t == "LONG")


class QuotaEntity(NamedTuple):
    """(user, client id), each a sanitized name, `DEFAULT`, or None when the entity has no such part."""

    user: str | None
    client_id: str | None

    @classmethod
    def of(cls, user: str | None = None, client_id: str | None = None, *, default_user: bool = False,
           default_client_id: bool = False) -> "QuotaEntity":
        """From plain names (what a request or a command names); `default_*` for the defaults."""
        return cls(DEFAULT if default_user else (None if user is None else sanitize(user)),
                   DEFAULT if default_client_id else (None if client_id is None else sanitize(client_id)))

    def names(self) -> tuple[str | None, str | None]:
        """(user, client id) as plain names; the default is None here, as in Kafka's ClientQuotaEntity."""
        return tuple(None if p is None or p == DEFAULT else desanitize(p) for p in self)  # type: ignore[return-value]

    def __str__(self) -> str:
        parts = []
        if self.user is not None:
            parts.append("default user" if self.user == DEFAULT else f"user {desanitize(self.user)}")
        if self.client_id is not None:
            parts.append("default client-id" if self.client_id == DEFAULT
                         else f"client-id {desanitize(self.client_id)}")
        return " ".join(parts)


def entity_path(entity: QuotaEntity) -> str:
    """`users/<u>`, `clients/<c>` or `users/<u>/clients/<c>`: under /config, and in notifications."""
    if entity.user is not None and entity.client_id is not None:
        return f"users/{entity.user}/clients/{entity.client_id}"
    if entity.user is not None:
        return f"users/{entity.user}"
    if entity.client_id is not None:
        return f"clients/{entity.client_id}"
    raise ValueError("an empty quota entity has no path")


def parse_entity_path(path: str) -> QuotaEntity | None:
    """The entity of a path `entity_path` makes; None for any other path."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return QuotaEntity(parts[1], None)
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return QuotaEntity(None, parts[1])
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return QuotaEntity(parts[1], parts[3])
    return None


def parse_quota_value(key: str, value: str) -> float:
    """A stored quota as its bound (QuotaConfigHandler: the byte rates are longs, the others
    doubles). ValueError for what does not parse."""
    number = float(value)
    if key in LONG_KEYS:
        number = float(int(number))
    if math.isnan(number) or number <= 0:
        raise ValueError(f"{key}={value} is not a positive quota")
    return number


# ClientQuotaManager.QuotaTypes: which levels have quotas of one type
CLIENT_ID_LEVEL, USER_LEVEL, USER_CLIENT_ID_LEVEL = 1, 2, 4


def enabled_levels(entities) -> int:
    levels = 0
    for user, client_id in entities:
        if user is not None:
            levels |= USER_CLIENT_ID_LEVEL if client_id is not None else USER_LEVEL
        elif client_id is not None:
            levels |= CLIENT_ID_LEVEL
    return levels


def metric_tags(levels: int, quotas: Mapping[QuotaEntity, float], user: str, client_id: str) -> tuple[str, str]:
    """DefaultQuotaCallback.quotaMetricTags: the (user, client id) whose requests share a rate, from
    a request's sanitized user and client id; "" for a part they do not share by."""
    if levels in (0, CLIENT_ID_LEVEL):
        return "", client_id
    if levels == USER_LEVEL:
        return user, ""
    if levels == USER_CLIENT_ID_LEVEL:
        return user, client_id
    if QuotaEntity(user, client_id) in quotas or QuotaEntity(user, DEFAULT) in quotas:
        return user, client_id
    if QuotaEntity(user, None) in quotas:
        return user, ""
    if QuotaEntity(DEFAULT, client_id) in quotas or QuotaEntity(DEFAULT, DEFAULT) in quotas:
        return user, client_id
    if QuotaEntity(DEFAULT, None) in quotas:
        return user, ""
    return "", client_id


def quota_limit(quotas: Mapping[QuotaEntity, float], tags: tuple[str, str]) -> float | None:
    """DefaultQuotaCallback.quotaLimit: the bound for a rate's tags, None for no bound. An empty
    client id with no user tag has none (as in Kafka, not even the default client-id quota)."""
    user, client_id = tags
    if user and client_id:
        for entity in (QuotaEntity(user, client_id), QuotaEntity(user, DEFAULT), QuotaEntity(DEFAULT, client_id),
                       QuotaEntity(DEFAULT, DEFAULT)):
            if entity in quotas:
                return quotas[entity]
    elif user:
        for entity in (QuotaEntity(user, None), QuotaEntity(DEFAULT, None)):
            if entity in quotas:
                return quotas[entity]
    elif client_id:
        for entity in (QuotaEntity(None, client_id), QuotaEntity(None, DEFAULT)):
            if entity in quotas:
                return quotas[entity]
    return None
