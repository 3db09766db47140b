"""The broker's subsystems wired together, and the operations that span them (create a topic:
metadata first, then the replica layer makes the logs through the metadata listener).

Two modes: the embedded single node (`LocalMetadataStore`, every partition led here) and a
ZooKeeper cluster (`ClusterMetadataStore` fed by the controller, partitions led or followed as
LeaderAndIsr says, a `KafkaController` that may become active). Topic operations are async
because in a cluster they are ZooKeeper writes.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import socket
import time
import uuid

from kbroker.api.authorization import AclAuthorizerAdapter, authorizer_from_config
from kbroker.config import BrokerConfig, log_config_for, validate_topic_configs
from kbroker.config_defs import as_list, assignor_names
from kbroker.delayed.format import DELAYED_TOPIC
from kbroker.delayed.service import DelayService
from kbroker.dynamic_config import apply_stored
from kbroker.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    StartupError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kbroker.fetch_session import FetchSessionCache
from kbroker.group.coordinator import GroupConfig, GroupCoordinator
from kbroker.group.offsets_log import OFFSETS_TOPIC, PartitionOffsetsLog
from kbroker.log.dir_lock import LogDirLock
from kbroker.log.log_manager import LogManager
from kbroker.log.topic_partition import TopicPartition
from kbroker.metadata.cluster import ClusterMetadataStore
from kbroker.metadata.store import (
    INTERNAL_TOPICS,
    BrokerInfo,
    LocalMetadataStore,
    TopicInfo,
    assign_replicas,
    validate_assignment,
    validate_topic_name,
)
from kbroker.metadata.topic_source import MetadataTopics
from kbroker.metadata.views import ClusterViewCatalogue, LocalViewCatalogue
from kbroker.metrics.stats import BrokerStats
from kbroker.quota.manager import ClientQuotas
from kbroker.replica.manager import ReplicaManager
from kbroker.replica.txn_markers import MarkerWrite, write_markers
from kbroker.replica.view_reader import ViewReader
from kbroker.retry.topics import check_retry_configs, create_retry_topics
from kbroker.share.manager import SharePartitionManager
from kbroker.share.persister import SharePersister
from kbroker.share.partition_types import ShareConfig
from kbroker.share.state_records import SHARE_STATE_TOPIC
from kbroker.tiered.manager import RemoteLogManager
from kbroker.tiered.store import load_store
from kbroker.txn.coordinator import TransactionCoordinator
from kbroker.txn.coordinator_rules import TransactionConfig, TxnMarkers
from kbroker.txn.log_format import TRANSACTION_STATE_TOPIC
from kbroker.txn.markers import TxnMarkerWriter
from kbroker.txn.state_log import TransactionStateLog
from kbroker.views.spec import is_view_request, view_spec

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def startup_phase(name: str):
    """Log one line when a start-up phase ends, with its duration."""
    started = time.monotonic()
    yield  # an exception skips the line: the failure is reported instead
    logger.info("start-up: %s (%.2f s)", name, time.monotonic() - started)


RETRY_TOPICS_WAIT_S = 10.0  # AlterConfigs adding retry tiers waits this long for their leaders (cluster)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TopicDeletionDisabledError(KafkaError):
    code = ErrorCode.topic_deletion_disabled


async def _resolved(value):
    """The metadata stores' writes: plain values on the single node, awaitables in a cluster."""
    return await value if inspect.isawaitable(value) else value


class ProducerIdManager:
    """Hands out producer ids from blocks reserved (and persisted) in the metadata store: a file on
    the single node, `/latest_producer_id_block` in a cluster, so ids are unique cluster-wide."""

    BLOCK = 1000

    def __init__(self, metadata) -> None:
        self.metadata = metadata
        self._next = self._end = 0

    async def next_id(self) -> int:
        if self._next >= self._end:
            start = await _resolved(self.metadata.allocate_producer_ids(self.BLOCK))
            if self._next >= self._end:  # another request may have refilled it meanwhile
                self._next, self._end = start, start + self.BLOCK
        producer_id, self._next = self._next, self._next + 1
        return producer_id


