"""The consumer group protocol's decisions (group/consumer_protocol.py), on a fake clock: members
modelled as clients that do what the Kafka clients do (own what the last answer gave them, report it,
rejoin at epoch 0 when fenced), driven through random joins, leaves, heartbeats, subscription
changes, partition increases and session expiries. Invariants after every step: no partition is
owned by two clients at once; the coordinator's records replayed from scratch give the same group
(what a new coordinator loads); and once everyone heartbeats the group settles with every
subscribed partition owned by exactly one member."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.errors import ErrorCode as E
from kbroker.group import consumer_records
from kbroker.group.consumer_protocol import (Decision, GroupEnv, GroupError, HeartbeatRequest, fence, heartbeat,
                                             rebalance_expired, validate)
from kbroker.group.consumer_state import ConsumerGroupState, MemberState, apply

TOPIC_IDS = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name in ("a", "b", "c", "orders.eu", "orders.us")}
TOPIC_NAMES = {v: k for k, v in TOPIC_IDS.items()}


class Cluster:
    """One group and its clients; every decision is encoded to Kafka's records and decoded back
    before it is applied, so the log format is exercised on every step."""

    def __init__(self, topics: dict[str, int], **env) -> None:
        self.topics = dict(topics)
        self.env_args = env
        self.group = ConsumerGroupState("g")
        self.log: list[tuple[bytes, bytes | None]] = []
        self.owned: dict[str, dict[str, frozenset[int]]] = {}  # client -> what it owns now
        self.epochs: dict[str, int] = {}
        self.subs: dict[str, tuple[str, ...]] = {}
        self.now = 0

    def env(self) -> GroupEnv:
        return GroupEnv(self.now, self.topics, **self.env_args)

    def commit(self, decision: Decision) -> None:
        for record in decision.records:
            key, value = consumer_records.encode("g", record, TOPIC_IDS.get)
            self.log.append((key, value))
            decoded = consumer_records.decode(consumer_records.decode_key(key), value, TOPIC_NAMES.get)
            assert decoded == record or decoded is None
            apply(self.group, record)

    def beat(self, member: str, *, topics: tuple[str, ...] | None = None, full: bool = False, **kw):
        epoch = self.epochs.get(member, 0)
        joining = epoch == 0
        req = HeartbeatRequest(member, epoch, rebalance_timeout_ms=30000 if joining or full else -1,
                               topic_names=topics if topics is not None else (self.subs[member] if joining or full
                                                                              else None),
                               owned={} if joining else dict(self.owned.get(member, {})), **kw)
        validate(req, "g", 1, ("uniform", "range"))
        try:
            decision = heartbeat(self.group, req, self.env())
        except GroupError as exc:
            if exc.code in (E.fenced_member_epoch, E.unknown_member_id):
                self.owned[member] = {}  # a fenced client gives up everything and joins again
                self.epochs[member] = 0
            return exc.code
        self.commit(decision)
        response = decision.response
        assert response is not None and response.error == E.none
        self.epochs[member] = response.member_epoch
        if response.assignment is not None:
            self.owned[member] = dict(response.assignment)
        return E.none

    def join(self, member: str, topics: tuple[str, ...]) -> None:
        self.subs[member] = topics
        self.epochs[member] = 0
        self.owned[member] = {}
        self.beat(member, topics=topics)

    def leave(self, member: str) -> None:
        decision = heartbeat(self.group, HeartbeatRequest(member, -1), self.env())
        self.commit(decision)
        self.owned.pop(member, None)
        self.epochs.pop(member, None)
        self.subs.pop(member, None)

    def crash(self, member: str) -> None:
        """The client dies; the coordinator fences it when its session runs out."""
        self.owned.pop(member, None)
        self.epochs.pop(member, None)
        self.subs.pop(member, None)
        self.commit(fence(self.group, member))

    def check_no_double_owner(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for member, owned in self.owned.items():
            for topic, partitions in owned.items():
                for p in partitions:
                    assert (topic, p) not in seen, f"{topic}-{p} owned by {seen[(topic, p)]} and {member}"
                    seen[(topic, p)] = member

    def check_replay(self) -> None:
        """A new coordinator replaying the log sees the same group."""
        replayed = ConsumerGroupState("g")
        for key, value in self.log:
            record = consumer_records.decode(consumer_records.decode_key(key), value, TOPIC_NAMES.get)
            if record is not None:
                apply(replayed, record)
        assert replayed.epoch == self.group.epoch
        assert replayed.assignment_epoch == self.group.assignment_epoch
        assert replayed.members == self.group.members
        assert replayed.target == self.group.target
        assert replayed.owners == self.group.owners

    def settle(self, rounds: int = 8) -> None:
        for _ in range(rounds):
            for member in sorted(self.subs):
                self.beat(member)
                self.check_no_double_owner()

    def wanted(self) -> set[tuple[str, int]]:
        subscribed = {t for topics in self.subs.values() for t in topics if t in self.topics}
        return {(t, p) for t in subscribed for p in range(self.topics[t])}

    def owned_partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for owned in self.owned.values() for t, ps in owned.items() for p in ps]


def test_one_member_gets_everything_then_shares_with_a_second():
    c = Cluster({"a": 4})
    c.join("m1", ("a",))
    assert c.owned["m1"] == {"a": frozenset(range(4))}
    assert c.epochs["m1"] == 1
    c.join("m2", ("a",))
    assert c.owned["m2"] == {}  # m1 has not released anything yet
    c.beat("m1")  # told to revoke two partitions: keeps the others, same epoch
    assert len(c.owned["m1"]["a"]) == 2 and c.epochs["m1"] == 1
    assert c.group.members["m1"].current.state == MemberState.UNREVOKED_PARTITIONS
    c.beat("m1")  # it no longer owns them: moves to epoch 2
    assert c.epochs["m1"] == 2
    c.beat("m2")
    assert c.owned["m2"]["a"] == frozenset(range(4)) - c.owned["m1"]["a"]
    c.check_no_double_owner()
    c.check_replay()
    assert c.group.state_name() == "Stable"


def test_a_member_leaving_frees_its_partitions_at_once():
    c = Cluster({"a": 4})
    c.join("m1", ("a",))
    c.join("m2", ("a",))
    c.settle()
    c.leave("m2")
    c.beat("m1")
    assert c.owned["m1"] == {"a": frozenset(range(4))}


def test_errors_for_unknown_members_and_epochs():
    c = Cluster({"a": 2})
    c.join("m1", ("a",))
    with pytest.raises(GroupError) as err:
        heartbeat(c.group, HeartbeatRequest("nobody", 3), c.env())
    assert err.value.code == E.unknown_member_id
    with pytest.raises(GroupError) as err:  # from the future
        heartbeat(c.group, HeartbeatRequest("m1", 7, owned={}), c.env())
    assert err.value.code == E.fenced_member_epoch
    c.join("m2", ("a",))
    c.settle()
    m1 = c.group.members["m1"]
    stale = m1.current.previous_member_epoch
    # a step behind, owning only what it was given: its answer was lost, it is accepted
    assert heartbeat(c.group, HeartbeatRequest("m1", stale, owned=dict(m1.current.assigned)), c.env()).response
    # a step behind but owning something it was not given: fenced
    with pytest.raises(GroupError) as err:
        heartbeat(c.group, HeartbeatRequest("m1", stale, owned={"a": frozenset({0, 1})}), c.env())
    assert err.value.code == E.fenced_member_epoch


@pytest.mark.parametrize("req, code", [
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=-1, topic_names=("a",), owned={}), E.invalid_request),
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=1, topic_names=("a",), owned=None), E.invalid_request),
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=1, topic_names=(), owned={}), E.invalid_request),
    (HeartbeatRequest("", 5), E.invalid_request),
    (HeartbeatRequest("m", -3), E.invalid_request),
    (HeartbeatRequest("m", -2), E.invalid_request),
    (HeartbeatRequest("m", 1, instance_id=""), E.invalid_request),
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=1, topic_regex="(", owned={}), E.invalid_regular_expression),
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=1, topic_regex="a" * 5000, owned={}),
     E.invalid_regular_expression),
    (HeartbeatRequest("m", 0, rebalance_timeout_ms=1, topic_names=("a",), owned={}, server_assignor="sticky"),
     E.unsupported_assignor),
])
def test_invalid_requests(req, code):
    with pytest.raises(GroupError) as err:
        validate(req, "g", 1, ("uniform", "range"))
    assert err.value.code == code


def test_group_max_size():
    c = Cluster({"a": 2}, max_size=1)
    c.join("m1", ("a",))
    with pytest.raises(GroupError) as err:
        heartbeat(c.group, HeartbeatRequest("m2", 0, rebalance_timeout_ms=1, topic_names=("a",), owned={}), c.env())
    assert err.value.code == E.group_max_size_reached


def test_static_member_leaving_for_now_keeps_its_partitions_for_its_next_incarnation():
    c = Cluster({"a": 4})
    c.join("m1", ("a",))
    c.subs["s1"] = ("a",)
    c.epochs["s1"] = 0
    c.beat("s1", topics=("a",), instance_id="i1")
    c.settle()
    kept = c.owned["s1"]
    assert kept
    decision = heartbeat(c.group, HeartbeatRequest("s1", -2, instance_id="i1"), c.env())
    c.commit(decision)
    assert decision.response.member_epoch == -2
    c.owned.pop("s1")
    # another incarnation with the same instance id takes over, same partitions, no rebalance
    epoch = c.group.epoch
    c.subs["s2"] = ("a",)
    c.epochs["s2"] = 0
    c.owned["s2"] = {}
    c.beat("s2", topics=("a",), instance_id="i1")
    assert c.owned["s2"] == kept
    assert c.group.epoch == epoch and "s1" not in c.group.members
    # a third one while s2 is present: UNRELEASED_INSTANCE_ID
    with pytest.raises(GroupError) as err:
        heartbeat(c.group, HeartbeatRequest("s3", 0, instance_id="i1", rebalance_timeout_ms=1, topic_names=("a",),
                                            owned={}), c.env())
    assert err.value.code == E.unreleased_instance_id
    # and the replaced id is fenced
    with pytest.raises(GroupError) as err:
        heartbeat(c.group, HeartbeatRequest("s1", 3, instance_id="i1"), c.env())
    assert err.value.code == E.fenced_instance_id
    c.check_replay()


def test_regex_subscription_picks_up_a_new_topic():
    c = Cluster({"orders.eu": 2, "a": 2})
    c.subs["m1"] = ()
    c.epochs["m1"] = 0
    c.owned["m1"] = {}
    decision = heartbeat(c.group, HeartbeatRequest("m1", 0, rebalance_timeout_ms=1, topic_regex=r"orders\..*",
                                                   owned={}), c.env())
    c.commit(decision)
    c.epochs["m1"] = decision.response.member_epoch
    c.owned["m1"] = dict(decision.response.assignment)
    assert c.owned["m1"] == {"orders.eu": frozenset({0, 1})}
    c.topics["orders.us"] = 3
    c.topics["__consumer_offsets"] = 50
    c.beat("m1")
    assert c.owned["m1"] == {"orders.eu": frozenset({0, 1}), "orders.us": frozenset({0, 1, 2})}


def test_partition_increase_is_assigned():
    c = Cluster({"a": 2})
    c.join("m1", ("a",))
    c.topics["a"] = 5
    c.beat("m1")
    assert c.owned["m1"] == {"a": frozenset(range(5))}


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    c = Cluster({"a": 4})
    c.join("m1", ("a",))
    c.join("m2", ("a",))
    c.beat("m1")
    member = c.group.members["m1"]
    assert member.current.state == MemberState.UNREVOKED_PARTITIONS
    assert rebalance_expired(c.group, "m1", member.epoch - 1).records == []  # a stale timer does nothing
    c.commit(rebalance_expired(c.group, "m1", member.epoch))
    assert "m1" not in c.group.members


def test_a_known_member_joining_again_starts_over():
    c = Cluster({"a": 3})
    c.join("m1", ("a",))
    c.owned["m1"] = {}
    c.epochs["m1"] = 0
    c.beat("m1", topics=("a",))
    assert c.owned["m1"] == {"a": frozenset(range(3))}
    c.check_replay()


ACTIONS = st.lists(st.tuples(st.sampled_from(["join", "leave", "crash", "beat", "grow", "resubscribe"]),
                             st.integers(0, 4), st.sampled_from([("a",), ("b",), ("a", "b"), ("c",)])),
                   min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(ACTIONS, st.sampled_from(["uniform", "range"]))
def test_random_membership_never_gives_a_partition_two_owners(actions, assignor):
    c = Cluster({"a": 4, "b": 3, "c": 1}, assignors=(assignor,))
    for action, n, topics in actions:
        member = f"m{n}"
        c.now += 100
        if action == "join" and member not in c.subs:
            c.join(member, topics)
        elif action == "leave" and member in c.subs:
            c.leave(member)
        elif action == "crash" and member in c.subs:
            c.crash(member)
        elif action == "beat" and member in c.subs:
            c.beat(member)
        elif action == "grow":
            c.topics["b"] = min(c.topics["b"] + 1, 8)
        elif action == "resubscribe" and member in c.subs:
            c.subs[member] = topics
            c.beat(member, topics=topics, full=True)
        c.check_no_double_owner()
    c.check_replay()
    c.settle()
    owned = c.owned_partitions()
    assert len(owned) == len(set(owned))
    assert set(owned) == c.wanted()
    assert c.group.state_name() in ("Stable", "Empty")
