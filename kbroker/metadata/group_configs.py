"""Per-group configs (KIP-848's GROUP config resource) beside the metadata, as strings: what
kbroker/group/dynamic_configs.py validated, group id -> {key: value}. A group left with no config
has no entry. Both stores keep an in-memory copy the group coordinator looks up on every
heartbeat (`configs`).

`GroupConfigFile` is the single node's `kbroker-group-configs.json` beside `kbroker-metadata.json`
(`{"version": 1, "groups": {"<group>": {...}}}`, written atomically). `ZkGroupConfigs` is a
cluster's: Kafka's ZooKeeper layout for entity configs, `/config/groups/<group>` (`{"version": 1,
"config": {...}}`, the id sanitized as user names are), each write followed by a
`/config/changes/config_change_<seq>` notification (`{"version": 2, "entity_path":
"groups/<group>"}`); ClusterMetadataStore hands the `groups` notifications every broker watches to
`reload`, so each broker's copy follows within moments.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Protocol

from kbroker.log.checkpoint import write_atomically
from kbroker.metadata import notifications
from kbroker.zookeeper import znodes as zk

logger = logging.getLogger(__name__)

GroupConfigs = dict[str, dict[str, str]]  # group id -> {key: value}


class ZkCalls(Protocol):
    """What ZkGroupConfigs uses of kbroker.zookeeper.session.ZkSession (not imported: the single
    node's store, which imports this module, stays clear of the ZooKeeper client)."""

    client: Any

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...


def _strings(config: dict) -> dict[str, str]:
    return {str(k): str(v) for k, v in config.items()}


class GroupConfigFile:
    """The single node's group configs: `kbroker-group-configs.json`, read at start, rewritten
    atomically on each change (on disk before the coordinator uses it)."""

    FILE_NAME = "kbroker-group-configs.json"

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / self.FILE_NAME
        self._groups: GroupConfigs = {}
        if self.path.exists():
            groups = json.loads(self.path.read_text()).get("groups", {})
            self._groups = {str(g): c for g, raw in groups.items() if isinstance(raw, dict) and (c := _strings(raw))}

    def configs(self, group: str) -> dict[str, str]:
        return dict(self._groups.get(group, {}))

    def all(self) -> GroupConfigs:
        return {g: dict(c) for g, c in self._groups.items()}

    def set(self, group: str, configs: dict[str, str]) -> None:
        """Replace `group`'s configs; an empty set removes its entry."""
        updated = {g: c for g, c in {**self._groups, group: dict(configs)}.items() if c}
        state = {"version": 1, "groups": dict(sorted(updated.items()))}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(state, indent=1).encode())
        self._groups = updated


class ZkGroupConfigs:
    """A cluster broker's group configs: the `/config/groups` znodes and the copy read from them."""

    def __init__(self, session: ZkCalls) -> None:
        self.session = session
        self.zk = session.client
        self._groups: GroupConfigs = {}

    def configs(self, group: str) -> dict[str, str]:
        """The coordinator's lookup: as last read or written by this broker."""
        return dict(self._groups.get(group, {}))

    def all(self) -> GroupConfigs:
        return {g: dict(c) for g, c in self._groups.items()}

    async def load_all(self) -> None:
        """At start: every group's znode."""
        await self.session.call(self.zk.ensure_path, zk.CONFIG_GROUPS)
        names = await self.session.call(self.zk.children, zk.CONFIG_GROUPS)
        self._groups = {}
        await self.reload(sorted(names))
        if self._groups:
            logger.info("loaded the configs of %d groups", len(self._groups))

    async def reload(self, names: list[str]) -> None:
        """Read these znodes (names as in `/config/groups` and in the notifications) afresh."""
        if not names:
            return
        results = await self.session.call(self.zk.get_many, [f"{zk.CONFIG_GROUPS}/{n}" for n in names])
        for name, result in zip(names, results):
            group = zk.desanitize(name)
            config = notifications.decoded_config(result, f"of group {group!r}", "its configs are ignored")
            if config != self._groups.get(group, {}):
                logger.info("configs of group %r: %s", group, config or "none (the broker's)")
            if config:
                self._groups[group] = config
            else:
                self._groups.pop(group, None)

    async def read(self, group: str) -> dict[str, str]:
        """What DescribeConfigs and an incremental alter start from: fresh from ZooKeeper (another
        broker's write counts at once), refreshing this broker's copy on the way."""
        await self.reload([zk.group_znode_name(group)])
        return self.configs(group)

    async def set(self, group: str, configs: dict[str, str]) -> None:
        """Kafka's AdminZkClient.changeConfigs for an entity: the znode written (removed when the
        set is empty), then a `groups/<group>` notification every broker acts on."""
        path, name = zk.group_config_path(group), zk.group_znode_name(group)
        if configs:
            await notifications.write_config(self.session, self.zk, path, zk.encode_config(configs))
        else:
            try:
                await self.session.call(self.zk.delete, path)
            except zk.NoNodeError:
                pass
        await notifications.post_config_change(self.session, self.zk, zk.encode_config_change("groups", name))
        if configs:
            self._groups[group] = dict(configs)
        else:
            self._groups.pop(group, None)
