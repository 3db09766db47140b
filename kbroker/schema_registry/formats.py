"""The three schema types plugged into the registry's state: the `Parser` and `Checker` that
`RegistryState` takes (see state.py), over avro.py, json_schema.py and protobuf.py. Pure.

What is stored for a schema (the `schema` of its `_schemas` record, and what GET answers):
- `normalize=true`: Confluent's normalized form of the type (avro `normalized()`, JSON Schema
  keys sorted, Protobuf re-printed), so schemas that differ only in form get one id.
- otherwise Avro and JSON Schema as compact JSON in the written key order, Protobuf as written
  (a base64 FileDescriptorProto, as Confluent's clients send, as the .proto text it converts to:
  see protobuf_descriptor.py).
  Confluent stores Java's re-printed form (Avro's `Schema.toString()` orders each object's keys
  its own way): a schema registered twice with its keys in another order is one schema there and
  two here, unless registered with `normalize=true`.

Parsing is the costly part of a lookup (a stored schema is parsed again to compare it with a new
one in another form), so parsed schemas are kept in a bounded LRU cache keyed by their text and
their dependencies' texts.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from kbroker.schema_registry import avro, json_schema, protobuf, protobuf_descriptor
from kbroker.schema_registry.errors import InvalidSchema
from kbroker.schema_registry.records import AVRO, JSON, PROTOBUF
from kbroker.schema_registry.state import Dependency

__all__ = ["CACHE_SIZE", "MODULES", "check", "parse", "parsed", "render", "stored_text"]

MODULES: dict[str, Any] = {AVRO: avro, JSON: json_schema, PROTOBUF: protobuf}
CACHE_SIZE = 4096


def _references(deps: Sequence[Dependency]) -> tuple[tuple[str, str], ...]:
    return tuple((d.name, d.schema.schema) for d in deps)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse_cached(schema_type: str, text: str, references: tuple[tuple[str, str], ...]) -> Any:
    module = MODULES.get(schema_type)
    if module is None:
        raise InvalidSchema(f"unknown schema type {schema_type[:100]!r}")
    if schema_type == PROTOBUF:
        # Confluent's clients send a Protobuf schema (and its references) as the base64 of a
        # FileDescriptorProto: it is parsed, and stored, as the .proto text it converts to.
        text = protobuf_descriptor.from_serialized(text) or text
        references = tuple((name, protobuf_descriptor.from_serialized(ref) or ref) for name, ref in references)
    return module.parse(text, dict(references))


def _invalid(call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`, a parser's own errors on odd input turned into InvalidSchema."""
    try:
        return call(*args)
    except InvalidSchema:
        raise
    except RecursionError:
        raise InvalidSchema("the schema nests too deeply") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidSchema(str(exc)[:500]) from None


def parsed(schema_type: str, text: str, deps: Sequence[Dependency] = ()) -> Any:
    """The parsed schema (avro.AvroSchema, json_schema.JsonSchema, protobuf.ProtobufSchema);
    InvalidSchema when it is not one."""
    return _invalid(_parse_cached, schema_type, text, _references(deps))


def stored_text(schema_type: str, schema: Any, normalize: bool) -> str:
    """What the registry stores for a parsed schema (see the module docstring)."""
    if schema_type == AVRO:
        return schema.normalized() if normalize else json.dumps(json.loads(schema.text), separators=(",", ":"),
                                                                  ensure_ascii=False)
    if schema_type == JSON:
        return schema.canonical() if normalize else schema.compact()
    return schema.canonical() if normalize else schema.text


def parse(schema_type: str, text: str, deps: Sequence[Dependency], normalize: bool) -> str:
    """The state's `Parser`: validates `text` (with its dependencies) and returns the text to store."""
    if not text.strip():
        raise InvalidSchema("Empty schema")
    return _invalid(_stored_cached, schema_type, text, _references(deps), normalize)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _stored_cached(schema_type: str, text: str, references: tuple[tuple[str, str], ...], normalize: bool) -> str:
    """Lookups (POST /subjects/{s}) send the same texts again and again: the stored form is kept."""
    return stored_text(schema_type, _parse_cached(schema_type, text, references), normalize)


def check(schema_type: str, level: str, new_text: str, new_deps: Sequence[Dependency],
          previous: Sequence[tuple[str, Sequence[Dependency]]]) -> list[str]:
    """The state's `Checker`: Confluent's messages for `new_text` against `previous` (oldest first)."""
    module = MODULES[schema_type]
    new = parsed(schema_type, new_text, new_deps)
    olds = []
    for text, deps in previous:
        try:
            olds.append(parsed(schema_type, text, deps))
        except InvalidSchema as exc:  # a stored schema this parser refuses (written by another registry)
            return [f"Unable to parse the earlier schema: {exc}"]
    return list(module.check(level, new, olds))


def render(schema_type: str, text: str, deps: Sequence[Dependency], fmt: str) -> str:
    """A stored schema in the `format` a GET asks for: Protobuf's ``serialized`` is the base64
    FileDescriptorProto (what Confluent's Protobuf deserializers ask for); any other format, or
    none, is the stored text (Confluent's default)."""
    if fmt == "serialized" and schema_type == PROTOBUF:
        return protobuf_descriptor.serialized(parsed(PROTOBUF, text, deps))
    return text
