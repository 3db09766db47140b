"""Kafka's AclAuthorizer (ZooKeeper mode) decisions over a set of ACL bindings, pure.

`authorize(principal, host, operation, resource_type, name)` decides as AclAuthorizer.authorizeAction:

1. a super user (`super.users`) may do everything;
2. the ACLs that apply to the resource are those of its literal name, of the `*` wildcard of its
   type and of every PREFIXED pattern its name starts with; when there are none at all (whoever
   they name), `allow.everyone.if.no.acl.found` decides;
3. else a DENY entry matching the principal (or `User:*`), the host (or `*`) and the operation (or
   ALL) denies, whatever ALLOWs there are;
4. else an ALLOW entry matching them allows, where ALLOW of READ, WRITE, DELETE or ALTER also
   allows DESCRIBE and ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS; nothing matching denies.

`authorize_by_resource_type` is AclAuthorizer.authorizeByResourceType (KIP-679: "may the principal
do this to some resource of the type", InitProducerId's WRITE on any topic): no implied operations.

Decisions are cached per (principal, host, operation, resource type, name) in a bounded LRU,
dropped by `update`; the bindings are indexed by type, then by literal name and by prefix (the
prefix lengths in use are probed, not every prefix of the name), so that a decision costs a few
dict lookups and a scan of the entries that apply, with 10,000 ACLs loaded as with ten.
"""

from __future__ import annotations

import functools
from typing import Iterable

from kbroker.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    implied_operations,
)

__all__ = ["AclAuthorizer", "AUTHORIZER_CLASS_NAMES", "DEFAULT_CACHE_SIZE", "parse_super_users"]

# authorizer.class.name values that turn ACL checks on: Kafka's two and kbroker's own (this class)
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kbroker.security.authorizer.AclAuthorizer",
)

DEFAULT_CACHE_SIZE = 100_000
_ALLOW, _DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
_ALL = AclOperation.ALL
_LITERAL, _PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def parse_super_users(value: str | None) -> set[str]:
    """`super.users`: `User:admin;User:broker` (AclAuthorizer.configure: split on ';', trimmed, each
    parsed as a principal). ValueError with Kafka's words for an entry that is not `Type:name`."""
    text = (value or "").strip()  # Kafka trims every authorizer config value
    if not text:
        return set()
    parts = text.split(";")
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    out = set()
    for part in parts:
        principal = part.strip()
        if ":" not in principal:
            raise ValueError(f"expected a string in format principalType:principalName but got {principal}")
        out.add(principal)
    return out


class _TypeIndex:
    """One resource type's ACLs: entries per literal name (the wildcard `*` among them) and per
    prefix, the prefix lengths in use, and Kafka's resourceCache for authorizeByResourceType."""

    __slots__ = ("literal", "prefixed", "prefix_lengths")

    def __init__(self) -> None:
        self.literal: dict[str, tuple[AccessControlEntry, ...]] = {}
        self.prefixed: dict[str, tuple[AccessControlEntry, ...]] = {}
        self.prefix_lengths: tuple[int, ...] = ()

    def applying(self, name: str) -> list[tuple[AccessControlEntry, ...]]:
        """AclAuthorizer.matchingAcls: the entries of the PREFIXED patterns the name starts with,
        of the wildcard, and of the literal name."""
        found = []
        prefixed = self.prefixed
        if prefixed:
            for length in self.prefix_lengths:
                if length > len(name):
                    break
                entries = prefixed.get(name[:length])
                if entries:
                    found.append(entries)
        entries = self.literal.get(WILDCARD_RESOURCE)
        if entries:
            found.append(entries)
        if name != WILDCARD_RESOURCE:
            entries = self.literal.get(name)
            if entries:
                found.append(entries)
        return found


