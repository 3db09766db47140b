import gzip
import struct
import zlib

import pytest

from kbroker.errors import CorruptRecordError
from kbroker.wire.legacy import (
    is_legacy_message_set,
    up_convert_message_set,
)
from kbroker.wire.produce_request import decode_produce_request
from kbroker.wire.records import decode_records, validate_batches


def message(magic, key, value, ts=None, attributes=0, offset=0):
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", ts) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def test_plain_v1_and_v0_messages_become_one_v2_batch():
    legacy = message(1, b"k", b"v1", ts=1234) + message(1, None, b"v2", ts=1235, offset=1)
    assert is_legacy_message_set(legacy)
    batch = up_convert_message_set(legacy)
    [(pos, header)] = validate_batches(batch)
    records = decode_records(batch, pos, header)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [(0, 1234, b"k", b"v1"), (1, 1235, None, b"v2")]
    v0 = up_convert_message_set(message(0, None, b"old"))
    [(pos, header)] = validate_batches(v0)
    assert [(r.timestamp, r.value) for r in decode_records(v0, pos, header)] == [(-1, b"old")]


def test_compressed_wrapper_keeps_its_codec():
    inner = message(1, b"a", b"x", ts=10) + message(1, b"b", b"y", ts=11, offset=1)
    wrapper = message(1, None, gzip.compress(inner), ts=11, attributes=1)
    batch = up_convert_message_set(wrapper)
    [(pos, header)] = validate_batches(batch)
    assert header.compression == 1
    assert [(r.key, r.value) for r in decode_records(batch, pos, header)] == [(b"a", b"x"), (b"b", b"y")]


@pytest.mark.parametrize("damage", ["crc", "truncate", "size"])
def test_damaged_legacy_sets_are_corrupt(damage):
    data = bytearray(message(1, b"k", b"v", ts=1))
    if damage == "crc":
        data[-1] ^= 0xFF
    elif damage == "truncate":
        data = data[:-3]
    else:
        data[8:12] = struct.pack(">i", 10_000)
    with pytest.raises(CorruptRecordError):
        up_convert_message_set(bytes(data))


def test_produce_v2_request_decodes():
    records = message(1, None, b"v", ts=1)
    body = struct.pack(">hii", -1, 1000, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 3)
    body += struct.pack(">i", len(records)) + records
    request = decode_produce_request(2, bytearray(body), 0)
    assert (request.transactional_id, request.acks, request.timeout, request.topic_data[0].name) == (None, -1, 1000, "t")
    assert request.topic_data[0].partition_data[0].records == records
