"""ShareFetch (78) and ShareAcknowledge (79) v1-2 through the dispatch table on a real single-node
broker: records acquired under a lock with their delivery count, ACCEPT / RELEASE / REJECT, another
member kept off records already acquired, share sessions and their epochs, and bad acknowledgements
refused with Kafka's codes, the state left as it was."""

from __future__ import annotations

import functools
import time

import pytest
import trio
from brokerkit import ask, start
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.api.dispatch import handle_frame
from kbroker.errors import ErrorCode as E
from kbroker.log.topic_partition import TopicPartition
from kbroker.metrics.collector import build_registry
from kbroker.metrics.stats import BrokerStats
from prometheus_client import generate_latest
from kbroker.wire.fetch_response import frame_bytes
from kbroker.wire.protocol import decode_response, encode_request
from kbroker.wire.records import Record, build_batch, decode_records, iter_batch_headers

PRODUCE, SHARE_HEARTBEAT, SHARE_FETCH, SHARE_ACK = 0, 76, 78, 79
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture
def broker(tmp_path):
    b = start(tmp_path, **{"group.coordinator.rebalance.protocols": "classic,consumer,share"})
    trio.run(functools.partial(b.create_topic, "t", num_partitions=1))
    yield b
    b.shutdown()


def produce(broker, values):
    batch = build_batch([Record(i, 1_000, None, v, []) for i, v in enumerate(values)])
    body = {"transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
    assert ask(broker, PRODUCE, 9, body).responses[0].partition_responses[0].error_code == E.none


def join(broker, member):
    r = ask(broker, SHARE_HEARTBEAT, 1, {"group_id": "sg", "member_id": member, "member_epoch": 0, "rack_id": None,
                                         "subscribed_topic_names": ["t"]})
    assert r.error_code == E.none


def share_fetch(broker, member, epoch, acks=(), max_records=100, version=2, forget=False, wait_ms=0, mode=0):
    topic_id = broker.metadata.topic("t").topic_id
    batches = [{"first_offset": f, "last_offset": l, "acknowledge_types": list(t)} for f, l, t in acks]
    body = {"group_id": "sg", "member_id": member, "share_session_epoch": epoch, "max_wait": wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
            "topics": [] if forget else [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": batches}]}],
            "forgotten_topics_data": []}
    if version >= 2:
        body.update(share_acquire_mode=mode, is_renew_ack=False)
    return ask(broker, SHARE_FETCH, version, body)


def acknowledge(broker, member, epoch, acks):
    topic_id = broker.metadata.topic("t").topic_id
    return ask(broker, SHARE_ACK, 1, {"group_id": "sg", "member_id": member, "share_session_epoch": epoch, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": l, "acknowledge_types": list(t)} for f, l, t in acks]}]}]})


def acquired(response):
    """(first, last, delivery count) ranges and the values of the records in them."""
    ranges, values = [], []
    for topic in response.responses:
        for p in topic.partitions:
            assert p.error_code == E.none, p
            ranges += [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
            data = bytes(p.records)
            for pos, header in iter_batch_headers(data):
                values += [(r.offset, r.value) for r in decode_records(data, pos, header)]
    offsets = {o for f, l, _c in ranges for o in range(f, l + 1)}
    return ranges, [v for o, v in sorted(values) if o in offsets]


def test_batch_optimized_takes_whole_batches_record_limit_does_not(broker):
    """ShareAcquireMode (KIP-1206): BATCH_OPTIMIZED (v1's only mode, v2's default) stretches
    max_records to the end of the log batch it ends in; RECORD_LIMIT stops at max_records."""
    join(broker, "a")
    join(broker, "b")
    share_fetch(broker, "a", 0)
    share_fetch(broker, "b", 0)
    produce(broker, [b"x%d" % i for i in range(6)])  # one batch, offsets 0-5
    produce(broker, [b"y%d" % i for i in range(4)])  # another, 6-9
    assert acquired(share_fetch(broker, "a", 1, max_records=2, version=1))[0] == [(0, 5, 1)]
    assert acquired(share_fetch(broker, "b", 1, max_records=2, mode=1))[0] == [(6, 7, 1)]
    assert acquired(share_fetch(broker, "b", 2, max_records=1, mode=0))[0] == [(8, 9, 1)]


def test_acquire_accept_release_reject(broker):
    join(broker, "a")
    join(broker, "b")
    first = share_fetch(broker, "a", 0)  # latest: the share-partition starts at the high watermark (0)
    assert first.error_code == E.none and first.acquisition_lock_timeout.total_seconds() == 30
    produce(broker, [b"r0", b"r1", b"r2", b"r3"])
    r = share_fetch(broker, "a", 1)
    assert acquired(r) == ([(0, 3, 1)], [b"r0", b"r1", b"r2", b"r3"])
    assert acquired(share_fetch(broker, "b", 0)) == ([], [])  # b gets nothing: all four are a's
    ack = acknowledge(broker, "a", 2, [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 3, [REJECT])])
    assert ack.error_code == E.none and ack.responses[0].partitions[0].error_code == E.none
    again = share_fetch(broker, "b", 1)
    assert acquired(again) == ([(1, 1, 2)], [b"r1"])  # released: delivered again, count 2
    # piggy-backed on the next fetch: b accepts it; nothing is left to deliver
    r = share_fetch(broker, "b", 2, acks=[(1, 1, [ACCEPT])])
    part = r.responses[0].partitions[0]
    assert part.acknowledge_error_code == E.none and list(part.acquired_records) == []
    state = broker.share_manager.partitions[("sg", TopicPartition("t", 0))]
    assert state.start_offset == 4  # every record delivery-complete: accepted or archived
    # what the metrics endpoint shows of it
    registry = build_registry(broker, BrokerStats(), lambda: 0, process=False)
    text = generate_latest(registry).decode()
    for event, n in (("acquired", 5), ("accepted", 2), ("released", 1), ("rejected", 2), ("archived", 2)):
        assert f'kbroker_share_group_records_total{{event="{event}",group="sg",partition="0",topic="t"}} {n}.0' \
            in text, event
    assert 'kbroker_share_group_lag{group="sg",partition="0",topic="t"} 0.0' in text


def test_bad_acknowledgements_change_nothing(broker):
    join(broker, "a")
    join(broker, "b")
    share_fetch(broker, "a", 0)
    produce(broker, [b"x", b"y"])
    assert acquired(share_fetch(broker, "a", 1))[0] == [(0, 1, 1)]
    share_fetch(broker, "b", 0)
    not_mine = acknowledge(broker, "b", 1, [(0, 1, [ACCEPT])])
    assert not_mine.responses[0].partitions[0].error_code == E.invalid_record_state
    beyond = acknowledge(broker, "a", 2, [(5, 9, [ACCEPT])])
    assert beyond.responses[0].partitions[0].error_code == E.invalid_record_state
    overlapping = acknowledge(broker, "a", 3, [(0, 1, [ACCEPT]), (1, 1, [ACCEPT])])
    assert overlapping.responses[0].partitions[0].error_code == E.invalid_request
    mismatched = acknowledge(broker, "a", 4, [(0, 1, [ACCEPT, ACCEPT, ACCEPT])])
    assert mismatched.responses[0].partitions[0].error_code == E.invalid_request
    # all refused: both records are still a's, and a accepts them now
    fine = acknowledge(broker, "a", 5, [(0, 1, [ACCEPT])])
    assert fine.responses[0].partitions[0].error_code == E.none
    duplicate = acknowledge(broker, "a", 6, [(0, 1, [ACCEPT])])  # acknowledged already: below the start
    assert duplicate.responses[0].partitions[0].error_code == E.none


def test_share_session_epochs(broker):
    join(broker, "a")
    assert share_fetch(broker, "a", 3).error_code == E.share_session_not_found
    assert share_fetch(broker, "a", 0, acks=[(0, 0, [ACCEPT])]).error_code == E.invalid_request
    assert share_fetch(broker, "a", 0).error_code == E.none
    assert share_fetch(broker, "a", 5).error_code == E.invalid_share_session_epoch
    assert acknowledge(broker, "a", 0, []).error_code == E.invalid_share_session_epoch
    assert share_fetch(broker, "a", 1, version=1).error_code == E.none
    produce(broker, [b"z"])
    assert acquired(share_fetch(broker, "a", 2))[0] == [(0, 0, 1)]
    closed = acknowledge(broker, "a", -1, [])  # closing the session gives its records back
    assert closed.error_code == E.none
    join(broker, "b")
    assert acquired(share_fetch(broker, "b", 0))[0] == [(0, 0, 2)]  # an opening fetch fetches too


def test_a_fetch_waits_for_records_up_to_max_wait(broker):
    """An empty ShareFetch waits (MaxWaitMs 5 s) and is answered as soon as records are produced."""
    join(broker, "a")
    share_fetch(broker, "a", 0)
    topic_id = broker.metadata.topic("t").topic_id
    fetch_frame = encode_request(SHARE_FETCH, 2, 9, "test", {
        "group_id": "sg", "member_id": "a", "share_session_epoch": 1, "max_wait": 5000, "min_bytes": 1,
        "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "share_acquire_mode": 0,
        "is_renew_ack": False, "forgotten_topics_data": [],
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]})
    produce_frame = encode_request(PRODUCE, 9, 10, "test", {
        "transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [{"name": "t", "partition_data": [
            {"index": 0, "records": build_batch([Record(0, 1_000, None, b"late", [])])}]}]})
    out = {}

    async def scenario():
        async def fetch():
            started = trio.current_time()
            response = frame_bytes(await handle_frame(broker, bytearray(fetch_frame[4:])))
            out["waited"] = trio.current_time() - started
            out["response"] = decode_response(SHARE_FETCH, 2, response[4:])[1]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch)
            await trio.sleep(0.3)
            await handle_frame(broker, bytearray(produce_frame[4:]))

    trio.run(scenario)
    assert acquired(out["response"]) == ([(0, 0, 1)], [b"late"])
    assert 0.25 <= out["waited"] < 3  # woken by the append, not at MaxWaitMs


