"""The authorization checks the handlers make, as Kafka's KafkaApis makes them: one call per
resource, raising the error Kafka answers (TOPIC_, GROUP_, CLUSTER_ or
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or answering a bool where the handler fills a per-item error
itself. With no authorizer configured every check passes at the cost of one identity comparison
(api/authorization.py decides; security/authorizer.py is the ACL logic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from kbroker.api.authorization import CLUSTER_NAME, AclOperation as Op, ResourceType as Res, permitted
from kbroker.errors import (
    ClusterAuthorizationError,
    GroupAuthorizationError,
    TopicAuthorizationError,
    TransactionalIdAuthorizationError,
)

if TYPE_CHECKING:
    from kbroker.api.context import RequestContext

__all__ = ["Op", "Res", "topic_allowed", "require_topic", "require_group", "require_cluster",
           "require_transactional_id", "cluster_allowed", "allowed_topics"]


def topic_allowed(ctx: "RequestContext", operation: Op, topic: str, log_denied: bool = True) -> bool:
    return permitted(ctx, operation, Res.TOPIC, topic, log_denied)


def allowed_topics(ctx: "RequestContext", operation: Op, topics: Iterable[str], log_denied: bool = True) -> set[str]:
    """The topics allowed; `log_denied=False` where the others are only left out of a listing."""
    return {t for t in topics if permitted(ctx, operation, Res.TOPIC, t, log_denied)}


def cluster_allowed(ctx: "RequestContext", operation: Op, log_denied: bool = True) -> bool:
    return permitted(ctx, operation, Res.CLUSTER, CLUSTER_NAME, log_denied)


def require_topic(ctx: "RequestContext", operation: Op, topic: str) -> None:
    if not permitted(ctx, operation, Res.TOPIC, topic):
        raise TopicAuthorizationError(f"Not authorized to access topics: [{topic}]")


def require_group(ctx: "RequestContext", operation: Op, group: str) -> None:
    if not permitted(ctx, operation, Res.GROUP, group):
        raise GroupAuthorizationError(f"Not authorized to access group: {group}")


def require_cluster(ctx: "RequestContext", operation: Op) -> None:
    if not permitted(ctx, operation, Res.CLUSTER, CLUSTER_NAME):
        raise ClusterAuthorizationError(f"Cluster authorization failed ({operation.name} on the cluster).")


def require_transactional_id(ctx: "RequestContext", operation: Op, transactional_id: str) -> None:
    if not permitted(ctx, operation, Res.TRANSACTIONAL_ID, transactional_id):
        raise TransactionalIdAuthorizationError(f"Transactional Id authorization failed: {transactional_id}")
