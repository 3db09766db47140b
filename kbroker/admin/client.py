"""A small blocking Kafka client for the command-line tools and the console: `AdminClient`.

One socket per broker; each connection negotiates versions with ApiVersions and every request uses
the highest version both sides know. Requests are routed as Kafka's admin client routes them:
group requests to the group's coordinator (FindCoordinator, retried while it loads or moves),
ListOffsets to each partition's leader (Metadata), ListGroups to every broker, CreateTopics,
DeleteTopics and CreatePartitions to the controller Metadata names (looked up again on
NOT_CONTROLLER), config requests to any broker.

This module only assembles the client and is where its users import it from. The parts:
`routing.py` (connections, the cluster's metadata, the routing and retries, ListOffsets),
`topic_calls.py` (topics, partitions, configs), `group_calls.py` (classic and consumer groups),
`share_calls.py` (share groups, KIP-932), `values.py` (the named tuples every call answers with);
the sockets, version negotiation and errors are `connection.py`. Bodies are built and read by the
kio codecs in `kbroker.wire.protocol`; results come back as plain values (dicts keyed by
(topic, partition), small named tuples).
"""

from __future__ import annotations

from kbroker.admin.connection import (
    ALTER_PARTITION_REASSIGNMENTS,
    API_VERSIONS,
    CLIENT_ID,
    CLIENT_VERSIONS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DEFAULT_TIMEOUT_S,
    DELETE_GROUPS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_LOG_DIRS,
    EARLIEST,
    ELECT_LEADERS,
    FIND_COORDINATOR,
    INCREMENTAL_ALTER_CONFIGS,
    LATEST,
    LIST_GROUPS,
    LIST_OFFSETS,
    LIST_PARTITION_REASSIGNMENTS,
    MAX_RESPONSE_BYTES,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    AdminError,
    Connection,
    KafkaErrorResponse,
    error_name,
    kafka_uuid,
    parse_address,
)
from kbroker.admin.group_calls import GroupCalls
from kbroker.admin.routing import NotServed
from kbroker.admin.share_calls import SHARE_STATES, ShareGroupCalls
from kbroker.admin.topic_calls import (
    CONFIG_DELETE,
    CONFIG_SET,
    RESOURCE_TOPIC,
    TOPIC_METADATA_MIN_VERSION,
    TopicCalls,
)
from kbroker.admin.values import (
    DEFAULT_CONFIG_SOURCE,
    Broker,
    ClusterDescription,
    ConfigValue,
    CreatedTopic,
    GroupDescription,
    GroupListing,
    Member,
    PartitionState,
    ShareGroupDescription,
    ShareMember,
    ShareOffset,
    TopicAssignment,
    TopicPartition,
    TopicState,
)

# Re-exported: the admin modules and the console take the connection's and the values' names from here.
__all__ = [
    "ALTER_PARTITION_REASSIGNMENTS",
    "API_VERSIONS",
    "CLIENT_ID",
    "CLIENT_VERSIONS",
    "CONFIG_DELETE",
    "CONFIG_SET",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DEFAULT_CONFIG_SOURCE",
    "DEFAULT_TIMEOUT_S",
    "DELETE_GROUPS",
    "DELETE_TOPICS",
    "DESCRIBE_CLUSTER",
    "DESCRIBE_CONFIGS",
    "DESCRIBE_GROUPS",
    "DESCRIBE_LOG_DIRS",
    "EARLIEST",
    "ELECT_LEADERS",
    "FIND_COORDINATOR",
    "INCREMENTAL_ALTER_CONFIGS",
    "LATEST",
    "LIST_GROUPS",
    "LIST_OFFSETS",
    "LIST_PARTITION_REASSIGNMENTS",
    "MAX_RESPONSE_BYTES",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "RESOURCE_TOPIC",
    "SHARE_STATES",
    "TOPIC_METADATA_MIN_VERSION",
    "AdminClient",
    "AdminError",
    "Broker",
    "ClusterDescription",
    "ConfigValue",
    "Connection",
    "CreatedTopic",
    "GroupDescription",
    "GroupListing",
    "KafkaErrorResponse",
    "Member",
    "NotServed",
    "PartitionState",
    "ShareGroupDescription",
    "ShareMember",
    "ShareOffset",
    "TopicAssignment",
    "TopicPartition",
    "TopicState",
    "error_name",
    "kafka_uuid",
    "parse_address",
]


class AdminClient(TopicCalls, GroupCalls, ShareGroupCalls):
    """The requests the kbroker commands and the console need, routed as Kafka routes them.

        with AdminClient("127.0.0.1:9092", timeout=10) as client:
            client.describe_topics(None); client.list_groups(); client.describe_share_group("g")

    Not thread-safe: one client per thread (the console keeps a pool)."""

