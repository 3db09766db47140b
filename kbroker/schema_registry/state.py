"""The registry's state as a pure function of the `_schemas` records, and the decisions of its writes.

`RegistryState.apply(key, value)` replays one `_schemas` record, as a Confluent registry does when
it reads the topic at start-up and after each write. Every write of the REST API is a pure decision
(`register`, `delete_version`, `delete_subject`, `set_config`, `delete_config`, `set_mode`,
`delete_mode`) that reads the state and returns a `Decision`: the records to append to `_schemas`
(in this order) and the answer for the client, or raises `RegistryError` carrying Confluent's error
code. A decision never changes the state: the caller appends the records and the state changes
when they are applied, so every registry reading the topic answers the same.

Confluent's rules followed here (KafkaSchemaRegistry / AbstractSchemaRegistry, Karapace's
schema_registry.py and in_memory_database.py):

- ids are per distinct schema (type, canonical text, references): the same schema registered
  under another subject gets the same id; a new id is ``max id ever applied + 1``. Confluent's
  IncrementalIdGenerator takes the max over the SCHEMA records it has read, so after a hard delete
  of the highest id *and* compaction of the topic, a restarted Confluent registry hands that id out
  again. Here the max never goes down while the state lives (tombstones do not lower it), and
  ``id_floor`` lets the caller carry a durable high-water mark across compaction.
- a new version is ``max version (soft-deleted ones included) + 1``: numbers are not reused.
- registering a schema equal to a live version of the subject answers that version (no record);
  equal to a soft-deleted one, it comes back with the same id under a new version, and the older
  soft-deleted versions of the subject with that id are tombstoned (unless referenced).
- soft delete writes the SCHEMA value again with ``deleted: true`` (one version) or a
  DELETE_SUBJECT record (every version up to the latest live one); hard delete writes tombstones
  and only after a soft delete (40405/40407); a hard delete that empties a subject also deletes
  its config and mode.
- a version referenced by another schema cannot be deleted (42206): by live referrers for a soft
  delete, by any referrer for a hard one.
- mode READONLY refuses registrations, deletes and config changes (42205); IMPORT accepts only
  registrations that carry an id (and optionally a version) and skips compatibility checks;
  READWRITE refuses registrations that carry an id.

Schema types plug in through two injected callables, so this module needs no Avro, JSON Schema or
Protobuf code: a `Parser` (validates, canonicalizes, normalizes; raises `InvalidSchema`) and a
`Checker` (the compatibility messages of a new schema against previous ones at a level).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.levels import LEVELS
from kbroker.schema_registry.records import (
    AVRO,
    MAX_INT32,
    SCHEMA_TYPES,
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    Key,
    ModeKey,
    ModeValue,
    NoopKey,
    OtherKey,
    SchemaKey,
    SchemaReference,
    SchemaValue,
    Value,
)

__all__ = [
    "COMPATIBILITY_LEVELS",
    "DEFAULT_COMPATIBILITY",
    "DEFAULT_MODE",
    "INCOMPATIBLE_SCHEMA",
    "INVALID_COMPATIBILITY_LEVEL",
    "INVALID_MODE",
    "INVALID_SCHEMA",
    "INVALID_VERSION",
    "LATEST",
    "MODES",
    "OPERATION_NOT_PERMITTED",
    "REFERENCE_EXISTS",
    "SCHEMA_NOT_FOUND",
    "SUBJECT_COMPATIBILITY_NOT_CONFIGURED",
    "SUBJECT_MODE_NOT_CONFIGURED",
    "SUBJECT_NOT_FOUND",
    "SUBJECT_NOT_SOFT_DELETED",
    "SUBJECT_SOFT_DELETED",
    "VERSION_NOT_FOUND",
    "VERSION_NOT_SOFT_DELETED",
    "VERSION_SOFT_DELETED",
    "Checker",
    "Decision",
    "Dependency",
    "Parser",
    "Record",
    "Registered",
    "RegistryError",
    "RegistryState",
    "SchemaVersion",
    "parse_version",
]

# Confluent's error codes (io.confluent.kafka.schemaregistry.rest.exceptions.Errors). The HTTP
# status is the code's first three digits (409 is both).
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
#: what Confluent (up to 7.x) and Karapace answer; Confluent's newest sources name 40901
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206

COMPATIBILITY_LEVELS = LEVELS  # Confluent's seven
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"
#: the version id "latest" (Confluent accepts -1 for it too)
LATEST = -1

_MAX_MESSAGE = 2000


class RegistryError(Exception):
    """A Confluent error answer: ``{"error_code": error_code, "message": message}``."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code
        self.message = message[:_MAX_MESSAGE]

    @property
    def http_status(self) -> int:
        return self.error_code if self.error_code < 1000 else self.error_code // 100