ack_batches = st.lists(st.tuples(st.integers(-5, 2**40), st.integers(-5, 2**40),
                                 st.lists(st.integers(-3, 7), max_size=4)), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=ack_batches)
def test_any_acknowledgement_gets_a_kafka_code_and_leaves_the_state_whole(broker, batches):
    """Out-of-range, negative, unordered, overlapping offsets and unknown types: a code, never a crash;
    and what a refused request did not change, a good one can still acknowledge."""
    manager = broker.share_manager
    tp = TopicPartition("t", 0)
    if ("sg", tp) not in manager.partitions:
        join(broker, "a")
        share_fetch(broker, "a", 0)
        produce(broker, [b"p", b"q"])
        assert acquired(share_fetch(broker, "a", 1))[0] == [(0, 1, 1)]
        fuzz.epoch = 2
    before = manager.partitions[("sg", tp)]
    answer = acknowledge(broker, "a", fuzz.epoch, batches)
    fuzz.epoch += 1
    code = answer.responses[0].partitions[0].error_code if answer.responses else E.none
    assert answer.error_code == E.none
    assert code in (E.none, E.invalid_request, E.invalid_record_state)
    if code != E.none:
        assert manager.partitions[("sg", tp)] is before  # refused: untouched


class fuzz:  # the session epoch carried across hypothesis examples on one broker
    epoch = 2


