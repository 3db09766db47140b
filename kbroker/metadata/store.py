"""Cluster metadata: topics (id, partition assignment, config overrides), brokers, controller.

`MetadataStore` is the one interface the API handlers and the replica layer read and change
metadata through; `LocalMetadataStore` is the embedded single-node backend, persisting to
`<first log dir>/kbroker-metadata.json` (written atomically). A ZooKeeper backend implements the
same interface for cluster mode. Listeners are told of every change so the replica layer can
create or drop partitions. Dynamic broker configs (this broker's and the `<default>` entity's, as
strings) are kept beside it in `kbroker-broker-configs.json`, written atomically too, and
`broker_config_listeners` hear of each change, as the cluster store's do. SCRAM credentials (per
user, mechanism -> Kafka's `salt=...,stored_key=...,server_key=...,iterations=n`, never a password)
are `kbroker-scram-credentials.json`, written atomically and readable by the owner only; the SASL
server looks them up in memory (`scram_credential`). Client quotas (per entity path, as under
Kafka's /config: `users/<u>`, `clients/<c>`, `users/<u>/clients/<c>`) are
`kbroker-client-quotas.json`, and `client_quota_listeners` hear of each change (what a user's or
client's stored config means, for both stores: user_entities.py). ACLs (resource
pattern -> Kafka's entries) are `kbroker-acls.json`, written atomically; the authorizer is told of
every change through `add_acl_listener`. Per-group configs (KIP-848's GROUP resource, group id ->
{key: value}) are `kbroker-group-configs.json` (kbroker/metadata/group_configs.py), looked up in
memory by the group coordinator (`group_configs`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

from kbroker.log.checkpoint import fsync_dir, write_atomically
from kbroker.metadata.group_configs import GroupConfigFile
from kbroker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    entry_from_json,
    entry_order,
    entry_to_json,
    name_of,
    parse_pattern_type,
    parse_resource_type,
    pattern_order,
    plan_deletions,
    ResourcePattern,
)
from kbroker.security.credentials import ScramCredential
from kbroker.metadata.user_entities import (
    altered_quota_config,
    altered_scram_config,
    quota_entries,
    remember_credentials,
    scram_credentials_of,
)
from kbroker.zookeeper.znodes import DEFAULT_BROKER_ENTITY  # Kafka's name, the same on the single node
from kbroker.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

logger = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__delayed_messages", "__share_group_state"})


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules (Topic.validate)."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )


@dataclass(frozen=True)
class BrokerInfo:
    """A broker as the cluster knows it: `host`/`port` are its inter-broker listener's (what other
    brokers connect to), `endpoints` every advertised listener's (listener, protocol, host, port)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, str, int], ...] = ()

    def address_for(self, listener: str | None) -> tuple[str, int] | None:
        """Where a client that came in on `listener` reaches this broker (Kafka's rule: the same
        listener); None when this broker has no such listener. No listener (in-process) or no
        endpoints known: the inter-broker address."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        for name, _protocol, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    assignment: list[list[int]]  # replicas of each partition, preferred leader first
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


MetadataListener = Callable[[str, "TopicInfo | None"], None]
BrokerConfigListener = Callable[[dict[str, str], dict[str, str]], None]  # (this broker's, the default)
ClientQuotaListener = Callable[[dict[str, dict[str, str]]], None]  # every entity's quotas, after a change
AclListener = Callable[[list[AclBinding]], None]  # every ACL, after a change


class MetadataStore(Protocol):
    cluster_id: str
    controller_id: int

    def brokers(self) -> list[BrokerInfo]: ...
    def topics(self) -> dict[str, TopicInfo]: ...
    def topic(self, name: str) -> TopicInfo | None: ...
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...
    def configs_of(self, name: str) -> dict[str, str] | None: ...
    def create_topic(self, name: str, assignment: list[list[int]], configs: dict[str, str]) -> TopicInfo: ...
    def delete_topic(self, name: str) -> TopicInfo: ...
    def add_partitions(self, name: str, new_assignment: list[list[int]]) -> TopicInfo: ...
    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo: ...
    def allocate_producer_ids(self, count: int) -> int: ...
    def add_listener(self, listener: MetadataListener) -> None: ...
    def has_retired_partitions(self) -> bool: ...
    def is_retired(self, topic: str, partition: int) -> bool: ...
    def retired_partitions(self, topic: str) -> set[int]: ...
    # dynamic broker configs: writes are plain on the single node, awaitable in a cluster
    broker_config_listeners: list[BrokerConfigListener]
    def dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]: ...
    def broker_configs(self, entity: str) -> dict[str, str]: ...
    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None: ...
    # SCRAM credentials: lookups in memory; the describe read and the write are plain on the
    # single node, awaitable in a cluster (a fresh read of ZooKeeper, a znode write)
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...
    def scram_users(self) -> dict[str, dict[str, ScramCredential]]: ...
    def read_scram_users(self, users: list[str] | None = None) -> dict[str, dict[str, ScramCredential]]: ...
    def alter_scram_credentials(self, user: str, upsertions: dict[str, ScramCredential],
                                deletions: Sequence[str] = ()) -> None: ...
    # client quotas, by entity path (`users/<u>`, `clients/<c>`, `users/<u>/clients/<c>`, names
    # sanitized, `<default>` for the defaults): the enforced copy in memory, listeners told of each
    # change; the describe read and the write are plain on the single node, awaitable in a cluster
    client_quota_listeners: list[ClientQuotaListener]
    def client_quota_configs(self) -> dict[str, dict[str, str]]: ...
    def read_client_quotas(self) -> dict[str, dict[str, str]]: ...
    def alter_client_quotas(self, path: str, changes: dict[str, str | None]) -> None: ...
    # ACLs: read from memory; the writes are plain on the single node, awaitable in a cluster;
    # listeners hear of every change (this broker's or, in a cluster, another's)
    def acls(self) -> list[AclBinding]: ...
    def create_acls(self, bindings: Sequence[AclBinding]) -> list[Exception | None]: ...
    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]: ...
    def add_acl_listener(self, listener: AclListener) -> None: ...
    # per-group configs (group id -> {key: value}): the coordinator's lookup in memory; the
    # describe read and the write (an empty set removes the group's) plain on the single node,
    # awaitable in a cluster
    def group_configs(self, group: str) -> dict[str, str]: ...
    def read_group_configs(self, group: str) -> dict[str, str]: ...
    def set_group_configs(self, group: str, configs: dict[str, str]) -> None: ...


def assign_replicas(brokers: list[BrokerInfo], num_partitions: int, replication_factor: int,
                    start_partition: int = 0) -> list[list[int]]:
    """Round-robin replica placement (Kafka's, without the random start): partition p's replicas
    start at broker p and follow on. When brokers have racks (`broker.rack`), the broker list
    alternates racks and each partition's replicas go to as many different racks as there are,
    as Kafka's rack-aware assignment does."""
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    racks = {b.node_id: b.rack for b in brokers}
    if not any(racks.values()):
        ids = sorted(racks)
        return [[ids[(p + r) % len(ids)] for r in range(replication_factor)]
                for p in range(start_partition, start_partition + num_partitions)]
    ordered = _rack_alternated(brokers)
    rack_count = len(set(racks.values()))
    out = []
    for p in range(start_partition, start_partition + num_partitions):
        first = p % len(ordered)
        chosen = [ordered[first]]
        used_racks = {racks[ordered[first]]}
        i = first
        while len(chosen) < replication_factor:
            i = (i + 1) % len(ordered)
            candidate = ordered[i]
            if candidate in chosen:
                continue
            if racks[candidate] in used_racks and len(used_racks) < rack_count:
                if i == first:  # went all the way round: take any broker not chosen yet
                    used_racks = set()
                continue
            chosen.append(candidate)
            used_racks.add(racks[candidate])
        out.append(chosen)
    return out


def _rack_alternated(brokers: list[BrokerInfo]) -> list[int]:
    """Brokers ordered rack by rack in turn (Kafka's getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.node_id):
        by_rack.setdefault(b.rack or "", []).append(b.node_id)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


def validate_assignment(brokers: list[BrokerInfo], assignment: list[list[int]]) -> None:
    known = {b.node_id for b in brokers}
    sizes = {len(replicas) for replicas in assignment}
    if not assignment or len(sizes) != 1 or 0 in sizes:
        raise InvalidReplicaAssignmentError("All partitions must have the same, non-zero number of replicas.")
    for replicas in assignment:
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Duplicate brokers in replica assignment {replicas}.")
        unknown = set(replicas) - known
        if unknown:
            raise InvalidReplicaAssignmentError(f"Unknown broker(s) {sorted(unknown)} in replica assignment.")


class LocalMetadataStore:
    """Single-node metadata kept in one JSON file in the data directory."""

    FILE_NAME = "kbroker-metadata.json"
    BROKER_CONFIGS_FILE_NAME = "kbroker-broker-configs.json"
    SCRAM_CREDENTIALS_FILE_NAME = "kbroker-scram-credentials.json"
    CLIENT_QUOTAS_FILE_NAME = "kbroker-client-quotas.json"
    ACLS_FILE_NAME = "kbroker-acls.json"
    PRODUCER_ID_BLOCK = 1000

    def __init__(self, data_dir: Path, broker: BrokerInfo, cluster_id: str | None = None) -> None:
        self.path = Path(data_dir) / self.FILE_NAME
        self.broker = broker
        self.controller_id = broker.node_id
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._listeners: list[MetadataListener] = []
        self._next_producer_id_block = 0
        self.cluster_id = cluster_id or ""
        self.broker_configs_path = Path(data_dir) / self.BROKER_CONFIGS_FILE_NAME
        self._broker_configs: dict[str, dict[str, str]] = {}
        self.broker_config_listeners: list[BrokerConfigListener] = []
        self.scram_credentials_path = Path(data_dir) / self.SCRAM_CREDENTIALS_FILE_NAME
        self._scram_configs: dict[str, dict[str, str]] = {}  # user -> {mechanism: Kafka's text form}
        self._scram: dict[str, dict[str, ScramCredential]] = {}
        self.client_quotas_path = Path(data_dir) / self.CLIENT_QUOTAS_FILE_NAME
        self._client_quotas: dict[str, dict[str, str]] = {}  # entity path -> {quota key: value}
        self.client_quota_listeners: list[ClientQuotaListener] = []
        self._load()
        self._load_scram()
        self._load_client_quotas()
        self.acls_path = Path(data_dir) / self.ACLS_FILE_NAME
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = load_acls_file(self.acls_path)
        self._acl_listeners: list[AclListener] = []
        self._group_configs = GroupConfigFile(data_dir)
        if not self.cluster_id:
            self.cluster_id = _new_cluster_id()
            self._save()

    # -- persistence --------------------------------------------------------------------------
    def _load(self) -> None:
        if not self.path.exists():
            return
        state = json.loads(self.path.read_text())
        self.cluster_id = self.cluster_id or state.get("cluster_id", "")
        self._next_producer_id_block = state.get("next_producer_id_block", 0)
        for t in state.get("topics", []):
            info = TopicInfo(t["name"], uuid.UUID(t["topic_id"]), t["assignment"], dict(t.get("configs", {})))
            self._topics[info.name] = info
            self._by_id[info.topic_id] = info
        if self.broker_configs_path.exists():
            entities = json.loads(self.broker_configs_path.read_text()).get("entities", {})
            self._broker_configs = {str(e): {str(k): str(v) for k, v in c.items()} for e, c in entities.items()}

    def _load_scram(self) -> None:
        if self.scram_credentials_path.exists():
            users = json.loads(self.scram_credentials_path.read_text()).get("users", {})
            self._scram_configs = {str(u): {str(k): str(v) for k, v in c.items()} for u, c in users.items()}
            self._scram = {u: creds for u, c in self._scram_configs.items() if (creds := scram_credentials_of(u, c))}

    def _load_client_quotas(self) -> None:
        if self.client_quotas_path.exists():
            entities = json.loads(self.client_quotas_path.read_text()).get("entities", {})
            self._client_quotas = {str(p): quota_entries({str(k): str(v) for k, v in c.items()})
                                   for p, c in entities.items()}

    def _save(self) -> None:
        state = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id_block": self._next_producer_id_block,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id), "assignment": t.assignment, "configs": t.configs}
                for t in self._topics.values()
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(state, indent=1).encode())

    def _notify(self, name: str, info: TopicInfo | None) -> None:
        for listener in self._listeners:
            listener(name, info)

    # -- reads --------------------------------------------------------------------------------
    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def has_retired_partitions(self) -> bool:
        return False

    def is_retired(self, topic: str, partition: int) -> bool:
        return False  # partition decrease is a cluster operation

    def retired_partitions(self, topic: str) -> set[int]:
        return set()

    def brokers(self) -> list[BrokerInfo]:
        return [self.broker]

    def topics(self) -> dict[str, TopicInfo]:
        return self._topics

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def configs_of(self, name: str) -> dict[str, str] | None:
        info = self._topics.get(name)
        return None if info is None else info.configs

    # -- changes ------------------------------------------------------------------------------
    def create_topic(self, name: str, assignment: list[list[int]], configs: dict[str, str],
                     topic_id: uuid.UUID | None = None) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        validate_assignment(self.brokers(), assignment)
        info = TopicInfo(name, topic_id or _new_topic_id(), [list(r) for r in assignment], dict(configs))
        self._topics[name] = info
        self._by_id[info.topic_id] = info
        self._save()
        self._notify(name, info)
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self._topics.pop(name, None)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
        self._by_id.pop(info.topic_id, None)
        self._save()
        self._notify(name, None)
        return info

    def add_partitions(self, name: str, new_assignment: list[list[int]]) -> TopicInfo:
        info = self._require(name)
        validate_assignment(self.brokers(), info.assignment + new_assignment)
        info.assignment = info.assignment + [list(r) for r in new_assignment]
        self._save()
        self._notify(name, info)
        return info

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        info = self._require(name)
        info.configs = dict(configs)
        self._save()
        self._notify(name, info)
        return info

    def allocate_producer_ids(self, count: int) -> int:
        """First id of a fresh block of `count` producer ids, persisted before it is handed out."""
        start = self._next_producer_id_block
        self._next_producer_id_block = start + count
        self._save()
        return start

    # -- dynamic broker configs ---------------------------------------------------------------------
    def dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's dynamic configs, the cluster-wide default ones)."""
        return (dict(self._broker_configs.get(str(self.broker.node_id), {})),
                dict(self._broker_configs.get(DEFAULT_BROKER_ENTITY, {})))

    def broker_configs(self, entity: str) -> dict[str, str]:
        return dict(self._broker_configs.get(entity, {}))

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace `entity`'s dynamic configs (on disk before anyone hears of them)."""
        updated = {**self._broker_configs, entity: dict(configs)}
        state = {"version": 1, "entities": {e: c for e, c in sorted(updated.items()) if c}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.broker_configs_path, json.dumps(state, indent=1).encode())
        self._broker_configs = updated
        own, default = self.dynamic_broker_configs()
        for listener in self.broker_config_listeners:
            listener(own, default)

    # -- SCRAM credentials ---------------------------------------------------------------------------
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The SASL server's lookup, per authentication (in memory)."""
        return self._scram.get(user, {}).get(mechanism)

    def scram_users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user with a credential: user -> {mechanism: credential}."""
        return {user: dict(creds) for user, creds in self._scram.items()}

    def read_scram_users(self, users: list[str] | None = None) -> dict[str, dict[str, ScramCredential]]:
        """What DescribeUserScramCredentials reads: these users (None: every user) that have credentials."""
        found = self.scram_users()
        return found if users is None else {u: found[u] for u in users if u in found}

    def alter_scram_credentials(self, user: str, upsertions: dict[str, ScramCredential],
                                deletions: Sequence[str] = ()) -> None:
        """Delete then upsert `user`'s credentials (on disk before they are used); a user left
        with no entries is dropped. ResourceNotFoundError for a deletion of a missing credential."""
        config = altered_scram_config(self._scram_configs.get(user, {}), upsertions, list(deletions))
        updated = {**self._scram_configs, user: config}
        state = {"version": 1, "users": {u: c for u, c in sorted(updated.items()) if c}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _write_private(self.scram_credentials_path, json.dumps(state, indent=1).encode())
        self._scram_configs = {u: c for u, c in updated.items() if c}
        remember_credentials(self._scram, user, config)

    # -- client quotas ------------------------------------------------------------------------------
    def client_quota_configs(self) -> dict[str, dict[str, str]]:
        """Every entity's quotas: entity path -> {key: value as stored}."""
        return {path: dict(c) for path, c in self._client_quotas.items() if c}

    def read_client_quotas(self) -> dict[str, dict[str, str]]:
        """What DescribeClientQuotas reads."""
        return self.client_quota_configs()

    def alter_client_quotas(self, path: str, changes: dict[str, str | None]) -> None:
        """Set (a string) or remove (None) an entity's quota keys; on disk before they apply, then
        the listeners (the broker's quota managers) hear of every entity's quotas."""
        config = altered_quota_config(self._client_quotas.get(path, {}), changes)
        updated = {p: c for p, c in {**self._client_quotas, path: config}.items() if c}
        state = {"version": 1, "entities": dict(sorted(updated.items()))}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.client_quotas_path, json.dumps(state, indent=1).encode())
        self._client_quotas = updated
        for listener in self.client_quota_listeners:
            listener(self.client_quota_configs())

    # -- per-group configs ---------------------------------------------------------------------------
    def group_configs(self, group: str) -> dict[str, str]:
        return self._group_configs.configs(group)

    def read_group_configs(self, group: str) -> dict[str, str]:
        return self._group_configs.configs(group)

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """Replace `group`'s configs (on disk before the coordinator uses them)."""
        self._group_configs.set(group, configs)

    # -- ACLs ----------------------------------------------------------------------------------------
    def acls(self) -> list[AclBinding]:
        """Every ACL (the authorizer's and DescribeAcls's source)."""
        return [AclBinding(p, e) for p, entries in self._acls.items() for e in entries]

    def add_acl_listener(self, listener: AclListener) -> None:
        self._acl_listeners.append(listener)

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        """Add the bindings (validated by the caller); on disk before anyone is told. One result per
        binding: None, or the error that kept it out (all of them, here: the file is one write)."""
        updated = dict(self._acls)
        for b in bindings:
            updated[b.pattern] = updated.get(b.pattern, frozenset()) | {b.entry}
        if updated != self._acls:
            self._write_acls(updated)
        return [None] * len(bindings)

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what the filters match; per filter, the bindings it removed (a binding several
        filters match is the first one's, as Kafka's AclAuthorizer reports it)."""
        filters = list(filters)
        plan = plan_deletions(self._acls, filters)
        out: list[list[AclBinding]] = [[] for _ in filters]
        if not plan:
            return out
        updated = dict(self._acls)
        for pattern, removed in plan.items():
            left = updated[pattern] - removed.keys()
            if left:
                updated[pattern] = left
            else:
                del updated[pattern]
            for entry, index in sorted(removed.items(), key=lambda kv: entry_order(kv[0])):
                out[index].append(AclBinding(pattern, entry))
        self._write_acls(updated)
        return out

    def _write_acls(self, updated: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.acls_path, encode_acls_file(updated))
        self._acls = updated
        bindings = self.acls()
        for listener in self._acl_listeners:
            listener(bindings)

    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
        return info


def encode_acls_file(acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> bytes:
    """`kbroker-acls.json`: `{"version": 1, "resources": [{"resourceType": "Topic", "patternType":
    "LITERAL", "name": "orders", "acls": [<Kafka's ACL znode entries>]}]}`."""
    resources = [{"resourceType": name_of(p.resource_type), "patternType": p.pattern_type.name, "name": p.name,
                  "acls": [entry_to_json(e) for e in sorted(entries, key=entry_order)]}
                 for p, entries in sorted(acls.items(), key=lambda kv: pattern_order(kv[0])) if entries]
    return json.dumps({"version": 1, "resources": resources}, indent=1).encode()


def load_acls_file(path: Path) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    """The ACLs of `kbroker-acls.json` ({} when there is none); an entry or resource that cannot be
    read is left out with a warning, the others load."""
    if not path.exists():
        return {}
    out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for item in json.loads(path.read_text()).get("resources", []):
        pattern = ResourcePattern(parse_resource_type(str(item.get("resourceType", ""))), str(item.get("name", "")),
                                  parse_pattern_type(str(item.get("patternType", ""))))
        if pattern.is_unknown or not pattern.pattern_type.is_specific or int(pattern.resource_type) < 2:
            logger.warning("%s: ignoring ACLs of an unknown resource %r", path.name, item)
            continue
        entries = set()
        for raw in item.get("acls", []):
            entry = entry_from_json(raw)
            if entry is None:
                logger.warning("%s: ignoring an invalid ACL entry of %s: %r", path.name, pattern, raw)
            else:
                entries.add(entry)
        if entries:
            out[pattern] = out.get(pattern, frozenset()) | entries
    return out


def _write_private(path: Path, data: bytes) -> None:
    """write_atomically's temp file, fsync and rename, for a file only its owner may read (the
    stored and server keys of SCRAM credentials)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)  # a left-over temp file keeps its own mode: start afresh
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _new_topic_id() -> uuid.UUID:
    while True:  # Kafka never hands out the zero uuid nor one whose base64 starts with '-'
        topic_id = uuid.uuid4()
        if not uuid_to_base64(topic_id).startswith("-"):
            return topic_id


def uuid_to_base64(value: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _new_cluster_id() -> str:
    return uuid_to_base64(uuid.uuid4())
