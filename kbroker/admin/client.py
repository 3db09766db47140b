"""A small blocking Kafka client for the command-line tools.

One socket per broker; each connection negotiates versions with ApiVersions and every request uses
the highest version both sides know. Group requests go to the group's coordinator (FindCoordinator,
retried while it loads or moves), ListOffsets to each partition's leader (Metadata), ListGroups to
every broker, CreateTopics, DeleteTopics and CreatePartitions to the controller Metadata names
(looked up again on NOT_CONTROLLER), config requests to any broker, as Kafka's admin client does.
The sockets, version negotiation and errors are `connection.py`.

Bodies are built and read by the kio codecs in `kbroker.wire.protocol`; results come back as plain
values (dicts keyed by (topic, partition), small named tuples).
"""

from __future__ import annotations

import time
from typing import Any, Iterable, NamedTuple

from kio.schema.errors import ErrorCode

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
from kbroker.wire.protocol import api_name

# Re-exported: the admin modules take the connection's names from here too.
__all__ = [
    "ALTER_PARTITION_REASSIGNMENTS",
    "API_VERSIONS",
    "CLIENT_ID",
    "CLIENT_VERSIONS",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
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
    "AdminError",
    "Connection",
    "KafkaErrorResponse",
    "error_name",
    "kafka_uuid",
    "parse_address",
    "AdminClient",
    "Broker",
    "ClusterDescription",
    "ConfigValue",
    "CreatedTopic",
    "GroupDescription",
    "GroupListing",
    "Member",
    "PartitionState",
    "TopicState",
]

TOPIC_METADATA_MIN_VERSION = 5  # the first Metadata version with offline replicas (topic ids from v10)
RESOURCE_TOPIC = 2  # DescribeConfigs / IncrementalAlterConfigs resource type
CONFIG_SET, CONFIG_DELETE = 0, 1  # IncrementalAlterConfigs operations
DEFAULT_CONFIG_SOURCE = 5  # DescribeConfigs config_source: nobody set it

# Errors after which the coordinator is looked up again (Kafka's admin client does the same).
_COORDINATOR_RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                          ErrorCode.not_coordinator}
_LEADER_RETRIABLE = {ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
                     ErrorCode.unknown_leader_epoch, ErrorCode.fenced_leader_epoch,
                     ErrorCode.offset_not_available}  # ListOffsets of a leader just elected
_CONTROLLER_RETRIABLE = {ErrorCode.not_controller}


