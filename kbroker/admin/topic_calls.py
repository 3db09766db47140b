"""The admin client's topic and config calls: Metadata for topics and their partitions (offline
replicas, topic ids), and the changes Kafka's admin client sends to the controller: CreateTopics,
DeleteTopics, CreatePartitions, AlterPartitionReassignments, ListPartitionReassignments,
ElectLeaders; a topic's configs with DescribeConfigs and IncrementalAlterConfigs (any broker).
Mixed into `client.AdminClient`; the routing is `routing.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kbroker.admin.connection import (
    ALTER_PARTITION_REASSIGNMENTS,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DESCRIBE_CONFIGS,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_PARTITION_REASSIGNMENTS,
    METADATA,
    AdminError,
    KafkaErrorResponse,
    kafka_uuid,
)
from kbroker.admin.routing import RoutedClient
from kbroker.admin.values import (
    Broker,
    ConfigValue,
    CreatedTopic,
    PartitionState,
    TopicState,
)

TOPIC_METADATA_MIN_VERSION = 5  # the first Metadata version with offline replicas (topic ids from v10)
RESOURCE_TOPIC = 2  # DescribeConfigs / IncrementalAlterConfigs resource type
CONFIG_SET, CONFIG_DELETE = 0, 1  # IncrementalAlterConfigs operations


class TopicCalls(RoutedClient):
    """Topics, their partitions and configs."""

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
            partitions = sorted(PartitionState(int(p.partition_index), int(p.leader_id),
                                                tuple(int(r) for r in p.replica_nodes),
                                                tuple(int(r) for r in p.isr_nodes),
                                                tuple(int(r) for r in p.offline_replicas))
                                 for p in t.partitions)
            out.append(TopicState(t.name, kafka_uuid(topic_id), bool(t.is_internal), tuple(partitions)))
        return brokers, sorted(out)

    def placement(self) -> tuple[dict[int, Broker], dict[tuple[str, int], tuple[int, ...]], dict[tuple[str, int], int]]:
        """(live brokers, replicas and leader of every partition of the cluster), from Metadata."""
        brokers, topics = self.describe_topics(None)
        replicas = {(t.name, p.partition): tuple(p.replicas) for t in topics for p in t.partitions}
        leaders = {(t.name, p.partition): p.leader for t in topics for p in t.partitions}
        return brokers, replicas, leaders

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


def _only_topic(entries: Iterable[Any], name: str, api: str) -> Any:
    entries = list(entries)
    found = [e for e in entries if e.name == name]
    if len(found) != 1:
        raise AdminError(f"{api} answered {len(entries)} topics, none for {name!r}")
    return found[0]
