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

from collections.abc import Sequence

from kbroker.schema_registry.records import (
    AVRO,
    MAX_INT32,
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    SchemaKey,
    SchemaReference,
    SchemaValue,
)
from kbroker.schema_registry.state_types import (
    COMPATIBILITY_LEVELS,
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    INCOMPATIBLE_SCHEMA,
    INVALID_COMPATIBILITY_LEVEL,
    INVALID_MODE,
    INVALID_SCHEMA,
    INVALID_VERSION,
    LATEST,
    MODES,
    OPERATION_NOT_PERMITTED,
    REFERENCE_EXISTS,
    SCHEMA_NOT_FOUND,
    SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
    SUBJECT_MODE_NOT_CONFIGURED,
    SUBJECT_NOT_FOUND,
    SUBJECT_NOT_SOFT_DELETED,
    SUBJECT_SOFT_DELETED,
    VERSION_NOT_FOUND,
    VERSION_NOT_SOFT_DELETED,
    VERSION_SOFT_DELETED,
    Checker,
    Content,
    Decision,
    Dependency,
    Parser,
    Record,
    Registered,
    RegistryError,
    SchemaVersion,
    invalid_version,
    parse_version,
    subject_not_found,
    version_not_found,
)
from kbroker.schema_registry.state_view import RegistryView

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


class RegistryState(RegistryView):
    """The replayed state (`RegistryView`: replay and reads) and the write decisions, each a pure
    function of the state that returns the records to append and the answer (`Decision`)."""

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
            raise invalid_version(version)

        all_versions = self._versions(subject, True)
        live = [sv for sv in all_versions.values() if not sv.deleted]
        new_version = max(all_versions, default=0) + 1

        refs, deps = self._resolve_references(references)
        text = self._canonical(schema_type, schema, deps, normalize)
        content: Content = (schema_type, text, refs)

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

    def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> Decision:
        """DELETE /subjects/{s}/versions/{v}[?permanent=true]. Answer: the version deleted."""
        v = parse_version(version)
        all_versions = self._versions(subject, True)
        if not all_versions:
            raise subject_not_found(subject)
        if v == LATEST:
            candidates = all_versions if permanent else self._versions(subject, False)
            if not candidates:
                raise version_not_found(v)
            v = max(candidates)
        sv = all_versions.get(v)
        if sv is None:
            raise version_not_found(v)
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
            raise subject_not_found(subject)
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
            raise subject_not_found(subject)
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
            raise subject_not_found(subject)
        previous = self._mode.get(subject, DEFAULT_MODE)
        return Decision(((ModeKey(subject), None),), previous)
