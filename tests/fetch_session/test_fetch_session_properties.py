"""Property tests of fetch sessions against a sessionless reference, on a fake clock.

- A client following KIP-227 with kbroker's FetchSessionHandler (full request, then incremental ones
  listing only added or changed partitions and forgetting the dropped ones; back to a full request on
  a session error) and applying each response to its own view ends every round with the view a
  sessionless client has, given the same per-partition results — while other clients fill the cache
  and evict its session, the clock jumps, and it sometimes sends a stale or future epoch.
- Epochs out of order are refused and leave the session as it was.
- The cache never holds more than its slots, and evicts exactly whom Kafka's tryEvict would.
"""

from __future__ import annotations

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.errors import ErrorCode
from kbroker.fetch_session import (
    INITIAL,
    INVALID_SESSION_ID,
    ZERO_UUID,
    CachedPartition,
    FetchMetadata,
    FetchSessionCache,
    FetchSessionHandler,
    IncrementalContext,
    PartitionRequest,
    PartitionResult,
    SessionErrorContext,
    TopicIdPartition,
)


class FakeClock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class ProtocolClient:
    """kbroker's FetchSessionHandler (Kafka's, the followers' side) and the view a client builds
    from the responses it may use."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.handler = FetchSessionHandler()
        self.view: dict = {}  # key -> (error, high watermark, last stable offset, log start offset)

    @property
    def next_metadata(self) -> FetchMetadata:
        return self.handler.next_metadata

    def build(self, wanted: dict):
        data = self.handler.build(wanted.values())
        return data.metadata, data.to_send, data.to_forget

    def handle(self, response) -> bool:
        ok = self.handler.handle_response(response.error, response.session_id,
                                          [tp for tp, _ in response.partitions], response.throttle_time_ms)
        if ok:
            for tp, result in response.partitions:
                self.view[tp.key] = state_of(result)
        return ok


def state_of(result: PartitionResult) -> tuple:
    return (result.error_code, result.high_watermark, result.last_stable_offset, result.log_start_offset)


def has_event(result: PartitionResult) -> bool:
    return (result.records_size > 0 or result.error_code != ErrorCode.none
            or result.preferred_read_replica != -1 or result.diverging_epoch >= 0)


ok_results = st.builds(
    lambda hw, lso_back, log_start, records, preferred, diverging: PartitionResult(
        high_watermark=hw, last_stable_offset=hw - lso_back, log_start_offset=min(log_start, hw),
        records_size=records, preferred_read_replica=preferred, diverging_epoch=diverging),
    st.integers(0, 3), st.integers(0, 1), st.integers(0, 2), st.sampled_from([0, 0, 0, 100]),
    st.sampled_from([-1, -1, -1, 1]), st.sampled_from([-1, -1, -1, 0]))
# errors carry -1 offsets (as Kafka's and kbroker's handlers answer them) or, to be sure the session
# does not rely on that, whatever offsets
error_codes = st.sampled_from([ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
                               ErrorCode.offset_out_of_range])
error_results = st.one_of(
    error_codes.map(lambda code: PartitionResult(error_code=code)),
    st.builds(lambda code, hw: PartitionResult(error_code=code, high_watermark=hw, last_stable_offset=hw,
                                               log_start_offset=0), error_codes, st.integers(0, 3)))
results = st.one_of(ok_results, ok_results, ok_results, error_results)

rounds = st.lists(st.fixed_dictionaries({
    "wanted": st.sets(st.integers(0, 5)),
    "offsets": st.lists(st.integers(0, 2), min_size=6, max_size=6),
    "results": st.lists(results, min_size=6, max_size=6),
    "advance_ms": st.sampled_from([0, 0, 10, 500, 1_500]),
    "noise": st.lists(st.tuples(st.booleans(), st.integers(1, 8)), max_size=2),  # (follower, size)
    "bad_epoch": st.sampled_from([None, None, None, -1, +1, +5, -7]),
}), min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
@given(rounds=rounds, version=st.sampled_from([12, 17]), slots=st.integers(0, 3), follower=st.booleans(),
       seed=st.integers(0, 2**32))
def test_session_client_sees_what_a_sessionless_client_sees(rounds, version, slots, follower, seed):
    clock = FakeClock()
    cache = FetchSessionCache(slots, 1000, now_ms=clock, rng=random.Random(seed))
    ids = version >= 13
    topic_ids = {"a": uuid.uuid4() if ids else ZERO_UUID, "b": uuid.uuid4() if ids else ZERO_UUID}
    names = {tid: name for name, tid in topic_ids.items()} if ids else {}
    universe = [TopicIdPartition(topic_ids[t], t, p) for t in ("a", "b") for p in range(3)]
    client, reference = ProtocolClient(version), {}
    offsets = [0] * len(universe)
    noise_counter = 0

    for rnd in rounds:
        clock.ms += rnd["advance_ms"]
        for i, bump in enumerate(rnd["offsets"]):
            offsets[i] += bump
        wanted = {universe[i].key: (universe[i], PartitionRequest(offsets[i], 1000)) for i in sorted(rnd["wanted"])}
        world = {universe[i].key: r for i, r in enumerate(rnd["results"])}

        # other clients take slots (and may evict ours)
        for noise_follower, size in rnd["noise"]:
            noise_counter += 1
            parts = [(TopicIdPartition(uuid.uuid4() if ids else ZERO_UUID, f"n{noise_counter}", p),
                      PartitionRequest(0, 1)) for p in range(size)]
            ctx = cache.new_context(INITIAL, parts, version=version, is_follower=noise_follower, topic_names=names)
            ctx.build_response([(tp, PartitionResult(high_watermark=0)) for tp, _ in parts])
            assert len(cache) <= slots

        # a stale or future epoch: refused, and the session is left as it was
        if rnd["bad_epoch"] is not None and not client.next_metadata.is_full:
            sid, epoch = client.next_metadata.session_id, client.next_metadata.epoch
            bad = epoch + rnd["bad_epoch"]
            if bad not in (0, -1, epoch):
                session = cache.get(sid)
                before = None if session is None else (session.epoch, list(session.partitions))
                ctx = cache.new_context(FetchMetadata(sid, bad), [], version=version, topic_names=names)
                assert isinstance(ctx, SessionErrorContext)
                expected = ErrorCode.invalid_fetch_session_epoch if session else ErrorCode.fetch_session_id_not_found
                assert ctx.build_response([]).error == expected
                after = cache.get(sid)
                assert (None if after is None else (after.epoch, list(after.partitions))) == before

        # the client's fetch, retried after a session error as Kafka's client does
        for attempt in range(3):
            metadata, partitions, forgotten = client.build(wanted)
            ctx = cache.new_context(metadata, partitions, forgotten, version=version, is_follower=follower,
                                    topic_names=names)
            to_read = ctx.partitions_to_read()
            if not isinstance(ctx, SessionErrorContext):
                # the broker reads exactly what the client wants, with the parameters it last sent
                assert {tp.key: (tp, r) for tp, r in to_read} == wanted
                assert len(to_read) == len(wanted)
            response = ctx.build_response([(tp, world[tp.key]) for tp, _ in to_read])
            if client.handle(response):
                break
            assert attempt == 0, "a full request never fails"
        else:
            raise AssertionError("no successful fetch")
        assert len(cache) <= slots

        sent = {tp.key: r for tp, r in response.partitions}
        assert set(sent) <= set(wanted)
        for key in wanted:
            reference[key] = state_of(world[key])
            if has_event(world[key]):
                assert key in sent, "records, errors, preferred replicas and diverging epochs always go out"
        assert {k: client.view.get(k) for k in wanted} == {k: reference[k] for k in wanted}
        if isinstance(ctx, IncrementalContext):
            assert cache.get(response.session_id).epoch == client.next_metadata.epoch


@settings(max_examples=200, deadline=None)
@given(epochs=st.lists(st.integers(-4, 12).filter(lambda e: e not in (0, -1)), max_size=40),
       follow=st.lists(st.booleans(), min_size=40, max_size=40))
def test_epochs_out_of_order_are_refused(epochs, follow):
    cache = FetchSessionCache(4, 1000, now_ms=FakeClock(), rng=random.Random(1))
    tp = TopicIdPartition(ZERO_UUID, "t", 0)
    sid = cache.new_context(INITIAL, [(tp, PartitionRequest(0, 1))], version=12).build_response(
        [(tp, PartitionResult(high_watermark=0))]).session_id
    expected = 1
    for epoch, use_expected in zip(epochs, follow):
        sent = expected if use_expected else epoch
        ctx = cache.new_context(FetchMetadata(sid, sent), [], version=12)
        if sent == expected:
            assert isinstance(ctx, IncrementalContext)
            assert ctx.build_response([(tp, PartitionResult(high_watermark=0))]).error == ErrorCode.none
            expected += 1
        else:
            assert isinstance(ctx, SessionErrorContext)
            assert ctx.build_response([]).error == ErrorCode.invalid_fetch_session_epoch
        assert cache.get(sid).epoch == expected


cache_ops = st.lists(st.one_of(
    st.tuples(st.just("create"), st.booleans(), st.integers(0, 6)),  # (privileged, size)
    st.tuples(st.just("touch"), st.integers(0, 50), st.integers(0, 3)),  # (which, partitions to drop)
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("advance"), st.sampled_from([1, 50, 99, 100, 101, 250])),
), max_size=80)


@settings(max_examples=300, deadline=None)
@given(ops=cache_ops, slots=st.integers(0, 5), seed=st.integers(0, 2**32))
def test_cache_never_exceeds_its_slots_and_evicts_as_kafka(ops, slots, seed):
    eviction_ms = 100
    now = 0
    cache = FetchSessionCache(slots, eviction_ms, now_ms=lambda: now, rng=random.Random(seed))
    model: dict[int, dict] = {}  # id -> privileged, creation, last_used, size at last touch

    def evictable(m: dict, privileged_newcomer: bool) -> bool:
        old = m["last_used"] - m["creation"] > eviction_ms
        return (not m["privileged"] or old) if privileged_newcomer else old

    for op in ops:
        if op[0] == "advance":
            now += op[1]
        elif op[0] == "create":
            _, privileged, size = op
            expected_victim = None
            if len(model) >= slots and model:
                lru = min(model, key=lambda i: (model[i]["last_used"], i))
                if now - model[lru]["last_used"] > eviction_ms:
                    expected_victim = lru
                else:
                    cands = [i for i in model if evictable(model[i], privileged)]
                    if cands:
                        v = min(cands, key=lambda i: (model[i]["privileged"], model[i]["size"], i))
                        if (privileged, size, 0) >= (model[v]["privileged"], model[v]["size"], v):
                            expected_victim = v

            def create(size=size):
                parts = [CachedPartition(TopicIdPartition(ZERO_UUID, "t", p), PartitionRequest(0, 1))
                         for p in range(size)]
                return {p.key: p for p in parts}
            sid = cache.maybe_create_session(now, privileged, size, False, create)
            if len(model) < slots:
                assert sid != INVALID_SESSION_ID
            elif expected_victim is None:
                assert sid == INVALID_SESSION_ID
            else:
                assert sid != INVALID_SESSION_ID and expected_victim not in cache
                del model[expected_victim]
            if sid != INVALID_SESSION_ID:
                assert sid > 0 and sid not in model
                model[sid] = {"privileged": privileged, "creation": now, "last_used": now, "size": size}
        elif model:
            sid = sorted(model)[op[1] % len(model)]
            if op[0] == "remove":
                assert cache.remove(sid) is not None
                del model[sid]
            else:
                session = cache.get(sid)
                for key in list(session.partitions)[:op[2]]:
                    del session.partitions[key]
                cache.touch(session, now)
                model[sid].update(last_used=now, size=session.size)
        assert len(cache) <= slots
        assert set(model) == {sid for sid in model if sid in cache} and len(cache) == len(model)
        assert cache.total_partitions == sum(m["size"] for m in model.values())
