"""The controller's requests to each live broker: sent in order by one task per broker, retried
until the broker leaves (its queue is closed) or this controller resigns (all are closed). Each
answer is handed to `on_response` (how the controller learns of replicas on failed log dirs)."""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import trio

from kbroker.controller import broker_requests as req
from kbroker.errors import ErrorCode
from kbroker.zookeeper import znodes as zk

logger = logging.getLogger(__name__)

SendRequest = Callable[[zk.BrokerRegistration, int, int, dict], Awaitable[Any]]
OnResponse = Callable[[zk.BrokerRegistration, int, Any], None]


class _BrokerQueue:
    def __init__(self, broker: zk.BrokerRegistration) -> None:
        self.broker = broker
        self.send, self.receive = trio.open_memory_channel[tuple[int, dict]](1000)
        self.scope = trio.CancelScope()


class BrokerQueues:
    def __init__(self, send_request: SendRequest, on_response: OnResponse | None = None) -> None:
        self.send_request = send_request
        self.on_response = on_response
        self._queues: dict[int, _BrokerQueue] = {}
        self._nursery: trio.Nursery | None = None

    def attach(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def open(self, broker: zk.BrokerRegistration) -> None:
        queue = _BrokerQueue(broker)
        self._queues[broker.broker_id] = queue
        assert self._nursery is not None
        self._nursery.start_soon(self._run, queue)

    def close(self, broker_id: int) -> None:
        queue = self._queues.pop(broker_id, None)
        if queue is not None:
            queue.scope.cancel()

    def close_all(self) -> None:
        for queue in self._queues.values():
            queue.scope.cancel()
        self._queues.clear()

    def send(self, broker: zk.BrokerRegistration, api_key: int, body: dict) -> None:
        queue = self._queues.get(broker.broker_id)
        if queue is None:
            return
        try:
            queue.send.send_nowait((api_key, body))
        except trio.WouldBlock:
            logger.error("request queue to broker %d is full; dropping it until it reconnects", broker.broker_id)
            self.close(broker.broker_id)

    async def _run(self, queue: _BrokerQueue) -> None:
        with queue.scope:
            async for api_key, body in queue.receive:
                delay = 0.05
                while True:
                    try:
                        response = await self.send_request(queue.broker, api_key, req.VERSIONS[api_key], body)
                        code = getattr(response, "error_code", 0)
                        if code:
                            logger.warning("broker %d answered %s with %s", queue.broker.broker_id,
                                           api_key, ErrorCode(code).name)
                        break
                    except Exception as exc:  # noqa: BLE001 - retried until the broker leaves
                        log = logger.info if delay == 0.05 else logger.debug
                        log("request %d to broker %d failed (%s); retrying", api_key, queue.broker.broker_id, exc)
                        await trio.sleep(delay)
                        delay = min(delay * 2, 1.0)
                if self.on_response is not None:
                    try:
                        self.on_response(queue.broker, api_key, response)
                    except Exception:  # noqa: BLE001 - a bad answer must not stop the queue
                        logger.exception("handling broker %d's answer to %d failed", queue.broker.broker_id, api_key)
