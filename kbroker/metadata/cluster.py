"""Cluster-mode metadata: this broker's cache of the cluster (as the controller tells it) and the
administrative writes that go to ZooKeeper.

Reads (`brokers`, `topics`, `partition_state`, ...) come from the `MetadataCache` the controller
keeps current with UpdateMetadata, so every broker answers Metadata alike without watching
partition znodes. Writes follow Kafka's AdminZkClient: a topic is created by writing
`/config/topics/<t>` then `/brokers/topics/<t>` (the controller notices and elects leaders), grown
by rewriting its assignment, deleted by `/admin/delete_topics/<t>`, reconfigured through
`/config/topics/<t>` plus a `/config/changes` notification that every broker watches. Dynamic
broker configs (the replication throttle rates) live in `/config/brokers/<id>` and
`/config/brokers/<default>`, changed the same way. Producer id blocks come from
`/latest_producer_id_block` with conditional writes. A failed log dir is reported to the controller
with a `/log_dir_event_notification` sequential znode (Kafka's propagateLogDirEvent). SCRAM
credentials are `/config/users/<url-encoded user>` (Kafka's user config: mechanism -> credential
text), all read at start, written with conditional writes plus a `users/<user>` notification, and
re-read by every broker when it hears of one (the in-memory copy the SASL server looks up).
Client quotas live in the same znodes (`/config/users/<u>`, beside a user's credentials),
`/config/clients/<c>` and `/config/users/<u>/clients/<c>`, read at start and re-read per
notification (`users/<u>`, `clients/<c>`, `users/<u>/clients/<c>`).
ACLs are Kafka's AclAuthorizer znodes: `/kafka-acl/<Type>/<name>` (literal patterns) and
`/kafka-acl-extended/prefixed/<Type>/<name>`, all read at start, each written with a conditional
write on the version read (retried on a conflict, as AclAuthorizer.updateResourceAcls) followed by
a sequential notification in `/kafka-acl-changes` or `/kafka-acl-extended-changes`; every broker
watches both and re-reads the pattern a notification names, then tells its ACL listeners.
Per-group configs are `/config/groups/<group>` with `groups/<group>` notifications
(kbroker/metadata/group_configs.py holds that code; this store delegates).
"""

from __future__ import annotations

import functools
import logging
import random
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import trio

