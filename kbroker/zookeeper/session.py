"""The trio side of the ZooKeeper session: blocking adapter calls in worker threads, and kazoo's
callbacks (watches, session state) handed over to the trio loop, where they only ever run.

Kazoo threads do nothing but `TrioToken.run_sync_soon(callback)`: broker and controller state is
touched on the trio thread alone.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable

import trio

from kbroker.zookeeper.client import Watch, ZkClient

logger = logging.getLogger(__name__)


class ZkSession:
    def __init__(self, client: ZkClient) -> None:
        self.client = client
        self._token: trio.lowlevel.TrioToken | None = None
        self._state_callbacks: list[Callable[[str], None]] = []
        client.add_state_listener(self._from_kazoo_state)
        # one thread at a time per session keeps request order as the caller issued them
        self._limiter = trio.CapacityLimiter(4)

    async def start(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        await self.call(self.client.start)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a blocking adapter method in a worker thread."""
        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=self._limiter,
                                             abandon_on_cancel=True)

    def watch(self, callback: Callable[[], None]) -> Watch:
        """A watch for kazoo that runs `callback` on the trio thread."""

        def fire() -> None:
            self._to_trio(callback)

        return fire

    def on_state(self, callback: Callable[[str], None]) -> None:
        """`callback("LOST" | "SUSPENDED" | "CONNECTED")` on the trio thread."""
        self._state_callbacks.append(callback)

    def _from_kazoo_state(self, state: str) -> None:
        for callback in self._state_callbacks:
            self._to_trio(functools.partial(callback, state))

    def _to_trio(self, callback: Callable[[], None]) -> None:
        token = self._token
        if token is None:
            return

        def guarded() -> None:  # an exception escaping run_sync_soon would crash the whole trio run
            try:
                callback()
            except RuntimeError as exc:  # e.g. a nursery already closed while shutting down
                logger.debug("ZooKeeper callback after shutdown: %s", exc)
            except Exception:
                logger.exception("ZooKeeper callback failed")

        try:
            token.run_sync_soon(guarded)
        except trio.RunFinishedError:
            pass

    def close(self) -> None:
        self.client.close()