Record = tuple[Key, Value | None]


@dataclass(frozen=True, slots=True)
class Decision:
    """The records to append to `_schemas`, in order, and the answer once they are applied."""

    records: tuple[Record, ...]
    answer: Any


@dataclass(frozen=True, slots=True)
class Registered:
    id: int
    version: int


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False

    def to_value(self, *, deleted: bool | None = None) -> SchemaValue:
        return SchemaValue(self.subject, self.version, self.id, self.schema, self.schema_type, self.references,
                           self.deleted if deleted is None else deleted)


@dataclass(frozen=True, slots=True)
class Dependency:
    """A resolved reference: the name the referring schema uses and the version it names."""

    name: str
    schema: SchemaVersion


#: (schema_type, text, dependencies, normalize) -> the canonical text to store; raises InvalidSchema.
#: ``dependencies`` is the transitive closure of the references, dependencies first.
Parser = Callable[[str, str, Sequence[Dependency], bool], str]
#: (schema_type, level, new_text, new_dependencies, previous [(text, dependencies)] oldest first)
#: -> the incompatibilities (empty: compatible). Called only with previous schemas of the same type.
Checker = Callable[[str, str, str, Sequence[Dependency], Sequence[tuple[str, Sequence[Dependency]]]], list[str]]

_Content = tuple[str, str, tuple[SchemaReference, ...]]  # (schema_type, schema, references)


def parse_version(version: int | str) -> int:
    """Confluent's version id: ``latest``, -1, or 1..2^31-1; anything else is 42202."""
    if isinstance(version, str):
        if version.lower() == "latest":
            return LATEST
        text = version.strip()
        if not text.lstrip("-").isdigit() or len(text) > 11:
            raise _invalid_version(version)
        version = int(text)
    if isinstance(version, bool) or not isinstance(version, int) or not (version == LATEST or 1 <= version <= MAX_INT32):
        raise _invalid_version(version)
    return version


def _invalid_version(version: object) -> RegistryError:
    return RegistryError(INVALID_VERSION, f"The specified version '{str(version)[:100]}' is not a valid version id. "
                         "Allowed values are between [1, 2^31-1] and the string \"latest\"")


def _subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def _version_not_found(version: int) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND, f"Version {version} not found.")


def _is_transitive(level: str) -> bool:
    return level.endswith("_TRANSITIVE")


