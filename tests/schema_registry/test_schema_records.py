"""Tests for kbroker.schema_registry.records (named test_schema_records.py: tests/wire/test_records.py
already holds the basename, and the suite has no __init__.py files): Confluent's `_schemas` key and value JSON, byte for
byte (the examples of Karapace's key_format tests and Confluent's Jackson classes), round trips,
and garbage."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbroker.schema_registry.records import (
    AVRO,
    JSON,
    PROTOBUF,
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    NoopKey,
    OtherKey,
    RecordError,
    SchemaKey,
    SchemaReference,
    SchemaValue,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)

# --------------------------------------------------------------------------- keys: exact bytes

# Karapace's tests/unit/test_key_format.py, "canonical" (= what Confluent's registry writes)
CANONICAL_KEYS = [
    (SchemaKey("test", 1), b'{"keytype":"SCHEMA","subject":"test","version":1,"magic":1}'),
    (ConfigKey("test"), b'{"keytype":"CONFIG","subject":"test","magic":0}'),
    (ConfigKey(None), b'{"keytype":"CONFIG","subject":null,"magic":0}'),
    (DeleteSubjectKey("test"), b'{"keytype":"DELETE_SUBJECT","subject":"test","magic":0}'),
    (NoopKey(), b'{"keytype":"NOOP","magic":0}'),
    # Confluent's ModeKey: @JsonPropertyOrder({"keytype", "subject", "magic"}), magic 0
    (ModeKey("test"), b'{"keytype":"MODE","subject":"test","magic":0}'),
    (ModeKey(None), b'{"keytype":"MODE","subject":null,"magic":0}'),
]


@pytest.mark.parametrize(("key", "expected"), CANONICAL_KEYS)
def test_key_bytes_are_confluents(key, expected):
    assert encode_key(key) == expected
    assert decode_key(expected) == key


# Karapace's deprecated order (what older Karapace wrote): read, then re-encoded canonically
DEPRECATED_KEYS = [
    (b'{"subject":"test","version":1,"magic":1,"keytype":"SCHEMA"}', SchemaKey("test", 1)),
    (b'{"subject":"test","magic":0,"keytype":"CONFIG"}', ConfigKey("test")),
    (b'{"subject":null,"magic":0,"keytype":"CONFIG"}', ConfigKey(None)),
    (b'{"subject":"test","magic":0,"keytype":"DELETE_SUBJECT"}', DeleteSubjectKey("test")),
    (b'{"magic":0,"keytype":"NOOP"}', NoopKey()),
    (b'{ "keytype" : "SCHEMA", "subject" : "test", "version" : 1, "magic" : 1 }', SchemaKey("test", 1)),
]


@pytest.mark.parametrize(("raw", "key"), DEPRECATED_KEYS)
def test_other_key_orders_decode_and_reencode_canonically(raw, key):
    assert decode_key(raw) == key
    assert encode_key(decode_key(raw)) == dict(CANONICAL_KEYS)[key]


def test_config_key_without_subject_field_is_global():
    assert decode_key(b'{"keytype":"CONFIG","magic":0}') == ConfigKey(None)


def test_strings_are_written_as_jackson_writes_them():
    # raw UTF-8, short escapes, upper-case \u00XX for other control characters, '/' not escaped
    key = SchemaKey('sü/"\\\n\t\x01\x1f€😀', 7)
    raw = encode_key(key)
    assert raw == ('{"keytype":"SCHEMA","subject":"sü/\\"\\\\\\n\\t\\u0001\\u001F€😀","version":7,"magic":1}'
                   .encode())
    assert decode_key(raw) == key
    assert json.loads(raw) == {"keytype": "SCHEMA", "subject": key.subject, "version": 7, "magic": 1}


def test_unknown_key_types_are_kept_for_skipping():
    raw = b'{"keytype":"CLEAR_SUBJECT","subject":"x","magic":0}'
    key = decode_key(raw)
    assert key == OtherKey("CLEAR_SUBJECT", raw)
    assert encode_key(key) == raw
    assert decode_value(key, b'{"subject":"x"}') is None


# --------------------------------------------------------------------------- values

def test_avro_schema_value_leaves_out_schema_type_and_empty_references():
    value = SchemaValue("test-value", 1, 1, '"string"')
    raw = encode_value(value)
    assert raw == b'{"subject":"test-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false}'
    assert decode_value(SchemaKey("test-value", 1), raw) == value


def test_schema_value_with_type_and_references_in_confluents_order():
    value = SchemaValue("orders-value", 3, 12, 'syntax = "proto3";', PROTOBUF,
                        (SchemaReference("customer.proto", "customer", 2),), deleted=True)
    raw = encode_value(value)
    assert raw == (b'{"subject":"orders-value","version":3,"id":12,"schemaType":"PROTOBUF",'
                   b'"references":[{"name":"customer.proto","subject":"customer","version":2}],'
                   b'"schema":"syntax = \\"proto3\\";","deleted":true}')
    assert decode_value(SchemaKey("orders-value", 3), raw) == value


def test_schema_value_as_newer_confluent_writes_it():
    # explicit "schemaType":"AVRO", an md5, metadata and a timestamp: extra fields are ignored
    raw = (b'{"subject":"s","version":2,"id":5,"md5":"q83vEjRWeJCrze8SNFZ4kA==","schemaType":"AVRO",'
           b'"metadata":{"properties":{"owner":"me"}},"schema":"\\"int\\"","deleted":false,"ts":1700000000000}')
    assert decode_value(SchemaKey("s", 2), raw) == SchemaValue("s", 2, 5, '"int"', AVRO)


def test_schema_value_without_deleted_field_is_live():
    raw = b'{"subject":"s","version":1,"id":1,"schema":"{}","schemaType":"JSON"}'
    assert decode_value(SchemaKey("s", 1), raw) == SchemaValue("s", 1, 1, "{}", JSON)


def test_config_mode_and_delete_subject_values():
    assert encode_value(ConfigValue("BACKWARD")) == b'{"compatibilityLevel":"BACKWARD"}'
    assert encode_value(ConfigValue("FULL", "s")) == b'{"subject":"s","compatibilityLevel":"FULL"}'
    assert encode_value(ModeValue("READONLY")) == b'{"mode":"READONLY"}'
    assert encode_value(ModeValue("IMPORT", "s")) == b'{"subject":"s","mode":"IMPORT"}'
    assert encode_value(DeleteSubjectValue("s", 4)) == b'{"subject":"s","version":4}'
    assert decode_value(ConfigKey(None), b'{"compatibilityLevel":"NONE"}') == ConfigValue("NONE")
    assert decode_value(ConfigKey("s"), b'{"subject":"s","compatibilityLevel":"FULL"}') == ConfigValue("FULL", "s")
    assert decode_value(ModeKey(None), b'{"mode":"READWRITE"}') == ModeValue("READWRITE")
    assert decode_value(DeleteSubjectKey("s"), b'{"subject":"s","version":4}') == DeleteSubjectValue("s", 4)
    # Karapace writes -1 as the watermark of a subject without live versions
    assert decode_value(DeleteSubjectKey("s"), b'{"subject":"s","version":-1}') == DeleteSubjectValue("s", -1)


def test_tombstones_and_noop():
    assert encode_value(None) is None
    for key, _ in CANONICAL_KEYS:
        assert decode_value(key, None) is None
    assert decode_value(NoopKey(), b"anything") is None
    assert encode_record(SchemaKey("s", 1), None) == (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
                                                      None)
    assert decode_record(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', None) == (SchemaKey("s", 1),
                                                                                                None)


# --------------------------------------------------------------------------- garbage

BAD_KEYS = [
    b"", b"\xff\xfe", b"not json", b"[]", b"1", b"null", b'{"magic":0}',
    b'{"keytype":1,"magic":0}',
    b'{"keytype":"SCHEMA","subject":"s","version":0,"magic":1}',
    b'{"keytype":"SCHEMA","subject":"s","version":true,"magic":1}',
    b'{"keytype":"SCHEMA","subject":"s","version":2147483648,"magic":1}',
    b'{"keytype":"SCHEMA","subject":"s","version":"1","magic":1}',
    b'{"keytype":"SCHEMA","subject":null,"version":1,"magic":1}',
    b'{"keytype":"SCHEMA","subject":"s","version":1}',
    b'{"keytype":"CONFIG","subject":5,"magic":0}',
    b'{"keytype":"DELETE_SUBJECT","magic":0}',
    b'{"keytype":"NOOP","magic":-1}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"keytype":"SCHEMA","subject":"s","version":' + b"9" * 5000 + b',"magic":1}',
]


@pytest.mark.parametrize("raw", BAD_KEYS)
def test_garbage_keys_raise_record_error(raw):
    with pytest.raises(RecordError):
        decode_key(raw)


BAD_SCHEMA_VALUES = [
    b"", b"nope", b"[]", b"{}",
    b'{"subject":"s","version":1,"id":1}',
    b'{"subject":"s","version":1,"id":-1,"schema":"x"}',
    b'{"subject":"s","version":1,"id":1,"schema":5}',
    b'{"subject":"s","version":1,"id":1,"schema":"x","schemaType":"XML"}',
    b'{"subject":"s","version":1,"id":1,"schema":"x","deleted":"yes"}',
    b'{"subject":"s","version":1,"id":1,"schema":"x","references":{}}',
    b'{"subject":"s","version":1,"id":1,"schema":"x","references":[1]}',
    b'{"subject":"s","version":1,"id":1,"schema":"x","references":[{"name":"n","subject":"t"}]}',
]


@pytest.mark.parametrize("raw", BAD_SCHEMA_VALUES)
def test_garbage_schema_values_raise_record_error(raw):
    with pytest.raises(RecordError):
        decode_value(SchemaKey("s", 1), raw)


@pytest.mark.parametrize(("key", "raw"), [
    (ConfigKey(None), b'{"compatibilityLevel":1}'),
    (ConfigKey(None), b"{}"),
    (ModeKey("s"), b'{"subject":"s"}'),
    (DeleteSubjectKey("s"), b'{"subject":"s"}'),
    (DeleteSubjectKey("s"), b'{"version":1}'),
])
def test_garbage_other_values_raise_record_error(key, raw):
    with pytest.raises(RecordError):
        decode_value(key, raw)


def test_lone_surrogate_cannot_be_encoded():
    with pytest.raises(RecordError):
        encode_key(SchemaKey("\ud800", 1))


def test_error_messages_are_bounded():
    with pytest.raises(RecordError) as info:
        decode_value(SchemaKey("s", 1), b'{"subject":"s","version":1,"id":1,"schema":"x","schemaType":"'
                     + b"X" * 100_000 + b'"}')
    assert len(str(info.value)) <= 300


# --------------------------------------------------------------------------- round trips

subjects = st.text(max_size=30)
versions = st.integers(1, 2**31 - 1)
ids = st.integers(0, 2**31 - 1)
references = st.lists(st.builds(SchemaReference, st.text(max_size=20), subjects, versions), max_size=3).map(tuple)
schema_values = st.builds(SchemaValue, subjects, versions, ids, st.text(max_size=200),
                          st.sampled_from([AVRO, JSON, PROTOBUF]), references, st.booleans())
keys = st.one_of(
    st.builds(SchemaKey, subjects, versions),
    st.builds(ConfigKey, st.none() | subjects),
    st.builds(ModeKey, st.none() | subjects),
    st.builds(DeleteSubjectKey, subjects),
    st.just(NoopKey()),
)


def _no_surrogates(s: str) -> bool:
    return not any("\ud800" <= c <= "\udfff" for c in s)


@given(keys)
def test_key_round_trip_and_field_order(key):
    if not _no_surrogates(getattr(key, "subject", None) or ""):
        with pytest.raises(RecordError):
            encode_key(key)
        return
    raw = encode_key(key)
    assert decode_key(raw) == key
    fields = list(json.loads(raw))
    assert fields[0] == "keytype" and fields[-1] == "magic"
    assert raw == encode_key(decode_key(raw))


@given(schema_values)
def test_schema_value_round_trip(value):
    texts = [value.subject, value.schema] + [r.name for r in value.references] + [r.subject for r in value.references]
    if not all(map(_no_surrogates, texts)):
        return
    raw = encode_value(value)
    assert decode_value(SchemaKey(value.subject, value.version), raw) == value
    # standard JSON, the same data a Jackson or Python reader sees
    obj = json.loads(raw)
    assert obj["schema"] == value.schema and obj["deleted"] is value.deleted
    assert ("schemaType" in obj) == (value.schema_type != AVRO)
    assert list(obj)[:3] == ["subject", "version", "id"] and list(obj)[-2:] == ["schema", "deleted"]


@given(st.sampled_from(["NONE", "BACKWARD", "FULL_TRANSITIVE"]), st.none() | subjects.filter(_no_surrogates))
def test_config_value_round_trip(level, subject):
    assert decode_value(ConfigKey(subject), encode_value(ConfigValue(level, subject))) == ConfigValue(level, subject)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_decoder(raw):
    try:
        key = decode_key(raw)
    except RecordError:
        return
    try:
        decode_value(key, raw)
    except RecordError:
        pass
