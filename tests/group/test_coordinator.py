"""The group coordinator's state machine on a fake clock: every transition, the timeouts (initial
delay, rebalance, session, sync, pending member), static membership, generation fencing, offsets
with their persistence and expiry. No sleeps: time moves only when a test advances it."""

from __future__ import annotations

import struct
from itertools import product

import pytest

from kbroker.errors import ErrorCode as E, KafkaError
from kbroker.group import offsets_format as fmt
from kbroker.group.coordinator import GroupConfig, GroupCoordinator, java_string_hash, partition_for
from kbroker.group.metadata import OffsetAndMetadata
from kbroker.group.state import VALID_PREVIOUS, GroupState as S, IllegalStateTransition, check_transition
from kbroker.wire.internal_records import InternalBatch


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class MemoryOffsetsLog:
    """An in-memory stand-in for the `__consumer_offsets` partitions (the storage seam): one record
    per offset, no transactions (tests/group/test_txn_offsets.py has a byte-level one for those)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_with: KafkaError | None = None

    def append(self, partition, entries, *, producer_id=-1, producer_epoch=-1):
        assert producer_id == -1, "a transactional commit needs the byte-level log"
        if self.fail_with is not None:
            raise self.fail_with
        records = self.partitions.setdefault(partition, [])
        records.extend(entries)
        return len(records) - len(entries)

    def read_batches(self, partition):
        return [InternalBatch(-1, False, False, None, [(offset, key, value)])
                for offset, (key, value) in enumerate(self.partitions.get(partition, []))]


class Box:
    def __init__(self) -> None:
        self.result = None
        self.calls = 0

    def __call__(self, result) -> None:
        self.calls += 1
        self.result = result

    @property
    def done(self) -> bool:
        return self.result is not None


class Harness:
    def __init__(self, **config) -> None:
        self.now = 1_000_000
        self.log = MemoryOffsetsLog()
        self.config = GroupConfig(**{"initial_rebalance_delay_ms": 3000, **config})
        self.coordinator = GroupCoordinator(self.config, self.log, lambda: self.now)

    def advance(self, ms: int) -> None:
        self.now += ms
        self.coordinator.poll()

    def join(self, member_id="", group="g", instance=None, protocols=None, session=10_000, rebalance=30_000,
             v4=True, protocol_type="consumer", client_id="client") -> Box:
        box = Box()
        protocols = protocols if protocols is not None else [("range", subscription("t"))]
        self.coordinator.join_group(group, member_id, instance, v4, client_id, "/127.0.0.1", rebalance, session,
                                    protocol_type, protocols, box)
        return box

    def join_new(self, **kw) -> tuple[str, Box]:
        """v4+ join: the MEMBER_ID_REQUIRED round trip, then the real join (held or answered)."""
        first = self.join(**kw)
        assert first.result.error == E.member_id_required
        member_id = first.result.member_id
        return member_id, self.join(member_id=member_id, **kw)

    def sync(self, member_id, generation, assignments=None, group="g", instance=None) -> Box:
        box = Box()
        self.coordinator.sync_group(group, generation, member_id, None, None, instance, assignments or {}, box)
        return box

    def group(self, group="g"):
        return self.coordinator.groups.get(group)

    def stable_pair(self):
        """Two members in a Stable group (generation 1), a leading."""
        a, ja = self.join_new()
        b, jb = self.join_new()
        self.advance(3000)  # b joined during the delay: it is extended once
        self.advance(3000)
        assert ja.done and jb.done
        gen = ja.result.generation_id
        leader = ja.result.leader_id
        follower = b if leader == a else a
        sf = self.sync(follower, gen)
        sl = self.sync(leader, gen, {leader: b"L", follower: b"F"})
        assert sl.result.error == E.none and sf.result.error == E.none
        assert self.group().state is S.STABLE
        return leader, follower, gen


# -- state table ----------------------------------------------------------------------------------
def test_transition_table_is_kafkas():
    for current, target in product(S, S):
        if current in VALID_PREVIOUS[target]:
            check_transition(current, target)
        else:
            with pytest.raises(IllegalStateTransition):
                check_transition(current, target)
    assert VALID_PREVIOUS[S.STABLE] == {S.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS[S.EMPTY] == {S.PREPARING_REBALANCE}


# -- routing ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112),
                                             ("hello", 99162322), ("polygenelubricants", -(2**31)),
                                             ("console-consumer-12345", None)])
def test_java_string_hash(value, expected):
    h = java_string_hash(value)
    if expected is not None:
        assert h == expected
    assert -(2**31) <= h < 2**31
    # the reference formula, spelled out
    ref = 0
    for ch in value.encode("utf-16-be").decode("utf-16-be"):
        ref = (31 * ref + ord(ch)) % 2**32
    assert h % 2**32 == ref


def test_partition_for_uses_kafkas_abs():
    assert partition_for("polygenelubricants", 50) == 0  # abs(MIN_VALUE) is 0 in Kafka's Utils.abs
    assert partition_for("hello", 50) == 99162322 % 50
    assert all(0 <= partition_for(f"group-{i}", 7) < 7 for i in range(200))


# -- joining ----------------------------------------------------------------------------------------
def test_first_member_waits_the_initial_delay_then_leads():
    h = Harness()
    first = h.join()
    assert first.result.error == E.member_id_required and first.result.member_id.startswith("client-")
    member_id = first.result.member_id
    held = h.join(member_id=member_id)
    assert not held.done and h.group().state is S.PREPARING_REBALANCE
    h.advance(2999)
    assert not held.done
    h.advance(1)
    r = held.result
    assert r.error == E.none and r.generation_id == 1 and r.leader_id == member_id
    assert r.protocol_name == "range" and [m[0] for m in r.members] == [member_id]
    assert h.group().state is S.COMPLETING_REBALANCE
    sync = h.sync(member_id, 1, {member_id: b"assignment"})
    assert sync.result.error == E.none and sync.result.assignment == b"assignment"
    assert h.group().state is S.STABLE


def test_initial_delay_extends_while_members_keep_arriving():
    h = Harness()
    _a, ja = h.join_new()
    h.advance(2000)
    _b, jb = h.join_new()
    h.advance(1000)  # the first delay ran out, but b arrived meanwhile: wait another 3 s
    assert not ja.done and not jb.done
    h.advance(3000)
    assert ja.done and jb.done
    assert ja.result.generation_id == jb.result.generation_id == 1


def test_zero_initial_delay_completes_at_once():
    h = Harness(initial_rebalance_delay_ms=0)
    _a, ja = h.join_new()
    h.advance(0)
    assert ja.result.error == E.none


def test_join_before_v4_adds_the_member_directly():
    h = Harness(initial_rebalance_delay_ms=0)
    box = h.join(v4=False)
    h.advance(0)
    assert box.result.error == E.none and box.result.member_id


def test_new_member_triggers_rebalance_and_existing_members_rejoin():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    c, jc = h.join_new()
    assert h.group().state is S.PREPARING_REBALANCE and not jc.done
    assert h.coordinator.heartbeat("g", follower, None, gen) == E.rebalance_in_progress
    jf = h.join(member_id=follower)
    assert not jc.done and not jf.done
    jl = h.join(member_id=leader)
    assert jc.done and jf.done and jl.done  # every known member rejoined: no waiting for the timeout
    assert {jc.result.generation_id, jf.result.generation_id, jl.result.generation_id} == {gen + 1}
    assert len(jl.result.members) == 3 and jf.result.members == [] and jc.result.members == []


def test_member_that_misses_the_rebalance_timeout_is_removed():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    jl = h.join(member_id=leader)  # the leader starts a rebalance; the follower keeps heartbeating
    assert h.group().state is S.PREPARING_REBALANCE  # but never rejoins (stuck processing)
    for _ in range(9):
        h.advance(3000)
        assert h.coordinator.heartbeat("g", follower, None, gen) == E.rebalance_in_progress
    h.advance(2999)
    assert not jl.done
    h.advance(1)
    assert jl.result.error == E.none and jl.result.generation_id == gen + 1
    assert list(h.group().members) == [leader]
    assert h.coordinator.heartbeat("g", follower, None, gen) == E.unknown_member_id


def test_session_timeout_removes_a_silent_member():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    for _ in range(5):  # the leader heartbeats, the follower is silent
        h.advance(3000)
        assert h.coordinator.heartbeat("g", leader, None, gen) in (E.none, E.rebalance_in_progress)
    assert follower not in h.group().members
    assert h.group().state is S.PREPARING_REBALANCE
    jl = h.join(member_id=leader)
    assert jl.result.generation_id == gen + 1 and len(jl.result.members) == 1


def test_heartbeats_keep_a_member_alive_far_past_its_session_timeout():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    for _ in range(20):
        h.advance(4000)
        assert h.coordinator.heartbeat("g", leader, None, gen) == E.none
        assert h.coordinator.heartbeat("g", follower, None, gen) == E.none
    assert h.group().state is S.STABLE and len(h.group().members) == 2


def test_last_member_leaving_empties_the_group_and_bumps_the_generation():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    error, results = h.coordinator.leave_group("g", [(leader, None), (follower, None)])
    assert error == E.none and [r[2] for r in results] == [E.none, E.none]
    assert h.group().state is S.EMPTY and h.group().generation_id == gen + 1
    assert h.coordinator.heartbeat("g", leader, None, gen) == E.unknown_member_id


def test_leave_of_an_unknown_member():
    h = Harness()
    leader, _follower, _gen = h.stable_pair()
    error, results = h.coordinator.leave_group("g", [("nobody", None)])
    assert error == E.none and results == [("nobody", None, E.unknown_member_id)]
    assert h.coordinator.leave_group("other", [(leader, None)])[1][0][2] == E.unknown_member_id


# -- fencing ----------------------------------------------------------------------------------------
def test_generation_and_member_fencing():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    assert h.coordinator.heartbeat("g", leader, None, gen - 1) == E.illegal_generation
    assert h.coordinator.heartbeat("g", "ghost", None, gen) == E.unknown_member_id
    assert h.coordinator.heartbeat("nogroup", leader, None, gen) == E.unknown_member_id
    assert h.sync(follower, gen + 5).result.error == E.illegal_generation
    commit = {("t", 0): OffsetAndMetadata(5, -1, "", h.now)}
    assert h.coordinator.commit_offsets("g", leader, None, gen + 1, commit) == {("t", 0): E.illegal_generation}
    assert h.coordinator.commit_offsets("g", "ghost", None, gen, commit) == {("t", 0): E.unknown_member_id}
    # a group-less commit is refused while the group has members
    assert h.coordinator.commit_offsets("g", "", None, -1, commit) == {("t", 0): E.unknown_member_id}
    # and a generation-carrying commit to a group that does not exist is from a stale generation
    assert h.coordinator.commit_offsets("fresh", "m", None, 3, commit) == {("t", 0): E.illegal_generation}


def test_sync_during_a_rebalance_and_commit_before_sync():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    h.join(member_id=leader)
    assert h.sync(follower, gen).result.error == E.rebalance_in_progress
    jf = h.join(member_id=follower)
    gen2 = jf.result.generation_id
    assert h.group().state is S.COMPLETING_REBALANCE
    commit = {("t", 0): OffsetAndMetadata(5, -1, "", h.now)}
    assert h.coordinator.commit_offsets("g", follower, None, gen2, commit) == {("t", 0): E.rebalance_in_progress}


def test_missing_assignments_are_empty_and_followers_wait_for_the_leader():
    h = Harness()
    a, ja = h.join_new()
    b, jb = h.join_new()
    h.advance(3000)
    h.advance(3000)
    leader = ja.result.leader_id
    follower = b if leader == a else a
    gen = ja.result.generation_id
    waiting = h.sync(follower, gen)
    assert not waiting.done
    h.sync(leader, gen, {leader: b"all"})
    assert waiting.result.error == E.none and waiting.result.assignment == b""
    assert waiting.result.protocol_type == "consumer" and waiting.result.protocol_name == "range"


def test_followers_that_never_sync_are_removed_after_the_rebalance_timeout():
    h = Harness()
    a, ja = h.join_new(session=60_000, rebalance=20_000)
    b, jb = h.join_new(session=60_000, rebalance=20_000)
    h.advance(3000)
    h.advance(3000)
    leader = ja.result.leader_id
    gen = ja.result.generation_id
    h.sync(leader, gen, {})
    h.advance(19_999)
    assert len(h.group().members) == 2
    h.advance(1)
    assert list(h.group().members) == [leader]
    assert h.group().state is S.PREPARING_REBALANCE


def test_a_new_member_during_completing_rebalance_fails_the_pending_syncs():
    h = Harness()
    a, ja = h.join_new()
    b, jb = h.join_new()
    h.advance(3000)
    h.advance(3000)
    leader = ja.result.leader_id
    follower = b if leader == a else a
    waiting = h.sync(follower, ja.result.generation_id)
    assert not waiting.done and h.group().state is S.COMPLETING_REBALANCE
    _c, jc = h.join_new()
    assert waiting.result.error == E.rebalance_in_progress and waiting.result.assignment == b""
    assert h.group().state is S.PREPARING_REBALANCE and not jc.done


def test_member_rejoining_with_same_metadata_while_completing_gets_the_same_answer():
    h = Harness()
    a, ja = h.join_new()
    h.advance(3000)
    again = h.join(member_id=a)
    assert again.result.error == E.none and again.result.generation_id == ja.result.generation_id
    assert again.result.members == ja.result.members
    assert h.group().state is S.COMPLETING_REBALANCE


def test_pending_member_that_never_rejoins_expires():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    first = h.join()  # a third member asks for an id and then disappears
    assert first.result.error == E.member_id_required
    h.join(member_id=leader)
    jf = h.join(member_id=follower)
    assert not jf.done  # as in Kafka, the rebalance waits for the pending member...
    h.advance(9999)
    assert not jf.done
    h.advance(1)  # ...until its session timeout drops it
    assert jf.result.error == E.none and len(h.group().members) == 2
    assert first.result.member_id not in h.group().members


# -- protocols --------------------------------------------------------------------------------------
def test_protocol_selection_and_inconsistent_protocols():
    h = Harness(initial_rebalance_delay_ms=0)
    _a, ja = h.join_new(protocols=[("roundrobin", b"1"), ("range", b"2")])
    h.advance(0)
    assert ja.result.protocol_name == "roundrobin"
    bad = h.join(protocols=[("sticky", b"")])
    assert bad.result.error == E.inconsistent_group_protocol
    other_type = h.join(protocol_type="connect")
    assert other_type.result.error == E.inconsistent_group_protocol
    assert h.join(protocols=[]).result.error in (E.inconsistent_group_protocol, E.member_id_required)


def test_session_timeout_bounds_and_group_size_limit():
    h = Harness(max_size=1, initial_rebalance_delay_ms=0)
    assert h.join(session=5999).result.error == E.invalid_session_timeout
    assert h.join(session=1_800_001).result.error == E.invalid_session_timeout
    a, ja = h.join_new()
    h.advance(0)
    assert ja.result.error == E.none
    second = h.join(v4=False)
    assert second.result.error == E.group_max_size_reached
    assert h.join(group="").result.error == E.invalid_group_id


# -- static membership ------------------------------------------------------------------------------
def test_restarted_static_member_gets_its_assignment_back_without_a_rebalance():
    h = Harness()
    ja = h.join(instance="i-1")  # static members get their id at once
    jb = h.join(instance="i-2")
    h.advance(3000)
    h.advance(3000)
    a, b = ja.result.member_id, jb.result.member_id
    gen = ja.result.generation_id
    leader = ja.result.leader_id
    follower = b if leader == a else a
    h.sync(follower, gen, instance="i-2" if follower == b else "i-1")
    h.sync(leader, gen, {a: b"A", b: b"B"}, instance="i-1" if leader == a else "i-2")
    assert h.group().state is S.STABLE
    # the process with instance i-2 restarts: unknown member id, same instance id
    rejoined = h.join(instance="i-2")
    r = rejoined.result
    assert r.error == E.none and r.member_id != b and r.generation_id == gen
    assert r.leader_id == leader  # the old leader id: the new member computes no assignment
    assert h.group().state is S.STABLE
    sync = h.sync(r.member_id, gen, instance="i-2")
    assert sync.result.assignment == b"B"
    # the old incarnation is fenced
    assert h.coordinator.heartbeat("g", b, "i-2", gen) == E.fenced_instance_id
    assert h.coordinator.heartbeat("g", r.member_id, "i-2", gen) == E.none


def test_static_member_survives_a_rebalance_it_misses_until_its_session_ends():
    h = Harness()
    ja = h.join(instance="i-1")
    jb = h.join(instance="i-2")
    h.advance(3000)
    h.advance(3000)
    a, b = ja.result.member_id, jb.result.member_id
    gen = ja.result.generation_id
    h.sync(a, gen, {a: b"A", b: b"B"}, instance="i-1")
    h.sync(b, gen, instance="i-2")
    ja2 = h.join(member_id=a, instance="i-1")  # a (leader) rebalances; b heartbeats, never rejoins
    for _ in range(9):
        h.advance(3000)
        assert h.coordinator.heartbeat("g", b, "i-2", gen) == E.rebalance_in_progress
    h.advance(3000)  # the rebalance timeout
    assert ja2.result.generation_id == gen + 1
    assert set(h.group().members) == {a, b}  # static members are not dropped by the rebalance
    h.advance(10_000)
    assert b not in h.group().members  # ...but when their session runs out


def test_leave_by_instance_id():
    h = Harness(initial_rebalance_delay_ms=0)
    ja = h.join(instance="i-1")
    h.advance(0)
    error, results = h.coordinator.leave_group("g", [("", "i-1"), ("", "i-9")])
    assert [r[2] for r in results] == [E.none, E.unknown_member_id]
    assert ja.result.member_id not in h.group().members


# -- offsets ----------------------------------------------------------------------------------------
def commit(h, group, offsets, member="", gen=-1):
    return h.coordinator.commit_offsets(group, member, None, gen, {
        tp: OffsetAndMetadata(o, 3, meta, h.now) for tp, (o, meta) in offsets.items()})


def test_simple_commit_and_fetch_round_trip_metadata():
    h = Harness()
    assert commit(h, "simple", {("t", 0): (10, "meta-ä"), ("t", 1): (20, "")}) == \
        {("t", 0): E.none, ("t", 1): E.none}
    error, found = h.coordinator.fetch_offsets("simple", [("t", 0), ("t", 2)])
    assert error == E.none and found[("t", 0)].offset == 10 and found[("t", 0)].metadata == "meta-ä"
    assert found[("t", 0)].leader_epoch == 3 and found[("t", 2)] is None
    assert set(h.coordinator.fetch_offsets("simple", None)[1]) == {("t", 0), ("t", 1)}
    assert h.coordinator.fetch_offsets("unknown", None) == (E.none, {})


def test_metadata_too_large_and_member_commits():
    h = Harness(offset_metadata_max_bytes=4)
    leader, follower, gen = h.stable_pair()
    out = commit(h, "g", {("t", 0): (1, "12345"), ("t", 1): (2, "1234")}, member=leader, gen=gen)
    assert out == {("t", 0): E.offset_metadata_too_large, ("t", 1): E.none}


def test_failed_append_changes_nothing():
    h = Harness()
    h.log.fail_with = KafkaError("no leader", E.not_leader_or_follower)
    assert commit(h, "g", {("t", 0): (1, "")}) == {("t", 0): E.not_coordinator}
    assert h.coordinator.fetch_offsets("g", [("t", 0)])[1][("t", 0)] is None


def test_offsets_and_groups_survive_a_reload():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    commit(h, "g", {("t", 0): (7, "m")}, member=leader, gen=gen)
    commit(h, "simple", {("u", 1): (9, "")})
    commit(h, "gone", {("u", 2): (1, "")})
    assert h.coordinator.delete_groups(["gone"]) == {"gone": E.none}
    reloaded = GroupCoordinator(h.config, h.log, lambda: h.now)
    for p in h.log.partitions:
        reloaded.load_partition(p)
    assert set(reloaded.groups) == {"g", "simple"}
    g = reloaded.groups["g"]
    assert g.state is S.STABLE and g.generation_id == gen and set(g.members) == {leader, follower}
    assert g.leader_id == leader and g.members[follower].assignment == b"F"
    assert g.offsets[("t", 0)].offset == 7 and g.offsets[("t", 0)].metadata == "m"
    # members that do not come back are dropped by their session timeout after the reload
    h.now += 5000
    reloaded.poll()
    assert reloaded.heartbeat("g", follower, None, gen) == E.none
    h.now += 5000
    reloaded.poll()
    assert leader not in reloaded.groups["g"].members
    assert reloaded.groups["g"].state is S.PREPARING_REBALANCE


def test_reload_skips_records_of_other_types():
    h = Harness()
    commit(h, "simple", {("u", 1): (9, "")})
    p = h.coordinator.partition_for("simple")
    h.log.partitions[p].insert(0, (struct.pack(">h", 9) + b"future", b"x"))
    reloaded = GroupCoordinator(h.config, h.log, lambda: h.now)
    reloaded.load_partition(p)
    assert reloaded.groups["simple"].offsets[("u", 1)].offset == 9


def test_loading_partition_answers_like_kafka():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    h.coordinator.loading.add(h.coordinator.partition_for("g"))
    assert h.join().result.error == E.coordinator_load_in_progress
    assert h.coordinator.heartbeat("g", leader, None, gen) == E.none
    assert h.sync(leader, gen).result.error == E.rebalance_in_progress
    assert h.coordinator.fetch_offsets("g", None)[0] == E.coordinator_load_in_progress
    assert h.coordinator.list_groups()[0] == E.coordinator_load_in_progress


def test_offsets_expire_only_for_empty_groups():
    h = Harness(offsets_retention_ms=60_000)
    leader, follower, gen = h.stable_pair()
    commit(h, "g", {("t", 0): (5, "")}, member=leader, gen=gen)
    commit(h, "simple", {("t", 0): (5, "")})
    for _ in range(30):  # the active group keeps its offsets however old
        h.advance(3000)
        h.coordinator.heartbeat("g", leader, None, gen)
        h.coordinator.heartbeat("g", follower, None, gen)
    assert h.coordinator.expire_offsets() == 1  # only the group-less commit expired
    assert "simple" not in h.coordinator.groups
    assert ("t", 0) in h.group().offsets
    h.coordinator.leave_group("g", [(leader, None), (follower, None)])
    assert h.group().state is S.EMPTY
    h.now += 59_999
    assert h.coordinator.expire_offsets() == 0
    h.now += 1
    assert h.coordinator.expire_offsets() == 1
    assert "g" not in h.coordinator.groups  # empty and offset-less: removed


def test_delete_groups_and_offsets():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    commit(h, "g", {("t", 0): (5, ""), ("other", 0): (1, "")}, member=leader, gen=gen)
    assert h.coordinator.delete_groups(["g", "nope"]) == {"g": E.non_empty_group, "nope": E.group_id_not_found}
    error, results = h.coordinator.delete_offsets("g", [("t", 0), ("other", 0)])
    assert error == E.none and results == {("t", 0): E.group_subscribed_to_topic, ("other", 0): E.none}
    assert set(h.group().offsets) == {("t", 0)}
    h.coordinator.leave_group("g", [(leader, None), (follower, None)])
    assert h.coordinator.delete_offsets("g", [("t", 0)]) == (E.none, {("t", 0): E.none})
    assert h.coordinator.delete_groups(["g"]) == {"g": E.none}
    assert h.coordinator.describe_group("g")[1].state == "Dead"
    assert h.coordinator.delete_offsets("g", [("t", 0)])[0] == E.group_id_not_found
    tombstones = [v for _k, v in h.log.partitions[h.coordinator.partition_for("g")] if v is None]
    assert len(tombstones) >= 3


def test_describe_and_list():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    commit(h, "simple", {("t", 0): (1, "")})
    error, summary = h.coordinator.describe_group("g")
    assert error == E.none and summary.state == "Stable" and summary.protocol == "range"
    assert {m.member_id: m.assignment for m in summary.members} == {leader: b"L", follower: b"F"}
    assert all(m.metadata == subscription("t") for m in summary.members)
    assert h.coordinator.list_groups()[1] == [("g", "consumer", "Stable", "classic"),
                                                 ("simple", "", "Empty", "classic")]
    assert h.coordinator.list_groups({"empty"})[1] == [("simple", "", "Empty", "classic")]
    h.join(member_id=leader)
    _error, preparing = h.coordinator.describe_group("g")
    assert preparing.state == "PreparingRebalance" and preparing.protocol == ""
    assert all(m.assignment == b"" for m in preparing.members)


def test_group_records_use_kafkas_formats():
    h = Harness()
    leader, follower, gen = h.stable_pair()
    records = h.log.partitions[h.coordinator.partition_for("g")]
    key, value = records[-1]
    assert fmt.decode_key(key) == fmt.GroupMetadataKey("g")
    decoded = fmt.decode_group_metadata_value(value)
    assert decoded.generation == gen and decoded.protocol == "range" and decoded.leader == leader
    assert {m.member_id: m.assignment for m in decoded.members} == {leader: b"L", follower: b"F"}


def test_shutdown_answers_parked_joins_and_syncs():
    h = Harness()
    a, ja = h.join_new()
    b, jb = h.join_new()
    h.advance(3000)
    h.advance(3000)
    leader = ja.result.leader_id
    follower = b if leader == a else a
    waiting_sync = h.sync(follower, ja.result.generation_id)
    _c, waiting_join = h.join_new(group="other")
    assert not waiting_sync.done and not waiting_join.done
    h.coordinator.shutdown()
    assert waiting_sync.result.error == E.not_coordinator
    assert waiting_join.result.error == E.not_coordinator
    assert h.join().result.error == E.coordinator_not_available
    assert h.coordinator.timers.next_deadline() is None
