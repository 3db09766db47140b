"""Share groups (KIP-932, docs/queues.md) of every share-consumer family against kbroker: the
scenarios written once, run over the families of sharekit.py (`confluent`: confluent-kafka 2.16's
ShareConsumer; `java43`: kafka-clients 4.3's KafkaShareConsumer through java/ShareHarness.java).
Every member is a process of its own speaking sharekit's JSON lines; one broker for the module,
started with share groups on and a short record lock.

- more members than partitions (implicit acknowledgement): every record delivered once, with
  delivery count 1, the work spread over the members; closed, and a newcomer to the group gets
  nothing, even after the lock duration (everything was accepted);
- explicit acknowledgement: ACCEPT ends a record, RELEASE delivers it once more (delivery count 2,
  ACCEPTed then), REJECT never again; the rejected records reach the group's dead-letter topic with
  the `__dlq.errors.*` headers;
- a member SIGKILLed holding records: another member gets them after the lock, delivery count 2;
- `share.isolation.level=read_committed`: an aborted transaction's records are never delivered, a
  committed one's are, in order, and the markers are no records;
- a record RELEASEd every time is delivered 5 times (the delivery count limit), then dead-lettered
  with its count; kbroker's redelivery backoff holds a RELEASEd record back; by_duration starts a
  group at the records of the last duration (CreateTime); a group on a filtered view gets only the
  view's records;
- Java only (librdkafka has no RENEW): RENEW keeps a slow record locked past the lock duration;
- confluent-kafka only (the example is a confluent-kafka program): examples/work_queue.py, a worker
  pool with ACCEPT / RELEASE / REJECT and a dead-letter topic.

Topics, records and group configs are made with confluent-kafka, whichever family consumes.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import sharekit as sk

pytestmark = pytest.mark.timeout(180)

LOCK_MS = 4000  # long enough that a loaded machine does not see locks run out mid-step
LOCK_S = LOCK_MS / 1000
KBROKER_OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
                     "group.share.record.lock.duration.ms": str(LOCK_MS),
                     "group.share.heartbeat.interval.ms": "500"}
DELIVERY_LIMIT = 5  # group.share.delivery.count.limit, Kafka's default
BACKOFF_MS = 1500  # the backoff scenario's share.redelivery.backoff.ms
SETTLE_S = 3.0  # the spread scenario: members join before anything is produced (a share group starts at `latest`)
EARLIEST = {"share.auto.offset.reset": "earliest"}  # the other scenarios: no race with the first join


@pytest.fixture(params=[pytest.param(f, id=f.name) for f in sk.FAMILIES])
def share(kt, kbroker, request, tmp_path):
    """A sharekit.ShareCtx for one family on the module's broker; its members killed at the end."""
    kt.require_module("confluent_kafka")  # topics, records and group configs, for every family
    family = request.param
    family.require(kt, request)
    ctx = sk.ShareCtx(kt, request, tmp_path, family, kbroker)
    yield ctx
    ctx.kill_all()


def _names(kt, share: sk.ShareCtx, tag: str) -> tuple[str, str]:
    return kt.topic_name(f"share-{share.family.name}", tag), kt.topic_name(f"share-{share.family.name}", tag + "-group")


