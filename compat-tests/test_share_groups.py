"""Share groups (KIP-932) with a stock client: confluent-kafka 2.16's ShareConsumer (librdkafka 2.16,
ShareGroupHeartbeat / ShareFetch / ShareAcknowledge v1) against a real kbroker process.

- more consumers than partitions: every record delivered once, work spread over the consumers, and
  (implicit acknowledgement) nothing delivered again to a consumer that joins afterwards;
- explicit acknowledgement: RELEASE delivers the record again with delivery count 2, REJECT never;
- a consumer SIGKILLed holding records: another consumer gets them after the lock duration, with
  their delivery count raised.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.timeout(180)

LOCK_MS = 4000  # long enough that a loaded machine does not see locks run out mid-step
KBROKER_OVERRIDES = {"group.coordinator.rebalance.protocols": "classic,consumer,share",
                     "group.share.record.lock.duration.ms": str(LOCK_MS),
                     "group.share.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def ck(kt):
    return kt.require_module("confluent_kafka")


def _topic(kt, kbroker, ck, tag: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = kt.topic_name("share", tag)
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def _consumer(ck, kbroker, group: str, **conf):
    return ck.ShareConsumer({"bootstrap.servers": kbroker.bootstrap, "group.id": group,
                             "fetch.wait.max.ms": 100, **conf})


def _produce(ck, kbroker, topic: str, n: int, partitions: int) -> None:
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def _poll_all(consumers, until, timeout_s: float) -> dict[int, list]:
    """Poll the consumers round-robin until `until(got)` or the timeout; got[i]: (partition, offset,
    value, delivery count) of what consumer i received."""
    got: dict[int, list] = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not until(got):
        for i, c in enumerate(consumers):
            for m in c.poll(0.1) or []:
                assert m.error() is None, m.error()
                got[i].append((m.partition(), m.offset(), m.value(), m.delivery_count()))
    return got


def _settle(consumers, seconds: float = 3.0) -> None:
    """Poll for a while before anything is produced, so each joins and opens its share session
    (a share group starts at `latest`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            assert not c.poll(0.1)


def test_more_consumers_than_partitions_each_record_once(kt, kbroker, ck):
    topic = _topic(kt, kbroker, ck, "spread", 2)
    group = kt.topic_name("share", "spread-group")
    consumers = [_consumer(ck, kbroker, group, **{"max.poll.records": 5}) for _ in range(4)]
    try:
        for c in consumers:
            c.subscribe([topic])
        _settle(consumers)
        _produce(ck, kbroker, topic, 200, 2)
        got = _poll_all(consumers, lambda g: sum(map(len, g.values())) >= 200, 60)
        records = [(p, o) for msgs in got.values() for p, o, _v, _c in msgs]
        assert len(records) == 200 and len(set(records)) == 200  # each record once, none twice
        assert {v for msgs in got.values() for _p, _o, v, _c in msgs} == {f"v{i}".encode() for i in range(200)}
        assert sum(1 for msgs in got.values() if msgs) >= 3  # 4 consumers on 2 partitions: shared work
        assert all(c == 1 for msgs in got.values() for *_x, c in msgs)
        for c in consumers:
            assert not c.poll(0.2)  # implicit acknowledgement: the last records are accepted here
    finally:
        for c in consumers:
            c.close()
    # accepted: a newcomer to the group gets none of them, even after the lock duration
    late = _consumer(ck, kbroker, group)
    try:
        late.subscribe([topic])
        again = _poll_all([late], lambda g: bool(g[0]), LOCK_MS / 1000 + 3)
        assert again[0] == []
    finally:
        late.close()


def test_release_redelivers_and_reject_archives(kt, kbroker, ck):
    topic = _topic(kt, kbroker, ck, "explicit", 1)
    group = kt.topic_name("share", "explicit-group")
    c = _consumer(ck, kbroker, group, **{"share.acknowledgement.mode": "explicit"})
    try:
        c.subscribe([topic])
        _settle([c])
        _produce(ck, kbroker, topic, 3, 1)
        first = []
        deadline = time.monotonic() + 30
        while len(first) < 3 and time.monotonic() < deadline:
            first += [m for m in c.poll(0.2) or [] if m.error() is None]
        assert [(m.offset(), m.delivery_count()) for m in first] == [(0, 1), (1, 1), (2, 1)]
        c.acknowledge(first[0], ck.AcknowledgeType.ACCEPT)
        c.acknowledge(first[1], ck.AcknowledgeType.RELEASE)
        c.acknowledge(first[2], ck.AcknowledgeType.REJECT)
        results = c.commit_sync(30)
        assert all(exc is None for exc in results.values()), results
        again = []
        deadline = time.monotonic() + 20
        while not again and time.monotonic() < deadline:
            again = [m for m in c.poll(0.2) or [] if m.error() is None]
        assert [(m.offset(), m.value(), m.delivery_count()) for m in again] == [(1, b"v1", 2)]
        c.acknowledge(again[0], ck.AcknowledgeType.ACCEPT)
        c.commit_sync(30)
        # nothing else comes: offset 0 accepted, 1 accepted the second time, 2 rejected (archived)
        deadline = time.monotonic() + LOCK_MS / 1000 + 2
        while time.monotonic() < deadline:
            assert not [m for m in c.poll(0.2) or [] if m.error() is None]
    finally:
        c.close()


WORKER = textwrap.dedent("""
    import json, sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "fetch.wait.max.ms": 100,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    while True:  # takes records and never acknowledges them, until it is killed
        for m in c.poll(0.2) or []:
            if m.error() is None:
                print(json.dumps([m.partition(), m.offset()]), flush=True)
""")


def test_a_killed_consumers_records_go_to_another_after_the_lock(kt, kbroker, ck, tmp_path):
    topic = _topic(kt, kbroker, ck, "killed", 1)
    group = kt.topic_name("share", "killed-group")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    worker = subprocess.Popen([sys.executable, str(script), kbroker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    survivor = _consumer(ck, kbroker, group)
    try:
        time.sleep(3)  # the worker joins and opens its share session first
        _produce(ck, kbroker, topic, 5, 1)
        held = [json.loads(worker.stdout.readline()) for _ in range(5)]  # it took all five
        assert sorted(o for _p, o in held) == [0, 1, 2, 3, 4]
        survivor.subscribe([topic])
        os.kill(worker.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        got = _poll_all([survivor], lambda g: len(g[0]) >= 5, 30)[0]
        assert sorted(o for _p, o, _v, _c in got) == [0, 1, 2, 3, 4]
        assert all(c == 2 for *_x, c in got)  # delivered a second time
        assert time.monotonic() - killed_at <= LOCK_MS / 1000 + 10
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait(10)
        survivor.close()


def test_the_work_queue_example(kt, kbroker, ck):
    """examples/work_queue.py: 4 workers on a 2-partition topic; every job done once, the flaky ones
    after one RELEASE (delivery count 2), the poison ones rejected and in the dead-letter topic."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = _topic(kt, kbroker, ck, "jobs", 2)
    group = kt.topic_name("share", "jobs-group")
    dlq = "dlq." + topic
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    admin.create_topics([NewTopic(dlq, 1, 1, config={"errors.deadletterqueue.group.enable": "true"})])[dlq].result(30)
    for key, value in (("share.auto.offset.reset", "earliest"), ("errors.deadletterqueue.topic.name", dlq)):
        cp = subprocess.run([sys.executable, "-m", "kbroker", "configs", "alter", "--bootstrap-server",
                             kbroker.bootstrap, "--group", group, "--add-config", f"{key}={value}"],
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
    producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap})
    jobs = [f"job-{i}" for i in range(60)] + [f"flaky-{i}" for i in range(5)] + [f"poison-{i}" for i in range(3)]
    for i, job in enumerate(jobs):
        producer.produce(topic, value=job.encode(), partition=i % 2)
    assert producer.flush(30) == 0
    run = subprocess.run([sys.executable, "examples/work_queue.py", "--bootstrap", kbroker.bootstrap, "--topic", topic,
                          "--group", group, "--workers", "4", "--idle-exit-s", "5"],
                         capture_output=True, text=True, timeout=150, cwd=kt.REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [ln.split(" ", 5) for ln in run.stdout.splitlines() if ln[:1].isdigit()]
    accepted = sorted(v for _w, kind, _p, _o, _c, v in lines if kind == "accept")
    assert accepted == sorted(j for j in jobs if not j.startswith("poison"))  # each job done once
    assert sorted(v for _w, kind, *_x, v in lines if kind == "release") == [f"flaky-{i}" for i in range(5)]
    assert all(c == "2" for _w, kind, _p, _o, c, v in lines if kind == "accept" and v.startswith("flaky"))
    assert sorted(v for _w, kind, *_x, v in lines if kind == "reject") == [f"poison-{i}" for i in range(3)]
    assert len({w for w, *_x in lines}) >= 2  # the work was shared
    assert run.stdout.rstrip().endswith("done: 65 accepted, 5 released, 3 rejected")
    dead = ck.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": kt.topic_name("share", "dlq-reader"),
                        "auto.offset.reset": "earliest"})
    try:
        dead.subscribe([dlq])
        letters = _poll_all_classic(dead, 3, 30)
    finally:
        dead.close()
    assert sorted(m.value() for m in letters) == [f"poison-{i}".encode() for i in range(3)]
    assert all(dict(m.headers())["__dlq.errors.reason"] == b"rejected" for m in letters)


def _poll_all_classic(consumer, n: int, timeout_s: float) -> list:
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m)
    return got


def test_read_committed_skips_aborted_transactions(kt, kbroker, ck):
    """share.isolation.level=read_committed: the records of an aborted transaction are never
    delivered, those of a committed one are, and the transaction markers are no records at all."""
    topic = _topic(kt, kbroker, ck, "txn", 1)
    group = kt.topic_name("share", "txn-group")
    cp = subprocess.run([sys.executable, "-m", "kbroker", "configs", "alter", "--bootstrap-server", kbroker.bootstrap,
                         "--group", group, "--add-config", "share.isolation.level=read_committed"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    c = _consumer(ck, kbroker, group)
    try:
        c.subscribe([topic])
        _settle([c])
        producer = ck.Producer({"bootstrap.servers": kbroker.bootstrap,
                                "transactional.id": kt.topic_name("share", "txn-id")})
        producer.init_transactions(30)
        for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2", b"a3"], False), ([b"c3"], True)):
            producer.begin_transaction()
            for v in values:
                producer.produce(topic, value=v, partition=0)
            producer.flush(30)
            (producer.commit_transaction if commit else producer.abort_transaction)(30)
        got = _poll_all([c], lambda g: len(g[0]) >= 3, 30)[0]
        assert [v for _p, _o, v, _c in got] == [b"c1", b"c2", b"c3"]
        extra = _poll_all([c], lambda g: False, LOCK_MS / 1000 + 2)[0]  # nothing else, ever
        assert extra == []
    finally:
        c.close()