class Broker(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int  # -1: none known
    brokers: dict[int, Broker]  # live brokers by id, with their racks


class GroupListing(NamedTuple):
    group_id: str
    state: str | None  # None: ListGroups older than v4 and not described
    protocol_type: str
    group_type: str = "classic"  # ListGroups v5: "consumer" for KIP-848 groups; before v5 only classic ones


class Member(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignment strategy for consumer groups
    members: tuple[Member, ...]
    coordinator: Broker


TopicPartition = tuple[str, int]


class PartitionState(NamedTuple):
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


class TopicState(NamedTuple):
    name: str
    topic_id: str | None  # Kafka's text form; None: not given (Metadata before v10, or the zero id)
    internal: bool
    partitions: tuple[PartitionState, ...]  # by partition number


class ConfigValue(NamedTuple):
    name: str
    value: str | None
    source: int  # DescribeConfigs config_source; DEFAULT_CONFIG_SOURCE when nobody set it
    read_only: bool
    sensitive: bool


class CreatedTopic(NamedTuple):
    name: str
    topic_id: str | None
    partitions: int | None  # None: the broker does not say (CreateTopics before v5)
    replication_factor: int | None


class AdminClient:
    """The requests the group and topic commands need, routed as Kafka routes them."""

    def __init__(self, bootstrap: str, timeout: float = DEFAULT_TIMEOUT_S, security: Any = None) -> None:
        """`security`: every connection's TLS and SASL (admin/security.py's ClientSecurity), or None."""
        self.bootstrap = [parse_address(a) for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise AdminError("no bootstrap server given")
        self.timeout, self.security = timeout, security
        self._connections: dict[tuple[str, int], Connection] = {}
        self._coordinators: dict[str, Broker] = {}

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    # -- connections --------------------------------------------------------------------------

    def connection(self, host: str, port: int) -> Connection:
        conn = self._connections.get((host, port))
        if conn is None:
            conn = self._connections[(host, port)] = Connection(host, port, self.timeout, self.security)
        return conn

    def any_connection(self) -> Connection:
        """A connection to some broker (the first that answers), for requests any broker serves."""
        return self._any()

    def _any(self) -> Connection:
        if self._connections:
            return next(iter(self._connections.values()))
        errors = []
        for host, port in self.bootstrap:
            try:
                return self.connection(host, port)
            except AdminError as exc:
                errors.append(str(exc))
        raise AdminError("; ".join(errors))

    def _drop(self, host: str, port: int) -> None:
        conn = self._connections.pop((host, port), None)
        if conn is not None:
            conn.close()

    # -- cluster ----------------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None) -> tuple[dict[int, Broker], dict[str, Any]]:
        """(brokers by id, topic name -> metadata topic entity); topics=None asks for every topic.
        Never auto-creates a topic."""
        names = None if topics is None else [{"name": t} for t in topics]
        body = self._any().call(METADATA, {"topics": names, "allow_auto_topic_creation": False})
        brokers = {b.node_id: Broker(int(b.node_id), b.host, int(b.port)) for b in body.brokers}
        return brokers, {t.name: t for t in body.topics}

    def controller(self) -> tuple[str | None, int]:
        """(cluster id, controller id; -1 when none is known) as Metadata names them."""
        body = self._any().call(METADATA, {"topics": [], "allow_auto_topic_creation": False})
        return getattr(body, "cluster_id", None), int(body.controller_id)

    def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and live brokers (with racks): DescribeCluster where the broker
        serves it (Kafka's admin client asks it so), Metadata otherwise."""
        conn = self._any()
        if DESCRIBE_CLUSTER not in conn.versions:
            body = conn.call(METADATA, {"topics": [], "allow_auto_topic_creation": False})
            brokers = {int(b.node_id): Broker(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
                       for b in body.brokers}
            return ClusterDescription(getattr(body, "cluster_id", None), int(body.controller_id), brokers)
        body = conn.call(DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, "DescribeCluster", body.error_message)
        brokers = {int(b.broker_id): Broker(int(b.broker_id), b.host, int(b.port), b.rack) for b in body.brokers}
        return ClusterDescription(body.cluster_id, int(body.controller_id), brokers)

    def leader_of(self, topic: str, partition: int) -> Broker:
        """The partition's leader as Metadata names it; UNKNOWN_TOPIC_OR_PARTITION (or the topic's
        error) when there is none."""
        return next(iter(self._by_leader([(topic, partition)], strict=True)))

    def serves(self, api_key: int) -> bool:
        """Whether the broker this client talks to serves `api_key` at all."""
        return api_key in self._any().versions

    def partitions_of(self, topic: str) -> list[int]:
        _brokers, topics = self.metadata([topic])
        entry = topics.get(topic)
        if entry is None:
            raise AdminError(f"topic {topic!r} is not in the metadata answer")
        if entry.error_code != ErrorCode.none:
            raise KafkaErrorResponse(entry.error_code, f"topic {topic!r}")
        return sorted(int(p.partition_index) for p in entry.partitions)

    # -- topics -----------------------------------------------------------------------------------

    def describe_topics(self, topics: Iterable[str] | None) -> tuple[dict[int, Broker], list[TopicState]]:
        """(live brokers by id, topics by name) from Metadata v5+ (offline replicas; topic ids from
        v10); topics=None asks for every topic. A named topic the broker does not know is an error."""
        conn = self._any()
        version = conn.version(METADATA)
        if version < TOPIC_METADATA_MIN_VERSION:
            raise AdminError(f"the broker at {conn.address} serves Metadata up to v{version}; describing "
                             f"topics needs v{TOPIC_METADATA_MIN_VERSION}+ (offline replicas)")
        names = None if topics is None else [{"name": t} for t in dict.fromkeys(topics)]
        body = conn.call(METADATA, {"topics": names, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False}, version)
        brokers = {int(b.node_id): Broker(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
                   for b in body.brokers}
        out = []
        for t in body.topics:
            if t.error_code != ErrorCode.none and topics is not None:
                raise KafkaErrorResponse(t.error_code, f"topic {t.name!r}")
            topic_id = getattr(t, "topic_id", None)
            partitions = sorted((PartitionState(int(p.partition_index), int(p.leader_id),
                                                tuple(int(r) for r in p.replica_nodes),
                                                tuple(int(r) for r in p.isr_nodes),
                                                tuple(int(r) for r in p.offline_replicas))
                                 for p in t.partitions))
            out.append(TopicState(t.name, kafka_uuid(topic_id), bool(t.is_internal), tuple(partitions)))
        return brokers, sorted(out)

    def placement(self) -> tuple[dict[int, Broker], dict[tuple[str, int], tuple[int, ...]], dict[tuple[str, int], int]]:
        """(live brokers, replicas and leader of every partition of the cluster), from Metadata."""
        brokers, topics = self.describe_topics(None)
        replicas = {(t.name, p.partition): tuple(p.replicas) for t in topics for p in t.partitions}
        leaders = {(t.name, p.partition): p.leader for t in topics for p in t.partitions}
        return brokers, replicas, leaders

    def _controller_call(self, api_key: int, data: dict[str, Any], codes_of) -> Any:
        """Call the controller Metadata names (any broker when it names none we know), as Kafka's
        admin client sends topic changes; NOT_CONTROLLER looks it up again until the timeout."""
        deadline = time.monotonic() + self.timeout
        backoff = 0.05
        while True:
            body = self._any().call(METADATA, {"topics": [], "allow_auto_topic_creation": False})
            controller = next((b for b in body.brokers if b.node_id == body.controller_id), None)
            try:
                conn = self.connection(controller.host, int(controller.port)) if controller is not None else self._any()
                body = conn.call(api_key, data)
            except AdminError:
                # A controller that just died stays named until its ZooKeeper session expires.
                if controller is None or time.monotonic() + backoff > deadline:
                    raise
                self._drop(controller.host, int(controller.port))
            else:
                code = next((c for c in codes_of(body) if c in _CONTROLLER_RETRIABLE), None)
                if code is None:
                    return body
                if time.monotonic() + backoff > deadline:
                    raise KafkaErrorResponse(code, f"{api_name(api_key)} (gave up after {self.timeout:g} s)")
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _request_timeout_ms(self) -> int:
        """How long the broker may take (a little under our socket timeout, so its answer arrives)."""
        return max(int(self.timeout * 800), 1)

    def create_topic(self, name: str, partitions: int | None = None, replication_factor: int | None = None,
                     assignment: list[list[int]] | None = None, configs: dict[str, str] | None = None) -> CreatedTopic:
        """CreateTopics for one topic: an explicit replica assignment, or a partition count and
        replication factor (None: the broker's num.partitions / default.replication.factor)."""
        version = self._any().version(CREATE_TOPICS)
        if assignment is None and (partitions is None or replication_factor is None) and version < 4:
            raise AdminError(f"the broker serves CreateTopics up to v{version}, which has no broker defaults: "
                             f"give both --partitions and --replication-factor")
        by_count = assignment is None
        topic = {"name": name,
                 "num_partitions": partitions if by_count and partitions is not None else -1,
                 "replication_factor": replication_factor if by_count and replication_factor is not None else -1,
                 "assignments": [{"partition_index": i, "broker_ids": list(replicas)}
                                 for i, replicas in enumerate(assignment or ())],
                 "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        body = self._controller_call(CREATE_TOPICS, {"topics": [topic], "timeout": self._request_timeout_ms(),
                                                     "validate_only": False},
                                     lambda b: [t.error_code for t in b.topics])
        entry = _only_topic(body.topics, name, "CreateTopics")
        if entry.error_code != ErrorCode.none:
            raise KafkaErrorResponse(entry.error_code, f"CreateTopics for topic {name!r}",
                                     getattr(entry, "error_message", None))
        topic_id = getattr(entry, "topic_id", None)
        count = getattr(entry, "num_partitions", -1)
        factor = getattr(entry, "replication_factor", -1)
        return CreatedTopic(name, kafka_uuid(topic_id), count if count >= 0 else None, factor if factor >= 0 else None)

    def delete_topics(self, names: Iterable[str]) -> dict[str, KafkaErrorResponse | None]:
        """DeleteTopics: each topic's failure, or None where it was deleted."""
        names = list(dict.fromkeys(names))
        body = self._controller_call(DELETE_TOPICS, {"topic_names": names,
                                                     "topics": [{"name": n, "topic_id": None} for n in names],
                                                     "timeout": self._request_timeout_ms()},
                                     lambda b: [r.error_code for r in b.responses])
        out: dict[str, KafkaErrorResponse | None] = {}
        for name in names:
            entry = _only_topic(body.responses, name, "DeleteTopics")
            out[name] = None if entry.error_code == ErrorCode.none else KafkaErrorResponse(
                entry.error_code, f"DeleteTopics for topic {name!r}", getattr(entry, "error_message", None))
        return out

    def create_partitions(self, name: str, count: int) -> None:
        """CreatePartitions: grow the topic to `count` partitions (the broker places the new ones)."""
        data = {"topics": [{"name": name, "count": count, "assignments": None}],
                "timeout": self._request_timeout_ms(), "validate_only": False}
        body = self._controller_call(CREATE_PARTITIONS, data, lambda b: [r.error_code for r in b.results])
        entry = _only_topic(body.results, name, "CreatePartitions")
        if entry.error_code != ErrorCode.none:
            raise KafkaErrorResponse(entry.error_code, f"CreatePartitions for topic {name!r}", entry.error_message)

    def alter_partition_reassignments(self, moves: dict[tuple[str, int], list[int] | None]
                                      ) -> dict[tuple[str, int], KafkaErrorResponse | None]:
        """AlterPartitionReassignments: a replica list starts a move, None cancels one; each
        partition's failure, or None where the controller took it."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), replicas in sorted(moves.items()):
            by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
        body = self._controller_call(ALTER_PARTITION_REASSIGNMENTS, {
            "timeout": self._request_timeout_ms(),
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}, lambda b: [b.error_code])
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, "AlterPartitionReassignments", body.error_message)
        out: dict[tuple[str, int], KafkaErrorResponse | None] = {}
        for t in body.responses:
            for p in t.partitions:
                out[(t.name, p.partition_index)] = None if p.error_code == ErrorCode.none else KafkaErrorResponse(
                    p.error_code, f"{t.name}-{p.partition_index}", p.error_message)
        return out

    def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None
                                     ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """ListPartitionReassignments: (replicas, adding, removing) of each move in progress."""
        topics = None
        if partitions is not None:
            wanted: dict[str, list[int]] = {}
            for topic, p in partitions:
                wanted.setdefault(topic, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in wanted.items()]
        body = self._controller_call(LIST_PARTITION_REASSIGNMENTS, {"timeout": self._request_timeout_ms(),
                                                                   "topics": topics}, lambda b: [b.error_code])
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, "ListPartitionReassignments", body.error_message)
        return {(t.name, p.partition_index): (tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in body.topics for p in t.partitions}

    def elect_leaders(self, partitions: Iterable[tuple[str, int]] | None = None, election_type: int = 0
                      ) -> dict[tuple[str, int], KafkaErrorResponse | None]:
        """ElectLeaders (0 preferred, 1 unclean) of `partitions` (None: all): each partition's
        failure (ELECTION_NOT_NEEDED among them), or None where leadership moved."""
        topics = None
        if partitions is not None:
            wanted: dict[str, list[int]] = {}
            for topic, p in partitions:
                wanted.setdefault(topic, []).append(p)
            topics = [{"topic": t, "partitions": ps} for t, ps in wanted.items()]
        body = self._controller_call(ELECT_LEADERS, {"election_type": election_type, "topic_partitions": topics,
                                                     "timeout": self._request_timeout_ms()},
                                     lambda b: [b.error_code])
        if body.error_code != ErrorCode.none:
            raise KafkaErrorResponse(body.error_code, "ElectLeaders", None)
        return {(t.topic, p.partition_id): None if p.error_code == ErrorCode.none else KafkaErrorResponse(
                    p.error_code, f"{t.topic}-{p.partition_id}", p.error_message)
                for t in body.replica_election_results for p in t.partition_result}

    def describe_topic_configs(self, names: Iterable[str]) -> dict[str, list[ConfigValue]]:
        """DescribeConfigs: every config of each topic with its value and source."""
        names = list(dict.fromkeys(names))
        if not names:
            return {}
        body = self._any().call(DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": n, "configuration_keys": None}
                          for n in names],
            "include_synonyms": False, "include_documentation": False})
        out: dict[str, list[ConfigValue]] = {}
        for r in body.results:
            if r.resource_type != RESOURCE_TOPIC or r.resource_name not in names:
                continue
            if r.error_code != ErrorCode.none:
                raise KafkaErrorResponse(r.error_code, f"DescribeConfigs for topic {r.resource_name!r}",
                                         r.error_message)
            out[r.resource_name] = [ConfigValue(c.name, c.value, int(c.config_source), bool(c.read_only),
                                                bool(c.is_sensitive)) for c in r.configs]
        missing = [n for n in names if n not in out]
        if missing:
            raise AdminError(f"DescribeConfigs answered nothing for topic {missing[0]!r}")
        return out

    def alter_topic_configs(self, name: str, set_configs: dict[str, str], delete_configs: Iterable[str]) -> None:
        """IncrementalAlterConfigs: set some overrides of a topic and remove others (back to the
        broker's value); the others stay as they are."""
        ops = [{"name": k, "config_operation": CONFIG_SET, "value": v} for k, v in set_configs.items()]
        ops += [{"name": k, "config_operation": CONFIG_DELETE, "value": None} for k in dict.fromkeys(delete_configs)]
        body = self._any().call(INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name, "configs": ops}],
            "validate_only": False})
        entries = [r for r in body.responses if r.resource_type == RESOURCE_TOPIC and r.resource_name == name]
        if len(entries) != 1:
            raise AdminError(f"IncrementalAlterConfigs answered {len(body.responses)} resources, "
                             f"none for topic {name!r}")
        if entries[0].error_code != ErrorCode.none:
            raise KafkaErrorResponse(entries[0].error_code, f"IncrementalAlterConfigs for topic {name!r}",
                                     entries[0].error_message)

    # -- groups -----------------------------------------------------------------------------------

    def find_coordinator(self, group: str) -> Broker:
        cached = self._coordinators.get(group)
        if cached is not None:
            return cached
        conn = self._any()
        version = conn.version(FIND_COORDINATOR)
        body = conn.call(FIND_COORDINATOR, {"key": group, "key_type": 0, "coordinator_keys": [group]}, version)
        answer = body.coordinators[0] if version >= 4 else body
        if version >= 4 and len(body.coordinators) != 1:
            raise AdminError(f"FindCoordinator answered {len(body.coordinators)} coordinators for one group")
        if answer.error_code != ErrorCode.none:
            raise KafkaErrorResponse(answer.error_code, f"FindCoordinator for group {group!r}",
                                     getattr(answer, "error_message", None))
        broker = Broker(int(answer.node_id), answer.host, int(answer.port))
        self._coordinators[group] = broker
        return broker

    def _group_call(self, group: str, api_key: int, data: dict[str, Any], error_of) -> tuple[Any, Broker]:
        """Call the group's coordinator; `error_of(body)` gives the group-level error code. While
        the coordinator loads, has moved or cannot be reached, look it up again and retry until
        the timeout."""
        deadline = time.monotonic() + self.timeout
        backoff = 0.05
        while True:
            coordinator = None
            try:
                coordinator = self.find_coordinator(group)
                body = self.connection(coordinator.host, coordinator.port).call(api_key, data)
                code = error_of(body)
            except KafkaErrorResponse as exc:
                code, body, coordinator = exc.code, None, None
                if code not in _COORDINATOR_RETRIABLE:
                    raise
            except AdminError:
                # a coordinator that just died: its group moves with its __consumer_offsets partition
                if time.monotonic() + backoff > deadline:
                    raise
                # the broken connection: the coordinator's, or the one FindCoordinator went through
                broken = (coordinator.host, coordinator.port) if coordinator else next(iter(self._connections), None)
                if broken is not None:
                    self._drop(*broken)
                code = ErrorCode.coordinator_not_available
            if code not in _COORDINATOR_RETRIABLE:
                return body, coordinator
            self._coordinators.pop(group, None)
            if time.monotonic() + backoff > deadline:
                raise KafkaErrorResponse(code, f"{api_name(api_key)} for group {group!r} (gave up after "
                                               f"{self.timeout:g} s)")
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group of every broker (each lists the groups it coordinates). `states` filters on
        the broker from ListGroups v4; before v4 ListGroups has no states, so they are asked with
        DescribeGroups and filtered here."""
        wanted = None if states is None else set(states)
        brokers, _ = self.metadata([])
        out: dict[str, GroupListing] = {}
        for broker in sorted(brokers.values()):
            conn = self.connection(broker.host, broker.port)
            version = conn.version(LIST_GROUPS)
            body = conn.call(LIST_GROUPS, {"states_filter": sorted(wanted or ()), "types_filter": []}, version)
            if body.error_code != ErrorCode.none:
                raise KafkaErrorResponse(body.error_code, f"ListGroups from {conn.address}")
            listed = [GroupListing(g.group_id, getattr(g, "group_state", None), g.protocol_type,
                                   getattr(g, "group_type", None) or "classic") for g in body.groups]
            if version < 4 and listed:
                states_of = {d.group_id: d.state for d in self._describe_at(conn, [g.group_id for g in listed], broker)}
                listed = [g._replace(state=states_of.get(g.group_id)) for g in listed]
                if wanted is not None:
                    listed = [g for g in listed if g.state in wanted]
            for g in listed:
                out[g.group_id] = g
        return [out[k] for k in sorted(out)]

    def _describe_at(self, conn: Connection, groups: list[str], broker: Broker) -> list[GroupDescription]:
        body = conn.call(DESCRIBE_GROUPS, {"groups": groups, "include_authorized_operations": False})
        return [_description(g, broker) for g in body.groups]

    def describe_group(self, group: str) -> GroupDescription:
        """DescribeGroups at the coordinator. A group the coordinator does not know comes back
        Dead (classic coordinator) or GROUP_ID_NOT_FOUND (newer brokers); both are returned as Dead."""
        def error_of(body: Any) -> int:
            return _only_group(body, group).error_code

        body, coordinator = self._group_call(group, DESCRIBE_GROUPS,
                                             {"groups": [group], "include_authorized_operations": False}, error_of)
        entry = _only_group(body, group)
        if entry.error_code == ErrorCode.group_id_not_found:
            return GroupDescription(group, "Dead", "", "", (), coordinator)
        if entry.error_code != ErrorCode.none:
            raise KafkaErrorResponse(entry.error_code, f"DescribeGroups for group {group!r}",
                                     getattr(entry, "error_message", None))
        return _description(entry, coordinator)

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (OffsetFetch with topics = null)."""
        def error_of(body: Any) -> int:
            if hasattr(body, "groups"):
                return _only_group(body, group).error_code
            return body.error_code

        data = {"group_id": group, "topics": None, "require_stable": False,
                "groups": [{"group_id": group, "topics": None}]}
        body, _ = self._group_call(group, OFFSET_FETCH, data, error_of)
        code = error_of(body)
        if code == ErrorCode.group_id_not_found:
            return {}
        if code != ErrorCode.none:
            raise KafkaErrorResponse(code, f"OffsetFetch for group {group!r}")
        topics = _only_group(body, group).topics if hasattr(body, "groups") else body.topics
        out: dict[TopicPartition, int] = {}
        for t in topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none and p.committed_offset >= 0:
                    out[(t.name, int(p.partition_index))] = int(p.committed_offset)
                elif p.error_code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                    raise KafkaErrorResponse(p.error_code, f"OffsetFetch for {t.name}-{p.partition_index}")
        return out

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """OffsetCommit as Kafka's admin client does: generation -1, no member id (only an empty
        group accepts it)."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""})
        data = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "retention_time": -1, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def error_of(body: Any) -> int:
            codes = {p.error_code for t in body.topics for p in t.partitions}
            return next((c for c in codes if c in _COORDINATOR_RETRIABLE), ErrorCode.none)

        body, _ = self._group_call(group, OFFSET_COMMIT, data, error_of)
        failed = [(t.name, p.partition_index, p.error_code) for t in body.topics for p in t.partitions
                  if p.error_code != ErrorCode.none]
        if failed:
            topic, partition, code = failed[0]
            more = f" (and {len(failed) - 1} more partitions)" if len(failed) > 1 else ""
            raise KafkaErrorResponse(code, f"OffsetCommit for group {group!r}, {topic}-{partition}{more}")

    def delete_group(self, group: str) -> None:
        def error_of(body: Any) -> int:
            results = [r for r in body.results if r.group_id == group]
            if len(results) != 1:
                raise AdminError(f"DeleteGroups answered {len(body.results)} results, none for group {group!r}")
            return results[0].error_code

        body, _ = self._group_call(group, DELETE_GROUPS, {"groups_names": [group]}, error_of)
        code = error_of(body)
        if code != ErrorCode.none:
            raise KafkaErrorResponse(code, f"DeleteGroups for group {group!r}")

    # -- offsets ----------------------------------------------------------------------------------

    def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int,
                     strict: bool = True, read_committed: bool = False) -> dict[TopicPartition, int | None]:
        """ListOffsets at each partition's leader: EARLIEST, LATEST or a timestamp in ms (None when
        no record is that recent). With strict=False a partition that errors maps to None.
        read_committed: LATEST is the last stable offset."""
        wanted = sorted(set(partitions))
        out: dict[TopicPartition, int | None] = {}
        for attempt in range(3):  # a moved leader is looked up again
            retry: list[TopicPartition] = []
            for broker, tps in self._by_leader(wanted, strict).items():
                if broker is None:
                    out.update({tp: None for tp in tps})
                    continue
                topics: dict[str, list[dict[str, int]]] = {}
                for topic, partition in tps:
                    topics.setdefault(topic, []).append(
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp})
                body = self.connection(broker.host, broker.port).call(LIST_OFFSETS, {
                    "replica_id": -1, "isolation_level": int(read_committed), "timeout": int(self.timeout * 1000),
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
                for t in body.topics:
                    for p in t.partitions:
                        tp = (t.name, int(p.partition_index))
                        if p.error_code == ErrorCode.none:
                            out[tp] = None if p.offset < 0 else int(p.offset)
                        elif p.error_code in _LEADER_RETRIABLE and attempt < 2:
                            retry.append(tp)
                        elif strict:
                            raise KafkaErrorResponse(p.error_code, f"ListOffsets for {tp[0]}-{tp[1]}")
                        else:
                            out[tp] = None
            if not retry:
                break
            wanted = retry
            time.sleep(0.2)
        missing = [tp for tp in wanted if tp not in out]
        if missing and strict:
            raise AdminError(f"ListOffsets did not answer for {missing[0][0]}-{missing[0][1]}")
        return out

    def _by_leader(self, partitions: list[TopicPartition], strict: bool) -> dict[Broker | None, list[TopicPartition]]:
        brokers, topics = self.metadata(sorted({t for t, _ in partitions}))
        out: dict[Broker | None, list[TopicPartition]] = {}
        for tp in partitions:
            entry = topics.get(tp[0])
            leader = None
            if entry is not None and entry.error_code == ErrorCode.none:
                leader_id = next((p.leader_id for p in entry.partitions if p.partition_index == tp[1]), None)
                leader = brokers.get(leader_id) if leader_id is not None else None
            if leader is None and strict:
                if entry is not None and entry.error_code != ErrorCode.none:
                    raise KafkaErrorResponse(entry.error_code, f"topic {tp[0]!r}")
                raise KafkaErrorResponse(ErrorCode.unknown_topic_or_partition, f"partition {tp[0]}-{tp[1]}")
            out.setdefault(leader, []).append(tp)
        return out


def _only_topic(entries: Iterable[Any], name: str, api: str) -> Any:
    entries = list(entries)
    found = [e for e in entries if e.name == name]
    if len(found) != 1:
        raise AdminError(f"{api} answered {len(entries)} topics, none for {name!r}")
    return found[0]


def _only_group(body: Any, group: str) -> Any:
    entries = [g for g in body.groups if g.group_id == group]
    if len(entries) != 1:
        raise AdminError(f"the coordinator answered {len(body.groups)} groups, none for {group!r}")
    return entries[0]


def _description(g: Any, coordinator: Broker) -> GroupDescription:
    members = tuple(Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                           bytes(m.member_metadata), bytes(m.member_assignment)) for m in g.members)
    return GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members, coordinator)
