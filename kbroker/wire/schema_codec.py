"""A sans-I/O codec driven by Kafka's JSON message definitions, for the messages kio does not carry.

Owns loading the definitions vendored in `kbroker/wire/schemas/`, compiling one plan per
(message, version), decoding bodies into read-only dataclasses with kio's snake_case field names,
and encoding plain dicts (or decoded objects) with the convention of `protocol.build`: fields
absent from the dict take their schema default, fields the version lacks are ignored.

The same codec carries the old versions of client APIs that kio (Kafka 4 schemas) no longer has
(`interbroker.OLD_VERSIONS`): compiled with `kio_names`, their fields are named as kio names them
(a trailing `Ms` dropped: `MaxWaitMs` → `max_wait`), so one handler reads kio's entities and these
alike. `bytes` and `records` fields are nullable byte strings (records as bytes, never opened).

Decoding is bounded by the bytes that remain: an array or string may not claim more elements or
bytes than are left, so a forged count fails before anything is allocated, and every malformed
input raises `ProtocolError`. Plans are closures over precompiled `struct.Struct`s (a run of
fixed-width fields is one call), so nothing consults the schema at run time.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import re
import struct
import uuid
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, NamedTuple

from kbroker.wire.primitives import uvarint
from kbroker.wire.protocol import ProtocolError

__all__ = ["MessageCodec", "load_schema", "message_codec", "to_snake_case", "valid_versions"]

_FIXED = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q"}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ABSENT: Any = object()
_BUILTINS = frozenset(dir(builtins))
_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*')
# kio's word boundaries: aB, A|Bc, 9|Bc
_WORD_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[0-9])(?=[A-Z][a-z])")

Reader = Callable[[Any, int, list], int]  # (buffer, position, list to append the value to) -> new position
Writer = Callable[[bytearray, Any], None]
Getter = Callable[[str, Any], Any]


def to_snake_case(name: str, kio_names: bool = False) -> str:
    """A Kafka field name as kio spells it: `isKRaftController` → `is_k_raft_controller`,
    `ZkVersion` → `zk_version`; names of builtins get a trailing underscore (`Id` → `id_`). With
    `kio_names`, also kio's dropped unit: `ThrottleTimeMs` → `throttle_time` (kio types those as
    durations; here they stay integers, which `protocol.to_ms` reads alike)."""
    snake = _WORD_BOUNDARY.sub("_", name).lower()
    if kio_names and snake.endswith("_ms"):
        snake = snake[:-3]
    return snake + "_" if snake in _BUILTINS else snake


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """The JSON definition `name` (e.g. "LeaderAndIsrRequest"), its // comments stripped."""
    text = (resources.files("kbroker.wire") / "schemas" / f"{name}.json").read_text("utf-8")
    return json.loads(_COMMENT_OR_STRING.sub(lambda m: m[0] if m[0][0] == '"' else "", text))


def _version_range(spec: str | None) -> range:
    if not spec or spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 0x8000)
    low, _, high = spec.partition("-")
    return range(int(low), int(high or low) + 1)


def valid_versions(name: str) -> range:
    return _version_range(load_schema(name)["validVersions"])


# -- primitives (IndexError / struct.error past the end become ProtocolError at the top) ----------

def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    value = buf[pos]
    if value < 0x80:  # the usual one-byte varint
        return value, pos + 1
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")


def _read_length(buf: Any, pos: int, flexible: bool, classic: struct.Struct, nullable: bool) -> tuple[int, int]:
    """A string/array length, -1 for null: varint of length+1 when flexible, else int16/int32."""
    if flexible:
        n, pos = _uvarint(buf, pos)
        n -= 1
    else:
        n, pos = classic.unpack_from(buf, pos)[0], pos + classic.size
    if n < -1 or (n == -1 and not nullable):
        raise ProtocolError(f"invalid length {n}")
    return n, pos


def _write_length(out: bytearray, n: int, flexible: bool, classic: struct.Struct) -> None:
    if not flexible:
        out += classic.pack(n)
    elif n < 0x7F:
        out.append(n + 1)
    else:
        out += uvarint(n + 1)


def _read_tags(buf: Any, pos: int, known: dict[int, tuple[int, Reader]], found: list) -> int:
    """The tagged fields section: known tags decoded into `found`, unknown ones skipped as Kafka does."""
    count, pos = _uvarint(buf, pos)
    for _ in range(count):  # each costs two bytes or more: a forged count runs out of buffer
        tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise ProtocolError("tagged field runs past the end")
        if tag in known:
            index, read = known[tag]
            value: list = []
            if read(buf[:end], pos, value) != end:
                raise ProtocolError(f"tagged field {tag} does not fill its {size} bytes")
            found[index] = value[0]
        pos = end
    return pos


