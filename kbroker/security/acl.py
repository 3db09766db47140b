"""ACLs as Kafka has them: the codes (AclOperation, ResourceType, PatternType, AclPermissionType),
resource patterns and access control entries, bindings and the filters of DescribeAcls and
DeleteAcls, with the semantics of Kafka's `org.apache.kafka.common.acl` and `.resource` classes,
the validation a CreateAcls binding and a DeleteAcls filter get, and the implied operations.

Pure: no I/O. The decisions are `authorizer.py`'s; the storage is the metadata store's
(`metadata/store.py`, `metadata/zk_acls.py`, with the znode payloads in `zookeeper/znodes.py`).

- A **pattern** is (resource type, name, LITERAL | PREFIXED); the literal name `*` is the wildcard
  that matches every resource of its type.
- An **entry** is (principal `Type:name`, host, operation, ALLOW | DENY); principal `User:*` and
  host `*` match anyone and anywhere. Hosts are compared as strings with the client's address
  (Java's `InetAddress.getHostAddress()` form): Kafka resolves no names.
- A **filter** may leave a field open: resource type / operation / permission ANY, name, principal
  or host None, pattern type ANY (any pattern type, the name compared exactly) or MATCH (every
  pattern that applies to the name: itself, the `*` wildcard, and the prefixes of the name).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Collection, Iterable, Mapping

__all__ = [
    "AclOperation",
    "ResourceType",
    "PatternType",
    "AclPermissionType",
    "SUPPORTED_OPERATIONS",
    "IMPLIED_BY",
    "CLUSTER_NAME",
    "WILDCARD_RESOURCE",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "ResourcePattern",
    "AccessControlEntry",
    "AclBinding",
    "ResourcePatternFilter",
    "AccessControlEntryFilter",
    "AclBindingFilter",
    "PatternIndex",
    "MAX_BATCH",
    "BATCH_TOO_LARGE",
    "implied_operations",
    "creation_error",
    "filter_error",
    "plan_deletions",
    "touched_patterns",
    "entries_to_delete",
    "CONCRETE_RESOURCE_TYPES",
    "name_of",
    "parse_resource_type",
    "parse_operation",
    "parse_permission_type",
    "parse_pattern_type",
    "principal_error",
    "entry_to_json",
    "entry_from_json",
    "entry_order",
    "pattern_order",
    "log_text",
]

CLUSTER_NAME = "kafka-cluster"  # Kafka's one CLUSTER resource (Resource.CLUSTER_NAME)
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"

# KRaft's QuorumController bound on one ACL operation, and the words it answers beyond it
MAX_BATCH = 10_000
BATCH_TOO_LARGE = "Unable to perform excessively large batch operation."


class _Coded(IntEnum):
    @classmethod
    def from_code(cls, code: int):
        """Kafka's fromCode: an unknown code is UNKNOWN, never an error."""
        try:
            return cls(int(code))
        except ValueError:
            return cls(0)


class AclOperation(_Coded):
    """Kafka's AclOperation codes (also the bit positions of KIP-430's authorized operations)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(_Coded):
    """Kafka's ResourceType codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    """Kafka's PatternType codes (KIP-290)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CONCRETE_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                           ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)

_Op = AclOperation
# AclEntry.supportedOperations: what each resource type has (KIP-430's bit sets, kafka-acls.sh's check)
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                                   _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    # Kafka 4's: the GROUP config resource (KIP-848) is described and altered with these two
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS,
                                     _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

# An ALLOW of the key's operation also allows these (AclOperation's javadoc; ALL allows everything).
# A DENY implies nothing but itself (DENY ALL denies everything).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _Op.DESCRIBE: frozenset({_Op.DESCRIBE, _Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
}


def implied_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The ALLOWed operations that allow `operation`: itself, ALL, and for DESCRIBE (READ, WRITE,
    DELETE, ALTER) and DESCRIBE_CONFIGS (ALTER_CONFIGS) the operations that imply it."""
    return IMPLIED_BY.get(operation, frozenset({operation})) | {_Op.ALL}


# -- Kafka's names (SecurityUtils: PascalCase in ZooKeeper's JSON, upper case accepted) ------------

def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def name_of(value: AclOperation | ResourceType | AclPermissionType) -> str:
    """SecurityUtils.operationName / resourceTypeName / permissionTypeName: `Read`,
    `TransactionalId`, `Allow`."""
    return _pascal(value.name)


def _parser(enum: type[_Coded]):
    table = {}
    for member in enum:
        table[_pascal(member.name)] = member
        table[_pascal(member.name).upper()] = member

    def parse(text: str):
        """SecurityUtils.valueFromMap: the PascalCase name or its upper case; UNKNOWN otherwise."""
        return table.get(text) or table.get(text.upper(), enum(0))

    return parse


parse_resource_type = _parser(ResourceType)
parse_operation = _parser(AclOperation)
parse_permission_type = _parser(AclPermissionType)


def parse_pattern_type(text: str) -> PatternType:
    """PatternType.fromString: the enum's name, exactly (UNKNOWN otherwise)."""
    return PatternType.__members__.get(text, PatternType.UNKNOWN)