def _by_offset(deliveries: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in deliveries:
        out.setdefault(d["offset"], []).append(d["delivery_count"])
    return out


def test_more_members_than_partitions_each_record_once(kt, share):
    topic, group = _names(kt, share, "spread")
    sk.create_topic(share.bootstrap, topic, 2)
    family = share.family
    members = [share.spawn(group, topic, config=family.spread_config) for _ in range(family.spread_members)]
    sk.wait_for(lambda: all(m.ready for m in members), 60, "the members to subscribe", members)
    sk.watch(members, SETTLE_S)  # each joins and opens its share session
    assert not [m.deliveries for m in members if m.deliveries], "records before any were produced"
    sk.produce(share.bootstrap, topic, [f"v{i}" for i in range(200)], partitions=2, chunk=10)
    sk.wait_for(lambda: sum(len(m.deliveries) for m in members) >= 200, 60, "200 records across the members", members)
    for m in members:
        m.request_stop()
    for m in members:  # implicit acknowledgement: the last records are accepted at the close
        m.close_cleanly()
    closed_at = time.monotonic()
    got = [d for m in members for d in m.deliveries]
    records = [(d["partition"], d["offset"]) for d in got]
    assert len(records) == 200 and len(set(records)) == 200, \
        f"{len(records)} deliveries of {len(set(records))} distinct records (want 200 of 200)"
    assert sorted(records) == sorted((p, o) for p in (0, 1) for o in range(100))
    assert {d["value"] for d in got} == {f"v{i}" for i in range(200)}
    assert all(d["delivery_count"] == 1 for d in got)
    busy = [len(m.deliveries) for m in members]
    assert sum(1 for n in busy if n) >= family.spread_min_busy, f"the work was not shared: records per member {busy}"
    # all accepted: a newcomer to the group gets none of them, even once the lock has run out on
    # anything acquired but not acknowledged
    late = share.spawn(group, topic)
    sk.watch([late], max(3.0, closed_at + LOCK_S + 2 - time.monotonic()))
    assert late.ready and late.deliveries == [], late.describe()
    late.close_cleanly()


def test_explicit_accept_release_reject(kt, share):
    """ACCEPT / RELEASE / REJECT by the record's value (policy `by-value`), committed after each poll;
    the rejected records in the group's dead-letter topic."""
    topic, group = _names(kt, share, "explicit")
    dlq = "dlq." + topic
    sk.create_topic(share.bootstrap, topic, 1)
    sk.create_topic(share.bootstrap, dlq, 1, {"errors.deadletterqueue.group.enable": "true"})
    sk.set_group_config(share.bootstrap, group, {**EARLIEST, "errors.deadletterqueue.topic.name": dlq})
    kinds = ("accept", "release", "reject")
    values = [f"{kinds[i % 3]}-{i}" for i in range(9)]
    released = {i for i, v in enumerate(values) if v.startswith("release")}
    rejected = {i for i, v in enumerate(values) if v.startswith("reject")}
    member = share.spawn(group, topic, "explicit", "by-value")
    sk.produce(share.bootstrap, topic, values)
    sk.wait_for(lambda: len(member.deliveries) >= len(values) + len(released), 60,
                "every record, and the released ones once more", [member])
    sk.watch([member], LOCK_S + 2)  # nothing more: accepted, accepted the second time, or archived
    deliveries = member.deliveries
    firsts = [d for d in deliveries if d["delivery_count"] == 1]
    assert [d["offset"] for d in firsts] == list(range(len(values))), deliveries  # in order, once each
    assert _by_offset(deliveries) == {o: [1, 2] if o in released else [1] for o in range(len(values))}, deliveries
    assert all(d["value"] == values[d["offset"]] for d in deliveries)
    member.close_cleanly()  # and no acknowledgement was refused
    letters = _read_all(share.bootstrap, dlq, len(rejected))
    assert sorted(m.offset() for m in letters) == list(range(len(rejected)))
    assert sorted(m.value().decode() for m in letters) == sorted(values[o] for o in rejected)
    for m in letters:
        headers = {k: v.decode() for k, v in m.headers()}
        offset = int(headers["__dlq.errors.offset"])
        assert offset in rejected and m.value().decode() == values[offset], headers
        assert headers["__dlq.errors.reason"] == "rejected", headers
        assert headers["__dlq.errors.group.id"] == group and headers["__dlq.errors.topic"] == topic, headers
        assert headers["__dlq.errors.partition"] == "0" and headers["__dlq.errors.delivery.count"] == "1", headers


def test_a_killed_members_records_go_to_another_after_the_lock(kt, share):
    topic, group = _names(kt, share, "killed")
    sk.create_topic(share.bootstrap, topic, 1)
    sk.set_group_config(share.bootstrap, group, EARLIEST)
    holder = share.spawn(group, topic, "explicit", "hold")
    sk.produce(share.bootstrap, topic, [f"v{i}" for i in range(5)])
    sk.wait_for(lambda: holder.deliveries, 60, "the holding member to take records", [holder])
    time.sleep(0.3)  # the rest of its poll's lines
    held = sorted(d["offset"] for d in holder.deliveries)
    assert held and all(d["delivery_count"] == 1 for d in holder.deliveries), holder.deliveries
    survivor = share.spawn(group, topic, "implicit")
    sk.wait_for(lambda: survivor.ready, 60, "the survivor to subscribe", [holder, survivor])
    holder.kill()  # SIGKILL: it never acknowledges, nor leaves the group
    killed_at = time.monotonic()
    sk.wait_for(lambda: {d["offset"] for d in survivor.deliveries} >= set(range(5)), LOCK_S + 10,
                "the survivor to get all five records", [survivor])
    assert time.monotonic() - killed_at <= LOCK_S + 10
    time.sleep(0.3)
    got = _by_offset(survivor.deliveries)
    assert sorted(got) == [0, 1, 2, 3, 4] and all(len(c) == 1 for c in got.values()), survivor.deliveries
    assert all(got[o] == [2] for o in held), f"held {held}, survivor got {survivor.deliveries}"  # delivered again
    assert all(got[o] == [1] for o in got if o not in held)  # never handed to the holder: first delivery
    survivor.close_cleanly()


def test_read_committed_skips_aborted_transactions(kt, share):
    """share.isolation.level=read_committed: the records of an aborted transaction are never
    delivered, those of a committed one are, and the transaction markers are no records at all."""
    from confluent_kafka import Producer

    topic, group = _names(kt, share, "txn")
    sk.create_topic(share.bootstrap, topic, 1)
    sk.set_group_config(share.bootstrap, group, {**EARLIEST, "share.isolation.level": "read_committed"})
    member = share.spawn(group, topic)
    producer = Producer({"bootstrap.servers": share.bootstrap, "transactional.id": kt.topic_name("share", "txn-id")})
    producer.init_transactions(30)
    for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2", b"a3"], False), ([b"c3"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v, partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    sk.wait_for(lambda: len(member.deliveries) >= 3, 30, "the three committed records", [member])
    sk.watch([member], LOCK_S + 2)  # nothing else, ever
    assert [d["value"] for d in member.deliveries] == ["c1", "c2", "c3"], member.deliveries
    assert all(d["delivery_count"] == 1 for d in member.deliveries)
    member.close_cleanly()


def test_the_delivery_limit_archives_to_the_dead_letter_topic(kt, share):
    """A record RELEASEd on every delivery is delivered group.share.delivery.count.limit (5) times,
    then archived and dead-lettered with its delivery count and reason; the others are ACCEPTed."""
    topic, group = _names(kt, share, "limit")
    dlq = "dlq." + topic
    sk.create_topic(share.bootstrap, topic, 1)
    sk.create_topic(share.bootstrap, dlq, 1, {"errors.deadletterqueue.group.enable": "true"})
    sk.set_group_config(share.bootstrap, group, {**EARLIEST, "errors.deadletterqueue.topic.name": dlq})
    member = share.spawn(group, topic, "explicit", "by-value")
    sk.produce(share.bootstrap, topic, ["again-0", "ok-1"])
    sk.wait_for(lambda: len(member.deliveries) >= DELIVERY_LIMIT + 1, 60, "the five deliveries of again-0", [member])
    sk.watch([member], LOCK_S + 2)  # no sixth delivery: archived at the limit
    assert _by_offset(member.deliveries) == {0: list(range(1, DELIVERY_LIMIT + 1)), 1: [1]}, member.deliveries
    member.close_cleanly()
    (letter,) = _read_all(share.bootstrap, dlq, 1)
    headers = {k: v.decode() for k, v in letter.headers()}
    assert letter.value() == b"again-0"
    assert (headers["__dlq.errors.offset"], headers["__dlq.errors.delivery.count"]) == ("0", str(DELIVERY_LIMIT)), headers
    assert headers["__dlq.errors.reason"] != "rejected" and headers["__dlq.errors.group.id"] == group, headers
    assert len(_read_all(share.bootstrap, dlq, 2, timeout_s=2)) == 1  # dead-lettered once


def test_redelivery_waits_out_the_groups_backoff(kt, share):
    """kbroker's share.redelivery.backoff.ms: a RELEASEd record comes back no sooner than the backoff."""
    topic, group = _names(kt, share, "backoff")
    sk.create_topic(share.bootstrap, topic, 1)
    sk.set_group_config(share.bootstrap, group, {**EARLIEST, "share.redelivery.backoff.ms": str(BACKOFF_MS)})
    member = share.spawn(group, topic, "explicit", "by-value")
    sk.produce(share.bootstrap, topic, ["release-0"])
    sk.wait_for(lambda: len(member.deliveries) >= 2, 30, "release-0 delivered twice", [member])
    first, second = member.deliveries[:2]
    assert (first["delivery_count"], second["delivery_count"]) == (1, 2), member.deliveries
    waited = second["t"] - first["t"]
    assert BACKOFF_MS / 1000 - 0.2 <= waited < LOCK_S, f"redelivered after {waited:.2f} s"
    member.close_cleanly()


def test_by_duration_starts_at_the_records_of_the_last_duration(kt, share):
    """share.auto.offset.reset=by_duration:PT30S: a new share group starts at the first record not
    older than 30 s (CreateTime), so the older ones are never delivered."""
    topic, group = _names(kt, share, "duration")
    sk.create_topic(share.bootstrap, topic, 1)
    sk.produce(share.bootstrap, topic, ["old-0", "old-1"], timestamp_ms=int(time.time() * 1000) - 120_000)
    sk.produce(share.bootstrap, topic, ["new-2", "new-3"])
    sk.set_group_config(share.bootstrap, group, {"share.auto.offset.reset": "by_duration:PT30S"})
    member = share.spawn(group, topic)
    sk.wait_for(lambda: len(member.deliveries) >= 2, 30, "the two new records", [member])
    sk.watch([member], 2)
    assert [(d["offset"], d["value"]) for d in member.deliveries] == [(2, "new-2"), (3, "new-3")], member.deliveries
    member.close_cleanly()


def test_a_share_group_on_a_view_gets_only_the_views_records(kt, share):
    """A work queue of only the tagged records: the group subscribes to a filtered view
    (view.source / view.filter) and gets exactly the records the view lets through."""
    topic, group = _names(kt, share, "viewsrc")
    view = topic + "-eu"
    sk.create_topic(share.bootstrap, topic, 1)
    sk.create_topic(share.bootstrap, view, 1, {"view.source": topic, "view.filter": "any(eu)"})
    sk.set_group_config(share.bootstrap, group, EARLIEST)
    for i, tags in enumerate(["eu", "us", "eu,vip", "us", "eu"]):
        sk.produce(share.bootstrap, topic, [f"r{i}-{tags}"], headers=[("tags", tags.encode())])
    member = share.spawn(group, view)
    sk.wait_for(lambda: len(member.deliveries) >= 3, 30, "the view's three records", [member])
    sk.watch([member], LOCK_S + 2)  # nothing else, and nothing again (the gaps were acknowledged)
    assert [(d["offset"], d["value"]) for d in member.deliveries] == [(0, "r0-eu"), (2, "r2-eu,vip"), (4, "r4-eu")]
    member.close_cleanly()


@pytest.mark.parametrize("share", [pytest.param(f, id=f.name) for f in sk.FAMILIES if f.name == "java43"],
                         indirect=True)
def test_renew_keeps_a_slow_record_locked_java_only(kt, share):
    """Java only (librdkafka 2.16 has no RENEW): a member RENEWs a "slow" record for 6 s, longer than
    the 4 s lock, then ACCEPTs it; the other member never gets it and it is never delivered again."""
    topic, group = _names(kt, share, "renew")
    sk.create_topic(share.bootstrap, topic, 1)
    sk.set_group_config(share.bootstrap, group, EARLIEST)
    slow = share.spawn(group, topic, "explicit", "by-value")
    sk.produce(share.bootstrap, topic, ["slow-0"])
    sk.wait_for(lambda: slow.deliveries, 30, "the slow record", [slow])
    other = share.spawn(group, topic, "explicit", "by-value")
    sk.wait_for(lambda: other.ready, 60, "the other member to subscribe", [slow, other])
    sk.watch([slow, other], LOCK_S + 4)  # past the lock: renewed, so it stays with the first member
    assert other.deliveries == [], other.deliveries
    assert {d["offset"] for d in slow.deliveries} == {0} and len(slow.deliveries) >= 2, slow.deliveries
    assert all(d["delivery_count"] == 1 for d in slow.deliveries), slow.deliveries  # never given back
    slow.close_cleanly()
    sk.watch([other], LOCK_S + 1)  # accepted at the end: nobody gets it
    assert other.deliveries == [], other.deliveries
    other.close_cleanly()


def _read_all(bootstrap: str, topic: str, n: int, timeout_s: float = 30) -> list:
    """The first `n` records of partition 0 (a plain assigned consumer, no group)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
    finally:
        consumer.close()
    return got


def test_the_work_queue_example_confluent_only(kt, kbroker):
    """confluent-kafka only: examples/work_queue.py (a confluent-kafka program), 4 workers on a
    2-partition topic; every job done once, the flaky ones after one RELEASE (delivery count 2), the
    poison ones rejected and in the dead-letter topic. The group configs are set the way
    docs/queues.md says, with `kbroker configs alter --group`."""
    ck = kt.require_module("confluent_kafka")
    topic = sk.create_topic(kbroker.bootstrap, kt.topic_name("share", "jobs"), 2)
    group = kt.topic_name("share", "jobs-group")
    dlq = sk.create_topic(kbroker.bootstrap, "dlq." + topic, 1, {"errors.deadletterqueue.group.enable": "true"})
    for key, value in (("share.auto.offset.reset", "earliest"), ("errors.deadletterqueue.topic.name", dlq)):
        cp = subprocess.run([sys.executable, "-m", "kbroker", "configs", "alter", "--bootstrap-server",
                             kbroker.bootstrap, "--group", group, "--add-config", f"{key}={value}"],
                            check=False, capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap})
    jobs = [f"job-{i}" for i in range(60)] + [f"flaky-{i}" for i in range(5)] + [f"poison-{i}" for i in range(3)]
    for i, job in enumerate(jobs):
        producer.produce(topic, value=job.encode(), partition=i % 2)
    assert producer.flush(30) == 0
    run = subprocess.run([sys.executable, "examples/work_queue.py", "--bootstrap", kbroker.bootstrap, "--topic", topic,
                          "--group", group, "--workers", "4", "--idle-exit-s", "5"],
                         check=False, capture_output=True, text=True, timeout=150, cwd=kt.REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [ln.split(" ", 5) for ln in run.stdout.splitlines() if ln[:1].isdigit()]
    accepted = sorted(v for _w, kind, _p, _o, _c, v in lines if kind == "accept")
    assert accepted == sorted(j for j in jobs if not j.startswith("poison"))  # each job done once
    assert sorted(v for _w, kind, *_x, v in lines if kind == "release") == [f"flaky-{i}" for i in range(5)]
    assert all(c == "2" for _w, kind, _p, _o, c, v in lines if kind == "accept" and v.startswith("flaky"))
    assert sorted(v for _w, kind, *_x, v in lines if kind == "reject") == [f"poison-{i}" for i in range(3)]
    assert len({w for w, *_x in lines}) >= 2  # the work was shared
    assert run.stdout.rstrip().endswith("done: 65 accepted, 5 released, 3 rejected")
    letters = _read_all(kbroker.bootstrap, dlq, 3)
    assert sorted(m.value() for m in letters) == [f"poison-{i}".encode() for i in range(3)]
    assert all(dict(m.headers())["__dlq.errors.reason"] == b"rejected" for m in letters)
