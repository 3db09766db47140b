"""The HTTP listeners beside the Kafka ones: metrics.listener (the Prometheus endpoint) and
schema.registry.listener (the schema registry's REST API). Owns binding them at start-up, with the
Kafka listeners (a port in use, or a registry that cannot be secured as asked, is a start-up
error), and starting them as background tasks of the running broker. The endpoints themselves are
server/metrics_http.py and server/schema_registry_http.py.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable

import trio

from kbroker.broker import Broker
from kbroker.config import BrokerConfig
from kbroker.server.listeners import ListenerSecurity
from kbroker.server.metrics_http import MetricsEndpoint, bind_metrics_listeners
from kbroker.server.schema_registry_http import (bind_schema_registry_listeners, registry_security,
                                                 serve_schema_registry)

__all__ = ["SideListeners"]

logger = logging.getLogger("kbroker.server.server")  # the server's lines keep the server's logger name


class SideListeners:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.metrics_listeners: list[trio.SocketListener] = []  # metrics.listener, when set
        self.metrics: MetricsEndpoint | None = None
        self.schema_registry_listeners: list[trio.SocketListener] = []  # schema.registry.listener, when set

    async def bind(self, securities: dict[str, ListenerSecurity]) -> None:
        """Bound at start-up, after the Kafka listeners' sockets."""
        if self.config.metrics_listener is not None:
            self.metrics_listeners = await bind_metrics_listeners(*self.config.metrics_listener)
        if self.config.schema_registry_listener is not None:
            registry_security(self.config, securities)  # a registry that cannot be secured as asked never binds
            self.schema_registry_listeners = await bind_schema_registry_listeners(
                *self.config.schema_registry_listener)

    async def start(self, background: trio.Nursery, broker: Broker, securities: dict[str, ListenerSecurity],
                    connection_count: Callable[[], int]) -> None:
        """Each bound listener served in `background`; returns once they serve."""
        if self.metrics_listeners:
            await background.start(partial(self._serve_metrics, broker, connection_count))
        if self.schema_registry_listeners:
            await background.start(partial(serve_schema_registry, broker, self.schema_registry_listeners,
                                           registry_security(self.config, securities)))

    async def _serve_metrics(self, broker: Broker, connection_count: Callable[[], int], *,
                             task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The Prometheus endpoint (metrics.listener): the broker's registry rendered per scrape."""
        from kbroker.metrics.collector import CONTENT_TYPE, build_registry, collect, encode

        registry = build_registry(broker, broker.stats, connection_count, self.config.listeners[0][0])
        self.metrics = MetricsEndpoint(self.metrics_listeners, lambda: collect(registry), encode, CONTENT_TYPE)
        host = self.config.metrics_listener[0] or "0.0.0.0"
        logger.info("metrics served on http://%s:%d/metrics", host, self.metrics.port)
        await self.metrics.run(task_status=task_status)