# -- patterns, entries, bindings -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def to_filter(self) -> "ResourcePatternFilter":
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:  # Java's toString
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:alice", "User:*"
    host: str  # an address, or "*"
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def to_filter(self) -> "AccessControlEntryFilter":
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown

    def to_filter(self) -> "AclBindingFilter":
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


# -- filters ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: ANY takes every pattern type but compares the name
        exactly; MATCH takes the literal name, the `*` wildcard and the prefixes of the name."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False  # Kafka throws: a stored pattern is LITERAL or PREFIXED

    def find_indefinite_field(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={'<any>' if self.name is None else self.name}, patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation == AclOperation.ANY:
            return "Operation is ANY"
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type == AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def __str__(self) -> str:
        return (f"(principal={'<any>' if self.principal is None else self.principal}, "
                f"host={'<any>' if self.host is None else self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def matches_at_most_one(self) -> bool:
        return self.pattern_filter.matches_at_most_one() and self.entry_filter.matches_at_most_one()

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern_filter}, entryFilter={self.entry_filter})"


AclBindingFilter.ANY = AclBindingFilter()  # type: ignore[attr-defined]


# -- validation ------------------------------------------------------------------------------------

def principal_error(principal: str) -> str | None:
    """Why `principal` is not Kafka's `Type:name` form (SecurityUtils.parseKafkaPrincipal), or None.
    The words are KRaft's (StandardAcl.kafkaPrincipal)."""
    if ":" not in principal:
        return (f"Could not parse principal from `{principal}` (no colon is present separating the "
                f"principal type from the principal name)")
    return None


