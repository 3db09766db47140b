"""A cluster broker's ACLs: Kafka's AclAuthorizer in ZooKeeper mode, kept beside the metadata.

ACLs are Kafka's AclAuthorizer znodes: `/kafka-acl/<Type>/<name>` (literal patterns) and
`/kafka-acl-extended/prefixed/<Type>/<name>`, all read at start, each written with a conditional
write on the version read (retried on a conflict, as AclAuthorizer.updateResourceAcls) followed by
a sequential notification in `/kafka-acl-changes` or `/kafka-acl-extended-changes`; every broker
watches both and re-reads the pattern a notification names, then tells its ACL listeners.
ClusterMetadataStore holds a `ZkAcls` and delegates its ACL methods to it; the change watches run
in the nursery the store is attached to.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable

import trio

from kbroker.metadata import notifications
from kbroker.security.acl import (
    AccessControlEntry,
    AclBinding,
    PatternType,
    ResourcePattern,
    entries_to_delete,
    entry_order,
    parse_resource_type,
    touched_patterns,
)
from kbroker.zookeeper import znodes as zk
from kbroker.zookeeper.session import ZkSession

logger = logging.getLogger(__name__)


class ZkAcls:
    """The ACL znodes, the watches on their change notifications and the copy read from them."""

    UPDATE_RETRIES = 10  # AclAuthorizer.maxUpdateRetries

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.zk = session.client
        # pattern -> (entries, the znode's version), as last read or written
        self._acls: dict[ResourcePattern, tuple[frozenset[AccessControlEntry], int]] = {}
        self._listeners: list[Callable[[list[AclBinding]], None]] = []
        self._last_change = {zk.ACL_CHANGES: "", zk.EXTENDED_ACL_CHANGES: ""}
        self._lock = trio.Lock()  # one ACL write (or reload) at a time on this broker

    _nursery: trio.Nursery | None = None

    def attach(self, nursery: trio.Nursery) -> None:
        """Where the change watches run (none before: notifications are not heard)."""
        self._nursery = nursery

    def acls(self) -> list[AclBinding]:
        """Every ACL as last read or written (the authorizer's and DescribeAcls's source, as Kafka's
        AclAuthorizer answers from its cache)."""
        return [AclBinding(p, e) for p, (entries, _v) in self._acls.items() for e in entries]

    def add_listener(self, listener: Callable[[list[AclBinding]], None]) -> None:
        self._listeners.append(listener)

    def _notify(self) -> None:
        bindings = self.acls()
        for listener in self._listeners:
            try:
                listener(bindings)
            except Exception:
                logger.exception("ACL listener failed")

    async def start(self) -> None:
        """Kafka's AclAuthorizer.configure: the ACL paths, the change watches, then every ACL."""
        for path in zk.acl_paths():
            await self.session.call(self.zk.ensure_path, path)
        for parent in (zk.ACL_CHANGES, zk.EXTENDED_ACL_CHANGES):
            await self._watch_changes(parent, initial=True)
        await self._load_all()

    async def resync(self) -> None:
        """After a new ZooKeeper session (the expired one's watches are gone, notifications may have
        been missed): watch both change paths again and re-read every ACL."""
        for parent in (zk.ACL_CHANGES, zk.EXTENDED_ACL_CHANGES):
            await self._watch_changes(parent, initial=True)
        await self._load_all()

    async def _load_all(self) -> None:
        loaded: dict[ResourcePattern, tuple[frozenset[AccessControlEntry], int]] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = zk.acl_store_path(pattern_type)
            for type_name in await self.session.call(self.zk.children, root):
                rtype = parse_resource_type(type_name)
                if int(rtype) < 2:
                    logger.warning("ignoring ACLs of unknown resource type %s (%s/%s)", type_name, root, type_name)
                    continue
                names = await self.session.call(self.zk.children, f"{root}/{type_name}")
                patterns = [ResourcePattern(rtype, n, pattern_type) for n in names]
                for pattern, read in zip(patterns, await self._read(patterns)):
                    if read is not None and read[0]:
                        loaded[pattern] = read
        async with self._lock:
            self._acls = loaded
        logger.info("loaded %d ACLs on %d resource patterns", sum(len(e) for e, _v in loaded.values()), len(loaded))
        self._notify()

    async def _read(self, patterns: list[ResourcePattern]
                         ) -> list[tuple[frozenset[AccessControlEntry], int] | None]:
        """Each pattern's (entries, znode version), None where there is no znode."""
        if not patterns:
            return []
        results = await self.session.call(self.zk.get_many, [zk.acl_resource_path(p) for p in patterns])
        out: list[tuple[frozenset[AccessControlEntry], int] | None] = []
        for pattern, result in zip(patterns, results):
            if result is None:
                out.append(None)
                continue
            try:
                entries, skipped = zk.decode_acls(result[0])
            except ValueError:
                entries, skipped = set(), ["the znode is not JSON"]
            for reason in skipped:
                logger.warning("ACLs of %s: %s (left out)", pattern, reason)
            out.append((frozenset(entries), result[1].version))
        return out

    async def _watch_changes(self, parent: str, initial: bool = False) -> None:
        changes = sorted(await self.session.call(
            self.zk.children, parent, self.session.watch(functools.partial(self._changes_fired, parent))))
        if initial:  # everything is read at start; only later notifications matter
            self._last_change[parent] = changes[-1] if changes else ""
            return
        new = [c for c in changes if c > self._last_change[parent]]
        if not new:
            return
        self._last_change[parent] = new[-1]
        await notifications.purge(self.session, self.zk, parent, changes[:len(changes) - len(new)], new[-1])
        results = await self.session.call(self.zk.get_many, [f"{parent}/{c}" for c in new])
        patterns: list[ResourcePattern] = []
        for name, result in zip(new, results):
            pattern = zk.decode_acl_change(parent, result[0]) if result else None
            if pattern is None:
                if result is not None:
                    logger.warning("ignoring an ACL change notification that cannot be read: %s/%s", parent, name)
                continue
            if pattern not in patterns:
                patterns.append(pattern)
        await self._reload(patterns)

    def _changes_fired(self, parent: str) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self._safe_watch_changes, parent)

    async def _safe_watch_changes(self, parent: str) -> None:
        try:
            await self._watch_changes(parent)
        except zk.ZkError as exc:
            logger.warning("reading ACL changes failed: %s", exc)

    async def _reload(self, patterns: list[ResourcePattern]) -> None:
        """AclAuthorizer.processAclChangeNotification: each named pattern read afresh."""
        changed = False
        async with self._lock:
            for pattern, read in zip(patterns, await self._read(patterns)):
                before = self._acls.get(pattern, (frozenset(), -1))[0]
                if read is None or not read[0]:
                    self._acls.pop(pattern, None)
                    after: frozenset[AccessControlEntry] = frozenset()
                else:
                    self._acls[pattern] = read
                    after = read[0]
                if after != before:
                    changed = True
                    logger.info("ACLs of %s reloaded after a change: %d entries", pattern, len(after))
        if changed:
            self._notify()

    async def create(self, bindings) -> list[Exception | None]:
        """Kafka's AclAuthorizer.createAcls (bindings validated by the caller): per pattern, its
        znode rewritten with the new entries added (conditional on the version; retried), then a
        change notification. One result per binding: None, or the error its pattern's write met."""
        bindings = list(bindings)
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, b in enumerate(bindings):
            by_pattern.setdefault(b.pattern, []).append(i)
        changed = False
        async with self._lock:
            for pattern, indices in by_pattern.items():
                added = frozenset(bindings[i].entry for i in indices)
                try:
                    changed |= await self._update_resource(pattern, lambda current, added=added: current | added)
                except Exception as exc:  # noqa: BLE001 - the pattern's bindings fail, the others go on
                    logger.warning("creating ACLs of %s failed: %s", pattern, exc)
                    for i in indices:
                        results[i] = exc
        if changed:
            self._notify()
        return results

    async def delete(self, filters) -> list[list[AclBinding]]:
        """Kafka's AclAuthorizer.deleteAcls: the patterns the filters touch (those this broker knows
        that a filter matches, and the exact pattern of each filter naming one, read fresh), each
        znode rewritten without the matching entries (conditional, retried), a notification per
        change. Per filter, the bindings it removed (a binding several match: the first one's)."""
        filters = list(filters)
        out: list[list[AclBinding]] = [[] for _ in filters]
        changed = False
        async with self._lock:
            for pattern, indices in touched_patterns(self._acls.keys(), filters).items():
                entry_filters = [(i, filters[i].entry_filter) for i in indices]
                removed: dict[AccessControlEntry, int] = {}

                def without_matches(current: frozenset[AccessControlEntry], entry_filters=entry_filters,
                                    removed=removed) -> frozenset[AccessControlEntry]:
                    removed.clear()
                    removed.update(entries_to_delete(current, entry_filters))
                    return current - removed.keys()

                changed |= await self._update_resource(pattern, without_matches)
                for entry, index in sorted(removed.items(), key=lambda kv: entry_order(kv[0])):
                    out[index].append(AclBinding(pattern, entry))
        if changed:
            self._notify()
        return out

    async def _update_resource(self, pattern: ResourcePattern, change) -> bool:
        """AclAuthorizer.updateResourceAcls: apply `change` to the pattern's entries (this broker's
        copy, or ZooKeeper's when it has none) and write the result conditionally on the version it
        came from (create when there was no znode, delete when nothing is left); a conflict reads
        ZooKeeper again and retries. A change is followed by a notification. Returns whether the
        entries changed (the memory copy is updated either way; the caller holds the lock)."""
        path = zk.acl_resource_path(pattern)
        cached = self._acls.get(pattern)
        if cached is None:
            cached = (await self._read([pattern]))[0]
        current, version = cached if cached is not None else (frozenset(), None)
        for attempt in range(self.UPDATE_RETRIES + 1):
            new = frozenset(change(current))
            try:
                if new and version is not None:
                    new_version = (await self.session.call(self.zk.set, path, zk.encode_acls(new), version)).version
                elif new:
                    await self.session.call(self.zk.create, path, zk.encode_acls(new), makepath=True)
                    new_version = 0
                elif version is not None:
                    try:
                        await self.session.call(self.zk.delete, path, version)
                    except zk.NoNodeError:
                        pass
                break
            except (zk.BadVersionError, zk.NodeExistsError, zk.NoNodeError):
                if attempt == self.UPDATE_RETRIES:
                    raise zk.ZkError(f"Failed to update ACLs for {pattern} after trying a maximum of "
                                     f"{self.UPDATE_RETRIES} times") from None
                await trio.sleep((100 + random.randrange(50)) / 1000)  # Kafka's backoff, with its jitter
                read = (await self._read([pattern]))[0]
                current, version = read if read is not None else (frozenset(), None)
        if new:
            self._acls[pattern] = (new, new_version)
        else:
            self._acls.pop(pattern, None)
        if new == current:
            return False
        await self.session.call(self.zk.create, zk.acl_change_path(pattern), zk.encode_acl_change(pattern),
                                sequence=True)
        logger.info("ACLs of %s updated: %d entries", pattern, len(new))
        return True
