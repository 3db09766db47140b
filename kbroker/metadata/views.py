"""The catalogue of filtered views: name, topic id and definition (`ViewSpec`) of each.

A view is metadata only: it has no log, no partitions of its own and no znode under
`/brokers/topics`, so neither the replica layer nor the controller ever sees it (no logs, no
elections). The single node keeps views in `<first log dir>/kbroker-views.json` (written
atomically); a cluster keeps one znode per view, `/kbroker/views/<name>` holding
`{"version": 1, "topic_id": ..., "configs": {...}}`, and every broker watches that node's
children, so all of them answer for a view a few milliseconds after it is created.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

import trio

from kbroker.errors import InvalidConfigError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from kbroker.log.checkpoint import write_atomically
from kbroker.metadata.store import _new_topic_id
from kbroker.views.spec import ViewSpec, view_spec
from kbroker.zookeeper import znodes as zk

logger = logging.getLogger(__name__)

VIEWS_PATH = "/kbroker/views"


@dataclass(frozen=True)
class ViewInfo:
    name: str
    topic_id: uuid.UUID
    spec: ViewSpec

    @property
    def source(self) -> str:
        return self.spec.source


def encode_view(view: ViewInfo) -> bytes:
    return json.dumps({"version": 1, "topic_id": str(view.topic_id), "configs": view.spec.configs},
                      sort_keys=True).encode()


def decode_view(name: str, data: bytes) -> ViewInfo | None:
    """None (logged) for a payload that no longer parses, so one bad entry never stops a broker."""
    try:
        state = json.loads(data)
        return ViewInfo(name, uuid.UUID(state["topic_id"]), view_spec(state["configs"]))
    except (ValueError, KeyError, TypeError, InvalidConfigError) as exc:
        logger.warning("ignoring view %s: unreadable definition (%s)", name, exc)
        return None


class _Catalogue:
    """The reads both backends share."""

    def __init__(self) -> None:
        self._views: dict[str, ViewInfo] = {}
        self._by_id: dict[uuid.UUID, ViewInfo] = {}

    def _put(self, view: ViewInfo) -> None:
        self._views[view.name] = view
        self._by_id[view.topic_id] = view

    def _drop(self, name: str) -> ViewInfo | None:
        view = self._views.pop(name, None)
        if view is not None:
            self._by_id.pop(view.topic_id, None)
        return view

    def views(self) -> dict[str, ViewInfo]:
        return self._views

    def view(self, name: str) -> ViewInfo | None:
        return self._views.get(name)

    def view_by_id(self, topic_id: uuid.UUID | None) -> ViewInfo | None:
        return self._by_id.get(topic_id) if topic_id is not None else None

    def views_of(self, source: str) -> list[str]:
        return sorted(v.name for v in self._views.values() if v.source == source)


class LocalViewCatalogue(_Catalogue):
    FILE_NAME = "kbroker-views.json"

    def __init__(self, data_dir: Path) -> None:
        super().__init__()
        self.path = Path(data_dir) / self.FILE_NAME
        if self.path.exists():
            for name, entry in json.loads(self.path.read_text()).get("views", {}).items():
                view = decode_view(name, json.dumps(entry).encode())
                if view is not None:
                    self._put(view)

    def _save(self) -> None:
        state = {"version": 1, "views": {name: json.loads(encode_view(v)) for name, v in sorted(self._views.items())}}
        write_atomically(self.path, json.dumps(state, indent=1).encode())

    async def create(self, name: str, spec: ViewSpec) -> ViewInfo:
        if name in self._views:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists (a view of {self._views[name].source}).")
        view = ViewInfo(name, _new_topic_id(), spec)
        self._put(view)
        self._save()
        return view

    async def delete(self, name: str) -> ViewInfo:
        view = self._drop(name)
        if view is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.")
        self._save()
        return view

    async def topic_znode_exists(self, name: str) -> bool:
        return False  # the single node's topics and views are all in memory

    async def view_znode_exists(self, name: str) -> bool:
        return False


class ClusterViewCatalogue(_Catalogue):
    """Views in ZooKeeper, watched by every broker (`start` once the session is up)."""

    def __init__(self, session) -> None:
        super().__init__()
        self.session = session
        self.zk = session.client
        self._nursery: trio.Nursery | None = None

    def attach(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    async def start(self) -> None:
        await self.session.call(self.zk.ensure_path, VIEWS_PATH)
        await self._reload()
        self.session.on_state(self._on_session_state)

    def _on_session_state(self, state: str) -> None:
        if state == "CONNECTED":  # a new session has no watches: read again and re-arm
            self._changed()

    def _changed(self) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._safe_reload)

    async def _safe_reload(self) -> None:
        try:
            await self._reload()
        except zk.ZkError as exc:
            logger.warning("reading the views failed: %s", exc)

    async def _reload(self) -> None:
        names = sorted(await self.session.call(self.zk.children, VIEWS_PATH, self.session.watch(self._changed)))
        new = [n for n in names if n not in self._views]
        for gone in set(self._views) - set(names):
            self._drop(gone)
        results = await self.session.call(self.zk.get_many, [f"{VIEWS_PATH}/{n}" for n in new])
        for name, result in zip(new, results):
            view = decode_view(name, result[0]) if result else None
            if view is not None:
                self._put(view)

    async def create(self, name: str, spec: ViewSpec) -> ViewInfo:
        view = ViewInfo(name, _new_topic_id(), spec)
        try:
            await self.session.call(self.zk.create, f"{VIEWS_PATH}/{name}", encode_view(view), makepath=True)
        except zk.NodeExistsError:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists (a view).") from None
        self._put(view)
        return view

    async def delete(self, name: str) -> ViewInfo:
        view = self._views.get(name)
        try:
            await self.session.call(self.zk.delete, f"{VIEWS_PATH}/{name}")
        except zk.NoNodeError:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist.") from None
        self._drop(name)
        return view or ViewInfo(name, uuid.UUID(int=0), ViewSpec("", ""))

    async def topic_znode_exists(self, name: str) -> bool:
        """A topic or a view of that name in ZooKeeper now (another broker may have just made it)."""
        return await self.session.call(self.zk.exists, zk.topic_path(name)) is not None \
            or await self.view_znode_exists(name)

    async def view_znode_exists(self, name: str) -> bool:
        """Checked before a topic is created: a view made on another broker a moment ago may not
        have reached this broker's watch yet (a consumer's auto-creating Metadata must not win)."""
        return await self.session.call(self.zk.exists, f"{VIEWS_PATH}/{name}") is not None
