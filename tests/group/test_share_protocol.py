"""Share-group membership (group/share_protocol.py): Kafka's ShareGroupHeartbeat rules one example at
a time, the simple assignor's guarantees as properties, and random runs of joins, leaves, heartbeats,
session expiries and topic changes in which every decision's records are applied (and the whole log
replayed from scratch) and checked against the answers."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kbroker.errors import ErrorCode as E
from kbroker.group.share_protocol import (
    LEAVE_EPOCH,
    Decision,
    GroupError,
    ShareGroupCurrentMemberAssignment,
    ShareGroupCurrentMemberAssignmentTombstone,
    ShareGroupEnv,
    ShareGroupMemberMetadata,
    ShareGroupMemberMetadataTombstone,
    ShareGroupMetadata,
    ShareGroupMetadataTombstone,
    ShareGroupPartitionMetadata,
    ShareGroupState,
    ShareGroupTargetAssignmentMember,
    ShareGroupTargetAssignmentMemberTombstone,
    ShareGroupTargetAssignmentMetadata,
    ShareGroupTargetAssignmentMetadataTombstone,
    ShareHeartbeatRequest,
    apply,
    copy_state,
    expire,
    fence,
    heartbeat,
    simple_assign,
    subscribed_topics,
    validate,
)

A = "7f1c2a4e-0000-4000-8000-00000000000a"
B = "7f1c2a4e-0000-4000-8000-00000000000b"
C = "7f1c2a4e-0000-4000-8000-00000000000c"


def env(topics: dict[str, int], **kw) -> ShareGroupEnv:
    return ShareGroupEnv(now_ms=0, topics=topics, **kw)


class Group:
    """A group, its log, and the clients' view: each decision's records are applied to the group."""

    def __init__(self, topics: dict[str, int] | None = None, **kw) -> None:
        self.state = ShareGroupState("g")
        self.log: list = []
        self.topics = dict(topics if topics is not None else {"t": 4})
        self.kw = kw
        self.epochs: dict[str, int] = {}

    def env(self) -> ShareGroupEnv:
        return env(self.topics, **self.kw)

    def commit(self, decision: Decision) -> Decision:
        for record in decision.records:
            apply(self.state, record)
        self.log.extend(decision.records)
        return decision

    def send(self, member_id: str, epoch: int | None = None, topics: tuple[str, ...] | None = None,
             **kw) -> Decision:
        epoch = self.epochs.get(member_id, 0) if epoch is None else epoch
        req = ShareHeartbeatRequest(member_id, epoch, topic_names=topics, **kw)
        decision = heartbeat(self.state, req, self.env())
        assert heartbeat(copy_state(self.state), req, self.env()) == decision  # deterministic
        self.commit(decision)
        self.epochs[member_id] = decision.response.member_epoch
        if decision.response.member_epoch == LEAVE_EPOCH:
            del self.epochs[member_id]
        return decision

    def join(self, member_id: str, *topics: str, **kw) -> Decision:
        return self.send(member_id, 0, tuple(topics) or ("t",), **kw)

    def replayed(self) -> ShareGroupState:
        state = ShareGroupState("g")
        for record in self.log:
            apply(state, record)
        return state


def raises(code: E, fn, *args) -> GroupError:
    with pytest.raises(GroupError) as info:
        fn(*args)
    assert info.value.code == code, info.value.message
    return info.value


# -- validation (Kafka's throwIfShareGroupHeartbeatRequestIsInvalid, v1) -------------------------------

@pytest.mark.parametrize("req, group_id, message", [
    (ShareHeartbeatRequest("", 0, topic_names=("t",)), "g", "MemberId can't be empty."),
    (ShareHeartbeatRequest("  ", 3), "g", "MemberId can't be empty."),
    (ShareHeartbeatRequest(A, 0, topic_names=("t",)), " ", "GroupId can't be empty."),
    (ShareHeartbeatRequest(A, 0, rack_id="", topic_names=("t",)), "g", "RackId can't be empty."),
    (ShareHeartbeatRequest(A, 0), "g", "SubscribedTopicNames must be set in first request."),
    (ShareHeartbeatRequest(A, 0, topic_names=()), "g", "SubscribedTopicNames must be set in first request."),
    (ShareHeartbeatRequest(A, -2), "g", "MemberEpoch is invalid."),
])
def test_invalid_requests(req, group_id, message):
    error = raises(E.invalid_request, validate, req, group_id)
    assert error.message == message
    raises(E.invalid_request, heartbeat, ShareGroupState(group_id), req, env({"t": 1}))


def test_valid_requests_pass():
    validate(ShareHeartbeatRequest(A, 0, rack_id="r1", topic_names=("t",)), "g")
    validate(ShareHeartbeatRequest(A, 7), "g")
    validate(ShareHeartbeatRequest(A, LEAVE_EPOCH), "g")


# -- joining, assignment, epochs ------------------------------------------------------------------------

def test_first_join_creates_the_group_and_assigns_everything():
    g = Group({"t": 3})
    d = g.join(A, "t", client_id="c1", client_host="/10.0.0.1")
    assert [type(r) for r in d.records] == [
        ShareGroupMemberMetadata, ShareGroupPartitionMetadata, ShareGroupMetadata,
        ShareGroupTargetAssignmentMember, ShareGroupTargetAssignmentMetadata, ShareGroupCurrentMemberAssignment]
    assert d.response.member_id == A and d.response.member_epoch == 1
    assert d.response.heartbeat_interval_ms == 5000
    assert d.response.assignment == {"t": frozenset({0, 1, 2})}
    s = g.state
    assert (s.epoch, s.assignment_epoch, s.state_name()) == (1, 1, "Stable")
    assert s.subscription_metadata == {"t": 3}
    m = s.members[A]
    assert (m.epoch, m.previous_epoch, m.client_id, m.client_host, m.topic_names) == (1, 0, "c1", "/10.0.0.1", ("t",))
    assert subscribed_topics(s) == {"t"}


def test_no_revocation_step_a_member_takes_its_target_at_once():
    g = Group({"t": 4})
    g.join(A)
    d = g.join(B)
    assert g.state.epoch == 2 and d.response.member_epoch == 2
    assert d.response.assignment == {"t": frozenset({2, 3})}
    # A still holds everything until it heartbeats; then it takes the new target directly
    assert g.state.members[A].assigned == {"t": frozenset({0, 1, 2, 3})}
    d = g.send(A)
    assert d.response.member_epoch == 2
    assert d.response.assignment == {"t": frozenset({0, 1})}
    assert g.state.members[A].previous_epoch == 1
    # nothing changed: no records, no assignment in the answer
    d = g.send(A)
    assert d.records == [] and d.response.assignment is None and d.response.member_epoch == 2


def test_full_request_gets_the_assignment_even_when_unchanged():
    g = Group({"t": 2})
    g.join(A)
    d = g.send(A, topics=("t",))
    assert d.records == [] and d.response.assignment == {"t": frozenset({0, 1})}


def test_more_members_than_partitions_share_partitions():
    g = Group({"t": 2})
    for m in (A, B, C):
        g.join(m)
    for m in (A, B, C):
        g.send(m)
    loads = sorted(len(g.state.members[m].assigned["t"]) for m in (A, B, C))
    assert loads == [1, 1, 2]
    holders = [sum(p in g.state.members[m].assigned["t"] for m in (A, B, C)) for p in range(2)]
    assert holders == [2, 2]  # ceil(3 / 2) members share each partition


def test_single_partition_is_shared_by_everyone():
    g = Group({"t": 1})
    for m in (A, B, C):
        g.join(m)
    for m in (A, B, C):
        assert g.send(m).response.member_epoch == 3
        assert g.state.members[m].assigned == {"t": frozenset({0})}


def test_unknown_member_with_a_nonzero_epoch():
    g = Group()
    g.join(A)
    raises(E.unknown_member_id, g.send, B, 1)


def test_nonzero_epoch_to_a_missing_group():
    # membership is in memory: a group unknown after a coordinator failover tells its members to join again
    raises(E.unknown_member_id, heartbeat, ShareGroupState("g"), ShareHeartbeatRequest(A, 1), env({"t": 1}))
    raises(E.group_id_not_found, heartbeat, ShareGroupState("g"), ShareHeartbeatRequest(A, LEAVE_EPOCH),
           env({"t": 1}))


def test_epoch_fencing_and_the_lost_answer():
    g = Group({"t": 2})
    g.join(A)
    g.join(B)
    g.send(A)  # A: epoch 2, previous 1
    error = raises(E.fenced_member_epoch, g.send, A, 3)
    assert "greater member epoch (3)" in error.message
    raises(E.fenced_member_epoch, g.send, A, 0, ("t",))  # epoch 0 is neither current nor previous
    g.join(C)  # epoch 3
    g.send(A)  # A: epoch 3, previous 2
    raises(E.fenced_member_epoch, g.send, A, 1)
    d = g.send(A, 2)  # the answer at epoch 3 was lost: accepted, told epoch 3 again
    assert d.response.member_epoch == 3 and d.records == []


def test_rejoin_at_epoch_zero_accepted_while_the_previous_epoch_is_zero():
    g = Group({"t": 2})
    g.join(A)
    d = g.join(A)  # the join's answer was lost: A's previous epoch is 0
    assert d.records == [] and d.response.member_epoch == 1
    assert d.response.assignment == {"t": frozenset({0, 1})}


def test_group_max_size():
    g = Group({"t": 2}, max_size=2)
    g.join(A)
    g.join(B)
    error = raises(E.group_max_size_reached, g.join, C)
    assert error.message == "The share group has reached its maximum capacity of 2 members."
    g.send(A)  # members already in are fine
    g.send(A, LEAVE_EPOCH)
    g.join(C)


def test_leave_removes_the_member_and_bumps_the_epoch():
    g = Group({"t": 4})
    g.join(A)
    g.join(B)
    g.send(A)
    d = g.send(B, LEAVE_EPOCH)
    assert d.response.member_id == B and d.response.member_epoch == LEAVE_EPOCH
    assert d.removed == [B]
    assert [type(r) for r in d.records] == [
        ShareGroupCurrentMemberAssignmentTombstone, ShareGroupTargetAssignmentMemberTombstone,
        ShareGroupMemberMetadataTombstone, ShareGroupMetadata]
    assert B not in g.state.members and B not in g.state.target and g.state.epoch == 3
    d = g.send(A)
    assert d.response.member_epoch == 3 and d.response.assignment == {"t": frozenset(range(4))}
    raises(E.unknown_member_id, g.send, B, LEAVE_EPOCH)
    g.send(A, LEAVE_EPOCH)
    assert g.state.state_name() == "Empty" and g.state.exists
    assert g.state.subscription_metadata == {} and subscribed_topics(g.state) == set()


def test_leave_needs_no_epoch_check():
    g = Group()
    g.join(A)
    assert g.send(A, LEAVE_EPOCH).response.member_epoch == LEAVE_EPOCH


def test_expire_fences_and_is_idempotent():
    g = Group({"t": 2, "u": 1})
    g.join(A, "t")
    g.join(B, "u")
    d = g.commit(expire(g.state, B))
    assert d.response is None and d.removed == [B]
    assert ShareGroupPartitionMetadata({"t": 2}) in d.records  # "u" is no longer subscribed
    assert g.state.subscription_metadata == {"t": 2} and g.state.epoch == 3
    assert expire(g.state, B).records == [] and fence(g.state, "nobody").records == []


def test_subscription_change_bumps_and_filters_at_once():
    g = Group({"t": 2, "u": 2})
    g.join(A, "t", "u")
    d = g.send(A, topics=("u",))
    assert g.state.epoch == 2 and d.response.member_epoch == 2
    assert d.response.assignment == {"u": frozenset({0, 1})}
    assert g.state.subscription_metadata == {"u": 2}


def test_metadata_only_changes_do_not_bump():
    g = Group({"t": 2})
    g.join(A, rack_id="r1", client_id="x")
    d = g.send(A, rack_id="r2", client_id="y")
    assert [type(r) for r in d.records] == [ShareGroupMemberMetadata]
    assert g.state.epoch == 1 and g.state.members[A].rack_id == "r2"
    d = g.send(A, client_id="y")  # rack kept when not sent
    assert d.records == [] and g.state.members[A].rack_id == "r2"


def test_partition_changes_bump_the_group_epoch():
    g = Group({"t": 2})
    g.join(A)
    g.join(B)
    g.send(A)
    g.topics["t"] = 4
    d = g.send(A)
    assert g.state.epoch == 3 and g.state.subscription_metadata == {"t": 4}
    assert len(d.response.assignment["t"]) == 2 and 0 in d.response.assignment["t"]  # sticky
    assert len(g.state.target[B]["t"]) == 2 and 1 in g.state.target[B]["t"]


def test_topics_created_later_and_deleted():
    g = Group({})
    d = g.join(A, "t")
    assert d.response.member_epoch == 1 and d.response.assignment == {}
    g.topics["t"] = 2
    d = g.send(A)
    assert d.response.member_epoch == 2 and d.response.assignment == {"t": frozenset({0, 1})}
    del g.topics["t"]
    d = g.send(A)
    assert d.response.member_epoch == 3 and d.response.assignment == {}


def test_internal_topics_are_never_assigned():
    g = Group({"t": 1, "__consumer_offsets": 50}, internal_topics=frozenset({"__consumer_offsets"}))
    d = g.join(A, "t", "__consumer_offsets")
    assert d.response.assignment == {"t": frozenset({0})}
    assert g.state.subscription_metadata == {"t": 1}


def test_the_log_replays_to_the_same_group():
    g = Group({"t": 3, "u": 2})
    g.join(A, "t")
    g.join(B, "t", "u")
    g.send(A)
    g.commit(expire(g.state, B))
    g.join(C, "u")
    assert g.replayed() == g.state


def test_group_tombstones():
    g = Group()
    g.join(A)
    g.send(A, LEAVE_EPOCH)
    for record in (ShareGroupTargetAssignmentMetadataTombstone(), ShareGroupMetadataTombstone()):
        apply(g.state, record)
    assert g.state.assignment_epoch == -1 and g.state.state_name() == "Dead" and not g.state.exists
    raises(E.unknown_member_id, g.send, A, 1)


def test_decisions_do_not_mutate_the_state():
    g = Group({"t": 3})
    g.join(A)
    before = copy_state(g.state)
    heartbeat(g.state, ShareHeartbeatRequest(B, 0, topic_names=("t",)), g.env())
    fence(g.state, A)
    assert g.state == before


# -- the assignor -----------------------------------------------------------------------------------

TOPIC_NAMES = ("a", "b", "c", "d")
MEMBER_IDS = tuple(f"m{i:02d}" for i in range(12))

members_st = st.dictionaries(st.sampled_from(MEMBER_IDS), st.frozensets(st.sampled_from(TOPIC_NAMES)), max_size=12)
topics_st = st.dictionaries(st.sampled_from(TOPIC_NAMES), st.integers(0, 9))
current_st = st.dictionaries(
    st.sampled_from(MEMBER_IDS),
    st.dictionaries(st.sampled_from(TOPIC_NAMES), st.frozensets(st.integers(0, 11), max_size=8)), max_size=12)


def check_assignment(members, topics, out) -> None:
    assert set(out) == set(members)
    for topic, n in topics.items():
        subs = [m for m in members if topic in members[m]]
        if not subs or n == 0:
            assert all(topic not in out[m] for m in out)
            continue
        holders = [sum(p in out[m].get(topic, ()) for m in subs) for p in range(n)]
        sharing = -(-len(subs) // n)
        assert holders == [sharing] * n  # every partition assigned, shared as little as possible
        loads = [len(out[m].get(topic, ())) for m in subs]
        assert max(loads) - min(loads) <= 1
        if len(subs) > n:
            assert min(loads) >= 1
    for m, assigned in out.items():
        assert set(assigned) <= set(members[m]) & set(topics)
        for topic, parts in assigned.items():
            assert parts and all(0 <= p < topics[topic] for p in parts)


@settings(max_examples=200, deadline=None)
@given(members_st, topics_st, current_st)
def test_simple_assign_properties(members, topics, current):
    out = simple_assign(members, topics, current)
    check_assignment(members, topics, out)
    # deterministic, whatever the order the members come in
    assert simple_assign(dict(reversed(list(members.items()))), topics, dict(current)) == out
    # sticky: an unchanged group keeps its assignment
    assert simple_assign(members, topics, out) == out


@settings(max_examples=100, deadline=None)
@given(members_st, topics_st, st.sampled_from(MEMBER_IDS), st.frozensets(st.sampled_from(TOPIC_NAMES)))
def test_simple_assign_moves_little_when_a_member_joins(members, topics, newcomer, subs):
    assume(newcomer not in members)
    before = simple_assign(members, topics)
    grown = dict(members)
    grown[newcomer] = subs
    after = simple_assign(grown, topics, before)
    check_assignment(grown, topics, after)
    for m in members:
        for topic, parts in after[m].items():
            if len([x for x in grown if topic in grown[x]]) <= topics[topic]:
                # partitions are not shared: a member only gives partitions away
                assert parts <= before[m].get(topic, frozenset())


def test_simple_assign_trades_when_the_greedy_fill_is_stuck():
    # m00 and m02 fill partition 1; partition 0 then needs a second holder and only m01, which holds
    # it already, has room: m00 hands partition 1 to m01 and takes partition 0
    members = {m: frozenset({"a"}) for m in ("m00", "m01", "m02")}
    out = simple_assign(members, {"a": 2}, {"m01": {"a": frozenset({0})}})
    check_assignment(members, {"a": 2}, out)
    assert out == {"m00": {"a": frozenset({0})}, "m01": {"a": frozenset({0, 1})}, "m02": {"a": frozenset({1})}}


def test_simple_assign_examples():
    assert simple_assign({}, {"a": 3}) == {}
    assert simple_assign({"m": frozenset({"a", "zz"})}, {"a": 2}) == {"m": {"a": frozenset({0, 1})}}
    assert simple_assign({"m": frozenset({"a"})}, {"a": 0}) == {"m": {}}
    # balanced within each topic; the member with less so far takes a topic's odd partition
    out = simple_assign({"m0": frozenset({"a", "b"}), "m1": frozenset({"a", "b"})}, {"a": 3, "b": 3})
    assert sorted(sum(len(ps) for ps in out[m].values()) for m in out) == [3, 3]


def test_simple_assign_large_group_is_fast():
    members = {f"m{i:03d}": frozenset({"t"}) for i in range(200)}
    out = simple_assign(members, {"t": 5000})
    check_assignment(members, {"t": 5000}, out)
    members.pop("m007")
    check_assignment(members, {"t": 5000}, simple_assign(members, {"t": 5000}, out))


# -- random runs ---------------------------------------------------------------------------------------

ops_st = st.lists(st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBER_IDS[:6]), st.frozensets(st.sampled_from(TOPIC_NAMES[:3]),
                                                                              min_size=1)),
    st.tuples(st.just("beat"), st.sampled_from(MEMBER_IDS[:6]), st.none()),
    st.tuples(st.just("resubscribe"), st.sampled_from(MEMBER_IDS[:6]),
              st.frozensets(st.sampled_from(TOPIC_NAMES[:3]), min_size=1)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBER_IDS[:6]), st.none()),
    st.tuples(st.just("expire"), st.sampled_from(MEMBER_IDS[:6]), st.none()),
    st.tuples(st.just("partitions"), st.sampled_from(TOPIC_NAMES[:3]), st.integers(0, 6)),
    st.tuples(st.just("delete"), st.sampled_from(TOPIC_NAMES[:3]), st.none()),
), max_size=40)


def settled_invariants(state: ShareGroupState, topics: dict[str, int]) -> None:
    """Once every member has heartbeaten since the last change: all at the assignment epoch, each
    holding its target, and the members' assignments cover the subscribed partitions in balance."""
    assert state.epoch == state.assignment_epoch
    members = {m: frozenset(x.topic_names) for m, x in state.members.items()}
    for m, member in state.members.items():
        assert member.epoch == state.assignment_epoch
        assert member.assigned == state.target[m]
    check_assignment(members, {t: n for t, n in topics.items() if t in state.subscription_metadata},
                     {m: dict(x.assigned) for m, x in state.members.items()})


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(TOPIC_NAMES[:3]), st.integers(0, 6)), ops_st)
def test_random_runs(initial_topics, ops):
    g = Group(initial_topics)
    for op, who, arg in ops:
        before = copy_state(g.state)
        decision = None
        if op == "join" and who not in g.state.members:
            decision = g.join(who, *sorted(arg))
        elif op == "beat" and who in g.state.members:
            decision = g.send(who)
        elif op == "resubscribe" and who in g.state.members:
            decision = g.send(who, topics=tuple(sorted(arg)))
        elif op == "leave" and who in g.state.members:
            decision = g.send(who, LEAVE_EPOCH)
        elif op == "expire":
            decision = g.commit(expire(g.state, who))
            g.epochs.pop(who, None)
        elif op == "partitions":
            g.topics[who] = max(arg, g.topics.get(who, 0))  # partitions only grow
        elif op == "delete":
            g.topics.pop(who, None)
        if decision is None:
            continue
        # the records applied to a copy give the state the answer reports
        after = copy_state(before)
        for record in decision.records:
            apply(after, record)
        assert after == g.state
        response = decision.response
        if response is not None and response.member_epoch != LEAVE_EPOCH:
            member = after.members[response.member_id]
            assert response.member_epoch == member.epoch == after.assignment_epoch
            assert response.assignment is None or response.assignment == member.assigned
            if response.assignment is None:
                assert member.assigned == before.members[response.member_id].assigned
        if response is not None and response.member_epoch == LEAVE_EPOCH or op == "expire":
            assert who not in after.members
        # epochs never go back
        assert after.epoch >= before.epoch and after.assignment_epoch >= before.assignment_epoch
        for m, member in after.members.items():
            if m in before.members:
                assert member.epoch >= before.members[m].epoch
        # the target, whenever current, meets the assignor's guarantees
        if after.assignment_epoch == after.epoch:
            check_assignment({m: frozenset(x.topic_names) for m, x in after.members.items()},
                             after.subscription_metadata, {m: dict(after.target[m]) for m in after.members})
        # what a new coordinator loads from the log
        assert g.replayed() == g.state
    for m in sorted(g.state.members):
        g.send(m)
    if g.state.members:
        settled_invariants(g.state, g.topics)
    assert g.replayed() == g.state