def creation_error(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses `binding` (INVALID_REQUEST), or None. Kafka's checks and words: the
    types (KRaft's AclControlManager.validateNewAcl: in ZooKeeper mode such a request fails whole),
    the CLUSTER name and the empty name (AclApis), the principal's form, and a name that cannot be
    a znode (AclAuthorizer: "Failed to create ACL"; kbroker refuses the same names on one node)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if not pattern.pattern_type.is_specific:
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {entry.permission_type.name}"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if pattern.name == "":
        return "Invalid empty resource name"
    problem = principal_error(entry.principal)
    if problem is not None:
        return problem
    if not _znode_name(pattern.name):
        return "Failed to create ACL"
    return None


def _znode_name(name: str) -> bool:
    """Whether ZooKeeper takes `name` as one path element (PathUtils.validatePath)."""
    if "/" in name or name in (".", ".."):
        return False
    return not any(c == "\0" or "\x01" <= c <= "\x1f" or "\x7f" <= c <= "\x9f" or "\ud800" <= c <= "\uf8ff"
                   or "\ufff0" <= c <= "\uffff" for c in name)


def filter_error(acl_filter: AclBindingFilter) -> str | None:
    """Why DeleteAcls refuses a filter (INVALID_REQUEST; KRaft's AclControlManager.validateFilter
    words), or None."""
    if acl_filter.pattern_filter.is_unknown:
        return "Unknown patternFilter."
    if acl_filter.entry_filter.is_unknown:
        return "Unknown entryFilter."
    return None


# -- finding the patterns a filter touches, and what a delete removes -------------------------------

class PatternIndex:
    """The stored patterns, so that a filter naming a resource finds its patterns by lookup rather
    than by a scan (a filter without a name, or with the ANY type over every type, scans)."""

    def __init__(self, patterns: Iterable[ResourcePattern]) -> None:
        self.patterns = set(patterns)
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        for p in self.patterns:
            if p.pattern_type == PatternType.PREFIXED:
                self._prefix_lengths.setdefault(p.resource_type, []).append(len(p.name))
        for lengths in self._prefix_lengths.values():
            lengths[:] = sorted(set(lengths))

    def candidates(self, pattern_filter: ResourcePatternFilter) -> list[ResourcePattern]:
        """The patterns the filter may match: a superset, each still to be checked with `matches`."""
        name = pattern_filter.name
        if name is None or pattern_filter.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return list(self.patterns)
        rtype, ptype = pattern_filter.resource_type, pattern_filter.pattern_type
        wanted: list[ResourcePattern] = []
        if ptype in (PatternType.LITERAL, PatternType.ANY, PatternType.MATCH):
            wanted.append(ResourcePattern(rtype, name, PatternType.LITERAL))
        if ptype in (PatternType.PREFIXED, PatternType.ANY):
            wanted.append(ResourcePattern(rtype, name, PatternType.PREFIXED))
        if ptype == PatternType.MATCH:
            wanted.append(ResourcePattern(rtype, WILDCARD_RESOURCE, PatternType.LITERAL))
            for length in self._prefix_lengths.get(rtype, ()):
                if length > len(name):
                    break
                wanted.append(ResourcePattern(rtype, name[:length], PatternType.PREFIXED))
        return [p for p in wanted if p in self.patterns]

    def matching(self, pattern_filter: ResourcePatternFilter) -> list[ResourcePattern]:
        return [p for p in self.candidates(pattern_filter) if pattern_filter.matches(p)]


def _exact_patterns(pattern_filter: ResourcePatternFilter) -> list[ResourcePattern]:
    """AclAuthorizer.filterToResources: the patterns of a filter that names one resource exactly."""
    rtype, name = pattern_filter.resource_type, pattern_filter.name or ""
    if pattern_filter.pattern_type == PatternType.ANY:
        return [ResourcePattern(rtype, name, PatternType.LITERAL), ResourcePattern(rtype, name, PatternType.PREFIXED)]
    return [ResourcePattern(rtype, name, pattern_filter.pattern_type)]


def touched_patterns(patterns: Iterable[ResourcePattern] | PatternIndex,
                     filters: list[AclBindingFilter]) -> dict[ResourcePattern, list[int]]:
    """The patterns DeleteAcls looks at (AclAuthorizer.deleteAcls): each stored pattern some filter
    matches, plus the exact patterns of the filters that name one (so that a store reading fresh,
    ZooKeeper, finds what another broker just wrote), each with the indices of its filters. A filter
    given again is left out: what it matches was the first one's."""
    index = patterns if isinstance(patterns, PatternIndex) else PatternIndex(patterns)
    touched: dict[ResourcePattern, list[int]] = {}
    seen: set[AclBindingFilter] = set()
    for i, f in enumerate(filters):
        if f in seen:
            continue
        seen.add(f)
        found = index.matching(f.pattern_filter)
        if f.pattern_filter.matches_at_most_one():
            found += [p for p in _exact_patterns(f.pattern_filter) if p not in index.patterns]
        for p in found:
            touched.setdefault(p, []).append(i)
    return touched


def plan_deletions(current: Mapping[ResourcePattern, Collection[AccessControlEntry]],
                   filters: list[AclBindingFilter]) -> dict[ResourcePattern, dict[AccessControlEntry, int]]:
    """What DeleteAcls removes from `current`: per pattern the entries some filter matches, each
    with the index of the first filter that matches it (an entry several filters match is reported
    once, under the first, as AclAuthorizer reports it). Patterns with nothing to remove are left out."""
    plan: dict[ResourcePattern, dict[AccessControlEntry, int]] = {}
    for pattern, indices in touched_patterns(current, filters).items():
        removed = entries_to_delete(current.get(pattern, ()), [(i, filters[i].entry_filter) for i in indices])
        if removed:
            plan[pattern] = removed
    return plan


def entries_to_delete(entries: Collection[AccessControlEntry],
                      entry_filters: list[tuple[int, AccessControlEntryFilter]]) -> dict[AccessControlEntry, int]:
    """Of one pattern's entries, those the filters (index, entry filter) match, each with the
    first index that matches it."""
    remaining = set(entries)
    removed: dict[AccessControlEntry, int] = {}
    for i, ef in sorted(entry_filters, key=lambda x: x[0]):
        if not remaining:
            break
        if ef.matches_at_most_one():
            exact = AccessControlEntry(ef.principal or "", ef.host or "", ef.operation, ef.permission_type)
            hits = [exact] if exact in remaining else []
        else:
            hits = [e for e in remaining if ef.matches(e)]
        for e in hits:
            remaining.discard(e)
            removed[e] = i
    return removed


# -- Kafka's JSON of an entry (AclEntry.toMap / fromBytes): ZooKeeper's znodes and kbroker-acls.json --

def entry_to_json(entry: AccessControlEntry) -> dict[str, str]:
    return {"principal": entry.principal, "permissionType": name_of(entry.permission_type),
            "operation": name_of(entry.operation), "host": entry.host}


def entry_from_json(item: object) -> AccessControlEntry | None:
    """An entry from its JSON; None for one Kafka could not load (not an object, an unknown
    operation or permission, a principal that is not `Type:name`)."""
    if not isinstance(item, dict):
        return None
    principal, host = item.get("principal"), item.get("host")
    if not isinstance(principal, str) or not isinstance(host, str) or principal_error(principal):
        return None
    operation = parse_operation(str(item.get("operation", "")))
    permission = parse_permission_type(str(item.get("permissionType", "")))
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY) or \
            permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return None
    return AccessControlEntry(principal, host, operation, permission)


def entry_order(entry: AccessControlEntry) -> tuple:
    return entry.principal, entry.host, int(entry.operation), int(entry.permission_type)


def pattern_order(pattern: ResourcePattern) -> tuple:
    return int(pattern.resource_type), int(pattern.pattern_type), pattern.name


def log_text(binding: AclBinding) -> str:
    """A binding in one short phrase for logs: `Topic:LITERAL:orders User:alice ALLOW READ from *`
    (the resource as Kafka's audit log writes it)."""
    p, e = binding.pattern, binding.entry
    return (f"{name_of(p.resource_type)}:{p.pattern_type.name}:{p.name} {e.principal} {e.permission_type.name} "
            f"{e.operation.name} from {e.host}")
