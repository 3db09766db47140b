"""The session cache and FetchManager.newContext, with Kafka's own cases (FetchSessionTest.scala) on a
fake clock: session ids, eviction (stale, privileged, larger), full / incremental / sessionless /
error contexts, forgotten partitions by name and by id, unknown topic ids resolved later."""

from __future__ import annotations

import random
import uuid

import pytest

from kbroker.errors import ErrorCode
from kbroker.fetch_session import (
    FINAL_EPOCH,
    INITIAL,
    INVALID_SESSION_ID,
    LEGACY,
    ZERO_UUID,
    CachedPartition,
    FetchMetadata,
    FetchSessionCache,
    FullContext,
    IncrementalContext,
    PartitionRequest,
    PartitionResult,
    SessionErrorContext,
    SessionlessContext,
    TopicIdPartition,
)

LATEST = 17


class FakeClock:
    def __init__(self, ms: int = 0) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms

    def sleep(self, ms: int) -> None:
        self.ms += ms


def new_cache(max_entries: int = 10, eviction_ms: int = 1000, clock: FakeClock | None = None) -> FetchSessionCache:
    return FetchSessionCache(max_entries, eviction_ms, now_ms=clock or FakeClock(), rng=random.Random(7))


def tip(name: str | None, partition: int, topic_id: uuid.UUID = ZERO_UUID) -> TopicIdPartition:
    return TopicIdPartition(topic_id, name, partition)


def req(fetch_offset: int, max_bytes: int = 100, leader_epoch: int = -1, last_fetched_epoch: int = -1
        ) -> PartitionRequest:
    return PartitionRequest(fetch_offset, max_bytes, 0, leader_epoch, last_fetched_epoch)


def ok(hw: int, lso: int | None = None, log_start: int | None = None, records: int = 0, **kw) -> PartitionResult:
    return PartitionResult(high_watermark=hw, last_stable_offset=hw if lso is None else lso,
                           log_start_offset=hw if log_start is None else log_start, records_size=records, **kw)


def err(code: ErrorCode) -> PartitionResult:
    return PartitionResult(error_code=code)


def dummy_create(size: int):
    def create():
        parts = [CachedPartition(tip("test", i, uuid.uuid4()), req(0)) for i in range(size)]
        return {p.key: p for p in parts}
    return create


def assert_cache_contains(cache: FetchSessionCache, *ids: int) -> None:
    for session_id in ids:
        assert cache.get(session_id) is not None, session_id
    assert len(cache) == len(ids)


def read_order(context) -> list[TopicIdPartition]:
    return [tp for tp, _ in context.partitions_to_read()]


def test_new_session_ids_are_positive_and_never_a_cached_one():
    cache = new_cache(3, 100)
    for _ in range(2000):
        assert 0 < cache.new_session_id() < 2**31 - 1
    # a random source that repeats itself: a cached id is skipped
    ids = iter([5, 5, 5, 9])

    class Repeating(random.Random):
        def randrange(self, *_):  # type: ignore[override]
            return next(ids)
    cache = FetchSessionCache(3, 100, now_ms=FakeClock(), rng=Repeating())
    first = cache.maybe_create_session(0, False, 1, True, dummy_create(1))
    assert first == 5
    assert cache.new_session_id() == 9


def test_session_cache_eviction():  # testSessionCache
    cache = new_cache(3, 100)
    id1 = cache.maybe_create_session(0, False, 10, True, dummy_create(10))
    id2 = cache.maybe_create_session(10, False, 20, True, dummy_create(20))
    id3 = cache.maybe_create_session(20, False, 30, True, dummy_create(30))
    assert cache.maybe_create_session(30, False, 40, True, dummy_create(40)) == INVALID_SESSION_ID
    assert cache.maybe_create_session(40, False, 5, True, dummy_create(5)) == INVALID_SESSION_ID
    assert_cache_contains(cache, id1, id2, id3)
    cache.touch(cache.get(id1), 200)
    id4 = cache.maybe_create_session(210, False, 11, True, dummy_create(11))  # id2 is stale
    assert_cache_contains(cache, id1, id3, id4)
    cache.touch(cache.get(id1), 400)
    cache.touch(cache.get(id3), 390)
    cache.touch(cache.get(id4), 400)
    id5 = cache.maybe_create_session(410, False, 50, True, dummy_create(50))  # larger than id1
    assert_cache_contains(cache, id3, id4, id5)
    assert cache.maybe_create_session(410, False, 5, True, dummy_create(5)) == INVALID_SESSION_ID
    id6 = cache.maybe_create_session(410, True, 5, True, dummy_create(5))  # privileged beats id4
    assert_cache_contains(cache, id3, id5, id6)
    assert cache.evictions == 3


