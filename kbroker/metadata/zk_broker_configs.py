"""A cluster broker's dynamic broker configs: `/config/brokers/<id>` (this broker's own) and
`/config/brokers/<default>` (the cluster-wide defaults), Kafka's dynamic broker config znodes.

Both are read at start and re-read when a `brokers/<entity>` notification in `/config/changes`
names one of them (ClusterMetadataStore hears those and calls `load`); each read tells the
listeners (this broker's and the default configs). A write is Kafka's
AdminZkClient.changeBrokerConfig: the entity's znode, then a notification every broker hears.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kbroker.metadata import notifications
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.session import ZkSession

logger = logging.getLogger(__name__)


class ZkBrokerConfigs:
    """The dynamic configs of broker `node_id` and the `<default>` entity, as last read or written."""

    def __init__(self, session: ZkSession, node_id: int) -> None:
        self.session = session
        self.zk = session.client
        self.entities = [str(node_id), zk.DEFAULT_BROKER_ENTITY]  # the two this broker applies
        self._configs: dict[str, dict[str, str]] = {}
        self.listeners: list[Callable[[dict[str, str], dict[str, str]], None]] = []

    def dynamic(self) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's dynamic configs, the cluster-wide default ones), as last read."""
        own, default = self.entities
        return dict(self._configs.get(own, {})), dict(self._configs.get(default, {}))

    async def load(self, entities: list[str]) -> None:
        results = await self.session.call(self.zk.get_many, [zk.broker_config_path(e) for e in entities])
        for entity, result in zip(entities, results):
            self._configs[entity] = zk.decode_config(result[0] if result else None)
        self._notify()

    def _notify(self) -> None:
        own, default = self.dynamic()
        for listener in self.listeners:
            try:
                listener(own, default)
            except Exception:
                logger.exception("broker config listener failed")

    async def read(self, entity: str) -> dict[str, str]:
        """The dynamic configs stored for `entity` (a broker id or `<default>`), read from ZooKeeper."""
        try:
            data, _ = await self.session.call(self.zk.get, zk.broker_config_path(entity))
        except zk.NoNodeError:
            return {}
        return zk.decode_config(data)

    async def set(self, entity: str, configs: dict[str, str]) -> None:
        """Kafka's AdminZkClient.changeBrokerConfig: the entity's configs, then a notification."""
        path, data = zk.broker_config_path(entity), zk.encode_config(configs)
        await notifications.write_config(self.session, self.zk, path, data)
        await notifications.post_config_change(self.session, self.zk, zk.encode_config_change("brokers", entity))
        if entity in self.entities:
            self._configs[entity] = dict(configs)
            self._notify()