from kbroker.errors import (
    InvalidPartitionsError,
    RequestTimedOutError,
    StaleControllerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kbroker.metadata import notifications
from kbroker.metadata.group_configs import ZkGroupConfigs
from kbroker.metadata.store import (
    BrokerInfo,
    ClientQuotaListener,
    MetadataListener,
    TopicInfo,
    _new_cluster_id,
    _new_topic_id,
    altered_quota_config,
    altered_scram_config,
    quota_entries,
    scram_credentials_of,
)
from kbroker.security.acl import (
    AccessControlEntry,
    AclBinding,
    PatternType,
    ResourcePattern,
    entries_to_delete,
    entry_order,
    parse_resource_type,
    touched_patterns,
)
from kbroker.security.credentials import ScramCredential
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.session import ZkSession

logger = logging.getLogger(__name__)

LEADER_DURING_DELETE = -2


@dataclass(frozen=True)
class PartitionMetadata:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    partition_epoch: int = 0


class ClusterMetadataStore:
    """The `MetadataStore` of a broker in a ZooKeeper cluster (writes are async here)."""

    def __init__(self, session: ZkSession, broker: BrokerInfo, inter_broker_listener: str | None = None) -> None:
        self.session = session
        self.listener = inter_broker_listener  # whose address BrokerInfo.host/port give
        self.zk = session.client
        self.me = broker
        self.cluster_id = ""
        self.controller_id = -1
        self.controller_epoch = -1
        self.broker_epoch = -1
        self._brokers: dict[int, BrokerInfo] = {}
        self._partitions: dict[str, dict[int, PartitionMetadata]] = {}
        # bumped by every change of a partition's state or of the live brokers: what is built from
        # them (a topic's Metadata partitions) may be reused while it stands
        self.generation = 0
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._retired: dict[str, set[int]] = {}  # partitions of a decrease: hidden, refusing appends
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}  # this broker's and <default> dynamic configs
        self.broker_config_listeners: list[Callable[[dict[str, str], dict[str, str]], None]] = []
        self._listeners: list[MetadataListener] = []
        self._changed = trio.Event()
        self.first_update = trio.Event()  # set by the first UpdateMetadata from a controller
        self._last_config_change = ""
        self._scram: dict[str, dict[str, ScramCredential]] = {}  # user -> mechanism -> credential
        self._client_quotas: dict[str, dict[str, str]] = {}  # entity path -> {quota key: value}
        self.client_quota_listeners: list[ClientQuotaListener] = []
        # ACLs: pattern -> (entries, the znode's version), as last read or written
        self._acls: dict[ResourcePattern, tuple[frozenset[AccessControlEntry], int]] = {}
        self._acl_listeners: list[Callable[[list[AclBinding]], None]] = []
        self._last_acl_change = {zk.ACL_CHANGES: "", zk.EXTENDED_ACL_CHANGES: ""}
        self._acl_lock = trio.Lock()  # one ACL write (or reload) at a time on this broker
        self._group_configs = ZkGroupConfigs(session)

    # -- start-up -----------------------------------------------------------------------------------
    async def start(self, wanted_cluster_id: str | None) -> None:
        for path in zk.PERSISTENT_PATHS:
            await self.session.call(self.zk.ensure_path, path)
        self.cluster_id = await self._cluster_id(wanted_cluster_id)
        await self._watch_config_changes(initial=True)
        await self._load_broker_configs(self._broker_entities)
        await self._load_scram_users()
        await self._load_client_quotas()
        await self._group_configs.load_all()
        await self._start_acls()

    async def _cluster_id(self, wanted: str | None) -> str:
        try:
            data, _ = await self.session.call(self.zk.get, zk.CLUSTER_ID)
            return zk.decode_cluster_id(data)
        except zk.NoNodeError:
            pass
        try:
            cluster_id = wanted or _new_cluster_id()
            await self.session.call(self.zk.create, zk.CLUSTER_ID, zk.encode_cluster_id(cluster_id), makepath=True)
            return cluster_id
        except zk.NodeExistsError:
            data, _ = await self.session.call(self.zk.get, zk.CLUSTER_ID)
            return zk.decode_cluster_id(data)

    async def register(self, timeout_s: float) -> int:
        """Create `/brokers/ids/<id>` (ephemeral); a node left by this broker's previous, dead
        session is waited out (it vanishes when that session expires). Returns the broker epoch."""
        b = self.me
        data = zk.encode_broker(zk.BrokerRegistration(b.node_id, b.host, b.port, b.rack, endpoints=b.endpoints))
        path = zk.broker_path(b.node_id)
        with trio.fail_after(timeout_s):
            while True:
                try:
                    await self.session.call(self.zk.create, path, data, ephemeral=True)
                    break
                except zk.NodeExistsError:
                    try:
                        _, stat = await self.session.call(self.zk.get, path)
                    except zk.NoNodeError:
                        continue
                    if stat.ephemeral_owner == self.zk.session_id:
                        break
                    logger.info("broker id %d is still registered by an older session; waiting for it to expire",
                                b.node_id)
                    await trio.sleep(0.5)
        _, stat = await self.session.call(self.zk.get, path)
        self.broker_epoch = stat.czxid
        logger.info("registered broker %d at %s:%d (epoch %d)", b.node_id, b.host, b.port, stat.czxid)
        return stat.czxid

    # -- MetadataStore reads -----------------------------------------------------------------------
    def has_retired_partitions(self) -> bool:
        return bool(self._retired)

    def is_retired(self, topic: str, partition: int) -> bool:
        """A partition a decrease took out of the topic: still hosted and readable, never appended to."""
        retired = self._retired.get(topic)
        return retired is not None and partition in retired

    def retired_partitions(self, topic: str) -> set[int]:
        return set(self._retired.get(topic, ()))

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def brokers(self) -> list[BrokerInfo]:
        return sorted(self._brokers.values(), key=lambda b: b.node_id)

    async def registered_brokers(self) -> list[BrokerInfo]:
        """The brokers registered in ZooKeeper now (Kafka's AdminZkClient places replicas on
        these, not on a cache that a broker just started may not have filled yet)."""
        ids = await self.session.call(self.zk.children, zk.BROKER_IDS)
        ids = sorted(int(i) for i in ids if i.isdigit())
        results = await self.session.call(self.zk.get_many, [zk.broker_path(i) for i in ids])
        out = []
        for broker_id, result in zip(ids, results):
            if result is not None:
                reg = zk.decode_broker(broker_id, result[0], listener=self.listener)
                out.append(BrokerInfo(reg.broker_id, reg.host, reg.port, reg.rack, reg.endpoints))
        return out

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._brokers.get(broker_id)

    def topics(self) -> dict[str, TopicInfo]:
        return self._topics

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def partition_state(self, topic: str, partition: int) -> PartitionMetadata | None:
        return self._partitions.get(topic, {}).get(partition)

    def leader_of(self, topic: str, partition: int) -> BrokerInfo | None:
        state = self.partition_state(topic, partition)
        return None if state is None else self._brokers.get(state.leader)

    async def wait_for_first_update(self, timeout_s: float) -> None:
        """A broker that has just joined knows no brokers or controller until the controller's first
        UpdateMetadata (a few ms after registration); a client asking then would learn nothing and
        librdkafka's admin client waits for a controller it never hears of, so Metadata waits."""
        with trio.move_on_after(timeout_s):
            await self.first_update.wait()

    async def wait_for_change(self, timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            await self._changed.wait()

    # -- UpdateMetadata -----------------------------------------------------------------------------
    def check_controller_epoch(self, controller_id: int, epoch: int) -> None:
        if epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"controller {controller_id} epoch {epoch} is older than the current {self.controller_epoch}")
        self.controller_epoch = epoch
        self.controller_id = controller_id

    def note_leader_and_isr(self, request: Any) -> None:
        """A LeaderAndIsr's newer leaders go into the cache at once (the UpdateMetadata that
        follows says the same a moment later): a client asking right after this broker changed
        role must not be sent back to the old leader."""
        for topic in request.topic_states:
            partitions = self._partitions.get(topic.topic_name)
            if not partitions:
                continue
            for p in topic.partition_states:
                cached = partitions.get(p.partition_index)
                if cached is not None and p.leader_epoch > cached.leader_epoch:
                    self.generation += 1
                    partitions[p.partition_index] = PartitionMetadata(
                        p.leader, p.leader_epoch, tuple(p.isr), tuple(p.replicas),
                        tuple(r for r in p.replicas if r not in self._brokers), p.partition_epoch)

    def apply_update_metadata(self, request: Any) -> list[str]:
        """Apply an UpdateMetadata request; returns the topics whose configs must still be loaded."""
        self.check_controller_epoch(request.controller_id, request.controller_epoch)
        brokers = {}
        names = {v: k for k, v in zk.SECURITY_PROTOCOL_IDS.items()}
        for b in request.live_brokers:
            endpoints = tuple((e.listener, names.get(e.security_protocol, "PLAINTEXT"), e.host, e.port)
                              for e in b.endpoints)
            chosen = next((e for e in endpoints if e[0] == self.listener), None) or next(iter(endpoints), None)
            if chosen is not None:
                brokers[b.id_] = BrokerInfo(b.id_, chosen[2], chosen[3], b.rack, endpoints)
        self._brokers = brokers
        self.generation += 1
        touched: set[str] = set()
        for topic in request.topic_states:
            name = topic.topic_name
            touched.add(name)
            if topic.topic_id is not None and topic.topic_id.int != 0:
                self._topic_ids[name] = topic.topic_id
            partitions = self._partitions.setdefault(name, {})
            for p in topic.partition_states:
                if p.leader == LEADER_DURING_DELETE:  # the topic is being deleted, or the partition retires
                    partitions.pop(p.partition_index, None)
                    self._retired.setdefault(name, set()).add(p.partition_index)
                    continue
                self._retired.get(name, set()).discard(p.partition_index)
                partitions[p.partition_index] = PartitionMetadata(
                    p.leader, p.leader_epoch, tuple(p.isr), tuple(p.replicas), tuple(p.offline_replicas), p.zk_version)
        missing = []
        for name in touched:
            if not self._partitions.get(name):
                self._partitions.pop(name, None)
                self._drop_topic(name)
            else:
                self._refresh_topic(name)
                if name not in self._configs:
                    missing.append(name)
        self._changed.set()
        self._changed = trio.Event()
        self.first_update.set()
        return missing

    def _refresh_topic(self, name: str) -> None:
        partitions = self._partitions[name]
        assignment = [list(partitions[p].replicas) if p in partitions else [] for p in range(max(partitions) + 1)]
        topic_id = self._topic_ids.get(name) or uuid.UUID(int=0)
        info = self._topics.get(name)
        if info is None or info.topic_id != topic_id:
            if info is not None:
                self._by_id.pop(info.topic_id, None)
            info = TopicInfo(name, topic_id, assignment, dict(self._configs.get(name, {})))
            self._topics[name] = info
            self._by_id[topic_id] = info
        else:
            info.assignment = assignment
        self._notify(name, info)

    def _drop_topic(self, name: str) -> None:
        info = self._topics.pop(name, None)
        self._topic_ids.pop(name, None)
        self._retired.pop(name, None)
        self._configs.pop(name, None)
        if info is not None:
            self._by_id.pop(info.topic_id, None)
            self._notify(name, None)

    def _notify(self, name: str, info: TopicInfo | None) -> None:
        for listener in self._listeners:
            try:
                listener(name, info)
            except Exception:
                logger.exception("metadata listener failed for %s", name)

    # -- topic configs ------------------------------------------------------------------------------
    async def load_configs(self, topics: list[str]) -> None:
        topics = [t for t in topics if t not in self._configs]
        if not topics:
            return
        results = await self.session.call(self.zk.get_many, [zk.topic_config_path(t) for t in topics])
        for topic, result in zip(topics, results):
            self._configs[topic] = zk.decode_config(result[0] if result else None)
            info = self._topics.get(topic)
            if info is not None:
                info.configs = dict(self._configs[topic])
                self._notify(topic, info)

    def configs_of(self, topic: str) -> dict[str, str] | None:
        return self._configs.get(topic)

    async def _watch_config_changes(self, initial: bool = False) -> None:
        changes = sorted(await self.session.call(
            self.zk.children, zk.CONFIG_CHANGES, self.session.watch(self._config_changes_fired)))
        if initial:  # configs are read fresh at start; only later notifications matter
            self._last_config_change = changes[-1] if changes else ""
            return
        new = [c for c in changes if c > self._last_config_change]
        if not new:
            return
        self._last_config_change = new[-1]
        await notifications.purge(self.session, self.zk, zk.CONFIG_CHANGES, changes[:len(changes) - len(new)],
                                  self._last_config_change)
        results = await self.session.call(self.zk.get_many, [f"{zk.CONFIG_CHANGES}/{c}" for c in new])
        topics = set()
        brokers = set()
        users = set()
        quota_paths = set()
        groups = set()
        for result in results:
            entity = zk.decode_config_change(result[0]) if result else None
            if entity and entity[0] in ("users", "clients"):  # a user's or client's quotas may have changed
                quota_paths.add(f"{entity[0]}/{entity[1]}")
            if entity and entity[0] == "groups":
                groups.add(entity[1])
            if entity and entity[0] == "topics":
                topics.add(entity[1])
            elif entity and entity[0] == "brokers" and entity[1] in self._broker_entities:
                brokers.add(entity[1])
            elif entity and entity[0] == "users" and "/" not in entity[1]:  # not a <user>/clients/<id> quota
                users.add(entity[1])
        if users:
            found = await self._load_scram_users(sorted(users))
            for name in sorted(users):  # names and mechanisms only, never a credential
                user = zk.desanitize(name)
                logger.info("SCRAM credentials of user %r reloaded after a change: %s", user,
                            ", ".join(found.get(user, {})) or "none")
        if quota_paths:
            await self._load_client_quotas(sorted(quota_paths))
        await self._group_configs.reload(sorted(groups))
        for topic in topics:
            self._configs.pop(topic, None)
        await self.load_configs(sorted(t for t in topics if t in self._topics))
        if brokers:
            await self._load_broker_configs(sorted(brokers))

    def _config_changes_fired(self) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._safe_watch_config_changes)

    _nursery: trio.Nursery | None = None

    def attach(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    async def _safe_watch_config_changes(self) -> None:
        try:
            await self._watch_config_changes()
        except zk.ZkError as exc:
            logger.warning("reading config changes failed: %s", exc)

    # -- dynamic broker configs -----------------------------------------------------------------------
    @property
    def _broker_entities(self) -> list[str]:
        return [str(self.me.node_id), zk.DEFAULT_BROKER_ENTITY]

    def dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's dynamic configs, the cluster-wide default ones), as last read."""
        return (dict(self._broker_configs.get(str(self.me.node_id), {})),
                dict(self._broker_configs.get(zk.DEFAULT_BROKER_ENTITY, {})))

    async def _load_broker_configs(self, entities: list[str]) -> None:
        results = await self.session.call(self.zk.get_many, [zk.broker_config_path(e) for e in entities])
        for entity, result in zip(entities, results):
            self._broker_configs[entity] = zk.decode_config(result[0] if result else None)
        self._notify_broker_configs()

    def _notify_broker_configs(self) -> None:
        own, default = self.dynamic_broker_configs()
        for listener in self.broker_config_listeners:
            try:
                listener(own, default)
            except Exception:
                logger.exception("broker config listener failed")

    async def broker_configs(self, entity: str) -> dict[str, str]:
        """The dynamic configs stored for `entity` (a broker id or `<default>`), read from ZooKeeper."""
        try:
            data, _ = await self.session.call(self.zk.get, zk.broker_config_path(entity))
        except zk.NoNodeError:
            return {}
        return zk.decode_config(data)

    async def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Kafka's AdminZkClient.changeBrokerConfig: the entity's configs, then a notification."""
        path, data = zk.broker_config_path(entity), zk.encode_config(configs)
        try:
            await self.session.call(self.zk.set, path, data)
        except zk.NoNodeError:
            try:
                await self.session.call(self.zk.create, path, data, makepath=True)
            except zk.NodeExistsError:
                await self.session.call(self.zk.set, path, data)
        await self.session.call(self.zk.create, f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
                                zk.encode_config_change("brokers", entity), sequence=True)
        if entity in self._broker_entities:
            self._broker_configs[entity] = dict(configs)
            self._notify_broker_configs()

    # -- SCRAM credentials ----------------------------------------------------------------------------
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The SASL server's lookup, per authentication: the in-memory copy, current within a
        notification's delay of any broker's change."""
        return self._scram.get(user, {}).get(mechanism)

    def scram_users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(creds) for user, creds in self._scram.items()}

    async def _load_scram_users(self, sanitized: list[str] | None = None) -> dict[str, dict[str, ScramCredential]]:
        """Read `/config/users/<name>` for these znode names (None: every user) into the memory copy;
        returns the credentials read, by user."""
        everyone = sanitized is None
        if sanitized is None:
            sanitized = await self.session.call(self.zk.children, zk.CONFIG_USERS)
        results = await self.session.call(self.zk.get_many, [f"{zk.CONFIG_USERS}/{n}" for n in sanitized])
        found: dict[str, dict[str, ScramCredential]] = {}
        for name, result in zip(sanitized, results):
            user = zk.desanitize(name)
            try:
                config = zk.decode_config(result[0] if result else None)
            except ValueError:
                logger.warning("the config znode of user %r is not JSON; its credentials are ignored", user)
                config = {}
            creds = scram_credentials_of(user, config)
            if creds:
                found[user] = creds
        if everyone:
            self._scram = dict(found)
        else:
            for name in sanitized:
                self._scram.pop(zk.desanitize(name), None)
            self._scram.update(found)
        return found

    async def read_scram_users(self, users: list[str] | None = None) -> dict[str, dict[str, ScramCredential]]:
        """What DescribeUserScramCredentials reads: fresh from ZooKeeper, as Kafka's ZK mode reads
        it (these users, or every user when None), refreshing the memory copy on the way."""
        return await self._load_scram_users(None if users is None else [zk.sanitize(u) for u in users])

    async def alter_scram_credentials(self, user: str, upsertions: dict[str, ScramCredential],
                                      deletions: Sequence[str] = ()) -> None:
        """Kafka's alterUserScramCredentials for one user: its znode rewritten (conditional on the
        version read, retried when another broker wrote in between; removed when nothing is left,
        as Kafka cleans empty user nodes), then a `users/<user>` change notification.
        ResourceNotFoundError when a deletion names a credential the user does not have."""
        path = zk.user_config_path(user)
        while True:
            try:
                data, stat = await self.session.call(self.zk.get, path)
                current, version = zk.decode_config(data), stat.version
            except zk.NoNodeError:
                current, version = {}, None
            config = altered_scram_config(current, upsertions, list(deletions))
            try:
                if version is None:
                    if config:
                        await self.session.call(self.zk.create, path, zk.encode_config(config), makepath=True)
                elif config:
                    await self.session.call(self.zk.set, path, zk.encode_config(config), version)
                else:
                    try:
                        await self.session.call(self.zk.delete, path, version)
                    except zk.NotEmptyError:  # <user>/clients/<id> quotas below it: keep the node, empty
                        await self.session.call(self.zk.set, path, zk.encode_config(config), version)
                break
            except (zk.BadVersionError, zk.NodeExistsError, zk.NoNodeError):
                continue  # another broker changed the user meanwhile: apply ours to what it wrote
        await self.session.call(self.zk.create, f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
                                zk.encode_config_change("users", zk.sanitize(user)), sequence=True)
        creds = scram_credentials_of(user, config)
        if creds:
            self._scram[user] = creds
        else:
            self._scram.pop(user, None)

    # -- per-group configs (kbroker/metadata/group_configs.py) ----------------------------------------
    def group_configs(self, group: str) -> dict[str, str]:
        return self._group_configs.configs(group)

    async def read_group_configs(self, group: str) -> dict[str, str]:
        return await self._group_configs.read(group)

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        await self._group_configs.set(group, configs)

    # -- client quotas -------------------------------------------------------------------------------
    def client_quota_configs(self) -> dict[str, dict[str, str]]:
        """Every entity's quotas (entity path -> {key: value}), as last read: what is enforced."""
        return {path: dict(c) for path, c in self._client_quotas.items()}

    async def _quota_entity_paths(self) -> list[str]:
        users = await self.session.call(self.zk.children, zk.CONFIG_USERS)
        clients = await self.session.call(self.zk.children, zk.CONFIG_CLIENTS)
        paths = [f"users/{u}" for u in users] + [f"clients/{c}" for c in clients]
        for user in users:
            try:
                nested = await self.session.call(self.zk.children, f"{zk.CONFIG_USERS}/{user}/clients")
            except zk.NoNodeError:
                continue
            paths += [f"users/{user}/clients/{c}" for c in nested]
        return paths

    async def _load_client_quotas(self, paths: list[str] | None = None) -> None:
        """Read these entities' znodes (None: every user, client and user/client entity) into the
        memory copy, then tell the listeners."""
        everyone = paths is None
        if paths is None:
            paths = await self._quota_entity_paths()
        results = await self.session.call(self.zk.get_many, [zk.quota_config_path(p) for p in paths])
        found = {}
        for path, result in zip(paths, results):
            try:
                config = quota_entries(zk.decode_config(result[0] if result else None))
            except ValueError:
                logger.warning("the config znode /config/%s is not JSON; its quotas are ignored", path)
                config = {}
            if config:
                found[path] = config
        if everyone:
            self._client_quotas = found
        else:
            for path in paths:
                self._client_quotas.pop(path, None)
            self._client_quotas.update(found)
        self._notify_client_quotas()

    def _notify_client_quotas(self) -> None:
        quotas = self.client_quota_configs()
        for listener in self.client_quota_listeners:
            try:
                listener(quotas)
            except Exception:
                logger.exception("client quota listener failed")

    async def read_client_quotas(self) -> dict[str, dict[str, str]]:
        """What DescribeClientQuotas reads: fresh from ZooKeeper, as Kafka's ZK mode reads it."""
        await self._load_client_quotas()
        return self.client_quota_configs()

    async def alter_client_quotas(self, path: str, changes: dict[str, str | None]) -> None:
        """Kafka's AdminZkClient.changeConfigs for a quota entity: its znode rewritten (conditional
        on the version read; the other entries of a user's znode, its SCRAM credentials, kept; the
        znode removed when nothing is left and it has no <user>/clients children), then a
        notification naming the entity."""
        znode = zk.quota_config_path(path)
        while True:
            try:
                data, stat = await self.session.call(self.zk.get, znode)
                current, version = zk.decode_config(data), stat.version
            except zk.NoNodeError:
                current, version = {}, None
            config = altered_quota_config(current, changes)
            try:
                if version is None:
                    if config:
                        await self.session.call(self.zk.create, znode, zk.encode_config(config), makepath=True)
                elif config:
                    await self.session.call(self.zk.set, znode, zk.encode_config(config), version)
                else:
                    try:
                        await self.session.call(self.zk.delete, znode, version)
                    except zk.NotEmptyError:
                        await self.session.call(self.zk.set, znode, zk.encode_config(config), version)
                break
            except (zk.BadVersionError, zk.NodeExistsError, zk.NoNodeError):
                continue  # another broker changed the entity meanwhile: apply ours to what it wrote
        await self.session.call(self.zk.create, f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
                                zk.quota_config_change(path), sequence=True)
        quotas = quota_entries(config)
        if quotas:
            self._client_quotas[path] = quotas
        else:
            self._client_quotas.pop(path, None)
        self._notify_client_quotas()

    # -- ACLs (Kafka's AclAuthorizer in ZooKeeper mode) ------------------------------------------------
    ACL_UPDATE_RETRIES = 10  # AclAuthorizer.maxUpdateRetries

    def acls(self) -> list[AclBinding]:
        """Every ACL as last read or written (the authorizer's and DescribeAcls's source, as Kafka's
        AclAuthorizer answers from its cache)."""
        return [AclBinding(p, e) for p, (entries, _v) in self._acls.items() for e in entries]

    def add_acl_listener(self, listener: Callable[[list[AclBinding]], None]) -> None:
        self._acl_listeners.append(listener)

    def _notify_acls(self) -> None:
        bindings = self.acls()
        for listener in self._acl_listeners:
            try:
                listener(bindings)
            except Exception:
                logger.exception("ACL listener failed")

    async def _start_acls(self) -> None:
        """Kafka's AclAuthorizer.configure: the ACL paths, the change watches, then every ACL."""
        for path in zk.acl_paths():
            await self.session.call(self.zk.ensure_path, path)
        for parent in (zk.ACL_CHANGES, zk.EXTENDED_ACL_CHANGES):
            await self._watch_acl_changes(parent, initial=True)
        await self._load_all_acls()

    async def resync_acls(self) -> None:
        """After a new ZooKeeper session (the expired one's watches are gone, notifications may have
        been missed): watch both change paths again and re-read every ACL."""
        for parent in (zk.ACL_CHANGES, zk.EXTENDED_ACL_CHANGES):
            await self._watch_acl_changes(parent, initial=True)
        await self._load_all_acls()

    async def _load_all_acls(self) -> None:
        loaded: dict[ResourcePattern, tuple[frozenset[AccessControlEntry], int]] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = zk.acl_store_path(pattern_type)
            for type_name in await self.session.call(self.zk.children, root):
                rtype = parse_resource_type(type_name)
                if int(rtype) < 2:
                    logger.warning("ignoring ACLs of unknown resource type %s (%s/%s)", type_name, root, type_name)
                    continue
                names = await self.session.call(self.zk.children, f"{root}/{type_name}")
                patterns = [ResourcePattern(rtype, n, pattern_type) for n in names]
                for pattern, read in zip(patterns, await self._read_acls(patterns)):
                    if read is not None and read[0]:
                        loaded[pattern] = read
        async with self._acl_lock:
            self._acls = loaded
        logger.info("loaded %d ACLs on %d resource patterns", sum(len(e) for e, _v in loaded.values()), len(loaded))
        self._notify_acls()

    async def _read_acls(self, patterns: list[ResourcePattern]
                         ) -> list[tuple[frozenset[AccessControlEntry], int] | None]:
        """Each pattern's (entries, znode version), None where there is no znode."""
        if not patterns:
            return []
        results = await self.session.call(self.zk.get_many, [zk.acl_resource_path(p) for p in patterns])
        out: list[tuple[frozenset[AccessControlEntry], int] | None] = []
        for pattern, result in zip(patterns, results):
            if result is None:
                out.append(None)
                continue
            try:
                entries, skipped = zk.decode_acls(result[0])
            except ValueError:
                entries, skipped = set(), ["the znode is not JSON"]
            for reason in skipped:
                logger.warning("ACLs of %s: %s (left out)", pattern, reason)
            out.append((frozenset(entries), result[1].version))
        return out

    async def _watch_acl_changes(self, parent: str, initial: bool = False) -> None:
        changes = sorted(await self.session.call(
            self.zk.children, parent, self.session.watch(functools.partial(self._acl_changes_fired, parent))))
        if initial:  # everything is read at start; only later notifications matter
            self._last_acl_change[parent] = changes[-1] if changes else ""
            return
        new = [c for c in changes if c > self._last_acl_change[parent]]
        if not new:
            return
        self._last_acl_change[parent] = new[-1]
        await notifications.purge(self.session, self.zk, parent, changes[:len(changes) - len(new)], new[-1])
        results = await self.session.call(self.zk.get_many, [f"{parent}/{c}" for c in new])
        patterns: list[ResourcePattern] = []
        for name, result in zip(new, results):
            pattern = zk.decode_acl_change(parent, result[0]) if result else None
            if pattern is None:
                if result is not None:
                    logger.warning("ignoring an ACL change notification that cannot be read: %s/%s", parent, name)
                continue
            if pattern not in patterns:
                patterns.append(pattern)
        await self._reload_acls(patterns)

    def _acl_changes_fired(self, parent: str) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._safe_watch_acl_changes, parent)

    async def _safe_watch_acl_changes(self, parent: str) -> None:
        try:
            await self._watch_acl_changes(parent)
        except zk.ZkError as exc:
            logger.warning("reading ACL changes failed: %s", exc)

    async def _reload_acls(self, patterns: list[ResourcePattern]) -> None:
        """AclAuthorizer.processAclChangeNotification: each named pattern read afresh."""
        changed = False
        async with self._acl_lock:
            for pattern, read in zip(patterns, await self._read_acls(patterns)):
                before = self._acls.get(pattern, (frozenset(), -1))[0]
                if read is None or not read[0]:
                    self._acls.pop(pattern, None)
                    after: frozenset[AccessControlEntry] = frozenset()
                else:
                    self._acls[pattern] = read
                    after = read[0]
                if after != before:
                    changed = True
                    logger.info("ACLs of %s reloaded after a change: %d entries", pattern, len(after))
        if changed:
            self._notify_acls()

    async def create_acls(self, bindings) -> list[Exception | None]:
        """Kafka's AclAuthorizer.createAcls (bindings validated by the caller): per pattern, its
        znode rewritten with the new entries added (conditional on the version; retried), then a
        change notification. One result per binding: None, or the error its pattern's write met."""
        bindings = list(bindings)
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, b in enumerate(bindings):
            by_pattern.setdefault(b.pattern, []).append(i)
        changed = False
        async with self._acl_lock:
            for pattern, indices in by_pattern.items():
                added = frozenset(bindings[i].entry for i in indices)
                try:
                    changed |= await self._update_resource_acls(pattern, lambda current, added=added: current | added)
                except Exception as exc:  # noqa: BLE001 - the pattern's bindings fail, the others go on
                    logger.warning("creating ACLs of %s failed: %s", pattern, exc)
                    for i in indices:
                        results[i] = exc
        if changed:
            self._notify_acls()
        return results

    async def delete_acls(self, filters) -> list[list[AclBinding]]:
        """Kafka's AclAuthorizer.deleteAcls: the patterns the filters touch (those this broker knows
        that a filter matches, and the exact pattern of each filter naming one, read fresh), each
        znode rewritten without the matching entries (conditional, retried), a notification per
        change. Per filter, the bindings it removed (a binding several match: the first one's)."""
        filters = list(filters)
        out: list[list[AclBinding]] = [[] for _ in filters]
        changed = False
        async with self._acl_lock:
            for pattern, indices in touched_patterns(self._acls.keys(), filters).items():
                entry_filters = [(i, filters[i].entry_filter) for i in indices]
                removed: dict[AccessControlEntry, int] = {}

                def without_matches(current: frozenset[AccessControlEntry], entry_filters=entry_filters,
                                    removed=removed) -> frozenset[AccessControlEntry]:
                    removed.clear()
                    removed.update(entries_to_delete(current, entry_filters))
                    return current - removed.keys()

                changed |= await self._update_resource_acls(pattern, without_matches)
                for entry, index in sorted(removed.items(), key=lambda kv: entry_order(kv[0])):
                    out[index].append(AclBinding(pattern, entry))
        if changed:
            self._notify_acls()
        return out

    async def _update_resource_acls(self, pattern: ResourcePattern, change) -> bool:
        """AclAuthorizer.updateResourceAcls: apply `change` to the pattern's entries (this broker's
        copy, or ZooKeeper's when it has none) and write the result conditionally on the version it
        came from (create when there was no znode, delete when nothing is left); a conflict reads
        ZooKeeper again and retries. A change is followed by a notification. Returns whether the
        entries changed (the memory copy is updated either way; the caller holds the lock)."""
        path = zk.acl_resource_path(pattern)
        cached = self._acls.get(pattern)
        if cached is None:
            cached = (await self._read_acls([pattern]))[0]
        current, version = cached if cached is not None else (frozenset(), None)
        for attempt in range(self.ACL_UPDATE_RETRIES + 1):
            new = frozenset(change(current))
            try:
                if new and version is not None:
                    new_version = (await self.session.call(self.zk.set, path, zk.encode_acls(new), version)).version
                elif new:
                    await self.session.call(self.zk.create, path, zk.encode_acls(new), makepath=True)
                    new_version = 0
                elif version is not None:
                    try:
                        await self.session.call(self.zk.delete, path, version)
                    except zk.NoNodeError:
                        pass
                break
            except (zk.BadVersionError, zk.NodeExistsError, zk.NoNodeError):
                if attempt == self.ACL_UPDATE_RETRIES:
                    raise zk.ZkError(f"Failed to update ACLs for {pattern} after trying a maximum of "
                                     f"{self.ACL_UPDATE_RETRIES} times") from None
                await trio.sleep((100 + random.randrange(50)) / 1000)  # Kafka's backoff, with its jitter
                read = (await self._read_acls([pattern]))[0]
                current, version = read if read is not None else (frozenset(), None)
        if new:
            self._acls[pattern] = (new, new_version)
        else:
            self._acls.pop(pattern, None)
        if new == current:
            return False
        await self.session.call(self.zk.create, zk.acl_change_path(pattern), zk.encode_acl_change(pattern),
                                sequence=True)
        logger.info("ACLs of %s updated: %d entries", pattern, len(new))
        return True

    async def propagate_log_dir_event(self) -> str:
        """Tell the controller one of this broker's log dirs failed; returns the notification's path."""
        return await self.session.call(self.zk.create, zk.log_dir_event_path(),
                                       zk.encode_log_dir_event(self.me.node_id), sequence=True)

    # -- writes (AdminZkClient) -----------------------------------------------------------------------
    async def create_topic(self, name: str, assignment: list[list[int]], configs: dict[str, str],
                           topic_id: uuid.UUID | None = None) -> TopicInfo:
        topic_id = topic_id or _new_topic_id()
        data = zk.encode_topic(zk.TopicAssignment(name, topic_id, dict(enumerate(assignment))))
        if await self.session.call(self.zk.exists, zk.topic_path(name)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        config_path = zk.topic_config_path(name)
        try:
            await self.session.call(self.zk.create, config_path, zk.encode_config(configs), makepath=True)
        except zk.NodeExistsError:
            await self.session.call(self.zk.set, config_path, zk.encode_config(configs))
        try:
            await self.session.call(self.zk.create, zk.topic_path(name), data, makepath=True)
        except zk.NodeExistsError:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None
        self._configs[name] = dict(configs)
        return TopicInfo(name, topic_id, [list(r) for r in assignment], dict(configs))

    async def wait_for_topic(self, name: str, num_partitions: int, timeout_s: float) -> None:
        """Until every partition of `name` has a leader in this broker's cache (CreateTopics waits
        for that, as Kafka's DelayedCreatePartitions does)."""
        with trio.move_on_after(timeout_s):
            while True:
                parts = self._partitions.get(name, {})
                if len(parts) >= num_partitions and all(
                        parts.get(p) is not None and parts[p].leader >= 0 for p in range(num_partitions)):
                    return
                await self.wait_for_change(1.0)
        raise RequestTimedOutError(f"Topic {name} was created but its leaders are not elected yet.")

    async def delete_topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None and await self.session.call(self.zk.exists, zk.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
        try:
            await self.session.call(self.zk.create, zk.delete_topic_path(name), b"", makepath=True)
        except zk.NodeExistsError:
            pass
        return info or TopicInfo(name, uuid.UUID(int=0), [], {})

    async def _read_topic(self, name: str) -> tuple[zk.TopicAssignment, int]:
        data, stat = await self.session.call(self.zk.get, zk.topic_path(name))
        return zk.decode_topic(name, data), stat.version

    async def _write_topic(self, assignment: zk.TopicAssignment, version: int) -> None:
        """Conditional on the version read: a concurrent change (the controller's) wins, we fail."""
        await self.session.call(self.zk.set, zk.topic_path(assignment.topic), zk.encode_topic(assignment), version)

    async def add_partitions(self, name: str, new_assignment: list[list[int]]) -> TopicInfo:
        current, version = await self._read_topic(name)
        if current.active is not None:
            raise InvalidPartitionsError(
                f"Topic {name} has partitions {current.active}..{len(current.partitions) - 1} retiring after a "
                f"decrease; it cannot grow until they are removed")
        start = len(current.partitions)
        for i, replicas in enumerate(new_assignment):
            current.partitions[start + i] = list(replicas)
        await self._write_topic(current, version)
        info = self._topics.get(name)
        return info or TopicInfo(name, current.topic_id or uuid.UUID(int=0), current.as_list(), {})

    async def retire_partitions(self, name: str, count: int) -> None:
        """A partition decrease: the topic znode says only the first `count` partitions are the
        topic's now; the controller tells every broker to stop advertising (and appending to) the
        rest. Their logs stay, readable, until removed after retention."""
        current, version = await self._read_topic(name)
        if current.active is not None and count > current.active:
            raise InvalidPartitionsError(f"Topic {name} already retired its partitions from {current.active} on")
        current.active = count
        await self._write_topic(current, version)

    async def mark_removable(self, name: str, partition: int) -> None:
        """A retired partition's leader found it drained and emptied by retention: say so in the
        topic znode (the controller removes the retired partitions once all of them are)."""
        current, version = await self._read_topic(name)
        if not current.is_retiring(partition) or partition in current.removable:
            return
        current.removable = tuple(sorted({*current.removable, partition}))
        await self._write_topic(current, version)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        await self.session.call(self.zk.set, zk.topic_config_path(name), zk.encode_config(configs))
        await self.session.call(self.zk.create, f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
                                zk.encode_config_change("topics", name), sequence=True)
        self._configs[name] = dict(configs)
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
        info.configs = dict(configs)
        self._notify(name, info)
        return info

    async def allocate_producer_ids(self, count: int) -> int:
        while True:
            try:
                data, stat = await self.session.call(self.zk.get, zk.LATEST_PRODUCER_ID_BLOCK)
            except zk.NoNodeError:
                data, stat = b"", None
            start = zk.next_producer_id_block_start(data)
            payload = zk.encode_producer_id_block(self.me.node_id, start, count)
            try:
                if stat is None:
                    await self.session.call(self.zk.create, zk.LATEST_PRODUCER_ID_BLOCK, payload, makepath=True)
                else:
                    await self.session.call(self.zk.set, zk.LATEST_PRODUCER_ID_BLOCK, payload, stat.version)
                return start
            except (zk.BadVersionError, zk.NodeExistsError):
                continue  # another broker took that block: try the next