def test_resize_cached_sessions():  # testResizeCachedSessions
    cache = new_cache(2, 100)
    assert (cache.total_partitions, len(cache), cache.evictions) == (0, 0, 0)
    id1 = cache.maybe_create_session(0, False, 2, True, dummy_create(2))
    assert id1 > 0
    session1 = cache.get(id1)
    assert (session1.size, cache.total_partitions, len(cache)) == (2, 2, 1)
    id2 = cache.maybe_create_session(0, False, 4, True, dummy_create(4))
    session2 = cache.get(id2)
    assert_cache_contains(cache, id1, id2)
    assert (cache.total_partitions, len(cache), cache.evictions) == (6, 2, 0)
    cache.touch(session1, 200)
    cache.touch(session2, 200)
    id3 = cache.maybe_create_session(200, False, 5, True, dummy_create(5))
    assert id3 > 0
    assert_cache_contains(cache, id2, id3)
    assert (cache.total_partitions, len(cache), cache.evictions) == (9, 2, 1)
    cache.remove(id3)
    assert_cache_contains(cache, id2)
    assert (cache.total_partitions, len(cache), cache.evictions) == (4, 1, 1)
    session2.partitions.pop(next(iter(session2.partitions)))
    assert (session2.size, session2.cached_size) == (3, 4)
    cache.touch(session2, session2.last_used_ms)
    assert cache.total_partitions == 3


def test_no_slots_no_sessions():
    cache = new_cache(0)
    ctx = cache.new_context(INITIAL, [(tip("foo", 0), req(0))], version=12)
    assert cache.new_context(INITIAL, [], version=12).__class__ is FullContext
    assert ctx.build_response([(tip("foo", 0), ok(10))]).session_id == INVALID_SESSION_ID
    assert len(cache) == 0


@pytest.mark.parametrize("field", ["leader_epoch", "last_fetched_epoch"])
def test_cached_leader_and_last_fetched_epochs(field):  # testCachedLeaderEpoch, testLastFetchedEpoch
    cache = new_cache()
    foo, bar = uuid.uuid4(), uuid.uuid4()
    tp0, tp1, tp2 = tip("foo", 0, foo), tip("foo", 1, foo), tip("bar", 1, bar)

    def r(offset, epoch):
        return req(offset, **{field: epoch})

    def epochs(ctx):
        attr = "current_leader_epoch" if field == "leader_epoch" else "last_fetched_epoch"
        return {tp: getattr(data, attr) for tp, data in ctx.partitions_to_read()}

    ctx1 = cache.new_context(INITIAL, [(tp0, r(0, -1)), (tp1, r(10, 1)), (tp2, r(10, 2))], version=LATEST)
    assert epochs(ctx1) == {tp0: -1, tp1: 1, tp2: 2}
    response = [(tp0, ok(100)), (tp1, ok(10)), (tp2, ok(5))]
    sid = ctx1.build_response(response).session_id
    ctx2 = cache.new_context(FetchMetadata(sid, 1), [], version=LATEST)
    assert epochs(ctx2) == {tp0: -1, tp1: 1, tp2: 2}
    ctx2.build_response(response)
    ctx3 = cache.new_context(FetchMetadata(sid, 2), [(tp0, r(0, 6)), (tp1, r(10, -1)), (tp2, r(10, 3))],
                             version=LATEST)
    assert epochs(ctx3) == {tp0: 6, tp1: -1, tp2: 3}