def _write_tags(out: bytearray, get: Getter, tagged: list[tuple[int, str, Any, Writer]]) -> None:
    present = []
    for tag, name, default, write in tagged:
        value = get(name, default)
        if value == default or (value is not None and isinstance(default, tuple) and not value):
            continue  # Kafka writes a tagged field only when it differs from its default
        body = bytearray()
        write(body, value)
        present.append(uvarint(tag) + uvarint(len(body)) + body)
    out += uvarint(len(present))
    for field in present:
        out += field


# -- value codecs: how one value of a type is read, written and built from plain data -------------

class _Codec(NamedTuple):
    read: Reader
    write: Writer
    build: Callable[[Any], Any]
    default: Any
    fixed: str = ""  # the struct code of a fixed-width type, merged into runs by structs


def _identity(value: Any) -> Any:
    return value


def _null(value: Any, nullable: bool) -> bool:
    if value is None and not nullable:
        raise ValueError("null in a field this version does not allow to be null")
    return value is None


def _fixed(kind: str) -> _Codec:
    packer = struct.Struct(">" + _FIXED[kind])
    return _Codec(_run_reader(packer), lambda out, value: out.extend(packer.pack(value)), _identity,
                  False if kind == "bool" else 0, _FIXED[kind])


def _run_reader(packer: struct.Struct) -> Reader:
    unpack, size = packer.unpack_from, packer.size

    def read(buf: Any, pos: int, values: list) -> int:
        values += unpack(buf, pos)
        return pos + size

    return read


def _string(flexible: bool, nullable: bool) -> _Codec:
    def read(buf: Any, pos: int, values: list) -> int:
        n, pos = _read_length(buf, pos, flexible, _I16, nullable)
        if n < 0:
            values.append(None)
            return pos
        end = pos + n
        if end > len(buf):
            raise ProtocolError(f"string of {n} bytes runs past the end")
        values.append(str(buf[pos:end], "utf-8"))
        return end

    def write(out: bytearray, value: Any) -> None:
        if _null(value, nullable):
            _write_length(out, -1, flexible, _I16)
        else:
            raw = value.encode()
            _write_length(out, len(raw), flexible, _I16)
            out += raw

    return _Codec(read, write, _identity, None if nullable else "")


def _bytes(flexible: bool, nullable: bool) -> _Codec:
    """`bytes` and `records`: int32 length (-1 null), or the compact length when flexible."""
    def read(buf: Any, pos: int, values: list) -> int:
        n, pos = _read_length(buf, pos, flexible, _I32, nullable)
        if n < 0:
            values.append(None)
            return pos
        end = pos + n
        if end > len(buf):
            raise ProtocolError(f"bytes of {n} runs past the end")
        values.append(bytes(buf[pos:end]))
        return end

    def write(out: bytearray, value: Any) -> None:
        if _null(value, nullable):
            _write_length(out, -1, flexible, _I32)
        else:
            _write_length(out, len(value), flexible, _I32)
            out += value

    return _Codec(read, write, _identity, None if nullable else b"")


def _uuid_read(buf: Any, pos: int, values: list) -> int:
    raw = bytes(buf[pos : pos + 16])
    if len(raw) != 16:
        raise ProtocolError("uuid runs past the end")
    values.append(None if raw == bytes(16) else uuid.UUID(bytes=raw))  # kio reads the zero id as None
    return pos + 16


_UUID = _Codec(_uuid_read, lambda out, value: out.extend(bytes(16) if value is None else uuid.UUID(str(value)).bytes),
               _identity, None)


def _array(elem: _Codec, flexible: bool, nullable: bool) -> _Codec:
    """An array of `elem`, decoded as a tuple; its count must fit in the bytes that remain."""
    fixed, read_one, write_one, build_one = elem.fixed, elem.read, elem.write, elem.build
    item_size = struct.calcsize(">" + fixed) if fixed else 1  # any element takes a byte or more

    def read(buf: Any, pos: int, values: list) -> int:
        count, pos = _read_length(buf, pos, flexible, _I32, nullable)
        if count < 0:
            values.append(None)
            return pos
        if count * item_size > len(buf) - pos:
            raise ProtocolError(f"array of {count} elements cannot fit in {len(buf) - pos} bytes")
        if fixed:
            values.append(struct.unpack_from(f">{count}{fixed}", buf, pos))
            return pos + count * item_size
        items: list = []
        for _ in range(count):
            pos = read_one(buf, pos, items)
        values.append(tuple(items))
        return pos

    def write(out: bytearray, value: Any) -> None:
        if _null(value, nullable):
            _write_length(out, -1, flexible, _I32)
            return
        _write_length(out, len(value), flexible, _I32)
        if fixed:
            out += struct.pack(f">{len(value)}{fixed}", *value)
        else:
            for item in value:
                write_one(out, item)

    def build(value: Any) -> Any:
        return None if value is None else tuple(build_one(v) for v in value)

    return _Codec(read, write, build, ())