def test_a_restarted_broker_keeps_what_was_acknowledged(tmp_path):
    """State in __share_group_state: after a restart, accepted and rejected records are not delivered
    again, the released and the never-acknowledged ones are, with their delivery counts."""
    overrides = {"group.coordinator.rebalance.protocols": "classic,consumer,share"}
    b = start(tmp_path, **overrides)
    trio.run(functools.partial(b.create_topic, "t", num_partitions=1))
    join(b, "a")
    share_fetch(b, "a", 0)
    produce(b, [b"r0", b"r1", b"r2", b"r3", b"r4"])
    assert acquired(share_fetch(b, "a", 1))[0] == [(0, 4, 1)]
    acknowledge(b, "a", 2, [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [REJECT])])  # 3 and 4 still a's
    b.shutdown()
    b = start(tmp_path, **overrides)
    try:
        assert "__share_group_state" in b.metadata.topics()
        join(b, "z")
        ranges, values = acquired(share_fetch(b, "z", 0))
        assert values == [b"r1", b"r3", b"r4"]  # not r0 (accepted) nor r2 (rejected)
        assert {(o, n) for first, last, n in ranges for o in range(first, last + 1)} == {(1, 2), (3, 2), (4, 2)}
    finally:
        b.shutdown()


def test_redelivery_backoff_is_a_group_config(broker):
    """kbroker's share.redelivery.backoff.ms: a released record is held back that long before it is
    available again (the visibility timeout of other queues)."""
    altered = ask(broker, 44, 1, {"resources": [{"resource_type": 32, "resource_name": "sg", "configs": [
        {"name": "share.redelivery.backoff.ms", "config_operation": 0, "value": "1500"}]}], "validate_only": False})
    assert altered.responses[0].error_code == E.none
    join(broker, "a")
    share_fetch(broker, "a", 0)
    produce(broker, [b"slow"])
    assert acquired(share_fetch(broker, "a", 1))[0] == [(0, 0, 1)]
    released_at = time.monotonic()
    assert acknowledge(broker, "a", 2, [(0, 0, [RELEASE])]).responses[0].partitions[0].error_code == E.none
    assert acquired(share_fetch(broker, "a", 3))[0] == []  # held back
    while time.monotonic() - released_at < 1.6:
        time.sleep(0.05)
    assert acquired(share_fetch(broker, "a", 4))[0] == [(0, 0, 2)]