class RegistryState:
    """Subjects → versions → schema, ids → schema, configs and modes, from the `_schemas` records."""

    def __init__(self, parser: Parser, checker: Checker, *, id_floor: int = 0) -> None:
        self.parser = parser
        self.checker = checker
        self.id_floor = id_floor
        self._subjects: dict[str, dict[int, SchemaVersion]] = {}
        self._ids: dict[int, _Content] = {}
        self._id_users: dict[int, set[tuple[str, int]]] = {}
        self._content_ids: dict[_Content, int] = {}
        self._referrers: dict[tuple[str, int], set[tuple[str, int]]] = {}
        self._max_id = 0
        self._config: dict[str | None, str] = {}
        self._mode: dict[str | None, str] = {}

    # ------------------------------------------------------------------ replay

    def apply(self, key: Key, value: Value | None) -> None:
        """Replay one `_schemas` record (decoded). Records naming unknown things are ignored, as
        Confluent and Karapace log and skip them; never raises on a well-formed record."""
        if isinstance(key, SchemaKey):
            if value is None:
                self._remove_version(key.subject, key.version)
            elif isinstance(value, SchemaValue):
                self._put_version(SchemaVersion(key.subject, key.version, value.id, value.schema, value.schema_type,
                                                value.references, value.deleted))
        elif isinstance(key, ConfigKey):
            if isinstance(value, ConfigValue):
                self._config[key.subject] = value.compatibility_level
            elif value is None:
                self._config.pop(key.subject, None)
        elif isinstance(key, ModeKey):
            if isinstance(value, ModeValue):
                self._mode[key.subject] = value.mode
            elif value is None:
                self._mode.pop(key.subject, None)
        elif isinstance(key, DeleteSubjectKey):
            if isinstance(value, DeleteSubjectValue):
                for sv in list(self._subjects.get(key.subject, {}).values()):
                    if sv.version <= value.version and not sv.deleted:
                        self._put_version(replace(sv, deleted=True))
        elif isinstance(key, (NoopKey, OtherKey)):
            pass

    def apply_all(self, records: Iterable[Record]) -> None:
        for key, value in records:
            self.apply(key, value)

    def _put_version(self, sv: SchemaVersion) -> None:
        self._remove_version(sv.subject, sv.version)
        self._subjects.setdefault(sv.subject, {})[sv.version] = sv
        content: _Content = (sv.schema_type, sv.schema, sv.references)
        self._ids[sv.id] = content
        self._id_users.setdefault(sv.id, set()).add((sv.subject, sv.version))
        self._content_ids[content] = sv.id
        self._max_id = max(self._max_id, sv.id)
        for ref in sv.references:
            self._referrers.setdefault((ref.subject, ref.version), set()).add((sv.subject, sv.version))

    def _remove_version(self, subject: str, version: int) -> None:
        versions = self._subjects.get(subject)
        if versions is None or version not in versions:
            return
        sv = versions.pop(version)
        if not versions:
            del self._subjects[subject]
        users = self._id_users.get(sv.id)
        if users is not None:
            users.discard((subject, version))
            if not users:
                del self._id_users[sv.id]
                content = self._ids.pop(sv.id, None)
                if content is not None and self._content_ids.get(content) == sv.id:
                    del self._content_ids[content]
        for ref in sv.references:
            referrers = self._referrers.get((ref.subject, ref.version))
            if referrers is not None:
                referrers.discard((subject, version))
                if not referrers:
                    del self._referrers[(ref.subject, ref.version)]

    # ------------------------------------------------------------------ reads

    @property
    def max_id(self) -> int:
        """The highest schema id ever applied (tombstones do not lower it)."""
        return self._max_id

    def next_id(self) -> int:
        return max(self._max_id, self.id_floor) + 1

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s, versions in self._subjects.items()
                      if s.startswith(prefix) and (deleted or any(not sv.deleted for sv in versions.values())))

    def _versions(self, subject: str, deleted: bool) -> dict[int, SchemaVersion]:
        return {v: sv for v, sv in sorted(self._subjects.get(subject, {}).items()) if deleted or not sv.deleted}

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        versions = self._versions(subject, deleted)
        if not versions:
            raise _subject_not_found(subject)
        return list(versions)

    def get_version(self, subject: str, version: int | str, *, deleted: bool = False) -> SchemaVersion:
        """GET /subjects/{s}/versions/{v}: 40401 unknown subject, 40402 unknown version, 42202."""
        v = parse_version(version)
        versions = self._versions(subject, deleted)
        if not versions:
            raise _subject_not_found(subject)
        if v == LATEST:
            v = max(versions)
        sv = versions.get(v)
        if sv is None:
            raise _version_not_found(v)
        return sv

    def schema_by_id(self, schema_id: int) -> SchemaVersion:
        """GET /schemas/ids/{id}: a version carrying the id (its subject/version are one of its users)."""
        users = self._id_users.get(schema_id)
        if not users:
            raise RegistryError(SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        subject, version = min(users)
        return self._subjects[subject][version]

    def subject_versions_for_id(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        """GET /schemas/ids/{id}/versions (and /subjects: the distinct subjects of this list)."""
        if schema_id not in self._id_users:
            raise RegistryError(SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return sorted((s, v) for s, v in self._id_users[schema_id] if deleted or not self._subjects[s][v].deleted)

    def referenced_by(self, subject: str, version: int | str) -> list[int]:
        """GET /subjects/{s}/versions/{v}/referencedby: ids of the live schemas referencing it."""
        sv = self.get_version(subject, version)
        return self._referrer_ids(sv.subject, sv.version, include_deleted=False)

    def _referrer_ids(self, subject: str, version: int, *, include_deleted: bool,
                      exclude_subject: str | None = None) -> list[int]:
        ids = set()
        for s, v in self._referrers.get((subject, version), ()):
            sv = self._subjects.get(s, {}).get(v)
            if sv is not None and s != exclude_subject and (include_deleted or not sv.deleted):
                ids.add(sv.id)
        return sorted(ids)

    def compatibility_level(self, subject: str | None) -> str:
        """The level in force for a subject: its own, else the global one, else BACKWARD."""
        if subject is not None and subject in self._config:
            return self._config[subject]
        return self._config.get(None, DEFAULT_COMPATIBILITY)

    def mode_in_scope(self, subject: str | None) -> str:
        if subject is not None and subject in self._mode:
            return self._mode[subject]
        return self._mode.get(None, DEFAULT_MODE)

    def get_config(self, subject: str | None = None, *, default_to_global: bool = False) -> str:
        """GET /config and /config/{s}: 40408 when the subject has none and not defaultToGlobal."""
        if subject is None or default_to_global:
            return self.compatibility_level(subject)
        if subject not in self._config:
            raise RegistryError(SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                                f"Subject '{subject}' does not have subject-level compatibility configured")
        return self._config[subject]

    def get_mode(self, subject: str | None = None, *, default_to_global: bool = False) -> str:
        """GET /mode and /mode/{s}: 40409 when the subject has none and not defaultToGlobal."""
        if subject is None or default_to_global:
            return self.mode_in_scope(subject)
        if subject not in self._mode:
            raise RegistryError(SUBJECT_MODE_NOT_CONFIGURED,
                                f"Subject '{subject}' does not have subject-level mode configured")
        return self._mode[subject]

    def snapshot(self) -> dict[str, Any]:
        """Everything the state holds, as plain comparable data (tests, debugging)."""
        return {
            "subjects": {s: dict(sorted(vs.items())) for s, vs in sorted(self._subjects.items())},
            "ids": dict(sorted(self._ids.items())),
            "id_users": {i: sorted(u) for i, u in sorted(self._id_users.items())},
            "referrers": {k: sorted(v) for k, v in sorted(self._referrers.items())},
            "config": dict(self._config),
            "mode": dict(self._mode),
        }

    # ------------------------------------------------------------------ schema parsing

    def _resolve_references(self, references: Sequence[SchemaReference], *, include_deleted: bool = False,
                            ) -> tuple[tuple[SchemaReference, ...], list[Dependency]]:
        """References as given (a version -1 resolved to the latest one) and their closure. A new
        schema may only reference live versions; a lookup may name soft-deleted ones (Confluent's
        ``lookupDeletedSchema = !validateAsNew``)."""
        resolved = []
        for ref in references:
            live = self._versions(ref.subject, include_deleted)
            version = max(live) if ref.version == LATEST and live else ref.version
            if version not in live:
                raise RegistryError(INVALID_SCHEMA, f"Invalid schema: reference '{ref.name}' names subject "
                                    f"'{ref.subject}' version {ref.version}, which does not exist")
            resolved.append(SchemaReference(ref.name, ref.subject, version))
        return tuple(resolved), self._dependencies(resolved)

    def _dependencies(self, references: Iterable[SchemaReference]) -> list[Dependency]:
        """The transitive closure of references, dependencies before their dependents."""
        out: list[Dependency] = []
        seen: set[tuple[str, int]] = set()

        def visit(ref: SchemaReference) -> None:
            key = (ref.subject, ref.version)
            sv = self._subjects.get(ref.subject, {}).get(ref.version)
            if key in seen or sv is None:
                return
            seen.add(key)
            for inner in sv.references:
                visit(inner)
            out.append(Dependency(ref.name, sv))

        for ref in references:
            visit(ref)
        return out

    def _canonical(self, schema_type: str, text: str, deps: Sequence[Dependency], normalize: bool) -> str:
        if schema_type not in SCHEMA_TYPES:
            raise RegistryError(INVALID_SCHEMA, f"Invalid schema type {schema_type[:100]!r}")
        try:
            return self.parser(schema_type, text, deps, normalize)
        except InvalidSchema as exc:
            raise RegistryError(INVALID_SCHEMA, f"Invalid schema: {exc}") from None

    def _same_schema(self, sv: SchemaVersion, content: _Content, normalize: bool) -> bool:
        """A stored version equals the new schema (also when written in another canonical form)."""
        if sv.schema_type != content[0] or sv.references != content[2]:
            return False
        if sv.schema == content[1]:
            return True
        try:
            return self.parser(sv.schema_type, sv.schema, self._dependencies(sv.references), normalize) == content[1]
        except InvalidSchema:
            return False

    def _incompatibilities(self, subject: str, level: str, schema_type: str, text: str,
                           deps: Sequence[Dependency], previous: Sequence[SchemaVersion]) -> list[str]:
        if level == "NONE" or not previous:
            return []
        if not _is_transitive(level):
            previous = previous[-1:]
        if any(sv.schema_type != schema_type for sv in previous):
            return ["Incompatible because of different schema type"]
        return list(self.checker(schema_type, level, text, deps,
                                 [(sv.schema, self._dependencies(sv.references)) for sv in previous]))

    # ------------------------------------------------------------------ decisions: schemas

    def register(self, subject: str, schema: str, *, schema_type: str = AVRO,
                 references: Sequence[SchemaReference] = (), normalize: bool = False,
                 schema_id: int | None = None, version: int | None = None) -> Decision:
        """POST /subjects/{s}/versions. Answer: `Registered`; no records when already registered."""
        mode = self.mode_in_scope(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        if schema_id is not None and schema_id >= 0:
            if mode != "IMPORT":
                raise RegistryError(OPERATION_NOT_PERMITTED, f"Subject {subject} is not in import mode")
            if schema_id < 1 or schema_id > MAX_INT32:
                raise RegistryError(INVALID_SCHEMA, f"Invalid schema id {schema_id}")
        else:
            schema_id = None
            if mode != "READWRITE":
                raise RegistryError(OPERATION_NOT_PERMITTED, f"Subject {subject} is not in read-write mode")
        if version is not None and version > 0 and version > MAX_INT32:
            raise _invalid_version(version)

        all_versions = self._versions(subject, True)
        live = [sv for sv in all_versions.values() if not sv.deleted]
        new_version = max(all_versions, default=0) + 1

        refs, deps = self._resolve_references(references)
        text = self._canonical(schema_type, schema, deps, normalize)
        content: _Content = (schema_type, text, refs)

        existing_id = self._content_ids.get(content)
        if existing_id is not None and schema_id is not None and schema_id != existing_id:
            existing_id = None
        if not version:
            candidates = [sv for sv in reversed(live) if schema_id is None or sv.id == schema_id]
            for sv in candidates:  # cheap pass: the same id or text
                if sv.id == existing_id or (sv.schema_type, sv.schema, sv.references) == content:
                    return Decision((), Registered(sv.id, sv.version))
            for sv in candidates:  # stored in another canonical form (e.g. written by Confluent)
                if self._same_schema(sv, content, normalize):
                    return Decision((), Registered(sv.id, sv.version))

        if mode != "IMPORT":
            level = self.compatibility_level(subject)
            messages = self._incompatibilities(subject, level, schema_type, text, deps, live)
            if messages:
                raise RegistryError(INCOMPATIBLE_SCHEMA, "Schema being registered is incompatible with an earlier "
                                    f"schema for subject \"{subject}\", details: {messages}")

        if not version or version <= 0:
            version = new_version
        elif version != new_version:
            if mode != "IMPORT":
                raise RegistryError(INVALID_SCHEMA, "Version is not one more than previous version")
            if version in all_versions:
                sv = all_versions[version]
                same = (schema_id is None or sv.id == schema_id) and self._same_schema(sv, content, normalize)
                if same and not sv.deleted:
                    return Decision((), Registered(sv.id, sv.version))
                if same:  # re-importing a soft-deleted version brings it back (Confluent overwrites)
                    return Decision(((SchemaKey(subject, version), sv.to_value(deleted=False)),),
                                    Registered(sv.id, version))
                # Confluent overwrites the version with another schema; kbroker refuses to rewrite history.
                raise RegistryError(OPERATION_NOT_PERMITTED,
                                    f"Overwrite of version {version} of subject {subject} is not permitted.")

        if schema_id is not None:
            held = self._ids.get(schema_id)
            if held is not None and held != content:
                raise RegistryError(OPERATION_NOT_PERMITTED,
                                    f"Overwrite new schema with id {schema_id} is not permitted.")
            new_id = schema_id
        elif existing_id is not None:
            new_id = existing_id
        else:
            new_id = self.next_id()

        records: list[Record] = []
        for sv in all_versions.values():
            if sv.deleted and sv.id == new_id and sv.version < version \
                    and not self._referrer_ids(subject, sv.version, include_deleted=True):
                records.append((SchemaKey(subject, sv.version), None))
        records.append((SchemaKey(subject, version),
                        SchemaValue(subject, version, new_id, text, schema_type, refs, False)))
        return Decision(tuple(records), Registered(new_id, version))

    def lookup(self, subject: str, schema: str, *, schema_type: str = AVRO,
               references: Sequence[SchemaReference] = (), normalize: bool = False,
               deleted: bool = False) -> SchemaVersion:
        """POST /subjects/{s}: the version of the subject holding this schema (40401, 40403)."""
        versions = self._versions(subject, deleted)
        if not versions:
            raise _subject_not_found(subject)
        refs, deps = self._resolve_references(references, include_deleted=True)
        content: _Content = (schema_type, self._canonical(schema_type, schema, deps, normalize), refs)
        for sv in reversed(list(versions.values())):
            if self._same_schema(sv, content, normalize):
                return sv
        raise RegistryError(SCHEMA_NOT_FOUND, "Schema not found")

    def test_compatibility(self, subject: str, version: int | str | None, schema: str, *,
                           schema_type: str = AVRO, references: Sequence[SchemaReference] = (),
                           normalize: bool = False) -> list[str]:
        """POST /compatibility/subjects/{s}/versions[/{v}]: the incompatibilities (empty: compatible).
        Without a version: against the subject's versions per its level; with one: against it."""
        _refs, deps = self._resolve_references(references)
        text = self._canonical(schema_type, schema, deps, normalize)
        level = self.compatibility_level(subject)
        if version is None:
            previous = list(self._versions(subject, False).values())
        else:
            previous = [self.get_version(subject, version)]
            level = level.removesuffix("_TRANSITIVE")
        return self._incompatibilities(subject, level, schema_type, text, deps, previous)

    def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> Decision:
        """DELETE /subjects/{s}/versions/{v}[?permanent=true]. Answer: the version deleted."""
        v = parse_version(version)
        all_versions = self._versions(subject, True)
        if not all_versions:
            raise _subject_not_found(subject)
        if v == LATEST:
            candidates = all_versions if permanent else self._versions(subject, False)
            if not candidates:
                raise _version_not_found(v)
            v = max(candidates)
        sv = all_versions.get(v)
        if sv is None:
            raise _version_not_found(v)
        if not permanent and sv.deleted:
            raise RegistryError(VERSION_SOFT_DELETED, f"Subject '{subject}' Version {v} was soft deleted. "
                                "Set permanent=true to delete permanently")
        if self.mode_in_scope(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        if self._referrer_ids(subject, v, include_deleted=permanent):
            raise RegistryError(REFERENCE_EXISTS, f"One or more references exist to the schema "
                                f"{{magic=1,keytype=SCHEMA,subject={subject},version={v}}}.")
        if permanent and not sv.deleted:
            raise RegistryError(VERSION_NOT_SOFT_DELETED, f"Subject '{subject}' Version {v} was not deleted "
                                "first before being permanently deleted")
        records: list[Record]
        if not permanent:
            records = [(SchemaKey(subject, v), sv.to_value(deleted=True))]
        else:
            records = [(SchemaKey(subject, v), None)]
            if len(all_versions) == 1:
                records += self._subject_settings_tombstones(subject)
        return Decision(tuple(records), v)

    def delete_subject(self, subject: str, *, permanent: bool = False) -> Decision:
        """DELETE /subjects/{s}[?permanent=true]. Answer: the versions deleted."""
        all_versions = self._versions(subject, True)
        if not all_versions:
            raise _subject_not_found(subject)
        live = [v for v, sv in all_versions.items() if not sv.deleted]
        if not permanent and not live:
            raise RegistryError(SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted."
                                "Set permanent=true to delete permanently")
        if self.mode_in_scope(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        targets = list(all_versions) if permanent else live
        for v in targets:
            if self._referrer_ids(subject, v, include_deleted=permanent, exclude_subject=subject):
                raise RegistryError(REFERENCE_EXISTS, f"One or more references exist to the schema "
                                    f"{{magic=1,keytype=SCHEMA,subject={subject},version={v}}}.")
        if permanent and live:
            raise RegistryError(SUBJECT_NOT_SOFT_DELETED, f"Subject '{subject}' was not deleted "
                                "first before being permanently deleted")
        records: list[Record]
        if not permanent:
            # The watermark covers the soft-deleted versions too (Confluent uses the latest live
            # one): DELETE_SUBJECT records share one key, so compaction keeps only the last, and a
            # lower watermark (after an IMPORT of a lower version) would resurrect versions an
            # earlier DELETE_SUBJECT had deleted. Readers see the same result either way.
            records = [(DeleteSubjectKey(subject), DeleteSubjectValue(subject, max(all_versions)))]
        else:
            records = [(SchemaKey(subject, v), None) for v in reversed(targets)]
            records += self._subject_settings_tombstones(subject)
        return Decision(tuple(records), targets)

    def _subject_settings_tombstones(self, subject: str) -> list[Record]:
        records: list[Record] = []
        if subject in self._mode:
            records.append((ModeKey(subject), None))
        if subject in self._config:
            records.append((ConfigKey(subject), None))
        return records

    # ------------------------------------------------------------------ decisions: config and mode

    def set_config(self, subject: str | None, level: str) -> Decision:
        """PUT /config[/{s}]. Answer: the level set."""
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise RegistryError(INVALID_COMPATIBILITY_LEVEL, "Invalid compatibility level. Valid values are none, "
                                "backward, forward, full, backward_transitive, forward_transitive, and full_transitive")
        self._refuse_if_read_only(subject)
        level = level.upper()
        return Decision(((ConfigKey(subject), ConfigValue(level, subject)),), level)

    def delete_config(self, subject: str | None) -> Decision:
        """DELETE /config[/{s}]. Answer: the level that was configured (40401 when the subject had none)."""
        self._refuse_if_read_only(subject)
        if subject is not None and subject not in self._config:
            raise _subject_not_found(subject)
        previous = self._config.get(subject, DEFAULT_COMPATIBILITY)
        return Decision(((ConfigKey(subject), None),), previous)

    def _refuse_if_read_only(self, subject: str | None) -> None:
        if self.mode_in_scope(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(OPERATION_NOT_PERMITTED,
                                f"Subject {subject} is in read-only mode" if subject else "Registry is in read-only mode")

    def set_mode(self, subject: str | None, mode: str, *, force: bool = False) -> Decision:
        """PUT /mode[/{s}]. Entering IMPORT needs no live schema in scope (unless ``force``) and
        hard-deletes the soft-deleted ones, as Confluent does. Answer: the mode set."""
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(INVALID_MODE, f"Invalid mode. Valid values are {', '.join(MODES)}.")
        mode = mode.upper()
        records: list[Record] = []
        if mode == "IMPORT" and self.mode_in_scope(subject) != "IMPORT" and not force:
            scope = [subject] if subject is not None else list(self._subjects)
            if any(not sv.deleted for s in scope for sv in self._subjects.get(s, {}).values()):
                raise RegistryError(OPERATION_NOT_PERMITTED, "Cannot import since found existing subjects")
            for s in scope:
                for v in self._versions(s, True):
                    if self._referrer_ids(s, v, include_deleted=True):
                        raise RegistryError(REFERENCE_EXISTS, f"One or more references exist to the schema "
                                            f"{{magic=1,keytype=SCHEMA,subject={s},version={v}}}.")
                    records.append((SchemaKey(s, v), None))
        records.append((ModeKey(subject), ModeValue(mode, subject)))
        return Decision(tuple(records), mode)

    def delete_mode(self, subject: str | None) -> Decision:
        """DELETE /mode[/{s}]. Answer: the mode that was set (40401 when the subject had none)."""
        if subject is not None and subject not in self._mode:
            raise _subject_not_found(subject)
        previous = self._mode.get(subject, DEFAULT_MODE)
        return Decision(((ModeKey(subject), None),), previous)
