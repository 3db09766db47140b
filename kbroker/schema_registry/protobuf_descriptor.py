"""Protobuf schemas as serialized descriptors: the form Confluent's clients send and ask for.

Confluent's Python (and Go, .NET) clients register a Protobuf schema not as .proto text but as the
base64 (standard alphabet) of a serialized `google.protobuf.FileDescriptorProto`, and their
deserializers fetch schemas with `?format=serialized`, expecting that form back. Confluent's
registry accepts both (text first, else a base64 descriptor) and stores .proto text; so does
kbroker:

- `from_serialized(text)`: the .proto source of a base64 FileDescriptorProto (None when `text` is
  not one), which `protobuf_parse.parse` then parses as any other schema text; imports keep their
  paths so that the references resolve;
- `serialized(schema)`: the base64 FileDescriptorProto of a parsed schema, laid out as protoc
  lays it out, so that a `DescriptorPool` loads it next to its dependencies and the message
  indexes a client computed from its own descriptor name the same messages here.

Options whose values are messages or lists, and custom options (extensions of the *Options
messages), are not carried across. Pure: no I/O.

This module is the public surface; the work is split by direction:
- protobuf_to_descriptor.py: a parsed schema -> FileDescriptorProto (`serialized`,
  `file_descriptor`), with protoc's layout;
- protobuf_from_descriptor.py: FileDescriptorProto -> .proto text (`from_serialized`);
- protobuf_descriptor_common.py: what both share (scalar type numbers, protoc's `json_name` and
  map entry names, float text).
"""

from __future__ import annotations

# re-exported: this module is where callers look
from kbroker.schema_registry.protobuf_descriptor_common import json_name, map_entry_name  # noqa: F401
from kbroker.schema_registry.protobuf_from_descriptor import MAX_SERIALIZED_CHARS, from_serialized
from kbroker.schema_registry.protobuf_to_descriptor import DEFAULT_FILE_NAME, file_descriptor, serialized  # noqa: F401

__all__ = ["MAX_SERIALIZED_CHARS", "file_descriptor", "from_serialized", "serialized"]
