"""An in-memory ZooKeeper with kazoo's answers (NoNodeError, NodeExistsError, BadVersionError,
NotEmptyError, sequential nodes, one-shot watches) and a session over it, for the metadata stores'
tests of their znodes (ACLs, SCRAM credentials, client quotas)."""

from __future__ import annotations

import trio

from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.client import Stat


class FakeZooKeeper:
    """The adapter calls the cluster store makes, on a dict of znodes (data, version); one-shot
    child watches fire when a child is created, as ZooKeeper's do."""

    session_id = 1

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.watches: dict[str, list] = {}
        self.seq = 0

    def _fire(self, parent: str) -> None:
        for watch in self.watches.pop(parent, []):
            watch()

    def ensure_path(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self.nodes.setdefault("/" + "/".join(parts[:i]), (b"", 0))

    def exists(self, path, watch=None):
        return Stat(self.nodes[path][1], 1, 0) if path in self.nodes else None

    def get(self, path, watch=None):
        if path not in self.nodes:
            raise zk.NoNodeError(path)
        data, version = self.nodes[path]
        return data, Stat(version, 1, 0)

    def get_many(self, paths):
        return [self.get(p) if p in self.nodes else None for p in paths]

    def children(self, path, watch=None):
        if path not in self.nodes:
            raise zk.NoNodeError(path)
        if watch is not None:
            self.watches.setdefault(path, []).append(watch)
        prefix = path + "/"
        return sorted(p[len(prefix):] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix):])

    def create(self, path, data=b"", *, ephemeral=False, sequence=False, makepath=False):
        if sequence:
            path = f"{path}{self.seq:010d}"
            self.seq += 1
        if path in self.nodes:
            raise zk.NodeExistsError(path)
        parent = path.rsplit("/", 1)[0]
        if makepath:
            self.ensure_path(parent)
        elif parent and parent not in self.nodes:
            raise zk.NoNodeError(parent)
        self.nodes[path] = (data, 0)
        self._fire(parent)
        return path

    def set(self, path, data, version=-1):
        if path not in self.nodes:
            raise zk.NoNodeError(path)
        if version != -1 and self.nodes[path][1] != version:
            raise zk.BadVersionError(path)
        self.nodes[path] = (data, self.nodes[path][1] + 1)
        return Stat(self.nodes[path][1], 1, 0)

    def delete(self, path, version=-1, recursive=False):
        if path not in self.nodes:
            raise zk.NoNodeError(path)
        if version != -1 and self.nodes[path][1] != version:
            raise zk.BadVersionError(path)
        if any(p.startswith(path + "/") for p in self.nodes):
            raise zk.NotEmptyError(path)
        del self.nodes[path]


class FakeSession:
    def __init__(self, client: FakeZooKeeper) -> None:
        self.client = client

    async def call(self, fn, *args, **kwargs):
        await trio.lowlevel.checkpoint()
        return fn(*args, **kwargs)

    def watch(self, callback):
        return callback
