"""The registry state's vocabulary, shared by its replay and reads (`state_view`), its write
decisions (`state`) and the REST layer: Confluent's error codes and `RegistryError` (with the
errors the reads and the decisions both raise), the compatibility levels and modes with their
defaults, `parse_version` (Confluent's version ids), the answers (`Decision`, `Registered`), the
stored `SchemaVersion` and resolved `Dependency`, and the types of the injected `Parser` and
`Checker`. `kbroker.schema_registry.state` re-exports the public names: import them from there."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kbroker.schema_registry.levels import LEVELS
from kbroker.schema_registry.records import (
    AVRO,
    MAX_INT32,
    Key,
    SchemaReference,
    SchemaValue,
    Value,
)

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

Content = tuple[str, str, tuple[SchemaReference, ...]]  # (schema_type, schema, references)


def parse_version(version: int | str) -> int:
    """Confluent's version id: ``latest``, -1, or 1..2^31-1; anything else is 42202."""
    if isinstance(version, str):
        if version.lower() == "latest":
            return LATEST
        text = version.strip()
        if not text.lstrip("-").isdigit() or len(text) > 11:
            raise invalid_version(version)
        version = int(text)
    if isinstance(version, bool) or not isinstance(version, int) or not (version == LATEST or 1 <= version <= MAX_INT32):
        raise invalid_version(version)
    return version


def invalid_version(version: object) -> RegistryError:
    return RegistryError(INVALID_VERSION, f"The specified version '{str(version)[:100]}' is not a valid version id. "
                         "Allowed values are between [1, 2^31-1] and the string \"latest\"")


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: int) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND, f"Version {version} not found.")
