"""Kafka's ZooKeeper-mode layout: znode paths and their JSON payloads, byte-compatible with Kafka.

Pure functions only (no kazoo, no I/O), so an operator who knows Kafka can read a kbroker cluster's
ZooKeeper tree and the controller's logic can be tested without a server. Payload formats follow
Kafka's `ZkData.scala`: broker registration v5, topic assignment v3 (with `topic_id`), partition
state v1, config v1, config change notification v2, producer id block v1, log dir event v1,
ACLs v1 (`/kafka-acl...`) and their change notifications.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field

from kbroker.security import acl


class ZkError(Exception):
    """A ZooKeeper operation failed (connection loss, session expiry, ...)."""


class NoNodeError(ZkError):
    pass


class NodeExistsError(ZkError):
    pass


class BadVersionError(ZkError):
    """A conditional write lost: someone else changed the znode first (the fencing rule)."""


class NotEmptyError(ZkError):
    pass


# -- paths ------------------------------------------------------------------------------------------
CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"

# persistent paths every cluster has (Kafka's ZkData.PersistentZkPaths)
PERSISTENT_PATHS = (
    "/consumers", BROKER_IDS, BROKER_TOPICS, CONFIG_CHANGES, "/config/clients", CONFIG_BROKERS, CONFIG_TOPICS,
    "/config/users", "/config/ips", DELETE_TOPICS, BROKER_SEQID, ISR_CHANGE_NOTIFICATION, LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


DEFAULT_BROKER_ENTITY = "<default>"  # /config/brokers/<default>: dynamic configs of every broker


def broker_config_path(entity: str) -> str:
    """`/config/brokers/<id>` (one broker's dynamic configs) or `/config/brokers/<default>`."""
    return f"{CONFIG_BROKERS}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


CONFIG_USERS = "/config/users"  # /config/users/<sanitized user>: SCRAM credentials (and quotas) per user


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user name as a znode name (Java's URLEncoder over UTF-8, then
    `*` as %2A and space as %20: letters, digits, `.`, `-` and `_` stay, the rest is %XX)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (URLDecoder: `+` is a space)."""
    return urllib.parse.unquote_plus(name)


def user_config_path(user: str) -> str:
    return f"{CONFIG_USERS}/{sanitize(user)}"


CONFIG_CLIENTS = "/config/clients"  # /config/clients/<sanitized client id>: client-id quotas


def quota_config_path(entity_path: str) -> str:
    """A client quota entity's znode: `/config/users/<u>`, `/config/clients/<c>` or
    `/config/users/<u>/clients/<c>` (names sanitized, `<default>` for the defaults)."""
    return f"/config/{entity_path}"


CONFIG_GROUPS = "/config/groups"  # /config/groups/<sanitized group id>: a group's configs (KIP-848)


def group_znode_name(group: str) -> str:
    """A group id as a znode name: sanitized as user names are, and `.`/`..` (no znode may be
    called that) spelled %2E."""
    name = sanitize(group)
    return name.replace(".", "%2E") if name in (".", "..") else name


def group_config_path(group: str) -> str:
    return f"{CONFIG_GROUPS}/{group_znode_name(group)}"


def quota_config_change(entity_path: str) -> bytes:
    """The `/config/changes` notification of a quota entity (Kafka's entity_path is the same path)."""
    entity_type, _, name = entity_path.partition("/")
    return encode_config_change(entity_type, name)


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _parse(data: bytes | None) -> dict:
    if not data:
        return {}
    value = json.loads(data)
    return value if isinstance(value, dict) else {}


def _now_ms() -> str:
    return str(time.time_ns() // 1_000_000)


# -- uuids: Kafka writes them in its url-safe base64 form ------------------------------------------
def uuid_to_kafka(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def uuid_from_kafka(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# -- /cluster/id ------------------------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_parse(data).get("id", ""))


# -- /brokers/ids/<id> ------------------------------------------------------------------------------
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol ids


@dataclass(frozen=True)
class BrokerRegistration:
    """A broker's `/brokers/ids/<id>`: `host`/`port` are the address of the listener the reader
    connects on (inter-broker or control plane), `endpoints` every listener's (name, protocol,
    host, port)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1  # the registration znode's czxid: a restarted broker gets a new one
    endpoints: tuple[tuple[str, str, str, int], ...] = ()  # none given: one PLAINTEXT listener at host:port

    def __post_init__(self) -> None:
        if not self.endpoints:
            object.__setattr__(self, "endpoints", (("PLAINTEXT", "PLAINTEXT", self.host, self.port),))

    @property
    def endpoint(self) -> str:
        return f"PLAINTEXT://{self.host}:{self.port}"

    def all_endpoints(self) -> tuple[tuple[str, str, str, int], ...]:
        return self.endpoints


def encode_broker(reg: BrokerRegistration) -> bytes:
    """Kafka's version 5 registration; its top-level host and port are the PLAINTEXT listener's
    (null and -1 when there is none), as Kafka writes them."""
    endpoints = reg.all_endpoints()
    plain = next(((h, p) for _n, protocol, h, p in endpoints if protocol == "PLAINTEXT"), (None, -1))
    payload: dict = {
        "features": {},
        "listener_security_protocol_map": {name: protocol for name, protocol, _h, _p in endpoints},
        "endpoints": [f"{name}://{host}:{port}" for name, _protocol, host, port in endpoints],
        "jmx_port": -1,
        "port": plain[1],
        "host": plain[0],
        "version": 5,
        "timestamp": _now_ms(),
    }
    if reg.rack is not None:
        payload["rack"] = reg.rack
    return _json(payload)


def decode_broker(broker_id: int, data: bytes, epoch: int = -1, listener: str | None = None) -> BrokerRegistration:
    """`listener` names the endpoint whose address becomes host/port (default: the PLAINTEXT one)."""
    payload = _parse(data)
    protocols = payload.get("listener_security_protocol_map") or {}
    endpoints = []
    for endpoint in payload.get("endpoints", []):
        name, _, address = str(endpoint).partition("://")
        h, _, p = address.rpartition(":")
        if p.isdigit():
            endpoints.append((name, str(protocols.get(name, name)), h.strip("[]"), int(p)))
    chosen = next((e for e in endpoints if e[0] == listener), None) if listener else None
    if chosen is None:
        chosen = next((e for e in endpoints if e[1] == "PLAINTEXT"), None)
    host, port = (chosen[2], chosen[3]) if chosen else (payload.get("host"), payload.get("port"))
    return BrokerRegistration(broker_id, str(host or ""), int(port if port is not None else -1), payload.get("rack"),
                              epoch, tuple(endpoints))


# -- /controller, /controller_epoch -----------------------------------------------------------------
def encode_controller(broker_id: int) -> bytes:
    return _json({"version": 2, "brokerid": broker_id, "timestamp": _now_ms(), "kraftControllerEpoch": -1})


def decode_controller(data: bytes | None) -> int:
    try:
        return int(_parse(data).get("brokerid", -1))
    except (ValueError, TypeError):
        return -1


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode().strip())


# -- /brokers/topics/<t> ----------------------------------------------------------------------------
@dataclass
class TopicAssignment:
    topic: str
    topic_id: uuid.UUID | None
    partitions: dict[int, list[int]]  # partition -> replicas, preferred leader first
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)
    # kbroker's own: after a partition decrease, the count clients see; partitions from it on are
    # retiring (hosted and replicated, no longer advertised, refusing appends)
    active: int | None = None
    # retired partitions whose leader found them drained and emptied by retention: the controller
    # removes them once every retired partition is listed (kbroker's own key, like `active`)
    removable: tuple[int, ...] = ()

    def is_retiring(self, partition: int) -> bool:
        return self.active is not None and partition >= self.active

    def as_list(self) -> list[list[int]]:
        return [self.partitions[p] for p in sorted(self.partitions)]


def encode_topic(assignment: TopicAssignment) -> bytes:
    payload: dict = {
        "version": 3,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted(assignment.adding.items())},
        "removing_replicas": {str(p): list(r) for p, r in sorted(assignment.removing.items())},
    }
    if assignment.topic_id is not None:
        payload["topic_id"] = uuid_to_kafka(assignment.topic_id)
    if assignment.active is not None:
        payload["active_partitions"] = assignment.active  # kbroker's own key; Kafka ignores unknown keys
    if assignment.removable:
        payload["removable_partitions"] = sorted(assignment.removable)
    return _json(payload)


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    payload = _parse(data)
    topic_id = payload.get("topic_id")

    def replicas(key: str) -> dict[int, list[int]]:
        return {int(p): [int(b) for b in r] for p, r in (payload.get(key) or {}).items()}

    active = payload.get("active_partitions")
    return TopicAssignment(topic, uuid_from_kafka(topic_id) if topic_id else None, replicas("partitions"),
                           replicas("adding_replicas"), replicas("removing_replicas"),
                           int(active) if active is not None else None,
                           tuple(int(p) for p in payload.get("removable_partitions") or ()))


# -- /brokers/topics/<t>/partitions/<p>/state ---------------------------------------------------------
NO_LEADER = -1


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int = 0  # the state znode's version: every change bumps it

    def with_(self, **changes) -> "LeaderAndIsr":
        from dataclasses import replace

        return replace(self, **changes)


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    return _json({"controller_epoch": state.controller_epoch, "leader": state.leader, "version": 1,
                  "leader_epoch": state.leader_epoch, "isr": list(state.isr)})


def decode_partition_state(data: bytes, version: int) -> LeaderAndIsr:
    payload = _parse(data)
    return LeaderAndIsr(int(payload["leader"]), int(payload["leader_epoch"]), tuple(int(b) for b in payload["isr"]),
                        int(payload["controller_epoch"]), version)


# -- /config/topics/<t>, /config/brokers/<id>, /config/changes --------------------------------------
def encode_config(config: dict[str, str]) -> bytes:
    return _json({"version": 1, "config": dict(config)})


def decode_config(data: bytes | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (_parse(data).get("config") or {}).items()}


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    return _json({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def decode_config_change(data: bytes) -> tuple[str, str] | None:
    entity_type, sep, name = str(_parse(data).get("entity_path", "")).partition("/")
    return (entity_type, name) if sep else None


# -- /latest_producer_id_block ----------------------------------------------------------------------
def encode_producer_id_block(broker_id: int, start: int, size: int) -> bytes:
    return _json({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(start + size - 1)})


def next_producer_id_block_start(data: bytes | None) -> int:
    payload = _parse(data)
    return int(payload["block_end"]) + 1 if "block_end" in payload else 0


# -- /log_dir_event_notification/log_dir_event_<seq> ------------------------------------------------
LOG_DIR_FAILURE_EVENT = 1  # the only event Kafka defines


def log_dir_event_path(name: str = "") -> str:
    """A notification's path from its child name; with no name, the prefix a sequential create takes."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{name or LOG_DIR_EVENT_PREFIX}"


def encode_log_dir_event(broker_id: int) -> bytes:
    return _json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int | None:
    """The broker a notification names; None for one that cannot be read (it is deleted unread)."""
    try:
        broker = _parse(data).get("broker")
    except ValueError:
        return None
    return broker if isinstance(broker, int) and not isinstance(broker, bool) else None


# -- ACLs: /kafka-acl, /kafka-acl-extended, and their change notifications (Kafka's ZkData) ----------
# A pattern's entries live in one znode per resource: `/kafka-acl/<Type>/<name>` for LITERAL patterns,
# `/kafka-acl-extended/prefixed/<Type>/<name>` for PREFIXED ones (the type in Kafka's PascalCase:
# Topic, Group, Cluster, TransactionalId, DelegationToken, User; the name as it is: names holding '/'
# are refused). Every change adds a sequential notification naming the pattern: under
# `/kafka-acl-changes` as `TOPIC:<name>` text for a literal one, under `/kafka-acl-extended-changes`
# as JSON for the others.
ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


def acl_store_path(pattern_type) -> str:
    """The root of a pattern type's ACL znodes (ZkAclStore.aclPath)."""
    if pattern_type == acl.PatternType.LITERAL:
        return ACL_PATH
    return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"


def acl_paths() -> tuple[str, ...]:
    """What KafkaZkClient.createAclPaths makes: each store's root and its resource types, and the
    two change paths."""
    out = []
    for pattern_type in (acl.PatternType.LITERAL, acl.PatternType.PREFIXED):
        root = acl_store_path(pattern_type)
        out.append(root)
        out += [f"{root}/{acl.name_of(t)}" for t in acl.CONCRETE_RESOURCE_TYPES]
    return (*out, ACL_CHANGES, EXTENDED_ACL_CHANGES)


def acl_resource_path(pattern) -> str:
    """`/kafka-acl/Topic/orders`, `/kafka-acl-extended/prefixed/Group/team-` (ResourceZNode.path)."""
    return f"{acl_store_path(pattern.pattern_type)}/{acl.name_of(pattern.resource_type)}/{pattern.name}"


def encode_acls(entries) -> bytes:
    """A resource's ACL znode: `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
    "operation":"Read","host":"*"}]}` (AclEntry.toJsonCompatibleMap), entries in a stable order."""
    return _json({"version": 1, "acls": [acl.entry_to_json(e) for e in sorted(entries, key=acl.entry_order)]})


def decode_acls(data: bytes | None) -> tuple[set, list[str]]:
    """(the entries of a resource's ACL znode, why entries were left out). Kafka refuses a znode of
    another version; an entry with an unknown operation or permission, or a principal that is not
    `Type:name`, is left out here (Kafka would fail to load it) rather than failing the rest."""
    payload = _parse(data)
    if not payload:
        return set(), []
    if payload.get("version") != 1:
        return set(), [f"unsupported ACL znode version {payload.get('version')!r}"]
    entries, skipped = set(), []
    for item in payload.get("acls") or []:
        entry = acl.entry_from_json(item)
        if entry is None:
            skipped.append(f"invalid ACL entry {item!r}")
        else:
            entries.add(entry)
    return entries, skipped


def acl_change_path(pattern) -> str:
    """The prefix a pattern's change notification is created under (sequential)."""
    parent = ACL_CHANGES if pattern.pattern_type == acl.PatternType.LITERAL else EXTENDED_ACL_CHANGES
    return f"{parent}/{ACL_CHANGE_PREFIX}"


def encode_acl_change(pattern) -> bytes:
    """LiteralAclChangeStore: `TOPIC:orders` (the type's enum name); ExtendedAclChangeStore:
    `{"version":1,"resourceType":"TOPIC","name":"team-","patternType":"PREFIXED"}`."""
    if pattern.pattern_type == acl.PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return _json({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                  "patternType": pattern.pattern_type.name})


def decode_acl_change(parent: str, data: bytes | None):
    """The pattern a notification under `parent` names; None for one that cannot be read."""

    def resource_type(text: str):  # ResourceType.fromString: the enum name, any case
        return acl.ResourceType.__members__.get(text.upper(), acl.ResourceType.UNKNOWN)

    try:
        if parent == ACL_CHANGES:
            rtype, sep, name = (data or b"").decode("utf-8").partition(":")
            pattern = acl.ResourcePattern(resource_type(rtype), name, acl.PatternType.LITERAL) if sep else None
        else:
            payload = _parse(data)
            if int(payload.get("version", 0)) > 1 or "name" not in payload:
                return None
            pattern = acl.ResourcePattern(resource_type(str(payload.get("resourceType", ""))), str(payload["name"]),
                                          acl.PatternType.__members__.get(str(payload.get("patternType", "")),
                                                                          acl.PatternType.UNKNOWN))
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    if pattern is None or pattern.is_unknown or not pattern.pattern_type.is_specific \
            or pattern.resource_type == acl.ResourceType.ANY:
        return None
    return pattern
