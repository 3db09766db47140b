"""A broker's life in a ZooKeeper cluster: session, registration, controller, fetchers, ISR changes,
log dir failures reported to the controller, controlled shutdown.

Start order: the ZooKeeper session and the cluster's persistent paths (before the broker is
built), then follower fetchers, the controller (elected or following), the ISR-change sender and
finally the broker registration, which makes the controller send this broker its roles. A
session that expires (a long pause, SIGSTOP) makes the controller resign at once; when kazoo
reconnects with a new session, the broker registers again and the controller, seeing a new broker
epoch, treats it as restarted and tells it its roles afresh — an old leader becomes a follower and
truncates its unacknowledged tail before fetching.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import trio

from kbroker.config import BrokerConfig, effective_topic_value
from kbroker.controller.broker_requests import CONTROLLED_SHUTDOWN, VERSIONS
from kbroker.controller.controller import KafkaController
from kbroker.delayed.format import ADMIN_CLIENT_ID
from kbroker.errors import ErrorCode
from kbroker.replica.fetcher import ReplicaFetcherManager
from kbroker.replica.drain import PartitionDrains
from kbroker.server import client_security
from kbroker.server.channel import BrokerChannel, ChannelError
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.client import ZkClient
from kbroker.zookeeper.session import ZkSession

logger = logging.getLogger(__name__)

ALTER_PARTITION, ALTER_PARTITION_VERSION = 56, 3


async def open_session(config: BrokerConfig) -> ZkSession:
    session_ms = config.get("zookeeper.session.timeout.ms")
    connection_ms = config.get("zookeeper.connection.timeout.ms") if config.is_set(
        "zookeeper.connection.timeout.ms") else session_ms
    session = ZkSession(ZkClient(config.get("zookeeper.connect"), session_ms, connection_ms))
    try:
        await session.start()
    except zk.ZkError as exc:
        raise zk.ZkError(f"cannot reach ZooKeeper at {config.get('zookeeper.connect')}: {exc}") from exc
    return session


class ClusterNode:
    def __init__(self, broker, session: ZkSession) -> None:
        self.broker = broker
        self.session = session
        self.config: BrokerConfig = broker.config
        self.node_id = broker.node_id
        # how this broker connects to the others: the inter-broker listener, and the control plane
        # listener for the controller's requests (the same one unless control.plane.listener.name)
        self.inter_broker_security = client_security.for_listener(self.config, self.config.inter_broker_listener_name)
        self.control_plane_security = (
            self.inter_broker_security if self.config.control_plane_listener_name == self.config.inter_broker_listener_name
            else client_security.for_listener(self.config, self.config.control_plane_listener_name))
        self._channels: dict[tuple[int, str, int], BrokerChannel] = {}
        # transaction markers wait for the leader's ISR: their own connections, so they never hold
        # up the controller's requests
        self._marker_channels: dict[tuple[int, str, int], BrokerChannel] = {}
        # delayed delivery's forwarded schedules and its deliveries, as __admin_client (kbroker/delayed):
        # a connection each, so a producer's schedules never wait behind deliveries
        self._delayed_channels: dict[tuple[str, int, str, int], BrokerChannel] = {}
        self._session_lost = False
        self._nursery: trio.Nursery | None = None
        self._failed_dirs_to_report = 0
        self._dir_failed = trio.Event()
        c = self.config
        self.controller = KafkaController(
            self.node_id, session, self._send_request, unclean_leader_election=self._unclean,
            auto_leader_rebalance=c.get("auto.leader.rebalance.enable"),
            imbalance_check_interval_s=c.get("leader.imbalance.check.interval.seconds"),
            imbalance_percentage=c.get("leader.imbalance.per.broker.percentage"),
            replica_restore_delay_s=c.get("replica.restore.delay.ms") / 1000,
            listener=c.control_plane_listener_name)

    def _retired_records_partitioner(self, topic: str) -> str:
        info = self.broker.metadata.topic(topic)
        return str(effective_topic_value(self.config, info.configs if info else {}, "retired.records.partitioner"))

    def _unclean(self, topic: str) -> bool:
        info = self.broker.metadata.topic(topic)
        value = effective_topic_value(self.config, info.configs if info else {}, "unclean.leader.election.enable")
        return str(value).lower() == "true"

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        broker = self.broker
        rm = broker.replica_manager
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            broker.metadata.attach(nursery)
            broker.views.attach(nursery)
            await broker.views.start()
            fetchers = ReplicaFetcherManager(
                self.node_id, self.config, rm,
                lambda host, port: BrokerChannel(host, port, f"broker-{self.node_id}-fetcher",
                                                 security=self.inter_broker_security))
            rm.fetchers = fetchers
            await nursery.start(fetchers.run)
            broker.controller = self.controller
            broker.txn_coordinator.markers.request = self._send_markers
            broker.delayed.connect(schedules=partial(self._send_delayed, "schedules"),
                                   deliveries=partial(self._send_delayed, "deliveries"))
            # share-partition state to the brokers that keep it (share coordinators, KIP-932)
            broker.share_manager.persister.request = partial(self._send_delayed, "share-state")
            broker.share_manager.dead_letters.request = partial(self._send_delayed, "dead-letters")
            self.controller.on_controller_change = self._controller_changed
            await nursery.start(self.controller.run)
            nursery.start_soon(rm.run_isr_changes, self._send_alter_partition)
            rm.log_dir_failure_listeners.append(self._log_dir_failed)
            nursery.start_soon(self._report_log_dir_failures)
            nursery.start_soon(PartitionDrains(
                self.node_id, rm, broker.metadata,
                lambda host, port: BrokerChannel(host, port, f"broker-{self.node_id}-drain",
                                                 security=self.inter_broker_security),
                self._retired_records_partitioner).run)
            self.session.on_state(self._on_session_state)
            await broker.metadata.register(self.config.get("zookeeper.session.timeout.ms") / 1000 + 30)
            task_status.started()
            await trio.sleep_forever()

    def _controller_changed(self, controller_id: int) -> None:
        if controller_id >= 0:
            self.broker.metadata.controller_id = controller_id

    # -- the ZooKeeper session ----------------------------------------------------------------------
    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            logger.warning("broker %d: ZooKeeper session expired", self.node_id)
            self._session_lost = True
            self.controller.session_lost()
        elif state == "CONNECTED" and self._session_lost and self._nursery is not None:
            self._session_lost = False
            self._nursery.start_soon(self._register_again)

    async def _register_again(self) -> None:
        while True:
            try:
                await self.broker.metadata.register(self.config.get("zookeeper.session.timeout.ms") / 1000 + 30)
                await self.broker.metadata.resync_acls()  # the expired session's ACL watches are gone
                self.controller.elect()
                return
            except (zk.ZkError, trio.TooSlowError) as exc:
                logger.warning("broker %d: registering again failed (%s); retrying", self.node_id, exc)
                await trio.sleep(1)

    # -- failed log dirs ------------------------------------------------------------------------------
    def _log_dir_failed(self, _d, _tps) -> None:
        self._failed_dirs_to_report += 1
        self._dir_failed.set()

    async def _report_log_dir_failures(self) -> None:
        """One notification per failed dir (Kafka's LogDirFailureHandler), retried until written:
        the controller then moves leadership off the dir's replicas."""
        while True:
            await self._dir_failed.wait()
            self._dir_failed = trio.Event()
            while self._failed_dirs_to_report:
                try:
                    path = await self.broker.metadata.propagate_log_dir_event()
                except zk.ZkError as exc:
                    logger.warning("broker %d: reporting a failed log dir failed (%s); retrying", self.node_id, exc)
                    await trio.sleep(1)
                    continue
                self._failed_dirs_to_report -= 1
                logger.info("broker %d: reported a failed log dir to the controller (%s)", self.node_id, path)

    # -- talking to other brokers -------------------------------------------------------------------
    def _channel(self, broker_id: int, host: str, port: int, security=None) -> BrokerChannel:
        key = (broker_id, host, port)
        channel = self._channels.get(key)
        if channel is None:
            channel = self._channels[key] = BrokerChannel(host, port, f"broker-{self.node_id}-controller",
                                                          security=security or self.control_plane_security)
        return channel

    async def _send_request(self, target: zk.BrokerRegistration, api_key: int, version: int, body: dict) -> Any:
        return await self._channel(target.broker_id, target.host, target.port).request(api_key, version, body)

    async def _send_markers(self, broker_id: int, api_key: int, version: int, body: dict) -> Any:
        target = self.broker.metadata.broker(broker_id)
        if target is None:
            raise ChannelError(f"broker {broker_id} is unknown")
        key = (broker_id, target.host, target.port)
        channel = self._marker_channels.get(key)
        if channel is None:
            channel = self._marker_channels[key] = BrokerChannel(target.host, target.port,
                                                                 f"broker-{self.node_id}-txn-markers",
                                                                 security=self.inter_broker_security)
        return await channel.request(api_key, version, body, timeout_s=self.config.get("request.timeout.ms") / 1000 + 5)

    async def _send_delayed(self, purpose: str, broker_id: int, api_key: int, version: int, body: dict) -> Any:
        target = self.broker.metadata.broker(broker_id)
        if target is None:
            raise ChannelError(f"broker {broker_id} is unknown")
        key = (purpose, broker_id, target.host, target.port)
        channel = self._delayed_channels.get(key)
        if channel is None:
            channel = self._delayed_channels[key] = BrokerChannel(target.host, target.port, ADMIN_CLIENT_ID,
                                                                  security=self.inter_broker_security)
        return await channel.request(api_key, version, body, timeout_s=self.config.get("request.timeout.ms") / 1000 + 5)

    async def _to_controller(self, api_key: int, version: int, body: dict) -> Any:
        controller_id = self.broker.metadata.controller_id
        target = self.broker.metadata.broker(controller_id)
        if target is None:
            raise ChannelError(f"controller {controller_id} is unknown")
        return await self._channel(controller_id, target.host, target.port,
                                   self.inter_broker_security).request(api_key, version, body)

    async def _send_alter_partition(self, items: list[tuple[str, int, int, int, list[int]]]) -> dict:
        metadata = self.broker.metadata
        if self.controller.is_active:
            result = await self.controller.submit(("alter_partition", self.node_id, metadata.broker_epoch, items))
            if isinstance(result, (Exception, ErrorCode)):
                raise ChannelError(f"AlterPartition failed: {result!r}")
            return result
        topics: dict[str, list[dict]] = {}
        for topic, partition, leader_epoch, partition_epoch, isr in items:
            topics.setdefault(topic, []).append({
                "partition_index": partition, "leader_epoch": leader_epoch, "leader_recovery_state": 0,
                "partition_epoch": partition_epoch,
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in isr]})
        ids = {t: metadata.topic(t).topic_id for t in topics if metadata.topic(t) is not None}
        response = await self._to_controller(ALTER_PARTITION, ALTER_PARTITION_VERSION, {
            "broker_id": self.node_id, "broker_epoch": metadata.broker_epoch,
            "topics": [{"topic_id": ids[t], "partitions": ps} for t, ps in topics.items() if t in ids]})
        if response.error_code != ErrorCode.none:
            raise ChannelError(f"AlterPartition answered {ErrorCode(response.error_code).name}")
        names = {v: k for k, v in ids.items()}
        answers = {}
        for topic in response.topics:
            name = names.get(topic.topic_id)
            for p in topic.partitions:
                state = zk.LeaderAndIsr(p.leader_id, p.leader_epoch, tuple(p.isr), -1, p.partition_epoch)
                answers[(name, p.partition_index)] = (ErrorCode(p.error_code), state)
        return answers

    # -- shutdown -----------------------------------------------------------------------------------
    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships away first (Kafka's controlled
        shutdown); True when it reports none left. Bounded by the retry settings."""
        if not self.config.get("controlled.shutdown.enable"):
            return False
        metadata = self.broker.metadata
        attempts = max(1, self.config.get("controlled.shutdown.max.retries"))
        for attempt in range(attempts):
            try:
                with trio.fail_after(30):
                    if self.controller.is_active:
                        result = await self.controller.submit(("controlled_shutdown", self.node_id,
                                                               metadata.broker_epoch))
                        code, remaining = result if isinstance(result, tuple) else (result, [])
                    else:
                        response = await self._to_controller(CONTROLLED_SHUTDOWN, VERSIONS[CONTROLLED_SHUTDOWN], {
                            "broker_id": self.node_id, "broker_epoch": metadata.broker_epoch})
                        code = ErrorCode(response.error_code)
                        remaining = [(r.topic_name, r.partition_index) for r in response.remaining_partitions]
                if code == ErrorCode.none and not remaining:
                    logger.info("broker %d: controlled shutdown complete", self.node_id)
                    await self._wait_for_roles()
                    return True
                logger.info("broker %d: controlled shutdown attempt %d: %s, %d partitions still led", self.node_id,
                            attempt + 1, code.name if isinstance(code, ErrorCode) else code, len(remaining))
            except (ChannelError, trio.TooSlowError, zk.ZkError) as exc:
                logger.info("broker %d: controlled shutdown attempt %d failed: %s", self.node_id, attempt + 1, exc)
            await trio.sleep(self.config.get("controlled.shutdown.retry.backoff.ms") / 1000)
        logger.warning("broker %d: controlled shutdown did not complete; shutting down anyway", self.node_id)
        return False

    async def _wait_for_roles(self) -> None:
        """The controller's LeaderAndIsr making us a follower is on its way: give it a moment to land
        so clients are answered NOT_LEADER_OR_FOLLOWER (and re-route) rather than cut off."""
        with trio.move_on_after(2):
            while any(p.is_leader and len(p.replicas) > 1 for p in self.broker.replica_manager.partitions.values()):
                await trio.sleep(0.02)

    async def close(self) -> None:
        for channel in [*self._channels.values(), *self._marker_channels.values(), *self._delayed_channels.values()]:
            await channel.aclose()
        await trio.to_thread.run_sync(self.session.close)