def test_fetch_requests():  # testFetchRequests
    cache = new_cache()
    foo, bar = uuid.uuid4(), uuid.uuid4()
    tp0, tp1, tp2, tp3 = tip("foo", 0, foo), tip("foo", 1, foo), tip("bar", 0, bar), tip("bar", 1, bar)

    assert isinstance(cache.new_context(LEGACY, [], version=LATEST, is_follower=True), SessionlessContext)

    data2 = [(tp0, req(0)), (tp1, req(10))]
    ctx2 = cache.new_context(INITIAL, data2, version=LATEST)
    assert isinstance(ctx2, FullContext)
    assert ctx2.partitions_to_read() == data2
    assert (ctx2.fetch_offset(tp0), ctx2.fetch_offset(tp1)) == (0, 10)
    results2 = [(tp0, ok(100)), (tp1, ok(10))]
    resp2 = ctx2.build_response(results2)
    assert resp2.error == ErrorCode.none and resp2.session_id != INVALID_SESSION_ID
    assert resp2.partitions == results2

    ctx3 = cache.new_context(FetchMetadata(resp2.session_id, 5), data2, version=LATEST)
    assert isinstance(ctx3, SessionErrorContext)
    assert ctx3.build_response(results2) == ctx3.build_response([])
    assert ctx3.build_response(results2).error == ErrorCode.invalid_fetch_session_epoch
    assert ctx3.build_response(results2).partitions == []

    ctx4 = cache.new_context(FetchMetadata(resp2.session_id + 1, 1), data2, version=LATEST)
    assert ctx4.build_response(results2).error == ErrorCode.fetch_session_id_not_found

    ctx5 = cache.new_context(FetchMetadata(resp2.session_id, 1), [], version=LATEST)
    assert isinstance(ctx5, IncrementalContext)
    assert ctx5.partitions_to_read() == data2
    assert ctx5.fetch_offset(tp1) == 10
    resp5 = ctx5.build_response(results2)
    assert (resp5.error, resp5.session_id, resp5.partitions) == (ErrorCode.none, resp2.session_id, [])

    ctx6 = cache.new_context(FetchMetadata(resp2.session_id, 5), data2, version=LATEST)
    assert ctx6.build_response(results2).error == ErrorCode.invalid_fetch_session_epoch

    ctx7 = cache.new_context(FetchMetadata(resp2.session_id, 2), [], version=LATEST)
    resp7 = ctx7.throttled_response(100)
    assert (resp7.error, resp7.session_id, resp7.throttle_time_ms, resp7.partitions) == (
        ErrorCode.none, resp2.session_id, 100, [])

    # close the session with FINAL_EPOCH: sessionless, and the cache is empty
    ctx8 = cache.new_context(FetchMetadata(resp2.session_id, FINAL_EPOCH), [(tp2, req(0)), (tp3, req(10))],
                             version=LATEST)
    assert isinstance(ctx8, SessionlessContext) and len(cache) == 0
    resp8 = ctx8.build_response([(tp2, ok(100)), (tp3, ok(100))])
    assert (resp8.error, resp8.session_id, len(resp8.partitions)) == (ErrorCode.none, INVALID_SESSION_ID, 2)


@pytest.mark.parametrize("uses_topic_ids", [True, False])
def test_incremental_fetch_session(uses_topic_ids):  # testIncrementalFetchSession
    cache = new_cache()
    version = LATEST if uses_topic_ids else 12
    foo = uuid.uuid4() if uses_topic_ids else ZERO_UUID
    bar = uuid.uuid4() if uses_topic_ids else ZERO_UUID
    tp0, tp1, tp2 = tip("foo", 0, foo), tip("foo", 1, foo), tip("bar", 0, bar)
    ctx1 = cache.new_context(INITIAL, [(tp0, req(0)), (tp1, req(10))], version=version)
    resp1 = ctx1.build_response([(tp0, ok(100)), (tp1, ok(10))])
    assert resp1.session_id != INVALID_SESSION_ID and len(resp1.partitions) == 2
    # remove foo-0, add bar-0
    ctx2 = cache.new_context(FetchMetadata(resp1.session_id, 1), [(tp2, req(15, 0))], [tp0], version=version)
    assert isinstance(ctx2, IncrementalContext)
    assert read_order(ctx2) == [tp1, tp2]
    assert ctx2.fetch_offset(tp0) is None
    assert (ctx2.fetch_offset(tp1), ctx2.fetch_offset(tp2)) == (10, 15)
    assert ctx2.fetch_offset(tip("bar", 2, bar)) is None
    resp2 = ctx2.build_response([(tp1, ok(10)), (tp2, ok(10))])
    assert resp2.error == ErrorCode.none and resp2.session_id == resp1.session_id
    assert [tp for tp, _ in resp2.partitions] == [tp2]