class AclAuthorizer:
    """Decisions over `bindings` (ACLs as the metadata store holds them; `update` replaces them).

    `principal` is a KafkaPrincipal or its `Type:name` text; `host` the client's address as Kafka
    compares it (Java's getHostAddress text)."""

    def __init__(self, bindings: Iterable[AclBinding] = (), super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.super_users = frozenset(str(u) for u in super_users)
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)
        self.cache_size = cache_size
        self._types: dict[ResourceType, _TypeIndex] = {}
        # Kafka's resourceCache: (entry, resource type, pattern type) -> names
        self._by_entry: dict[tuple[AccessControlEntry, ResourceType, PatternType], frozenset[str]] = {}
        self._bindings: tuple[AclBinding, ...] = ()
        self._decide = functools.lru_cache(maxsize=cache_size)(self._uncached)
        self.update(bindings)

    # -- the ACLs ---------------------------------------------------------------------------------
    def update(self, bindings: Iterable[AclBinding]) -> None:
        """Replace the ACLs (after any change in the store) and forget every cached decision."""
        bindings = tuple(dict.fromkeys(bindings))
        literal: dict[ResourceType, dict[str, list[AccessControlEntry]]] = {}
        prefixed: dict[ResourceType, dict[str, list[AccessControlEntry]]] = {}
        by_entry: dict[tuple[AccessControlEntry, ResourceType, PatternType], set[str]] = {}
        for b in bindings:
            p = b.pattern
            if p.pattern_type == _LITERAL:
                literal.setdefault(p.resource_type, {}).setdefault(p.name, []).append(b.entry)
            elif p.pattern_type == _PREFIXED:
                prefixed.setdefault(p.resource_type, {}).setdefault(p.name, []).append(b.entry)
            else:
                continue  # a stored pattern is literal or prefixed; anything else applies to nothing
            by_entry.setdefault((b.entry, p.resource_type, p.pattern_type), set()).add(p.name)
        types: dict[ResourceType, _TypeIndex] = {}
        for rtype in set(literal) | set(prefixed):
            index = _TypeIndex()
            index.literal = {n: tuple(e) for n, e in literal.get(rtype, {}).items()}
            index.prefixed = {n: tuple(e) for n, e in prefixed.get(rtype, {}).items()}
            index.prefix_lengths = tuple(sorted({len(n) for n in index.prefixed}))
            types[rtype] = index
        self._bindings = bindings
        self._types = types
        self._by_entry = {k: frozenset(v) for k, v in by_entry.items()}
        self._decide.cache_clear()

    @property
    def bindings(self) -> tuple[AclBinding, ...]:
        return self._bindings

    def cache_info(self):
        return self._decide.cache_info()

    # -- decisions --------------------------------------------------------------------------------
    def is_super_user(self, principal) -> bool:
        return str(principal) in self.super_users

    def authorize(self, principal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether `principal` from `host` may perform `operation` on the resource `name` of
        `resource_type` (a literal resource: Kafka authorizes nothing else)."""
        principal = str(principal)
        if principal in self.super_users:
            return True
        return self._decide(principal, host, operation, resource_type, name)

    def allowed_operations(self, principal, host: str, resource_type: ResourceType, name: str,
                           candidates: Iterable[AclOperation]) -> frozenset[AclOperation]:
        """Which of `candidates` the principal may perform on the resource (KIP-430's bit sets)."""
        principal = str(principal)
        if principal in self.super_users:
            return frozenset(candidates)
        decide = self._decide
        return frozenset(op for op in candidates if decide(principal, host, op, resource_type, name))

    def _uncached(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        index = self._types.get(resource_type)
        groups = index.applying(name) if index is not None else []
        if not groups:
            return self.allow_everyone_if_no_acl_found
        allowing = implied_operations(operation)
        allowed = False
        for entries in groups:
            for e in entries:
                if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
                    continue
                if e.host != host and e.host != WILDCARD_HOST:
                    continue
                if e.permission_type == _DENY:
                    if e.operation == operation or e.operation == _ALL:
                        return False
                elif not allowed and e.permission_type == _ALLOW and e.operation in allowing:
                    allowed = True
        return allowed

    def authorize_by_resource_type(self, principal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """AclAuthorizer.authorizeByResourceType: whether some resource of the type (an existing one
        or not) would be allowed `operation` for the principal from the host. A literal `*` DENY
        denies; allow.everyone.if.no.acl.found then allows; else an ALLOW (literal or prefixed) that
        no DENY dominates (a DENY of the same literal, or a DENY prefix of the allowed name) allows.
        ValueError for the ANY or UNKNOWN type or operation, as Kafka's argument check."""
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError("Must specify a non-filter resource type for authorizeByResourceType"
                             if resource_type == ResourceType.ANY else "Unknown resource type")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError("Must specify a non-filter operation type for authorizeByResourceType"
                             if operation == AclOperation.ANY else "Unknown operation type")
        principal = str(principal)
        if principal in self.super_users:
            return True
        deny_literals = self._matching_names(principal, host, operation, _DENY, resource_type, _LITERAL)
        if any(WILDCARD_RESOURCE in names for names in deny_literals):
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = self._matching_names(principal, host, operation, _DENY, resource_type, _PREFIXED)
        allow_literals = self._matching_names(principal, host, operation, _ALLOW, resource_type, _LITERAL)
        allow_prefixes = self._matching_names(principal, host, operation, _ALLOW, resource_type, _PREFIXED)
        if not deny_literals and not deny_prefixes:
            return bool(allow_prefixes or allow_literals)

        def dominated(name: str) -> bool:  # hasDominantPrefixedDeny
            return any(name[:i] in names for i in range(1, len(name) + 1) for names in deny_prefixes)

        if any(not dominated(prefix) for names in allow_prefixes for prefix in names):
            return True
        for names in allow_literals:
            for literal in names:
                if literal == WILDCARD_RESOURCE:
                    return True
                if not any(literal in denied for denied in deny_literals) and not dominated(literal):
                    return True
        return False

    def _matching_names(self, principal: str, host: str, operation: AclOperation, permission: AclPermissionType,
                        resource_type: ResourceType, pattern_type: PatternType) -> list[frozenset[str]]:
        """AclAuthorizer.matchingResources: the names of the type's patterns holding an entry for
        the principal or `User:*`, the host or `*`, the operation or ALL, with that permission."""
        out = []
        for p in {principal, WILDCARD_PRINCIPAL}:
            for h in {host, WILDCARD_HOST}:
                for o in {operation, _ALL}:
                    names = self._by_entry.get((AccessControlEntry(p, h, o, permission), resource_type, pattern_type))
                    if names:
                        out.append(names)
        return out