# -- structs --------------------------------------------------------------------------------------

class _Field(NamedTuple):
    name: str
    codec: _Codec
    default: Any
    tag: int | None


def _getter(data: Any, struct_name: str, known: frozenset[str]) -> Getter:
    if isinstance(data, Mapping):
        if not data.keys() <= known:  # a misspelt key (`id` for kio's `id_`) would silently default
            raise ValueError(f"{struct_name} has no field {sorted(data.keys() - known)} in any version")
        return data.get
    return lambda name, default: getattr(data, name, default)


class _Struct:
    """One struct at one version: its read-only dataclass and the steps that read, write, build it."""

    def __init__(self, name: str, fields: list[_Field], flexible: bool, version: int, known: frozenset[str]) -> None:
        self.name, self.known = name, known  # known: its field names in every version
        regular = [f for f in fields if f.tag is None]
        tagged = sorted((f for f in fields if f.tag is not None), key=lambda f: f.tag)
        self.fields = regular + tagged  # the class's field order: regular ones, then tagged
        cls = dataclasses.make_dataclass(
            name, [(f.name, Any, dataclasses.field(default=f.default)) for f in self.fields],
            frozen=True, slots=True)
        cls.__module__ = __name__
        cls.__version__, cls.__flexible__ = version, flexible
        cls.__schema_struct__ = self  # how protocol.build tells these classes from kio's
        self.cls = cls
        self.codec = _Codec(self._reader(regular, tagged, flexible), self._writer(regular, tagged, flexible),
                            self.build, cls(*[f.default for f in self.fields]))

    def _reader(self, regular: list[_Field], tagged: list[_Field], flexible: bool) -> Reader:
        steps = [_run_reader(_run_struct(group)) if group[0].codec.fixed else group[0].codec.read
                 for group in _groups(regular)]
        known = {f.tag: (i, f.codec.read) for i, f in enumerate(tagged)}
        tag_defaults = [f.default for f in tagged]
        cls = self.cls

        def read(buf: Any, pos: int, values: list) -> int:
            vals: list = []
            for step in steps:
                pos = step(buf, pos, vals)
            if flexible:  # the tagged fields section, usually empty: one zero byte
                found = tag_defaults.copy()
                pos = _read_tags(buf, pos, known, found) if buf[pos] else pos + 1
                vals += found
            values.append(cls(*vals))
            return pos

        return read

    def _writer(self, regular: list[_Field], tagged: list[_Field], flexible: bool) -> Writer:
        steps = [_write_step(group) for group in _groups(regular)]
        tag_steps = [(f.tag, f.name, f.default, f.codec.write) for f in tagged]
        name, known = self.name, self.known

        def write(out: bytearray, data: Any) -> None:
            get = _getter(data, name, known)
            for step in steps:
                step(out, get)
            if tag_steps:
                _write_tags(out, get, tag_steps)
            elif flexible:
                out.append(0)

        return write

    def build(self, data: Any) -> Any:
        """An instance from a dict (or an object with the attributes), defaults for what is absent."""
        if type(data) is self.cls:
            return data
        get = _getter(data, self.name, self.known)
        values = []
        for f in self.fields:
            value = get(f.name, _ABSENT)
            values.append(f.default if value is _ABSENT else f.codec.build(value))
        return self.cls(*values)


def _groups(fields: list[_Field]) -> list[list[_Field]]:
    """Fields in order, one to a group except runs of fixed-width ones: one struct call each."""
    groups: list[list[_Field]] = []
    for f in fields:
        if f.codec.fixed and groups and groups[-1][0].codec.fixed:
            groups[-1].append(f)
        else:
            groups.append([f])
    return groups


def _run_struct(run: list[_Field]) -> struct.Struct:
    return struct.Struct(">" + "".join(f.codec.fixed for f in run))


def _write_step(group: list[_Field]) -> Callable[[bytearray, Getter], None]:
    names = [(f.name, f.default) for f in group]
    if group[0].codec.fixed:
        pack = _run_struct(group).pack
        return lambda out, get: out.extend(pack(*[get(name, default) for name, default in names]))
    (name, default), write = names[0], group[0].codec.write
    return lambda out, get: write(out, get(name, default))