def test_unknown_topic_ids_on_an_old_version_are_names():  # testFetchSessionWithUnknownIdOldRequestVersion
    cache = new_cache()
    tp0, tp1 = tip("foo", 0), tip("foo", 1)
    ctx = cache.new_context(INITIAL, [(tp0, req(0)), (tp1, req(10))], version=12, topic_names={})
    resp = ctx.build_response([(tp0, ok(100)), (tp1, ok(10))])
    assert resp.session_id != INVALID_SESSION_ID
    assert all(r.error_code == ErrorCode.none for _, r in resp.partitions)
    assert cache.get(resp.session_id).uses_topic_ids is False


def test_unknown_topic_ids_resolved_later():  # testFetchSessionWithUnknownId, testResolveUnknownPartitions
    cache = new_cache()
    foo, bar, zar = (tip(n, 0, uuid.uuid4()) for n in ("foo", "bar", "zar"))
    unresolved = {t: tip(None, 0, t.topic_id) for t in (foo, bar, zar)}

    def context(metadata, partitions, names):
        data = [(tp if tp.topic_id in names else unresolved[tp], req(0)) for tp in partitions]
        return cache.new_context(metadata, data, version=LATEST, topic_names=names)

    def respond(ctx):
        return ctx.build_response([(tp, err(ErrorCode.unknown_topic_id) if tp.topic is None else ok(10))
                                   for tp, _ in ctx.partitions_to_read()])

    ctx1 = context(INITIAL, [foo, bar, zar], {})
    assert read_order(ctx1) == [unresolved[foo], unresolved[bar], unresolved[zar]]
    sid = respond(ctx1).session_id
    ctx2 = context(FetchMetadata(sid, 1), [], {foo.topic_id: "foo"})
    assert read_order(ctx2) == [foo, unresolved[bar], unresolved[zar]]
    resp2 = respond(ctx2)
    assert [tp for tp, _ in resp2.partitions] == [foo, unresolved[bar], unresolved[zar]]  # errors are always sent
    ctx3 = context(FetchMetadata(sid, 2), [bar], {foo.topic_id: "foo", bar.topic_id: "bar"})
    assert read_order(ctx3) == [foo, bar, unresolved[zar]]
    respond(ctx3)
    names = {t.topic_id: t.topic for t in (foo, bar, zar)}
    ctx4 = context(FetchMetadata(sid, 3), [], names)
    assert read_order(ctx4) == [foo, bar, zar]
    respond(ctx4)
    ctx5 = context(FetchMetadata(sid, 4), [], {})  # the topics are gone: names stay resolved
    assert read_order(ctx5) == [foo, bar, zar]


def test_topic_id_style_must_not_change_within_a_session():
    # testIncrementalFetchSessionWithIdsWhenSessionDoesNotUseIds / ...WithoutIdsWhenSessionUsesIds
    for first, second in ((12, LATEST), (LATEST, 12)):
        cache = new_cache()
        foo = tip("foo", 0, uuid.uuid4() if first >= 13 else ZERO_UUID)
        sid = cache.new_context(INITIAL, [(foo, req(0))], version=first).build_response([(foo, ok(100))]).session_id
        ctx = cache.new_context(FetchMetadata(sid, 1), [], version=second)
        assert isinstance(ctx, SessionErrorContext)
        resp = ctx.build_response([])
        assert (resp.error, resp.session_id) == (ErrorCode.fetch_session_topic_id_error, INVALID_SESSION_ID)
        assert cache.get(sid).epoch == 1  # the session is left as it was