def _dead_letters(broker, topic):
    """(value, headers) of every record in `topic`'s partition 0, read from its log."""
    out = []
    read = broker.replica_manager.read_partition(TopicPartition(topic, 0), 0, 1 << 20, False, True)
    data = b"".join(r.read() for r in read.records)
    for pos, header in iter_batch_headers(data):
        out += [(r.value, dict(r.headers)) for r in decode_records(data, pos, header)]
    return out


def test_rejected_and_exhausted_records_go_to_the_dead_letter_topic(tmp_path):
    b = start(tmp_path, **{"group.coordinator.rebalance.protocols": "classic,consumer,share",
                           "group.share.delivery.count.limit": "2"})
    try:
        trio.run(functools.partial(b.create_topic, "t", num_partitions=1))
        trio.run(functools.partial(b.create_topic, "dlq.t", num_partitions=1,
                                   configs={"errors.deadletterqueue.group.enable": "true"}))
        trio.run(functools.partial(b.create_topic, "dlq.closed", num_partitions=1))  # not enabled
        refused = ask(b, 44, 1, {"resources": [{"resource_type": 32, "resource_name": "sg", "configs": [
            {"name": "errors.deadletterqueue.topic.name", "config_operation": 0, "value": "orders-dead"}]}],
            "validate_only": False})
        assert refused.responses[0].error_code == E.invalid_config  # not dlq.-prefixed
        set_dlq = ask(b, 44, 1, {"resources": [{"resource_type": 32, "resource_name": "sg", "configs": [
            {"name": "errors.deadletterqueue.topic.name", "config_operation": 0, "value": "dlq.t"}]}],
            "validate_only": False})
        assert set_dlq.responses[0].error_code == E.none
        join(b, "a")
        share_fetch(b, "a", 0)
        produce(b, [b"good", b"poison", b"flaky"])
        assert acquired(share_fetch(b, "a", 1))[0] == [(0, 2, 1)]
        acknowledge(b, "a", 2, [(0, 0, [ACCEPT]), (1, 1, [REJECT]), (2, 2, [RELEASE])])
        assert acquired(share_fetch(b, "a", 3))[0] == [(2, 2, 2)]
        acknowledge(b, "a", 4, [(2, 2, [RELEASE])])  # its second delivery: the limit (2) archives it
        letters = _dead_letters(b, "dlq.t")
        assert [v for v, _h in letters] == [b"poison", b"flaky"]
        poison, flaky = (h for _v, h in letters)
        assert poison == {"__dlq.errors.group.id": b"sg", "__dlq.errors.topic": b"t", "__dlq.errors.partition": b"0",
                          "__dlq.errors.offset": b"1", "__dlq.errors.delivery.count": b"1",
                          "__dlq.errors.reason": b"rejected"}
        assert (flaky["__dlq.errors.offset"], flaky["__dlq.errors.delivery.count"], flaky["__dlq.errors.reason"]) \
            == (b"2", b"2", b"delivery count limit")
        # a topic that did not opt in takes nothing
        ask(b, 44, 1, {"resources": [{"resource_type": 32, "resource_name": "sg", "configs": [
            {"name": "errors.deadletterqueue.topic.name", "config_operation": 0, "value": "dlq.closed"}]}],
            "validate_only": False})
        produce(b, [b"more"])
        assert acquired(share_fetch(b, "a", 5))[0] == [(3, 3, 1)]
        acknowledge(b, "a", 6, [(3, 3, [REJECT])])
        assert _dead_letters(b, "dlq.closed") == []
    finally:
        b.shutdown()


