"""kbroker's FetchSessionHandler (the followers' side of KIP-227), after the cases of Kafka's
FetchSessionHandlerTest: what full and incremental requests carry, and what each kind of response
makes of the next request."""

from __future__ import annotations

from kbroker.errors import ErrorCode
from kbroker.fetch_session import (
    INITIAL,
    ZERO_UUID,
    FetchMetadata,
    FetchSessionHandler,
    PartitionRequest,
    TopicIdPartition,
)

FOO0, FOO1, BAR0 = (TopicIdPartition(ZERO_UUID, t, p) for t, p in (("foo", 0), ("foo", 1), ("bar", 0)))


def req(offset: int, log_start: int = 0, max_bytes: int = 1000, epoch: int = 5) -> PartitionRequest:
    return PartitionRequest(offset, max_bytes, log_start, epoch)


def test_without_a_session_every_request_is_full_and_lists_everything():
    handler = FetchSessionHandler()
    data = handler.build([(FOO0, req(0)), (FOO1, req(10))])
    assert data.is_full and data.metadata == INITIAL
    assert data.to_send == [(FOO0, req(0)), (FOO1, req(10))] and data.to_forget == []
    assert handler.handle_response(ErrorCode.none, 0, [FOO0, FOO1])  # sessionless: usable
    assert handler.next_metadata == INITIAL
    assert handler.build([(FOO0, req(1))]).to_send == [(FOO0, req(1))]


def test_incremental_requests_send_only_what_changed_and_forget_what_went():
    handler = FetchSessionHandler()
    handler.build([(FOO0, req(0)), (FOO1, req(10))])
    assert handler.handle_response(ErrorCode.none, 123, [FOO0, FOO1])
    assert handler.next_metadata == FetchMetadata(123, 1)

    nothing_changed = handler.build([(FOO0, req(0)), (FOO1, req(10))])
    assert not nothing_changed.is_full and nothing_changed.metadata == FetchMetadata(123, 1)
    assert nothing_changed.to_send == [] and nothing_changed.to_forget == []
    assert handler.handle_response(ErrorCode.none, 123, [])  # no news
    assert handler.next_metadata == FetchMetadata(123, 2)

    moved = handler.build([(FOO0, req(5)), (FOO1, req(10, epoch=6)), (BAR0, req(0))])
    assert moved.to_send == [(FOO0, req(5)), (FOO1, req(10, epoch=6)), (BAR0, req(0))]
    assert handler.handle_response(ErrorCode.none, 123, [FOO0])
    dropped = handler.build([(BAR0, req(0))])
    assert dropped.metadata == FetchMetadata(123, 3)
    assert dropped.to_send == [] and dropped.to_forget == [FOO0, FOO1]


def test_a_session_error_makes_the_next_request_full():
    handler = FetchSessionHandler()
    handler.build([(FOO0, req(0))])
    handler.handle_response(ErrorCode.none, 7, [FOO0])
    handler.build([(FOO0, req(0))])
    assert not handler.handle_response(ErrorCode.invalid_fetch_session_epoch, 0, [])
    assert handler.next_metadata == FetchMetadata(7, 0)  # closes session 7, asks for a new one
    again = handler.build([(FOO0, req(3))])
    assert again.is_full and again.to_send == [(FOO0, req(3))]
    assert not handler.handle_response(ErrorCode.fetch_session_id_not_found, 0, [])
    assert handler.next_metadata == INITIAL


def test_partitions_the_request_did_not_name_are_not_used():
    handler = FetchSessionHandler()
    handler.build([(FOO0, req(0))])
    assert not handler.handle_response(ErrorCode.none, 9, [FOO0, BAR0])  # full: extra partition
    assert handler.next_metadata == INITIAL
    handler.build([(FOO0, req(0))])
    assert handler.handle_response(ErrorCode.none, 9, [FOO0])
    handler.build([(FOO0, req(0))])
    assert not handler.handle_response(ErrorCode.none, 9, [BAR0])  # incremental: not in the session
    assert handler.next_metadata == FetchMetadata(9, 0)


def test_the_broker_ending_the_session_and_a_throttled_full_answer():
    handler = FetchSessionHandler()
    handler.build([(FOO0, req(0))])
    assert not handler.handle_response(ErrorCode.none, 0, [], throttle_time_ms=100)  # KIP-219's empty answer
    assert handler.next_metadata == INITIAL
    handler.build([(FOO0, req(0))])
    handler.handle_response(ErrorCode.none, 11, [FOO0])
    handler.build([(FOO0, req(1))])
    assert handler.handle_response(ErrorCode.none, 0, [FOO0])  # session id 0: the broker closed it
    assert handler.next_metadata == INITIAL


def test_a_failed_request_closes_the_session_and_asks_for_a_new_one():
    handler = FetchSessionHandler()
    handler.build([(FOO0, req(0))])
    handler.handle_response(ErrorCode.none, 42, [FOO0])
    handler.build([(FOO0, req(1))])
    handler.handle_error()
    data = handler.build([(FOO0, req(1))])
    assert data.metadata == FetchMetadata(42, 0) and data.to_send == [(FOO0, req(1))]