@pytest.mark.parametrize("starts_resolved", [True, False])
@pytest.mark.parametrize("ends_resolved", [True, False])
def test_forget_partitions_by_id_resolved_or_not(starts_resolved, ends_resolved):  # testToForgetPartitions
    cache = new_cache()
    foo, bar = tip("foo", 0, uuid.uuid4()), tip("bar", 0, uuid.uuid4())
    foo_unresolved, bar_unresolved = tip(None, 0, foo.topic_id), tip(None, 0, bar.topic_id)
    foo1 = foo if starts_resolved else foo_unresolved
    names1 = {foo.topic_id: "foo"} if starts_resolved else {}
    ctx1 = cache.new_context(INITIAL, [(foo1, req(0)), (bar_unresolved, req(0))], version=LATEST, topic_names=names1)
    assert read_order(ctx1) == [foo1, bar_unresolved]
    sid = ctx1.build_response([(foo1, ok(10)), (bar_unresolved, err(ErrorCode.unknown_topic_id))]).session_id
    foo2 = foo if ends_resolved else foo_unresolved
    ctx2 = cache.new_context(FetchMetadata(sid, 1), [], [foo2], version=LATEST)
    assert isinstance(ctx2, IncrementalContext) and read_order(ctx2) == [bar_unresolved]
    ctx2.build_response([(bar_unresolved, err(ErrorCode.unknown_topic_id))])
    ctx3 = cache.new_context(FetchMetadata(sid, 2), [], [bar], version=LATEST)
    assert isinstance(ctx3, SessionlessContext) and read_order(ctx3) == []
    assert len(cache) == 0


def test_forget_partitions_by_name_before_v13():
    cache = new_cache()
    foo0, foo1 = tip("foo", 0), tip("foo", 1)
    sid = cache.new_context(INITIAL, [(foo0, req(0)), (foo1, req(0))], version=12).build_response(
        [(foo0, ok(1)), (foo1, ok(1))]).session_id
    ctx = cache.new_context(FetchMetadata(sid, 1), [], [tip("foo", 0)], version=12)
    assert read_order(ctx) == [foo1]


def test_duplicate_epoch_gets_an_error_and_no_partitions():  # testUpdateAndGenerateResponseData
    cache = new_cache()
    foo, bar = tip("foo", 0, uuid.uuid4()), tip(None, 0, uuid.uuid4())
    data = [(foo, req(0)), (bar, req(0))]
    results = [(foo, err(ErrorCode.unknown_topic_or_partition)), (bar, err(ErrorCode.unknown_topic_id))]
    assert cache.new_context(LEGACY, data, version=LATEST).build_response(results).partitions == results
    resp2 = cache.new_context(INITIAL, data, version=LATEST).build_response(results)
    assert resp2.partitions == results
    ctx3 = cache.new_context(FetchMetadata(resp2.session_id, 1), [], version=LATEST)
    assert ctx3.build_response(results).partitions == results  # errors are always sent
    ctx4 = cache.new_context(FetchMetadata(resp2.session_id, 1), [], version=LATEST)
    assert isinstance(ctx4, SessionErrorContext)
    assert ctx4.build_response(results).partitions == []


def test_request_overtaken_by_the_next_one_in_its_session():
    """A request still waiting (long poll) when the client's next epoch arrives is answered with
    INVALID_FETCH_SESSION_EPOCH, and leaves the session alone (Kafka's 'possible duplicate request')."""
    cache = new_cache()
    foo = tip("foo", 0, uuid.uuid4())
    sid = cache.new_context(INITIAL, [(foo, req(0))], version=LATEST).build_response([(foo, ok(5))]).session_id
    slow = cache.new_context(FetchMetadata(sid, 1), [], version=LATEST)
    fast = cache.new_context(FetchMetadata(sid, 2), [], version=LATEST)
    assert fast.build_response([(foo, ok(6))]).partitions == [(foo, ok(6))]
    assert slow.peek_response([(foo, ok(7))]).error == ErrorCode.invalid_fetch_session_epoch
    late = slow.build_response([(foo, ok(7))])
    assert (late.error, late.session_id, late.partitions) == (ErrorCode.invalid_fetch_session_epoch, sid, [])
    assert slow.throttled_response(5).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.get(sid).partitions[foo.key].high_watermark == 6


def _full(cache, data, results, follower=False):
    ctx = cache.new_context(INITIAL, data, version=LATEST, is_follower=follower)
    assert isinstance(ctx, FullContext)
    resp = ctx.build_response(results)
    assert resp.error == ErrorCode.none and resp.session_id != INVALID_SESSION_ID
    assert len(resp.partitions) == 2
    return resp.session_id


