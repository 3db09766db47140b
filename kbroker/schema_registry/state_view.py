"""The registry's state as replayed from the `_schemas` records, and every read-only query on it.

`RegistryView.apply(key, value)` replays one record; the reads (GET endpoints, and the POST lookups
`lookup` and `test_compatibility`, which write nothing) answer from the replayed maps or raise
`RegistryError`. The helpers the write decisions share (references resolved to their closure, a
schema's canonical text through the injected `Parser`, compatibility through the injected
`Checker`) are here too. `RegistryState` (module `state`) adds the write decisions; see its
docstring for Confluent's rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.records import (
    AVRO,
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
from kbroker.schema_registry.state_types import (
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    INVALID_SCHEMA,
    LATEST,
    SCHEMA_NOT_FOUND,
    SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
    SUBJECT_MODE_NOT_CONFIGURED,
    Checker,
    Content,
    Dependency,
    Parser,
    Record,
    RegistryError,
    SchemaVersion,
    parse_version,
    subject_not_found,
    version_not_found,
)

__all__ = ["RegistryView"]


def _is_transitive(level: str) -> bool:
    return level.endswith("_TRANSITIVE")


class RegistryView:
    """Subjects → versions → schema, ids → schema, configs and modes, from the `_schemas` records."""

    def __init__(self, parser: Parser, checker: Checker, *, id_floor: int = 0) -> None:
        self.parser = parser
        self.checker = checker
        self.id_floor = id_floor
        self._subjects: dict[str, dict[int, SchemaVersion]] = {}
        self._ids: dict[int, Content] = {}
        self._id_users: dict[int, set[tuple[str, int]]] = {}
        self._content_ids: dict[Content, int] = {}
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
        content: Content = (sv.schema_type, sv.schema, sv.references)
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
            raise subject_not_found(subject)
        return list(versions)

    def get_version(self, subject: str, version: int | str, *, deleted: bool = False) -> SchemaVersion:
        """GET /subjects/{s}/versions/{v}: 40401 unknown subject, 40402 unknown version, 42202."""
        v = parse_version(version)
        versions = self._versions(subject, deleted)
        if not versions:
            raise subject_not_found(subject)
        if v == LATEST:
            v = max(versions)
        sv = versions.get(v)
        if sv is None:
            raise version_not_found(v)
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
        return tuple(resolved), self.dependencies(resolved)

    def dependencies(self, references: Iterable[SchemaReference]) -> list[Dependency]:
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
            text = str(exc)
            raise RegistryError(INVALID_SCHEMA, text if text.startswith("Invalid schema") else
                                f"Invalid schema: {text}") from None

    def _same_schema(self, sv: SchemaVersion, content: Content, normalize: bool) -> bool:
        """A stored version equals the new schema (also when written in another canonical form)."""
        if sv.schema_type != content[0] or sv.references != content[2]:
            return False
        if sv.schema == content[1]:
            return True
        try:
            return self.parser(sv.schema_type, sv.schema, self.dependencies(sv.references), normalize) == content[1]
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
                                 [(sv.schema, self.dependencies(sv.references)) for sv in previous]))

    def lookup(self, subject: str, schema: str, *, schema_type: str = AVRO,
               references: Sequence[SchemaReference] = (), normalize: bool = False,
               deleted: bool = False) -> SchemaVersion:
        """POST /subjects/{s}: the version of the subject holding this schema (40401, 40403)."""
        versions = self._versions(subject, deleted)
        if not versions:
            raise subject_not_found(subject)
        refs, deps = self._resolve_references(references, include_deleted=True)
        content: Content = (schema_type, self._canonical(schema_type, schema, deps, normalize), refs)
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
