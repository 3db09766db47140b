"""A cluster broker's user and client configs: SCRAM credentials and client quotas, the entity
configs Kafka keeps in `/config/users/...` and `/config/clients/...`.

SCRAM credentials are `/config/users/<url-encoded user>` (Kafka's user config: mechanism ->
credential text), all read at start, written with conditional writes plus a `users/<user>`
notification, and re-read by every broker when it hears of one (the in-memory copy the SASL server
looks up). Client quotas live in the same znodes (`/config/users/<u>`, beside a user's
credentials), `/config/clients/<c>` and `/config/users/<u>/clients/<c>`, read at start and re-read
per notification (`users/<u>`, `clients/<c>`, `users/<u>/clients/<c>`). ClusterMetadataStore holds
a `ZkUserConfigs`, delegates its SCRAM and quota methods to it and hands it the `users` and
`clients` notifications it hears in `/config/changes`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from kbroker.metadata import notifications
from kbroker.metadata.store import ClientQuotaListener
from kbroker.metadata.user_entities import (
    altered_quota_config,
    altered_scram_config,
    quota_entries,
    remember_credentials,
    scram_credentials_of,
)
from kbroker.security.credentials import ScramCredential
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.session import ZkSession

logger = logging.getLogger(__name__)


class ZkUserConfigs:
    """The `/config/users` and `/config/clients` znodes and the credentials and quotas read from them."""

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.zk = session.client
        self._scram: dict[str, dict[str, ScramCredential]] = {}  # user -> mechanism -> credential
        self._client_quotas: dict[str, dict[str, str]] = {}  # entity path -> {quota key: value}
        self.client_quota_listeners: list[ClientQuotaListener] = []

    async def _rewrite(self, znode: str, alter: Callable[[dict[str, str]], dict[str, str]],
                       notification: bytes) -> dict[str, str]:
        """Kafka's AdminZkClient.changeConfigs for an entity: `alter` applied to the znode's config,
        written conditionally on the version read (retried when another broker wrote in between;
        the znode created when there was none, removed when nothing is left unless
        `<user>/clients/<id>` quotas are below it, then kept, empty), then `notification` in
        `/config/changes`. Returns the config written."""
        while True:
            try:
                data, stat = await self.session.call(self.zk.get, znode)
                current, version = zk.decode_config(data), stat.version
            except zk.NoNodeError:
                current, version = {}, None
            config = alter(current)
            try:
                if version is None:
                    if config:
                        await self.session.call(self.zk.create, znode, zk.encode_config(config), makepath=True)
                elif config:
                    await self.session.call(self.zk.set, znode, zk.encode_config(config), version)
                else:
                    try:
                        await self.session.call(self.zk.delete, znode, version)
                    except zk.NotEmptyError:  # <user>/clients/<id> quotas below it: keep the node, empty
                        await self.session.call(self.zk.set, znode, zk.encode_config(config), version)
                break
            except (zk.BadVersionError, zk.NodeExistsError, zk.NoNodeError):
                continue  # another broker changed the entity meanwhile: apply ours to what it wrote
        await notifications.post_config_change(self.session, self.zk, notification)
        return config

    # -- SCRAM credentials ----------------------------------------------------------------------------
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The SASL server's lookup, per authentication: the in-memory copy, current within a
        notification's delay of any broker's change."""
        return self._scram.get(user, {}).get(mechanism)

    def scram_users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(creds) for user, creds in self._scram.items()}

    async def load_scram_users(self, sanitized: list[str] | None = None) -> dict[str, dict[str, ScramCredential]]:
        """Read `/config/users/<name>` for these znode names (None: every user) into the memory copy;
        returns the credentials read, by user."""
        everyone = sanitized is None
        if sanitized is None:
            sanitized = await self.session.call(self.zk.children, zk.CONFIG_USERS)
        results = await self.session.call(self.zk.get_many, [f"{zk.CONFIG_USERS}/{n}" for n in sanitized])
        found: dict[str, dict[str, ScramCredential]] = {}
        for name, result in zip(sanitized, results):
            user = zk.desanitize(name)
            config = notifications.decoded_config(result, f"of user {user!r}", "its credentials are ignored")
            creds = scram_credentials_of(user, config)
            if creds:
                found[user] = creds
        if everyone:
            self._scram = dict(found)
        else:
            for name in sanitized:
                self._scram.pop(zk.desanitize(name), None)
            self._scram.update(found)
        return found

    async def reload_scram_users(self, sanitized: list[str]) -> None:
        """After `users/<name>` notifications: these users read afresh, what they have now logged."""
        found = await self.load_scram_users(sanitized)
        for name in sanitized:  # names and mechanisms only, never a credential
            user = zk.desanitize(name)
            logger.info("SCRAM credentials of user %r reloaded after a change: %s", user,
                        ", ".join(found.get(user, {})) or "none")

    async def read_scram_users(self, users: list[str] | None = None) -> dict[str, dict[str, ScramCredential]]:
        """What DescribeUserScramCredentials reads: fresh from ZooKeeper, as Kafka's ZK mode reads
        it (these users, or every user when None), refreshing the memory copy on the way."""
        return await self.load_scram_users(None if users is None else [zk.sanitize(u) for u in users])

    async def alter_scram_credentials(self, user: str, upsertions: dict[str, ScramCredential],
                                      deletions: Sequence[str] = ()) -> None:
        """Kafka's alterUserScramCredentials for one user: its znode rewritten (`_rewrite`: the
        user's quotas kept, the znode removed when nothing is left, as Kafka cleans empty user
        nodes), then a `users/<user>` change notification. ResourceNotFoundError when a deletion
        names a credential the user does not have."""
        config = await self._rewrite(
            zk.user_config_path(user), lambda current: altered_scram_config(current, upsertions, list(deletions)),
            zk.encode_config_change("users", zk.sanitize(user)))
        remember_credentials(self._scram, user, config)

    # -- client quotas -------------------------------------------------------------------------------
    def client_quota_configs(self) -> dict[str, dict[str, str]]:
        """Every entity's quotas (entity path -> {key: value}), as last read: what is enforced."""
        return {path: dict(c) for path, c in self._client_quotas.items()}

    async def _quota_entity_paths(self) -> list[str]:
        users = await self.session.call(self.zk.children, zk.CONFIG_USERS)
        clients = await self.session.call(self.zk.children, zk.CONFIG_CLIENTS)
        paths = [f"users/{u}" for u in users] + [f"clients/{c}" for c in clients]
        for user in users:
            try:
                nested = await self.session.call(self.zk.children, f"{zk.CONFIG_USERS}/{user}/clients")
            except zk.NoNodeError:
                continue
            paths += [f"users/{user}/clients/{c}" for c in nested]
        return paths

    async def load_client_quotas(self, paths: list[str] | None = None) -> None:
        """Read these entities' znodes (None: every user, client and user/client entity) into the
        memory copy, then tell the listeners."""
        everyone = paths is None
        if paths is None:
            paths = await self._quota_entity_paths()
        results = await self.session.call(self.zk.get_many, [zk.quota_config_path(p) for p in paths])
        found = {}
        for path, result in zip(paths, results):
            config = quota_entries(notifications.decoded_config(result, f"/config/{path}", "its quotas are ignored"))
            if config:
                found[path] = config
        if everyone:
            self._client_quotas = found
        else:
            for path in paths:
                self._client_quotas.pop(path, None)
            self._client_quotas.update(found)
        self._notify_client_quotas()

    def _notify_client_quotas(self) -> None:
        quotas = self.client_quota_configs()
        for listener in self.client_quota_listeners:
            try:
                listener(quotas)
            except Exception:
                logger.exception("client quota listener failed")

    async def read_client_quotas(self) -> dict[str, dict[str, str]]:
        """What DescribeClientQuotas reads: fresh from ZooKeeper, as Kafka's ZK mode reads it."""
        await self.load_client_quotas()
        return self.client_quota_configs()

    async def alter_client_quotas(self, path: str, changes: dict[str, str | None]) -> None:
        """Kafka's AdminZkClient.changeConfigs for a quota entity: its znode rewritten (`_rewrite`:
        the other entries of a user's znode, its SCRAM credentials, kept; the znode removed when
        nothing is left and it has no <user>/clients children), then a notification naming the
        entity."""
        config = await self._rewrite(zk.quota_config_path(path), lambda current: altered_quota_config(current, changes),
                                     zk.quota_config_change(path))
        quotas = quota_entries(config)
        if quotas:
            self._client_quotas[path] = quotas
        else:
            self._client_quotas.pop(path, None)
        self._notify_client_quotas()