def test_session_expiration_prefers_the_least_recently_used():  # testFetchSessionExpiration
    clock = FakeClock()
    cache = new_cache(2, 1000, clock)
    fid = uuid.uuid4()
    foo0, foo1 = tip("foo", 0, fid), tip("foo", 1, fid)
    data, results = [(foo0, req(0)), (foo1, req(10))], [(foo0, ok(100)), (foo1, ok(10))]
    s1 = _full(cache, data, results)
    clock.sleep(500)
    s2 = _full(cache, data, results)
    assert s1 in cache and s2 in cache
    clock.sleep(500)
    assert isinstance(cache.new_context(FetchMetadata(s1, 1), [], version=LATEST), IncrementalContext)
    clock.sleep(501)
    s3 = _full(cache, data, results)
    assert s1 in cache and s2 not in cache and s3 in cache


def test_privileged_sessions():  # testPrivilegedSessionHandling
    clock = FakeClock()
    cache = new_cache(2, 1000, clock)
    fid = uuid.uuid4()
    foo0, foo1 = tip("foo", 0, fid), tip("foo", 1, fid)
    data, results = [(foo0, req(0)), (foo1, req(10))], [(foo0, ok(100)), (foo1, ok(10))]
    s1 = _full(cache, data, results, follower=True)
    clock.sleep(500)
    s2 = _full(cache, data, results, follower=False)
    assert len(cache) == 2
    clock.sleep(500)
    s3 = _full(cache, data, results, follower=True)  # a follower's session evicts the consumer's
    assert s1 in cache and s2 not in cache and s3 in cache
    clock.sleep(501)
    s4 = _full(cache, data, results, follower=True)  # s1 is stale, privileged or not
    assert s1 not in cache and s3 in cache and s4 in cache and len(cache) == 2


def test_a_new_consumer_session_cannot_evict_a_young_one():
    clock = FakeClock()
    cache = new_cache(1, 1000, clock)
    foo = tip("foo", 0)
    first = cache.new_context(INITIAL, [(foo, req(0))], version=12).build_response([(foo, ok(1))]).session_id
    clock.sleep(1000)  # not older than eviction_ms yet
    bigger = [(tip("foo", i), req(0)) for i in range(5)]
    resp = cache.new_context(INITIAL, bigger, version=12).build_response([(tp, ok(1)) for tp, _ in bigger])
    assert resp.session_id == INVALID_SESSION_ID and first in cache
    assert len(resp.partitions) == 5  # still a full answer, sessionless


def test_zero_size_session_closes():  # testZeroSizeFetchSession
    cache = new_cache()
    fid = uuid.uuid4()
    foo0, foo1 = tip("foo", 0, fid), tip("foo", 1, fid)
    sid = cache.new_context(INITIAL, [(foo0, req(0)), (foo1, req(10))], version=LATEST).build_response(
        [(foo0, ok(100)), (foo1, ok(10))]).session_id
    ctx2 = cache.new_context(FetchMetadata(sid, 1), [], [foo0, foo1], version=LATEST)
    assert isinstance(ctx2, SessionlessContext)
    resp2 = ctx2.build_response([])
    assert (resp2.session_id, resp2.partitions, len(cache)) == (INVALID_SESSION_ID, [], 0)


def test_diverging_epoch_is_always_sent():  # testDivergingEpoch
    cache = new_cache()
    tp1, tp2 = tip("foo", 1, uuid.uuid4()), tip("bar", 2, uuid.uuid4())
    data = [(tp1, req(100, 1000, 5, 4)), (tp2, req(100, 1000, 5, 4))]
    plain = ok(105, 105, 0)
    diverging = PartitionResult(high_watermark=105, last_stable_offset=105, log_start_offset=0, diverging_epoch=3)
    resp1 = cache.new_context(INITIAL, data, version=LATEST).build_response([(tp1, plain), (tp2, diverging)])
    assert {tp for tp, _ in resp1.partitions} == {tp1, tp2}
    ctx2 = cache.new_context(FetchMetadata(resp1.session_id, 1), data, version=LATEST)
    assert [tp for tp, _ in ctx2.build_response([(tp1, plain), (tp2, diverging)]).partitions] == [tp2]
    assert [tp for tp, _ in ctx2.build_response([(tp1, diverging), (tp2, diverging)]).partitions] == [tp1, tp2]
    assert [tp for tp, _ in ctx2.build_response([(tp1, ok(110, 110, 0)), (tp2, diverging)]).partitions] == [tp1, tp2]


