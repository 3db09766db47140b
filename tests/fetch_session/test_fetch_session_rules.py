"""FetchMetadata's epochs and CachedPartition's rules: identity by topic id or name, names resolved
later, and which results an incremental response must carry (maybeUpdateResponseData)."""

from __future__ import annotations

import uuid

import pytest

from kbroker.errors import ErrorCode
from kbroker.fetch_session import (
    FINAL_EPOCH,
    INITIAL,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    LEGACY,
    ZERO_UUID,
    CachedPartition,
    FetchMetadata,
    PartitionRequest,
    PartitionResult,
    TopicIdPartition,
    next_epoch,
)


def test_next_epoch():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(1) == 2
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
    assert next_epoch(-5) == FINAL_EPOCH


def test_full_and_incremental():
    assert INITIAL.is_full and LEGACY.is_full
    assert (INITIAL.session_id, INITIAL.epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    assert (LEGACY.session_id, LEGACY.epoch) == (INVALID_SESSION_ID, FINAL_EPOCH)
    assert FetchMetadata(7, 0).is_full and FetchMetadata(7, -1).is_full
    assert not FetchMetadata(7, 1).is_full and not FetchMetadata(7, -2).is_full
    m = FetchMetadata.new_incremental(7)
    assert m == FetchMetadata(7, 1)
    assert m.next_incremental() == FetchMetadata(7, 2)
    assert m.next_close_existing() == FetchMetadata(7, FINAL_EPOCH)
    assert m.next_close_existing_attempt_new() == FetchMetadata(7, INITIAL_EPOCH)
    assert str(INITIAL) == "(sessionId=INVALID, epoch=INITIAL)"
    assert str(FetchMetadata(3, 4)) == "(sessionId=3, epoch=4)"


def cached(name, topic_id=ZERO_UUID, partition=0) -> CachedPartition:
    return CachedPartition(TopicIdPartition(topic_id, name, partition), PartitionRequest(0, 100))


def test_identity_by_topic_id_else_by_name():  # testCachedPartitionEqualsAndHashCode
    tid = uuid.uuid4()
    with_id_and_name, with_id_no_name = cached("topic", tid), cached(None, tid)
    assert with_id_and_name.key == with_id_no_name.key
    assert with_id_and_name.key != cached("topic", uuid.uuid4()).key
    assert with_id_and_name.key != cached("topic", ZERO_UUID).key
    assert cached("topic").key != cached("otherTopic").key
    assert cached("topic").key == cached("topic").key
    assert cached("topic", partition=0).key != cached("topic", partition=1).key


def test_maybe_resolve_unknown_name():  # testMaybeResolveUnknownName
    named, null1, null2 = cached("topic", uuid.uuid4()), cached(None, uuid.uuid4()), cached(None, uuid.uuid4())
    names = {named.topic_id: "foo", null1.topic_id: "bar"}
    for p in (named, null1, null2):
        p.maybe_resolve_unknown_name(names)
    assert (named.topic, null1.topic, null2.topic) == ("topic", "bar", None)


def test_request_params_round_trip():
    req = PartitionRequest(fetch_offset=5, max_bytes=10, log_start_offset=2, current_leader_epoch=3,
                           last_fetched_epoch=1)
    part = CachedPartition(TopicIdPartition(ZERO_UUID, "t", 0), req)
    assert part.req == req
    new = PartitionRequest(9, 11, 4, 5, 6)
    part.update_request_params(new)
    assert part.req == new


BASE = PartitionResult(high_watermark=10, last_stable_offset=8, log_start_offset=2)


def primed() -> CachedPartition:
    part = cached("t")
    assert part.maybe_update_response_data(BASE, update=True)  # a new partition is always sent
    assert not part.maybe_update_response_data(BASE, update=True)
    return part


@pytest.mark.parametrize("change", [
    {"records_size": 1},
    {"high_watermark": 11},
    {"log_start_offset": 3},
    {"last_stable_offset": 9},  # kbroker's addition to Kafka's rule
    {"preferred_read_replica": 2},
    {"error_code": ErrorCode.not_leader_or_follower},
    {"diverging_epoch": 0},
])
def test_what_goes_into_an_incremental_response(change):
    part = primed()
    result = PartitionResult(**{"high_watermark": 10, "last_stable_offset": 8, "log_start_offset": 2, **change})
    assert part.maybe_update_response_data(result, update=False)
    assert part.maybe_update_response_data(result, update=False)  # nothing remembered without update
    assert part.maybe_update_response_data(result, update=True)


def test_events_are_sent_every_time_state_only_when_changed():
    part = primed()
    moved = PartitionResult(high_watermark=12, last_stable_offset=12, log_start_offset=3)
    assert part.maybe_update_response_data(moved, update=True)
    assert not part.maybe_update_response_data(moved, update=True)
    for event in ({"records_size": 5}, {"preferred_read_replica": 1}, {"diverging_epoch": 4}):
        r = PartitionResult(high_watermark=12, last_stable_offset=12, log_start_offset=3, **event)
        assert part.maybe_update_response_data(r, update=True)
        assert part.maybe_update_response_data(r, update=True)


def test_after_an_error_the_partition_is_sent_again_once_it_clears():
    part = primed()
    error = PartitionResult(error_code=ErrorCode.not_leader_or_follower, high_watermark=10,
                            last_stable_offset=8, log_start_offset=2)
    assert part.maybe_update_response_data(error, update=True)
    assert part.high_watermark == -1
    assert part.maybe_update_response_data(BASE, update=True)  # the error went away: sent again
    assert not part.maybe_update_response_data(BASE, update=True)
