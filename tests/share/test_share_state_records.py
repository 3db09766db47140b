"""The `__share_group_state` snapshot records: keys and values round-trip, Kafka's coordinator key
picks the partition, and damaged bytes are refused (ValueError / None), never trusted."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.share.partition_types import PersisterStateBatch, ShareSnapshot
from kbroker.share.state_records import ShareStateKey, ShareStateValue, decode_key, decode_value, encode_key, encode_value

keys = st.builds(ShareStateKey, st.text(max_size=20), st.builds(lambda i: uuid.UUID(int=i), st.integers(0, 2**128 - 1)),
                 st.integers(0, 2**31 - 1))
batches = st.lists(st.builds(PersisterStateBatch, st.integers(0, 2**62), st.integers(0, 2**62),
                             st.sampled_from([0, 2, 4]), st.integers(0, 2**15 - 1)), max_size=20)
values = st.builds(ShareStateValue, st.builds(lambda s, b: ShareSnapshot(s, tuple(b)), st.integers(0, 2**62), batches),
                   st.integers(0, 2**31 - 1), st.integers(-1, 2**31 - 1), st.integers(0, 2**16 - 1))


@settings(max_examples=200, deadline=None)
@given(key=keys, value=values)
def test_round_trip(key, value):
    assert decode_key(encode_key(key)) == key
    assert decode_value(encode_value(value)) == value


@settings(max_examples=200, deadline=None)
@given(value=values, cut=st.integers(1, 40))
def test_truncated_values_are_refused(value, cut):
    data = encode_value(value)
    with pytest.raises(ValueError):
        decode_value(data[:max(len(data) - cut, 0)])


def test_the_coordinator_key_is_kafkas():
    key = ShareStateKey("g", uuid.UUID(bytes=bytes(range(16))), 3)
    assert key.coordinator_key() == "g:AAECAwQFBgcICQoLDA0ODw:3"  # Uuid.toString(): URL-safe base64
    assert decode_key(b"\x00\x01" + encode_key(key)[2:]) is None  # an update key is not a snapshot
    assert decode_key(b"\x00") is None