def test_partitions_with_records_are_read_last_next_time():  # testDeprioritizesPartitionsWithRecordsOnly
    cache = new_cache()
    tp1, tp2, tp3 = (tip(n, i, uuid.uuid4()) for n, i in (("foo", 1), ("bar", 2), ("zar", 3)))
    data = [(tp, req(100, 1000, 5, 4)) for tp in (tp1, tp2, tp3)]
    resp1 = cache.new_context(INITIAL, data, version=LATEST).build_response([(tp, ok(50, 50, 0)) for tp, _ in data])
    ctx2 = cache.new_context(FetchMetadata(resp1.session_id, 1), data, version=LATEST)
    assert read_order(ctx2) == [tp1, tp2, tp3]
    assert ctx2.build_response([]).partitions == []
    resp3 = ctx2.build_response([(tp1, ok(60, 50, 0)), (tp2, ok(60, 50, 0, records=10)), (tp3, ok(50, 50, 0))])
    assert [tp for tp, _ in resp3.partitions] == [tp1, tp2]
    assert read_order(ctx2) == [tp1, tp3, tp2]


def test_results_for_partitions_outside_the_request_are_a_caller_error():
    cache = new_cache()
    foo, bar = tip("foo", 0), tip("bar", 0)
    with pytest.raises(ValueError):
        cache.new_context(INITIAL, [(foo, req(0))], version=12).build_response([(bar, ok(1))])
    sid = cache.new_context(INITIAL, [(foo, req(0))], version=12).build_response([(foo, ok(1))]).session_id
    with pytest.raises(ValueError):
        cache.new_context(FetchMetadata(sid, 1), [], version=12).build_response([(bar, ok(1))])


def test_a_full_request_closes_the_session_it_names():
    cache = new_cache()
    foo = tip("foo", 0)
    sid = cache.new_context(INITIAL, [(foo, req(0))], version=12).build_response([(foo, ok(1))]).session_id
    ctx = cache.new_context(FetchMetadata(sid, 0), [(foo, req(0))], version=12)
    assert isinstance(ctx, FullContext) and sid not in cache
    new_sid = ctx.build_response([(foo, ok(1))]).session_id
    assert new_sid not in (sid, INVALID_SESSION_ID) and len(cache) == 1


def test_incremental_request_without_a_session_id_is_not_found():
    cache = new_cache()
    ctx = cache.new_context(FetchMetadata(INVALID_SESSION_ID, 3), [], version=12)
    assert ctx.build_response([]).error == ErrorCode.fetch_session_id_not_found
    assert ctx.partitions_to_read() == []


def test_peek_response_changes_nothing():
    cache = new_cache()
    foo = tip("foo", 0)
    sid = cache.new_context(INITIAL, [(foo, req(0))], version=12).build_response([(foo, ok(1))]).session_id
    ctx = cache.new_context(FetchMetadata(sid, 1), [], version=12)
    assert ctx.peek_response([(foo, ok(2))]).partitions == [(foo, ok(2))]
    assert ctx.peek_response([(foo, ok(2))]).partitions == [(foo, ok(2))]
    assert ctx.build_response([(foo, ok(2))]).partitions == [(foo, ok(2))]
    assert ctx.build_response([(foo, ok(2))]).partitions == []


def test_statistics():
    cache = new_cache(5)
    foo = tip("foo", 0)
    sid = cache.new_context(INITIAL, [(foo, req(0))], version=12).build_response([(foo, ok(1))]).session_id
    cache.new_context(FetchMetadata(sid, 1), [], version=12)
    cache.new_context(FetchMetadata(sid, 7), [], version=12)
    cache.new_context(LEGACY, [(foo, req(0))], version=6)
    assert cache.statistics() == {"sessions": 1, "partitions_cached": 1, "evictions": 0, "max_entries": 5,
                                  "sessionless_requests": 1, "full_requests": 1, "incremental_requests": 1,
                                  "error_requests": 1}