class Broker:
    def __init__(self, config: BrokerConfig, advertised: tuple[str, int], zk_session=None,
                 dir_lock: LogDirLock | None = None,
                 endpoints: tuple[tuple[str, str, str, int], ...] = ()) -> None:
        """`advertised` is the inter-broker listener's address, `endpoints` every listener's
        (name, protocol, host, port) as clients are told them."""
        self.config = config
        self.node_id = config.node_id
        host, port = advertised
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        endpoints = tuple((n, p, socket.getfqdn() if h in ("", "0.0.0.0", "::") else h, pt)
                          for n, p, h, pt in endpoints)
        self.info = BrokerInfo(self.node_id, host, port, config.get("broker.rack"), endpoints)
        log_dirs = config.log_dirs
        self.log_manager = LogManager(log_dirs, log_config_for(config, {}), now_ms=now_ms, dir_lock=dir_lock,
                                      producer_id_expiration_ms=config.get("producer.id.expiration.ms"))
        self.log_manager.lock_dirs()  # before the metadata store or recovery touch a file
        self.cluster = zk_session is not None
        self.reconfigurables: list = []  # called after dynamic broker configs change
        self.controller = None  # KafkaController, in a cluster
        if self.cluster:
            self.metadata = ClusterMetadataStore(zk_session, self.info, config.inter_broker_listener_name)
        else:
            self.metadata = LocalMetadataStore(log_dirs[0], self.info, config.get("cluster.id"))
        self.views = ClusterViewCatalogue(zk_session) if self.cluster else LocalViewCatalogue(log_dirs[0])
        self.replica_manager = ReplicaManager(self.node_id, config, self.log_manager, self.metadata,
                                              cluster=self.cluster)
        self.remote_log_manager = None  # tiered storage (KIP-405), when remote.log.storage.system.enable
        if config.get("remote.log.storage.system.enable"):
            self.remote_log_manager = RemoteLogManager(config, load_store(config),
                                                       lambda: list(self.replica_manager.partitions.values()), now_ms)
            self.replica_manager.remote_storage = self.remote_log_manager
        self.view_reader = ViewReader(self.replica_manager)
        self.producer_ids = ProducerIdManager(self.metadata)
        # the request path's counters, read by the Prometheus collector; None (nothing counted) when off
        self.stats = BrokerStats() if config.metrics_listener is not None else None
        if self.stats is not None:
            self.metadata.add_listener(lambda name, info: info is None and self.stats.forget_topic(name))
        self.group_coordinator = GroupCoordinator(_group_config(config), PartitionOffsetsLog(self.replica_manager, now_ms),
                                                  now_ms)
        self.group_coordinator.topics = MetadataTopics(self.metadata, self.views)
        self.group_coordinator.group_configs = self.metadata.group_configs  # per-group configs (KIP-848)
        self.share_manager = SharePartitionManager(  # share groups' partitions led here (KIP-932)
            self.replica_manager, ShareConfig(
                record_lock_duration_ms=config.get("group.share.record.lock.duration.ms"),
                max_record_locks=config.get("group.share.partition.max.record.locks"),
                delivery_count_limit=config.get("group.share.delivery.count.limit")),
            now_ms, self.metadata.group_configs, config.get("group.share.max.share.sessions"),
            topic_id=self.group_coordinator.topics.topic_id, state_partitions=config.get("share.coordinator.state.topic.num.partitions"),
            topic_configs=self.metadata.configs_of, topic_info=self.metadata.topic,
            topic_name=self.group_coordinator.topics.topic_name,
            view_of=lambda name: self.views.view(name), view_filter=lambda *a: self.view_reader.filter(*a),
            persister=SharePersister(self.replica_manager, now_ms, node_id=self.node_id, cluster=self.cluster,
                                     state_partitions=config.get("share.coordinator.state.topic.num.partitions"),
                                     leader_of=self._leader_of, timeout_s=config.get("request.timeout.ms") / 2000))
        self.group_coordinator.share_member_gone.append(self.share_manager.member_gone)
        self.txn_coordinator = TransactionCoordinator(
            _txn_config(config),
            TransactionStateLog(self.replica_manager, now_ms, cluster=self.cluster,
                                timeout_s=config.get("request.timeout.ms") / 1000),
            TxnMarkerWriter(self.node_id, self._leader_of, self._write_local_markers),
            self.producer_ids.next_id, now_ms, cluster=self.cluster)
        self.delayed = DelayService(self.node_id, config, self.replica_manager, self.metadata,
                                    self.ensure_delayed_messages_topic, self.producer_ids.next_id, self._leader_of,
                                    now_ms, cluster=self.cluster)
        if self.cluster:
            self.group_coordinator.owned = set()
            self.replica_manager.leadership_listeners.append(self._on_leadership)
        # incremental fetch sessions (KIP-227) of consumers and followers (api/fetch.py)
        self.fetch_sessions = FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots"),
                                                now_ms=lambda: int(time.monotonic() * 1000))
        # client quotas (kbroker/quota/): the stored ones apply now (single node) or once read
        self.client_quotas = ClientQuotas(config.get("quota.window.num"), config.get("quota.window.size.seconds"),
                                          config.get("controller.quota.window.num"),
                                          config.get("controller.quota.window.size.seconds"))
        self.metadata.client_quota_listeners.append(self.client_quotas.apply)
        if not self.cluster:
            self.client_quotas.apply(self.metadata.client_quota_configs())
        # authorization: ALLOW_ALL, or Kafka's ACL rules over the store's ACLs (docs/security.md),
        # told of every change; those stored apply now (single node) or once read (cluster's start)
        self.authorizer = authorizer_from_config(config)
        if isinstance(self.authorizer, AclAuthorizerAdapter):
            self.metadata.add_acl_listener(self.authorizer.update)
            if not self.cluster:
                self.authorizer.update(self.metadata.acls())
        # dynamic broker configs: those stored apply now (single node) or once read (cluster's start)
        self.metadata.broker_config_listeners.append(self._apply_dynamic_configs)
        if not self.cluster:
            self._apply_dynamic_configs(*self.metadata.dynamic_broker_configs())

    def startup(self) -> None:
        """Load what the data directories hold, one log line per phase (Kafka's start-up lines)."""
        with startup_phase("partition logs loaded"):
            self.log_manager.startup()
        with startup_phase("replicas ready"):
            self.replica_manager.startup()
        if not self.cluster:  # in a cluster, LeaderAndIsr says which groups and transactional ids are ours
            self._load_groups()
            with startup_phase("transactions and delayed messages loaded"):
                self.txn_coordinator.load_led_partitions()
                self.delayed.load_led_partitions()

    def shutdown(self) -> None:
        self.group_coordinator.shutdown()
        self.replica_manager.shutdown()
        self.log_manager.shutdown()
        if self.remote_log_manager is not None:
            self.remote_log_manager.close()

    def delete_stray_logs(self) -> int:
        """After a full UpdateMetadata: logs this broker holds that the cluster no longer places
        here go — a topic deleted, or a replica moved away, while this broker was down or cut off
        (the StopReplica meant for it was lost with its session, even after a LeaderAndIsr had
        made it a replica here), as KRaft's stray replica detection does. A retired partition (a
        decrease; the UpdateMetadata no longer lists it) stays."""
        topics = self.metadata.topics()

        def placed_here(tp: TopicPartition) -> bool:
            info = topics.get(tp.topic)
            if info is None:
                return False
            if self.metadata.is_retired(tp.topic, tp.partition):
                return True
            return tp.partition < info.num_partitions and self.node_id in info.assignment[tp.partition]

        stray = [tp for tp in list(self.log_manager.logs) if not placed_here(tp)]
        for tp in stray:
            logger.info("deleting the stray replica of %s: the cluster no longer places it on broker %d", tp, self.node_id)
        self.replica_manager.delete_partitions(stray)
        return len(stray)

    def _on_leadership(self, tp: TopicPartition, is_leader: bool) -> None:
        """The group coordinator moves with the leadership of `__consumer_offsets` partitions, the
        transaction coordinator with that of `__transaction_state` partitions."""
        if tp.topic == DELAYED_TOPIC:  # its leader delivers its delayed records
            partition = self.replica_manager.partitions.get(tp)
            if is_leader and partition is not None:
                self.delayed.become_leader(tp.partition, partition.leader_epoch)
            else:
                self.delayed.resign(tp.partition)
            return
        if tp.topic == TRANSACTION_STATE_TOPIC:
            partition = self.replica_manager.partitions.get(tp)
            if is_leader and partition is not None:
                self.txn_coordinator.become_leader(tp.partition, partition.leader_epoch)
            else:
                self.txn_coordinator.resign(tp.partition)
            return
        if tp.topic != OFFSETS_TOPIC:
            return
        if is_leader:
            started = time.monotonic()
            loaded = self.group_coordinator.become_leader(tp.partition)
            if loaded:
                logger.info("now coordinating %d groups of %s (loaded in %.2f s)", loaded, tp,
                            time.monotonic() - started)
        else:
            self.group_coordinator.unload_partition(tp.partition)

    # -- consumer groups ------------------------------------------------------------------------
    def _load_groups(self) -> None:
        info = self.metadata.topic(OFFSETS_TOPIC)
        if info is None or self.cluster:  # in a cluster, LeaderAndIsr says which groups are ours
            return
        started = time.monotonic()
        loaded = 0
        for partition in range(info.num_partitions):
            try:
                self.replica_manager.get_leader_partition(TopicPartition(OFFSETS_TOPIC, partition))
            except KafkaError:
                continue  # another broker coordinates these groups
            loaded += self.group_coordinator.load_partition(partition)
        logger.info("start-up: %d consumer groups loaded from %s (%.2f s)", loaded, OFFSETS_TOPIC,
                    time.monotonic() - started)

    async def ensure_offsets_topic(self) -> None:
        """`__consumer_offsets` is created on first use, as Kafka does, compacted."""
        if self.metadata.topic(OFFSETS_TOPIC) is not None:  # every group request asks: answered first
            return
        c = self.config
        await self.ensure_internal_topic(
            OFFSETS_TOPIC, c.get("offsets.topic.num.partitions"), c.get("offsets.topic.replication.factor"),
            "offsets.topic.replication.factor",
            {"cleanup.policy": "compact", "segment.bytes": str(c.get("offsets.topic.segment.bytes")),
             "compression.type": "producer"})

    async def ensure_transaction_state_topic(self) -> None:
        """`__transaction_state` likewise, on the first FindCoordinator for a transactional id."""
        c = self.config
        factor = c.get("transaction.state.log.replication.factor")
        await self.ensure_internal_topic(
            TRANSACTION_STATE_TOPIC, c.get("transaction.state.log.num.partitions"), factor,
            "transaction.state.log.replication.factor",
            {"cleanup.policy": "compact", "segment.bytes": str(c.get("transaction.state.log.segment.bytes")),
             "compression.type": "uncompressed", "unclean.leader.election.enable": "false",
             "min.insync.replicas": str(c.get("transaction.state.log.min.isr"))})

    async def ensure_delayed_messages_topic(self) -> None:
        """`__delayed_messages` likewise, on the first delayed record."""
        c = self.config
        await self.ensure_internal_topic(
            DELAYED_TOPIC, c.get("delayed.messages.topic.num.partitions"),
            c.get("delayed.messages.topic.replication.factor"), "delayed.messages.topic.replication.factor",
            {"cleanup.policy": "compact", "segment.bytes": str(c.get("delayed.messages.topic.segment.bytes")),
             "compression.type": "producer", "unclean.leader.election.enable": "false",
             "min.insync.replicas": str(c.get("delayed.messages.topic.min.isr"))})

    async def ensure_share_state_topic(self) -> None:
        """`__share_group_state` (share groups' state, KIP-932) likewise, on the first share fetch."""
        c = self.config
        await self.ensure_internal_topic(
            SHARE_STATE_TOPIC, c.get("share.coordinator.state.topic.num.partitions"),
            c.get("share.coordinator.state.topic.replication.factor"),
            "share.coordinator.state.topic.replication.factor",
            {"cleanup.policy": "compact", "segment.bytes": str(c.get("share.coordinator.state.topic.segment.bytes")),
             "compression.type": "producer", "unclean.leader.election.enable": "false",
             "min.insync.replicas": str(c.get("share.coordinator.state.topic.min.isr"))})

    async def ensure_internal_topic(self, name: str, partitions: int, factor: int, factor_key: str,
                                     configs: dict[str, str]) -> None:
        """A cluster with fewer live brokers than the replication factor refuses
        (COORDINATOR_NOT_AVAILABLE) rather than create it under-replicated for good; the single
        node uses what it has. min.insync.replicas never exceeds the replication factor."""
        if self.metadata.topic(name) is not None:
            return
        brokers = await self._brokers_for_assignment()
        if not self.cluster:
            factor = min(factor, len(brokers))
        elif len(brokers) < factor:
            raise CoordinatorNotAvailableError(
                f"{name} needs {factor} live brokers ({factor_key}); {len(brokers)} are alive")
        if "min.insync.replicas" in configs:
            configs = {**configs, "min.insync.replicas": str(min(int(configs["min.insync.replicas"]), factor))}
        assignment = assign_replicas(brokers, partitions, factor)
        try:
            await _resolved(self.metadata.create_topic(name, assignment, configs))
        except TopicAlreadyExistsError:
            return  # another broker created it first
        logger.info("created %s with %d partitions", name, len(assignment))

    async def group_coordinator_for_request(self) -> GroupCoordinator:
        await self.ensure_offsets_topic()
        return self.group_coordinator

    # -- transactions ---------------------------------------------------------------------------
    def _leader_of(self, tp: tuple[str, int]) -> int | None:
        """The leader of a partition a marker goes to; None once its topic is gone."""
        topic, partition = tp
        if self.metadata.topic(topic) is None:
            return None
        if not self.cluster:
            return self.node_id
        state = self.metadata.partition_state(topic, partition)
        return state.leader if state is not None else -1

    async def write_txn_markers(self, writes: list[MarkerWrite]) -> list[dict[tuple[str, int], ErrorCode]]:
        return await write_markers(self.replica_manager, writes, now_ms=now_ms(),
                                   wait_s=self.config.get("request.timeout.ms") / 1000, wait_for_isr=self.cluster,
                                   on_offsets_marker=self._offsets_marker_written)

    async def _write_local_markers(self, markers: TxnMarkers, tps: list[tuple[str, int]]
                                   ) -> dict[tuple[str, int], ErrorCode]:
        write = MarkerWrite(markers.producer_id, markers.producer_epoch, markers.coordinator_epoch, markers.commit,
                            tuple(tps))
        return (await self.write_txn_markers([write]))[0]

    def _offsets_marker_written(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker reached `__consumer_offsets-<partition>`: the transaction's offsets become the
        group's, or are dropped."""
        self.group_coordinator.complete_transaction(partition, producer_id, commit)

    # -- topic operations (validated here, applied through the metadata store) ---------------
    async def _brokers_for_assignment(self):
        if self.cluster:
            return await self.metadata.registered_brokers()
        return self.metadata.brokers()

    async def create_topic(self, name: str, *, num_partitions: int | None = None,
                           replication_factor: int | None = None, assignment: list[list[int]] | None = None,
                           configs: dict[str, str] | None = None, validate_only: bool = False,
                           wait_s: float = 0.0) -> TopicInfo:
        """Validate and create a topic; in a cluster, wait up to `wait_s` for its leaders (CreateTopics)."""
        validate_topic_name(name)
        configs = {k: v for k, v in (configs or {}).items() if v is not None}
        if is_view_request(configs):
            return await self._create_view(name, configs, assignment, validate_only)
        validate_topic_configs(configs, self.config)
        check_retry_configs(self.metadata, name, configs)
        if self.metadata.topic(name) is not None or self.views.view(name) is not None \
                or await self.views.view_znode_exists(name):
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        brokers = await self._brokers_for_assignment()
        if assignment is None:
            partitions = num_partitions if num_partitions is not None else self.config.get("num.partitions")
            factor = replication_factor if replication_factor is not None else self.config.get("default.replication.factor")
            assignment = assign_replicas(brokers, partitions, factor)
        else:
            validate_assignment(brokers, assignment)
        if validate_only:
            return TopicInfo(name, uuid.UUID(int=0), assignment, configs)
        info = await _resolved(self.metadata.create_topic(name, assignment, configs))
        if self.cluster and wait_s > 0:
            await self.metadata.wait_for_topic(name, len(assignment), wait_s)
        await create_retry_topics(self.create_topic, self.metadata, name, configs, len(assignment),
                                  len(assignment[0]), wait_s)
        return info

    async def _create_view(self, name: str, configs: dict[str, str], assignment, validate_only: bool) -> TopicInfo:
        """A filtered view (docs/features.md): metadata only, answered with its source's partitions.
        Partition counts and replication factors given are ignored: a view follows its source."""
        spec = view_spec(configs)
        if assignment is not None:
            raise InvalidRequestError(f"A view follows the partitions of its source {spec.source}: "
                                      f"it takes no replica assignment")
        if self.metadata.topic(name) is not None or self.views.view(name) is not None \
                or await self.views.topic_znode_exists(name):
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        if self.views.view(spec.source) is not None:
            raise InvalidConfigError(f"view.source {spec.source} is itself a view: a view reads a topic")
        source = self.metadata.topic(spec.source)
        if source is None:
            raise InvalidConfigError(f"view.source {spec.source} does not exist: create the topic first")
        if source.is_internal:
            raise InvalidConfigError(f"view.source {spec.source} is an internal topic")
        if not validate_only:
            view = await self.views.create(name, spec)
            logger.info("created view %s of %s: %s", name, spec.source, spec.filter_text)
            return TopicInfo(name, view.topic_id, source.assignment, spec.configs)
        return TopicInfo(name, uuid.UUID(int=0), source.assignment, spec.configs)

    async def delete_topic(self, name: str) -> TopicInfo:
        if not self.config.get("delete.topic.enable"):
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        if self.views.view(name) is not None:
            view = await self.views.delete(name)
            self.group_coordinator.remove_offsets_of_topic(name)
            return TopicInfo(name, view.topic_id, [], view.spec.configs)
        dependants = self.views.views_of(name)
        if dependants:
            raise PolicyViolationError(f"Topic {name} is the source of the views {', '.join(dependants)}: "
                                       f"delete them first")
        info = await _resolved(self.metadata.delete_topic(name))
        self.group_coordinator.remove_offsets_of_topic(name)
        return info

    async def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None,
                                validate_only: bool = False) -> None:
        info = self.metadata.topic(name)
        view = self.views.view(name)
        if view is not None:
            raise InvalidPartitionsError(f"{name} is a view of {view.source}: it follows the partition count "
                                         f"of {view.source}; add partitions there")
        if info is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        current = info.num_partitions
        if count < current:  # Kafka's answer; kbroker's decrease is reached explicitly (decrease_partitions)
            raise InvalidPartitionsError(
                f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise InvalidPartitionsError(f"Topic already has {current} partitions.")
        brokers = await self._brokers_for_assignment()
        if assignment is None:
            assignment = assign_replicas(brokers, count - current, len(info.assignment[0]), current)
        validate_assignment(brokers, info.assignment + assignment)
        if not validate_only:
            await _resolved(self.metadata.add_partitions(name, assignment))

    async def decrease_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        """kbroker's own: retire the partitions from `count` on (docs/cluster.md, "Decreasing
        partitions"), asked for explicitly with the topic config `partitions.retire.from`
        (api/configs.py); Kafka's CreatePartitions refuses any decrease, and so does kbroker's."""
        info = self.metadata.topic(name)
        view = self.views.view(name)
        if view is not None:
            raise InvalidPartitionsError(f"{name} is a view of {view.source}: it follows the partition count "
                                         f"of {view.source}")
        if info is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        if not self.cluster:
            raise InvalidPartitionsError("Decreasing the number of partitions needs a cluster (zookeeper.connect): "
                                         "the single node does not retire partitions")
        if name in INTERNAL_TOPICS:
            raise InvalidPartitionsError(f"The partitions of the internal topic {name} cannot be decreased")
        if count < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if count >= info.num_partitions:
            raise InvalidPartitionsError(
                f"partitions.retire.from={count} retires nothing: topic {name} has {info.num_partitions} "
                f"partitions (0..{info.num_partitions - 1}); add partitions with CreatePartitions")
        if not validate_only:
            await self.metadata.retire_partitions(name, count)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        check_retry_configs(self.metadata, name, configs)
        await _resolved(self.metadata.set_topic_configs(name, configs))
        info = self.metadata.topic(name)
        if info is not None:  # retry.topics added tiers: their topics are made now
            await create_retry_topics(self.create_topic, self.metadata, name, configs, info.num_partitions,
                                      len(info.assignment[0]), RETRY_TOPICS_WAIT_S)

    # -- dynamic broker configs (kbroker/dynamic_config.py) ------------------------------------------
    async def broker_configs(self, entity: str) -> dict[str, str]:
        """The dynamic configs stored for `entity`: a broker id, or `<default>` for every broker."""
        return await _resolved(self.metadata.broker_configs(entity))

    async def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Store `entity`'s dynamic configs; each broker they concern applies them when its store
        tells it (at once here; the others through ZooKeeper's config change notifications)."""
        await _resolved(self.metadata.set_broker_configs(entity, configs))

    # -- per-group configs (kbroker/group/dynamic_configs.py) ----------------------------------------
    async def group_configs(self, group: str) -> dict[str, str]:
        """The configs stored for consumer group `group` (a cluster's read fresh from ZooKeeper)."""
        return await _resolved(self.metadata.read_group_configs(group))

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """Store `group`'s configs (an empty set removes them); its coordinator uses them from the
        group's next heartbeat (in a cluster, once ZooKeeper's change notification reaches it)."""
        await _resolved(self.metadata.set_group_configs(group, configs))

    def _apply_dynamic_configs(self, own: dict[str, str], default: dict[str, str]) -> None:
        """Kafka's reconfigurables: the config's dynamic layers, then what read the old values once —
        every log's config (a topic without an override follows the new broker default at once:
        retention, segments, flush, cleaner, max.message.bytes), the replication throttle."""
        apply_stored(self.config, own, default)
        self.log_manager.default_config = log_config_for(self.config, {})
        self.log_manager.producer_id_expiration_ms = self.config.get("producer.id.expiration.ms")
        self.replica_manager.reconfigure_logs()
        self.replica_manager.quotas.update_rates(own, default)
        for reconfigure in self.reconfigurables:  # the server's listeners (a renewed keystore, ...)
            try:
                reconfigure()
            except Exception:
                logger.exception("applying dynamic broker configs failed")

    # -- periodic work --------------------------------------------------------------------------
    def periodic_tasks(self) -> list[tuple[float, callable]]:
        """(interval seconds, job) pairs the server runs in the background; an interval that a dynamic
        config may change is a callable, read before each wait."""
        c = self.config
        lm = self.log_manager
        return [
            (c.get("log.retention.check.interval.ms") / 1000, lambda: lm.cleanup_logs(now_ms())),
            *([(lambda: max(c.get("log.cleaner.backoff.ms"), 1) / 1000, lambda: lm.clean_compacted_logs(now_ms()))]
              if c.get("log.cleaner.enable") else []),
            (lambda: min(c.get("log.flush.scheduler.interval.ms"), 1000) / 1000, lambda: lm.flush_dirty_logs(now_ms())),
            (c.get("replica.high.watermark.checkpoint.interval.ms") / 1000, lm.checkpoint_high_watermarks),
            (c.get("log.flush.offset.checkpoint.interval.ms") / 1000, lm.checkpoint_recovery_points),
            (c.get("log.flush.start.offset.checkpoint.interval.ms") / 1000, lm.checkpoint_log_start_offsets),
            (c.get("offsets.retention.check.interval.ms") / 1000, self.group_coordinator.expire_offsets),
            (60.0, self.client_quotas.expire),  # quota sensors idle for an hour
            (0.1, self.share_manager.expire_locks),  # share-groups' record locks that timed out
            *([(c.get("replica.lag.time.max.ms") / 2000, self.replica_manager.maybe_shrink_isr)] if self.cluster else []),
        ]


def _txn_config(config: BrokerConfig) -> TransactionConfig:
    c = config.get
    return TransactionConfig(
        transactional_id_expiration_ms=c("transactional.id.expiration.ms"),
        transaction_max_timeout_ms=c("transaction.max.timeout.ms"),
        transaction_state_partitions=c("transaction.state.log.num.partitions"),
        abort_timed_out_transactions_interval_ms=c("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        remove_expired_transactional_ids_interval_ms=c("transaction.remove.expired.transaction.cleanup.interval.ms"),
        offsets_topic_partitions=c("offsets.topic.num.partitions"),
    )


def _group_config(config: BrokerConfig) -> GroupConfig:
    c = config.get
    for key in ("heartbeat.interval.ms", "session.timeout.ms"):  # Kafka's GroupCoordinatorConfig checks
        low, value, high = (c(f"group.consumer.{k}") for k in (f"min.{key}", key, f"max.{key}"))
        if not low <= value <= high:
            raise StartupError(f"group.consumer.{key}={value} must be between group.consumer.min.{key}={low} "
                               f"and group.consumer.max.{key}={high}")
    if c("group.consumer.heartbeat.interval.ms") >= c("group.consumer.session.timeout.ms"):
        raise StartupError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
    return GroupConfig(
        min_session_timeout_ms=c("group.min.session.timeout.ms"),
        max_session_timeout_ms=c("group.max.session.timeout.ms"),
        max_size=c("group.max.size"),
        initial_rebalance_delay_ms=c("group.initial.rebalance.delay.ms"),
        offsets_retention_ms=c("offsets.retention.minutes") * 60_000,
        offset_metadata_max_bytes=c("offset.metadata.max.bytes"),
        offsets_topic_partitions=c("offsets.topic.num.partitions"),
        rebalance_protocols=tuple(p.strip().lower() for p in as_list(c("group.coordinator.rebalance.protocols"))),
        consumer_heartbeat_interval_ms=c("group.consumer.heartbeat.interval.ms"),
        consumer_session_timeout_ms=c("group.consumer.session.timeout.ms"),
        consumer_min_heartbeat_interval_ms=c("group.consumer.min.heartbeat.interval.ms"),
        consumer_max_heartbeat_interval_ms=c("group.consumer.max.heartbeat.interval.ms"),
        consumer_min_session_timeout_ms=c("group.consumer.min.session.timeout.ms"),
        consumer_max_session_timeout_ms=c("group.consumer.max.session.timeout.ms"),
        consumer_max_size=c("group.consumer.max.size"),
        consumer_assignors=assignor_names(c("group.consumer.assignors")),
        consumer_migration_policy=str(c("group.consumer.migration.policy")).lower(),
        share_heartbeat_interval_ms=c("group.share.heartbeat.interval.ms"),
        share_session_timeout_ms=c("group.share.session.timeout.ms"),
        share_max_size=c("group.share.max.size"),
        dlq_topic_prefix=str(c("errors.deadletterqueue.topic.name.prefix") or ""),
    )
