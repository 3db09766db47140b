"""Cluster-mode metadata: this broker's cache of the cluster (as the controller tells it) and the
administrative writes that go to ZooKeeper.

Reads (`brokers`, `topics`, `partition_state`, ...) come from the `MetadataCache` the controller
keeps current with UpdateMetadata, so every broker answers Metadata alike without watching
partition znodes. Writes follow Kafka's AdminZkClient: a topic is created by writing
`/config/topics/<t>` then `/brokers/topics/<t>` (the controller notices and elects leaders), grown
by rewriting its assignment, deleted by `/admin/delete_topics/<t>`, reconfigured through
`/config/topics/<t>` plus a `/config/changes` notification that every broker watches. Producer id
blocks come from `/latest_producer_id_block` with conditional writes. A failed log dir is reported
to the controller with a `/log_dir_event_notification` sequential znode (Kafka's
propagateLogDirEvent).

The store delegates the rest (and hands on the `/config/changes` notifications it hears): dynamic
broker configs (`/config/brokers/<id>`, `/config/brokers/<default>`) to zk_broker_configs.py, SCRAM
credentials and client quotas to zk_user_configs.py, ACLs (AclAuthorizer's znodes and change
watches) to zk_acls.py, per-group configs to group_configs.py, all beside this module.
"""

from __future__ import annotations

import logging
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
)
from kbroker.metadata.zk_acls import ZkAcls
from kbroker.metadata.zk_broker_configs import ZkBrokerConfigs
from kbroker.metadata.zk_user_configs import ZkUserConfigs
from kbroker.security.acl import AclBinding
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
        self._broker_configs = ZkBrokerConfigs(session, broker.node_id)  # this broker's and <default> dynamic configs
        self._listeners: list[MetadataListener] = []
        self._changed = trio.Event()
        self.first_update = trio.Event()  # set by the first UpdateMetadata from a controller
        self._last_config_change = ""
        self._user_configs = ZkUserConfigs(session)  # SCRAM credentials and client quotas
        self._zk_acls = ZkAcls(session)
        self._group_configs = ZkGroupConfigs(session)

    # -- start-up -----------------------------------------------------------------------------------
    async def start(self, wanted_cluster_id: str | None) -> None:
        for path in zk.PERSISTENT_PATHS:
            await self.session.call(self.zk.ensure_path, path)
        self.cluster_id = await self._cluster_id(wanted_cluster_id)
        await self._watch_config_changes(initial=True)
        await self._broker_configs.load(self._broker_configs.entities)
        await self._user_configs.load_scram_users()
        await self._user_configs.load_client_quotas()
        await self._group_configs.load_all()
        await self._zk_acls.start()

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
            elif entity and entity[0] == "brokers" and entity[1] in self._broker_configs.entities:
                brokers.add(entity[1])
            elif entity and entity[0] == "users" and "/" not in entity[1]:  # not a <user>/clients/<id> quota
                users.add(entity[1])
        if users:
            await self._user_configs.reload_scram_users(sorted(users))
        if quota_paths:
            await self._user_configs.load_client_quotas(sorted(quota_paths))
        await self._group_configs.reload(sorted(groups))
        for topic in topics:
            self._configs.pop(topic, None)
        await self.load_configs(sorted(t for t in topics if t in self._topics))
        if brokers:
            await self._broker_configs.load(sorted(brokers))

    def _config_changes_fired(self) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._safe_watch_config_changes)

    _nursery: trio.Nursery | None = None

    def attach(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._zk_acls.attach(nursery)  # its change watches run here too

    async def _safe_watch_config_changes(self) -> None:
        try:
            await self._watch_config_changes()
        except zk.ZkError as exc:
            logger.warning("reading config changes failed: %s", exc)

    # -- dynamic broker configs (kbroker/metadata/zk_broker_configs.py) ----------------------------------
    @property
    def broker_config_listeners(self) -> list[Callable[[dict[str, str], dict[str, str]], None]]:
        return self._broker_configs.listeners

    def dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        return self._broker_configs.dynamic()

    async def broker_configs(self, entity: str) -> dict[str, str]:
        return await self._broker_configs.read(entity)

    async def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        await self._broker_configs.set(entity, configs)

    # -- SCRAM credentials (kbroker/metadata/zk_user_configs.py) --------------------------------------
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._user_configs.scram_credential(user, mechanism)

    def scram_users(self) -> dict[str, dict[str, ScramCredential]]:
        return self._user_configs.scram_users()

    async def read_scram_users(self, users: list[str] | None = None) -> dict[str, dict[str, ScramCredential]]:
        return await self._user_configs.read_scram_users(users)

    async def alter_scram_credentials(self, user: str, upsertions: dict[str, ScramCredential],
                                      deletions: Sequence[str] = ()) -> None:
        await self._user_configs.alter_scram_credentials(user, upsertions, deletions)

    # -- per-group configs (kbroker/metadata/group_configs.py) ----------------------------------------
    def group_configs(self, group: str) -> dict[str, str]:
        return self._group_configs.configs(group)

    async def read_group_configs(self, group: str) -> dict[str, str]:
        return await self._group_configs.read(group)

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        await self._group_configs.set(group, configs)

    # -- client quotas (kbroker/metadata/zk_user_configs.py) ------------------------------------------
    @property
    def client_quota_listeners(self) -> list[ClientQuotaListener]:
        return self._user_configs.client_quota_listeners

    @client_quota_listeners.setter
    def client_quota_listeners(self, listeners: list[ClientQuotaListener]) -> None:
        self._user_configs.client_quota_listeners = listeners

    def client_quota_configs(self) -> dict[str, dict[str, str]]:
        return self._user_configs.client_quota_configs()

    async def read_client_quotas(self) -> dict[str, dict[str, str]]:
        return await self._user_configs.read_client_quotas()

    async def alter_client_quotas(self, path: str, changes: dict[str, str | None]) -> None:
        await self._user_configs.alter_client_quotas(path, changes)

    # -- ACLs (kbroker/metadata/zk_acls.py) -----------------------------------------------------------
    def acls(self) -> list[AclBinding]:
        return self._zk_acls.acls()

    def add_acl_listener(self, listener: Callable[[list[AclBinding]], None]) -> None:
        self._zk_acls.add_listener(listener)

    async def resync_acls(self) -> None:
        await self._zk_acls.resync()

    async def create_acls(self, bindings) -> list[Exception | None]:
        return await self._zk_acls.create(bindings)

    async def delete_acls(self, filters) -> list[list[AclBinding]]:
        return await self._zk_acls.delete(filters)

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
        await notifications.post_config_change(self.session, self.zk, zk.encode_config_change("topics", name))
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