# -- compiling a message --------------------------------------------------------------------------

def _parse_default(raw: Any, kind: str) -> Any:
    if raw == "null" or kind not in _FIXED:
        return None if raw == "null" else raw
    if kind == "bool":
        return raw is True or str(raw).lower() == "true"
    return raw if isinstance(raw, int) else int(raw, 0)


class _Compiler:
    def __init__(self, schema: dict, version: int, kio_names: bool = False) -> None:
        self.version = version
        self.kio_names = kio_names
        self.flexible = version in _version_range(schema.get("flexibleVersions"))
        self.common = {s["name"]: s for s in schema.get("commonStructs", ())}
        self.structs: dict[str, _Struct] = {}

    def struct(self, name: str, specs: list[dict]) -> _Struct:
        if name not in self.structs:  # a common struct is compiled once for every field naming it
            fields = [self.field(spec) for spec in specs if self.version in _version_range(spec["versions"])]
            known = frozenset(to_snake_case(spec["name"], self.kio_names) for spec in specs)
            self.structs[name] = _Struct(name, fields, self.flexible, self.version, known)
        return self.structs[name]

    def field(self, spec: dict) -> _Field:
        kind = spec["type"]
        nullable = self.version in _version_range(spec.get("nullableVersions"))
        if kind.startswith("[]"):
            codec = _array(self.value(kind[2:], spec, False), self.flexible, nullable)
        else:
            codec = self.value(kind, spec, nullable)
        default = codec.default if "default" not in spec else _parse_default(spec["default"], kind)
        tag = spec.get("tag") if self.version in _version_range(spec.get("taggedVersions")) else None
        return _Field(to_snake_case(spec["name"], self.kio_names), codec, default, tag)

    def value(self, kind: str, spec: dict, nullable: bool) -> _Codec:
        if kind in _FIXED:
            return _fixed(kind)
        if kind == "string":
            return _string(self.flexible, nullable)
        if kind == "uuid":
            return _UUID
        if kind in ("bytes", "records"):
            return _bytes(self.flexible, nullable)
        if nullable:
            raise ValueError(f"{spec['name']}: nullable {kind} is not supported")
        if kind in self.common:
            return self.struct(kind, self.common[kind]["fields"]).codec
        if "fields" in spec:
            return self.struct(kind, spec["fields"]).codec
        raise ValueError(f"{spec['name']}: unsupported type {kind!r}")


class MessageCodec:
    """One message (a request or response body) at one version: `cls`, `decode`, `encode`, `build`."""

    def __init__(self, name: str, version: int, kio_names: bool = False) -> None:
        schema = load_schema(name)
        if version not in _version_range(schema["validVersions"]):
            raise ValueError(f"{name} has no version {version}")
        compiler = _Compiler(schema, version, kio_names)
        self.name, self.version, self.flexible = name, version, compiler.flexible
        self.api_key: int = schema["apiKey"]
        self._root = compiler.struct(name, schema["fields"])
        self.cls = self._root.cls
        self.cls.__api_key__, self.cls.__type__ = self.api_key, schema["type"]

    def decode(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[Any, int]:
        """(message, position after it) read from buf[pos:]; ProtocolError on anything malformed."""
        values: list = []
        try:
            end = self._root.codec.read(memoryview(buf), pos, values)  # a view: slices copy nothing
        except ProtocolError as exc:
            raise ProtocolError(f"malformed {self.name} v{self.version}: {exc}") from None
        except (struct.error, ValueError, IndexError, OverflowError) as exc:
            raise ProtocolError(f"malformed {self.name} v{self.version}: {exc!r}") from None
        return values[0], end

    def encode_into(self, out: bytearray, data: Any) -> bytearray:
        """Append the body for `data` (a dict, or an object with the attributes) to `out`."""
        try:
            self._root.codec.write(out, data)
        except (struct.error, TypeError, AttributeError) as exc:
            raise ValueError(f"cannot encode {self.name} v{self.version}: {exc}") from exc
        return out

    def encode(self, data: Any) -> bytes:
        return bytes(self.encode_into(bytearray(), data))

    def build(self, data: Any) -> Any:
        """An instance of `cls` from a dict, as `protocol.build` makes kio entities."""
        return self._root.build(data)


@lru_cache(maxsize=None)
def message_codec(name: str, version: int, kio_names: bool = False) -> MessageCodec:
    """The codec of `name` (e.g. "LeaderAndIsrRequest") at `version`, compiled once; `kio_names`:
    fields named as kio names them (see `to_snake_case`)."""
    return MessageCodec(name, version, kio_names)
