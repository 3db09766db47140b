"""Avro schemas for the registry: parsing (fastavro), the canonical and normalized forms, and
compatibility as Confluent checks it. Pure: no I/O.

This module is the public surface: `parse`, `AvroSchema`, `MAX_DEPTH` from avro_parse.py (parsing,
validation, the canonical and normalized forms); `Incompatibility`, `incompatibilities`,
`compatibility` and `check` from avro_compat.py (Apache Avro's `SchemaCompatibility` with
Confluent's messages and levels). Each module lists where it knowingly differs from Confluent.
"""

from __future__ import annotations

from kbroker.schema_registry.avro_compat import Incompatibility, check, compatibility, incompatibilities
from kbroker.schema_registry.avro_parse import MAX_DEPTH, AvroSchema, parse
from kbroker.schema_registry.levels import LEVELS

__all__ = [
    "LEVELS",
    "MAX_DEPTH",
    "AvroSchema",
    "Incompatibility",
    "check",
    "compatibility",
    "incompatibilities",
    "parse",
]