def test_a_share_group_on_a_filtered_view_gets_only_its_records(broker):
    """A work queue of only the tagged records: the share group reads the view `t-eu` of `t`."""
    trio.run(functools.partial(broker.create_topic, "t-eu", configs={"view.source": "t", "view.filter": "any(eu)"}))
    r = ask(broker, SHARE_HEARTBEAT, 1, {"group_id": "sg", "member_id": "a", "member_epoch": 0, "rack_id": None,
                                         "subscribed_topic_names": ["t-eu"]})
    view_id = broker.views.view("t-eu").topic_id
    assert [(tp.topic_id, tuple(tp.partitions)) for tp in r.assignment.topic_partitions] == [(view_id, (0,))]

    def fetch(epoch, acks=()):
        body = {"group_id": "sg", "member_id": "a", "share_session_epoch": epoch, "max_wait": 0, "min_bytes": 1,
                "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100, "share_acquire_mode": 0,
                "is_renew_ack": False, "forgotten_topics_data": [],
                "topics": [{"topic_id": view_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": l, "acknowledge_types": list(t)} for f, l, t in acks]}]}]}
        return ask(broker, SHARE_FETCH, 2, body)

    fetch(0)
    for i, tag in enumerate([b"eu", b"us", b"eu,vip", b"us"]):
        batch = build_batch([Record(0, 1_000, None, f"r{i}".encode(), [("tags", tag)])])
        body = {"transactional_id": None, "acks": 1, "timeout": 5000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
        assert ask(broker, PRODUCE, 9, body).responses[0].partition_responses[0].error_code == E.none
    ranges, values = acquired(fetch(1))
    assert values == [b"r0", b"r2"]  # only the view's records reach the group
    # what the view left out are offsets without a record; the member acknowledges them as gaps
    acks = [(0, 0, [ACCEPT]), (1, 1, [0]), (2, 2, [ACCEPT]), (3, 3, [0])]
    offsets = {o for f, l, _c in ranges for o in range(f, l + 1)}
    done = fetch(2, [a for a in acks if a[0] in offsets])
    assert done.responses[0].partitions[0].acknowledge_error_code == E.none
    assert broker.share_manager.partitions[("sg", TopicPartition("t-eu", 0))].start_offset == max(offsets) + 1
