"""kbroker.share.partition against a deliberately simple reference model.

`Model` keeps one entry per offset in a dict and does everything by walking offsets, one at a
time, in the obvious way. A Hypothesis state machine drives both with the same random events
(acquire by several members, acknowledgements valid and invalid, time passing, expiry, members
leaving, the log start moving, offset resets, snapshot→restore) and checks that they agree on every
observable after every step — each offset's state, delivery count, holder, lock deadline and
backoff, the start and end offsets, every Outcome (error codes, acquired / archived / expired /
released records) and the queries — plus the invariants KIP-932 promises, checked on the real
state machine alone.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from kbroker.errors import ErrorCode
from kbroker.share.partition import (
    ArchiveReason,
    Outcome,
    PersisterStateBatch,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareSnapshot,
)

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
MEMBERS = ["m1", "m2", "m3"]
LIMIT = ArchiveReason.DELIVERY_LIMIT
REJECTED = ArchiveReason.REJECTED


# -------------------------------------------------------------------------------------------------
# the reference model: one dict entry per in-flight offset


@dataclass
class Rec:
    state: int
    count: int
    member: str | None = None
    deadline: int = 0
    avail: int = 0


class Model:
    def __init__(self, cfg: ShareConfig, start: int) -> None:
        self.cfg = cfg
        self.start = start
        self.end = start - 1
        self.recs: dict[int, Rec] = {}
        self.clear_reports()

    def clear_reports(self) -> None:
        self.acquired: set[tuple[int, int]] = set()
        self.archived: set[tuple[int, int, str]] = set()
        self.expired: set[tuple[int, str, int]] = set()
        self.released: set[tuple[int, str, int]] = set()

    def backoff(self, count: int) -> int:
        if self.cfg.redelivery_backoff_ms == 0:
            return 0
        wait = self.cfg.redelivery_backoff_ms
        for _ in range(count - 1):
            wait *= 2
        return min(wait, self.cfg.redelivery_backoff_max_ms)

    def give_back(self, o: int, r: Rec, at: int) -> None:
        if r.count >= self.cfg.delivery_count_limit:
            self.recs[o] = Rec(ARCHIVED, r.count)
            self.archived.add((o, r.count, LIMIT))
        else:
            self.recs[o] = Rec(AVAILABLE, r.count, avail=at + self.backoff(r.count))

    def expire(self, now: int) -> None:
        for o in sorted(self.recs):
            r = self.recs[o]
            if r.state == ACQUIRED and r.deadline <= now:
                self.expired.add((o, r.member, r.count))
                self.give_back(o, r, r.deadline)

    def move_start(self) -> None:
        while self.start <= self.end and self.recs[self.start].state in (ACKNOWLEDGED, ARCHIVED):
            del self.recs[self.start]
            self.start += 1

    def acquire(self, member: str, first: int, last: int, max_records: int, now: int) -> None:
        self.expire(now)
        budget = max_records
        for o in range(max(first, self.start), min(last, self.end) + 1):
            if budget <= 0:
                break
            r = self.recs[o]
            if r.state == AVAILABLE and r.avail <= now:
                if r.count >= self.cfg.delivery_count_limit:
                    self.recs[o] = Rec(ARCHIVED, r.count)
                    self.archived.add((o, r.count, LIMIT))
                else:
                    self.recs[o] = Rec(ACQUIRED, r.count + 1, member, now + self.cfg.record_lock_duration_ms)
                    self.acquired.add((o, r.count + 1))
                    budget -= 1
        if budget > 0 and last > self.end:
            new_first = max(first, self.end + 1)
            pending = [o for o, r in self.recs.items() if r.state in (AVAILABLE, ACQUIRED)]
            window_from = min(pending) if pending else new_first
            new_last = min(last, new_first + budget - 1, window_from + self.cfg.max_record_locks - 1)
            if new_last >= new_first:
                if not pending:
                    self.recs.clear()
                    self.start = new_first
                for o in range(self.end + 1, new_first):
                    if pending:
                        self.recs[o] = Rec(ARCHIVED, 0)
                for o in range(new_first, new_last + 1):
                    self.recs[o] = Rec(ACQUIRED, 1, member, now + self.cfg.record_lock_duration_ms)
                    self.acquired.add((o, 1))
                self.end = new_last
        self.move_start()

    def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]], now: int) -> ErrorCode:
        prev = -1
        for first, last, types in batches:
            if first > last or first <= prev or not types:
                return ErrorCode.invalid_request
            if len(types) > 1 and len(types) != last - first + 1:
                return ErrorCode.invalid_request
            if any(t not in (0, 1, 2, 3, 4) for t in types):
                return ErrorCode.invalid_request
            prev = last
        saved = copy.deepcopy(self.__dict__)
        self.expire(now)
        for first, last, types in batches:
            if last < self.start:
                continue
            if last > self.end:
                self.__dict__.update(saved)
                return ErrorCode.invalid_record_state
            for o in range(max(first, self.start), last + 1):
                t = types[0] if len(types) == 1 else types[o - first]
                r = self.recs[o]
                if r.state != ACQUIRED or r.member != member:
                    self.__dict__.update(saved)
                    return ErrorCode.invalid_record_state
                if t == 1:
                    self.recs[o] = Rec(ACKNOWLEDGED, r.count)
                elif t == 2:
                    self.give_back(o, r, now)
                elif t == 3:
                    self.recs[o] = Rec(ARCHIVED, r.count)
                    self.archived.add((o, r.count, REJECTED))
                elif t == 0:
                    self.recs[o] = Rec(ARCHIVED, r.count)
                else:
                    r.deadline = now + self.cfg.record_lock_duration_ms
        self.move_start()
        return ErrorCode.none

    def release_member(self, member: str, now: int) -> None:
        self.expire(now)
        for o in sorted(self.recs):
            r = self.recs[o]
            if r.state == ACQUIRED and r.member == member:
                self.released.add((o, member, r.count))
                self.give_back(o, r, now)
        self.move_start()

    def reset_start(self, offset: int, now: int) -> ErrorCode:
        saved = copy.deepcopy(self.__dict__)
        self.expire(now)
        if any(r.state == ACQUIRED for r in self.recs.values()):
            self.__dict__.update(saved)
            return ErrorCode.non_empty_group
        self.recs.clear()
        self.start, self.end = offset, offset - 1
        return ErrorCode.none

    def advance_log_start(self, lso: int, now: int) -> None:
        self.expire(now)
        if lso > self.start:
            for o in range(self.start, min(lso, self.end + 1)):
                self.recs[o] = Rec(ARCHIVED, self.recs[o].count)
            self.end = max(self.end, lso - 1)
            for o in range(self.start, lso):
                self.recs.pop(o, None)
            self.start = lso
        self.move_start()

    def snapshot(self) -> dict[int, tuple[int, int]]:
        return {o: (AVAILABLE if r.state == ACQUIRED else r.state, r.count) for o, r in self.recs.items()}

    def restore(self) -> None:
        self.recs = {o: Rec(s, c) for o, (s, c) in self.snapshot().items()}
        self.move_start()

    def view(self, now: int) -> dict[int, tuple]:
        return {o: _rec_view(r.state, r.count, r.member, r.deadline, r.avail, now) for o, r in self.recs.items()}

    def lag(self, leo: int) -> int:
        done = sum(1 for o, r in self.recs.items() if o < leo and r.state in (ACKNOWLEDGED, ARCHIVED))
        return max(leo - self.start, 0) - done

    def next_fetch_offset(self, now: int) -> int:
        m = copy.deepcopy(self)
        m.expire(now)
        for o in range(m.start, m.end + 1):
            if m.recs[o].state == AVAILABLE and m.recs[o].avail <= now:
                return o
        return m.end + 1


def _rec_view(state: int, count: int, member, deadline: int, avail: int, now: int) -> tuple:
    if state == ACQUIRED:
        return (state, count, member, deadline)
    if state == AVAILABLE:
        return (state, count, avail if avail > now else 0)
    return (state, count)


def impl_view(sp: SharePartition, now: int) -> dict[int, tuple]:
    out = {}
    for b in sp.batches:
        for o in range(b.first_offset, b.last_offset + 1):
            out[o] = _rec_view(int(b.state), b.delivery_count, b.member_id, b.lock_deadline_ms, b.available_at_ms, now)
    return out


def expand(outcome: Outcome) -> tuple[set, set, set, set]:
    acquired = {(o, r.delivery_count) for r in outcome.acquired for o in range(r.first_offset, r.last_offset + 1)}
    archived = {
        (o, r.delivery_count, r.reason) for r in outcome.archived for o in range(r.first_offset, r.last_offset + 1)
    }
    expired = {
        (o, r.member_id, r.delivery_count) for r in outcome.expired for o in range(r.first_offset, r.last_offset + 1)
    }
    released = {
        (o, r.member_id, r.delivery_count) for r in outcome.released for o in range(r.first_offset, r.last_offset + 1)
    }
    return acquired, archived, expired, released


def disjoint_sorted(ranges) -> bool:
    return all(a.last_offset < b.first_offset for a, b in itertools.pairwise(ranges)) and all(
        r.first_offset <= r.last_offset for r in ranges
    )


# -------------------------------------------------------------------------------------------------
# the state machine

configs = st.builds(
    ShareConfig,
    record_lock_duration_ms=st.integers(5, 150),
    max_record_locks=st.integers(1, 40),
    delivery_count_limit=st.integers(1, 5),
    redelivery_backoff_ms=st.sampled_from([0, 1, 3, 10, 20]),
    redelivery_backoff_max_ms=st.sampled_from([0, 5, 40, 1000]),
)
ack_type = st.sampled_from([0, 1, 1, 1, 2, 2, 3, 4])


class ShareMachine(RuleBasedStateMachine):
    @initialize(cfg=configs, start=st.integers(0, 5))
    def setup(self, cfg: ShareConfig, start: int) -> None:
        self.now = 0
        self.sp = SharePartition.initial(start, cfg)
        self.model = Model(cfg, start)
        self.completed: set[int] = set()  # offsets acknowledged or moved past: never delivered again
        self.max_count: dict[int, int] = {}

    # -- helpers

    def apply(self, result: tuple[SharePartition, Outcome], model_error: ErrorCode = ErrorCode.none) -> Outcome:
        before = self.sp
        self.sp, outcome = result
        assert outcome.error == model_error, (outcome, model_error)
        if not outcome.ok:
            assert self.sp is before, "a failed event changed the state"
            assert outcome == Outcome(outcome.error)
        got = expand(outcome)
        want = (self.model.acquired, self.model.archived, self.model.expired, self.model.released)
        assert got == want, (outcome, want)
        for field_ in (outcome.acquired, outcome.archived, outcome.expired, outcome.released):
            assert disjoint_sorted(field_), field_
        self.model.clear_reports()
        self.check_agreement()
        self.check_delivery_rules(before, outcome)
        return outcome

    def check_agreement(self) -> None:
        sp, m = self.sp, self.model
        assert (sp.start_offset, sp.end_offset) == (m.start, m.end)
        assert impl_view(sp, self.now) == m.view(self.now)

    def check_delivery_rules(self, before: SharePartition, outcome: Outcome) -> None:
        cfg = self.sp.config
        for r in outcome.acquired:
            assert 1 <= r.delivery_count <= cfg.delivery_count_limit, r
            for o in range(r.first_offset, r.last_offset + 1):
                assert o not in self.completed, f"offset {o} was delivery-complete and was acquired again"
                prior = before.batch_at(o)
                if prior is not None:  # not new: it was available, or its lock had run out
                    assert prior.state is RecordState.AVAILABLE or (
                        prior.state is RecordState.ACQUIRED and prior.lock_deadline_ms <= self.now
                    ), (o, prior)
        for b in self.sp.batches:
            for o in range(b.first_offset, b.last_offset + 1):
                assert b.delivery_count >= self.max_count.get(o, 0), f"delivery count of {o} went down"
                self.max_count[o] = b.delivery_count
                if b.state is RecordState.ACKNOWLEDGED:
                    self.completed.add(o)
        self.completed.update(range(before.start_offset, self.sp.start_offset))

    # -- events

    @rule(data=st.data(), member=st.sampled_from(MEMBERS), max_records=st.integers(0, 12))
    def acquire(self, data, member: str, max_records: int) -> None:
        lo = self.sp.next_fetch_offset(self.now)
        first = data.draw(st.integers(lo - 3, lo + 3), label="first")
        last = first + data.draw(st.integers(0, 14), label="length")
        self.model.acquire(member, first, last, max_records, self.now)
        self.apply(self.sp.acquire(member, first, last, max_records, self.now))

    def holds_locks(self) -> bool:
        return any(b.state is RecordState.ACQUIRED and b.lock_deadline_ms > self.now for b in self.sp.batches)

    @precondition(holds_locks)
    @rule(data=st.data(), other=st.integers(0, 3))
    def acknowledge_held(self, data, other: int) -> None:
        """Ranges a member holds, in order, one type or one per offset; now and then sent by
        another member instead."""
        holders = sorted(
            {b.member_id for b in self.sp.batches if b.state is RecordState.ACQUIRED and b.lock_deadline_ms > self.now}
        )
        holder = data.draw(st.sampled_from(holders or MEMBERS), label="holder")
        member = data.draw(st.sampled_from(MEMBERS), label="sender") if other == 0 else holder
        held = [b for b in self.sp.batches if b.state is RecordState.ACQUIRED and b.member_id == holder]
        batches = []
        prev = -1
        for b in held[: data.draw(st.integers(1, 3), label="how many")]:
            first = data.draw(st.integers(max(b.first_offset, prev + 1), b.last_offset + 1), label="first")
            if first > b.last_offset:
                continue
            last = data.draw(st.integers(first, b.last_offset), label="last")
            batches.append((first, last, data.draw(self.types_for(first, last), label="types")))
            prev = last
        self.do_acknowledge(member, batches)

    @staticmethod
    def types_for(first: int, last: int):
        n = last - first + 1
        return st.one_of(st.lists(ack_type, min_size=1, max_size=1), st.lists(ack_type, min_size=n, max_size=n))

    @rule(data=st.data(), member=st.sampled_from(MEMBERS), how_many=st.integers(0, 3), corrupt=st.integers(0, 9))
    def acknowledge_anything(self, data, member: str, how_many: int, corrupt: int) -> None:
        """Ordered batches anywhere around the window (other members' records, available or done
        ones, below the start, past the end), sometimes made malformed on purpose."""
        batches = []
        at = self.sp.start_offset - 4
        for _ in range(how_many):
            first = at + data.draw(st.integers(0, 6), label="skip")
            last = first + data.draw(st.integers(0, 5), label="length")
            batches.append((first, last, data.draw(self.types_for(first, last), label="types")))
            at = last + 1
        if batches and corrupt == 0:
            first, last, types = batches[-1]
            batches[-1] = data.draw(
                st.sampled_from([
                    (last, first - 1, types),  # first > last
                    (first, last, []),  # no types
                    (first, last, [*types, 1, 1]),  # a list of the wrong length
                    (first, last, [*types[:-1], data.draw(st.sampled_from([-1, 5, 9]))]),  # unknown type
                    (batches[0][0], last, types),  # overlaps / reorders the earlier batches
                ]),
                label="corruption",
            )
        self.do_acknowledge(member, batches)

    def do_acknowledge(self, member: str, batches) -> None:
        want = self.model.acknowledge(member, batches, self.now)
        self.apply(self.sp.acknowledge(member, batches, self.now), want)

    @rule(dt=st.sampled_from([1, 2, 5, 10, 25, 70]))
    def advance_time(self, dt: int) -> None:
        self.now += dt

    @rule()
    def advance_to_next_event(self) -> None:
        """Jump to the next lock deadline or backoff end, where off-by-one rules show."""
        t = self.sp.next_event_ms(self.now)
        if t is not None and t > self.now:
            self.now = t

    @rule()
    def expire(self) -> None:
        self.model.expire(self.now)
        self.model.move_start()
        self.apply(self.sp.expire(self.now))

    @rule(member=st.sampled_from(MEMBERS))
    def release_member(self, member: str) -> None:
        self.model.release_member(member, self.now)
        self.apply(self.sp.release_member(member, self.now))

    @rule(delta=st.integers(0, 6), gate=st.integers(0, 5))
    def advance_log_start(self, delta: int, gate: int) -> None:
        if gate:  # rare: it wipes the head of the window
            return
        lso = self.sp.start_offset + delta
        self.model.advance_log_start(lso, self.now)
        self.apply(self.sp.advance_log_start(lso, self.now))

    @rule(offset=st.integers(0, 40), gate=st.integers(0, 7))
    def reset_start(self, offset: int, gate: int) -> None:
        if gate:  # rare: it forgets the window
            return
        want = self.model.reset_start(offset, self.now)
        self.apply(self.sp.reset_start(offset, self.now), want)
        if want == ErrorCode.none:
            self.completed.clear()
            self.max_count.clear()
            self.completed.update(range(offset))

    @rule()
    def snapshot_restore(self) -> None:
        snap = self.sp.snapshot()
        per_offset = {
            o: (b.delivery_state, b.delivery_count)
            for b in snap.state_batches
            for o in range(b.first_offset, b.last_offset + 1)
        }
        assert snap.start_offset == self.model.start
        assert per_offset == self.model.snapshot()
        assert all(b.delivery_state in (0, 2, 4) for b in snap.state_batches)
        assert all(
            (a.delivery_state, a.delivery_count) != (b.delivery_state, b.delivery_count)
            for a, b in itertools.pairwise(snap.state_batches)
        ), "snapshot batches not merged"
        restored = SharePartition.restore(snap, self.sp.config)
        self.model.restore()
        self.sp = restored
        self.check_agreement()
        assert restored.snapshot() == snap
        assert restored.acquired_count == 0

    # -- queries and invariants

    @invariant()
    def queries_agree(self) -> None:
        if not hasattr(self, "sp"):
            return
        sp, m = self.sp, self.model
        for leo in (m.start - 1, m.start, m.end + 1, m.end + 5):
            assert sp.lag(leo) == m.lag(leo)
        assert sp.next_fetch_offset(self.now) == m.next_fetch_offset(self.now)
        counts = sp.counts()
        states = [r.state for r in m.recs.values()]
        assert counts == (states.count(0), states.count(1), states.count(2), states.count(4))
        assert sp.acquired_count == counts.acquired

    @invariant()
    def window_is_canonical(self) -> None:
        if not hasattr(self, "sp"):
            return
        sp = self.sp
        assert sp.acquired_count <= sp.config.max_record_locks
        assert sp.end_offset - sp.start_offset + 1 <= sp.config.max_record_locks
        expected = sp.start_offset
        for a in sp.batches:
            assert a.first_offset == expected and a.last_offset >= a.first_offset, sp.batches
            expected = a.last_offset + 1
            assert (a.member_id is not None) == (a.state is RecordState.ACQUIRED)
            assert a.delivery_count <= sp.config.delivery_count_limit or a.state is not RecordState.ACQUIRED
        assert expected == sp.end_offset + 1
        if sp.batches:
            assert not sp.batches[0].state.is_terminal, "the start offset did not move over a done head"
        for a, b in itertools.pairwise(sp.batches):
            key = lambda x: (x.state, x.delivery_count, x.member_id, x.lock_deadline_ms, x.available_at_ms)
            assert key(a) != key(b), "neighbouring batches not merged"

    @invariant()
    def next_event_is_a_real_deadline(self) -> None:
        if not hasattr(self, "sp"):
            return
        t = self.sp.next_event_ms(self.now)
        locks = [b.lock_deadline_ms for b in self.sp.batches if b.state is RecordState.ACQUIRED]
        waits = [b.available_at_ms for b in self.sp.batches if b.state is RecordState.AVAILABLE]
        assert t == min(locks + [w for w in waits if w > self.now], default=None)


ShareMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestShareMachine = ShareMachine.TestCase



# the same checks over op sequences with chosen weights: acquisitions and acknowledgements of held
# records dominate, so records go round several deliveries, backoffs and expiries per example
OPS = ["acquire"] * 5 + ["ack_held"] * 5 + ["ack_any"] * 2 + ["time"] * 2 + ["next_event"] * 2 + [
    "expire", "release", "snapshot", "log_start", "reset",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cfg=configs, start=st.integers(0, 5), ops=st.lists(st.sampled_from(OPS), min_size=5, max_size=80))
def test_random_op_sequences(data, cfg: ShareConfig, start: int, ops: list[str]) -> None:
    m = ShareMachine()
    m.setup(cfg, start)
    draw = data.draw
    for op in ops:
        if op == "acquire":
            m.acquire(data, draw(st.sampled_from(MEMBERS)), draw(st.integers(0, 12)))
        elif op == "ack_held":
            if m.holds_locks():
                m.acknowledge_held(data, draw(st.integers(0, 5)))
        elif op == "ack_any":
            m.acknowledge_anything(data, draw(st.sampled_from(MEMBERS)), draw(st.integers(0, 3)), draw(st.integers(0, 4)))
        elif op == "time":
            m.advance_time(draw(st.sampled_from([1, 2, 5, 10, 25, 70])))
        elif op == "next_event":
            m.advance_to_next_event()
        elif op == "expire":
            m.expire()
        elif op == "release":
            m.release_member(draw(st.sampled_from(MEMBERS)))
        elif op == "snapshot":
            m.snapshot_restore()
        elif op == "log_start":
            m.advance_log_start(draw(st.integers(0, 6)), 0)
        else:
            m.reset_start(draw(st.integers(0, 40)), 0)
        m.queries_agree()
        m.window_is_canonical()
        m.next_event_is_a_real_deadline()


# a snapshot written by another leader (Kafka's coordinator merges updates, so batches can leave
# holes) restores the same way in the model's terms: holes are never-delivered records
def test_restore_fills_holes_as_never_delivered() -> None:
    snap = ShareSnapshot(10, (PersisterStateBatch(12, 13, 2, 1), PersisterStateBatch(15, 15, 0, 3)))
    sp = SharePartition.restore(snap, ShareConfig())
    assert (sp.start_offset, sp.end_offset) == (10, 15)
    assert impl_view(sp, 0) == {
        10: (0, 0, 0), 11: (0, 0, 0), 12: (2, 1), 13: (2, 1), 14: (0, 0, 0), 15: (0, 3, 0),
    }
